"""The SQLite scope cache after this process's own writes: the rows a write inserts go straight into
a current cache (the next search reads nothing back), and the cache is then exactly what a load from
the file gives — also after another connection's write, a write inside a joined transaction, and a
write that rolled back. A search re-ranks its candidates from the cache's columns exactly as from
SQL's, and never trusts a cache that SQL contradicts."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from runtime import MemoryStore, RoleContext
from runtime.encoders import HashEmbedder
from runtime.errors import ValidationError
from runtime.store.filters import build_filter
from runtime.store.ranking import RankWeights
from runtime.store.scope_cache import CODED_COLUMNS, FLOAT_COLUMNS, VectorCache
from runtime.store.sqlite import search as sqlite_search
from runtime.store.sqlite.backend import SqliteStoreBackend
from runtime.store.sqlite.vector_cache import load_since

EMB = HashEmbedder(dim=64)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MemoryStore]:
    with MemoryStore.open(tmp_path / "c.sqlite", embedder=EMB) as st:
        yield st


def _db(st: MemoryStore) -> SqliteStoreBackend:
    db = st.backend
    assert isinstance(db, SqliteStoreBackend)
    return db


def _cache(st: MemoryStore, user: str = "u") -> VectorCache:
    db = _db(st)
    with db.locked():
        return db.vector_cache(user, "default")


@contextmanager
def _loads(st: MemoryStore) -> Iterator[list[str]]:
    """The statements that load cache rows from the file, while the block runs."""
    seen: list[str] = []
    with _db(st).read() as conn:
        conn.set_trace_callback(lambda s: seen.append(s) if "INDEXED BY ix_mem_scope LEFT JOIN vectors" in s else None)
        try:
            yield seen
        finally:
            conn.set_trace_callback(None)


def _values(cache: VectorCache, col: str) -> list[str | None]:
    """A coded column as the values its codes stand for (codes are numbered per cache)."""
    vocab = ("working", "archive", "direct_interaction", "external_ingest", "s1", "s2", "general", "user", "t1",
             "none")
    names = {int(cache.codes(col, [v])[0]): v for v in vocab}
    return [names.get(int(x), "?") if x >= 0 else None for x in cache.column(col)]


def _assert_as_loaded(st: MemoryStore, user: str = "u") -> None:
    """The scope's cache (as a search gets it) equals one loaded from the file now."""
    got = _cache(st, user)
    fresh = VectorCache(user, "default", EMB.encoder_id, EMB.dim)
    with _db(st).read() as conn:
        load_since(fresh, conn)
    assert got.rowids.tolist() == fresh.rowids.tolist() and got.n > 0
    np.testing.assert_array_equal(got.matrix, fresh.matrix)
    assert got.has_vector.tolist() == fresh.has_vector.tolist()
    for c in FLOAT_COLUMNS:
        np.testing.assert_array_equal(got.column(c), fresh.column(c))
    for c in CODED_COLUMNS:
        assert _values(got, c) == _values(fresh, c), c
    for tag in ("a", "b", "c"):
        assert got.tag_mask([tag]).tolist() == fresh.tag_mask([tag]).tolist()


def _write(st: MemoryStore, i: int, user: str = "u") -> None:
    st.scope(user_id=user).write(
        f"fact number {i} about project {i % 3}", session_id="s1" if i < 20 else "s2", tags=["a", "b", "c"][: i % 4],
        expires_at=datetime.now(UTC) + timedelta(days=1) if i % 3 == 0 else None, task_id="t1" if i % 5 == 0 else None,
        source_type="external_ingest" if i % 2 else "direct_interaction")


def test_writes_go_into_the_current_cache_without_a_read_back(store: MemoryStore) -> None:
    _write(store, 0)
    _cache(store)  # loaded once: current from here on
    for i in range(1, 12):
        with _loads(store) as seen:
            _write(store, i)
            _cache(store)
        assert seen == [], f"write {i}: a current cache takes this process's write without reading it back"
        _assert_as_loaded(store)
    store.scope(user_id="u").write_many([f"batch item {j}" for j in range(5)])
    _assert_as_loaded(store)
    assert _cache(store).n == 17
    hits = store.scope(user_id="u").recall("batch item 3", k=1)
    assert hits[0].record.content == "batch item 3"


def test_another_connections_write_is_loaded_not_skipped(store: MemoryStore) -> None:
    _write(store, 0)
    _cache(store)
    with MemoryStore.open(store.path, embedder=EMB) as other:
        _write(other, 1)
    with _loads(store) as seen:
        _write(store, 2)  # the cache missed the other write: this one must not be appended past it
        _cache(store)
    assert seen, "the other connection's row has to be read from the file"
    _assert_as_loaded(store)
    assert _cache(store).n == 3


