"""What only the PostgreSQL backend has: isolation enforced by the database (row-level security),
an app role that cannot bypass it, HNSW search for large scopes measured against exact search,
and schema checks on open. The rest of the store suite runs on PostgreSQL through the
``[postgres]`` parametrization of ``make_store`` / ``store_target``."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
import psycopg
import pytest

import runtime.store.postgres.search as pg_search
from runtime import MemoryStore, StoreConfig
from runtime.encoders import HashEmbedder
from runtime.errors import NotFoundError, ValidationError
from runtime.store.postgres.backend import PgStoreBackend
from runtime.store.postgres.schema import APP_ROLE
from tests.pg import PgServer

pytestmark = pytest.mark.postgres_only


def _two_users(url: str) -> None:
    with MemoryStore.open(url, embedder=HashEmbedder(dim=16)) as store:
        store.scope(user_id="alice").write_many([{"content": f"alice secret {i}", "tags": ["t"]} for i in range(3)])
        store.scope(user_id="bob").write_many([{"content": f"bob secret {i}", "tags": ["t"]} for i in range(2)])
        store.scope(user_id="alice", agent_id="planner").write("alice's planner note")


def test_raw_sql_without_a_tenant_clause_sees_only_its_scope(store_target: Any) -> None:
    """A deliberately broken query (no WHERE user_id = ...) through a scoped connection gets only
    that scope's rows, in every tenant table; writes into another scope are refused."""
    url = store_target("rls")
    _two_users(url)
    db = PgStoreBackend.open(url, pool_size=2, create=False, embedder=HashEmbedder(dim=16))
    try:
        with db.scoped("alice", "default") as conn:
            contents = sorted(r[0] for r in conn.execute("SELECT record::jsonb->>'content' FROM memories"))
            assert contents == ["alice secret 0", "alice secret 1", "alice secret 2"]
            for table in ("vectors", "memory_tags", "scopes"):
                users = {r[0] for r in conn.execute(f"SELECT DISTINCT user_id FROM {table}")}
                assert users == {"alice"}, table
            agents = {r[0] for r in conn.execute("SELECT DISTINCT agent_id FROM memories")}
            assert agents == {"default"}  # not even alice's other agent
            assert conn.execute("UPDATE memories SET utility = 1").rowcount == 3  # its own rows only
            assert conn.execute("DELETE FROM vectors WHERE user_id = 'bob'").rowcount == 0
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            with db.scoped("alice", "default") as conn:
                conn.execute("INSERT INTO recall_log(user_id, agent_id, at, payload) VALUES ('bob', 'default', 0, '{}')")
        with db.scoped("bob", "default") as conn:
            assert conn.execute("SELECT count(*) FROM memories").fetchone()[0] == 2
            assert conn.execute("SELECT count(*) FROM memories WHERE utility = 1").fetchone()[0] == 0
    finally:
        db.close()


def test_the_app_role_is_neither_superuser_nor_owner_nor_bypassing(store_target: Any, pg_server: PgServer) -> None:
    url = store_target("role")
    _two_users(url)
    with psycopg.connect(url) as conn:
        sup, bypass, login = conn.execute("SELECT rolsuper, rolbypassrls, rolcanlogin FROM pg_roles WHERE rolname = %s",
                                          (APP_ROLE,)).fetchone()
        assert (sup, bypass, login) == (False, False, False)
        owners = {r[0] for r in conn.execute("SELECT tableowner FROM pg_tables WHERE schemaname = 'public'")}
        assert APP_ROLE not in owners
        rls = dict(conn.execute("SELECT relname, relrowsecurity FROM pg_class WHERE relname = ANY(%s)",
                                (["memories", "vectors", "memory_tags", "memory_parents", "memory_links",
                                  "memory_context", "scopes", "recall_log", "decisions", "decision_items"],)))
        assert len(rls) == 10 and all(rls.values())
        # an unscoped session as the app role sees nothing at all
        conn.execute(f"SET ROLE {APP_ROLE}")
        assert conn.execute("SELECT count(*) FROM memories").fetchone()[0] == 0


