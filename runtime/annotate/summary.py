"""Session summaries (seed 000 §5.1.4, seed 001 §3.2 "post-hoc summary"): the extractive summariser.
No LLM is needed on any path.

When a session closes and the scope's :class:`~runtime.retention.SummaryPolicy` is enabled, the
scope ranks the session's turns by utility (its scorer, through
:class:`~runtime.retention.RetentionPlan`), and :func:`extract_summary` copies whole sentences of the
highest-utility turns — so numbers, dates, ids and names stay verbatim — in time order, within
``max_sentences`` / ``max_chars``. The scope writes it as ONE ``derived_inference`` memory (tag
:data:`SUMMARY_TAG`, ``source_entity`` :data:`SUMMARY_SOURCE`, ``derived_from`` = the turns it
copied from; :mod:`runtime.store.session_close`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol

import numpy as np

from ..record.memir import MemIR

__all__ = ["SUMMARY_SOURCE", "SUMMARY_TAG", "SummaryLimits", "extract_summary", "key_facts", "split_sentences"]

SUMMARY_TAG = "summary"
SUMMARY_SOURCE = "memir:summary"

_SENT = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[]?[A-Z0-9])|\n+")
_NUM = re.compile(r"(?<!\w)\d[\d,.:/%-]*\d(?!\w)|(?<!\w)\d(?!\w)")
_WORD = re.compile(r"[A-Za-z][A-Za-z'’-]*")
_ID = re.compile(r"\b(?=[\w-]*\d)\w[\w-]*\w\b|\b[A-Z]{2,}\b")



class SummaryLimits(Protocol):
    """The sizes a summary respects (a :class:`~runtime.retention.SummaryPolicy` has them)."""

    @property
    def max_turns(self) -> int: ...
    @property
    def max_sentences(self) -> int: ...
    @property
    def max_chars(self) -> int: ...


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


def extract_summary(turns: Sequence[MemIR], utility: np.ndarray, policy: SummaryLimits) -> tuple[str, list[str]]:
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
