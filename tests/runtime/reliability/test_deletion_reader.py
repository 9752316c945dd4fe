"""Deletion is complete even while another connection holds a read transaction: after ``forget``
returns, 0 bytes of the content or the vector remain in the file, its WAL or the recall log; if
the reader outlives ``StoreConfig.scrub_wait_s``, ``forget`` raises ``DeletionPendingError``
instead of reporting success — and the bytes leave once the reader ends and the store writes again."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from runtime import MemoryStore, StoreConfig
from runtime.encoders import HashEmbedder
from runtime.errors import DeletionPendingError
from runtime.scoring import make_baseline

SECRET = "launch code PANGOLIN-7781"


def _raw(db: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(db.parent.glob(db.name + "*")))


def _unit(seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=64).astype(np.float32)
    return v / np.linalg.norm(v)


def _setup(tmp_path: Path, wait_s: float) -> tuple[MemoryStore, Path, np.ndarray, str]:
    db = tmp_path / "m.sqlite"
    store = MemoryStore.open(db, embedder=HashEmbedder(dim=64, seed=0), config=StoreConfig(scrub_wait_s=wait_s))
    me = store.scope(user_id="alice", agent_id="a")
    vec = _unit(1)
    rec = me.write(f"the {SECRET}", embedding=vec)
    for i in range(30):
        me.write(f"filler note {i}")
    me.recall("launch code", k=3, explain=True)  # the id reaches the recall log too...
    me.retain(40, scorer=make_baseline("recency"))  # ...and the decision log
    store.checkpoint()
    assert SECRET.encode() in _raw(db) and vec.tobytes()[:32] in _raw(db)
    return store, db, vec, rec.id


def _reader(db: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(db, check_same_thread=False)
    conn.execute("BEGIN")
    conn.execute("SELECT count(*) FROM memories").fetchone()  # a snapshot is now held
    return conn


def _gone(db: Path, vec: np.ndarray, memory_id: str) -> bool:
    raw = _raw(db)
    return SECRET.encode() not in raw and vec.tobytes()[:32] not in raw and memory_id.encode() not in raw


def test_forget_waits_for_a_reader_and_leaves_zero_bytes(tmp_path: Path) -> None:
    store, db, vec, mid = _setup(tmp_path, wait_s=10)
    reader = _reader(db)
    threading.Timer(0.5, reader.rollback).start()
    t0 = time.perf_counter()
    store.scope(user_id="alice", agent_id="a").forget(mid)
    assert time.perf_counter() - t0 >= 0.4          # it waited for the reader...
    assert _gone(db, vec, mid)                       # ...and nothing is left, WAL included
    store.close()


def test_forget_fails_loudly_while_a_reader_outlives_the_wait(tmp_path: Path) -> None:
    store, db, vec, mid = _setup(tmp_path, wait_s=0.3)
    me = store.scope(user_id="alice", agent_id="a")
    reader = _reader(db)
    with pytest.raises(DeletionPendingError, match="read transaction"):
        me.forget(mid)
    assert not _gone(db, vec, mid)                   # honest: the bytes are still there
    assert me.count(tier="any") == 30                # but no read returns it
    reader.rollback()
    reader.close()
    me.write("one more note")                        # the next write finishes the scrub by itself
    assert _gone(db, vec, mid)
    store.close()


def test_scrub_after_the_reader_ends(tmp_path: Path) -> None:
    store, db, vec, mid = _setup(tmp_path, wait_s=0.2)
    assert store.admin_stats()["scrub_pending"] is False
    reader = _reader(db)
    with pytest.raises(DeletionPendingError):
        store.scope(user_id="alice", agent_id="a").forget(mid)
    assert store.admin_stats()["scrub_pending"] is True  # what memir inspect and the inspector's health show
    reader.rollback()
    store.scrub()
    assert _gone(db, vec, mid)
    assert store.admin_stats()["scrub_pending"] is False
    store.close()
