"""Session summaries (seed 000 §5.1.4, seed 001 §3.2 "post-hoc summary"): the policy and the
extractive summariser. No LLM is needed on any path.

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

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from ..errors import ValidationError
from ..record.memir import MemIR
from .rules import ImpliesRule, Match

__all__ = ["KeepRule", "SUMMARY_SOURCE", "SUMMARY_TAG", "Summarizer", "SummaryPolicy", "extract_summary",
           "key_facts", "split_sentences"]

KeepRule = Literal["summary_needs_sources", "sources_need_summary"]
Summarizer = Callable[[list[MemIR]], str]
"""An optional summariser hook (e.g. an LLM): the selected turns (time order) -> summary text. Its
output is written through the normal record builder, so it is validated and redacted."""

SUMMARY_TAG = "summary"
SUMMARY_SOURCE = "memir:summary"

_SENT = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[]?[A-Z0-9])|\n+")
_NUM = re.compile(r"(?<!\w)\d[\d,.:/%-]*\d(?!\w)|(?<!\w)\d(?!\w)")
_WORD = re.compile(r"[A-Za-z][A-Za-z'’-]*")
_ID = re.compile(r"\b(?=[\w-]*\d)\w[\w-]*\w\b|\b[A-Z]{2,}\b")


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
        if self.keep_rule == "summary_needs_sources":
            return ImpliesRule.model_validate({"name": "summary needs its sources", "if": Match(tags=[SUMMARY_TAG]),
                                               "then": Match(), "relation": "derived_from",
                                               "direction": "sources"})
        if self.keep_rule == "sources_need_summary":
            return ImpliesRule.model_validate({"name": "sources need their summary", "if": Match(),
                                               "then": Match(tags=[SUMMARY_TAG]), "relation": "derived_from",
                                               "direction": "derived"})
        return None


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text`` (split after ``.!?`` before a capital/digit, and at line breaks), stripped."""
    return [s.strip() for s in _SENT.split(text) if s and s.strip()]


def key_facts(text: str) -> set[str]:
    """The verbatim facts of a text: numbers (``40``, ``3.5``, ``2023/05/20``), ids and codes (any
    token with a digit, all-caps acronyms), and capitalised words that do not start a sentence
    (names, places, products)."""
    out = set(_NUM.findall(text)) | set(_ID.findall(text))
    for sent in split_sentences(text):
        words = _WORD.findall(sent)
        out |= {w for w in words[1:] if w[0].isupper() and w not in ("I", "I'm", "I've", "I'd", "I'll")}
    return out


def extract_summary(turns: Sequence[MemIR], utility: np.ndarray, policy: SummaryPolicy) -> tuple[str, list[str]]:
    """The extractive summary of one session: ``(text, ids of the turns it copied from)``.

    Turns are ranked by utility (ties: earlier first) and the top ``max_turns`` are read. Their
    sentences are taken in rank order — within a turn, sentences with more :func:`key_facts` first,
    then in position — while the summary stays within ``max_sentences`` and ``max_chars`` (a
    sentence that does not fit is skipped; a first sentence longer than ``max_chars`` is cut at a
    word boundary). The chosen sentences are emitted in time order, copied verbatim.
    """
    u = np.asarray(utility, dtype=np.float64)
    order = sorted(range(len(turns)), key=lambda i: (-u[i], i))[:policy.max_turns]
    chosen: list[tuple[int, int, str]] = []
    used = 0
    for i in order:
        if len(chosen) >= policy.max_sentences:
            break
        sents = split_sentences(turns[i].content)
        ranked = sorted(range(len(sents)), key=lambda j: (-len(key_facts(sents[j])), j))
        for j in ranked:
            if len(chosen) >= policy.max_sentences:
                break
            s = sents[j]
            if not chosen and len(s) > policy.max_chars:
                s = s[:policy.max_chars].rsplit(" ", 1)[0]
            cost = len(s) + (1 if chosen else 0)  # the separating space
            if used + cost > policy.max_chars:
                continue
            chosen.append((i, j, s))
            used += cost
    chosen.sort()
    text = " ".join(s for _, _, s in chosen)
    sources = list(dict.fromkeys(turns[i].id for i, _, _ in chosen))
    return text, sources
