"""An in-process cache of one scope's vectors, for exact search over SQL-pre-filtered rows.

SQL decides *which* rows qualify (tenant + typed filters, using the composite indexes); this cache
holds the scope's unit vectors in one contiguous float32 matrix so the similarity over the
qualifying rows is a single gather + mat-vec instead of thousands of blob decodes. It never decides
eligibility: a stale row in the cache is harmless because only row ids returned by the scoped SQL
query are ever looked up.

Freshness across processes: ``PRAGMA data_version`` changes when another connection commits; the
cache then loads rows newer than what it has, and reloads fully when the store's vector epoch
(bumped by re-embedding or deletes) moved.
"""

from __future__ import annotations

import sqlite3

import numpy as np

__all__ = ["VectorCache"]


class VectorCache:
    """Vectors of one (user, agent, encoder) scope, keyed by SQLite rowid."""

    def __init__(self, user_id: str, agent_id: str, encoder_id: str, dim: int) -> None:
        self.user_id, self.agent_id, self.encoder_id, self.dim = user_id, agent_id, encoder_id, dim
        self._rowids = np.zeros(0, dtype=np.int64)       # sorted ascending
        self._mat = np.zeros((0, dim), dtype=np.float32)
        self._n = 0
        self.epoch: str | None = None
        self.data_version: int | None = None

    def clear(self) -> None:
        self._rowids = np.zeros(0, dtype=np.int64)
        self._mat = np.zeros((0, self.dim), dtype=np.float32)
        self._n = 0

    @property
    def max_rowid(self) -> int:
        return int(self._rowids[self._n - 1]) if self._n else 0

    def append(self, rowids: np.ndarray, vecs: np.ndarray) -> None:
        """Add rows with rowids greater than every cached one (writes are append-only by rowid)."""
        if len(rowids) == 0:
            return
        order = np.argsort(rowids)
        rowids, vecs = rowids[order], vecs[order]
        keep = rowids > self.max_rowid
        rowids, vecs = rowids[keep], vecs[keep]
        need = self._n + len(rowids)
        if need > len(self._rowids):  # amortised growth, like a Python list
            cap = max(need, 2 * len(self._rowids), 1024)
            r = np.zeros(cap, dtype=np.int64)
            m = np.zeros((cap, self.dim), dtype=np.float32)
            r[: self._n], m[: self._n] = self._rowids[: self._n], self._mat[: self._n]
            self._rowids, self._mat = r, m
        self._rowids[self._n:need] = rowids
        self._mat[self._n:need] = vecs
        self._n = need

    def load_since(self, conn: sqlite3.Connection) -> None:
        """Load this scope's vectors with rowid above the cached maximum."""
        cur = conn.execute(
            "SELECT v.mem_rowid, v.vec FROM vectors v JOIN memories m ON m.rowid = v.mem_rowid "
            "WHERE m.user_id = ? AND m.agent_id = ? AND v.encoder_id = ? AND v.mem_rowid > ? "
            "ORDER BY v.mem_rowid",
            (self.user_id, self.agent_id, self.encoder_id, self.max_rowid))
        rows = cur.fetchall()
        if rows:
            ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
            buf = b"".join(r[1] for r in rows)
            vecs = np.frombuffer(buf, dtype=np.float32).reshape(len(rows), self.dim)
            self.append(ids, vecs)

    def lookup(self, rowids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Positions of ``rowids`` in the cache; returns (found_rowids, matrix rows)."""
        r = self._rowids[: self._n]
        pos = np.searchsorted(r, rowids)
        pos = np.clip(pos, 0, max(self._n - 1, 0))
        ok = (self._n > 0) & (r[pos] == rowids) if self._n else np.zeros(len(rowids), bool)
        return rowids[ok], self._mat[pos[ok]]
