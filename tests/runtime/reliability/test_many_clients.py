"""Eight processes share one store — an SQLite file, or a PostgreSQL database as a fleet of agent
hosts would — writing, recalling (half of them writing their usage behind), retaining and
forgetting at once for ``MEMIR_MANY_SECONDS`` (default 20): zero errors, zero lost writes (every
acknowledged id is still there unless its writer forgot it), no cross-user hit, and retention never
trips over rows another client deleted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[3]
SECONDS = float(os.environ.get("MEMIR_MANY_SECONDS", "20"))
CLIENTS = 8


@pytest.mark.slow
def test_eight_clients_lose_nothing_and_make_no_errors(store_target: Any, backend: str, tmp_path: Path) -> None:
    from tests.runtime.reliability.workers import open_store

    target = str(store_target("many.sqlite"))
    open_store(target).close()  # created (and migrated) once, before the race
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, "-m", "tests.runtime.reliability.workers", "many", target,
                               str(tmp_path / f"out{i}.json"), str(i), str(SECONDS)], cwd=ROOT, env=env)
             for i in range(CLIENTS)]
    for p in procs:
        assert p.wait(timeout=SECONDS + 180) == 0
    results = [json.loads((tmp_path / f"out{i}.json").read_text()) for i in range(CLIENTS)]
    errors = [e for r in results for e in r["errors"]]
    ops = {op: sum(r["counts"][op] for r in results) for op in results[0]["counts"]}
    written = {m for r in results for m in r["written"]}
    forgotten = {m for r in results for m in r["forgotten"]}
    with open_store(target) as store:
        present = set()
        for user in ("shared0", "shared1"):
            present |= {m.id for m in store.scope(user_id=user, agent_id="a").list(tier="any", include_expired=True)}
    lost = written - forgotten - present
    print(f"{backend}: {CLIENTS} processes, {SECONDS:g} s: {sum(ops.values())} operations {ops}, "
          f"{len(written)} acknowledged writes, {len(lost)} lost, {len(errors)} errors")
    assert not errors, errors[:5]
    assert not lost, sorted(lost)[:5]
    assert all(n > 0 for n in ops.values()), ops
