"""The LoCoMo retention protocol's definitions: the capacity K = round(p·N) and the evidence counts.

The protocol itself — stream sessions, keep at most K turns after each, never bring a forgotten
turn back, score evidence recall over categories 1–4 — runs on the production path in
:mod:`train.locomo.replay`; these are the two numbers it is defined by.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from runtime.errors import ValidationError

from .reader import RECALL_CATEGORIES, Conversation

__all__ = ["capacity_for", "evidence_counts"]


def capacity_for(conversation: Conversation, p: float) -> int:
    """``K = round(p * N)`` with halves rounded up (not Python's banker's rounding)."""
    if not 0.0 < p <= 1.0:
        raise ValidationError(f"capacity fraction p={p} must be in (0, 1]", field="p")
    return int(math.floor(p * conversation.n_turns + 0.5))


def evidence_counts(conversation: Conversation,
                    categories: Sequence[int] = RECALL_CATEGORIES) -> dict[str, int]:
    """Number of (question, evidence turn) pairs citing each dia_id, over ``categories``."""
    counts: dict[str, int] = {}
    for q in conversation.qa:
        if q.category in categories:
            for e in q.evidence:
                counts[e] = counts.get(e, 0) + 1
    return counts
