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
from tests.runtime.batch.test_engines import BAD_JSONL, NOW, _cfg, _outputs, _quarantine, varied_rows
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
    """``memir score --engine ray --ray-address`` as an operator runs it, in its own process: this test
    process never becomes a driver of the cluster that ``ray stop --force`` tears down at the end."""
    ray_bin = Path(sys.executable).with_name("ray")
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}
    env.update(RAY_USAGE_STATS_ENABLED="0", HOME=str(tmp_path / "home"))  # no token file of this machine's user
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
        r = subprocess.run([str(Path(sys.executable).with_name("memir")), "score", str(dump), "-o", str(tmp_path / "ray_out"),
                            "--engine", "ray", "--ray-address", address, "--model", str(model), "--capacity", "25",
                            "--encoder", "hash", "--now", NOW.isoformat(), "--quiet"],
                           capture_output=True, text=True, env=env, timeout=600)
        assert r.returncode == 0, (r.stdout[-2000:], r.stderr[-3000:])
        got, quarantine = _ray_outputs(tmp_path / "ray_out")
        assert got == _outputs(tmp_path / "local.jsonl") and quarantine == []
        rep = json.loads((tmp_path / "ray_out" / "summary.json").read_text())
        assert rep["valid"] == local["valid"] == 150 and rep["validated_columnwise"] == local["validated_columnwise"]
    finally:
        subprocess.run([str(ray_bin), "stop", "--force"], capture_output=True, env=env, timeout=120)
        shutil.rmtree(temp, ignore_errors=True)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_readme_cluster_example_runs_on_two_nodes_with_token_auth(tmp_path: Path, model: Path) -> None:
    """The README's ```bash ray-cluster block, run as written on two nodes of this machine: only the
    head's host name and port, the shared paths, and (for a small machine) the nodes' CPUs and temp
    directory are substituted. The scores equal the local engine's."""

    from tests.docs.examples import block as doc_block
    block = doc_block("ray-cluster", "bash")
    shared = tmp_path / "shared"
    (shared / "dumps").mkdir(parents=True)
    rows = varied_rows(120, seed=5)
    write_dump(rows, shared / "dumps" / "part-1.parquet")
    local = score_dump(shared / "dumps" / "part-1.parquet", tmp_path / "local.jsonl", _cfg(model), progress=False)
    temp = Path("/tmp") / f"ray-doc-{os.getpid()}"
    port = str(_free_port())
    script = (block.code.replace("head-node", "127.0.0.1").replace("6379", port).replace("/shared", str(shared))
              .replace("<the token from step 1>", "$RAY_AUTH_TOKEN")
              .replace("ray start --head", f"ray start --num-cpus 1 --temp-dir {temp} --include-dashboard=false "
                                           "--disable-usage-stats --head")
              .replace("ray start --address", "ray start --num-cpus 1 --disable-usage-stats --address")
              .replace("memir score", f"memir score --model {model} --capacity 25 --encoder hash --now {NOW.isoformat()} "
                                      "--quiet")
              .replace("ray stop", "ray stop --force"))
    assert script.count("ray start") == 2 and "RAY_AUTH_MODE=token" in script
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}
    env.update(PATH=f"{Path(sys.executable).parent}:{env.get('PATH', '')}", RAY_USAGE_STATS_ENABLED="0",
               HOME=str(tmp_path / "home"))  # no token file of this machine's user is picked up
    try:
        r = subprocess.run(["bash", "-euo", "pipefail", "-c", script], capture_output=True, text=True, env=env,
                           timeout=600, cwd=tmp_path)
        assert r.returncode == 0, (r.stdout[-2000:], r.stderr[-3000:])
        got, quarantine = _ray_outputs(shared / "scored")
        assert got == _outputs(tmp_path / "local.jsonl") and quarantine == []
        assert json.loads((shared / "scored" / "summary.json").read_text())["valid"] == local["valid"] == 120
    finally:
        subprocess.run([str(Path(sys.executable).with_name("ray")), "stop", "--force"], capture_output=True, env=env,
                       timeout=120)
        shutil.rmtree(temp, ignore_errors=True)