def test_a_write_inside_a_joined_transaction_is_read_back(store: MemoryStore) -> None:
    _write(store, 0)
    _cache(store)
    with _db(store).transaction():
        _write(store, 1)
        _write(store, 2)
    _assert_as_loaded(store)
    assert _cache(store).n == 3


def test_a_write_and_a_change_of_stored_rows_in_one_transaction(store: MemoryStore) -> None:
    """Rows written through, then a stored row moved to the archive in the same transaction (as a
    retention decision that keeps a new candidate and archives another does): the cache follows both."""
    _write(store, 0)
    old = store.scope(user_id="u").list()[0]
    _cache(store)
    with _db(store).transaction():
        _write(store, 1)
        _db(store).tenant("u", "default").mark_superseded(old.id, "mem_newer", archive=True)
    _assert_as_loaded(store)
    assert _values(_cache(store), "tier") == ["archive", "working"]


def test_a_rolled_back_write_leaves_nothing_in_the_cache(store: MemoryStore) -> None:
    _write(store, 0)
    _cache(store)
    sc = store.scope(user_id="u")
    with pytest.raises(ValidationError):
        sc.write_many([{"content": "kept out 1"}, {"content": "kept out 2", "supersedes": "mem_nope"}])
    _assert_as_loaded(store)
    assert _cache(store).n == 1
    assert all("kept out" not in h.record.content for h in sc.recall("kept out", k=5))


def test_a_new_scopes_first_write_makes_its_cache(store: MemoryStore) -> None:
    """A scope's first rows make its cache in the process that wrote them: its first search reads
    nothing back, and the cache equals a load from the file — also after later writes."""
    store.scope(user_id="v").write_many([f"another user's note {j}" for j in range(3)])
    with _loads(store) as seen:
        store.scope(user_id="u").write_many([f"first note {j}" for j in range(4)])
        _write(store, 1)
        hits = store.scope(user_id="u").recall("first note 2", k=1)
    assert seen == [] and hits[0].record.content == "first note 2"
    _assert_as_loaded(store)
    assert _cache(store).n == 5


def test_a_commit_in_one_scope_costs_another_scopes_cache_nothing(store: MemoryStore) -> None:
    """Writes and recalls (the usage update commits) in other scopes leave a scope's cache current: its
    next search reads nothing from the file. A write to it that it could not take (it was not current)
    is still loaded."""
    _write(store, 0, user="u")
    _write(store, 1, user="v")
    store.scope(user_id="u").recall("fact number 0", k=1)
    with _loads(store) as seen:
        for i in range(2, 6):
            _write(store, i, user="v")
            store.scope(user_id="v").recall("fact number 3", k=2)
        store.scope(user_id="u").recall("fact number 0", k=1)
    assert seen == [], "commits in scope v made scope u read the file"
    with MemoryStore.open(store.path, embedder=EMB) as other:
        _write(other, 6, user="u")  # u's cache misses this row...
    _write(store, 7, user="u")  # ...so it cannot take this one, and loads both
    _assert_as_loaded(store, "u")
    assert _cache(store, "u").n == 3


def test_a_write_to_a_scope_with_older_rows_makes_no_cache(store: MemoryStore) -> None:
    """Rows this process never loaded (another store object wrote them) keep a write from making the
    scope's cache: its first search loads the whole scope."""
    with MemoryStore.open(store.path, embedder=EMB) as other:
        _write(other, 0)
        _write(other, 1)
    _write(store, 2)
    with _loads(store) as seen:
        _cache(store)
    assert seen, "the scope's older rows have to be read from the file"
    _assert_as_loaded(store)
    assert _cache(store).n == 3


def test_the_caches_stay_within_their_byte_budget(store: MemoryStore) -> None:
    """Past ``cache_bytes`` the least recently used scopes are dropped (the one in use never is);
    a dropped scope reloads on its next search, and every search still finds its own rows."""
    db = _db(store)
    for u in range(6):
        store.scope(user_id=f"u{u}").write_many([f"user {u} note {j}" for j in range(40)])
    one = _cache(store, "u5").nbytes
    assert len(db._caches) == 6
    db.cache_bytes = 3 * one
    _cache(store, "u0")  # u0 is used last (and brought up to date): u1 and u2 go
    assert list(k[0] for k in db._caches) == ["u3", "u4", "u5", "u0"][-len(db._caches):]
    assert sum(c.nbytes for c in db._caches.values()) <= 3 * one + _cache(store, "u0").nbytes
    for u in range(6):
        assert store.scope(user_id=f"u{u}").recall(f"user {u} note 7", k=1)[0].record.content == f"user {u} note 7"
        assert db._cached_bytes == sum(c.nbytes for c in db._caches.values())
    for u in range(6):
        _assert_as_loaded(store, f"u{u}")


