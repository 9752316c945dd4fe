"""PostgreSQL row-level security under attack: in every case, 0 rows of another tenant.

- Filter values, recall queries, ids and tenant settings carrying SQL metacharacters (quotes,
  ``;``, ``--``, ``%``, ``_``, ``\\``, ``$$``, unicode, ``) OR 1=1 --``) — through the public API,
  and through the ``memir.user_id`` setting itself on a direct connection as the app role.
- One pooled connection reused by bob right after alice's transaction failed (an SQL error, an RLS
  violation, a Python exception, a failed API call, an aborted transaction), was cancelled
  (``pg_cancel_backend``, a cancelled coroutine) or killed (``pg_terminate_backend``).
- Two tenants' calls interleaved from several threads (and coroutines) on one small pool, with
  failing transactions mixed in.
- The tenant context (``SET LOCAL ROLE memir_app`` + ``SET LOCAL memir.user_id/agent_id``) never
  outlives its transaction: after all of the above every pooled connection is idle, back to the
  store's own role, with no tenant set.
- ``forget_user`` with ``_``/``%`` in the id never touches another tenant's rows or HNSW index;
  a record whose JSON holds ``\\u0000`` never breaks a recall.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest

from runtime import MemoryStore, StoreConfig
from runtime.encoders import HashEmbedder
from runtime.errors import MemirError, NotFoundError, StorageError, ValidationError
from runtime.record.memir import MemIR, Provenance
from runtime.scoring.baselines import RecencyScorer
from runtime.store.postgres.schema import APP_ROLE, TENANT_TABLES

pytestmark = pytest.mark.postgres_only

DIM = 16
META = ["'; DROP TABLE memories; --", "' OR '1'='1", ") OR 1=1 --", "') OR ('a'='a", "%", "_", "%%", "a%", "%a_",
        "\\", "\\'", "'\\", "$$", "$q$ x $q$", "$$; DELETE FROM memories; $$", "ünïcødé ☃ 𝔘𝔫𝔦", "\u202etxet",
        "'", '"', ";", "--", "/* */", "a_b", "alice", "bob", "1=1", "* ", "tag' UNION SELECT record FROM memories --",
        # attempts to leave the app role or switch the tenant from inside a value
        "'; RESET ROLE; --", "'; SET ROLE postgres; --", "x'; SET LOCAL ROLE NONE; --", "'; RESET ALL; --",
        "'; SELECT set_config('memir.user_id', 'alice', false); --", "'); SET memir.user_id = 'alice'; --",
        "$$; RESET ROLE; $$", "memir.user_id=alice"]
FILTERS = ("tags", "sub_roles", "roles", "sessions", "exclude_sessions", "task_ids")


def _open(url: str, pool_size: int = 2, **cfg: Any) -> MemoryStore:
    return MemoryStore.open(url, embedder=HashEmbedder(dim=DIM), config=StoreConfig(pool_size=pool_size, **cfg))


def _seed(store: MemoryStore) -> dict[str, list[str]]:
    """alice and bob with the *same* hostile tags, roles, sessions and tasks (so only the tenant
    separates their rows), each content marked with its owner."""
    ids: dict[str, list[str]] = {}
    for who in ("alice", "bob"):
        items: list[dict[str, Any]] = [
            {"content": f"{who.upper()}-ROW {i}: the vault code of {who} is {i}{i}{i}", "tags": [tag[:128], "shared"],
             "sub_role": tag, "attributes": {"note": tag}, "session_id": "sess_shared", "task_id": "task.shared"}
            for i, tag in enumerate(t for t in META if t.strip())]
        items.append({"content": f"{who.upper()}-ROW plain: the vault code of {who}", "tags": ["_", "a_b", "shared"],
                      "sub_role": "a_b", "session_id": "a_b", "task_id": "a_b"})
        ids[who] = [r.id for r in store.scope(user_id=who).write_many(items)]
    store.scope(user_id="alice", agent_id="planner").write("ALICE-ROW planner: alice's other agent")
    return ids


def _counts(url: str) -> dict[tuple[str, str], int]:
    """Rows of every tenant table by owner, as the superuser sees them (what is really stored)."""
    out: dict[tuple[str, str], int] = {}
    with psycopg.connect(url, autocommit=True) as conn:
        for table in TENANT_TABLES:
            for user, n in conn.execute(f"SELECT user_id, count(*) FROM {table} GROUP BY user_id"):
                out[(table, user)] = int(n)
    return out


def _only(who: str, records: list[MemIR]) -> None:
    other = "ALICE" if who == "bob" else "BOB"
    for r in records:
        assert r.provenance.user_id == who and r.provenance.agent_id == "default", r
        assert other not in r.content and "planner" not in r.content, r.content


@contextmanager
def _as_app_role(url: str, user: str | None, agent: str | None = "default") -> Iterator[psycopg.Connection[Any]]:
    """A direct connection switched to the app role, with the tenant settings given (``None``: unset)."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"SET ROLE {APP_ROLE}")
        if user is not None:
            conn.execute("SELECT set_config('memir.user_id', %s, false), set_config('memir.agent_id', %s, false)",
                         (user, agent))
        yield conn


