"""Hot and cold tiers, what only the PostgreSQL backend has: a store of layout 1 (``vec vector NOT
NULL``, no ``cold``/``fmt``) migrates to layout 2 on open, the table's storage rule is a CHECK
constraint, and the per-scope HNSW index (float32 ``vec`` only) serves working-tier searches while
archive searches stay exact over the cold vectors."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from runtime import FakeScorer, MemoryStore, StoreConfig
from runtime.store.postgres.schema import STORE_FORMAT

pytestmark = pytest.mark.postgres_only


def _fill_and_archive(me: Any, n: int = 24, keep: int = 8) -> None:
    for i in range(n):
        me.write(f"note {i} about topic {i % 4}")
    me.retain(capacity=keep, scorer=FakeScorer(lambda r: float(r.content.split()[1]) / 100.0), method="exact")


def _to_layout_1(url: str) -> None:
    """Turn a (float32-only) layout-2 store back into the layout-1 one."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ALTER TABLE vectors DROP CONSTRAINT vectors_fmt_check, DROP COLUMN cold, DROP COLUMN fmt, "
                     "ALTER COLUMN vec SET NOT NULL")
        conn.execute("UPDATE memir_meta SET value = '1' WHERE key = 'format'")


def test_a_layout_1_store_migrates_and_compacts(make_store: Callable[..., MemoryStore],
                                                store_target: Callable[[str], Any]) -> None:
    url = store_target("old")
    st = make_store("old", config=StoreConfig(cold_vectors="float32"))
    me = st.scope(user_id="alice")
    _fill_and_archive(me)
    before = {h.record.id for h in me.recall("topic 1", k=5, tier="archive", update_usage=False)}
    st.close()
    _to_layout_1(url)

    st2 = make_store("old")  # cold_vectors int8 (the default)
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT value FROM memir_meta WHERE key = 'format'").fetchone()[0] == str(STORE_FORMAT)
        cols = dict(conn.execute("SELECT column_name, is_nullable FROM information_schema.columns "
                                 "WHERE table_name = 'vectors'").fetchall())
        assert cols["vec"] == "YES" and "cold" in cols and cols["fmt"] == "NO"
    t = st2.backend.stats()["tiers"]
    assert t["archive"]["formats"] == {"float32": 16}  # nothing rewritten on open
    assert st2.backend.compact_vectors() == 16
    t = st2.backend.stats()["tiers"]
    assert t["archive"]["formats"] == {"int8": 16} and t["working"]["formats"] == {"float32": 8}
    assert t["archive"]["vector_bytes"] == 16 * (st2.embedder.dim + 4)
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT count(*) FROM vectors WHERE fmt = 'int8' AND vec IS NULL "
                            "AND cold IS NOT NULL").fetchone()[0] == 16
    me2 = st2.scope(user_id="alice")
    after = {h.record.id for h in me2.recall("topic 1", k=5, tier="archive", update_usage=False)}
    assert len(before & after) >= 4
    st2.close()
    st3 = make_store("old")  # opening a migrated store again is a no-op
    assert st3.backend.stats()["tiers"]["archive"]["formats"] == {"int8": 16}


def test_the_storage_rule_is_a_check_constraint(store: MemoryStore, store_target: Callable[[str], Any]) -> None:
    store.scope(user_id="alice").write("one memory")
    with psycopg.connect(store_target()) as conn:
        for bad in ("UPDATE vectors SET fmt = 'int8'",             # int8 with the vector in vec
                    "UPDATE vectors SET vec = NULL",               # float32 without vec
                    "UPDATE vectors SET cold = '\\x00'::bytea"):    # both columns
            with pytest.raises(psycopg.errors.CheckViolation):
                conn.execute(bad)
            conn.rollback()


def test_large_scopes_search_the_archive_exactly(make_store: Callable[..., MemoryStore],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    st = make_store(config=StoreConfig(exact_search_max=10, promote_on_access=False))
    me = st.scope(user_id="alice")
    _fill_and_archive(me, n=40, keep=12)
    db = st.backend
    emb = st.embedder
    assert db.scope_is_large("alice", "default")
    db.build_vector_index("alice", "default", emb.encoder_id, emb.dim)
    assert db.vector_index_ready("alice", "default", emb.encoder_id, emb.dim)
    from runtime.store.postgres import search as pg_search

    used: list[str] = []
    real = pg_search._hnsw
    monkeypatch.setattr(pg_search, "_hnsw", lambda tenant, conn, flt, *a: used.append(flt.tier) or real(
        tenant, conn, flt, *a))
    archived = {r.id for r in me.list(tier="archive")}
    hits = me.recall("topic 2", k=5, tier="archive")
    assert hits and {h.record.id for h in hits} <= archived
    anyt = me.recall("topic 2", k=10, tier="any")
    assert {h.record.id for h in anyt} & archived  # the cold vectors compete with the hot ones
    working = me.recall("topic 2", k=5)
    assert working and not ({h.record.id for h in working} & archived)
    assert used == ["working"]  # the index (float32 vectors only) serves the working tier alone
