"""The PostgreSQL backend as the store sees it: :class:`PgStoreBackend` (the database) hands out
:class:`PgTenantBackend` objects (one scope's rows, with search, forgetting and the decision log bound to
it), satisfying :mod:`runtime.store.backend`'s contract."""

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
from .db import PgDB
from .search import search
from .tenant import PgTenant, retried

__all__ = ["PgTenantBackend", "PgStoreBackend"]


class PgTenantBackend(PgTenant, LogReads):
    """One scope of a PostgreSQL store: its rows (:class:`PgTenant`) plus search, forgetting and decisions."""

    def search(self, flt: MemoryFilter, now: datetime, q: np.ndarray, *, k: int, pool: int,
               context: RoleContext | None, weights: RankWeights, touch: bool) -> SearchResult:
        """Exact inside the filter for small scopes, HNSW for large ones; re-ranked as on SQLite; with
        ``touch`` the hits' usage is updated in the same transaction."""
        return search(self, flt, now, q, k=k, pool=pool, context=context, weights=weights, touch=touch)

    def forget_plan(self, memory_ids: Sequence[str], cascade: Cascade) -> ForgetPlan:
        return _forget.plan(self, memory_ids, cascade)

    @retried
    def forget(self, plan: ForgetPlan, *, reason: str, scrub: bool, wait_s: float) -> None:
        _forget.run(self, plan, reason=reason, scrub=scrub, wait_s=wait_s)

    @retried
    def apply_decision(self, decision: RetentionDecision, *, candidates: Sequence[tuple[MemIR, np.ndarray]] = (),
                       dry_run: bool = False) -> RetentionDecision:
        return _decisions.apply(self, decision, candidates=candidates, dry_run=dry_run)


class PgStoreBackend(PgDB):
    """A PostgreSQL store: :class:`PgDB` plus the scopes it hands out."""

    def tenant(self, user_id: str, agent_id: str) -> PgTenantBackend:
        return PgTenantBackend(self, user_id, agent_id)
