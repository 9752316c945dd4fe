"""Tests of the LoCoMo-layout reader and the retention-protocol simulator (synthetic data only)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from runtime.errors import ValidationError
from train.locomo.protocol import capacity_for, evidence_counts
from train.locomo.reader import load_locomo, parse_locomo, parse_session_datetime, repair_evidence_id

DEV = Path(__file__).resolve().parents[4] / "shared" / "data" / "locomo" / "locomo-dev.json"


def _turn(speaker: str, sess: int, n: int, text: str, caption: str | None = None) -> dict[str, Any]:
    t: dict[str, Any] = {"speaker": speaker, "dia_id": f"D{sess}:{n}", "text": text}
    if caption:
        t["blip_caption"] = caption
    return t


def _sample() -> list[dict[str, Any]]:
    """Two sessions, 10 turns (N=10); invented text, malformed evidence on purpose."""
    s1 = [_turn("Ann", 1, 1, "hi"), _turn("Bob", 1, 2, "hello there friend"),
          _turn("Ann", 1, 3, "I adopted a dog named Rex last week", caption="a brown dog"),
          _turn("Bob", 1, 4, "nice"), _turn("Ann", 1, 5, "ok")]
    s2 = [_turn("Bob", 2, 1, "yo"), _turn("Ann", 2, 2, "we moved to Lisbon in May this year"),
          _turn("Bob", 2, 3, "cool"), _turn("Ann", 2, 4, "bye"), _turn("Bob", 2, 5, "see you")]
    return [{
        "sample_id": "syn-1",
        "conversation": {"speaker_a": "Ann", "speaker_b": "Bob",
                         "session_2": s2, "session_2_date_time": "3:00 pm on 9 June, 2023",
                         "session_1": s1, "session_1_date_time": "1:56 pm on 8 May, 2023"},
        "qa": [
            {"question": "What pet?", "answer": "a dog", "evidence": ["D1:03"], "category": 4},
            {"question": "Pet and city?", "answer": "x", "evidence": ["D1:3; D2:2"], "category": 1},
            {"question": "When moved?", "answer": "May", "evidence": ["D:2:2"], "category": 2},
            {"question": "Trap", "adversarial_answer": "no", "evidence": ["D1:1"], "category": 5},
            {"question": "Ghost", "answer": "?", "evidence": ["D9:9", "D"], "category": 3},
        ],
    }]


@pytest.mark.parametrize("raw, ids, reason", [
    ("D1:3", ("D1:3",), None),
    ("D30:05", ("D30:5",), "normalised"),
    ("D:11:26", ("D11:26",), "normalised"),
    ("D8:6; D9:17", ("D8:6", "D9:17"), "split"),
    (" D8:6 ;D9:17 ", ("D8:6", "D9:17"), "split"),
    ("D", (), "unparseable"),
])
def test_repair_evidence_id(raw: str, ids: tuple[str, ...], reason: str | None) -> None:
    assert repair_evidence_id(raw) == (ids, reason)


def test_parse_orders_sessions_repairs_evidence_and_reports() -> None:
    convs, repairs = parse_locomo(_sample())
    (c,) = convs
    assert [s.number for s in c.sessions] == [1, 2]
    assert c.n_turns == 10 and [t.order for t in c.turns] == list(range(10))
    assert c.turns[2].full_text == "I adopted a dog named Rex last week [image: a brown dog]"
    assert c.turns[0].full_text == "hi"
    assert [q.evidence for q in c.qa] == [("D1:3",), ("D1:3", "D2:2"), ("D2:2",), ("D1:1",), ()]
    reasons = sorted(r.reason for r in repairs)
    assert reasons == ["normalised", "normalised", "split", "unknown turn D9:9", "unparseable"]
    assert all(r.sample_id == "syn-1" for r in repairs)
    assert c.qa[3].answer == "no"  # adversarial_answer is kept as the answer


def test_invalid_layout_names_sample_and_field() -> None:
    data = _sample()
    bad = copy.deepcopy(data)
    del bad[0]["conversation"]["session_1"][1]["text"]
    bad[0]["qa"][0]["category"] = 9
    with pytest.raises(ValidationError) as e:
        parse_locomo(bad, source="x.json")
    msg = str(e.value)
    assert "syn-1.conversation.session_1[1].text" in msg and "syn-1.qa[0].category" in msg
    assert len(e.value.problems) == 2
    with pytest.raises(ValidationError, match="list of conversations"):
        parse_locomo({"sample_id": "x"})


def test_load_locomo_reads_file_and_rejects_bad_json(tmp_path: Path) -> None:
    good = tmp_path / "a.json"
    good.write_text(json.dumps(_sample()), encoding="utf-8")
    convs, _ = load_locomo(good)
    assert convs[0].sample_id == "syn-1"
    broken = tmp_path / "b.json"
    broken.write_text("{not json", encoding="utf-8")
    with pytest.raises(ValidationError, match="not JSON"):
        load_locomo(broken)
    with pytest.raises(ValidationError, match="no such file"):
        load_locomo(tmp_path / "missing.json")


def test_session_datetime_and_capacity() -> None:
    assert parse_session_datetime("1:56 pm on 8 May, 2023").hour == 13
    assert parse_session_datetime("yesterday") is None
    (c,), _ = parse_locomo(_sample())
    assert capacity_for(c, 0.25) == 3  # 2.5 rounds half up, not to even
    assert capacity_for(c, 0.2) == 2
    with pytest.raises(ValidationError):
        capacity_for(c, 0.0)


def test_evidence_counts_cover_categories_1_to_4() -> None:
    (c,), _ = parse_locomo(_sample())
    assert evidence_counts(c) == {"D1:3": 2, "D2:2": 2}  # the cat-5 trap turn is not counted


@pytest.mark.skipif(not DEV.exists(), reason="LoCoMo dev split not present")
def test_dev_split_loads_with_repairs() -> None:
    convs, repairs = load_locomo(DEV)
    assert len(convs) == 5 and len(repairs) == 4
