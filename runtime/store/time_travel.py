"""Time travel: the memories a retention decision saw, as they were (``Scope.memories_at``).

A decision logs, per item, what the solver did and the utility it used — never the content. The
content comes from the store: a record's content never changes (a correction is a new record; usage
counters live beside them; ``Scope.tag`` and corroboration links add tags and links but never touch
the content), so a memory still present has the content it had at the decision. Two things
change a record: forgetting deletes it (its id in the decision log becomes an unlinkable
tombstone), and a forget cascade can leave a redacted placeholder. Either way the answer says so
and carries no content: deletion is complete, time travel never resurrects a forgotten memory.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict

from ..record.memir import Flag, MemIR
from ..retention.decision import Action, ItemDecision, RetentionDecision
from ..retention.solver import Reason
from .backend import TenantBackend

__all__ = ["stored_memories_at", "MemoriesAt", "MemoryAt", "memories_at"]

TierAfter = Literal["working", "archive", "deleted", "redacted", "not_written"]
_TIER_AFTER: dict[str, TierAfter] = {"keep": "working", "write": "working", "archive": "archive",
                                     "delete": "deleted", "gone": "deleted", "redact": "redacted",
                                     "skip": "not_written", "promote": "working"}


class MemoryAt(BaseModel):
    """One item of a past decision.

    Attributes:
        memory_id: the memory's id (a tombstone if it has been forgotten since).
        content: its content as it was; ``None`` when it is gone or redacted since.
        now: ``present``, ``redacted`` (a placeholder remains) or ``deleted`` (forgotten since, or
            an unsaved candidate the decision did not keep).
        tier_after: where the decision put it: ``working`` (kept), ``archive``, ``deleted``,
            ``redacted`` (deleted, placeholder kept) or ``not_written`` (a dropped candidate).
        tier_now: ``working`` / ``archive`` today, ``None`` when it is no longer stored.
        kept, action, reason: the solver's answer and what applying it did.
        utility: the utility the decision computed (model utility + rule bonuses); model_utility alone.
        record: the stored record when ``now`` is ``present`` (roles, provenance; tags and links as
            they are now).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    memory_id: str
    content: str | None
    now: Literal["present", "redacted", "deleted"]
    tier_after: TierAfter
    tier_now: Literal["working", "archive"] | None
    kept: bool
    action: Action
    reason: Reason
    utility: float
    model_utility: float
    record: MemIR | None = None


class MemoriesAt(BaseModel):
    """Every item a decision saw, in the decision's order (``Scope.memories_at``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    decision_id: str
    at: datetime
    trigger: str
    items: list[MemoryAt]

    @property
    def working(self) -> list[MemoryAt]:
        """The working set right after the decision (the kept items)."""
        return [m for m in self.items if m.tier_after == "working"]

    def summary(self) -> dict[str, object]:
        """Counts per ``tier_after`` and per ``now``."""
        out: dict[str, object] = {"decision_id": self.decision_id, "at": self.at.isoformat(), "items": len(self.items)}
        for key in ("tier_after", "now"):
            counts: dict[str, int] = {}
            for m in self.items:
                v = str(getattr(m, key))
                counts[v] = counts.get(v, 0) + 1
            out[key] = counts
        return out


def memories_at(decision: RetentionDecision, stored: dict[str, tuple[MemIR, str]]) -> MemoriesAt:
    """Build the view of a logged (applied) ``decision`` from ``stored``: ``{memory_id: (record, tier)}`` for the items
    still in the scope (items absent from it are reported deleted, with no content)."""
    items = []
    for mid, it in decision.items.items():
        items.append(_item(mid, it, stored.get(mid)))
    return MemoriesAt(decision_id=decision.decision_id, at=decision.at, trigger=decision.trigger, items=items)


def _item(mid: str, it: ItemDecision, found: tuple[MemIR, str] | None) -> MemoryAt:
    after = _TIER_AFTER[it.action]
    rec, tier = found if found is not None else (None, None)
    if rec is None:
        now: Literal["present", "redacted", "deleted"] = "deleted"
    elif Flag.placeholder in rec.metadata.flags:
        now, rec = "redacted", None
    else:
        now = "present"
    return MemoryAt(memory_id=mid, content=None if rec is None else rec.content, now=now, tier_after=after,
                    tier_now=tier if now != "deleted" else None,  # type: ignore[arg-type]
                    kept=it.kept, action=it.action, reason=it.reason, utility=it.utility,
                    model_utility=it.model_utility, record=rec)


def stored_memories_at(tenant: TenantBackend, decision: RetentionDecision) -> MemoriesAt:
    """:func:`memories_at` of ``decision``, with every item it saw looked up in ``tenant``."""
    stored: dict[str, tuple[MemIR, str]] = {}
    for mid in decision.items:
        rec, tier = tenant.get(mid), tenant.tier_of(mid)
        if rec is not None and tier is not None:
            stored[mid] = (rec, tier)
    return memories_at(decision, stored)
