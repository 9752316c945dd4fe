"""Filtered vector search over one scope: the cache proposes, SQL disposes.

:func:`search` evaluates the typed filter on the scope's cached columns
(:meth:`MemoryFilter.mask`), takes the exact top-K by cosine among the rows that pass, re-ranks them
from the cached columns (:mod:`runtime.store.ranking`; the cache mirrors every column re-ranking
reads), and reads the ``k`` records returned in one SQL statement that re-checks them with the
tenant clause and the filter's ``WHERE`` (a stale cache can lose rows, never leak one). Should SQL
disagree with the cache about any of them (which should not happen: the cache is brought up to date
under the store's lock first), the search is redone on the candidates' columns as SQL holds them:
every candidate re-checked, re-ranked, and only then the ``k`` records read (:func:`_checked`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import numpy as np

from ...record.memir import RoleContext
from ..filters import MemoryFilter, no_filter
from ..ranking import Hit, RankWeights, SearchResult, top_k
from ..row_codec import row_to_record
from ..scope_cache import VectorCache
from .tenant import SqliteTenant

__all__ = ["nearest", "search"]

_RANK_COLS = ("m.id, m.confidence, m.half_life_s, m.event_time, m.active_role, m.sub_role, m.source_type, "
              "m.dialog_role")
_RANKED = 8  # the columns of _RANK_COLS, before the record's when the re-check reads it too


def search(tenant: SqliteTenant, flt: MemoryFilter, now: datetime, q: np.ndarray, *, k: int, pool: int,
           context: RoleContext | None, weights: RankWeights) -> SearchResult:
    """Typed filter -> exact vector top-``pool`` -> re-rank -> top ``k`` read and re-checked in SQL.

    The raw top-``pool`` (``SearchResult.raw``, for an explained recall's log) is read only when asked
    for: the candidates' ids, re-checked like the hits."""
    with tenant.db.locked():
        cache, pos, rowids, sims = _cached(tenant, flt, now, q, pool)
        if len(rowids) == 0:
            return SearchResult([], [], [])
        top = top_k(cache.rank_rows(pos, sims.tolist()), now.timestamp(), context, weights, k)
        chosen = rowids[[i for _, i in top]]
        recs = _verify(tenant, flt, now, chosen, tenant.READ_COLS)
        if len(recs) == len(chosen):
            hits = [Hit(row_to_record(*recs[int(rowids[i])]), sb, i) for sb, i in top]
            return SearchResult(hits, chosen.tolist(), lambda: _raw(tenant, flt, now, rowids, sims))
        return _checked(tenant, flt, now, q, k=k, pool=pool, context=context, weights=weights)


def _raw(tenant: SqliteTenant, flt: MemoryFilter, now: datetime, rowids: np.ndarray,
         sims: np.ndarray) -> list[tuple[str, float]]:
    """``(id, cosine)`` of the candidates that pass the tenant clause and the filter, best first."""
    with tenant.db.locked():
        ids = _verify(tenant, flt, now, rowids, "m.id")
    return [(ids[r][0], s) for r, s in zip(rowids.tolist(), sims.tolist()) if r in ids]


def _checked(tenant: SqliteTenant, flt: MemoryFilter, now: datetime, q: np.ndarray, *, k: int, pool: int,
             context: RoleContext | None, weights: RankWeights) -> SearchResult:
    """The search with every candidate's columns read from SQL (call under the store's lock): what
    runs when SQL and the cache disagree. With ``pool <= k`` every verified candidate is returned, so
    the re-check reads the records too (one statement instead of two)."""
    whole = pool <= k
    rowids, sims, rows = _proposed(tenant, flt, now, q, pool, f"{_RANK_COLS}, {tenant.READ_COLS}" if whole else _RANK_COLS)
    if len(rowids) == 0:
        return SearchResult([], [], [])
    hits, hit_rowids = _rank(tenant, rowids, sims, rows, now, context, weights, k, whole)
    raw = [(rows[int(r)][0], float(s)) for r, s in zip(rowids, sims)]
    return SearchResult(hits, hit_rowids, raw)


def nearest(tenant: SqliteTenant, now: datetime, q: np.ndarray, k: int, *,
            at_least: float = float("-inf")) -> list[tuple[str, str, float]]:
    """The ``k`` most similar memories under the default filter with a cosine of at least
    ``at_least``, as ``(id, JSON body, cosine)``: the cache proposes, one SQL statement re-checks
    them and reads their bodies (nothing parsed; none when no candidate is that close)."""
    with tenant.db.locked():
        rowids, sims, rows = _proposed(tenant, no_filter(), now, q, k, "m.id, m.record", at_least=at_least)
    return [(*rows[r], s) for r, s in zip(rowids.tolist(), sims.tolist())]


def _proposed(tenant: SqliteTenant, flt: MemoryFilter, now: datetime, q: np.ndarray, pool: int,
              cols: str, *, at_least: float = -np.inf) -> tuple[np.ndarray, np.ndarray, dict[int, tuple[Any, ...]]]:
    """The cache proposes the top ``pool`` by cosine, SQL disposes: ``(rowids, cosines, rowid -> cols)``
    of the candidates that pass the tenant clause and the filter in SQL, best first (call under the
    store's lock). A cache that disagreed with SQL (which should not happen) is dropped and the
    candidates are taken from SQL alone."""
    for sql_only in (False, True):
        rowids, sims = _candidates(tenant, flt, now, q, pool, sql_only)
        close = sims >= at_least
        rowids, sims = rowids[close], sims[close]
        if len(rowids) == 0:
            return rowids, sims, {}
        rows = _verify(tenant, flt, now, rowids, cols)
        if len(rows) == len(rowids):
            break
        tenant.db.drop_caches()
    keep = np.array([int(r) in rows for r in rowids], dtype=bool)  # a concurrent delete in between
    return rowids[keep], sims[keep], rows


def _candidates(tenant: SqliteTenant, flt: MemoryFilter, now: datetime, q: np.ndarray, pool: int,
                sql_only: bool) -> tuple[np.ndarray, np.ndarray]:
    """Raw top-``pool`` (rowids, similarities) among the rows passing ``flt``, best first."""
    if not sql_only:
        _, _, rowids, sims = _cached(tenant, flt, now, q, pool)
        return rowids, sims
    where, params = flt.where(now)
    t, tp = tenant.clause()
    with tenant.db.read() as conn:
        eligible = np.fromiter((r[0] for r in conn.execute(
            f"SELECT m.rowid FROM memories m WHERE {t} AND {where}", tp + params)), dtype=np.int64)
    found, mat = tenant.vectors_of(eligible)
    if len(found) != len(eligible):
        with tenant.reading() as conn:
            tenant.raise_if_mismatched(conn, eligible[~np.isin(eligible, found)].tolist())
    sims = mat @ q
    top = _best(sims, pool)
    return found[top], sims[top].astype(np.float64)


def _cached(tenant: SqliteTenant, flt: MemoryFilter, now: datetime, q: np.ndarray,
            pool: int) -> tuple[VectorCache, np.ndarray, np.ndarray, np.ndarray]:
    """The scope's cache, brought up to date, and its raw top-``pool`` among the rows passing ``flt``,
    best first: ``(cache, positions in it, rowids, similarities)``."""
    cache = tenant.db.vector_cache(tenant.user_id, tenant.agent_id)
    pos = np.flatnonzero(flt.mask(cache, now))
    if not cache.has_vector[pos].all():
        with tenant.reading() as conn:
            tenant.raise_if_mismatched(conn, cache.rowids[pos[~cache.has_vector[pos]]].tolist())
        pos = pos[cache.has_vector[pos]]
    sims = cache.similarities(pos, q)
    top = _best(sims, pool)
    return cache, pos[top], cache.rowids[pos[top]], sims[top].astype(np.float64)


def _best(sims: np.ndarray, pool: int) -> np.ndarray:
    """Positions of the ``pool`` largest ``sims``, largest first (equal ones kept in position order)."""
    if len(sims) > pool:
        top = np.argpartition(-sims, pool - 1)[:pool]
    else:
        top = np.arange(len(sims))
    return top[np.argsort(-sims[top], kind="stable")]


def _verify(tenant: SqliteTenant, flt: MemoryFilter, now: datetime, rowids: np.ndarray,
            cols: str) -> dict[int, tuple[Any, ...]]:
    """The candidates that really pass the tenant clause and the filter: rowid -> ``cols``."""
    where, params = flt.where(now)
    t, tp = tenant.clause(check_only=True)
    marks = ",".join("?" * len(rowids))
    with tenant.db.read() as conn:
        rows = conn.execute(
            f"SELECT m.rowid, {cols} FROM memories m NOT INDEXED WHERE {t} AND {where} AND m.rowid IN ({marks})",
            tp + params + rowids.tolist()).fetchall()  # rowid lookups
    return {r[0]: r[1:] for r in rows}


def _rank(tenant: SqliteTenant, rowids: np.ndarray, sims: np.ndarray, rows: dict[int, tuple[Any, ...]],
          now: datetime, context: RoleContext | None, weights: RankWeights, k: int,
          whole: bool) -> tuple[list[Hit], list[int]]:
    """Re-rank the verified candidates from their columns; parse only the ``k`` records returned (read
    here, or already by the re-check when ``whole``)."""
    order = rowids.tolist()
    cands = [(s, *rows[rid][1:_RANKED]) for rid, s in zip(order, sims.tolist())]
    top = [(sb, raw_rank, order[raw_rank]) for sb, raw_rank in top_k(cands, now.timestamp(), context, weights, k)]
    if whole:  # the re-check read the records
        recs = {rid: row_to_record(*rows[rid][_RANKED:]) for _, _, rid in top}
    else:
        t, tp = tenant.clause(check_only=True)
        marks = ",".join("?" * len(top))
        with tenant.db.read() as conn:
            recs = {r[0]: row_to_record(*r[1:]) for r in conn.execute(
                f"SELECT m.rowid, {tenant.READ_COLS} FROM memories m WHERE {t} AND m.rowid IN ({marks})",
                tp + [rid for _, _, rid in top])}
    hits = [Hit(recs[rid], sb, raw_rank) for sb, raw_rank, rid in top if rid in recs]
    return hits, [rid for _, _, rid in top if rid in recs]
