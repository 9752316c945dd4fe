"""Filling a scope's :class:`~runtime.store.scope_cache.VectorCache` from a SQLite store.

Freshness: ``PRAGMA data_version`` moves when another connection commits, and a commit of this one
marks the caches of scopes it inserted rows into that did not take them (``has_own_writes``); the
cache then loads rows with a higher rowid (:func:`load_since`). Anything that changes existing rows (delete, forget, tier/filter-column
updates, re-embedding) bumps the store's ``vector_epoch`` (SQL triggers do it, so no code path can
forget), and the cache reloads fully (:meth:`runtime.store.sqlite.db.SqliteDB.vector_cache`).
"""

from __future__ import annotations

import sqlite3

from ..scope_cache import CODED_COLUMNS, FLOAT_COLUMNS, VectorCache

__all__ = ["load_since"]


def load_since(cache: VectorCache, conn: sqlite3.Connection) -> int:
    """Load the cache's scope's rows with rowid above the cached maximum. Returns how many were added."""
    base = cache.max_rowid
    cols = ", ".join(f"m.{c}" for c in CODED_COLUMNS + FLOAT_COLUMNS)
    # Driven by the (user_id, agent_id[, rowid]) index: cost is the number of *new* rows only.
    rows = conn.execute(
        f"SELECT m.rowid, {cols}, v.fmt, v.vec FROM memories m INDEXED BY ix_mem_scope "
        "LEFT JOIN vectors v ON v.mem_rowid = m.rowid AND v.encoder_id = ? AND v.dim = ? "
        "WHERE m.user_id = ? AND m.agent_id = ? AND m.rowid > ? ORDER BY m.rowid",
        (cache.encoder_id, cache.dim, cache.user_id, cache.agent_id, base)).fetchall()
    if not rows:
        return 0
    tags = conn.execute(
        "SELECT t.mem_rowid, t.tag FROM memories m INDEXED BY ix_mem_scope "
        "JOIN memory_tags t ON t.mem_rowid = m.rowid "
        "WHERE m.user_id = ? AND m.agent_id = ? AND m.rowid > ? AND m.rowid <= ?",  # same rows as above
        (cache.user_id, cache.agent_id, base, int(rows[-1][0]))).fetchall()
    return cache.append(rows, tags)
