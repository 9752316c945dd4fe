"""Stored vector formats on PostgreSQL: each memory's vector in the format its tier calls for.

A row of ``vectors`` carries its format (``fmt``): float32 vectors (the working tier) live in the
pgvector column ``vec``, which the per-scope HNSW index covers; float16/int8 vectors (the archive,
in the store's cold format, :mod:`runtime.store.tiers`) live in ``cold`` (``bytea``) with ``vec``
NULL. Every reader selects :data:`VEC_COLS` and decodes with :func:`vector_of` / :func:`stack`;
:func:`conform` is the one place a vector's format changes — called in the transaction that
changed the memories' tier (a decision, a correction, a promotion, a restore).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import tiers

__all__ = ["VEC_COLS", "columns", "compact", "conform", "stack", "vector_array", "vector_of"]

VEC_COLS = "v.vec, v.cold, v.fmt, v.dim"
"""The four columns :func:`vector_of` decodes (``vectors`` aliased ``v``)."""

_CHUNK = 1000


def vector_array(v: Any) -> np.ndarray:
    """A pgvector value as a float32 array (the adapter returns ``pgvector.Vector`` objects)."""
    return np.asarray(v.to_numpy() if hasattr(v, "to_numpy") else v, dtype=np.float32)


def columns(v: np.ndarray, fmt: str) -> tuple[np.ndarray | None, bytes | None]:
    """``(vec, cold)`` column values of unit vector ``v`` stored in ``fmt``."""
    x = np.asarray(v, np.float32).reshape(-1)
    if fmt == tiers.HOT_FORMAT:
        return x, None
    return None, tiers.encode(x, fmt)


def vector_of(vec: Any, cold: Any, fmt: str | None, dim: int | None) -> np.ndarray | None:
    """The float32 unit vector of one ``VEC_COLS`` tuple (``None`` when the memory has no vectors row)."""
    if vec is not None:
        return vector_array(vec)
    if cold is None or fmt is None or dim is None:
        return None
    return tiers.decode(bytes(cold), fmt, int(dim))


def stack(rows: Sequence[tuple[Any, Any, Any, Any]], dim: int) -> np.ndarray:
    """Rows of float32 unit vectors from ``VEC_COLS`` tuples that all have a vector (cold ones
    decoded in one numpy pass per format)."""
    out = np.zeros((len(rows), dim), np.float32)
    cold: list[int] = []
    for i, (vec, *_) in enumerate(rows):
        if vec is not None:
            out[i] = vector_array(vec)
        else:
            cold.append(i)
    if cold:
        out[cold] = tiers.decode_rows([(bytes(rows[i][1]), str(rows[i][2])) for i in cold], dim)
    return out


def conform(conn: Any, cold_format: str, where: str, params: Sequence[Any],
            rowids: Sequence[int] | None = None, *, ids: Sequence[str] | None = None) -> int:
    """Re-encode the vectors of the memories matching ``where`` (on ``memories m``; with
    ``rowids`` or ``ids``, only those) whose format differs from what their tier calls for: float32
    into ``vec``, a cold format into ``cold``. Rows are locked in rowid order. Runs in the caller's
    transaction; returns how many were rewritten.

    A list of rowids or ids drives the join (``unnest``) and each vector is looked up by its key: on
    freshly written rows, whose statistics are stale, a plain join scanned the scope's vectors once
    per memory — quadratic: 1.2 s of a 2 s archive of 3,000 memories written just before."""
    if (rowids is not None and not rowids) or (ids is not None and not ids):
        return 0
    source, extra = "memories m", list[Any]()
    if rowids is not None:
        source, extra = "unnest(%s::bigint[]) AS f(k) JOIN memories m ON m.rowid = f.k", [[int(r) for r in rowids]]
    elif ids is not None:
        source, extra = "unnest(%s::text[]) AS f(k) JOIN memories m ON m.id = f.k", [[str(i) for i in ids]]
    # each memory's vector by its primary key (LATERAL, OFFSET 0: see SqlDialect.vector_of_memory)
    rows = conn.execute(
        f"SELECT m.rowid, m.tier, {VEC_COLS} FROM {source} CROSS JOIN LATERAL (SELECT * FROM vectors v "
        f"WHERE v.mem_rowid = m.rowid OFFSET 0) v WHERE {where} "
        f"AND v.fmt != (CASE m.tier WHEN 'archive' THEN %s ELSE %s END) ORDER BY m.rowid FOR UPDATE OF m, v",
        [*extra, *params, cold_format, tiers.HOT_FORMAT],
        binary=True).fetchall()  # binary: pgvector's text parser costs ~0.2 ms a vector
    return _rewrite(conn, cold_format, rows)


def _rewrite(conn: Any, cold_format: str, rows: Sequence[tuple[Any, ...]]) -> int:
    updates = []
    for rowid, tier, vec, cold, fmt, dim in rows:
        v = vector_of(vec, cold, fmt, dim)
        if v is None:
            continue
        want = tiers.wanted_format(str(tier), cold_format)
        x, blob = columns(v, want)
        updates.append((x, blob, want, rowid))
    to_hot = [u for u in updates if u[0] is not None]
    cold = [u for u in updates if u[0] is None]
    if to_hot:  # back to float32 (promotions: few)
        with conn.cursor() as cur:
            cur.executemany("UPDATE vectors SET vec = %s, cold = %s, fmt = %s WHERE mem_rowid = %s", to_hot)
    if cold:  # into the cold format (an archiving decision: thousands) in one statement
        conn.execute("UPDATE vectors AS v SET vec = NULL, cold = u.cold, fmt = u.fmt "
                     "FROM unnest(%b::bytea[], %b::text[], %b::bigint[]) AS u(cold, fmt, k) WHERE v.mem_rowid = u.k",
                     [[u[1] for u in cold], [u[2] for u in cold], [int(u[3]) for u in cold]])  # %b: no hex escaping
    return len(updates)


def compact(db: Any, cold_format: str) -> int:
    """Store-wide (admin): conform every vector whose format does not match its tier, in chunks
    of rowids (each chunk its own complete transaction). Returns how many were rewritten."""
    n, after = 0, 0
    while True:
        with db.admin() as conn:
            rows = conn.execute(
                f"SELECT m.rowid, m.tier, {VEC_COLS} FROM memories m JOIN vectors v ON v.mem_rowid = m.rowid "
                f"WHERE m.rowid > %s AND v.fmt != (CASE m.tier WHEN 'archive' THEN %s ELSE %s END) "
                f"ORDER BY m.rowid LIMIT %s FOR UPDATE OF m, v",
                [after, cold_format, tiers.HOT_FORMAT, _CHUNK], binary=True).fetchall()
            if not rows:
                return n
            n += _rewrite(conn, cold_format, rows)
            after = int(rows[-1][0])
