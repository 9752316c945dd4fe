"""The README's agent example runs as written, against the real encoder and the shipped model."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.docs.examples import block, needs_encoder, run_block

ROOT = Path(__file__).resolve().parents[1]



def test_readme_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    needs_encoder()
    code = re.search(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    assert code is not None, "README lost its python example"
    monkeypatch.chdir(tmp_path)
    exec(compile(code.group(1), "README.md", "exec"), {"__name__": "readme"})
    out = capsys.readouterr().out
    assert "kept" in out and (tmp_path / "agent.sqlite").exists()
    assert "'trigger': 'session_end:" in out  # the policy retained by itself, no retain() call
    assert "retain(" not in code.group(1)
    # the card number in the example was redacted before it reached the database file
    assert b"4111 1111 1111 1111" not in (tmp_path / "agent.sqlite").read_bytes()


@pytest.mark.postgres_only
def test_readme_fleet_example_runs_on_postgres(store_target, monkeypatch: pytest.MonkeyPatch,  # type: ignore[no-untyped-def]
                                               capsys: pytest.CaptureFixture[str]) -> None:
    needs_encoder()
    code = block("fleet").code
    monkeypatch.setenv("MEMIR_STORE_URL", store_target("fleet"))
    exec(compile(code, "docs/postgres.md", "exec"), {"__name__": "readme"})
    assert capsys.readouterr().out.strip() == "['The Orion offsite moved to 12 June']"


def test_readme_batch_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert run_block("batch", tmp_path, monkeypatch, capsys) == "50 20 0"
    assert (tmp_path / "scored.parquet").exists() and not (tmp_path / "scored.parquet.quarantine.jsonl").exists()


def test_readme_async_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert run_block("async", tmp_path, monkeypatch, capsys) == "Ticket 12: refund for order 8812"


def test_readme_mem0_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    out = run_block("mem0", tmp_path, monkeypatch, capsys)
    assert out == "Vegetarian; allergic to peanuts and cashews ['ADD', 'UPDATE']"


def test_readme_langgraph_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    assert run_block("langgraph", tmp_path, monkeypatch, capsys).splitlines() == [
        "seat -> Alice now prefers window seats", "['diet']", "archive Alice prefers aisle seats",
        "[('bob', 'assistant', 'prefs')]"]


def test_readme_recall_seeds_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert run_block("recall-seeds", tmp_path, monkeypatch, capsys).splitlines() == [
        "2 3 True", "3 0", "['archive', 'working', 'working']"]
    assert b"hunter2" not in (tmp_path / "agent.sqlite").read_bytes()


def test_readme_types_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("sklearn")
    assert run_block("types", tmp_path, monkeypatch, capsys).splitlines() == [
        "12 ['warranty', 'arrives'] The printer is still under warranty, asked for a repair", "12 12"]


def test_readme_enrich_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    assert run_block("enrich", tmp_path, monkeypatch, capsys).splitlines() == [
        "0.895 True", "True frustrated ['order:8812']"]


def test_readme_roles_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert run_block("roles", tmp_path, monkeypatch, capsys).splitlines() == [
        "[('billing', 1.0), ('technical', 1.0)]", "[('technical', 1.11), ('billing', 1.0)]", "0.44"]


def test_readme_tiers_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert run_block("tiers", tmp_path, monkeypatch, capsys).splitlines() == [
        "{'memories': 3, 'vector_bytes': 1164, 'formats': {'int8': 3}}",
        "Order 8812 was refunded on 3 May. working",
        "access:recall 2"]


def test_readme_summaries_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    assert run_block("summaries", tmp_path, monkeypatch, capsys).splitlines() == [
        "The Orion offsite is on 12 June in Lisbon, budget 40k EUR. Dana Kim books the venue; the confirmation code "
        "is LX-2291.", "2 2", "summary:mon", "['summary']"]


def test_readme_lineage_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    lines = run_block("lineage", tmp_path, monkeypatch, capsys).splitlines()
    assert lines[0] == "['The user travels to Norway in May']"
    assert lines[1] == "2 1"
    assert lines[2] == "True True"
    assert lines[3] == "True"


def test_readme_extracted_candidates_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert run_block("extracted", tmp_path, monkeypatch, capsys).splitlines() == [
        "The user commutes on the 9:40 train | derived_inference agent travel-bot",
        "The user dislikes crowded carriages | derived_inference agent travel-bot"]


def test_readme_acting_as_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    assert run_block("acting", tmp_path, monkeypatch, capsys).splitlines() == [
        "support billing T-7 calm True", "['billing', 'billing', 'literature']"]


def test_readme_freshness_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    assert run_block("freshness", tmp_path, monkeypatch, capsys).splitlines() == [
        "Rotate the API keys every 30 days. [1.0, 0.63]", "unreferenced a day 0.15 0.5"]


def test_readme_experiments_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    from runtime.cli import main

    lines = run_block("ab", tmp_path, monkeypatch, capsys).splitlines()
    assert lines[0] == "{'typed-vs-untyped': 'typed'}"
    assert lines[1].endswith(" True") and lines[2] == "untyped is worse than typed on resolution"
    args = block("ab", "bash").code.split("#")[0].split()
    assert args[:3] == ["memir", "ab", "report"]
    assert main(args[1:]) == 0
    assert "untyped − typed" in capsys.readouterr().out


def test_every_test_the_seed_table_names_exists() -> None:
    """The seed-capability table (docs/seeds.md) cites a test per row; each must be a test of the suite."""
    table = (ROOT / "docs" / "seeds.md").read_text()
    cited = re.findall(r"\| (tests/[\w/]+\.py)::(test_\w+) \|", table)
    assert len(cited) >= 55
    for path, name in cited:
        source = (ROOT / path).read_text()
        assert re.search(rf"^(async )?def {name}\(", source, re.M), f"{path}::{name} is not a test there"
    statuses = re.findall(r"\| (done|partial: [^|]+|missing: [^|]+) \|$", table, re.M)
    assert len(statuses) == len(cited)                     # every row says what is missing, if anything
