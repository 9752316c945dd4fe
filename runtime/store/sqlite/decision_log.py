"""Applying retention decisions to an SQLite scope (reading the log back: :mod:`runtime.store.decision_log`).

:func:`apply` writes a planned :class:`~runtime.retention.RetentionDecision` in **one
transaction**: kept candidates are inserted, dropped items archived or deleted (a deleted item others
derive from becomes a redacted placeholder), usage columns updated, and the decision recorded —
all or nothing. The final actions come from :func:`runtime.store.decision_log.finalize` (shared
with every backend); a dry run computes exactly the same lists without writing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...record.memir import MemIR
from ...retention.decision import RetentionDecision
from ..decision_log import head_json, planned
from ..forget_plan import ForgetPlan
from ..tiers import is_promotion
from . import forgetting as _forget
from .tenant import SqliteTenant

__all__ = ["apply"]  # reading the log back: runtime.store.decision_log (every backend)


def apply(tenant: SqliteTenant, decision: RetentionDecision, *, candidates: Sequence[tuple[MemIR, np.ndarray]] = (),
          dry_run: bool = False, placeholder_vector: np.ndarray | None = None) -> RetentionDecision:
    """Apply (or, with ``dry_run``, preview) a planned decision; returns it with the final actions.

    Args:
        tenant: the scope.
        decision: from :meth:`RetentionPlan.decide` (planned actions).
        candidates: the unsaved candidates with their vectors (written if kept).
        dry_run: compute the final actions only; change nothing.
        placeholder_vector: vector of the placeholder text (computed once by the caller).
    """
    out, by, new = planned(tenant, decision, candidates, lambda ids: _forget.plan(tenant, ids, "redact"),
                           dry_run=dry_run)
    if dry_run:
        return out
    final = out.items
    t, tp = tenant.clause("memories", check_only=True)
    with tenant.db.transaction() as conn:
        if new:
            tenant.insert([r for r, _ in new], [v for _, v in new])
        conn.executemany(f"UPDATE memories SET utility = ?, retention_reason = ? WHERE {t} AND id = ?",
                         [(it.utility, it.reason.value, *tp, m) for m, it in final.items() if it.action == "keep"])
        conn.executemany(f"UPDATE memories SET tier = 'archive', utility = ?, retention_reason = ? "
                         f"WHERE {t} AND id = ?",
                         [(final[m].utility, final[m].reason.value, *tp, m) for m in by["archive"]])
        conn.executemany(f"UPDATE memories SET tier = 'working', retention_reason = ? WHERE {t} AND id = ?",
                         [(final[m].reason.value, *tp, m) for m in by["promote"]])
        tenant.conform_vectors(conn, by["archive"] + by["promote"])  # cold format / back to float32
        if by["delete"] or by["redact"]:
            reason = "retention"
            _forget.execute(tenant, conn, ForgetPlan(deleted=by["delete"], redacted=by["redact"]),
                            reason=reason, placeholder_vector=placeholder_vector)
        _record(tenant, conn, out)
    if by["delete"] or by["redact"]:
        tenant.db.checkpoint(1.0)  # old page images leave the WAL too (if a reader holds it, after it ends)
    return out


def _record(tenant: SqliteTenant, conn: Any, d: RetentionDecision) -> None:
    seq = _scope_seq(conn, tenant)
    cur = conn.execute("INSERT INTO decisions(decision_id, user_id, agent_id, at, payload) VALUES (?,?,?,?,?)",
                       (d.decision_id, tenant.user_id, tenant.agent_id, d.at.timestamp(), head_json(d)))
    conn.executemany("INSERT INTO decision_items(decision_rowid, memory_id, kept, reason, payload) VALUES (?,?,?,?,?)",
                     [(cur.lastrowid, m, int(it.kept), it.reason.value, it.model_dump_json())
                      for m, it in d.items.items()])
    if not is_promotion(d):  # a promotion on access leaves the write counter to retention's triggers
        conn.execute("UPDATE scopes SET decision_seq = ? WHERE user_id=? AND agent_id=?",
                     (seq, tenant.user_id, tenant.agent_id))


def _scope_seq(conn: Any, tenant: SqliteTenant) -> int:
    row = conn.execute("SELECT seq FROM scopes WHERE user_id=? AND agent_id=?",
                       (tenant.user_id, tenant.agent_id)).fetchone()
    return int(row[0]) if row else 0
