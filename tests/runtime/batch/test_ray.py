"""``memir score --engine ray`` on a real Ray cluster: one the engine starts (2 CPUs) and an existing
one given by address; the decisions and the quarantine equal the local engine's."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from runtime.batch import score_dump
from runtime.store.dumps import write_dump
from tests.runtime.batch.test_engines import BAD_JSONL, _cfg, _outputs, _quarantine, varied_rows
from tests.runtime.test_cli import _tiny_model

pytest.importorskip("ray")
pytestmark = pytest.mark.slow

DIM = 64


def _ray_outputs(out: Path) -> tuple[dict[str, dict], list[tuple[int, str]]]:
    rows = pq.read_table(out / "scored").to_pylist()
    q = out / "quarantine.jsonl"
    quarantine = [(x["line"], x["error"]) for x in map(json.loads, q.read_text().splitlines())] if q.exists() else []
    return {r["id"]: r for r in rows}, quarantine


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _tiny_model(tmp_path_factory.mktemp("model"), DIM)


def test_ray_on_a_local_two_worker_cluster_decides_like_the_local_engine(tmp_path: Path, model: Path) -> None:
    dump = tmp_path / "dump.jsonl"
    write_dump(varied_rows(), dump)
    with open(dump, "a") as fh:
        fh.write("\n".join(BAD_JSONL) + "\n")
    local = score_dump(dump, tmp_path / "local.jsonl", _cfg(model), progress=False)
    ray_rep = score_dump(dump, tmp_path / "ray_out", _cfg(model, workers=2), engine="ray", progress=False)
    rows, quarantine = _ray_outputs(tmp_path / "ray_out")
    assert rows == _outputs(tmp_path / "local.jsonl")
    assert sorted(quarantine) == sorted(_quarantine(tmp_path / "local.jsonl"))
    for k in ("records", "valid", "quarantined", "duplicates", "scopes", "kept", "archived", "deleted"):
        assert ray_rep[k] == local[k], k
    assert json.loads((tmp_path / "ray_out" / "summary.json").read_text())["valid"] == local["valid"]
    assert not list(tmp_path.glob(".ray_out*"))  # the work directory became the output


def test_ray_against_an_existing_cluster_by_address(tmp_path: Path, model: Path) -> None:
    ray_bin = Path(sys.executable).with_name("ray")
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    temp = Path("/tmp") / f"ray-{os.getpid()}"
    head = subprocess.run([str(ray_bin), "start", "--head", "--num-cpus", "2", "--port", "0",
                           "--include-dashboard", "false", f"--temp-dir={temp}", "--disable-usage-stats"],
                          capture_output=True, text=True, env=env, timeout=180)
    assert head.returncode == 0, head.stderr[-2000:]
    address_file = temp / "ray_current_cluster"
    try:
        address = address_file.read_text().strip() if address_file.exists() else None
        assert address, head.stdout[-2000:]
        rows = varied_rows(150, seed=11)
        dump = tmp_path / "dump.parquet"
        write_dump(rows, dump)
        local = score_dump(dump, tmp_path / "local.jsonl", _cfg(model), progress=False)
        rep = score_dump(dump, tmp_path / "ray_out", _cfg(model), engine="ray", ray_address=address,
                         progress=False)
        got, quarantine = _ray_outputs(tmp_path / "ray_out")
        assert got == _outputs(tmp_path / "local.jsonl") and quarantine == []
        assert rep["valid"] == local["valid"] == 150 and rep["validated_columnwise"] == local["validated_columnwise"]
    finally:
        subprocess.run([str(ray_bin), "stop", "--force"], capture_output=True, env=env, timeout=120)
        shutil.rmtree(temp, ignore_errors=True)