def test_large_scopes_use_hnsw_with_recall_close_to_exact(store_target: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A scope past ``exact_search_max`` gets an HNSW index of its own; the public recall then goes
    through it, and its top-10 agrees with the exact top-10 on at least 90% of hits, with and
    without a filter. ``forget_user`` drops the index with the rows."""
    rng = np.random.default_rng(0)
    dim, n = 32, 3000
    vecs = rng.standard_normal((n, dim)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    url = store_target("hnsw")
    emb = HashEmbedder(dim=dim)
    with MemoryStore.open(url, embedder=emb, config=StoreConfig(exact_search_max=1000)) as store, \
            MemoryStore.open(url, embedder=emb, config=StoreConfig(exact_search_max=10 ** 9)) as exact_store:
        me, me_exact = store.scope(user_id="big"), exact_store.scope(user_id="big")
        for s in range(0, n, 500):
            me.write_many([{"content": f"doc {i}", "embedding": vecs[i].tolist(),
                            "tags": ["even" if i % 2 == 0 else "odd"]} for i in range(s, s + 500)])
        store.scope(user_id="small").write("a small scope stays exact")
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("ANALYZE")  # what autovacuum does after a bulk load (the README says to, after imports)
        assert len(store.admin_build_indexes()) == 1  # only the large scope
        queries = rng.standard_normal((20, dim)).astype(np.float32)
        queries /= np.linalg.norm(queries, axis=1, keepdims=True)
        calls = {"hnsw": 0}
        real = pg_search._hnsw

        def counting(*a: Any, **k: Any) -> Any:
            calls["hnsw"] += 1
            return real(*a, **k)

        monkeypatch.setattr(pg_search, "_hnsw", counting)
        for flt in ({}, {"tags": ["even"]}):
            allowed = np.arange(n) if not flt else np.arange(0, n, 2)
            before = calls["hnsw"]
            exact = [[h.record.content for h in me_exact.recall(q.tolist(), k=10, **flt)] for q in queries]
            assert calls["hnsw"] == before  # the exact store object never touches the index
            approx = [[h.record.content for h in me.recall(q.tolist(), k=10, **flt)] for q in queries]
            assert calls["hnsw"] - before == len(queries)
            truth = [[f"doc {i}" for i in allowed[np.argsort(-(vecs[allowed] @ q))[:10]]] for q in queries]
            assert [set(e) for e in exact] == [set(t) for t in truth]
            recall10 = np.mean([len(set(a) & set(e)) / 10 for a, e in zip(approx, exact)])
            assert recall10 >= 0.9, (flt, recall10)
        store.forget_user("big")
        with psycopg.connect(url) as conn:
            assert conn.execute("SELECT count(*) FROM pg_indexes WHERE indexname LIKE 'ix_vec_hnsw_%'").fetchone()[0] == 0


def test_hnsw_settings_reach_the_index_and_the_search(store_target: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """``hnsw_m`` / ``hnsw_ef_construction`` are the built index's parameters (read back from the
    catalog), ``hnsw_ef_search`` is what each HNSW search sets (raised to the candidate pool), and a
    setting pgvector would refuse is a ValidationError naming the field."""
    rng = np.random.default_rng(1)
    dim, n = 16, 1200
    vecs = rng.standard_normal((n, dim)).astype(np.float32)
    url = store_target("hnsw_settings")
    cfg = StoreConfig(exact_search_max=500, hnsw_m=8, hnsw_ef_construction=24, hnsw_ef_search=70, candidate_pool=50)
    with MemoryStore.open(url, embedder=HashEmbedder(dim=dim), config=cfg) as store:
        me = store.scope(user_id="big")
        me.write_many([{"content": f"doc {i}", "embedding": vecs[i].tolist()} for i in range(n)])
        (name,) = store.admin_build_indexes()
        with psycopg.connect(url) as conn:
            (ddl,) = conn.execute("SELECT indexdef FROM pg_indexes WHERE indexname = %s", (name,)).fetchone()
        assert "m='8'" in ddl.replace(" ", "") and "ef_construction='24'" in ddl.replace(" ", ""), ddl
        seen: list[str] = []
        real = pg_search._hnsw

        def spying(tenant: Any, conn: Any, *a: Any, **k: Any) -> Any:
            out = real(tenant, conn, *a, **k)
            seen.append(conn.execute("SHOW hnsw.ef_search").fetchone()[0])
            return out

        monkeypatch.setattr(pg_search, "_hnsw", spying)
        assert len(me.recall(vecs[0].tolist(), k=5)) == 5
        assert seen == ["70"]
    for bad, field in (({"hnsw_m": 1}, "hnsw_m"), ({"hnsw_m": 16, "hnsw_ef_construction": 20}, "hnsw_ef_construction"),
                       ({"hnsw_ef_search": 0}, "hnsw_ef_search")):
        with pytest.raises(ValidationError, match=field):
            StoreConfig(**bad)


def test_open_refuses_a_foreign_database_and_a_missing_store(pg_server: PgServer) -> None:
    url = pg_server.fresh_empty()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE memories (x int)")
    with pytest.raises(ValidationError, match="another application"):
        MemoryStore.open(url, embedder=HashEmbedder(dim=8))
    with pytest.raises(NotFoundError, match="create=True"):
        MemoryStore.open(pg_server.fresh_empty(), embedder=HashEmbedder(dim=8), create=False)
    with pytest.raises(ValidationError, match="cannot connect"):
        MemoryStore.open("postgresql://nobody@127.0.0.1:1/none", embedder=HashEmbedder(dim=8))



def test_a_postgres_url_without_the_driver_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """The lean install has no psycopg: opening a PostgreSQL URL says which extra to install."""
    from runtime.errors import MissingDependencyError

    monkeypatch.setitem(sys.modules, "psycopg", None)  # import psycopg -> ImportError
    with pytest.raises(MissingDependencyError, match=r"memir-runtime\[postgres\]"):
        MemoryStore.open("postgresql://memir@localhost/memir", embedder=HashEmbedder(dim=8))
