"""The single owner of one SQLite store file: connection, lock, transactions and vector caches.

Nothing else in memir holds the connection. A :class:`SqliteTenant` (one per ``(user, agent)``)
runs every scoped statement through this object's :meth:`SqliteDB.read` and
:meth:`SqliteDB.transaction`, and the cross-user admin paths (``users``, ``stats``,
``forget_user``, ``scrub``) live here, explicitly named.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Self

from ...encoders.embedder import Embedder
from ...errors import DeletionPendingError, NotFoundError, ValidationError
from .. import tiers
from ..scope_cache import MAX_BYTES, VectorCache
from ..usage import Accesses, UsageBuffer
from . import vectors as _vectors
from .schema import COUNT_ACCESSES, apply_pragmas, check_not_foreign, migrate
from .vector_cache import load_since

__all__ = ["SqliteDB"]

_SQLITE_MAGIC = b"SQLite format 3\x00"


def _data_version(conn: sqlite3.Connection) -> int:
    """Moves when another connection commits (never for this one's own commits)."""
    return int(conn.execute("PRAGMA data_version").fetchone()[0])


def _epoch(conn: sqlite3.Connection) -> str:
    """The store's ``vector_epoch``: moves whenever rows the caches mirror change or go."""
    return str(conn.execute("SELECT value FROM meta WHERE key='vector_epoch'").fetchone()[0])


class SqliteDB:
    """One SQLite file (or ``":memory:"``), thread-safe behind one re-entrant lock.

    Args:
        conn: an open connection (autocommit mode; see :meth:`open`).
        path: the file path or ``":memory:"``.
        embedder: the store's encoder (a :class:`~runtime.encoders.LazyEmbedder` loads it on first use).
    """

    def __init__(self, conn: sqlite3.Connection, path: str, embedder: Embedder, *, busy_ms: int = 5_000,
                 cold_vectors: str = "int8") -> None:
        self._conn = conn
        self.cold_format: str = tiers.check_format(cold_vectors)
        self.path = path
        self.in_memory = path == ":memory:"
        self.lock = threading.RLock()
        self._embedder = embedder
        # scopes' caches, least recently used first, and the bytes they hold (at most cache_bytes)
        self._caches: OrderedDict[tuple[str, str, str], VectorCache] = OrderedDict()
        self._cached_bytes = 0
        self.cache_bytes = MAX_BYTES
        self._through: list[VectorCache] | None = None  # caches the open transaction extended (write_through)
        self._inserting: set[tuple[str, str]] = set()  # scopes the open transaction inserted rows into
        self._closed = False
        self._busy_ms = int(busy_ms)
        self.scrub_pending = False  # a deletion's bytes could not leave the WAL yet (a reader held it)
        self.usage: UsageBuffer | None = None  # recall accesses written behind (runtime.store.usage)
        self._held = threading.local()  # this thread's depth of locked() (read(), transaction()) uses

    # ------------------------------------------------------------------ lifecycle
    @classmethod
    def open(cls, path: str | Path, *, busy_timeout_ms: int, create: bool, embedder: Embedder,
             cold_vectors: str = "int8") -> Self:
        """Open (and with ``create``, create) a store file, migrating an older layout.

        Raises:
            NotFoundError: the file does not exist and ``create`` is False.
            ValidationError: the path is a directory, not an SQLite file, or from a newer memir.
        """
        if not isinstance(path, (str, os.PathLike)):
            raise ValidationError(f"the store path must be a str or a Path, got {type(path).__name__}", field="path")
        path = os.fspath(path)
        if not isinstance(path, str):
            raise ValidationError("the store path must be text, not bytes", field="path")
        in_memory = path == ":memory:"
        if "\x00" in path:
            raise ValidationError("the store path contains a NUL character", field="path")
        try:
            return cls._open(path, in_memory, busy_timeout_ms, create, embedder, cold_vectors)
        except OSError as e:  # too long a name, no permission, a read-only directory...
            raise ValidationError(f"cannot open the store at {path[:200]!r}: {e.strerror or e}", field="path") from e

    @classmethod
    def _open(cls, path: str, in_memory: bool, busy_timeout_ms: int, create: bool, embedder: Embedder,
              cold_vectors: str) -> Self:
        if not in_memory:
            p = Path(path)
            if p.is_dir():
                raise ValidationError(f"{path} is a directory; give the path of a store file (e.g. agent.sqlite)",
                                      field="path")
            if p.exists():
                with open(p, "rb") as fh:
                    head = fh.read(16)
                if head and head != _SQLITE_MAGIC:
                    raise ValidationError(f"{path} is not a memir store (not an SQLite file)", field="path")
            elif not create:
                raise NotFoundError(f"no store at {path}; open it with create=True (CLI: --create) to make one")
            else:
                p.parent.mkdir(parents=True, exist_ok=True)
        try:
            conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False,
                                   timeout=busy_timeout_ms / 1000)
            try:
                check_not_foreign(conn, path)
            except ValidationError:
                conn.close()
                raise
            apply_pragmas(conn, busy_timeout_ms, in_memory)
            migrate(conn, path)
        except sqlite3.DatabaseError as e:
            raise ValidationError(f"{path} cannot be opened as a memir store: {e}", field="path") from e
        return cls(conn, path, embedder, busy_ms=busy_timeout_ms, cold_vectors=cold_vectors)

    @property
    def closed(self) -> bool:
        return self._closed

    def check_open(self) -> None:
        """Raise a typed error if the store was closed."""
        if self._closed:
            raise ValidationError("the store is closed; open it again with MemoryStore.open(path)", field="store")

    def close(self) -> None:
        """Apply pending recall accesses, checkpoint the WAL and close the file. Idempotent."""
        if self.usage is not None and not self._closed:
            self.usage.close()  # before the lock: its flusher thread may be waiting for it
        with self.lock:
            if self._closed:
                return
            try:
                if not self.in_memory:
                    self._try_truncate(0.0)
            finally:
                self._conn.close()
                self._closed = True
                self.drop_caches()

    # ------------------------------------------------------------------ recall accesses
    def flush_usage(self) -> None:
        """Apply the recall accesses pending in this process — not while this thread holds the
        store's lock (the outermost operation does it; the buffer's flusher thread takes the two
        locks in the other order)."""
        if self.usage is not None and self.usage.pending and not getattr(self._held, "n", 0):
            self.usage.flush()

    def erase_usage(self) -> None:
        """A deletion happened: apply the pending recall accesses and zero the journal that held them
        (by the buffer's flusher thread, once free, when this thread holds the store's lock)."""
        if self.usage is not None:
            self.usage.erase(wait=not getattr(self._held, "n", 0))

    def apply_usage(self, accesses: Accesses) -> None:
        """Recall accesses ``{(user, agent): [(rowid, count, latest time)]}`` in one transaction,
        each row matched with its scope (rows since deleted are simply not there)."""
        with self.transaction() as conn:
            conn.executemany(COUNT_ACCESSES.format(rows="m.rowid = ? AND +m.user_id = ? AND +m.agent_id = ?"),
                             [(n, at, r, user, agent) for (user, agent), rows in accesses.items()
                              for r, n, at in rows])

    @contextmanager
    def locked(self) -> Iterator[None]:
        """The store's lock, held by this thread for a whole operation (a search and its cache); the
        depth is counted for :meth:`flush_usage`, as :meth:`read` and :meth:`transaction` count it."""
        with self.lock:
            held = self._held
            held.n = getattr(held, "n", 0) + 1
            try:
                yield
            finally:
                held.n -= 1

    # ------------------------------------------------------------------ statements
    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """The connection, under the lock, for statements that change nothing."""
        with self.locked():
            self.check_open()
            yield self._conn

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """``BEGIN IMMEDIATE`` … ``COMMIT`` (``ROLLBACK`` on any error), under the lock. Nested
        uses join the outer transaction: all-or-nothing as a whole."""
        with self.locked():
            self.check_open()
            conn = self._conn
            if conn.in_transaction:
                yield conn
                return
            conn.execute("BEGIN IMMEDIATE")
            self._through = []
            self._inserting = set()
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                self.drop_caches()  # anything appended during the failed transaction is gone
                raise
            finally:
                through, self._through = self._through, None
            # A cache of a scope this transaction inserted rows into, and did not take them
            # (write_through), lacks them: it loads them at its next use. Every other cache is as
            # current as before: rows enter a scope only by an insert (or a restore, which bumps the
            # vector epoch), so another scope's commit costs it nothing.
            enc = self.embedder.encoder_id
            for user_id, agent_id in self._inserting:
                cache = self._caches.get((user_id, agent_id, enc))
                if cache is not None and all(cache is not c for c in through):
                    cache.has_own_writes = False
            if self.scrub_pending:  # an earlier deletion is still in the WAL: try again, without waiting
                self._try_truncate(0.0)

    def _try_truncate(self, wait_s: float) -> bool:
        """``wal_checkpoint(TRUNCATE)`` until it completes or ``wait_s`` passes (call under the lock).

        TRUNCATE must wait for every reader to leave the WAL; SQLite reports ``busy`` instead of
        failing when one does not, so the result is checked, never assumed."""
        deadline = time.monotonic() + wait_s
        conn = self._conn
        conn.execute("PRAGMA busy_timeout = 0")  # the loop below is the wait, with a deadline
        try:
            while True:
                busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
                if not busy:
                    self.scrub_pending = False
                    return True
                if time.monotonic() >= deadline:
                    self.scrub_pending = True
                    return False
                time.sleep(0.02)
        finally:
            conn.execute(f"PRAGMA busy_timeout = {self._busy_ms}")

    def checkpoint(self, wait_s: float = 0.0, *, required: bool = False) -> bool:
        """Move committed pages out of the WAL and truncate it, so old page images leave it.

        Waits up to ``wait_s`` seconds for readers still using the WAL. Returns whether it
        completed; with ``required`` an incomplete checkpoint raises instead.

        Raises:
            DeletionPendingError: ``required`` and a reader kept the WAL busy past ``wait_s``.
        """
        with self.lock:
            self.check_open()
            if self.in_memory or self._try_truncate(wait_s):
                return True
        if required:
            raise DeletionPendingError(
                f"deleted, but the old bytes are still in {self.path}-wal: another connection held a read "
                f"transaction for more than {wait_s:g} s; end long-lived reads, then call store.scrub() "
                "(memir retries after later writes and on close)")
        return False

    def scrub(self, wait_s: float = 30.0) -> None:
        """Push deleted content out of the WAL and the free pages (checkpoint, vacuum, truncate).

        Raises:
            DeletionPendingError: a reader kept the WAL busy for more than ``wait_s`` seconds.
        """
        self.erase_usage()
        with self.read() as conn:
            if self.in_memory:
                conn.execute("VACUUM")
                return
            self.checkpoint(wait_s, required=True)
            conn.execute("VACUUM")
            self.checkpoint(wait_s, required=True)

    # ------------------------------------------------------------------ vector caches
    @property
    def embedder(self) -> Embedder:
        """The store's encoder."""
        return self._embedder

    def vector_cache(self, user_id: str, agent_id: str) -> VectorCache:
        """The scope's cache, brought up to date with the file (call under :attr:`lock`)."""
        emb = self.embedder
        key = (user_id, agent_id, emb.encoder_id)
        cache = self._caches.get(key)
        conn = self._conn
        # data_version: another connection committed; has_own_writes False: this one committed rows of
        # the scope the cache did not take (PRAGMA data_version misses those); epoch: existing rows
        # changed (deletes, forget, re-embedding, filter-column updates) -> reload from scratch.
        dv, epoch = _data_version(conn), _epoch(conn)
        if cache is None:
            cache = self._caches[key] = VectorCache(user_id, agent_id, emb.encoder_id, emb.dim)
            cache.epoch = epoch
            self._cached_bytes += cache.nbytes
        else:
            self._caches.move_to_end(key)
        if cache.epoch != epoch or cache.data_version != dv or not cache.has_own_writes:
            before = cache.nbytes
            if cache.epoch != epoch:
                cache.clear()
                cache.epoch = epoch
            load_since(cache, conn)
            cache.data_version, cache.has_own_writes = dv, True
            self._count_cached(cache.nbytes - before)
        elif self._cached_bytes > self.cache_bytes:  # the bound was lowered since
            self._count_cached(0)
        return cache

    def write_through(self, conn: sqlite3.Connection, user_id: str, agent_id: str,
                      first_rowid: int) -> VectorCache | None:
        """Inside a transaction that inserted rows of a scope from ``first_rowid`` on: the scope's cache
        when it can take them, or ``None``. The caller then hands them over with :meth:`take_through`
        (built only when a cache takes them), so the next search does not read back what this process
        just wrote (two statements and a blob per write).

        Only when the cache held every row of the scope before — no commit by another connection
        (``PRAGMA data_version``) since it last loaded, nor by this one of rows of the scope it did not
        take (``has_own_writes`` False, set at ``COMMIT``). That holds because rows enter a scope only through
        ``SqlTenant.insert``, which calls this, or ``restore_rows``, which bumps the vector epoch
        (every cache is dropped). A ``ROLLBACK`` drops every cache. A transaction that also changes
        stored rows (a retention decision keeping a new candidate and archiving another) bumps the
        epoch, which :meth:`vector_cache` reads at every use: the cache then reloads.

        A scope with no cache gets one here when these are its first rows (none below ``first_rowid``:
        rowids only grow), stamped as loaded now — so a new user's first recall finds their memories
        in the process that wrote them, as later recalls do, instead of reading them back."""
        if self._through is None:
            return None
        self._inserting.add((user_id, agent_id))
        key = (user_id, agent_id, self.embedder.encoder_id)
        cache = self._caches.get(key)
        if cache is None:
            cache = self._first_rows_cache(conn, user_id, agent_id, first_rowid)
            if cache is None:
                return None
            self._caches[key] = cache
            self._cached_bytes += cache.nbytes
            return cache
        if not cache.has_own_writes or first_rowid <= cache.max_rowid or cache.data_version != _data_version(conn):
            return None
        self._caches.move_to_end(key)
        return cache

    def take_through(self, cache: VectorCache, rows: Sequence[Sequence[Any]], tags: Sequence[tuple[int, str]]) -> None:
        """Append the rows :meth:`write_through` offered ``cache``, as :meth:`VectorCache.append` takes
        them, with their tags (in the same transaction, right after the offer); at ``COMMIT`` it stays
        current."""
        assert self._through is not None, "take_through outside the transaction write_through offered in"
        before = cache.nbytes
        cache.append(rows, tags)
        self._through.append(cache)
        self._count_cached(cache.nbytes - before)

    def _first_rows_cache(self, conn: sqlite3.Connection, user_id: str, agent_id: str,
                          first_rowid: int) -> VectorCache | None:
        """An empty cache for a scope whose rows all start at ``first_rowid``, stamped as current; ``None``
        when the scope holds older rows (its cache loads them on its first search)."""
        if conn.execute("SELECT 1 FROM memories INDEXED BY ix_mem_scope WHERE user_id = ? AND agent_id = ? "
                        "AND rowid < ? LIMIT 1", (user_id, agent_id, first_rowid)).fetchone():
            return None
        emb = self.embedder
        cache = VectorCache(user_id, agent_id, emb.encoder_id, emb.dim)
        cache.epoch, cache.data_version, cache.has_own_writes = _epoch(conn), _data_version(conn), True
        return cache

    def _count_cached(self, grew: int) -> None:
        """Count ``grew`` more bytes cached; past :attr:`cache_bytes`, drop the least recently used
        scopes (never the one just used)."""
        self._cached_bytes += grew
        while self._cached_bytes > self.cache_bytes and len(self._caches) > 1:
            _, old = self._caches.popitem(last=False)
            self._cached_bytes -= old.nbytes

    def drop_caches(self) -> None:
        """Forget every cached vector (they reload on next use)."""
        self._caches.clear()
        self._cached_bytes = 0

    def bump_vector_epoch(self, conn: sqlite3.Connection) -> None:
        """Inside a transaction: tell every cache, in every process, that existing rows changed."""
        conn.execute("UPDATE meta SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT) WHERE key='vector_epoch'")
        self.drop_caches()

    # ------------------------------------------------------------------ admin (cross-user, explicit)
    def users(self) -> list[tuple[str, str, int]]:
        """(user_id, agent_id, memory count) for every scope with memories."""
        with self.read() as conn:
            rows = conn.execute("SELECT user_id, agent_id, count(*) FROM memories "
                                "GROUP BY user_id, agent_id ORDER BY user_id, agent_id").fetchall()
        return [(u, a, int(n)) for u, a, n in rows]

    def stats(self) -> dict[str, Any]:
        """Counts by tier, source type, role, sensitivity and user; encoders; the last decisions;
        whether a deletion's bytes still wait in the WAL (``scrub_pending``)."""
        with self.read() as conn:
            q = conn.execute
            out: dict[str, Any] = {"path": self.path, "memories": q("SELECT count(*) FROM memories").fetchone()[0]}
            for col in ("tier", "source_type", "active_role", "sensitivity", "user_id"):
                out[f"by_{col}"] = dict(q(f"SELECT {col}, count(*) FROM memories GROUP BY {col}").fetchall())
            out["encoders"] = dict(q("SELECT encoder_id, count(*) FROM vectors GROUP BY encoder_id").fetchall())
            out["tiers"] = {}
            for tier, fmt, n, nbytes in q("SELECT m.tier, v.fmt, count(*), coalesce(sum(length(v.vec)), 0) FROM memories m "
                                          "LEFT JOIN vectors v ON v.mem_rowid = m.rowid GROUP BY m.tier, v.fmt"):
                t = out["tiers"].setdefault(tier, {"memories": 0, "vector_bytes": 0, "formats": {}})
                t["memories"] += int(n)
                t["vector_bytes"] += int(nbytes)
                if fmt is not None:
                    t["formats"][fmt] = int(n)
            out["cold_format"] = self.cold_format
            out["last_decisions"] = [json.loads(p) for (p,) in q(
                "SELECT payload FROM decisions ORDER BY id DESC LIMIT 5").fetchall()]
        out["scrub_pending"] = self.scrub_pending  # a deletion's old bytes still in the WAL (store.scrub())
        return out

    def experiments(self) -> list[str]:
        """Admin path: the experiments outcome events were recorded under, by name."""
        with self.read() as conn:
            return [str(k) for (k,) in conn.execute(
                "SELECT DISTINCT j.key FROM feedback f, json_each(f.arms) j ORDER BY 1")]

    def outcome_counts(self, experiment: str) -> list[tuple[str, str, str, int, float]]:
        """Admin path: ``(user_id, arm, kind, events, sum of values)`` of one experiment's outcome
        events, aggregated in the database (what ``runtime.experiments.report`` reads)."""
        with self.read() as conn:
            rows = conn.execute(
                "SELECT f.user_id, j.value, f.kind, count(*), coalesce(sum(f.value), 0) FROM feedback f, "
                "json_each(f.arms) j WHERE j.key = ? GROUP BY f.user_id, j.value, f.kind", (experiment,)).fetchall()
        return [(str(u), str(a), str(k), int(n), float(t)) for u, a, k, n, t in rows]

    def forget_user(self, user_id: str, wait_s: float = 30.0) -> int:
        """Delete everything of ``user_id`` (rows, vectors, tags, links, logs, decisions, scope
        state), then scrub the file (waiting up to ``wait_s`` for readers). Returns the number of
        memories deleted.

        Raises:
            DeletionPendingError: a reader kept the old bytes in the WAL past ``wait_s``.
        """
        self.flush_usage()  # the journal's lines about the user's rows applied (the scrub below zeroes it)
        with self.transaction() as conn:
            n = conn.execute("SELECT count(*) FROM memories WHERE user_id=?", (user_id,)).fetchone()[0]
            conn.execute("DELETE FROM memories WHERE user_id=?", (user_id,))
            conn.execute("DELETE FROM recall_log WHERE user_id=?", (user_id,))
            conn.execute("DELETE FROM feedback WHERE user_id=?", (user_id,))
            conn.execute("DELETE FROM decisions WHERE user_id=?", (user_id,))
            conn.execute("DELETE FROM scopes WHERE user_id=?", (user_id,))
            self.bump_vector_epoch(conn)
        self.scrub(wait_s)
        return int(n)

    def build_indexes(self, encoder_id: str, dim: int) -> list[str]:
        """Nothing to build: SQLite scopes are searched exactly from the in-process vector cache."""
        return []

    def stale_vectors(self, encoder_id: str) -> list[tuple[int, str]]:
        """(rowid, record JSON) of every memory with no vector from ``encoder_id`` (for re-embedding)."""
        with self.read() as conn:
            return conn.execute(
                "SELECT m.rowid, m.record FROM memories m LEFT JOIN vectors v ON v.mem_rowid = m.rowid "
                "WHERE v.encoder_id IS NULL OR v.encoder_id != ? ORDER BY m.rowid", (encoder_id,)).fetchall()

    def put_vectors(self, rows: list[tuple[int, bytes]], encoder_id: str, dim: int) -> None:
        """Replace the vectors of these rowids (float32 bytes) in one transaction (re-embedding);
        archived memories' vectors are stored in the cold format."""
        with self.transaction() as conn:
            conn.executemany("INSERT OR REPLACE INTO vectors(mem_rowid, encoder_id, dim, vec, fmt) "
                             "VALUES (?,?,?,?,'float32')", [(rowid, encoder_id, dim, vec) for rowid, vec in rows])
            _vectors.conform(conn, self.cold_format, "1", [], [rowid for rowid, _ in rows])
            self.bump_vector_epoch(conn)

    def compact_vectors(self) -> int:
        """Re-encode every vector whose format does not match its tier (after ``cold_vectors``
        changed, or an upgrade from a store without tiers); returns how many were rewritten."""
        with self.transaction() as conn:
            n = _vectors.conform(conn, self.cold_format, "1", [])
            if n:
                self.bump_vector_epoch(conn)
        if n:
            self.checkpoint(1.0)  # the float32 page images leave the WAL
        return n
