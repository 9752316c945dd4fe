"""Every benchmark `make bench` runs starts: its imports resolve against today's runtime and its
options parse. (A benchmark that breaks only shows when someone runs the whole suite of them,
which takes an hour; this takes seconds.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.run_all import BENCHES  # noqa: E402

SCRIPTS = sorted({cmd[0] for _, cmd in BENCHES} | {"bench/bench_install.py", "bench/redaction_report.py"})


@pytest.mark.parametrize("script", SCRIPTS)
def test_a_benchmark_starts(script: str) -> None:
    out = subprocess.run([sys.executable, script, "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "usage:" in out.stdout


def test_the_peer_benchmark_drives_memir_through_its_public_api(tmp_path: Path) -> None:
    """bench_peers' worker on memir (the peers run in their own environment, built by the benchmark):
    every memory is ingested, one by one or in batches of one user; every query is answered inside
    its user, and with memories that differ the exact cosine top-k is what memir returns."""
    import json

    import numpy as np

    from bench.bench_peers import exact_top, make_workload
    from runtime.encoders import HashEmbedder

    w = make_workload(users=3, size=90, queries=12, seed=1)
    enc = HashEmbedder(384)
    vectors, qvectors = enc.encode(w["texts"]), enc.encode([q["text"] for q in w["queries"]])
    (tmp_path / "workload.json").write_text(json.dumps(w))
    np.save(tmp_path / "vectors.npy", vectors)
    np.save(tmp_path / "qvectors.npy", qvectors)
    truth = exact_top(vectors, w["users"], w["ids"], w["queries"], qvectors)
    for batch in (1, 7):  # one write per memory, and write_many of up to 7 of one user
        out = subprocess.run([sys.executable, "bench/peers_worker.py", "memir", str(tmp_path),
                              str(tmp_path / f"work{batch}"), str(batch)],
                             cwd=ROOT, capture_output=True, text=True, timeout=300,
                             env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
        assert out.returncode == 0, out.stderr[-3000:]
        rep = json.loads(out.stdout.strip().splitlines()[-1])
        assert rep["memories"] == 90 and rep["batch"] == batch
        assert rep["other_users_hits"] == 0 and rep["ingest_per_s"] > 0 and rep["queries"] == 12
        assert np.mean([len(set(h) & set(t)) / 10 for h, t in zip(rep["results"], truth)]) >= 0.9
