"""Applying retention decisions to a PostgreSQL scope (reading the log back: :mod:`runtime.store.decision_log`).

The same contract as the SQLite backend (:mod:`runtime.store.sqlite.decision_log`): the final actions
come from :func:`runtime.store.decision_log.finalize`, and a decision is applied in **one**
scoped transaction — candidates inserted, items archived, promoted or forgotten (vectors
re-encoded to the format of their new tier), usage columns updated, the decision recorded — all
or nothing. Items another client deleted in between become ``gone``.
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
from .tenant import PgTenant, lock_rows

__all__ = ["apply"]  # reading the log back: runtime.store.decision_log (every backend)


def apply(tenant: PgTenant, decision: RetentionDecision, *, candidates: Sequence[tuple[MemIR, np.ndarray]] = (),
          dry_run: bool = False, placeholder_vector: np.ndarray | None = None) -> RetentionDecision:
    """Apply (or, with ``dry_run``, preview) a planned decision; returns it with the final actions."""
    out, by, new = planned(tenant, decision, candidates, lambda ids: _forget.plan(tenant, ids, "redact"),
                           dry_run=dry_run)
    if dry_run:
        return out
    final = out.items
    t, tp = tenant.clause()
    with tenant.tx() as conn:
        touched = ([m for m, it in final.items() if it.action in ("keep", "archive", "promote")]
                   + by["delete"] + by["redact"])
        lock_rows(tenant, conn, touched)
        if new:
            tenant.insert([r for r, _ in new], [v for _, v in new])
        with conn.cursor() as cur:
            keep = [(it.utility, it.reason.value, *tp, m) for m, it in final.items() if it.action == "keep"]
            if keep:
                cur.executemany(f"UPDATE memories m SET utility = %s, retention_reason = %s WHERE {t} AND m.id = %s",
                                keep)
            arch = [(final[m].utility, final[m].reason.value, *tp, m) for m in by["archive"]]
            if arch:
                cur.executemany(f"UPDATE memories m SET tier = 'archive', utility = %s, retention_reason = %s "
                                f"WHERE {t} AND m.id = %s", arch)
        moved = by["archive"] + by["promote"]
        if by["promote"]:
            conn.execute(f"UPDATE memories m SET tier = 'working', retention_reason = 'accessed' "
                         f"WHERE {t} AND m.id = ANY(%s)", [*tp, list(by["promote"])])
        if moved:  # vectors to the format of their new tier (cold format / float32)
            tenant.conform(conn, [int(r) for (r,) in conn.execute(
                f"SELECT m.rowid FROM memories m WHERE {t} AND m.id = ANY(%s)", [*tp, moved])])
        if by["delete"] or by["redact"]:
            _forget.execute(tenant, conn, ForgetPlan(deleted=by["delete"], redacted=by["redact"]),
                            reason="retention", placeholder_vector=placeholder_vector)
        _record(tenant, conn, out)
    return out


def _record(tenant: PgTenant, conn: Any, d: RetentionDecision) -> None:
    rowid = conn.execute("INSERT INTO decisions(decision_id, at, payload) VALUES (%s,%s,%s) RETURNING id",
                         (d.decision_id, d.at.timestamp(), head_json(d))).fetchone()[0]
    if d.items:
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO decision_items(decision_rowid, memory_id, kept, reason, payload) "
                            "VALUES (%s,%s,%s,%s,%s)",
                            [(rowid, m, bool(it.kept), it.reason.value, it.model_dump_json())
                             for m, it in d.items.items()])
    if not is_promotion(d):  # a promotion on access leaves the write counter to retention's triggers
        conn.execute("UPDATE scopes SET decision_seq = seq WHERE user_id = %s AND agent_id = %s",
                     (tenant.user_id, tenant.agent_id))
