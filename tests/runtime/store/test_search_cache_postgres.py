"""The PostgreSQL search cache (``runtime/store/postgres/vector_cache.py``): searches that can include
the archive run on each scope's vectors and filter columns held in the process. These tests hold it
to what SQL alone would return — the same hits as an SQLite store of the same memories under every
filter, every change made by another client seen at the next search, nothing of a deleted memory
left in the process that deleted it — and check the ``vector_epoch`` triggers that keep it fresh
and the migration of a format-3 store."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest

from runtime import FakeScorer, MemoryStore, StoreConfig
from runtime.encoders import HashEmbedder
from runtime.store.postgres.schema import STORE_FORMAT

pytestmark = pytest.mark.postgres_only

DIM = 32
T0 = datetime(2026, 3, 1, tzinfo=UTC)


def _memories(rng: np.random.Generator, n: int) -> list[dict[str, Any]]:
    vecs = rng.standard_normal((n, DIM)).astype(np.float32)
    vecs[n // 2:n // 2 + 6] = vecs[n // 2]  # exact ties: the order must fall back to the rowid, as in SQL
    out = []
    for i in range(n):
        item: dict[str, Any] = {
            "id": f"m{i:03d}", "content": f"memory {i}", "embedding": vecs[i], "session_id": f"s{i % 5}",
            "active_role": ["support", "sales", "ops"][i % 3], "dialog_role": ["user", "agent"][i % 2],
            "confidence": round(float(rng.uniform(0.2, 1.0)), 3), "timestamp": T0 + timedelta(hours=i),
            "tags": [f"t{i % 4}"] if i % 3 else []}
        if i % 11 == 0:
            item["expires_at"] = T0 + timedelta(days=3 if i % 2 else 400)
        out.append(item)
    return out


def _fill(st: MemoryStore, items: list[dict[str, Any]], user: str = "alice") -> Any:
    me = st.scope(user_id=user)
    for s in range(0, len(items), 50):
        me.write_many(items[s:s + 50])
    keep = {f"m{i:03d}" for i in range(0, len(items), 4)}
    me.retain(capacity=len(keep), scorer=FakeScorer(lambda r: 1.0 if r.id in keep else 0.1), method="greedy")
    return me


FILTERS: list[dict[str, Any]] = [
    {"tier": "archive"}, {"tier": "any"}, {"tier": "archive", "roles": "support"},
    {"tier": "any", "sessions": ["s1", "s3"]}, {"tier": "archive", "exclude_sessions": "s0"},
    {"tier": "archive", "tags": ["t1", "t2"]}, {"tier": "any", "dialog_roles": "agent"},
    {"tier": "archive", "min_confidence": 0.6}, {"tier": "archive", "since": T0 + timedelta(hours=40)},
    {"tier": "any", "until": T0 + timedelta(hours=90), "roles": ["ops", "sales"]},
    {"tier": "archive", "include_expired": True}, {"tier": "archive", "roles": "nobody"},
]


def test_archive_searches_return_what_sqlite_returns_under_every_filter(
        make_store: Callable[..., MemoryStore], tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    items = _memories(rng, 160)
    cfg = StoreConfig(promote_on_access=False, cold_vectors="float16")
    emb = HashEmbedder(dim=DIM)
    pg = _fill(make_store("pg", config=cfg, embedder=emb), items)
    lite = _fill(MemoryStore.open(tmp_path / "same.sqlite", embedder=emb, config=cfg), items)
    now = T0 + timedelta(days=30)
    queries = [items[80]["embedding"], *rng.standard_normal((6, DIM)).astype(np.float32)]
    for flt in FILTERS:
        for q in queries:
            a = pg.recall(q, k=8, now=now, update_usage=False, **flt)
            b = lite.recall(q, k=8, now=now, update_usage=False, **flt)
            assert [h.record.id for h in a] == [h.record.id for h in b], flt
            assert [h.score.similarity for h in a] == pytest.approx([h.score.similarity for h in b], abs=1e-5)


def test_changes_by_another_client_are_seen_at_the_next_search(make_store: Callable[..., MemoryStore]) -> None:
    rng = np.random.default_rng(3)
    items = [{k: v for k, v in m.items() if k != "expires_at"} for m in _memories(rng, 60)]
    cfg = StoreConfig(promote_on_access=False)
    emb = HashEmbedder(dim=DIM)
    reader = _fill(make_store("shared", config=cfg, embedder=emb), items)
    writer = make_store("shared", config=cfg, embedder=emb).scope(user_id="alice")  # its own pool and cache
    q = items[5]["embedding"]

    def ids(**flt: Any) -> list[str]:
        return [h.record.id for h in reader.recall(q, k=60, update_usage=False, **flt)]

    archived = ids(tier="archive")
    assert "m005" in archived and len(archived) == 45
    writer.forget("m005", cascade="delete")                               # a deletion
    assert "m005" not in ids(tier="archive") and "m005" not in ids(tier="any")
    writer.write("a new note", embedding=q, id="fresh")                  # a write: the new row is found
    assert ids(tier="any")[0] == "fresh"
    writer.retain(capacity=0, scorer=FakeScorer(lambda r: 0.5), method="greedy")  # everything archived
    assert ids(tier="archive")[0] == "fresh" and len(ids(tier="archive")) == 60
    writer.tag(["m007"], "late")                                          # a tag on a stored memory
    assert ids(tier="archive", tags="late") == ["m007"]
    writer.forget("m007", cascade="delete")
    assert ids(tier="archive", tags="late") == []


def _epoch(url: str) -> int:
    with psycopg.connect(url) as conn:
        return int(conn.execute("SELECT vector_epoch FROM scopes WHERE user_id = 'alice'").fetchone()[0])


def test_the_epoch_moves_when_cached_rows_change_and_only_then(make_store: Callable[..., MemoryStore],
                                                                store_target: Callable[[str], Any]) -> None:
    st = make_store(config=StoreConfig(promote_on_access=False), embedder=HashEmbedder(dim=DIM))
    url = store_target()
    me = st.scope(user_id="alice")
    me.write_many([f"note {i} about topic {i % 3}" for i in range(12)])
    e0 = _epoch(url)
    me.write("one more note")                                   # inserts: new rowids, no bump
    me.recall("topic 1", k=3)                                   # usage counters: no bump
    me.recall("topic 1", k=3, tier="any")
    assert _epoch(url) == e0
    me.retain(capacity=4, scorer=FakeScorer(lambda r: 0.5), method="greedy")  # tiers and vector formats
    e1 = _epoch(url)
    assert e1 > e0
    victim = me.list(tier="archive")[0].id
    me.forget(victim, cascade="delete")
    e2 = _epoch(url)
    assert e2 > e1
    me.tag([me.list()[0].id], "late")
    assert _epoch(url) > e2


def test_this_process_forgets_a_scope_it_deletes_from(make_store: Callable[..., MemoryStore]) -> None:
    st = make_store(config=StoreConfig(promote_on_access=False), embedder=HashEmbedder(dim=DIM))
    caches = st.backend.vector_caches
    for user in ("alice", "bob"):
        me = st.scope(user_id=user)
        me.write_many([f"{user} note {i}" for i in range(10)])
        me.recall("note", k=3, tier="any", update_usage=False)
    assert len(caches) == 2
    alice = st.scope(user_id="alice")
    alice.forget(alice.list()[0].id, cascade="delete")
    assert len(caches) == 1                                     # at once, not at the next search
    alice.recall("note", k=3, tier="any", update_usage=False)
    assert len(caches) == 2
    st.forget_user("alice")
    assert len(caches) == 1
    st.scope(user_id="bob").recall("note", k=3, tier="any", update_usage=False)
    st.backend.drop_caches()
    assert len(caches) == 0


def test_the_cache_holds_at_most_its_budget(make_store: Callable[..., MemoryStore]) -> None:
    st = make_store(embedder=HashEmbedder(dim=DIM))
    caches = st.backend.vector_caches
    for user in ("u1", "u2", "u3", "u4"):
        st.scope(user_id=user).write_many([f"{user} note {i}" for i in range(20)])
    for user in ("u1", "u2", "u3"):
        st.scope(user_id=user).recall("note", k=3, tier="any", update_usage=False)
    per_scope = max(n for _, n in caches.held())
    caches.max_bytes = int(2.5 * per_scope)
    st.scope(user_id="u1").recall("note", k=3, tier="any", update_usage=False)  # used again: most recent
    hits = st.scope(user_id="u4").recall("u4 note 3", k=1, tier="any", update_usage=False)  # loaded: trims
    assert hits[0].record.content == "u4 note 3"
    assert [k[0] for k, _ in caches.held()] == ["u1", "u4"]  # u2 and u3, least recently used, went


def test_a_format_3_store_migrates(make_store: Callable[..., MemoryStore], store_target: Callable[[str], Any]) -> None:
    url = store_target("old")
    st = make_store("old", embedder=HashEmbedder(dim=DIM))
    me = st.scope(user_id="alice")
    me.write_many([f"note {i} about topic {i % 3}" for i in range(12)])
    me.retain(capacity=4, scorer=FakeScorer(lambda r: 0.5), method="greedy")
    st.close()
    with psycopg.connect(url, autocommit=True) as conn:  # back to layout 3: no epoch, no triggers
        for trig, table in (("vectors_epoch_update", "vectors"), ("vectors_epoch_delete", "vectors"),
                            ("memories_epoch_update", "memories"), ("memories_epoch_delete", "memories"),
                            ("tags_epoch_delete", "memory_tags")):
            conn.execute(f"DROP TRIGGER {trig} ON {table}")
        conn.execute("DROP FUNCTION memir_bump_vector_epoch()")
        conn.execute("ALTER TABLE scopes DROP COLUMN vector_epoch")
        conn.execute("UPDATE memir_meta SET value = '3' WHERE key = 'format'")
    st2 = make_store("old", embedder=HashEmbedder(dim=DIM))
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT value FROM memir_meta WHERE key = 'format'").fetchone()[0] == str(STORE_FORMAT)
        assert conn.execute("SELECT count(*) FROM pg_trigger WHERE tgname LIKE '%epoch%'").fetchone()[0] == 5
    me2 = st2.scope(user_id="alice")
    assert len(me2.recall("topic 1", k=20, tier="archive", update_usage=False)) == 8
    e0 = _epoch(url)
    me2.forget(me2.list(tier="archive")[0].id, cascade="delete")
    assert _epoch(url) > e0
    assert len(me2.recall("topic 1", k=20, tier="archive", update_usage=False)) == 7


def test_rows_copied_in_under_old_write_steps_are_found(make_store: Callable[..., MemoryStore],
                                                         tmp_path: Path) -> None:
    """A copy (``memir migrate``) inserts rows under their source's write steps, which need not move
    the scope's write counter: the epoch moves instead, and a cached scope reloads."""
    emb = HashEmbedder(dim=DIM)
    dest = make_store("dest", embedder=emb)
    me = dest.scope(user_id="alice")
    me.write_many([f"local note {i}" for i in range(30)])
    assert len(me.recall("note", k=50, tier="any", update_usage=False)) == 30  # cached now
    src = MemoryStore.open(tmp_path / "src.sqlite", embedder=emb)
    src.scope(user_id="alice").write_many([f"copied note {i}" for i in range(5)])
    src.admin_copy_to(dest)
    hits = me.recall("copied note 3", k=50, tier="any", update_usage=False)
    assert len(hits) == 35 and hits[0].record.content == "copied note 3"


