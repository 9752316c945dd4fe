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
