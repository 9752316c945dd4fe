"""Recall internals: candidate generation from the scope's vector cache, SQL verification,
column-based re-ranking and the explain log. ``Scope.recall`` is the entry point."""

from __future__ import annotations

import builtins
import json
import logging
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from .filters import MemoryFilter
from .memir import RoleContext
from .retrieval import Hit, score
from .sqlite_schema import READ_COLS, row_to_record

if TYPE_CHECKING:
    from .scope import Scope

log = logging.getLogger("memir.recall")


def candidates(scope: "Scope", flt: MemoryFilter, now: datetime, q: np.ndarray, pool: int,
                sql_only: bool) -> tuple[np.ndarray, np.ndarray]:
    """Raw top-``pool`` (rowids, similarities) among the rows passing ``flt``, best first."""
    store = scope._store
    if sql_only:
        where, params = flt.where(now)
        t, tp = scope._tenant()
        cur = scope._conn.execute(f"SELECT m.rowid FROM memories m WHERE {t} AND {where}", tp + params)
        eligible = np.fromiter((r[0] for r in cur), dtype=np.int64)
        found, mat = store._vectors_for(scope.user_id, scope.agent_id, eligible)
        if len(found) != len(eligible):
            scope._raise_mismatch()
        sims = mat @ q
    else:
        cache = store._vector_cache(scope.user_id, scope.agent_id)
        pos = np.flatnonzero(flt.mask(cache, now))
        if not cache.has_vector[pos].all():
            scope._raise_mismatch()
        sims = cache.similarities(pos, q)
        found = cache.rowids[pos]
    if len(sims) > pool:
        top = np.argpartition(-sims, pool - 1)[:pool]
    else:
        top = np.arange(len(sims))
    top = top[np.argsort(-sims[top], kind="stable")]
    return found[top], sims[top].astype(np.float64)

def verify(scope: "Scope", flt: MemoryFilter, now: datetime, rowids: np.ndarray) -> dict[int, tuple[Any, ...]]:
    """The candidates that really pass the scope's tenant clause and filter, with the columns
    re-ranking reads: rowid -> (id, confidence, half_life_s, event_time, active_role, sub_role)."""
    where, params = flt.where(now)
    t, tp = scope._tenant(check_only=True)
    marks = ",".join("?" * len(rowids))
    rows = scope._conn.execute(
        f"SELECT m.rowid, m.id, m.confidence, m.half_life_s, m.event_time, m.active_role, m.sub_role "
        f"FROM memories m NOT INDEXED WHERE {t} AND {where} AND m.rowid IN ({marks})",  # rowid lookups
        tp + params + rowids.tolist()).fetchall()
    return {r[0]: r[1:] for r in rows}

def rank(scope: "Scope", rowids: np.ndarray, sims: np.ndarray, rows: dict[int, tuple[Any, ...]], now: datetime,
          context: RoleContext | None, k: int) -> tuple[builtins.list[Hit], builtins.list[int]]:
    """Re-rank the verified candidates from their columns; parse only the ``k`` records returned.
    Returns the hits and their rowids."""
    now_ts = now.timestamp()
    scored = []
    for raw_rank, (rid, sim) in enumerate(zip(rowids.tolist(), sims.tolist())):
        _, conf, hl, ev, role, sub = rows[rid]
        scored.append((score(sim, conf, hl, ev, role, sub, now_ts, context, scope.weights), ev, raw_rank, rid))
    scored.sort(key=lambda x: (-x[0].total, -x[0].similarity, -x[1]))  # same order as retrieval.rerank
    top = scored[:k]
    t, tp = scope._tenant(check_only=True)
    marks = ",".join("?" * len(top))
    recs = {r[0]: row_to_record(*r[1:]) for r in scope._conn.execute(
        f"SELECT m.rowid, {READ_COLS} FROM memories m WHERE {t} AND m.rowid IN ({marks})",
        tp + [x[3] for x in top])}
    return [Hit(recs[rid], sb, raw_rank) for sb, _, raw_rank, rid in top], [x[3] for x in top]

def log_recall(scope: "Scope", query: Any, filters: dict[str, Any], raw_ids: Sequence[str], raw_sims: Sequence[float],
                hits: Sequence[Hit], now: datetime) -> None:
    from .redact import redact
    qtext = redact(query).text if isinstance(query, str) else "<vector>"  # PII never reaches a log
    payload = {
        "query": qtext, "filters": filters, "at": now.isoformat(),
        "raw_top_k": [{"id": i, "similarity": round(s, 6)} for i, s in zip(raw_ids, raw_sims)],
        "final": [{"id": h.record.id, "raw_rank": h.raw_rank,
                   "score": {kk: round(vv, 6) for kk, vv in h.score.as_dict().items()}} for h in hits],
    }
    log.debug("recall %s", json.dumps(payload))
    if scope._store.config.log_recalls:
        scope._conn.execute("INSERT INTO recall_log(user_id, agent_id, at, payload) VALUES (?,?,?,?)",
                           (scope.user_id, scope.agent_id, now.timestamp(), json.dumps(payload)))

