"""The `memir` CLI on real files: summaries and --json, help with examples on every flag, and every
failure one line on stderr with its own exit code, leaving the directory as it was."""

from __future__ import annotations

import gzip
import hashlib
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import runtime.cli as cli
from runtime.cli import EXIT, build_parser, main
from runtime.encoders import HashEmbedder
from runtime.store import MemoryStore

COMMANDS = ["inspect", "retain", "explain", "snapshot", "score", "reembed", "refresh", "migrate", "migrate-schema", "ab",
            "encoder"]


def _tiny_model(tmp_path: Path, dim: int = 64) -> Path:
    """A randomly initialised utility model for the hash encoder, exported with the real exporter."""
    torch = pytest.importorskip("torch")
    from utilitynet.export import export_onnx
    from utilitynet.features import spec_for
    from utilitynet.model import UtilityNet, UtilityNetConfig

    torch.manual_seed(0)
    spec = spec_for(dim, HashEmbedder(dim).encoder_id)
    net = UtilityNet(UtilityNetConfig.for_spec(spec, hidden=(8,), embedding_proj=4))
    return export_onnx(net, spec, tmp_path / "model.onnx")


def listing(d: Path) -> dict[str, str]:
    """Every file under ``d`` with its sha256: "the directory is unchanged" means this is equal."""
    return {str(p.relative_to(d)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(d.rglob("*"))
            if p.is_file()}


@pytest.mark.parametrize("cmd", COMMANDS)
def test_help_has_an_example_and_every_flag_is_explained(cmd: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main([cmd, "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "example:" in out and f"memir {cmd}" in out
    sub = next(a for a in build_parser()._subparsers._group_actions if a.dest == "cmd").choices[cmd]  # type: ignore[union-attr]
    for action in sub._actions:
        assert action.help, f"memir {cmd}: {action.option_strings or action.dest} has no help text"


def test_version_and_console_script() -> None:
    r = subprocess.run([sys.executable, "-m", "runtime.cli", "--version"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.startswith("memir (memir-runtime)")
    r = subprocess.run([sys.executable, "-m", "runtime.cli", "--help"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and all(c in r.stdout for c in COMMANDS)


@pytest.fixture
def db(store_target, monkeypatch: pytest.MonkeyPatch) -> Path:  # type: ignore[no-untyped-def]
    """A store with two users, as a file or a PostgreSQL URL (the CLI takes either)."""
    monkeypatch.setattr(cli, "_open_store", lambda path, create, config=None: MemoryStore.open(
        path, embedder=HashEmbedder(64), create=create, config=config))
    path = store_target("agent.sqlite")
    with MemoryStore.open(path, embedder=HashEmbedder(64)) as store:
        s = store.scope(user_id="u42")
        s.write("Always answer in French", flags=["core_instruction"])
        s.write_many([f"fact {i} about project orion" for i in range(20)])
        store.scope(user_id="other").write("someone else's memory")
    return path


def test_inspect_retain_explain_snapshot(db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = _tiny_model(tmp_path)
    assert main(["inspect", str(db), "--capacity", "10"]) == 0
    summary = capsys.readouterr().out
    assert summary.startswith(f"{db}: 22 memories in 2 scope(s)") and "user u42/default: 21 (fill 210%)" in summary
    assert main(["inspect", str(db), "--capacity", "10", "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["memories"] == 22 and stats["fill"]["u42/default"] == 2.1

    # a dry run reports exactly what the real run then does
    args = ["retain", str(db), "--user", "u42", "--capacity", "5", "--model", str(model), "--json"]
    assert main([*args, "--dry-run"]) == 0
    dry = json.loads(capsys.readouterr().out)
    assert dry["dry_run"] and len(dry["kept"]) == 5 and len(dry["archived"]) == 16
    assert main(["inspect", str(db), "--json"]) == 0 and json.loads(capsys.readouterr().out)["memories"] == 22
    assert main(args) == 0
    real = json.loads(capsys.readouterr().out)
    assert sorted(real["kept"]) == sorted(dry["kept"]) and sorted(real["archived"]) == sorted(dry["archived"])
    assert main(["retain", str(db), "--user", "u42", "--capacity", "3", "--model", str(model), "--dry-run",
                 "--verbose"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("DRY RUN") and "kept 3 of 5" in out and out.count("archive") >= 2

    # explain takes memory ids and the decision ids inspect prints
    assert main(["inspect", str(db)]) == 0
    assert f"decision {real['decision_id']}" in capsys.readouterr().out
    assert main(["explain", str(db), real["decision_id"]]) == 0
    assert "kept 5" in capsys.readouterr().out
    assert main(["explain", str(db), real["kept"][0], "--json"]) == 0
    assert "kept" in json.loads(capsys.readouterr().out)["summary"]

    snap = tmp_path / "u42.jsonl"
    assert main(["snapshot", str(db), "--user", "u42", "-o", str(snap)]) == 0
    assert capsys.readouterr().out.strip() == f"wrote 21 records to {snap}"
    lines = [json.loads(x) for x in snap.read_text().splitlines()]
    assert len(lines) == 21 and all(x["provenance"]["user_id"] == "u42" for x in lines)


def test_inspect_shows_the_tiers_and_compact_reencodes_the_cold_one(db: Path, tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    model = _tiny_model(tmp_path)
    assert main(["retain", str(db), "--user", "u42", "--capacity", "5", "--model", str(model), "--json"]) == 0
    capsys.readouterr()
    assert main(["inspect", str(db)]) == 0
    out = capsys.readouterr().out
    # 64-dim vectors: float32 256 B each, int8 68 B
    assert "tier working: 6 memories, vectors 1.5 KB (float32 6)" in out
    assert "tier archive: 16 memories, vectors 1.1 KB (int8 16)" in out and "cold tier format: int8" in out
    assert main(["inspect", str(db), "--json"]) == 0
    t = json.loads(capsys.readouterr().out)["tiers"]
    assert t["archive"] == {"memories": 16, "vector_bytes": 16 * 68, "formats": {"int8": 16}}
    assert main(["compact", str(db), "--cold-vectors", "float16"]) == 0
    assert capsys.readouterr().out.startswith("re-encoded 16 vectors; archived vectors are now float16")
    assert main(["inspect", str(db)]) == 0
    out = capsys.readouterr().out
    assert "(float16 16)" in out and "16 archived vectors in another format: memir compact DB" in out
    assert main(["compact", str(db), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["reencoded"] == 16
    with pytest.raises(SystemExit) as e:  # argparse's usage error: exit 2, one line, no traceback
        main(["compact", str(db), "--cold-vectors", "int4"])
    assert e.value.code == 2 and "invalid choice: 'int4'" in capsys.readouterr().err


def _fails(args: list[str], code: str, match: str, capsys: pytest.CaptureFixture[str], where: Path) -> None:
    before = listing(where)
    assert main(args) == EXIT[code], args
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("memir: ") and "Traceback" not in err, err
    assert match in err, err
    assert listing(where) == before, f"{args} changed the directory"


def test_every_failure_is_one_line_a_distinct_code_and_changes_nothing(db: Path, tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    model = _tiny_model(tmp_path)
    (tmp_path / "notes.txt").write_text("hello")
    foreign = tmp_path / "other.db"
    c = sqlite3.connect(foreign)
    c.execute("create table t(a)")
    c.commit()
    c.close()
    cases = [
        (["inspect", str(tmp_path / "agent.sqlit")], "missing", "no store at"),          # a typo creates nothing
        (["retain", str(tmp_path / "nope.sqlite"), "--user", "u42", "--capacity", "3"], "missing", "no store at"),
        (["inspect", str(tmp_path / "notes.txt")], "invalid", "not a memir store"),
        (["inspect", str(foreign)], "invalid", "another application"),
        (["retain", str(db), "--user", "ghost", "--capacity", "3", "--model", str(model)], "unknown", "no user 'ghost'"),
        (["retain", str(db), "--user", "u42", "--capacity", "3", "--rules", "rulez.yaml"], "missing",
         "no rules file at rulez.yaml"),
        (["explain", str(db), "mem_does_not_exist"], "unknown", "no memory or decision"),
        (["snapshot", str(db), "--user", "u42", "-o", str(tmp_path / "no" / "dir" / "x.jsonl")], "missing",
         "output directory"),
        (["score", str(tmp_path / "nope.jsonl"), "-o", str(tmp_path / "o.jsonl")], "missing", "no dump at"),
        (["score", "\n", "-o", str(tmp_path / "o.jsonl")], "missing", "no dump at \\n"),  # control chars escaped
        (["score", str(tmp_path / "notes.txt"), "-o", str(tmp_path / "no" / "o.jsonl")], "missing",
         "output directory"),
        (["retain", str(db), "--user", "u42", "--capacity", "3", "--model", str(tmp_path / "nomodel.onnx")],
         "environment", "no utility model"),
    ]
    for args, code, match in cases:
        _fails(args, code, match, capsys, tmp_path)
    assert not (tmp_path / "agent.sqlit").exists()
    assert main(["inspect", str(tmp_path / "fresh.sqlite"), "--create"]) == 0  # explicit creation
    assert (tmp_path / "fresh.sqlite").exists()


def test_infeasible_rules_exit_7_or_overflow(db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = _tiny_model(tmp_path)
    rules = tmp_path / "rules.yaml"
    rules.write_text("must_keep:\n  - {name: facts, when: {content_regex: 'fact'}}\n")
    _fails(["retain", str(db), "--user", "u42", "--capacity", "3", "--model", str(model), "--rules", str(rules),
            "--on-infeasible", "raise"], "infeasible", "", capsys, tmp_path)
    assert main(["retain", str(db), "--user", "u42", "--capacity", "3", "--model", str(model), "--rules", str(rules),
                 "--on-infeasible", "overflow", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["overflow"] == {"capacity": 17.0} and len(d["kept"]) == 20  # the 20 must-keep facts, over capacity


def test_debug_shows_the_traceback(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", str(db), "mem_nope", "--debug"]) == EXIT["unknown"]
    assert "Traceback" in capsys.readouterr().err


def test_score_quarantines_bad_records_and_loses_nothing(db: Path, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    model = _tiny_model(tmp_path)
    dump = tmp_path / "dump.jsonl"
    with MemoryStore.open(db, embedder=HashEmbedder(64)) as store:
        n = store.admin_export(dump)
    with open(dump, "a") as fh:
        fh.write('{"content": "", "provenance": {"user_id": "x"}}\n')       # empty content
        fh.write("this is not json\n")
        fh.write(json.dumps({"content": "needs an embedding", "provenance": {"user_id": "new"}}) + "\n")
        fh.write(json.dumps({"content": "bad vector", "provenance": {"user_id": "new"},
                             "embedding": [float("nan")] * 64}) + "\n")
    out = tmp_path / "scored.jsonl"
    rc = main(["score", str(dump), "-o", str(out), "--capacity", "3", "--model", str(model),
               "--encoder", "hash", "--quiet", "--json"])
    assert rc == 0
    report = json.loads(capsys.readouterr().out)
    assert report["records"] == n + 4 and report["valid"] == n + 1 and report["quarantined"] == 3
    assert report["embedded"] == 1
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(rows) == n + 1                                   # every valid record has a row
    q = [json.loads(x) for x in Path(str(out) + ".quarantine.jsonl").read_text().splitlines()]
    assert [x["line"] for x in q] == [n + 1, n + 2, n + 4] and all(x["error"] for x in q)
    assert sum(r["keep"] for r in rows if r["user_id"] == "u42") == 3          # capacity per scope
    assert all(np.isfinite(r["utility"]) for r in rows)

    # the same dump gzip-compressed (any name) and with a byte-order mark scores the same
    body = dump.read_bytes()
    (tmp_path / "dump.jsonl.gz").write_bytes(gzip.compress(b"\xef\xbb\xbf" + body))
    assert main(["score", str(tmp_path / "dump.jsonl.gz"), "-o", str(tmp_path / "gz.jsonl"), "--capacity", "3",
                 "--model", str(model), "--encoder", "hash", "--quiet", "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["valid"] == n + 1 and again["quarantined"] == 3
    assert not list(tmp_path.glob(".*.tmp")) and not list(tmp_path.glob("*.tmp"))


def test_score_reads_parquet_and_refuses_corrupt_or_empty_files(db: Path, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    model = _tiny_model(tmp_path)
    with MemoryStore.open(db, embedder=HashEmbedder(64)) as store:
        assert store.scope(user_id="u42").snapshot(tmp_path / "u42.parquet") == 21
    out = tmp_path / "scored.jsonl"
    assert main(["score", str(tmp_path / "u42.parquet"), "-o", str(out), "--capacity", "4",
                 "--model", str(model), "--encoder", "hash", "--quiet", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["valid"] == 21 and report["quarantined"] == 0
    assert sum(json.loads(x)["keep"] for x in out.read_text().splitlines()) == 4

    (tmp_path / "bad.parquet").write_bytes(b"PAR1 this is not parquet")
    _fails(["score", str(tmp_path / "bad.parquet"), "-o", str(tmp_path / "o.jsonl")], "invalid",
           "not a readable Parquet file", capsys, tmp_path)
    pq.write_table(pa.table({"record": pa.array([], pa.string())}), tmp_path / "empty.parquet")
    _fails(["score", str(tmp_path / "empty.parquet"), "-o", str(tmp_path / "o.jsonl"), "--model", str(model),
            "--encoder", "hash", "--quiet"], "invalid", "no valid record", capsys, tmp_path)


def test_score_now_makes_a_run_repeatable_and_a_bad_time_is_a_usage_error(db: Path, tmp_path: Path,
                                                                           capsys: pytest.CaptureFixture[str]) -> None:
    model = _tiny_model(tmp_path)
    dump = tmp_path / "dump.jsonl"
    with MemoryStore.open(db, embedder=HashEmbedder(64)) as store:
        store.admin_export(dump)
    args = ["score", str(dump), "--capacity", "3", "--model", str(model), "--encoder", "hash", "--quiet"]
    for name, now in (("a.jsonl", "2026-06-01T00:00:00Z"), ("b.jsonl", "2026-06-01T02:00:00+02:00"),
                      ("later.jsonl", "2027-06-01T00:00:00Z")):
        assert main([*args, "-o", str(tmp_path / name), "--now", now]) == 0
    a, b, later = ((tmp_path / n).read_text() for n in ("a.jsonl", "b.jsonl", "later.jsonl"))
    assert a == b                  # the same instant, written in two zones: the same scores, byte for byte
    assert a != later              # a year on, freshness moved the utilities
    capsys.readouterr()
    for bad, why in (("yesterday", "not an ISO 8601 time"), ("2026-06-01T00:00:00", "no time zone")):
        with pytest.raises(SystemExit) as e:  # argparse's usage error: exit 2, no traceback
            main([*args, "-o", str(tmp_path / "x.jsonl"), "--now", bad])
        assert e.value.code == EXIT["usage"]
        err = capsys.readouterr().err
        assert why in err and "Traceback" not in err
    assert not (tmp_path / "x.jsonl").exists()
