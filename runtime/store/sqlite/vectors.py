"""Stored vector formats on SQLite: each memory's vector in the format its tier calls for.

A row of ``vectors`` carries its format (``fmt``): float32 in the working tier, the store's cold
format (``StoreConfig.cold_vectors``) in the archive (:mod:`runtime.store.tiers`). Every reader
decodes by ``fmt``; :func:`conform` is the one place a vector's format changes — called in the
transaction that changed the memories' tier (a decision, a correction, a promotion, a restore).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from .. import tiers

__all__ = ["conform"]

_CHUNK = 500


def conform(conn: sqlite3.Connection, cold_format: str, where: str, params: Sequence[Any],
            rowids: Sequence[int] | None = None) -> int:
    """Re-encode the vectors of the memories matching ``where`` (on ``memories m``; with
    ``rowids``, only those) whose format differs from what their tier calls for. Returns how many
    were rewritten. Runs in the caller's transaction, reading :data:`_CHUNK` rows at a time."""
    sel = ("SELECT m.rowid, m.tier, v.vec, v.fmt, v.dim FROM memories m JOIN vectors v ON v.mem_rowid = m.rowid "
           f"WHERE {where} AND v.fmt != (CASE m.tier WHEN 'archive' THEN ? ELSE ? END)")
    fmts = [cold_format, tiers.HOT_FORMAT]
    n = 0
    if rowids is not None:
        for i in range(0, len(rowids), _CHUNK):
            chunk = list(rowids[i:i + _CHUNK])
            n += _rewrite(conn, cold_format, conn.execute(
                f"{sel} AND m.rowid IN ({','.join('?' * len(chunk))})", [*params, *fmts, *chunk]).fetchall())
        return n
    after = 0
    while True:  # the whole selection, in rowid order, a chunk at a time
        rows = conn.execute(f"{sel} AND m.rowid > ? ORDER BY m.rowid LIMIT {_CHUNK}",
                            [*params, *fmts, after]).fetchall()
        if not rows:
            return n
        n += _rewrite(conn, cold_format, rows)
        after = int(rows[-1][0])


def _rewrite(conn: sqlite3.Connection, cold_format: str, rows: Sequence[tuple[Any, ...]]) -> int:
    updates = []
    for rowid, tier, blob, fmt, dim in rows:
        want = tiers.wanted_format(tier, cold_format)
        updates.append((tiers.encode(tiers.decode(blob, fmt, int(dim)), want), want, rowid))
    conn.executemany("UPDATE vectors SET vec = ?, fmt = ? WHERE mem_rowid = ?", updates)
    return len(updates)
