"""Four processes write, recall, retain and forget on one store for ``MEMIR_STRESS_SECONDS``
(default 60; the slow suite): zero errors — no untyped exception, no "database is locked", no
spurious typed error (a memory another process just forgot may be ``NotFoundError``; nothing else)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SECONDS = float(os.environ.get("MEMIR_STRESS_SECONDS", "60"))


@pytest.mark.slow
def test_four_processes_mixing_every_operation_make_no_errors(tmp_path: Path) -> None:
    db = tmp_path / "stress.sqlite"
    from tests.runtime.reliability.workers import open_store
    open_store(db).close()  # created (and migrated) once, before the race
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, "-m", "tests.runtime.reliability.workers", "stress", str(db),
                               str(tmp_path / f"out{i}.json"), str(i), str(SECONDS)], cwd=ROOT, env=env)
             for i in range(4)]
    for p in procs:
        assert p.wait(timeout=SECONDS + 120) == 0
    results = [json.loads((tmp_path / f"out{i}.json").read_text()) for i in range(4)]
    errors = [e for r in results for e in r["errors"]]
    ops = sum(sum(r["counts"].values()) for r in results)
    print(f"4 processes, {SECONDS:g} s: {ops} operations, {len(errors)} errors")
    assert not errors, errors[:5]
    assert all(r["counts"][op] > 0 for r in results for op in r["counts"])
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
