"""Retention decisions as a backend records and reads them, independent of the backend.

:func:`finalize` turns a planned decision into the final one a backend applies: items that
vanished between planning and applying (another client deleted them) get the action ``gone``
instead of failing the decision, and deletions of memories others derive from become
redactions. :func:`explanation` builds the answer to "why is this memory here" from the logged
rows. Each backend writes and reads the rows itself, in its own transactions.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol, cast

from ..errors import NotFoundError
from .forget_plan import ForgetPlan

if TYPE_CHECKING:  # the decision models load with the first decision read, not with the store
    from ..retention.decision import ItemDecision, MemoryExplanation, RetentionDecision

__all__ = ["ACTIONS", "LogDialect", "LogReads", "by_action", "planned", "explain", "explanation", "finalize", "from_rows", "get",
           "head_json", "recent"]

ACTIONS = ("keep", "write", "archive", "delete", "redact", "skip", "gone", "promote")


def by_action(items: dict[str, ItemDecision]) -> dict[str, list[str]]:
    """Item ids grouped by their action (every action present, maybe empty)."""
    out: dict[str, list[str]] = {a: [] for a in ACTIONS}
    for m, it in items.items():
        out[it.action].append(m)
    return out


def finalize(decision: RetentionDecision, present: Collection[str], plan_forget: Callable[[list[str]], ForgetPlan],
             *, dry_run: bool) -> tuple[RetentionDecision, dict[str, list[str]]]:
    """The decision with its final actions, and its item ids by action.

    Args:
        decision: from :meth:`RetentionPlan.decide` (planned actions; ``expired`` set).
        present: which of the decision's stored (non-candidate) items still exist.
        plan_forget: the backend's forget planner (``cascade="redact"``) for the ids to delete.
    """
    items = decision.items
    gone = {m for m, it in items.items() if not it.candidate and m not in present}
    delete_ids = [m for m, it in items.items() if it.action == "delete" and m not in gone]
    expired = [m for m in decision.expired if m not in items]  # archived past their TTL (not planned items)
    fp = plan_forget(delete_ids + expired) if delete_ids or expired else ForgetPlan()
    redacted = set(fp.redacted)
    final: dict[str, ItemDecision] = {}
    for m, it in items.items():
        action = "gone" if m in gone else ("redact" if m in redacted else it.action)
        final[m] = it if action == it.action else it.model_copy(update={"action": action})
    by = by_action(final)
    # the forget plan puts every expired id in exactly one of the two lists
    by["delete"] += [m for m in expired if m not in redacted]
    by["redact"] += [m for m in expired if m in redacted]
    out = decision.model_copy(update={
        "items": final, "kept": by["keep"] + by["write"] + by["promote"], "written": by["write"],
        "archived": by["archive"], "promoted": by["promote"],
        "deleted": by["delete"], "redacted": by["redact"], "dry_run": dry_run, "expired": expired})
    return out, by


def head_json(d: RetentionDecision) -> str:
    """The decision without its items, as logged."""
    return json.dumps(d.model_dump(mode="json", exclude={"items"}))


def from_rows(head: str, items: Sequence[tuple[str, str]]) -> RetentionDecision:
    """A logged decision from its head JSON and its ``(memory_id, item JSON)`` rows."""
    from ..retention.decision import RetentionDecision

    d: dict[str, Any] = json.loads(head)
    d["items"] = {m: json.loads(p) for m, p in items}
    return RetentionDecision.model_validate(d)


def explanation(memory_id: str, tier: str | None, rows: Sequence[tuple[str, str]],
                versions: Sequence[str], *, derived_from: Sequence[str] = (),
                children: Sequence[str] = ()) -> MemoryExplanation | None:
    """Why a memory is here (or was dropped), from its tier (``None``: not stored), the logged
    ``(decision JSON, item JSON)`` rows about it in log order, its version chain, and its lineage
    (what it was derived from, and the memories derived from it).
    ``None`` when there is neither a memory nor a decision (the caller raises ``NotFoundError``)."""
    from ..retention.decision import DecisionEntry, ItemDecision, MemoryExplanation

    if tier is None and not rows:
        return None
    history = []
    for dpay, ipay in rows:
        d = json.loads(dpay)
        history.append(DecisionEntry(decision_id=d["decision_id"], at=d["at"], trigger=d["trigger"],
                                     method=d["method"], status=d["status"], capacity=d["capacity"],
                                     marginal_utility=d.get("cut", {}).get("marginal_utility"),
                                     item=ItemDecision.model_validate_json(ipay)))
    state = "deleted" if tier is None else tier
    versions = list(versions) if tier is not None else []
    pos = versions.index(memory_id) if memory_id in versions else -1
    supersedes = versions[pos - 1] if pos > 0 else None
    superseded_by = versions[pos + 1] if 0 <= pos < len(versions) - 1 else None
    if history:
        last = history[-1]
        summary = (f"{memory_id} is {state}; last decision {last.decision_id} at {last.at.isoformat()} "
                   f"({last.trigger}): {'kept' if last.item.kept else 'dropped'} ({last.item.reason.value}, "
                   f"{last.item.action})")
        if last.item.bonuses:
            summary += "; utility adjusted by " + ", ".join(f"{b.rule} {b.add:+.3g}" for b in last.item.bonuses)
    else:
        summary = f"{memory_id} is {state}; no retention decision has touched it yet"
    if superseded_by:
        summary += f"; superseded by {superseded_by}"
    if derived_from:
        summary += f"; derived from {', '.join(derived_from)}"
    if children:
        summary += f"; {len(children)} {'memory' if len(children) == 1 else 'memories'} derived from it"
    return MemoryExplanation(memory_id=memory_id, state=state, summary=summary, history=history,  # type: ignore[arg-type]
                             supersedes=supersedes, superseded_by=superseded_by, derived_from=list(derived_from),
                             children=list(children))


# ---------------------------------------------------------------------------- reading the log (every backend)
class LogDialect(Protocol):
    """What reading a scope's decision log needs from a backend: its SQL placeholder, its tenant
    clause, a read transaction, and where a memory is now. Both tenants provide it."""

    user_id: str
    agent_id: str
    placeholder: str  # "?" (SQLite) or "%s" (PostgreSQL)

    def clause(self, alias: str) -> tuple[str, list[Any]]: ...
    def reading(self) -> AbstractContextManager[Any]: ...
    def tier_of(self, memory_id: str) -> str | None: ...
    def versions(self, memory_id: str) -> list[str]: ...
    def lineage(self, memory_ids: Sequence[str], depth: int | None = None) -> list[list[str]]: ...
    def parents(self, memory_id: str) -> list[str]: ...


def get(tenant: LogDialect, decision_id: str) -> RetentionDecision:
    """One decision of this scope, items included (``NotFoundError`` otherwise)."""
    t, tp, ph = *tenant.clause("d"), tenant.placeholder
    with tenant.reading() as conn:
        row = conn.execute(f"SELECT id, payload FROM decisions d WHERE {t} AND decision_id = {ph}",
                           [*tp, decision_id]).fetchone()
        if row is None:
            raise NotFoundError(f"no decision {decision_id!r} in scope user={tenant.user_id!r} "
                                f"agent={tenant.agent_id!r}")
        items = conn.execute(f"SELECT memory_id, payload FROM decision_items WHERE decision_rowid = {ph}",
                             (row[0],)).fetchall()
    return from_rows(row[1], items)


def recent(tenant: LogDialect, limit: int) -> list[RetentionDecision]:
    """The scope's decisions, most recently made first, without their per-item details.

    Ordered by when they were recorded, not by their ``at``: a caller may decide "as of" any time
    (a replay of dated history, a backfill), and the log must still read in the order it was written.
    """
    from ..retention.decision import RetentionDecision

    t, tp, ph = *tenant.clause("d"), tenant.placeholder
    with tenant.reading() as conn:
        rows = conn.execute(f"SELECT payload FROM decisions d WHERE {t} ORDER BY id DESC LIMIT {ph}",
                            [*tp, int(limit)]).fetchall()
    return [RetentionDecision.model_validate(json.loads(p)) for (p,) in rows]


def explain(tenant: LogDialect, memory_id: str) -> MemoryExplanation:
    """Why a memory is here (or was dropped), and when: its tier plus every decision about it."""
    t, tp, ph = *tenant.clause("d"), tenant.placeholder
    with tenant.reading() as conn:
        rows = conn.execute(
            f"SELECT d.payload, i.payload FROM decision_items i JOIN decisions d ON d.id = i.decision_rowid "
            f"WHERE {t} AND i.memory_id = {ph} ORDER BY d.id", [*tp, memory_id]).fetchall()
    tier = tenant.tier_of(memory_id)
    kids = tenant.lineage([memory_id], depth=1)
    out = explanation(memory_id, tier, rows, tenant.versions(memory_id) if tier is not None else [],
                      derived_from=tenant.parents(memory_id) if tier is not None else [],
                      children=kids[0] if kids else [])
    if out is None:
        raise NotFoundError(f"no memory or decision about {memory_id!r} in scope user={tenant.user_id!r} "
                            f"agent={tenant.agent_id!r}")
    return out


class LogReads:
    """``explain`` / ``decisions`` / ``decision`` of a tenant backend (one that is a :class:`LogDialect`)."""

    def explain(self, memory_id: str) -> MemoryExplanation:
        return explain(cast(LogDialect, self), memory_id)

    def decisions(self, limit: int) -> list[RetentionDecision]:
        return recent(cast(LogDialect, self), limit)

    def decision(self, decision_id: str) -> RetentionDecision:
        return get(cast(LogDialect, self), decision_id)


class Present(Protocol):
    def existing_ids(self, ids: Sequence[str]) -> set[str]: ...


def planned(tenant: Present, decision: RetentionDecision, candidates: Sequence[tuple[Any, Any]],
            plan_forget: Callable[[list[str]], ForgetPlan], *, dry_run: bool
            ) -> tuple[RetentionDecision, dict[str, list[str]], list[tuple[Any, Any]]]:
    """The first half of applying a decision, the same on every backend: the final decision
    (:func:`finalize`, against the items still present), its ids by action, and the candidates to write."""
    present = tenant.existing_ids([m for m, it in decision.items.items() if not it.candidate])
    out, by = finalize(decision, present, plan_forget, dry_run=dry_run)
    return out, by, [(r, v) for r, v in candidates if out.items[r.id].action == "write"]
