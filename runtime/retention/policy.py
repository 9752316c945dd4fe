"""A retention policy: configured once on a store or scope, it says how to decide and when.

``RetentionPolicy`` carries everything a decision needs besides the memories themselves — the
capacity or token budget, the rules, the scorer, the solver method, what happens to dropped items —
and :class:`Triggers` say when ``Scope.write`` / ``end_session`` / ``event`` run it by themselves
(seed 001 §5.2: on events, every N steps, at a fill watermark). Every trigger is off by default, so
explicit ``scope.retain()`` calls keep working unchanged.

Example:
    >>> policy = RetentionPolicy(capacity=200, triggers=Triggers(every_n_writes=50, on_session_end=True))
    >>> policy.triggers.enabled
    True
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from ..errors import ValidationError
from ..record.memir import MemIR
from .summary_policy import SummaryPolicy

if TYPE_CHECKING:
    from ..scoring.scorer import Scorer
    from .rules import RuleSet
    from .solver import Method, OnInfeasible

__all__ = ["CapacityFn", "Forgotten", "RetentionPolicy", "Triggers"]

CapacityFn = Callable[[Sequence[MemIR], np.ndarray], int]
"""A task-dependent capacity: ``(records, utility) -> K`` (e.g. ``TaskCapacity.resolve``)."""

Forgotten = Literal["archive", "delete"]


@dataclass(frozen=True)
class Triggers:
    """When retention runs by itself (all off by default).

    Attributes:
        every_n_writes: after this many writes since the scope's last decision (0 = off).
        watermark: when working memories reach this fraction of the capacity, in (0, 1]
            (``None`` = off; needs a count capacity).
        on_session_end: when a session closes (a write opens another session, the detector
            splits on a time gap or topic shift, or ``scope.end_session()``).
        events: names passed to ``scope.event(name)`` that run retention (e.g.
            ``{"task_phase_change", "new_instruction", "key_tool_result"}``).
    """

    every_n_writes: int = 0
    watermark: float | None = None
    on_session_end: bool = False
    events: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        p: list[tuple[str, str]] = []
        if isinstance(self.every_n_writes, bool) or not isinstance(self.every_n_writes, int) or self.every_n_writes < 0:
            p.append(("every_n_writes", f"must be an int >= 0 (0 = off), got {self.every_n_writes!r}"))
        if self.watermark is not None and not (isinstance(self.watermark, (int, float))
                                               and 0 < self.watermark <= 1):
            p.append(("watermark", f"must be in (0, 1] or None, got {self.watermark!r}"))
        if isinstance(self.events, str):
            p.append(("events", "give a set of event names, not one string"))
        if p:
            raise ValidationError.from_problems("Triggers", p)
        object.__setattr__(self, "events", frozenset(self.events))

    @property
    def enabled(self) -> bool:
        """Whether any trigger is on."""
        return bool(self.every_n_writes or self.watermark is not None or self.on_session_end or self.events)


@dataclass(frozen=True)
class RetentionPolicy:
    """How and when a scope decides what to keep.

    Attributes:
        capacity: max items kept in working memory (int), ``None`` for no count limit, or a
            callable ``(records, utility) -> int`` (seed 001 pitfall 2: task-dependent capacity).
        budget_tokens: max total tokens kept (≈ 4 characters per token), or ``None``.
        rules: a :class:`RuleSet`, a YAML file path, YAML text or a dict (``None`` = the defaults).
        scorer: the utility scorer (``None`` = the shipped ONNX utility model, loaded on first use).
        method: solver method: ``auto`` (greedy where provably optimal, else exact), ``greedy``,
            ``exact`` or ``cvxpy``.
        forgotten: what happens to items the optimiser drops: ``archive`` (cold tier: metadata and
            vector kept, recallable with ``tier="archive"``) or ``delete``. Must-forget items follow
            their rule's action (TTL and used secrets are always deleted).
        on_infeasible: ``raise`` names the conflicting rules; ``overflow`` keeps every rule and
            exceeds the capacity as little as needed. Automatic (triggered) decisions always use
            ``overflow`` so that a write never fails because of retention.
        overflow_penalty: makes the capacity soft: each item kept beyond it costs this much utility.
        triggers: when retention runs by itself (:class:`Triggers`).
        recent_window: turns averaged into the recent-context vector the utility model sees.
        summaries: session summaries at session end (:class:`~runtime.retention.SummaryPolicy`;
            off by default). Its ``keep_rule`` adds an implication to :attr:`ruleset`.
    """

    capacity: int | CapacityFn | None = None
    budget_tokens: int | None = None
    rules: RuleSet | str | Path | dict[str, Any] | None = None
    scorer: Scorer | None = None
    method: Method = "auto"
    forgotten: Forgotten = "archive"
    on_infeasible: OnInfeasible = "raise"
    overflow_penalty: float | None = None
    triggers: Triggers = field(default_factory=Triggers)
    recent_window: int = 5
    summaries: SummaryPolicy = field(default_factory=SummaryPolicy)

    def __post_init__(self) -> None:
        p: list[tuple[str, str]] = []
        k = self.capacity
        if not (k is None or callable(k) or (isinstance(k, (int, np.integer)) and not isinstance(k, bool) and k >= 0)):
            p.append(("capacity", f"must be an int >= 0, None (no count limit) or a callable, got {k!r}"))
        b = self.budget_tokens
        if b is not None and (isinstance(b, bool) or not isinstance(b, (int, np.integer)) or b < 0):
            p.append(("budget_tokens", f"must be an int >= 0 or None, got {b!r}"))
        if self.method not in ("auto", "greedy", "exact", "cvxpy"):
            p.append(("method", f"must be auto, greedy, exact or cvxpy, got {self.method!r}"))
        if self.forgotten not in ("archive", "delete"):
            p.append(("forgotten", f"must be 'archive' or 'delete', got {self.forgotten!r}"))
        if self.on_infeasible not in ("raise", "overflow"):
            p.append(("on_infeasible", f"must be 'raise' or 'overflow', got {self.on_infeasible!r}"))
        pen = self.overflow_penalty
        if pen is not None and (not isinstance(pen, (int, float)) or not math.isfinite(pen) or pen < 0):
            p.append(("overflow_penalty", f"must be a finite number >= 0 or None, got {pen!r}"))
        if not isinstance(self.triggers, Triggers):
            p.append(("triggers", "must be a Triggers(...)"))
        elif self.triggers.watermark is not None and not isinstance(self.capacity, (int, np.integer)):
            p.append(("triggers.watermark", "a fill watermark needs an integer capacity"))
        if isinstance(self.recent_window, bool) or not isinstance(self.recent_window, int) or self.recent_window < 1:
            p.append(("recent_window", f"must be an int >= 1, got {self.recent_window!r}"))
        if not isinstance(self.summaries, SummaryPolicy):
            p.append(("summaries", "must be a SummaryPolicy(...)"))
        if self.scorer is not None and not hasattr(self.scorer, "score"):
            p.append(("scorer", "must implement the Scorer protocol (name, score(records, embeddings, ctx))"))
        if p:
            raise ValidationError.from_problems("RetentionPolicy", p)
        if self.rules is not None:  # the rules' models load only when rules are given, or at the first decision
            from .rules import RuleSet, load_rules

            if not isinstance(self.rules, RuleSet):
                object.__setattr__(self, "rules", load_rules(self.rules))

    @property
    def ruleset(self) -> RuleSet:
        """The compiled-ready rule set (the defaults when none was given), plus the summaries'
        ``keep_rule`` implication when one is configured."""
        from .rules import DEFAULT_RULES, RuleSet

        base = self.rules if isinstance(self.rules, RuleSet) else DEFAULT_RULES
        extra = self.summaries.implies_rule()
        return base if extra is None else base.model_copy(update={"implies": [*base.implies, extra]})

    def with_(self, **changes: Any) -> RetentionPolicy:
        """A copy with some fields changed (``None`` values are ignored: they mean "as configured")."""
        return replace(self, **{k: v for k, v in changes.items() if v is not None})