def _pool_is_clean(store: MemoryStore, url: str) -> None:
    """Every connection the store's pool holds (up to its size): idle, as the store's own user,
    no tenant set — nothing of the last transaction carried over."""
    pool = store.backend._pool  # type: ignore[attr-defined]
    conns = [pool.getconn(timeout=30) for _ in range(pool.max_size)]
    try:
        for conn in conns:
            assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
            cur_user, sess_user, uid, aid = conn.execute(
                "SELECT current_user, session_user, current_setting('memir.user_id', true), "
                "current_setting('memir.agent_id', true)").fetchone()
            assert cur_user == sess_user != APP_ROLE, (cur_user, sess_user)
            assert uid in (None, "") and aid in (None, ""), (uid, aid)
    finally:
        for conn in conns:
            pool.putconn(conn)
    with psycopg.connect(url, autocommit=True) as admin:  # no session idles in a transaction
        states = [s for (s,) in admin.execute(
            "SELECT state FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() "
            "AND backend_type = 'client backend'")]
        assert all(s == "idle" for s in states), states


def _bob_sees_only_bob(store: MemoryStore, alice_ids: list[str]) -> int:
    """bob's reads after whatever just happened: only his rows; alice's ids do not exist for him."""
    bob = store.scope(user_id="bob")
    _only("bob", bob.list())
    _only("bob", [h.record for h in bob.recall("the vault code of alice", k=50, tier="any")])
    _only("bob", bob.list(tags=["shared"], tier="any"))
    for mid in alice_ids[:3]:
        with pytest.raises(NotFoundError):
            bob.get(mid)
    return 4


# ---------------------------------------------------------------------------------------------- metacharacters

