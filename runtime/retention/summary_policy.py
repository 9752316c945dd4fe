"""The summary policy (seed 000 §5.1.4, seed 001 §3.2 "post-hoc summary"): whether and how a closing
session is summarised, and the keep rule between a summary and its sources. The summariser itself
is :mod:`runtime.annotate.summary`; the closing :mod:`runtime.store.session_close`.

When a session closes and :class:`SummaryPolicy` is enabled, the scope ranks the session's turns
by utility (the scope's scorer, through :class:`~runtime.retention.RetentionPlan`), and
:func:`extract_summary` copies whole sentences of the highest-utility turns — so numbers, dates,
ids and names stay verbatim — in time order, within ``max_sentences`` / ``max_chars``. The scope
writes it as ONE ``derived_inference`` memory (tag :data:`SUMMARY_TAG`, ``source_entity``
:data:`SUMMARY_SOURCE`, ``derived_from`` = the turns it copied from), and, with
``demote_sources``, archives those turns through a logged retention decision (trigger
``summary:<session>``, rule ``summarised into <summary id>``).

``keep_rule`` adds one implication over ``derived_from`` to every decision of the scope (see
:meth:`SummaryPolicy.implies_rule`): ``summary_needs_sources`` — a summary is kept only with the
turns it cites that are in the decision; ``sources_need_summary`` — a turn is kept only with its
summary.

Example:
    >>> policy = RetentionPolicy(summaries=SummaryPolicy(enabled=True, min_turns=2))  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from ..annotate.summary import SUMMARY_TAG
from ..errors import ValidationError
from ..record.memir import MemIR

if TYPE_CHECKING:
    from .rules import ImpliesRule

__all__ = ["KeepRule", "Summarizer", "SummaryPolicy"]

KeepRule = Literal["summary_needs_sources", "sources_need_summary"]
Summarizer = Callable[[list[MemIR]], str]
"""An optional summariser hook (e.g. an LLM): the selected turns (time order) -> summary text. Its
output is written through the normal record builder, so it is validated and redacted."""


@dataclass(frozen=True)
class SummaryPolicy:
    """Whether and how a closing session is summarised (off by default: nothing changes).

    Attributes:
        enabled: summarise sessions when they close.
        min_turns: sessions with fewer turns are left alone.
        max_turns: at most this many turns (the highest-utility ones) are copied from.
        max_sentences, max_chars: the summary's size.
        demote_sources: archive the turns the summary copied from (a logged decision explains it).
        keep_rule: ``summary_needs_sources``, ``sources_need_summary`` or ``None`` (no rule).
        summarizer: an optional hook ``(turns) -> text`` used instead of the extractive summary.
    """

    enabled: bool = False
    min_turns: int = 3
    max_turns: int = 6
    max_sentences: int = 8
    max_chars: int = 1200
    demote_sources: bool = True
    keep_rule: KeepRule | None = None
    summarizer: Summarizer | None = None

    def __post_init__(self) -> None:
        p: list[tuple[str, str]] = []
        if not isinstance(self.enabled, bool):
            p.append(("enabled", f"must be a bool, got {self.enabled!r}"))
        for name, low in (("min_turns", 1), ("max_turns", 1), ("max_sentences", 1), ("max_chars", 40)):
            x = getattr(self, name)
            if isinstance(x, bool) or not isinstance(x, int) or x < low:
                p.append((name, f"must be an int >= {low}, got {x!r}"))
        if not isinstance(self.demote_sources, bool):
            p.append(("demote_sources", f"must be a bool, got {self.demote_sources!r}"))
        if self.keep_rule not in (None, "summary_needs_sources", "sources_need_summary"):
            p.append(("keep_rule", "must be 'summary_needs_sources', 'sources_need_summary' or None, "
                                   f"got {self.keep_rule!r}"))
        if self.summarizer is not None and not callable(self.summarizer):
            p.append(("summarizer", "must be a callable (turns) -> str or None"))
        if p:
            raise ValidationError.from_problems("SummaryPolicy", p)

    def implies_rule(self) -> ImpliesRule | None:
        """The implication ``keep_rule`` adds to every retention decision (``None``: no rule)."""
        from .rules import ImpliesRule, Match  # the rules' models load with the first decision, not the policy

        if self.keep_rule == "summary_needs_sources":
            return ImpliesRule.model_validate({"name": "summary needs its sources", "if": Match(tags=[SUMMARY_TAG]),
                                               "then": Match(), "relation": "derived_from",
                                               "direction": "sources"})
        if self.keep_rule == "sources_need_summary":
            return ImpliesRule.model_validate({"name": "sources need their summary", "if": Match(),
                                               "then": Match(tags=[SUMMARY_TAG]), "relation": "derived_from",
                                               "direction": "derived"})
        return None
