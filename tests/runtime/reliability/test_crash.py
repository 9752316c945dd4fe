"""kill -9 at random moments: no acknowledged write lost, no half-applied batch or decision, and
an intact store — over ``MEMIR_KILLS`` kills (default 100; the slow suite), on SQLite and on PostgreSQL.

A child (:mod:`tests.runtime.reliability.workers`) writes single records and ``write_many``
batches of 5, retains and forgets, and fsyncs each acknowledgement to a side file before its next
operation. The parent kills it with SIGKILL at a random time, then checks the store.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.runtime.reliability.workers import open_store

ROOT = Path(__file__).resolve().parents[3]
KILLS = int(os.environ.get("MEMIR_KILLS", "100"))


def _child(db: Path | str, acks: Path, seed: int) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "tests.runtime.reliability.workers", "crash", str(db), str(acks),
                             str(seed)], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _check(db: Path | str, acks: Path) -> dict[str, int]:
    if isinstance(db, Path):  # an SQLite file; a PostgreSQL server recovers on its own (the client died)
        conn = sqlite3.connect(db)
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        conn.close()
    acked: dict[str, str | None] = {}
    forgotten: dict[str, str | None] = {}  # id -> its batch
    for line in acks.read_text(encoding="utf-8").splitlines():
        e = json.loads(line)  # every line was fsynced whole: a torn line would be a test bug
        if "forgot" in e:
            forgotten[e["forgot"]] = e.get("batch")
        else:
            acked[e["id"]] = e["batch"]
    store = open_store(db)
    try:
        present: dict[str, list[str]] = {}
        for user in ("u0", "u1"):
            scope = store.scope(user_id=user, agent_id="a")
            for r in scope.list(tier="any", include_expired=True):
                present[r.id] = list(r.metadata.tags)
            # the last decision was applied whole: what it archived is archived, what it kept is working
            last = scope.decisions(limit=1)
            if last:
                d = last[0]
                tiers = {r.id: "archive" for r in scope.list(tier="archive")}
                assert all(tiers.get(m) == "archive" for m in d.archived if m in present and m not in forgotten)
                assert not any(tiers.get(m) == "archive" for m in d.kept if m in present)
        lost = [m for m in acked if m not in present and m not in forgotten]
        assert not lost, f"{len(lost)} acknowledged writes lost, e.g. {lost[:3]}"
        # all or nothing: a batch's records present now, plus those forgotten since, make the whole batch
        batches = Counter(t for tags in present.values() for t in tags if t.startswith("b"))
        batches.update(b for m, b in forgotten.items() if b and m not in present)  # an intent may not have run
        broken = {b: n for b, n in batches.items() if n != 5}
        assert not broken, f"half-applied write_many: {broken}"
        return {"acked": len(acked), "present": len(present)}
    finally:
        store.close()


@pytest.mark.slow
def test_no_acknowledged_write_is_lost_over_many_kills(store_target: Any, backend: str, tmp_path: Path) -> None:
    db, acks = store_target("crash.sqlite"), tmp_path / "acks.jsonl"
    acks.touch()
    rng = random.Random(7)
    kills = 0
    t0 = time.monotonic()
    while kills < KILLS:
        p = _child(db, acks, seed=kills)
        assert p.stdout is not None
        ready = p.stdout.readline()
        if ready.strip() != "ready":
            p.kill()
            raise AssertionError(f"child failed to start: {p.stderr.read() if p.stderr else ''}")
        time.sleep(rng.uniform(0.01, 0.5))
        if p.poll() is not None:
            raise AssertionError(f"child died by itself: {p.stderr.read() if p.stderr else ''}")
        p.send_signal(signal.SIGKILL)
        p.wait()
        kills += 1
        if kills % 10 == 0 or kills == KILLS:
            _check(db, acks)
    stats = _check(db, acks)
    print(f"{backend}: {kills} kills in {time.monotonic() - t0:.0f} s: {stats['acked']} acknowledged writes, "
          f"0 lost, integrity ok, no half-applied batch or decision")
    assert stats["acked"] > KILLS  # the children did real work between kills
