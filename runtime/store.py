"""The embedded memory store: one SQLite file, every read and write through a user scope.

Example:
    >>> from runtime import MemoryStore
    >>> from runtime.embed import HashEmbedder
    >>> with MemoryStore.open(":memory:", embedder=HashEmbedder()) as store:
    ...     alice = store.scope(user_id="alice")
    ...     _ = alice.write("Alice's flight is on 3 May", sub_role="travel", tags=["trip"])
    ...     [h.record.content for h in alice.recall("when is the flight?", k=1)]
    ["Alice's flight is on 3 May"]

Isolation is structural: a :class:`Scope` binds ``user_id``/``agent_id`` into every SQL statement
it runs and into its vector cache. The only calls that see several users are the explicit admin
paths on the store (:meth:`MemoryStore.admin_export`, :meth:`MemoryStore.admin_stats`,
:meth:`MemoryStore.forget_user`).
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .embed import Embedder
from .errors import ValidationError
from .memir import Id
from .sqlite_schema import SCHEMA_SQL, STORE_FORMAT, apply_pragmas
from .vectors import VectorCache

if TYPE_CHECKING:
    from .scope import Scope

__all__ = ["StoreConfig", "MemoryStore"]


@dataclass(frozen=True)
class StoreConfig:
    """Store settings.

    Attributes:
        max_content_chars: longest content accepted (characters); longer writes raise
            ``ContentTooLargeError`` naming this limit.
        busy_timeout_ms: how long a writer waits for a lock held by another connection.
        redact: run PII/secret redaction on content before it is stored (strongly recommended).
        log_recalls: keep a per-scope log of recalls made with ``explain=True``.
        candidate_pool: raw top-K taken from vector search before re-ranking.
    """

    max_content_chars: int = 16_000
    busy_timeout_ms: int = 5_000
    redact: bool = True
    log_recalls: bool = True
    candidate_pool: int = 50

    def __post_init__(self) -> None:
        problems = []
        if self.max_content_chars < 1:
            problems.append(("max_content_chars", "must be >= 1"))
        if self.busy_timeout_ms < 0:
            problems.append(("busy_timeout_ms", "must be >= 0"))
        if self.candidate_pool < 1:
            problems.append(("candidate_pool", "must be >= 1"))
        if problems:
            raise ValidationError("invalid StoreConfig — " + "; ".join(f"{f}: {m}" for f, m in problems),
                                  field=problems[0][0], problems=problems)


class MemoryStore:
    """A memir store backed by one SQLite file (or ``":memory:"``).

    Use :meth:`open`; work through :meth:`scope`. Thread-safe (one connection, one lock);
    several processes may open the same file (WAL + busy timeout).
    """

    def __init__(self, conn: sqlite3.Connection, path: str, embedder: Embedder | None,
                 embedder_factory: Callable[[], Embedder] | None, config: StoreConfig) -> None:
        self._conn = conn
        self.path = path
        self._embedder = embedder
        self._embedder_factory = embedder_factory
        self.config = config
        self._lock = threading.RLock()
        self._caches: dict[tuple[str, str, str], VectorCache] = {}
        self._write_gen = 0  # bumped at every COMMIT of this connection (data_version misses those)
        self._closed = False

    # ------------------------------------------------------------------ lifecycle
    @classmethod
    def open(cls, path: str | Path, *, embedder: Embedder | None = None,
             config: StoreConfig | None = None) -> "MemoryStore":
        """Open (creating if needed) a store.

        Args:
            path: SQLite file path, or ``":memory:"``.
            embedder: the sentence encoder; default: the ONNX all-MiniLM-L6-v2
                (``runtime.encoder.load_default_embedder``), loaded on first use.
            config: :class:`StoreConfig`.
        """
        path = str(path)
        cfg = config or StoreConfig()
        in_memory = path == ":memory:"
        if not in_memory:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False,
                               timeout=cfg.busy_timeout_ms / 1000)
        apply_pragmas(conn, cfg.busy_timeout_ms, in_memory)
        conn.executescript(SCHEMA_SQL)
        row = conn.execute("SELECT value FROM meta WHERE key='format'").fetchone()
        if row is None:
            conn.execute("INSERT OR IGNORE INTO meta(key, value) VALUES ('format', ?)", (str(STORE_FORMAT),))
            conn.execute("INSERT OR IGNORE INTO meta(key, value) VALUES ('vector_epoch', '0')")
        elif int(row[0]) != STORE_FORMAT:
            conn.close()
            raise ValidationError(f"{path} has store format {row[0]}, this memir reads {STORE_FORMAT}; "
                                  "open it with the matching memir version or export and re-import it",
                                  field="meta.format")
        factory = None
        if embedder is None:
            def factory() -> Embedder:
                from .encoder import load_default_embedder
                return load_default_embedder()
        return cls(conn, path, embedder, factory, cfg)

    def close(self) -> None:
        """Checkpoint the WAL and close the file. Idempotent."""
        with self._lock:
            if self._closed:
                return
            try:
                if self.path != ":memory:":
                    self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            finally:
                self._conn.close()
                self._closed = True

    def __enter__(self) -> "MemoryStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ plumbing used by Scope
    @property
    def embedder(self) -> Embedder:
        """The encoder in use (loaded lazily; raises ``EncoderUnavailableError`` with the remedy)."""
        if self._embedder is None:
            assert self._embedder_factory is not None
            self._embedder = self._embedder_factory()
        return self._embedder

    def _check_open(self) -> None:
        if self._closed:
            raise ValidationError("the store is closed; open it again with MemoryStore.open(path)",
                                  field="store")

    def _tx(self) -> "_Transaction":
        return _Transaction(self)

    def _next_seq(self) -> int:
        row = self._conn.execute("SELECT value FROM meta WHERE key='seq'").fetchone()
        return int(row[0]) if row else 0

    def _vector_cache(self, user_id: str, agent_id: str) -> VectorCache:
        emb = self.embedder
        key = (user_id, agent_id, emb.encoder_id)
        cache = self._caches.get(key)
        if cache is None:
            cache = self._caches[key] = VectorCache(user_id, agent_id, emb.encoder_id, emb.dim)
        # data_version: another connection committed; _write_gen: this one did; epoch: existing rows
        # changed (deletes, forget, re-embedding, filter-column updates) -> reload from scratch.
        dv = self._conn.execute("PRAGMA data_version").fetchone()[0]
        epoch = self._conn.execute("SELECT value FROM meta WHERE key='vector_epoch'").fetchone()[0]
        if cache.epoch != epoch:
            cache.clear()
            cache.epoch = epoch
        if cache.data_version != dv or cache.write_gen != self._write_gen:
            cache.load_since(self._conn)
            cache.data_version, cache.write_gen = dv, self._write_gen
        return cache

    def _vectors_for(self, user_id: str, agent_id: str, rowids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(found rowids, unit vectors) of ``rowids`` from the scope's cache.

        ``PRAGMA data_version`` only moves when *another* connection commits, so rows this
        connection wrote since the last load are picked up here: on a miss, load what is newer and
        look again. Rows still missing were embedded by another encoder (the caller raises).
        """
        cache = self._vector_cache(user_id, agent_id)
        found, mat = cache.lookup(rowids)
        if len(found) != len(rowids):
            cache.load_since(self._conn)
            found, mat = cache.lookup(rowids)
        return found, mat

    def _bump_vector_epoch(self) -> None:
        self._conn.execute("UPDATE meta SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT) "
                           "WHERE key='vector_epoch'")
        self._caches.clear()

    # ------------------------------------------------------------------ the public surface
    def scope(self, *, user_id: str, agent_id: str = "default") -> "Scope":
        """The only way to read or write memories: everything it does is confined to this user/agent."""
        from pydantic import TypeAdapter
        from pydantic import ValidationError as PVE

        from .scope import Scope
        self._check_open()
        for name, value in (("user_id", user_id), ("agent_id", agent_id)):
            try:
                TypeAdapter(Id).validate_python(value)
            except PVE as e:
                raise ValidationError(f"{name}={value!r} is not a valid id (letters, digits and _ . : @ -, "
                                      "1–128 chars)", field=name) from e
        return Scope(self, user_id=user_id, agent_id=agent_id)

    def forget_user(self, user_id: str) -> int:
        """Delete everything of ``user_id``: rows, vectors, tags, logs, decisions — then scrub.

        ``secure_delete`` zeroes the freed cells, the WAL is checkpointed and truncated, and the
        file is vacuumed, so the content is no longer anywhere in the database file, its WAL or its
        free pages. Returns the number of memories deleted.
        """
        self._check_open()
        with self._lock:
            with self._tx():
                n = self._conn.execute("SELECT count(*) FROM memories WHERE user_id=?", (user_id,)).fetchone()[0]
                self._conn.execute("DELETE FROM memories WHERE user_id=?", (user_id,))
                self._conn.execute("DELETE FROM recall_log WHERE user_id=?", (user_id,))
                self._conn.execute("DELETE FROM decisions WHERE user_id=?", (user_id,))
                self._bump_vector_epoch()
            self.scrub()
            return int(n)

    def scrub(self) -> None:
        """Push deleted content out of the WAL and the free pages (checkpoint, vacuum, truncate)."""
        with self._lock:
            if self.path == ":memory:":
                self._conn.execute("VACUUM")
                return
            self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            self._conn.execute("VACUUM")
            self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def admin_users(self) -> list[tuple[str, str, int]]:
        """Admin path: (user_id, agent_id, memory count) for every scope in the store."""
        with self._lock:
            rows = self._conn.execute("SELECT user_id, agent_id, count(*) FROM memories "
                                      "GROUP BY user_id, agent_id ORDER BY user_id, agent_id").fetchall()
        return [(u, a, int(n)) for u, a, n in rows]

    def admin_stats(self) -> dict[str, Any]:
        """Admin path: counts by tier, source type, role and user; last decisions (``memir inspect``)."""
        with self._lock:
            q = self._conn.execute
            out: dict[str, Any] = {"path": self.path, "memories": q("SELECT count(*) FROM memories").fetchone()[0]}
            for col in ("tier", "source_type", "active_role", "sensitivity", "user_id"):
                out[f"by_{col}"] = dict(q(f"SELECT {col}, count(*) FROM memories GROUP BY {col}").fetchall())
            out["encoders"] = dict(q("SELECT encoder_id, count(*) FROM vectors GROUP BY encoder_id").fetchall())
            out["last_decisions"] = [json.loads(p) for (p,) in q(
                "SELECT payload FROM decisions ORDER BY at DESC LIMIT 5").fetchall()]
        return out

    def admin_export(self, path: str | Path) -> int:
        """Admin path: every scope's snapshot into one JSONL file. Returns the record count."""
        n = 0
        with open(path, "w", encoding="utf-8") as fh:
            for user_id, agent_id, _ in self.admin_users():
                n += self.scope(user_id=user_id, agent_id=agent_id)._write_snapshot(fh)
        return n

    def reembed(self, embedder: Embedder | None = None, *, batch_size: int = 256,
                progress: bool = False) -> int:
        """Re-encode every memory whose vector was made by another encoder (seed 001 pitfall 3).

        All-or-nothing per batch; safe to re-run (it only touches rows not yet on ``embedder``).
        Returns the number of vectors rewritten.
        """
        if embedder is not None:
            self._embedder = embedder
        emb = self.embedder
        total = 0
        with self._lock:
            todo = self._conn.execute(
                "SELECT m.rowid, m.record FROM memories m LEFT JOIN vectors v ON v.mem_rowid = m.rowid "
                "WHERE v.encoder_id IS NULL OR v.encoder_id != ? ORDER BY m.rowid", (emb.encoder_id,)).fetchall()
        bar = None
        if progress:
            from tqdm import tqdm
            bar = tqdm(total=len(todo), desc="reembed", unit="mem")
        for start in range(0, len(todo), batch_size):
            chunk = todo[start:start + batch_size]
            texts = [json.loads(r[1])["content"] for r in chunk]
            vecs = np.asarray(emb.encode(texts), dtype=np.float32)
            with self._lock, self._tx():
                self._conn.executemany(
                    "INSERT OR REPLACE INTO vectors(mem_rowid, encoder_id, dim, vec) VALUES (?,?,?,?)",
                    [(r[0], emb.encoder_id, emb.dim, v.tobytes()) for r, v in zip(chunk, vecs)])
            total += len(chunk)
            if bar is not None:
                bar.update(len(chunk))
        if bar is not None:
            bar.close()
        with self._lock, self._tx():
            self._bump_vector_epoch()
        return total


class _Transaction:
    """``BEGIN IMMEDIATE`` … ``COMMIT`` (or ``ROLLBACK`` on any error): all-or-nothing writes."""

    def __init__(self, store: MemoryStore) -> None:
        self.store = store
        self.depth_owner = False

    def __enter__(self) -> sqlite3.Connection:
        conn = self.store._conn
        if not conn.in_transaction:
            conn.execute("BEGIN IMMEDIATE")
            self.depth_owner = True
        return conn

    def __exit__(self, exc_type: object, *rest: object) -> None:
        if not self.depth_owner:
            return
        conn = self.store._conn
        if exc_type is None:
            conn.execute("COMMIT")
            self.store._write_gen += 1
        else:
            conn.execute("ROLLBACK")
            self.store._caches.clear()  # anything appended during the failed tx is gone


def iter_jsonl(path: str | Path) -> Iterator[tuple[int, str]]:
    """(line number, line) for the non-blank lines of a JSONL file."""
    with open(path, encoding="utf-8") as fh:
        for i, line in enumerate(fh, 1):
            if line.strip():
                yield i, line

