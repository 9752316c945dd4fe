"""One scope's rows in an SQLite store: the connection hooks of the shared tenant core.

Every statement about a scope's rows is written once, in :class:`runtime.store.sql.tenant.SqlTenant`,
in the SQLite dialect here. :class:`SqliteTenant` supplies what is SQLite's own: the tenant clause
(with the index-steering ``+``), the store's one connection under its lock, vectors stored as blobs
tagged with their format, the per-scope vector cache that search reads, and checkpointing the WAL
after a deletion.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any

import numpy as np

from ...record.memir import MemIR
from .. import tiers
from ..row_codec import COLUMNS, N_COLUMNS
from ..scope_cache import CODED_COLUMNS, FLOAT_COLUMNS
from ..sql.dialect import SQLITE
from ..sql.tenant import SqlTenant, TakenId
from . import vectors as _vectors
from .db import SqliteDB
from .schema import COUNT_ACCESSES, READ_COLS
from .vector_cache import load_since

__all__ = ["SqliteTenant"]

_INSERT_MEMORY = f"INSERT INTO memories({COLUMNS}) VALUES ({','.join('?' * N_COLUMNS)})"
_NAMES = [c.strip() for c in COLUMNS.split(",")]
_CACHED = [_NAMES.index(c) for c in CODED_COLUMNS + FLOAT_COLUMNS]  # a cache row's columns in a memories row


class SqliteTenant(SqlTenant):
    """Reads and writes of one ``(user_id, agent_id)`` scope. Get one from ``SqliteDB``'s store."""

    dialect = SQLITE
    RETRIES = False  # one writer at a time, under the store's lock: nothing to lose to another client
    VEC_COLS = "v.vec, v.fmt, v.dim"
    NEWEST_FIRST = "m.rowid DESC"  # rowid order is write order here, and ix_mem_scope's own order
    READ_COLS = READ_COLS  # the usage columns with the accesses counted in memory_usage folded in
    db: SqliteDB

    def clause(self, alias: str = "m", *, check_only: bool = False) -> tuple[str, list[Any]]:
        """The scope's SQL condition and parameters. ``check_only`` for statements that locate rows
        by id/rowid: the unary ``+`` keeps SQLite from using a (user_id, agent_id, …) index for
        them, which without table statistics it prefers, turning a 10-row lookup into a scan."""
        p = "+" if check_only else ""
        return f"{p}{alias}.user_id = ? AND {p}{alias}.agent_id = ?", [self.user_id, self.agent_id]

    def reading(self) -> AbstractContextManager[sqlite3.Connection]:
        """The connection for statements that change nothing (under the store's lock), after the
        recall accesses pending in this process are applied (:mod:`runtime.store.usage`)."""
        self.db.flush_usage()
        return self.db.read()

    def writing(self) -> AbstractContextManager[sqlite3.Connection]:
        """``BEGIN IMMEDIATE`` … ``COMMIT`` under the store's lock (nested uses join the outer one),
        after the recall accesses pending in this process are applied."""
        self.db.flush_usage()
        return self.db.transaction()

    def count_accesses(self, conn: Any, rowids: list[int], at: float | None) -> None:
        """Into ``memory_usage`` (:mod:`.schema`): the wide rows are not rewritten."""
        t, tp = self.clause(check_only=True)
        among, ap = (f"m.rowid IN ({','.join('?' * len(rowids))})", rowids) if len(rowids) <= 500 else \
            self.dialect.in_set("m.rowid", rowids)  # a recall's few rows: direct lookups, no JSON list to parse
        conn.execute(COUNT_ACCESSES.format(rows=f"{t} AND {among}"), [1, at, *tp, *ap])

    def insert_memories(self, conn: Any, rows: Sequence[tuple[Any, ...]]) -> list[int]:
        out = []
        for j, row in enumerate(rows):
            try:
                out.append(int(conn.execute(_INSERT_MEMORY, row).lastrowid))
            except sqlite3.IntegrityError:  # ids are unique store-wide (the transaction rolls back)
                raise TakenId(j) from None
        return out

    def insert_vectors(self, conn: Any, rows: Sequence[tuple[int, str, int, np.ndarray]]) -> None:
        self.dialect.many(conn, "INSERT INTO vectors(mem_rowid, encoder_id, dim, vec) VALUES (?,?,?,?)",
                          [(rowid, enc, int(dim), np.asarray(v, np.float32).tobytes()) for rowid, enc, dim, v in rows])

    def inserted(self, conn: Any, rowids: Sequence[int], records: Sequence[MemIR], rows: Sequence[tuple[Any, ...]],
                 vectors: Sequence[np.ndarray]) -> None:
        """The new rows go straight into the scope's vector cache when it is current or these are the
        scope's first rows (:meth:`SqliteDB.write_through`): a search after a write reads nothing back."""
        if rowids and (cache := self.db.write_through(conn, self.user_id, self.agent_id, rowids[0])) is not None:
            self.db.take_through(
                cache, [(rowid, *(row[i] for i in _CACHED), tiers.HOT_FORMAT, np.asarray(v, np.float32).tobytes())
                        for rowid, row, v in zip(rowids, rows, vectors)],
                [(rowid, tag) for rowid, r in zip(rowids, records) for tag in r.metadata.tags])

    def conform_vectors(self, conn: Any, memory_ids: Sequence[str]) -> int:
        if not memory_ids:
            return 0
        # ids a chunk at a time, each chunk a direct lookup (one membership test over the whole list
        # would be re-checked against every row the format scan walks)
        t, tp = self.clause(check_only=True)
        n = 0
        for i in range(0, len(memory_ids), 500):
            chunk = list(memory_ids[i:i + 500])
            n += _vectors.conform(conn, self.db.cold_format, f"{t} AND m.id IN ({','.join('?' * len(chunk))})",
                                  tp + chunk)
        return n

    def vector_of(self, cols: Sequence[Any]) -> np.ndarray | None:
        vec, fmt, dim = cols
        return None if vec is None else tiers.decode(vec, fmt, int(dim))

    def stack(self, rows: Sequence[Sequence[Any]], dim: int) -> np.ndarray:
        if not rows:
            return np.zeros((0, dim), np.float32)
        return tiers.decode_rows([(r[0], r[1]) for r in rows], dim)

    def not_placeholder(self, record: str) -> tuple[str, list[Any]]:
        return f"json_extract({record}, '$.metadata.flags') NOT LIKE '%placeholder%'", []

    def vectors_changed(self, conn: Any) -> None:
        """Tell every vector cache, in every process, that existing rows changed (an epoch bump)."""
        self.db.bump_vector_epoch(conn)

    def release_freed(self, wait_s: float, *, required: bool) -> None:
        """Freed cells are already zeroed (``secure_delete``); truncate the WAL so the old page images
        leave it too, waiting up to ``wait_s`` for readers still using it; zero the usage journal."""
        self.db.erase_usage()
        self.db.checkpoint(wait_s, required=required)

    def vectors_of(self, rowids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(found rowids, unit vectors) from the scope's vector cache (call under ``db.lock``).

        ``PRAGMA data_version`` only moves when *another* connection commits, so rows this
        connection wrote since the last load are picked up here: on a miss, load what is newer and
        look again."""
        cache = self.db.vector_cache(self.user_id, self.agent_id)
        found, mat = cache.lookup(rowids)
        if len(found) != len(rowids):
            with self.db.read() as conn:
                load_since(cache, conn)
            found, mat = cache.lookup(rowids)
        return found, mat
