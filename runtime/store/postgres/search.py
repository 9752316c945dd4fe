"""Filtered vector search over one scope of a PostgreSQL store, in one statement.

A scope small enough (``StoreConfig.exact_search_max`` writes) is scanned exactly *inside* the
filter: the scope indexes find its rows, every distance is computed, the top ``pool`` kept —
exact, as on SQLite. A larger scope gets an HNSW index of its own (built in the background the
first time a search finds the scope large; searches stay exact until it is ready) and is searched
through it (``ef_search`` sized to the pool), the filter applied to what the index yields; if
that leaves fewer than ``pool`` candidates, it falls back to the exact scan, so a narrow filter
never loses hits.
Only working memories (float32, in ``vec``) are in the HNSW index, so only a search of the working
tier uses it. A filter that can include the archive (whose vectors are stored in the cold format,
:mod:`.vectors`) is searched on the scope's vectors and filter columns held in the process
(:mod:`.vector_cache`): the mask proposes, an exact top-``pool`` by cosine is taken, and SQL
re-checks those candidates with the tenant clause and the filter — the cache proposes, SQL
disposes, as on SQLite. If the scope changed while the search ran, it is redone from SQL alone
(:func:`_exact_sql`: float32 distances in SQL, cold vectors decoded and scored in numpy).
Candidates are re-ranked exactly as on SQLite (:func:`runtime.store.ranking.score`), and only the
``k`` records returned are parsed.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import numpy as np

from ...record.memir import RoleContext
from .. import tiers
from ..filters import MemoryFilter, no_filter
from ..ranking import Hit, RankWeights, SearchResult, top_k
from ..row_codec import READ_COLS, row_to_record
from .tenant import PgTenant

__all__ = ["nearest", "search"]

_COLS = (f"m.rowid, m.id, m.confidence, m.half_life_s, m.event_time, m.active_role, m.sub_role, m.source_type, "
         f"m.dialog_role, {READ_COLS}")

# A few memories by rowid, each looked up by its primary key. A plain `m.rowid = ANY(...)` with the
# scope's clause was planned as a scan of the scope's index when statistics were stale (freshly
# written rows): 5.5 ms for 50 rows of 10,000 instead of 0.2. (OFFSET 0 keeps the lookup a lookup.)
_BY_ROWID = ("unnest(%s::bigint[]) AS f(k) CROSS JOIN LATERAL (SELECT * FROM memories m WHERE m.rowid = f.k "
             "OFFSET 0) AS m")


def search(tenant: PgTenant, flt: MemoryFilter, now: datetime, q: np.ndarray, *, k: int, pool: int,
           context: RoleContext | None, weights: RankWeights, touch: bool = False) -> SearchResult:
    """Typed filter -> top-``pool`` by cosine (exact, or HNSW for large scopes) -> re-rank -> top ``k``
    in one transaction; with ``touch`` the hits' usage update (:meth:`PgTenant.touch`): written behind
    after the transaction, or written through inside it (``StoreConfig.usage_flush_s = 0``)."""
    return tenant.db.retrying(lambda: _search(tenant, flt, now, q, k=k, pool=pool, context=context,
                                              weights=weights, touch=touch))


def _search(tenant: PgTenant, flt: MemoryFilter, now: datetime, q: np.ndarray, *, k: int, pool: int,
            context: RoleContext | None, weights: RankWeights, touch: bool) -> SearchResult:
    with tenant.tx() as conn:
        rows = _candidates(tenant, conn, flt, now, np.asarray(q, np.float32), pool)
        if not rows:
            return SearchResult([], [], [])
        # <#> is the negative inner product; vectors are unit, so its negation is the cosine
        cands = [(-float(r[-1]), *r[2:9]) for r in rows]
        top = [(sb, raw_rank, rows[raw_rank]) for sb, raw_rank in top_k(cands, now.timestamp(), context, weights, k)]
        touched = [int(r[0]) for _, _, r in top] if touch else []
        behind = tenant.db.usage is not None
        if touched and not behind:  # written through: in the search's transaction
            tenant.touch(touched, now)
    if touched and behind:  # written behind: after the transaction (a full buffer applies it then)
        tenant.touch(touched, now)
    hits = [Hit(row_to_record(*r[9:14]), sb, raw_rank) for sb, raw_rank, r in top]
    raw = [(str(r[1]), -float(r[-1])) for r in rows]
    return SearchResult(hits, [int(r[0]) for _, _, r in top], raw)


def nearest(tenant: PgTenant, now: datetime, q: np.ndarray, k: int, *,
            at_least: float = float("-inf")) -> list[tuple[str, str, float]]:
    """The ``k`` most similar memories under the default filter with a cosine of at least
    ``at_least``, as ``(id, JSON body, cosine)``, most similar first: a search's candidates, neither
    re-ranked nor parsed."""
    def run() -> list[tuple[str, str, float]]:
        with tenant.tx() as conn:
            rows = _candidates(tenant, conn, no_filter(), now, np.asarray(q, np.float32), k)
        best = sorted(((-float(r[-1]), r) for r in rows), key=lambda x: -x[0])[:k]  # <#>: negative inner product
        return [(str(r[1]), str(r[9]), sim) for sim, r in best if sim >= at_least]

    return tenant.db.retrying(run)


def _candidates(tenant: PgTenant, conn: Any, flt: MemoryFilter, now: datetime, qv: np.ndarray,
                pool: int) -> list[tuple[Any, ...]]:
    """Rows (:data:`_COLS` + the distance) of the top ``pool`` by cosine among the scope's rows passing
    ``flt``: HNSW for a large scope's working tier, the in-process cache for searches that can include
    the archive, else exact in SQL. A row without a vector of the store's encoder raises."""
    emb = tenant.db.embedder
    hnsw = (flt.tier == "working"  # the index holds float32 vectors: the working tier's
            and tenant.db.scope_is_large(tenant.user_id, tenant.agent_id)
            and tenant.db.vector_index_ready(tenant.user_id, tenant.agent_id, emb.encoder_id, emb.dim))
    rows = _hnsw(tenant, conn, flt, now, qv, pool) if hnsw else None
    if rows is None and flt.tier != "working":
        rows = _cached(tenant, conn, flt, now, qv, pool)
    if rows is None:
        rows = _exact_sql(tenant, conn, flt, now, qv, pool)
    missing = [int(r[0]) for r in rows if r[-1] is None]
    if missing:  # rows of this scope without a vector of the store's encoder
        tenant.raise_if_mismatched(conn, missing)
        rows = [r for r in rows if r[-1] is not None]
    return rows


