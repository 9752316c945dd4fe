"""SQLite counts recall accesses in ``memory_usage``, beside the wide rows (store format 4): every
read folds them into the record's usage, the rows themselves are not rewritten, a format-3 store's
counts carry on, and a deleted memory's accesses go with it."""

from __future__ import annotations

import sqlite3
from datetime import timedelta
from pathlib import Path

from runtime import MemoryStore, Scope, StoreConfig
from runtime.encoders import HashEmbedder
from runtime.record import MemIR, utcnow
from runtime.store.sqlite.schema import STORE_FORMAT


def _open(path: Path, config: StoreConfig | None = None) -> MemoryStore:
    return MemoryStore.open(path, embedder=HashEmbedder(dim=32, seed=0), config=config)


def _raw(path: Path, sql: str) -> list[tuple]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def _alice_note(path: Path, config: StoreConfig | None = None) -> tuple[MemoryStore, Scope, MemIR]:
    """A store at ``path``, alice's scope and the one memory written to it."""
    st = _open(path, config)
    me = st.scope(user_id="alice")
    return st, me, me.write("the invoice is due on Friday")


def test_recalls_count_beside_the_row_and_every_read_sees_them(tmp_path: Path) -> None:
    path = tmp_path / "m.sqlite"
    st, me, m = _alice_note(path)
    other = me.write("the hotel in Lisbon is booked")
    t0 = utcnow()
    for _ in range(3):
        assert me.recall("invoice due", k=1)[0].record.id == m.id
    rec = me.get(m.id)
    assert rec is not None and rec.usage.access_count == 3
    assert rec.usage.last_accessed_at is not None and rec.usage.last_accessed_at >= t0 - timedelta(seconds=1)
    assert me.get(other.id).usage.access_count == 0  # type: ignore[union-attr]
    # the wide row is not rewritten: its own columns still hold what it was written with
    assert _raw(path, f"SELECT access_count, last_accessed_at FROM memories WHERE id = '{m.id}'") == [(0, None)]
    assert _raw(path, "SELECT accesses FROM memory_usage") == [(3,)]
    # every read path folds them in: list, export, a snapshot, another store object on the file
    assert {r.id: r.usage.access_count for r in me.list()}[m.id] == 3
    assert {r.id: r.usage.access_count for r, _, _ in me.export_rows()}[m.id] == 3
    assert me.snapshot(tmp_path / "snap.jsonl") == 2
    assert '"access_count":3' in (tmp_path / "snap.jsonl").read_text().replace(" ", "")
    fresh = _open(path)
    assert fresh.scope(user_id="alice").get(m.id).usage.access_count == 3  # type: ignore[union-attr]
    # a recall in another scope never counts in this one
    fresh.scope(user_id="bob").write("the invoice of bob")
    fresh.scope(user_id="bob").recall("invoice due", k=5)
    assert me.get(m.id).usage.access_count == 3  # type: ignore[union-attr]
    fresh.close()
    st.close()


def test_accesses_written_behind_land_in_the_same_table(tmp_path: Path) -> None:
    path = tmp_path / "m.sqlite"
    st, me, m = _alice_note(path, StoreConfig(usage_flush_s=3600.0))
    for _ in range(4):
        me.recall("invoice due", k=1)
    assert _raw(path, "SELECT count(*) FROM memory_usage") == [(0,)]  # pending in the process
    assert me.get(m.id).usage.access_count == 4  # type: ignore[union-attr]  # applied before the read
    assert _raw(path, "SELECT accesses FROM memory_usage") == [(4,)]
    st.close()


def test_a_format_3_store_keeps_its_counts_and_adds_to_them(tmp_path: Path) -> None:
    path = tmp_path / "m.sqlite"
    st, _, m = _alice_note(path)
    st.close()
    conn = sqlite3.connect(path)  # the format-3 layout: counts in the row's columns, no memory_usage
    conn.execute("DROP TABLE memory_usage")
    conn.execute("UPDATE memories SET access_count = 5, last_accessed_at = 1.0")
    conn.execute("UPDATE meta SET value = '3' WHERE key = 'format'")
    conn.commit()
    conn.close()
    st = _open(path)
    assert _raw(path, "SELECT value FROM meta WHERE key = 'format'") == [(str(STORE_FORMAT),)]
    me = st.scope(user_id="alice")
    assert me.get(m.id).usage.access_count == 5  # type: ignore[union-attr]
    me.recall("invoice due", k=1)
    rec = me.get(m.id)
    assert rec is not None and rec.usage.access_count == 6
    assert rec.usage.last_accessed_at is not None and rec.usage.last_accessed_at.timestamp() > 1.0
    st.close()


def test_a_deleted_memory_takes_its_accesses_with_it(tmp_path: Path) -> None:
    path = tmp_path / "m.sqlite"
    st = _open(path)
    alice, bob = st.scope(user_id="alice"), st.scope(user_id="bob")
    a = alice.write("the invoice is due on Friday")
    alice.write("the hotel in Lisbon is booked")
    b = bob.write("bob's invoice is late")
    alice.recall("invoice hotel", k=2)
    bob.recall("invoice", k=1)
    assert _raw(path, "SELECT count(*) FROM memory_usage") == [(3,)]
    alice.forget(a.id, cascade="delete")
    assert _raw(path, "SELECT count(*) FROM memory_usage") == [(2,)]
    st.forget_user("alice")
    st.close()
    rowid = _raw(path, f"SELECT rowid FROM memories WHERE id = '{b.id}'")
    assert _raw(path, "SELECT mem_rowid, accesses FROM memory_usage") == [(rowid[0][0], 1)]
