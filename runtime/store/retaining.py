"""A retention decision over one scope, from the stored rows to the applied decision.

1. the call's arguments over the scope's policy (:meth:`RetentionPolicy.with_`);
2. the working memories read, the unsaved candidates prepared (:mod:`.prepare`);
3. the rows lined up (:func:`runtime.retention.inputs.decision_rows`) and scored in the scope's live
   context (or the caller's own, completed by :func:`~runtime.retention.inputs.with_steps`);
4. one plan built and solved (:class:`~runtime.retention.plan.RetentionPlan`), with the archived
   memories past their TTL leaving in the same decision;
5. the links to memories it deletes removed, and the decision applied by the tenant in one
   transaction (or only reported, with ``dry_run``).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..record.memir import utcnow
from ..retention.decision import RetentionDecision
from ..retention.inputs import decision_rows, with_steps
from ..retention.plan import RetentionPlan
from .corroboration import unlink
from .filters import MemoryFilter
from .prepare import Prepared, prepare
from .scope_core import ScopeCore

if TYPE_CHECKING:
    from utilitynet.context import ScoringContext

__all__ = ["auto_retain", "retain"]


def retain(core: ScopeCore, *, candidates: Sequence[Any] = (), now: datetime | None = None,
           dry_run: bool = False, trigger: str = "explicit", context: ScoringContext | None = None,
           **overrides: Any) -> RetentionDecision:
    """Decide and apply (see :meth:`runtime.store.scope.Scope.retain` for the arguments)."""
    policy = core.policy.with_(**overrides)                                                        # 1
    scorer = policy.scorer or core.store.default_scorer()
    now = now or utcnow()
    tenant = core.tenant
    recs, vecs, steps = tenant.with_vectors(MemoryFilter(tier="working", include_expired=True), now)  # 2
    prepared = [_candidate(core, c, i) for i, c in enumerate(candidates)]
    rows = decision_rows(recs, vecs, steps, [(p.record, p.vector) for p in prepared],               # 3
                         next_step=tenant.state().seq + 1, dim=core.store.embedder.dim)
    if context is None:
        ctx = core.scoring_context(now, rows.steps, rows.records, policy.recent_window)
    elif context.record_steps is None:
        ctx = with_steps(context, rows.steps, core.session_context([r.id for r in rows.records]))
    else:
        ctx = context
    decision = RetentionPlan(policy, scorer).decide(                                                 # 4
        rows.records, rows.vectors, ctx, user_id=core.user_id, agent_id=core.agent_id,
        trigger=trigger, candidate=rows.candidate, expired=tenant.expired_ids(now, "archive"))
    if not dry_run:                                                                                  # 5
        doomed = [m for m, it in decision.items.items() if it.action == "delete" and not it.candidate]
        if doomed or decision.expired:
            unlink(tenant, doomed + decision.expired, {r.id: r for r in recs})
    applied = tenant.apply_decision(decision, candidates=[(p.record, p.vector) for p in prepared], dry_run=dry_run)
    if not dry_run:
        core.live().working = len(applied.kept)
        if applied.deleted or applied.redacted or applied.expired:
            core.live().dialog = None  # the recent dialog may hold a deleted memory's vector
    return applied


def auto_retain(core: ScopeCore, trigger: str, now: datetime) -> RetentionDecision:
    """A triggered decision: it must never fail the write that fired it, so it overflows, never raises."""
    return retain(core, trigger=trigger, now=now, on_infeasible="overflow")


def _candidate(core: ScopeCore, c: Any, i: int) -> Prepared:
    from ..annotate.extract import Candidate

    where = f"candidate {i}: "
    if isinstance(c, Candidate):  # proposed by the model (extract_candidates): the agent derived it
        fields = {"source_type": "derived_inference", "dialog_role": "agent", "source_entity": core.agent_id,
                  **c.model_dump(exclude={"content"}, exclude_defaults=True)}
        return prepare(core, c.content, None, fields, track=False, where=where)
    if not isinstance(c, dict):
        return prepare(core, c, None, {}, track=False, where=where)
    return prepare(core, c.get("content"), c.get("embedding"),
                   {k: v for k, v in c.items() if k not in ("content", "embedding")}, track=False, where=where)
