"""The part of a tenant backend (:class:`runtime.store.backend.TenantBackend`) both SQL engines share:
the rows (:class:`~.tenant.SqlTenant`), forgetting, retention decisions and the decision log. Each
backend adds its search (``runtime.store.sqlite.backend``, ``runtime.store.postgres.backend``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from ...record.memir import MemIR
from ..decision_log import LogReads
from ..forget_plan import Cascade, ForgetPlan
from . import decisions, feedback, forgetting, lineage
from .tenant import SqlTenant, retried

if TYPE_CHECKING:
    from ...experiments.events import Feedback
    from ...retention.decision import RetentionDecision

__all__ = ["SqlTenantBackend"]


class SqlTenantBackend(SqlTenant, LogReads):
    """One scope's rows plus forgetting and retention decisions, written once for both engines (the log
    is read back by :class:`~runtime.store.decision_log.LogReads`)."""

    def lineage(self, memory_ids: Sequence[str], depth: int | None = None) -> list[list[str]]:
        """The scope's memories derived from ``memory_ids``, generation by generation (:func:`.lineage.generations`)."""
        return lineage.generations(self, memory_ids, depth)

    def parents(self, memory_id: str) -> list[str]:
        """The ids ``memory_id`` was derived from (:func:`.lineage.parents`)."""
        return lineage.parents(self, memory_id)

    def record_feedback(self, fb: Feedback) -> None:
        """Append an outcome event to the scope's log (:func:`.feedback.record`)."""
        feedback.record(self, fb)

    def feedback(self, limit: int) -> list[Feedback]:
        """The scope's latest outcome events, newest first (:func:`.feedback.events`)."""
        return feedback.events(self, limit)

    def forget_plan(self, memory_ids: Sequence[str], cascade: Cascade) -> ForgetPlan:
        """What forgetting ``memory_ids`` under ``cascade`` would do (nothing written)."""
        return forgetting.plan(self, memory_ids, cascade)

    @retried
    def forget(self, plan: ForgetPlan, *, reason: str, scrub: bool, wait_s: float) -> None:
        """Apply a forget plan in its own transaction; with ``scrub`` the freed bytes leave the files."""
        forgetting.run(self, plan, reason=reason, scrub=scrub, wait_s=wait_s)

    @retried
    def apply_decision(self, decision: RetentionDecision, *, candidates: Sequence[tuple[MemIR, np.ndarray]] = (),
                       dry_run: bool = False) -> RetentionDecision:
        """Apply (or preview) a planned retention decision in one transaction (:func:`.decisions.apply`)."""
        return decisions.apply(self, decision, candidates=candidates, dry_run=dry_run)
