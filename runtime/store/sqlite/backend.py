"""The SQLite backend as the store sees it: :class:`SqliteStoreBackend` (the file) hands out
:class:`SqliteTenantBackend` objects (one scope's rows, with search, forgetting and the decision log
bound to it), satisfying :mod:`runtime.store.backend`'s contract."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import numpy as np

from ...record.memir import MemIR, RoleContext
from ...retention.decision import RetentionDecision
from ..decision_log import LogReads
from ..filters import MemoryFilter
from ..forget_plan import Cascade, ForgetPlan
from ..ranking import RankWeights, SearchResult
from . import decision_log as _decisions
from . import forgetting as _forget
from .db import SqliteDB
from .search import search
from .tenant import SqliteTenant

__all__ = ["SqliteTenantBackend", "SqliteStoreBackend"]


class SqliteTenantBackend(SqliteTenant, LogReads):
    """One scope of an SQLite store: its rows (:class:`SqliteTenant`) plus search, forgetting and decisions
    (the log is read back by :class:`~runtime.store.decision_log.LogReads`, shared with PostgreSQL)."""

    def search(self, flt: MemoryFilter, now: datetime, q: np.ndarray, *, k: int, pool: int,
               context: RoleContext | None, weights: RankWeights, touch: bool) -> SearchResult:
        """Typed filter (on the vector cache) -> exact top-``pool`` -> SQL re-check -> re-rank -> top ``k``;
        with ``touch``, then the usage update of the hits."""
        res = search(self, flt, now, q, k=k, pool=pool, context=context, weights=weights)
        if touch and res.rowids:
            self.touch(res.rowids, now)
        return res

    def forget_plan(self, memory_ids: Sequence[str], cascade: Cascade) -> ForgetPlan:
        return _forget.plan(self, memory_ids, cascade)

    def forget(self, plan: ForgetPlan, *, reason: str, scrub: bool, wait_s: float) -> None:
        _forget.run(self, plan, reason=reason, checkpoint=scrub, wait_s=wait_s)

    def apply_decision(self, decision: RetentionDecision, *, candidates: Sequence[tuple[MemIR, np.ndarray]] = (),
                       dry_run: bool = False) -> RetentionDecision:
        return _decisions.apply(self, decision, candidates=candidates, dry_run=dry_run)


class SqliteStoreBackend(SqliteDB):
    """An SQLite store file: :class:`SqliteDB` plus the scopes it hands out."""

    def tenant(self, user_id: str, agent_id: str) -> SqliteTenantBackend:
        return SqliteTenantBackend(self, user_id, agent_id)
