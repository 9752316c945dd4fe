"""Applying retention decisions to a scope, and the decision log that explains them.

:func:`apply` writes a planned :class:`~runtime.retention.RetentionDecision` in **one
transaction**: kept candidates are inserted, dropped items archived or deleted (a deleted item others
derive from becomes a redacted placeholder), usage columns updated, and the decision recorded —
all or nothing. Items that vanished between planning and applying (another client deleted them)
get the action ``gone`` instead of failing the decision. A dry run computes exactly the same
lists without writing. :func:`explain`, :func:`get` and :func:`recent` read the log back, typed.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from ...errors import NotFoundError
from ...record.memir import MemIR
from ...retention.decision import DecisionEntry, ItemDecision, MemoryExplanation, RetentionDecision
from . import forget as _forget
from .tenant import SqliteTenant

__all__ = ["apply", "explain", "get", "recent"]


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
    items = decision.items
    present = tenant.existing_ids([m for m, it in items.items() if not it.candidate])
    gone = {m for m, it in items.items() if not it.candidate and m not in present}
    delete_ids = [m for m, it in items.items() if it.action == "delete" and m not in gone]
    expired = [m for m in decision.expired if m not in items]  # archived past their TTL (not planned items)
    fp = _forget.plan(tenant, delete_ids + expired, "redact") if delete_ids or expired else _forget.ForgetPlan()
    redacted = set(fp.redacted)
    final: dict[str, ItemDecision] = {}
    for m, it in items.items():
        action = "gone" if m in gone else ("redact" if m in redacted else it.action)
        final[m] = it if action == it.action else it.model_copy(update={"action": action})
    by = _by_action(final)
    # the forget plan puts every expired id in exactly one of the two lists
    by["delete"] += [m for m in expired if m not in redacted]
    by["redact"] += [m for m in expired if m in redacted]
    out = decision.model_copy(update={
        "items": final, "kept": by["keep"] + by["write"], "written": by["write"], "archived": by["archive"],
        "deleted": by["delete"], "redacted": by["redact"], "dry_run": dry_run,
        "expired": expired})
    if dry_run:
        return out
    new = [(r, v) for r, v in candidates if final[r.id].action == "write"]
    t, tp = tenant.clause("memories", check_only=True)
    with tenant.db.transaction() as conn:
        if new:
            tenant.insert([r for r, _ in new], [v for _, v in new])
        conn.executemany(f"UPDATE memories SET utility = ?, retention_reason = ? WHERE {t} AND id = ?",
                         [(it.utility, it.reason.value, *tp, m) for m, it in final.items() if it.action == "keep"])
        conn.executemany(f"UPDATE memories SET tier = 'archive', utility = ?, retention_reason = ? "
                         f"WHERE {t} AND id = ?",
                         [(final[m].utility, final[m].reason.value, *tp, m) for m in by["archive"]])
        if by["delete"] or by["redact"]:
            reason = "retention"
            _forget.execute(tenant, conn, _forget.ForgetPlan(deleted=by["delete"], redacted=by["redact"]),
                            reason=reason, placeholder_vector=placeholder_vector)
        _record(tenant, conn, out)
    if by["delete"] or by["redact"]:
        tenant.db.checkpoint(1.0)  # old page images leave the WAL too (if a reader holds it, after it ends)
    return out


def _by_action(items: dict[str, ItemDecision]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {a: [] for a in ("keep", "write", "archive", "delete", "redact", "skip", "gone")}
    for m, it in items.items():
        out[it.action].append(m)
    return out


def _record(tenant: SqliteTenant, conn: Any, d: RetentionDecision) -> None:
    seq = _scope_seq(conn, tenant)
    head = d.model_dump(mode="json", exclude={"items"})
    cur = conn.execute("INSERT INTO decisions(decision_id, user_id, agent_id, at, payload) VALUES (?,?,?,?,?)",
                       (d.decision_id, tenant.user_id, tenant.agent_id, d.at.timestamp(), json.dumps(head)))
    conn.executemany("INSERT INTO decision_items(decision_rowid, memory_id, kept, reason, payload) VALUES (?,?,?,?,?)",
                     [(cur.lastrowid, m, int(it.kept), it.reason.value, it.model_dump_json())
                      for m, it in d.items.items()])
    conn.execute("UPDATE scopes SET decision_seq = ? WHERE user_id=? AND agent_id=?",
                 (seq, tenant.user_id, tenant.agent_id))


def _scope_seq(conn: Any, tenant: SqliteTenant) -> int:
    row = conn.execute("SELECT seq FROM scopes WHERE user_id=? AND agent_id=?",
                       (tenant.user_id, tenant.agent_id)).fetchone()
    return int(row[0]) if row else 0


def get(tenant: SqliteTenant, decision_id: str) -> RetentionDecision:
    """One decision of this scope, items included (``NotFoundError`` otherwise)."""
    t, tp = tenant.clause("decisions")
    with tenant.db.read() as conn:
        row = conn.execute(f"SELECT id, payload FROM decisions WHERE {t} AND decision_id = ?",
                           tp + [decision_id]).fetchone()
        if row is None:
            raise NotFoundError(f"no decision {decision_id!r} in scope user={tenant.user_id!r} "
                                f"agent={tenant.agent_id!r}")
        items = conn.execute("SELECT memory_id, payload FROM decision_items WHERE decision_rowid = ?",
                             (row[0],)).fetchall()
    head = json.loads(row[1])
    head["items"] = {m: json.loads(p) for m, p in items}
    return RetentionDecision.model_validate(head)


def recent(tenant: SqliteTenant, limit: int) -> list[RetentionDecision]:
    """The scope's decisions, most recently made first, without their per-item details.

    Ordered by when they were recorded, not by their ``at``: a caller may decide "as of" any time
    (a replay of dated history, a backfill), and the log must still read in the order it was written.
    """
    t, tp = tenant.clause("decisions")
    with tenant.db.read() as conn:
        rows = conn.execute(f"SELECT payload FROM decisions WHERE {t} ORDER BY id DESC LIMIT ?",
                            tp + [int(limit)]).fetchall()
    return [RetentionDecision.model_validate(json.loads(p)) for (p,) in rows]


def explain(tenant: SqliteTenant, memory_id: str) -> MemoryExplanation:
    """Why a memory is here (or was dropped), and when: its tier plus every decision about it."""
    t, tp = tenant.clause("d")
    with tenant.db.read() as conn:
        rows = conn.execute(
            f"SELECT d.payload, i.payload FROM decision_items i JOIN decisions d ON d.id = i.decision_rowid "
            f"WHERE {t} AND i.memory_id = ? ORDER BY d.id", tp + [memory_id]).fetchall()
    tier = tenant.tier_of(memory_id)
    if tier is None and not rows:
        raise NotFoundError(f"no memory or decision about {memory_id!r} in scope user={tenant.user_id!r} "
                            f"agent={tenant.agent_id!r}")
    history = []
    for dpay, ipay in rows:
        d = json.loads(dpay)
        history.append(DecisionEntry(decision_id=d["decision_id"], at=d["at"], trigger=d["trigger"],
                                     method=d["method"], status=d["status"], capacity=d["capacity"],
                                     marginal_utility=d.get("cut", {}).get("marginal_utility"),
                                     item=ItemDecision.model_validate_json(ipay)))
    state = "deleted" if tier is None else tier
    versions = tenant.versions(memory_id) if tier is not None else []
    pos = versions.index(memory_id) if memory_id in versions else -1
    supersedes = versions[pos - 1] if pos > 0 else None
    superseded_by = versions[pos + 1] if 0 <= pos < len(versions) - 1 else None
    if history:
        last = history[-1]
        summary = (f"{memory_id} is {state}; last decision {last.decision_id} at {last.at.isoformat()} "
                   f"({last.trigger}): {'kept' if last.item.kept else 'dropped'} ({last.item.reason.value}, "
                   f"{last.item.action})")
    else:
        summary = f"{memory_id} is {state}; no retention decision has touched it yet"
    if superseded_by:
        summary += f"; superseded by {superseded_by}"
    return MemoryExplanation(memory_id=memory_id, state=state, summary=summary, history=history,  # type: ignore[arg-type]
                             supersedes=supersedes, superseded_by=superseded_by)
