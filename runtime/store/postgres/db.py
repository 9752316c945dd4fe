"""The single owner of a PostgreSQL store's connections: the pool, scoped transactions, admin paths.

Every statement a scope runs goes through :meth:`PgDB.scoped`: a transaction that first switches
to the app role (``SET LOCAL ROLE memir_app``) and names the scope (``SET LOCAL memir.user_id`` /
``memir.agent_id``), so the database's row-level security confines it whatever SQL follows.
Nested uses on one thread join the outer transaction (all or nothing as a whole). The cross-user
admin paths (``users``, ``stats``, ``forget_user``, ``scrub``, re-embedding) run as the URL's own
user, outside any scope, and are explicitly named.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Self, TypeVar

from ...encoders.embedder import Embedder
from ...errors import DeletionPendingError, MissingDependencyError, StorageError, ValidationError
from .. import tiers
from ..location import redact_url
from ..usage import Accesses, UsageBuffer
from . import vectors
from .schema import APP_ROLE, TENANT_TABLES, HnswSettings, hnsw_index_sql, migrate
from .vector_cache import ScopeCaches

__all__ = ["PgDB"]

T = TypeVar("T")


class PgDB:
    """One PostgreSQL store: a connection pool, scoped transactions and the explicit admin paths.

    Args:
        pool: a ``psycopg_pool.ConnectionPool`` of autocommit connections with pgvector registered.
        url: the store URL (shown without its password).
        embedder: the store's encoder.
        cold_vectors: the format archived memories' vectors are stored in (:mod:`runtime.store.tiers`).
    """

    def __init__(self, pool: Any, url: str, embedder: Embedder, *, exact_search_max: int = 20_000,
                 cold_vectors: str = "int8", hnsw: HnswSettings = HnswSettings()) -> None:
        self.cold_format: str = tiers.check_format(cold_vectors)
        self._pool = pool
        self.path = redact_url(url)
        self._embedder = embedder
        self._local = threading.local()
        self._url = url
        self.exact_search_max = exact_search_max
        self.hnsw = hnsw
        self._indexed: set[str] = set()     # HNSW indexes known valid
        self._building: set[str] = set()    # HNSW indexes this process is building
        self._large: dict[tuple[str, str], tuple[bool, float]] = {}  # scope -> (past exact_search_max, when)
        self._index_lock = threading.Lock()
        self.vector_caches = ScopeCaches()  # scopes' vectors and filter columns, for searches of the archive
        self.usage: UsageBuffer | None = None  # recall accesses written behind (runtime.store.usage)
        self._closed = False

    # ------------------------------------------------------------------ lifecycle
    @classmethod
    def open(cls, url: str, *, pool_size: int, create: bool, embedder: Embedder,
             exact_search_max: int = 20_000, cold_vectors: str = "int8", hnsw: HnswSettings = HnswSettings()) -> Self:
        """Connect, migrate (or check) the schema, and start the pool.

        Raises:
            MissingDependencyError: psycopg / psycopg_pool / pgvector are not installed.
            NotFoundError: no memir schema in the database and ``create`` is False.
            ValidationError: the server cannot be reached, or the database is not a memir store.
        """
        try:
            import psycopg
            from pgvector.psycopg import register_vector
            from psycopg_pool import ConnectionPool
        except ImportError as e:
            raise MissingDependencyError(
                "a PostgreSQL store needs psycopg 3, psycopg_pool and pgvector: "
                "pip install 'memir-runtime[postgres]'") from e
        where = redact_url(url)
        try:
            with psycopg.connect(url, autocommit=True) as conn:
                migrate(conn, create=create, where=where)
        except psycopg.OperationalError as e:
            raise ValidationError(f"cannot connect to the PostgreSQL store at {where}: {str(e).strip()}",
                                  field="url") from e

        def configure(conn: Any) -> None:
            register_vector(conn)
            # statements are prepared (parsed once), but always planned with their real parameters: a
            # cached generic plan for "this scope, this filter" can be orders of magnitude off for another
            conn.execute("SET plan_cache_mode = force_custom_plan")

        pool = ConnectionPool(url, min_size=1, max_size=max(1, pool_size), open=True, name="memir",
                              kwargs={"autocommit": True, "prepare_threshold": 2}, configure=configure)
        return cls(pool, url, embedder, exact_search_max=exact_search_max, cold_vectors=cold_vectors, hnsw=hnsw)

    @property
    def closed(self) -> bool:
        return self._closed

    def check_open(self) -> None:
        """Raise a typed error if the store was closed."""
        if self._closed:
            raise ValidationError("the store is closed; open it again with MemoryStore.open(url)", field="store")

    def close(self) -> None:
        """Apply pending recall accesses, then close every pooled connection. Idempotent."""
        if not self._closed:
            try:
                if self.usage is not None:
                    self.usage.close()
            finally:
                self._closed = True
                self._pool.close()

    # ------------------------------------------------------------------ recall accesses
    def flush_usage(self) -> None:
        """Apply the recall accesses pending in this process (not from inside a scoped transaction:
        the outermost operation does it)."""
        if self.usage is not None and self.usage.pending and not self.in_transaction:
            self.usage.flush()

    def erase_usage(self) -> None:
        """A deletion happened: apply the pending recall accesses and zero the journal that held them
        (by the buffer's flusher thread, once free, from inside a scoped transaction)."""
        if self.usage is not None:
            self.usage.erase(wait=not self.in_transaction)

    def apply_usage(self, accesses: Accesses) -> None:
        """Recall accesses ``{(user, agent): [(rowid, count, latest time)]}`` in one transaction as
        the app role, each scope's statement confined to it by row-level security (the transaction
        switches scope between statements), sent in one pipeline; rows since deleted are simply not
        there. Scopes and rows come sorted, so two processes applying at once lock in one order."""
        import psycopg
        from psycopg import sql

        def run() -> None:
            self.check_open()
            try:
                with self._pool.connection() as conn:
                    with conn.transaction(), conn.pipeline():
                        conn.execute(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(APP_ROLE)))
                        for (user, agent), rows in accesses.items():
                            conn.execute("SELECT set_config('memir.user_id', %s, true), "
                                         "set_config('memir.agent_id', %s, true)", (user, agent))
                            conn.execute(
                                "UPDATE memories AS m SET access_count = m.access_count + u.n, last_accessed_at = u.at "
                                "FROM unnest(%b::bigint[], %b::bigint[], %b::float8[]) AS u(k, n, at) "
                                "WHERE m.rowid = u.k AND m.user_id = %s AND m.agent_id = %s",
                                [[r for r, _, _ in rows], [n for _, n, _ in rows], [at for _, _, at in rows],
                                 user, agent])
            except (psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure):
                raise  # transient: retried whole below
            except psycopg.OperationalError as e:
                raise StorageError(f"the PostgreSQL store at {self.path} failed: {str(e).strip()}") from e

        self.retrying(run)

    @property
    def embedder(self) -> Embedder:
        """The store's encoder."""
        return self._embedder

    # ------------------------------------------------------------------ transactions
    @contextmanager
    def scoped(self, user_id: str, agent_id: str) -> Iterator[Any]:
        """A transaction confined to one scope by row-level security; yields the connection.

        Nested uses on the same thread join the outer transaction (it must be the same scope).
        """
        outer = getattr(self._local, "scoped", None)
        if outer is not None:
            conn, scope = outer
            if scope != (user_id, agent_id):
                raise RuntimeError(f"a transaction of scope {scope} cannot nest one of {(user_id, agent_id)}")
            yield conn
            return
        self.check_open()
        import psycopg
        from psycopg import sql

        try:
            with self._pool.connection() as conn:
                conn.execute(sql.SQL("BEGIN; SET LOCAL ROLE {}; SET LOCAL memir.user_id = {}; "
                                     "SET LOCAL memir.agent_id = {}").format(
                    sql.Identifier(APP_ROLE), sql.Literal(user_id), sql.Literal(agent_id)))
                self._local.scoped = (conn, (user_id, agent_id))
                try:
                    yield conn
                except BaseException:
                    self._local.scoped = None
                    if not conn.closed:
                        conn.execute("ROLLBACK")
                    raise
                self._local.scoped = None
                conn.execute("COMMIT")
        except (psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure):
            raise  # transient: the caller's retry loop (``retrying``) runs the whole call again
        except psycopg.OperationalError as e:
            raise StorageError(f"the PostgreSQL store at {self.path} failed: {str(e).strip()}") from e

    @property
    def in_transaction(self) -> bool:
        """Whether this thread is inside a scoped transaction (nested calls must not retry)."""
        return getattr(self._local, "scoped", None) is not None

    def retrying(self, fn: Callable[[], T], attempts: int = 5) -> T:
        """Run ``fn`` (which opens its own scoped transactions), again when it loses a deadlock or a
        serialization conflict to another client — the whole call, since its transaction rolled
        back. Inside an outer transaction it runs once (the outer call retries).

        Raises:
            StorageError: it lost every attempt.
        """
        import psycopg

        if self.in_transaction:
            return fn()
        for attempt in range(attempts):
            try:
                return fn()
            except (psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure) as e:
                if attempt == attempts - 1:
                    raise StorageError(f"gave up after {attempts} attempts lost to concurrent clients: "
                                       f"{e.diag.message_primary}") from e
                time.sleep(random.uniform(0.005, 0.05) * (attempt + 1))
        raise AssertionError("unreachable")

    @contextmanager
    def admin(self) -> Iterator[Any]:
        """A transaction as the store's owner, unconfined (admin paths only)."""
        self.check_open()
        with self._pool.connection() as conn, conn.transaction():
            yield conn

    # ------------------------------------------------------------------ vector indexes
    def scope_is_large(self, user_id: str, agent_id: str) -> bool:
        """Whether the scope has had more than ``exact_search_max`` writes (checked in the database at
        most every 30 s per scope and process: a scope grows past the threshold slowly)."""
        key = (user_id, agent_id)
        now = time.monotonic()
        hit = self._large.get(key)
        if hit is not None and now - hit[1] < 30.0:
            return hit[0]
        with self.scoped(user_id, agent_id) as conn:
            row = conn.execute("SELECT seq FROM scopes WHERE user_id = %s AND agent_id = %s",
                               (user_id, agent_id)).fetchone()
        large = row is not None and int(row[0]) > self.exact_search_max
        if len(self._large) > 100_000:
            self._large.clear()
        self._large[key] = (large, now)
        return large

    def vector_index_ready(self, user_id: str, agent_id: str, encoder_id: str, dim: int) -> bool:
        """Whether the scope's HNSW index exists and is valid. When it does not, a build starts in
        a background thread (once per process; other processes coordinate through an advisory
        lock), and searches stay exact until it is ready."""
        name, _ = hnsw_index_sql(user_id, agent_id, encoder_id, dim)
        if name in self._indexed:
            return True
        with self._pool.connection() as conn:
            row = conn.execute("SELECT i.indisvalid FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid "
                               "WHERE c.relname = %s", (name,)).fetchone()
        if row is not None and row[0]:
            self._indexed.add(name)
            return True
        with self._index_lock:
            if name not in self._building:
                self._building.add(name)
                threading.Thread(target=self._build_quietly, args=(user_id, agent_id, encoder_id, dim),
                                 name=f"memir-hnsw-{name}", daemon=True).start()
        return False

    def _build_quietly(self, *key: Any) -> None:
        try:
            self.build_vector_index(*key)
        except Exception:  # noqa: BLE001 - a background build that fails leaves searches exact; retried later
            pass
        finally:
            with self._index_lock:
                self._building.discard(hnsw_index_sql(*key)[0])

    def build_vector_index(self, user_id: str, agent_id: str, encoder_id: str, dim: int) -> bool:
        """Build the scope's HNSW index now (``CREATE INDEX CONCURRENTLY``: writers are not
        blocked). Returns False when another client holds the build. An invalid index left by an
        interrupted build is dropped and rebuilt."""
        import psycopg

        name, ddl = hnsw_index_sql(user_id, agent_id, encoder_id, dim, self.hnsw)
        with psycopg.connect(self._url, autocommit=True) as conn:
            key = int.from_bytes(name.encode()[-8:], "big") & 0x7FFFFFFFFFFFFFFF
            got = conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
            if not (got and got[0]):
                return False
            try:
                row = conn.execute("SELECT i.indisvalid FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid "
                                   "WHERE c.relname = %s", (name,)).fetchone()
                if row is not None and not row[0]:
                    conn.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")
                # the graph must fit in maintenance memory, or pgvector falls back to a far slower build
                conn.execute("SET maintenance_work_mem = '512MB'")
                conn.execute(ddl)
            finally:
                conn.execute("SELECT pg_advisory_unlock(%s)", (key,))
        self._indexed.add(name)
        return True

    def build_indexes(self, encoder_id: str, dim: int) -> list[str]:
        """Build now the HNSW index of every scope past ``exact_search_max`` (after a bulk import;
        otherwise each is built in the background on its first search). Returns their names."""
        out = []
        for user_id, agent_id in self.large_scopes(self.exact_search_max):
            self.build_vector_index(user_id, agent_id, encoder_id, dim)
            out.append(hnsw_index_sql(user_id, agent_id, encoder_id, dim)[0])
        return out

    def large_scopes(self, min_writes: int) -> list[tuple[str, str]]:
        """Scopes with more than ``min_writes`` writes (admin: which ones get an HNSW index)."""
        with self.admin() as conn:
            return [(u, a) for u, a in conn.execute(
                "SELECT user_id, agent_id FROM scopes WHERE seq > %s ORDER BY user_id, agent_id", (min_writes,))]

    def drop_vector_indexes(self, user_id: str) -> None:
        """Drop every HNSW index of ``user_id``'s scopes (they hold the user's vectors)."""
        # the user id as it appears in the index predicate, with LIKE's wildcards escaped: `_` is an
        # id character, and unescaped it (or a `%`) would match — and drop — other users' indexes
        quoted = user_id.replace("'", "''")
        pattern = "".join("\\" + c if c in "\\%_" else c for c in f"user_id = '{quoted}'::text")
        with self._pool.connection() as conn:
            names = [r[0] for r in conn.execute(
                "SELECT indexname FROM pg_indexes WHERE tablename = 'vectors' AND indexname LIKE 'ix_vec_hnsw_%%' "
                "AND indexdef LIKE %s", (f"%{pattern}%",))]
            for name in names:
                conn.execute(f"DROP INDEX IF EXISTS {name}")
                self._indexed.discard(name)

    def drop_caches(self) -> None:
        """Forget every scope's vectors this process holds (:mod:`.vector_cache`; they reload on use)."""
        self.vector_caches.drop()

    # ------------------------------------------------------------------ admin (cross-user, explicit)
    def users(self) -> list[tuple[str, str, int]]:
        """(user_id, agent_id, memory count) for every scope with memories."""
        with self.admin() as conn:
            rows = conn.execute("SELECT user_id, agent_id, count(*) FROM memories "
                                "GROUP BY user_id, agent_id ORDER BY user_id, agent_id").fetchall()
        return [(u, a, int(n)) for u, a, n in rows]

    def stats(self) -> dict[str, Any]:
        """Counts by tier, source type, role, sensitivity and user; encoders; the last decisions;
        old row versions (deleted or updated) not yet scrubbed from the table files (``dead_rows``,
        ``scrub_pending``)."""
        with self.admin() as conn:
            q = conn.execute
            out: dict[str, Any] = {"path": self.path, "backend": "postgresql",
                                   "memories": int(q("SELECT count(*) FROM memories").fetchone()[0])}
            for col in ("tier", "source_type", "active_role", "sensitivity", "user_id"):
                out[f"by_{col}"] = {k: int(n) for k, n in q(f"SELECT {col}, count(*) FROM memories GROUP BY {col}")}
            out["encoders"] = {k: int(n) for k, n in q("SELECT encoder_id, count(*) FROM vectors GROUP BY encoder_id")}
            out["tiers"] = _tier_stats(q)
            out["cold_format"] = self.cold_format
            out["last_decisions"] = [json.loads(p) for (p,) in q(
                "SELECT payload FROM decisions ORDER BY id DESC LIMIT 5").fetchall()]
            # Old row versions (deleted or updated rows) whose bytes stay in the table files until the next
            # scrub (VACUUM FULL): the server's statistics, so approximate and a little behind.
            dead = q("SELECT coalesce(sum(n_dead_tup), 0) FROM pg_stat_user_tables "
                     "WHERE relname = ANY(%s)", (list(TENANT_TABLES),)).fetchone()[0]
            out["dead_rows"] = int(dead)
            out["scrub_pending"] = int(dead) > 0
        return out

    def experiments(self) -> list[str]:
        """Admin path: the experiments outcome events were recorded under, by name."""
        with self.admin() as conn:
            return [str(k) for (k,) in conn.execute(
                "SELECT DISTINCT j.key FROM feedback f, jsonb_each_text(f.arms::jsonb) j ORDER BY 1")]

    def outcome_counts(self, experiment: str) -> list[tuple[str, str, str, int, float]]:
        """Admin path: ``(user_id, arm, kind, events, sum of values)`` of one experiment's outcome
        events, aggregated in the database (what ``runtime.experiments.report`` reads)."""
        with self.admin() as conn:
            rows = conn.execute(
                "SELECT f.user_id, j.value, f.kind, count(*), coalesce(sum(f.value), 0) FROM feedback f, "
                "jsonb_each_text(f.arms::jsonb) j WHERE j.key = %s GROUP BY f.user_id, j.value, f.kind",
                (experiment,)).fetchall()
        return [(str(u), str(a), str(k), int(n), float(t)) for u, a, k, n, t in rows]

    def forget_user(self, user_id: str, wait_s: float = 30.0) -> int:
        """Delete everything of ``user_id`` in every table, then :meth:`scrub` (``VACUUM (FULL)``
        and ``CHECKPOINT``). Returns the number of memories deleted.

        Raises:
            DeletionPendingError: the rows are deleted but the scrub could not run (the message says why).
        """
        self.flush_usage()  # the journal's lines about the user's rows applied (the scrub below zeroes it)
        with self.admin() as conn:
            n = int(conn.execute("SELECT count(*) FROM memories WHERE user_id = %s", (user_id,)).fetchone()[0])
            for table in ("recall_log", "feedback", "decisions", "memories", "scopes"):  # cascades take the children
                conn.execute(f"DELETE FROM {table} WHERE user_id = %s", (user_id,))
        self.vector_caches.drop(user_id)
        self.drop_vector_indexes(user_id)
        self.scrub(wait_s)
        return n

    def scrub(self, wait_s: float = 30.0) -> None:
        """Rewrite every tenant table without its dead rows (``VACUUM (FULL)``: new files; the old ones
        are truncated when it commits), then ``CHECKPOINT`` so the new files are written out.

        ``VACUUM (FULL)`` takes an exclusive lock per table while it rewrites it: other clients wait
        (this waits up to ``wait_s`` for the lock, then raises). ``CHECKPOINT`` needs the
        ``pg_checkpoint`` role (or superuser); without it the server's own next checkpoint does the
        same. WAL segments written before may still hold the deleted rows until the server recycles
        and overwrites them (see docs/security.md).

        Raises:
            DeletionPendingError: a table's lock could not be had within ``wait_s``; the rows are
                deleted (invisible to every reader) but their bytes are still in that table's file.
        """
        self.erase_usage()
        import psycopg

        self.check_open()
        with self._pool.connection() as conn:
            try:
                conn.execute(f"SET lock_timeout = {max(1, int(wait_s * 1000))}")
                conn.execute(f"VACUUM (FULL) {', '.join(TENANT_TABLES)}")
            except psycopg.errors.LockNotAvailable as e:
                raise DeletionPendingError(
                    f"deleted, but the old bytes are still in the table files of {self.path}: another client "
                    f"held a lock for more than {wait_s:g} s ({e.diag.message_primary}); run store.scrub() again "
                    "once long transactions end") from e
            finally:
                conn.execute("RESET lock_timeout")
            try:
                conn.execute("CHECKPOINT")
            except psycopg.errors.InsufficientPrivilege:
                pass  # the rewrite is committed; the server's next checkpoint writes the new files

    def checkpoint(self, wait_s: float = 0.0, *, required: bool = False) -> bool:
        """``CHECKPOINT`` (dirty pages to the table files). Returns whether it ran."""
        import psycopg

        self.check_open()
        with self._pool.connection() as conn:
            try:
                conn.execute("CHECKPOINT")
            except psycopg.errors.InsufficientPrivilege as e:
                if required:
                    raise DeletionPendingError(f"CHECKPOINT refused: {e.diag.message_primary}") from e
                return False
        return True

    def compact_vectors(self) -> int:
        """Re-encode every vector whose format does not match its tier (after ``cold_vectors``
        changed, or an upgrade); in chunks of rows, each its own transaction. Returns how many
        were rewritten."""
        self.check_open()
        return vectors.compact(self, self.cold_format)

    def stale_vectors(self, encoder_id: str) -> list[tuple[int, str]]:
        """(rowid, record JSON) of every memory with no vector from ``encoder_id`` (for re-embedding)."""
        with self.admin() as conn:
            return [(int(r), str(j)) for r, j in conn.execute(
                "SELECT m.rowid, m.record FROM memories m LEFT JOIN vectors v ON v.mem_rowid = m.rowid "
                "WHERE v.encoder_id IS NULL OR v.encoder_id != %s ORDER BY m.rowid", (encoder_id,))]

    def put_vectors(self, rows: list[tuple[int, bytes]], encoder_id: str, dim: int) -> None:
        """Replace the vectors of these rowids in one transaction (re-embedding): written at float32,
        then archived memories' re-encoded in the cold format."""
        import numpy as np

        with self.admin() as conn:
            with conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO vectors(mem_rowid, encoder_id, dim, vec, cold, fmt, user_id, agent_id) "
                    "SELECT %s, %s, %s, %s, NULL, 'float32', m.user_id, m.agent_id FROM memories m WHERE m.rowid = %s "
                    "ON CONFLICT (mem_rowid) DO UPDATE SET encoder_id = excluded.encoder_id, dim = excluded.dim, "
                    "vec = excluded.vec, cold = NULL, fmt = 'float32'",
                    [(rowid, encoder_id, dim, np.frombuffer(vec, dtype=np.float32), rowid) for rowid, vec in rows])
            vectors.conform(conn, self.cold_format, "TRUE", [], [rowid for rowid, _ in rows])


def _tier_stats(q: Callable[..., Any]) -> dict[str, dict[str, Any]]:
    """Per tier: memories, stored vector bytes (``cold`` bytes, or 4 per dimension of ``vec``) and
    vectors by format."""
    out: dict[str, dict[str, Any]] = {}
    for tier, n in q("SELECT tier, count(*) FROM memories GROUP BY tier ORDER BY tier"):
        out[str(tier)] = {"memories": int(n), "vector_bytes": 0, "formats": {}}
    for tier, fmt, n, size in q(
            "SELECT m.tier, v.fmt, count(*), sum(CASE WHEN v.cold IS NULL THEN 4 * v.dim "
            "ELSE octet_length(v.cold) END) FROM memories m JOIN vectors v ON v.mem_rowid = m.rowid "
            "GROUP BY m.tier, v.fmt ORDER BY m.tier, v.fmt"):
        t = out.setdefault(str(tier), {"memories": 0, "vector_bytes": 0, "formats": {}})
        t["vector_bytes"] += int(size or 0)
        t["formats"][str(fmt)] = int(n)
    return out