def _cached(tenant: PgTenant, conn: Any, flt: MemoryFilter, now: datetime, q: np.ndarray,
            pool: int) -> list[tuple[Any, ...]] | None:
    """Exact top-``pool`` inside the filter from the scope's cache (:mod:`.vector_cache`), each
    candidate re-checked in SQL; ``None`` when the scope changed under the search (the caller then
    scans in SQL). Ties by rowid, as the SQL scan orders them."""
    emb = tenant.db.embedder
    caches = tenant.db.vector_caches
    with caches.lock:
        for _ in range(2):
            cache = caches.fresh(conn, tenant.user_id, tenant.agent_id, emb.encoder_id, int(emb.dim),
                                 tenant.db.exact_search_max)
            if cache is None:
                return None
            pos = np.flatnonzero(flt.mask(cache, now))
            if not cache.has_vector[pos].all():  # rows without a vector of the store's encoder
                tenant.raise_if_mismatched(conn, cache.rowids[pos[~cache.has_vector[pos]]].tolist())
                pos = pos[cache.has_vector[pos]]
            if not len(pos):
                return []
            d = -cache.similarities(pos, q.reshape(-1)).astype(np.float64)  # <#>: the negative inner product
            ids = cache.rowids[pos]
            if len(d) > pool:
                part = np.argpartition(d, pool - 1)[:pool]
                cut = d[part].max()
                part = np.flatnonzero(d <= cut)  # every row tied at the cut, so rowid breaks ties as in SQL
                top = part[np.lexsort((ids[part], d[part]))][:pool]
            else:
                top = np.lexsort((ids, d))
            dist = {int(ids[i]): float(d[i]) for i in top}
            where, params = flt.where(now, "%s")
            t, tp = tenant.clause()
            found = conn.execute(
                f"SELECT {_COLS}, (SELECT s.vector_epoch FROM scopes s WHERE s.user_id = %s AND s.agent_id = %s) "
                f"FROM {_BY_ROWID} WHERE {t} AND {where}",
                [tenant.user_id, tenant.agent_id, list(dist), *tp, *params]).fetchall()
            if len(found) == len(dist) and all(r[-1] == cache.epoch for r in found):
                out = [(*r[:-1], dist[int(r[0])]) for r in found]
                out.sort(key=lambda r: (float(r[-1]), int(r[0])))
                return out
            if found and found[0][-1] != cache.epoch:
                return None  # the scope changed while this search ran: SQL alone decides
            caches.drop(tenant.user_id, tenant.agent_id)  # the cache disagreed with SQL: reload once
    return None


