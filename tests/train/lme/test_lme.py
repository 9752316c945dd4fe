"""LongMemEval: the streaming reader, the protocol on the production path, and the ``lme`` command."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from runtime.encoders import HashEmbedder
from runtime.errors import ValidationError
from runtime.scoring.baselines import LongestUserScorer, RecencyScorer
from train.eval.cli import main
from train.eval.lme import lme_oracle, replay_question
from train.lme.folds import fold_of, groups
from train.lme.protocol import capacity_for, lme_turns
from train.lme.reader import iter_lme, parse_lme_date

EMB = HashEmbedder(dim=32)


def item(qid: str = "q1", qtype: str = "single-session-user", *, long: bool = False,
         sessions: list[list[dict[str, Any]]] | None = None, ids: list[str] | None = None,
         answer: str = "answer_1") -> dict[str, Any]:
    """Three sessions; the answer is the user's second turn of session 2."""
    s = sessions or [
        [{"role": "user", "content": "Can you recommend a sci-fi novel?"},
         {"role": "assistant", "content": "Try Dune by Frank Herbert; it is a classic. " * 3}],
        [{"role": "user", "content": "I need help planning a trip."},
         {"role": "assistant", "content": "Sure, where to?"},
         {"role": "user", "content": "By the way, I adopted a beagle named Max last month.", "has_answer": True},
         {"role": "assistant", "content": "Congratulations on Max!"}],
        [{"role": "user", "content": "x" * 20_000 if long else "What is the capital of Peru?"},
         {"role": "assistant", "content": "Lima."},
         {"role": "user", "content": "   "}],
    ]
    return {"question_id": qid, "question_type": qtype, "question": "What is my dog's name?", "answer": "Max",
            "question_date": "2023/06/01 (Thu) 10:00", "answer_session_ids": [answer],
            "haystack_dates": ["2023/05/01 (Mon) 09:00", "2023/05/10 (Wed) 18:30", "2023/05/20 (Sat) 07:47"],
            "haystack_session_ids": ids or ["sharegpt_a", "answer_1", "ultrachat_b"], "haystack_sessions": s}


def write(path: Path, items: list[Any], *, gz: bool = False) -> Path:
    text = json.dumps(items)
    if gz:
        with gzip.open(path, "wt", encoding="utf-8") as fh:
            fh.write(text)
    else:
        path.write_text(text)
    return path


def test_reader_reads_the_layout_unchanged_json_and_gzip(tmp_path: Path) -> None:
    for gz in (False, True):
        (q,) = list(iter_lme(write(tmp_path / ("d.json.gz" if gz else "d.json"), [item()], gz=gz)))
        assert q.n_turns == 9 and q.evidence == ("D2:3",) and q.answerable
        assert [t.turn_id for t in q.sessions[1].turns] == ["D2:1", "D2:2", "D2:3", "D2:4"]
        assert q.sessions[1].date == parse_lme_date("2023/05/10 (Wed) 18:30") and q.sessions[1].session_id == "answer_1"
    (abs_q,) = list(iter_lme(write(tmp_path / "a.json", [item("q2_abs")])))
    assert not abs_q.answerable


def test_reader_streams_and_names_the_bad_item(tmp_path: Path) -> None:
    bad = item("q3")
    del bad["question_date"]
    got = []
    with pytest.raises(ValidationError, match=r"d\.json item 2: missing keys \['question_date'\]"):
        for q in iter_lme(write(tmp_path / "d.json", [item("q1"), item("q2"), bad])):
            got.append(q.question_id)
    assert got == ["q1", "q2"]  # validated and yielded one by one, before the bad one is read
    trunc = tmp_path / "t.json"
    trunc.write_text(json.dumps([item()])[:-200])
    with pytest.raises(ValidationError, match="t.json"):
        list(iter_lme(trunc))
    with pytest.raises(ValidationError, match="no LongMemEval file"):
        list(iter_lme(tmp_path / "nope.json"))


def test_protocol_on_the_production_path(tmp_path: Path) -> None:
    (q,) = list(iter_lme(write(tmp_path / "d.json", [item(long=True)])))
    assert capacity_for(q, 0.2) == 2 and capacity_for(q, 0.05) == 0
    turns = lme_turns(q)
    assert [t.dialog_role for t in turns[:2]] == ["user", "agent"] and turns[2].session_id.startswith("s2_")
    # a 20,000-character turn is kept as an excerpt, a blank turn is skipped: the stream never fails
    run = replay_question(q, lme_oracle(q), EMB, 0.2)
    assert run.kept[-1] != "D3:3" and "D2:3" in run.kept and run.hits == 1 and run.violations == 0
    assert run.K == 2 and len(run.kept) <= 2
    recent = replay_question(q, RecencyScorer(), EMB, 0.2)
    assert recent.hits == 0 and recent.kept == ["D3:1", "D3:2"]
    longest_user = replay_question(q, LongestUserScorer(), EMB, 0.2)
    assert "D3:1" in longest_user.kept  # the 20k-character user turn


