"""The evaluation CLI: the locomo command's JSON schema and table, --help, and input validation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.train.locomo_data import tiny_locomo as tiny  # type: ignore[import-not-found]
from train.eval.cli import main


def _file(tmp_path: Path) -> Path:
    second = tiny()
    second["sample_id"] = "t-2"
    second["qa"][0]["evidence"] = ["D1:2; D2:3"]  # malformed (two ids in one string): repaired
    p = tmp_path / "convs.json"
    p.write_text(json.dumps([tiny(), second]))
    return p


def test_locomo_command_writes_the_documented_schema(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out.json"
    rc = main(["locomo", str(_file(tmp_path)), "--capacities", "0.25", "0.5", "--policies", "recency", "oracle",
               "--out", str(out), "--encoder", "hash", "--no-progress", "--k", "3"])
    assert rc == 0
    data = json.loads(out.read_text())
    assert len(data["runs"]) == 2 * 2 * 2
    for r in data["runs"]:
        assert {"policy", "capacity", "sample_id", "kept", "recall", "by_category",
                "retrieval_recall_at_k"} <= set(r)
        assert set(r["by_category"]) == {"1", "2", "3", "4"} and len(r["kept"]) <= r["K"]
    cell = data["summary"]["oracle"]["0.25"]
    assert {"recall", "by_category", "retrieval_recall_at_k", "n_pairs"} <= set(cell)
    assert cell["n_pairs"] == 3 + 4  # t-2's repaired evidence adds a pair
    t1 = next(r for r in data["runs"] if r["sample_id"] == "t-1" and r["policy"] == "oracle" and r["capacity"] == 0.25)
    assert t1["recall"] == pytest.approx(2 / 3)
    assert data["summary"]["recency"]["0.25"]["recall"] <= cell["recall"]
    table = capsys.readouterr().out
    assert "oracle" in table and "cat4" in table


def test_help_and_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["--help"], ["locomo", "--help"], ["locomo-loo", "--help"], ["synthetic", "--help"], ["all", "--help"]):
        with pytest.raises(SystemExit) as e:
            main(argv)
        assert e.value.code == 0
    assert "Example" in capsys.readouterr().out
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"sample_id": "x", "conversation": {"speaker_a": "A"}}]))
    assert main(["locomo", str(bad), "--out", str(tmp_path / "o.json"), "--encoder", "hash", "--no-progress"]) == 2
    assert "session_N" in capsys.readouterr().err