def _exact_sql(tenant: PgTenant, conn: Any, flt: MemoryFilter, now: datetime, q: np.ndarray,
               pool: int) -> list[tuple[Any, ...]]:
    """Exact top-``pool`` inside the filter (rows with no vector of this encoder sort first):
    float32 vectors scored in SQL, cold ones (when the filter can include the archive) in numpy."""
    emb = tenant.db.embedder
    where, params = flt.where(now, "%s")
    t, tp = tenant.clause()
    hot = conn.execute(
        f"SELECT {_COLS}, v.vec <#> %b::vector AS d FROM memories m LEFT JOIN vectors v ON v.mem_rowid = m.rowid "
        f"AND v.encoder_id = %s AND v.dim = %s WHERE {t} AND {where} AND (v.mem_rowid IS NULL OR v.vec IS NOT NULL) "
        f"ORDER BY d NULLS FIRST, m.rowid LIMIT %s",
        [q, emb.encoder_id, emb.dim, *tp, *params, int(pool)]).fetchall()
    if flt.tier == "working":
        return list(hot)
    # the scope's rows in the filter first, then their cold vectors by primary key: one join would
    # leave the plan to row estimates, and with stale statistics PostgreSQL picked a nested loop over
    # the scope index (quadratic: 200 ms for 1,500 archived rows instead of 3)
    ids = [int(r[0]) for r in conn.execute(f"SELECT m.rowid FROM memories m WHERE {t} AND {where}", [*tp, *params])]
    # joined to the id list: a filter `= ANY(ids)` compares every row with every id (quadratic too)
    cold = conn.execute(
        "SELECT v.mem_rowid, v.cold, v.fmt FROM unnest(%s::bigint[]) AS f(rowid) JOIN vectors v ON v.mem_rowid = f.rowid "
        "WHERE v.encoder_id = %s AND v.dim = %s AND v.vec IS NULL AND v.cold IS NOT NULL",
        [ids, emb.encoder_id, emb.dim], binary=True).fetchall() if ids else []
    if not cold:
        return list(hot)
    # <#> is the negative inner product: the same distance for the decoded cold vectors
    d = -(tiers.decode_rows([(bytes(b), str(f)) for _, b, f in cold], int(emb.dim)) @ q.reshape(-1))
    rowids = np.array([int(r[0]) for r in cold], dtype=np.int64)
    top = np.lexsort((rowids, d))[:pool]  # by distance, ties by rowid (as the SQL scan orders)
    dist = {int(rowids[i]): float(d[i]) for i in top}
    found = conn.execute(f"SELECT {_COLS} FROM {_BY_ROWID} WHERE {t}", [list(dist), *tp]).fetchall()
    merged = list(hot) + [(*r, dist[int(r[0])]) for r in found]
    merged.sort(key=lambda r: (r[-1] is not None, float(r[-1]) if r[-1] is not None else 0.0, int(r[0])))
    return merged[:pool]


def _hnsw(tenant: PgTenant, conn: Any, flt: MemoryFilter, now: datetime, q: np.ndarray,
          pool: int) -> list[tuple[Any, ...]] | None:
    """Top-``pool`` through the HNSW index, or ``None`` when the filter left too few candidates
    (the caller then scans exactly)."""
    emb = tenant.db.embedder
    dim = int(emb.dim)
    where, params = flt.where(now, "%s")
    t, tp = tenant.clause()
    conn.execute(f"SET LOCAL hnsw.ef_search = {tenant.db.hnsw.search_ef(pool)}")
    rows = conn.execute(
        f"SELECT {_COLS}, v.vec::vector({dim}) <#> %b::vector({dim}) AS d FROM vectors v "
        f"JOIN memories m ON m.rowid = v.mem_rowid WHERE v.user_id = %s AND v.agent_id = %s AND v.encoder_id = %s "
        f"AND v.dim = {dim} AND {t} AND {where} ORDER BY v.vec::vector({dim}) <#> %b::vector({dim}) LIMIT %s",
        [q, tenant.user_id, tenant.agent_id, emb.encoder_id, *tp, *params, q, int(pool)]).fetchall()
    if len(rows) >= pool:
        return list(rows)
    return None
