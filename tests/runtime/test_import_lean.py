"""``import runtime`` must not pull in the training stack (DESIGN.md; STYLE habit 1).

Runs in a fresh interpreter so modules imported by other tests do not mask the result. The import
time is printed for the record (``pytest -s``); the 0.3 s goal is checked by ``bench/bench_store.py``,
not asserted here (timings are not test material).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN = ["torch", "lightning", "pytorch_lightning", "datasets", "sentence_transformers", "transformers",
             "train", "cvxpy"]

PROBE = """
import json, sys, time
t = time.perf_counter()
import {modules}
dt = time.perf_counter() - t
forbidden = {forbidden!r}
loaded = sorted(m for m in sys.modules if m.split(".")[0] in forbidden)
print(json.dumps({{"seconds": dt, "loaded": loaded}}))
"""


@pytest.mark.parametrize("modules", ["runtime", ("runtime, runtime.scope, runtime.store, runtime.retrieval, "
                                                 "runtime.filters, runtime.vectors, runtime.records")])
def test_import_runtime_leaves_the_training_stack_out(modules: str) -> None:
    code = PROBE.format(modules=modules, forbidden=FORBIDDEN)
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         check=False)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"import {modules}: {result['seconds']:.3f} s")
    assert result["loaded"] == []


def test_the_probe_would_notice_a_heavy_import() -> None:
    """Positive control: the same probe reports a forbidden module when one is imported."""
    code = PROBE.format(modules="runtime", forbidden=["sqlite3"])  # runtime.store does import sqlite3
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         check=False)
    assert out.returncode == 0, out.stderr
    assert "sqlite3" in json.loads(out.stdout.strip().splitlines()[-1])["loaded"]
