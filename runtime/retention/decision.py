"""Typed retention decisions and explanations (pydantic; stored as JSON, read back validated).

A :class:`RetentionDecision` is what ``Scope.retain`` returns, what the store records and what
``memir score`` writes per scope: the solver's answer, every constraint tight or slack, the cut, and
per item the reason code, the score breakdown (model utility + each rule bonus) and the action
taken. ``Scope.explain(id)`` returns a :class:`MemoryExplanation` built from the stored decisions.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from .solver import Reason, Status

__all__ = ["Action", "Bonus", "Constraint", "Cut", "CutItem", "DecisionEntry", "ItemDecision", "MemoryExplanation",
           "RetentionDecision"]

Action = Literal["keep", "write", "archive", "delete", "redact", "skip", "gone", "promote"]
"""What applying a decision does to an item: ``keep`` (stays in working memory), ``write`` (an
unsaved candidate that was kept and written), ``archive`` (moved to the cold tier), ``delete``,
``redact`` (deleted, but others derive from it: a redacted placeholder remains), ``skip`` (an
unsaved candidate that was not kept: never written), ``gone`` (deleted by another client between
planning and applying: nothing to do)."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Bonus(_Model):
    """A rule's adjustment of an item's model utility: a bonus rule's ``add``, or what a decay rule
    took (negative)."""

    rule: str
    add: float


class ItemDecision(_Model):
    """One item of a decision.

    Attributes:
        memory_id: the record id.
        kept: whether the solver kept it.
        reason: the solver's reason code (:class:`~runtime.retention.Reason`).
        action: what applying the decision did (or, in a dry run, would do) to it.
        utility: the utility the solver used (model utility + bonuses, decay rules' shares negative).
        model_utility: the scorer's utility alone.
        bonuses: rule adjustments, by rule (bonuses; decays as negative amounts).
        rule: the hard rule that forced it (must-keep or must-forget), if any.
        cause: the related item behind the reason (implying item, exclusion partner...), if any.
        candidate: an unsaved candidate (written only if kept).
    """

    memory_id: str
    kept: bool
    reason: Reason
    action: Action
    utility: float
    model_utility: float
    bonuses: list[Bonus] = Field(default_factory=list)
    rule: str | None = None
    cause: str | None = None
    candidate: bool = False


class Constraint(_Model):
    """One constraint of the problem and how close the answer came to it.

    ``slack`` < 0 means exceeded (overflow mode); ``tight`` = binding (for an implication: active).
    """

    name: str
    kind: Literal["capacity", "budget", "quota", "implies", "excludes"]
    slack: float | None
    tight: bool
    used: float | None = None
    limit: float | None = None
    count: int | None = None
    min: int | None = None
    max: int | None = None
    soft: bool | None = None


class CutItem(_Model):
    """An item at the capacity cut."""

    memory_id: str
    utility: float | None


class Cut(_Model):
    """The capacity cut: the worst item kept on merit, the best dropped on merit, and what one more
    slot would have bought (``marginal_utility``; 0 when nothing was cut)."""

    worst_kept: CutItem | None = None
    best_dropped: CutItem | None = None
    marginal_utility: float | None = 0.0


class RetentionDecision(_Model):
    """The outcome of one retention decision.

    Attributes:
        decision_id: ``dec_<hex>``; ``Scope.explain`` and ``memir explain`` accept it.
        at: the decision time (UTC).
        user_id, agent_id: the scope.
        trigger: what fired it (``explicit``, ``every_n_writes``, ``watermark``,
            ``session_end:<id>``, ``event:<name>``...).
        scorer: the scorer's name.
        method, engine, status: which solver ran and how far the answer can be trusted.
        objective: the solver's objective (Σ utility of kept items, minus a soft-capacity penalty).
        capacity: the count capacity used (``None`` = no count limit).
        budget_tokens: the token budget used, if any.
        kept, archived, deleted, redacted, written: ids by action (``kept`` includes written
            candidates; ``redacted`` = deleted but a placeholder remains).
        promoted: cold memories moved back to the working tier by an access (a promotion
            decision, trigger ``access:recall``; :mod:`runtime.store.tiers`).
        expired: archived memories past their TTL, removed by this decision (also listed in
            ``deleted`` or ``redacted``): the TTL holds in the archive too.
        dry_run: nothing was changed; the lists say what the real run would do.
        n_items: items considered (working memories + candidates).
        constraints, cut, overflow, upper_bound, gap: the solver's explanation.
        items: per item, keyed by memory id.
        inputs_digest: hash of ids, utilities and capacity (to spot identical inputs).
        solve_ms, total_ms: time in the solver / in the whole decision.
    """

    decision_id: str
    at: datetime
    user_id: str
    agent_id: str
    trigger: str
    scorer: str
    method: str
    engine: str
    status: Status
    objective: float
    capacity: int | None
    budget_tokens: int | None = None
    kept: list[str]
    archived: list[str] = Field(default_factory=list)
    deleted: list[str] = Field(default_factory=list)
    redacted: list[str] = Field(default_factory=list)
    written: list[str] = Field(default_factory=list)
    promoted: list[str] = Field(default_factory=list)
    expired: list[str] = Field(default_factory=list)
    dry_run: bool = False
    n_items: int
    constraints: list[Constraint] = Field(default_factory=list)
    cut: Cut = Field(default_factory=Cut)
    overflow: dict[str, float] = Field(default_factory=dict)
    upper_bound: float | None = None
    gap: float | None = None
    items: dict[str, ItemDecision] = Field(default_factory=dict, repr=False)
    inputs_digest: str = ""
    solve_ms: float = 0.0
    total_ms: float = 0.0

    def summary(self) -> dict[str, object]:
        """Counts and the headline fields (what ``memir retain`` prints by default)."""
        return {"decision_id": self.decision_id, "trigger": self.trigger, "dry_run": self.dry_run,
                "items": self.n_items, "kept": len(self.kept), "archived": len(self.archived),
                "deleted": len(self.deleted), "redacted": len(self.redacted), "written": len(self.written),
                "capacity": self.capacity, "method": self.method, "status": self.status.value,
                "objective": round(self.objective, 6), "overflow": self.overflow,
                "solve_ms": round(self.solve_ms, 3)}


class DecisionEntry(_Model):
    """One decision about one memory, as :meth:`Scope.explain` lists it."""

    decision_id: str
    at: datetime
    trigger: str
    method: str
    status: Status
    capacity: int | None
    marginal_utility: float | None
    item: ItemDecision


class MemoryExplanation(_Model):
    """Why a memory is here, or was dropped, and when.

    Attributes:
        memory_id: the memory asked about.
        state: ``working``, ``archive`` or ``deleted`` (no longer in the store).
        summary: one human-readable line.
        history: every decision about it, oldest first.
        superseded_by / supersedes: the correction chain around it, if any.
        derived_from: the memories it was derived from (its ``provenance.derived_from``).
        children: the memories derived from it (``Scope.children``; ``Scope.descendants`` goes deeper).
    """

    memory_id: str
    state: Literal["working", "archive", "deleted"]
    summary: str
    history: list[DecisionEntry] = Field(default_factory=list)
    supersedes: str | None = None
    superseded_by: str | None = None
    derived_from: list[str] = Field(default_factory=list)
    children: list[str] = Field(default_factory=list)