def _varied(st: MemoryStore, user: str, n: int, seed: int) -> None:
    """``n`` memories whose re-ranking columns all vary (None where a column may be None)."""
    rng = np.random.default_rng(seed)
    now = datetime.now(UTC)
    st.scope(user_id=user).write_many([{
        "content": f"note {i} on topic {i % 7} and project {i % 5}", "confidence": float(rng.uniform(0.05, 1.0)),
        "timestamp": now - timedelta(hours=float(rng.uniform(0, 500))),
        "freshness_half_life": None if i % 3 == 0 else timedelta(hours=float(rng.uniform(1, 200))),
        "active_role": ["support", "billing", "sales"][i % 3], "sub_role": [None, "refunds", "disputes", "onboarding"][i % 4],
        "source_type": ["direct_interaction", "external_ingest", "derived_inference"][i % 3],
        "dialog_role": ["user", "agent", "tool"][i % 3], "tags": ["a", "b"][: i % 3],
        "expires_at": now + timedelta(days=1) if i % 11 == 0 else None} for i in range(n)])


@pytest.mark.parametrize("weights", [RankWeights(), RankWeights(role_weights={"refunds": 1.0, "disputes": 0.2}),
                                     RankWeights(freshness=None), RankWeights(rerank=False)],
                         ids=["default", "role-weights", "no-default-half-lives", "no-rerank"])
def test_a_search_ranks_from_the_cache_exactly_as_from_sql(store: MemoryStore, weights: RankWeights) -> None:
    """The re-ranking columns the cache mirrors give the hits, their order, every factor of their
    scores and the raw candidates bit for bit as the same candidates' columns read from SQL do."""
    _varied(store, "u", 120, seed=1)
    db = _db(store)
    tenant = db.tenant("u", "default")
    now = datetime.now(UTC) + timedelta(hours=3)
    contexts = [None, RoleContext(active_role="billing", sub_role="refunds"), RoleContext(active_role="support")]
    filters = [build_filter(), build_filter(tags=["a"]), build_filter(source_types=["external_ingest"]),
               build_filter(roles=["billing"], min_confidence=0.3), build_filter(tier="any", include_expired=True)]
    rng = np.random.default_rng(5)
    compared = 0
    for i in range(24):
        q = rng.standard_normal(EMB.dim).astype(np.float32)
        q /= np.linalg.norm(q)
        flt, ctx = filters[i % len(filters)], contexts[i % len(contexts)]
        k, pool = [(5, 40), (10, 10), (3, 120)][i % 3]
        fast = tenant.search(flt, now, q, k=k, pool=pool, context=ctx, weights=weights, touch=False)
        with db.locked():
            ref = sqlite_search._checked(tenant, flt, now, q, k=k, pool=pool, context=ctx, weights=weights)
        assert [h.record.id for h in fast.hits] == [h.record.id for h in ref.hits]
        assert [h.score for h in fast.hits] == [h.score for h in ref.hits]
        assert [h.raw_rank for h in fast.hits] == [h.raw_rank for h in ref.hits]
        assert fast.rowids == ref.rowids and fast.raw == ref.raw
        compared += len(fast.hits)
    assert compared > 80


def test_a_cache_that_sql_contradicts_is_not_trusted(store: MemoryStore) -> None:
    """A cache claiming an archived memory is working (as a stale cache could) ranks it first; SQL
    rejects it, and the search is redone from SQL: the archived memory is never returned, and the
    hits are those of a store that loads its cache afresh."""
    sc = store.scope(user_id="u")
    _varied(store, "u", 30, seed=2)
    target = sc.write("the one memory this query matches exactly", confidence=1.0)
    db = _db(store)
    with db.transaction():
        db.tenant("u", "default").mark_superseded(target.id, "mem_newer", archive=True)
    assert sc.recall(target.content, k=1, tier="any", update_usage=False)[0].record.id == target.id  # first there
    cache = _cache(store)
    archived = int(np.flatnonzero(cache.column("tier") == cache.codes("tier", ["archive"])[0])[0])
    cache.column("tier")[archived] = cache.codes("tier", ["working"])[0]
    hits = sc.recall(target.content, k=5, update_usage=False)
    with MemoryStore.open(store.path, embedder=EMB) as fresh:
        want = fresh.scope(user_id="u").recall(target.content, k=5, update_usage=False)
    assert [h.record.id for h in hits] == [h.record.id for h in want] and len(want) == 5
    assert target.id not in [h.record.id for h in hits]
