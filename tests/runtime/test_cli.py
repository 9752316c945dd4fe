"""The `memir` CLI: --help with examples, and inspect/retain/explain/snapshot/score on real files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from runtime.cli import main
from runtime.encoders import HashEmbedder
from runtime.store import MemoryStore

COMMANDS = ["inspect", "retain", "explain", "snapshot", "score", "reembed", "encoder"]


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


@pytest.mark.parametrize("cmd", COMMANDS)
def test_help_has_an_example(cmd: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main([cmd, "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "example:" in out and f"memir {cmd}" in out


def test_console_script_help_runs() -> None:
    r = subprocess.run([sys.executable, "-m", "runtime.cli", "--help"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "memir" in r.stdout and all(c in r.stdout for c in COMMANDS)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "agent.sqlite"
    with MemoryStore.open(path, embedder=HashEmbedder(64)) as store:
        s = store.scope(user_id="u42")
        s.write("Always answer in French", flags=["core_instruction"])
        s.write_many([f"fact {i} about project orion" for i in range(20)])
        store.scope(user_id="other").write("someone else's memory")
    return path


def test_inspect_retain_explain_snapshot(db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    import runtime.cli as cli
    monkeypatch.setattr(cli, "_open", lambda path, hash_embedder=False: MemoryStore.open(path, embedder=HashEmbedder(64)))
    model = _tiny_model(tmp_path)
    assert main(["inspect", str(db), "--capacity", "10"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["memories"] == 22 and stats["by_user_id"] == {"other": 1, "u42": 21}
    assert stats["fill"]["u42"] == 2.1
    assert main(["retain", str(db), "--user", "u42", "--capacity", "5", "--model", str(model)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["kept"] == 5 and out["archived"] == 16
    with MemoryStore.open(db, embedder=HashEmbedder(64)) as store:
        kept_id = store.scope(user_id="u42").list()[0].id
    assert main(["explain", str(db), kept_id]) == 0
    assert "kept" in json.loads(capsys.readouterr().out)["summary"]
    assert main(["explain", str(db), "mem_does_not_exist"]) == 1
    capsys.readouterr()
    snap = tmp_path / "u42.jsonl"
    assert main(["snapshot", str(db), "--user", "u42", "-o", str(snap)]) == 0
    lines = [json.loads(x) for x in snap.read_text().splitlines()]
    assert len(lines) == 21 and all(x["provenance"]["user_id"] == "u42" for x in lines)
    assert all(len(x["embedding"]) == 64 for x in lines)


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
                             "embedding": [float("nan")] * 64}).replace("NaN", "NaN") + "\n")
    out = tmp_path / "scored.jsonl"
    rc = main(["score", str(dump), "-o", str(out), "--capacity", "3", "--model", str(model),
               "--encoder", "hash", "--quiet"])
    assert rc == 0
    report = json.loads(capsys.readouterr().out)
    assert report["records"] == n + 4 and report["valid"] == n + 1 and report["quarantined"] == 3
    assert report["embedded"] == 1
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(rows) == n + 1                                   # every valid record has a row
    q = [json.loads(x) for x in Path(str(out) + ".quarantine.jsonl").read_text().splitlines()]
    assert [x["line"] for x in q] == [n + 1, n + 2, n + 4] and all(x["error"] for x in q)
    by_user: dict[str, list[dict]] = {}
    for r in rows:
        by_user.setdefault(r["user_id"], []).append(r)
    assert sum(r["keep"] for r in by_user["u42"]) == 3          # capacity per scope
    core = [r for r in by_user["u42"] if r["reason"] == "must_keep"]
    assert len(core) == 1 and core[0]["keep"]
    assert all(np.isfinite(r["utility"]) for r in rows)


def test_score_reads_parquet_dumps(db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    pytest.importorskip("datasets")
    model = _tiny_model(tmp_path)
    dump = tmp_path / "dump.jsonl"
    with MemoryStore.open(db, embedder=HashEmbedder(64)) as store:
        n = store.admin_export(dump)
    rows = [json.loads(x) for x in dump.read_text().splitlines()]
    rows.append({**rows[0], "id": "bad", "content": ""})         # invalid: empty content
    # the layout Scope.snapshot("x.parquet") writes: MemIR JSON + a float32 list column
    pq.write_table(pa.table({
        "record": [json.dumps({k: v for k, v in r.items() if k not in ("embedding", "encoder_id")}) for r in rows],
        "embedding": pa.array([r["embedding"] for r in rows], type=pa.list_(pa.float32())),
        "encoder_id": [r["encoder_id"] for r in rows]}), tmp_path / "dump.parquet")
    out = tmp_path / "scored.jsonl"
    assert main(["score", str(tmp_path / "dump.parquet"), "-o", str(out), "--capacity", "4",
                 "--model", str(model), "--encoder", "hash", "--quiet"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["valid"] == n and report["quarantined"] == 1 and report["embedded"] == 0
    scored = [json.loads(x) for x in out.read_text().splitlines()]
    assert {r["id"] for r in scored} == {r["id"] for r in rows[:-1]}
    assert sum(r["keep"] for r in scored if r["user_id"] == "u42") == 4
    with MemoryStore.open(db, embedder=HashEmbedder(64)) as store:    # snapshot writes the same layout
        assert store.scope(user_id="u42").snapshot(tmp_path / "u42.parquet") == 21
    assert pq.read_table(tmp_path / "u42.parquet").num_rows == 21