def test_sql_metacharacters_in_every_filter_return_nothing_of_another_tenant(store_target: Any) -> None:
    url = store_target("meta")
    store = _open(url)
    try:
        ids = _seed(store)
        before = _counts(url)
        bob = store.scope(user_id="bob")
        n_bob = bob.count(tier="any")
        cases = refused = 0
        for field in FILTERS:
            for value in META + ["sess_shared", "task.shared", "shared", "a_b"]:
                flt = {field: [value]}
                for op in ("list", "count", "recall", "with_vectors"):
                    cases += 1
                    try:
                        if op == "list":
                            _only("bob", bob.list(tier="any", **flt))
                        elif op == "count":
                            assert 0 <= bob.count(tier="any", **flt) <= n_bob
                        elif op == "recall":
                            _only("bob", [h.record for h in bob.recall(value if value.strip() else "vault", k=50,
                                                                       tier="any", **flt)])
                        else:
                            recs, vecs, _ = bob.list_with_vectors(tier="any", **flt)
                            _only("bob", recs)
                            assert len(vecs) == len(recs)
                    except ValidationError as e:  # FilterError: a value that is no category name
                        assert "ALICE" not in str(e)
                        refused += 1
        # the values that are valid names match bob's copies and never alice's
        assert len(bob.list(tags=["_"])) == len(bob.list(tags=["a_b"])) == 2  # its META row and the plain one
        assert len(bob.list(sessions=["sess_shared"])) == len(ids["bob"]) - 1
        # recall queries and since/until strings carrying metacharacters
        for value in META:
            if value.strip():
                cases += 1
                _only("bob", [h.record for h in bob.recall(value, k=50, tier="any")])
        for value in META + ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-14:00", "2025-13-01"]:
            for field in ("since", "until"):
                cases += 1
                try:
                    _only("bob", bob.list(tier="any", **{field: value}))
                except ValidationError:
                    refused += 1
        # ids: alice's, and id-shaped or hostile strings, through every call that takes one
        for mid in ids["alice"][:5] + META + ["mem_%", "mem_" + "_" * 32]:
            for call in (bob.get, bob.explain, bob.history, lambda m: bob.forget(m, reason="x"),
                         lambda m: bob.tag([m], ["t"]), lambda m: bob.update(m, "BOB overwrites")):
                cases += 1
                with pytest.raises((NotFoundError, ValidationError)) as e:
                    call(mid)
                assert "ALICE" not in str(e.value) and "vault" not in str(e.value)
        # bob writing into alice's rows: her id, her id as a parent, her user_id on the record
        for item in ({"id": ids["alice"][0], "content": "BOB takes her id"},
                     {"content": "BOB derives from hers", "derived_from": [ids["alice"][0]]},
                     {"content": "BOB supersedes hers", "supersedes": ids["alice"][0]}):
            cases += 1
            with pytest.raises(ValidationError) as e:
                bob.write(item.pop("content"), **item)
            assert "ALICE" not in str(e.value)
        cases += 1
        with pytest.raises(ValidationError):
            bob.write(MemIR(content="BOB as alice", provenance=Provenance(user_id="alice")))
        bob.retain(capacity=1, scorer=RecencyScorer())  # a decision over bob's scope archives only his rows
        bob.forget(ids["bob"][0], cascade="delete", reason="'; DROP TABLE memories; --")
        after = _counts(url)
        assert {k: v for k, v in after.items() if k[1] == "alice"} == \
            {k: v for k, v in before.items() if k[1] == "alice"}  # not one of alice's rows changed
        assert cases >= 700 and refused > 0, (cases, refused)
        print(f"\nmetacharacter cases: {cases} ({refused} refused by name)")
    finally:
        store.close()


def test_the_tenant_setting_itself_cannot_be_injected(store_target: Any) -> None:
    """As the app role on a direct connection: ``memir.user_id`` holding SQL matches no row (the
    policy compares it as a value); unset, empty or wildcard settings see nothing; the planner's
    statistics of RLS tables are hidden from the role."""
    url = store_target("setting")
    store = _open(url)
    try:
        _seed(store)
    finally:
        store.close()
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute("ANALYZE")
    cases = 0
    hostile = META + ["alice' OR '1'='1", "alice'--", "alice\\", "ALICE", "alice ", " alice", "alic_", "alice%",
                      "", "default", "*"]
    for user in [*hostile, None]:
        for agent in ("default", "' OR '1'='1", "%", None):
            with _as_app_role(url, user, agent) as conn:
                for table in TENANT_TABLES:
                    cases += 1
                    n = conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
                    if user in ("alice", "bob") and agent == "default":
                        seen = {u for (u,) in conn.execute(f"SELECT DISTINCT user_id FROM {table}")}
                        assert seen <= {user}, (table, user, seen)
                    else:
                        assert n == 0, (table, user, agent, n)
    with _as_app_role(url, "bob") as conn:
        cases += 1
        assert conn.execute("SELECT count(*) FROM pg_stats WHERE tablename = ANY(%s)",
                            (list(TENANT_TABLES),)).fetchone()[0] == 0  # no most_common_vals of alice's rows
        cases += 1  # bob cannot rewrite alice's rows even by naming them
        assert conn.execute("UPDATE memories SET record = 'x' WHERE user_id = 'alice'").rowcount == 0
        assert conn.execute("DELETE FROM memories WHERE user_id = 'alice' OR 1=1").rowcount > 0  # his own only
    assert _counts(url)[("memories", "alice")] == len(META) + 1 + 1  # alice's, and her planner's
    assert cases == (len(hostile) + 1) * 4 * len(TENANT_TABLES) + 2


