"""Your own chat logs: the documented format, errors that name the file and line, the converters,
and the rows a labelled log gives."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from runtime.encoders import HashEmbedder
from runtime.errors import ValidationError
from tests.train.lme.test_lme import item, write
from train.conversation_rows import RowConfig
from train.logs import convert, iter_logs, log_rows, main

CONV = {"id": "c1", "messages": [
    {"role": "user", "content": "My order 1234 arrived broken", "time": "2024-05-01T09:00:00Z"},
    {"role": "assistant", "content": "Sorry to hear that! A replacement is on its way."},
    {"role": "user", "content": "By the way, I moved to Lyon last week.", "time": "2024-05-09T18:30:00Z"},
    {"role": "assistant", "content": "Noted, thanks."}],
    "keep": [1], "questions": [{"question": "Where does the customer live?", "evidence": [3]}]}


def jsonl(path: Path, objs: list[Any]) -> Path:
    path.write_text("".join((o if isinstance(o, str) else json.dumps(o)) + "\n" for o in objs))
    return path


def test_documented_example_parses(tmp_path: Path) -> None:
    (log,) = list(iter_logs(jsonl(tmp_path / "a.jsonl", [CONV])))
    assert [t.memory_id for t in log.turns] == ["m1", "m2", "m3", "m4"]
    assert log.evidence == {"m1", "m3"} and log.questions == ("Where does the customer live?",)
    assert [t.dialog_role for t in log.turns] == ["user", "agent", "user", "agent"]
    # a gap of more than 30 minutes starts a new session
    assert log.turns[0].session_id == log.turns[1].session_id != log.turns[2].session_id


@pytest.mark.parametrize("line, match", [
    ("{not json", r"b\.jsonl:2: not valid JSON"),
    (json.dumps({**CONV, "id": "c2", "extra": 1}), r"b\.jsonl:2: unknown keys \['extra'\]"),
    (json.dumps({**CONV, "id": "c2", "keep": [9]}), r"b\.jsonl:2: keep must be a list of message numbers 1\.\.4"),
    (json.dumps({**CONV, "id": "c2", "messages": [{"role": "bot", "content": "x"}]}), r"b\.jsonl:2: messages\[0\]"),
    (json.dumps(CONV), r"b\.jsonl:2: id 'c1' repeats line 1"),
    (json.dumps({"id": "c3", "messages": [{"role": "user", "content": "hi"}]}), r"b\.jsonl:2: .*no labels"),
    (json.dumps({**CONV, "id": "c4", "messages": [{"role": "user", "content": "a", "time": "2024-05-02T00:00:00Z"},
                                                  {"role": "user", "content": "b", "time": "2024-05-01T00:00:00Z"}],
                 "keep": [1], "questions": []}), r"time goes backwards"),
])
def test_a_bad_line_is_an_error_naming_file_and_line(tmp_path: Path, line: str, match: str) -> None:
    f = jsonl(tmp_path / "b.jsonl", [CONV, line])
    with pytest.raises(ValidationError, match=match):
        list(iter_logs(f))


def test_check_command_reports_counts_and_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(jsonl(tmp_path / "a.jsonl", [CONV]))]) == 0
    assert json.loads(capsys.readouterr().out) == {"conversations": 1, "messages": 4, "labelled turns": 2,
                                                   "questions": 1}
    assert main(["check", str(tmp_path / "missing.jsonl")]) == 2
    assert "missing.jsonl" in capsys.readouterr().err


def test_convert_openai_and_longmemeval(tmp_path: Path) -> None:
    src = jsonl(tmp_path / "openai.jsonl", [{"messages": [{"role": "system", "content": "Be brief."},
                                                          {"role": "user", "content": "Hi"}]}, CONV])
    assert convert("openai", src, tmp_path / "o.jsonl") == 2
    logs = list(iter_logs(tmp_path / "o.jsonl", require_labels=False))
    assert [g.conversation_id for g in logs] == ["openai-1", "c1"] and logs[1].evidence == {"m1", "m3"}
    with pytest.raises(ValidationError, match=r"bad\.jsonl:1"):
        convert("openai", jsonl(tmp_path / "bad.jsonl", [{"messages": [{"role": "x"}]}]), tmp_path / "x.jsonl")
    assert not (tmp_path / "x.jsonl").exists()  # nothing half-written

    lme = write(tmp_path / "d.json", [item("q1"), item("q2_abs")])
    assert convert("lme", lme, tmp_path / "l.jsonl") == 2
    q1, q2 = iter_logs(tmp_path / "l.jsonl", require_labels=False)
    assert q1.evidence == {"m5"} and q1.questions == ("What is my dog's name?",)  # D2:3 is message 5
    assert "beagle" in q1.turns[4].text and q2.evidence == {"m5"}  # the data's has_answer, as given


def test_a_labelled_log_gives_training_rows(tmp_path: Path) -> None:
    conv = {"id": "long", "messages": [{"role": "user" if i % 2 == 0 else "assistant",
                                        "content": f"message {i} about topic {i % 7}"} for i in range(40)]}
    conv["messages"][10]["content"] = "By the way, I adopted a beagle named Max."
    conv["keep"] = [11]
    (rows,) = log_rows([jsonl(tmp_path / "a.jsonl", [conv])], HashEmbedder(32),
                       RowConfig(capacities=(0.1,), policies=("oracle",)))
    assert rows.conversation_id == "long" and rows.y.sum() >= 1
    assert {rows.item_ids[i] for i in range(len(rows.y)) if rows.y[i] > 0} == {"m11"}