def test_a_token_budget_keeps_what_fits_in_the_tokens_not_a_count_of_turns(tmp_path: Path) -> None:
    from runtime.retention import approx_tokens
    from train.eval.lme import token_budget_for
    from train.stream import stored_texts

    (q,) = list(iter_lme(write(tmp_path / "d.json", [item()])))
    turns = lme_turns(q)
    total = sum(approx_tokens(t) for t in stored_texts(turns) if t)  # a blank turn is never stored
    assert token_budget_for(turns, 1.0) == total and token_budget_for(turns, 0.5) == (total + 1) // 2
    with pytest.raises(ValueError):
        token_budget_for(turns, 0.0)
    run = replay_question(q, LongestUserScorer(), EMB, 0.5, unit="tokens")
    assert run.unit == "tokens" and run.label == "0.5 tokens" and run.violations == 0
    kept_tokens = sum(approx_tokens(t) for t, turn in zip(stored_texts(turns), turns, strict=True)
                      if turn.memory_id in run.kept)
    assert 0 < kept_tokens <= run.K
    by_turns = replay_question(q, LongestUserScorer(), EMB, 0.5)
    assert by_turns.label == "0.5" and by_turns.kept != run.kept  # a long turn costs more than a short one


def test_lme_command_writes_the_documented_schema(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = write(tmp_path / "d.json.gz", [item("q1"), item("q2", "knowledge-update"), item("q3_abs")], gz=True)
    out = tmp_path / "out.json"
    rc = main(["lme", str(f), "--capacities", "0.2", "0.5", "--policies", "recency", "oracle", "--out", str(out),
               "--encoder", "hash", "--cache", str(tmp_path / "cache"), "--no-progress"])
    assert rc == 0
    data = json.loads(out.read_text())
    assert len(data["runs"]) == 3 * 2 * 2
    r0 = data["runs"][0]
    assert {"policy", "capacity", "sample_id", "kept"} <= set(r0) and r0["kept"][0].startswith("D")
    s = data["summary"]
    assert s["oracle"]["0.2"]["recall"] == 1.0 and s["oracle"]["0.2"]["n_questions"] == 2  # _abs left out
    assert s["oracle"]["0.2"]["by_type"]["knowledge-update"] == 1.0
    assert "knowledge" not in capsys.readouterr().err
    assert list((tmp_path / "cache").rglob("shard_*.npz"))  # embeddings were cached
    bad = main(["lme", str(tmp_path / "missing.json"), "--out", str(out), "--encoder", "hash", "--no-progress"])
    assert bad == 2


def test_folds_keep_questions_that_share_an_evidence_session_together(tmp_path: Path) -> None:
    a = item("qa", ids=["x1", "answer_1", "x2"])
    b = item("qb", ids=["answer_1", "y1", "y2"])  # qa's evidence session is a filler of qb
    c = item("qc", ids=["z1", "answer_9", "z2"], answer="answer_9")
    qs = list(iter_lme(write(tmp_path / "d.json", [a, b, c])))
    g = groups(qs)
    assert g["qa"] == g["qb"] != g["qc"]
    for k in (2, 3):
        f = fold_of(g, k)
        assert f["qa"] == f["qb"] and set(f.values()) <= set(range(k))


def test_cached_rows_of_two_row_configurations_never_mix(tmp_path: Path) -> None:
    import numpy as np

    from train.conversation_rows import RowConfig
    from train.embedcache import CachedEmbedder
    from train.lme.rows import CONFIG_FILE, check_row_config, ensure_rows, load_rows, rows_path

    f = write(tmp_path / "q.json", [item("q1"), item("q2")])
    emb = CachedEmbedder(HashEmbedder(32), None)
    uniform = RowConfig(capacities=(0.2,), held="uniform", held_decisions=1)
    ensure_rows(f, emb, tmp_path / "rows", uniform, progress=False)
    assert json.loads((tmp_path / "rows" / CONFIG_FILE).read_text())["held"] == "uniform"
    assert len(load_rows(rows_path(tmp_path / "rows", "q2")).y) > 0
    with pytest.raises(ValidationError, match="held: 'uniform' there, 'evidence' asked"):
        ensure_rows(f, emb, tmp_path / "rows", RowConfig(capacities=(0.2,)), progress=False)
    ensure_rows(f, emb, tmp_path / "rows", uniform, progress=False)  # the same configuration resumes
    legacy = tmp_path / "legacy"  # rows cached before the stamp: held decisions after evidence sessions
    legacy.mkdir()
    np.savez(legacy / "q0.npz", x=np.zeros(1))
    with pytest.raises(ValidationError, match="held"):
        check_row_config(legacy, uniform)
    check_row_config(legacy, RowConfig(capacities=(0.2,)))
    assert json.loads((legacy / CONFIG_FILE).read_text())["held"] == "evidence"
    check_row_config(legacy, RowConfig(capacities=(0.2,), held_decisions=9))  # no draws in these rows