def test_the_sql_path_a_search_falls_back_to_returns_the_same(make_store: Callable[..., MemoryStore],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """When the scope changes under a search it is redone from SQL alone (float32 distances in SQL,
    cold vectors decoded in numpy): the same hits as from the cache."""
    from runtime.store.postgres.vector_cache import ScopeCaches

    rng = np.random.default_rng(11)
    items = _memories(rng, 120)
    me = _fill(make_store(config=StoreConfig(promote_on_access=False), embedder=HashEmbedder(dim=DIM)), items)
    now = T0 + timedelta(days=30)
    queries = [items[60]["embedding"], *rng.standard_normal((4, DIM)).astype(np.float32)]

    def run() -> list[list[str]]:
        return [[h.record.id for h in me.recall(q, k=8, now=now, update_usage=False, **flt)]
                for flt in FILTERS for q in queries]

    cached = run()
    monkeypatch.setattr(ScopeCaches, "fresh", lambda *a, **kw: None)
    assert run() == cached


def test_a_scope_past_the_exact_search_limit_is_searched_in_sql_and_never_held(
        make_store: Callable[..., MemoryStore]) -> None:
    st = make_store(config=StoreConfig(exact_search_max=30, promote_on_access=False), embedder=HashEmbedder(dim=DIM))
    small, big = st.scope(user_id="small"), st.scope(user_id="big")
    small.write_many([f"small note {i}" for i in range(20)])
    big.write_many([f"big note {i}" for i in range(40)])
    assert small.recall("small note 3", k=1, tier="any", update_usage=False)[0].record.content == "small note 3"
    assert big.recall("big note 3", k=1, tier="any", update_usage=False)[0].record.content == "big note 3"
    assert [k[0] for k, _ in st.backend.vector_caches.held()] == ["small"]