# ---------------------------------------------------------------------------------------------- reused connections

class _Boom(BaseException):
    """Not an Exception: takes the BaseException path out of a scoped transaction."""


@contextmanager
def _locked_scope_row(url: str, user: str) -> Iterator[psycopg.Connection[Any]]:
    """Hold ``user``'s row of ``scopes`` locked, so that user's next write waits."""
    with psycopg.connect(url) as conn:
        conn.execute("SELECT 1 FROM scopes WHERE user_id = %s AND agent_id = 'default' FOR UPDATE", (user,))
        yield conn
        conn.rollback()


def _waiting_pid(url: str, timeout: float = 20.0) -> int:
    with psycopg.connect(url, autocommit=True) as admin:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            row = admin.execute("SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                                "AND wait_event_type = 'Lock'").fetchone()
            if row:
                return int(row[0])
            time.sleep(0.02)
    raise AssertionError("the write never waited on the lock")


def test_a_connection_reused_after_a_failed_or_cancelled_transaction_carries_nothing_over(store_target: Any) -> None:
    """pool_size=1: bob's next call runs on the very connection alice's transaction just failed on
    (or a fresh one, when it was killed)."""
    url = store_target("reuse")
    store = _open(url, pool_size=1)
    try:
        ids = _seed(store)
        alice, db = store.scope(user_id="alice"), store.backend
        n_alice = _counts(url)[("memories", "alice")]
        failures: list[tuple[str, Callable[[], None], type[BaseException] | tuple[type[BaseException], ...]]] = []

        def sql_error() -> None:
            with db.scoped("alice", "default") as conn:  # type: ignore[attr-defined]
                conn.execute("UPDATE memories SET utility = 42")
                conn.execute("SELECT 1/0")

        def rls_violation() -> None:
            with db.scoped("alice", "default") as conn:  # type: ignore[attr-defined]
                conn.execute("INSERT INTO recall_log(user_id, agent_id, at, payload) VALUES ('bob', 'default', 0, '{}')")

        def python_error() -> None:
            with db.scoped("alice", "default") as conn:  # type: ignore[attr-defined]
                conn.execute("UPDATE memories SET utility = 42")
                raise RuntimeError("the caller's code failed mid-transaction")

        def base_exception() -> None:
            with db.scoped("alice", "default") as conn:  # type: ignore[attr-defined]
                conn.execute("UPDATE memories SET utility = 42")
                raise _Boom()

        def aborted_then_more() -> None:
            with db.scoped("alice", "default") as conn:  # type: ignore[attr-defined]
                try:
                    conn.execute("SELECT 1/0")
                except psycopg.errors.DivisionByZero:
                    pass
                conn.execute("SELECT count(*) FROM memories")  # in a failed transaction

        def set_other_tenant() -> None:  # even raw SQL switching tenants dies with its transaction
            with db.scoped("alice", "default") as conn:  # type: ignore[attr-defined]
                conn.execute("SET LOCAL memir.user_id = 'bob'")
                conn.execute("SELECT 1/0")

        def nested_other_scope() -> None:  # bob's call inside alice's transaction, on her thread
            with db.scoped("alice", "default"):  # type: ignore[attr-defined]
                store.scope(user_id="bob").list()

        def duplicate_id() -> None:  # a unique violation inside the write's transaction
            alice.write("ALICE-ROW duplicate", id=ids["alice"][0])

        def missing_parent() -> None:  # refused inside the write's transaction
            alice.write_many([{"content": "ALICE-ROW orphan", "derived_from": ["mem_nowhere"]}])

        def cancelled_statement() -> None:
            _blocked_write(url, store, "pg_cancel_backend")

        def killed_backend() -> None:
            _blocked_write(url, store, "pg_terminate_backend")

        failures += [("sql error", sql_error, psycopg.errors.DivisionByZero),
                     ("rls violation", rls_violation, psycopg.errors.InsufficientPrivilege),
                     ("python error", python_error, RuntimeError),
                     ("base exception", base_exception, _Boom),
                     ("aborted transaction", aborted_then_more, psycopg.errors.InFailedSqlTransaction),
                     ("switched tenant", set_other_tenant, psycopg.errors.DivisionByZero),
                     ("nested scope", nested_other_scope, RuntimeError),
                     ("duplicate id", duplicate_id, ValidationError),
                     ("missing parent", missing_parent, ValidationError),
                     ("cancelled statement", cancelled_statement, StorageError),
                     ("killed backend", killed_backend, StorageError)]
        checks = 0
        for name, fail, expected in failures:
            with pytest.raises(expected):
                fail()
            checks += _bob_sees_only_bob(store, ids["alice"])
            _pool_is_clean(store, url)
            _only("alice", alice.list())  # and alice's own scope still works, unchanged
            with psycopg.connect(url, autocommit=True) as admin:
                assert admin.execute("SELECT count(*) FROM memories WHERE utility = 42").fetchone()[0] == 0, name
            assert _counts(url)[("memories", "alice")] == n_alice, name

        # a transaction that switches its own tenant and commits: the switch ends with it
        with db.scoped("alice", "default") as conn:  # type: ignore[attr-defined]
            conn.execute("SET LOCAL memir.user_id = 'bob'")
            assert {u for (u,) in conn.execute("SELECT DISTINCT user_id FROM memories")} == {"bob"}
        checks += _bob_sees_only_bob(store, ids["alice"])
        _pool_is_clean(store, url)

        # a cancelled coroutine: its write, already on a thread, completes once the lock is gone
        async def cancel_a_write() -> None:
            with _locked_scope_row(url, "alice"):
                task = asyncio.ensure_future(alice.awrite("ALICE-ROW written by a cancelled coroutine"))
                await asyncio.to_thread(_waiting_pid, url)  # the loop keeps running the write meanwhile
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
            for _ in range(200):  # the thread finishes its write after the lock is released
                if _counts(url)[("memories", "alice")] == n_alice + 1:
                    break
                await asyncio.sleep(0.02)

        asyncio.run(cancel_a_write())
        assert _counts(url)[("memories", "alice")] == n_alice + 1
        checks += _bob_sees_only_bob(store, ids["alice"])
        _pool_is_clean(store, url)
        print(f"\nfailure kinds: {len(failures) + 2}, checks after them: {checks}")
    finally:
        store.close()


def _blocked_write(url: str, store: MemoryStore, how: str) -> None:
    """alice's write, blocked on a row lock, then cancelled or killed from outside; re-raises its error."""
    errors: list[BaseException] = []

    def write() -> None:
        try:
            store.scope(user_id="alice").write("ALICE-ROW blocked write")
        except BaseException as e:  # noqa: BLE001 - handed to the test thread
            errors.append(e)

    with _locked_scope_row(url, "alice"):
        t = threading.Thread(target=write)
        t.start()
        pid = _waiting_pid(url)
        with psycopg.connect(url, autocommit=True) as admin:
            assert admin.execute(f"SELECT {how}(%s)", (pid,)).fetchone()[0]
        t.join(30)
    assert not t.is_alive() and len(errors) == 1, errors
    assert isinstance(errors[0], MemirError), repr(errors[0])  # typed: StorageError, never psycopg's own
    raise errors[0]


# ---------------------------------------------------------------------------------------------- interleaving

def test_two_tenants_interleaved_on_one_pool_from_many_threads(store_target: Any) -> None:
    url = store_target("threads")
    store = _open(url, pool_size=3)
    try:
        ids = _seed(store)
        db = store.backend
        problems: list[str] = []
        written: dict[str, int] = {"alice": 0, "bob": 0}
        lock = threading.Lock()
        ops = {"n": 0}
        start = threading.Barrier(8)

        def worker(who: str, seed: int) -> None:
            other = "bob" if who == "alice" else "alice"
            me = store.scope(user_id=who)
            rng = random.Random(seed)
            start.wait()
            for i in range(30):
                op = rng.choice(["write", "list", "recall", "get", "other", "count", "fail", "tag_filter"])
                try:
                    if op == "write":
                        me.write(f"{who.upper()}-ROW thread {seed}.{i}", tags=["shared", rng.choice(META)[:128] or "x"])
                        with lock:
                            written[who] += 1
                    elif op == "list":
                        _only(who, me.list(tier="any"))
                    elif op == "recall":
                        _only(who, [h.record for h in me.recall(f"the vault code of {other}", k=20, tier="any")])
                    elif op == "get":
                        assert me.get(ids[who][i % len(ids[who])]).provenance.user_id == who
                    elif op == "other":
                        try:
                            me.get(ids[other][i % len(ids[other])])
                            problems.append(f"{who} read {other}'s memory")
                        except NotFoundError:
                            pass
                    elif op == "count":
                        assert me.count(tier="any", tags=["shared"]) >= 1
                    elif op == "tag_filter":
                        _only(who, me.list(tags=["a_b", "_"], sub_roles=["a_b"], sessions=["a_b"]))
                    else:  # a failing transaction of this tenant between the others' calls
                        try:
                            with db.scoped(who, "default") as conn:  # type: ignore[attr-defined]
                                conn.execute("UPDATE memories SET utility = 42")
                                conn.execute(rng.choice(["SELECT 1/0", "SELECT * FROM nowhere",
                                                         "SET LOCAL memir.user_id = 'x'; SELECT 1/0"]))
                        except psycopg.Error:
                            pass
                except AssertionError as e:
                    problems.append(f"{who} {op}: {e}")
                except Exception as e:  # noqa: BLE001 - any other error is a finding too
                    problems.append(f"{who} {op}: {type(e).__name__}: {e}")
                with lock:
                    ops["n"] += 1

        threads = [threading.Thread(target=worker, args=(who, k)) for k in range(4) for who in ("alice", "bob")]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert not problems, problems[:10]
        assert ops["n"] == 8 * 30

        # coroutines too: both tenants' async calls gathered on one loop, over the same pool
        async def both() -> None:
            a, b = store.scope(user_id="alice"), store.scope(user_id="bob")
            results = await asyncio.gather(*[
                coro for k in range(6) for coro in (
                    a.arecall("the vault code of bob", k=20, tier="any"), b.arecall("the vault code of alice", k=20),
                    a.alist(tier="any"), b.alist(tier="any"),
                    a.awrite(f"ALICE-ROW async {k}"), b.awrite(f"BOB-ROW async {k}"))])
            for j, res in enumerate(results):
                who = "alice" if j % 2 == 0 else "bob"
                recs = [h.record for h in res] if j % 6 < 2 else res if j % 6 < 4 else [res]
                _only(who, recs)
            written["alice"] += 6
            written["bob"] += 6

        asyncio.run(both())
        _pool_is_clean(store, url)
        counts = _counts(url)
        assert counts[("memories", "alice")] == len(ids["alice"]) + 1 + written["alice"]
        assert counts[("memories", "bob")] == len(ids["bob"]) + written["bob"]
        with psycopg.connect(url, autocommit=True) as admin:
            assert admin.execute("SELECT count(*) FROM memories WHERE utility = 42").fetchone()[0] == 0
            # every child row belongs to the tenant of its memory
            for table in ("memory_tags", "vectors", "memory_parents", "memory_links", "memory_context"):
                assert admin.execute(f"SELECT count(*) FROM {table} c JOIN memories m ON m.rowid = c.mem_rowid "
                                     f"WHERE (c.user_id, c.agent_id) <> (m.user_id, m.agent_id)").fetchone()[0] == 0
    finally:
        store.close()


# ---------------------------------------------------------------------------------------------- admin and JSON edges

def test_forget_user_with_wildcards_touches_no_other_tenant(store_target: Any) -> None:
    """``_`` is an id character and ``%`` is not: neither may reach LIKE as a wildcard. Every scope
    is past ``exact_search_max``, so each has an HNSW index of its own to lose."""
    url = store_target("wild")
    store = _open(url, exact_search_max=2)
    try:
        for who in ("alice", "a_ice", "bob", "b_b"):
            store.scope(user_id=who).write_many([f"{who} note {i}" for i in range(4)])
        assert len(store.admin_build_indexes()) == 4

        def indexed() -> set[str]:
            with psycopg.connect(url, autocommit=True) as conn:
                defs = [d for (d,) in conn.execute("SELECT indexdef FROM pg_indexes WHERE indexname LIKE 'ix_vec_hnsw%'")]
            return {u for u in ("alice", "a_ice", "bob", "b_b") for d in defs if f"user_id = '{u}'::text" in d}

        assert indexed() == {"alice", "a_ice", "bob", "b_b"}
        for hostile in ("%", "_", "%_%", "a%", "_____", "b%", "' OR '1'='1", "alice' OR user_id LIKE '%", "\\", "%\\"):
            assert store.forget_user(hostile) == 0
        assert indexed() == {"alice", "a_ice", "bob", "b_b"}
        assert store.forget_user("a_ice") == 4
        assert indexed() == {"alice", "bob", "b_b"}
        assert store.forget_user("b_b") == 4
        assert indexed() == {"alice", "bob"}
        counts = _counts(url)
        assert counts[("memories", "alice")] == counts[("memories", "bob")] == 4
        assert ("memories", "a_ice") not in counts and ("memories", "b_b") not in counts
        _only("alice", [h.record for h in store.scope(user_id="alice").recall("note", k=10)])
    finally:
        store.close()


def test_a_record_whose_json_holds_a_nul_escape_never_breaks_a_recall(store_target: Any) -> None:
    """Attribute values and ``source_uri`` may hold U+0000 (stored as ``\\u0000`` in the record's
    JSON text); PostgreSQL's jsonb cannot, so no statement may cast a record to jsonb."""
    url = store_target("nul")
    store = _open(url)
    try:
        alice, bob = store.scope(user_id="alice"), store.scope(user_id="bob")
        parent = alice.write("ALICE-ROW parent fact")
        alice.write("ALICE-ROW child", derived_from=[parent.id])
        alice.write("ALICE-ROW nul attr", attributes={"k": "a\x00b"})
        alice.write(MemIR(content="ALICE-ROW nul uri", provenance=Provenance(user_id="alice", source_uri="x\x00y")))
        alice.forget(parent.id, reason="user request")  # a redacted placeholder (its child derives from it)
        bob.write("BOB-ROW plain")
        for mix in (0.0, 0.5):
            _only("alice", [h.record for h in alice.recall("fact", k=10, session_mix=mix)])
            _only("bob", [h.record for h in bob.recall("fact", k=10, session_mix=mix)])
        recent = store.backend.tenant("alice", "default").recent_vectors(10)  # type: ignore[attr-defined]
        assert len(recent) == 3  # the placeholder is still left out
        assert any(r.metadata.attributes.get("k") == "a\x00b" for r in alice.list())
    finally:
        store.close()
