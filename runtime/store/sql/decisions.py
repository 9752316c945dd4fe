"""Applying retention decisions to an SQL scope, both backends (reading the log back:
:mod:`runtime.store.decision_log`).

:func:`apply` writes a planned :class:`~runtime.retention.RetentionDecision` in **one
transaction**: kept candidates are inserted, dropped items archived or deleted (a deleted item others
derive from becomes a redacted placeholder), promoted items moved back to working memory (vectors
re-encoded to the format of their new tier), usage columns updated, and the decision recorded —
all or nothing. The final actions come from :func:`runtime.store.decision_log.finalize`; a dry run
computes exactly the same lists without writing. Items another client deleted in between become ``gone``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ...record.memir import MemIR
from ..decision_log import head_json, planned
from ..forget_plan import ForgetPlan
from ..tiers import is_promotion
from . import forgetting
from .tenant import SqlTenant

if TYPE_CHECKING:
    from ...retention.decision import RetentionDecision

__all__ = ["apply", "record"]


def apply(tenant: SqlTenant, decision: RetentionDecision, *, candidates: Sequence[tuple[MemIR, np.ndarray]] = (),
          dry_run: bool = False, placeholder_vector: np.ndarray | None = None) -> RetentionDecision:
    """Apply (or, with ``dry_run``, preview) a planned decision; returns it with the final actions.

    Args:
        tenant: the scope.
        decision: from :meth:`RetentionPlan.decide` (planned actions).
        candidates: the unsaved candidates with their vectors (written if kept).
        dry_run: compute the final actions only; change nothing.
        placeholder_vector: vector of the placeholder text (computed once by the caller).
    """
    out, by, new = planned(tenant, decision, candidates, lambda ids: forgetting.plan(tenant, ids, "redact"),
                           dry_run=dry_run)
    if dry_run:
        return out
    final = out.items
    t, tp = tenant.clause(check_only=True)
    with tenant.writing() as conn:
        tenant.lock_rows(conn, [m for m, it in final.items() if it.action in ("keep", "archive", "promote")]
                         + by["delete"] + by["redact"])
        if new:
            tenant.insert([r for r, _ in new], [v for _, v in new])
        update, scored = tenant.dialect.update_memories, (("utility", "float8"), ("retention_reason", "text"))
        update(conn, t, tp, "", scored,
               [(m, it.utility, it.reason.value) for m, it in final.items() if it.action == "keep"])
        update(conn, t, tp, "tier = 'archive'", scored,
               [(m, final[m].utility, final[m].reason.value) for m in by["archive"]])
        update(conn, t, tp, "tier = 'working'", (("retention_reason", "text"),),
               [(m, final[m].reason.value) for m in by["promote"]])
        tenant.conform_vectors(conn, by["archive"] + by["promote"])  # cold format / back to float32
        if by["delete"] or by["redact"]:
            forgetting.execute(tenant, conn, ForgetPlan(deleted=by["delete"], redacted=by["redact"]),
                               reason="retention", placeholder_vector=placeholder_vector)
        record(tenant, conn, out)
    if by["delete"] or by["redact"]:
        tenant.release_freed(1.0, required=False)  # as far as it can now (a busy reader: after it ends)
    return out


def record(tenant: SqlTenant, conn: Any, d: RetentionDecision) -> None:
    """Inside the decision's transaction: log it with its items, and (unless it only promoted on
    access, which leaves the write counter to retention's triggers) mark the scope decided."""
    tenant.record_decision(conn, d.decision_id, d.at.timestamp(), head_json(d),
                           [(m, it.kept, it.reason.value, it.model_dump_json()) for m, it in d.items.items()])
    if not is_promotion(d):
        ph = tenant.dialect.ph
        conn.execute(f"UPDATE scopes SET decision_seq = seq WHERE user_id = {ph} AND agent_id = {ph}",
                     (tenant.user_id, tenant.agent_id))
