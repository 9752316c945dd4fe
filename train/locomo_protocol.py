"""The LoCoMo retention protocol in pure numpy: stream sessions, keep at most K = round(p·N) turns
after each, never bring a forgotten turn back, and score evidence recall (categories 1–4).

Kept apart from the reader (``train.locomo``) so the protocol and its three reference policies
(recency, keep-longest, the hindsight oracle) can be read in one sitting.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from runtime.errors import ValidationError

from .locomo import RECALL_CATEGORIES, Conversation, Turn

__all__ = ["Decision", "Scorer", "capacity_for", "evidence_counts", "evaluate_retention", "recency_scorer",
           "longest_scorer", "oracle_scorer"]


@dataclass(frozen=True)
class Decision:
    """What a scorer sees at one retention decision (after a session, when over capacity).

    Attributes:
        conversation: the conversation being streamed (a scorer must only use what is in the past:
            ``candidates`` and earlier sessions; ``qa`` is there for hindsight oracles only).
        session_index: 0-based index into ``conversation.sessions`` of the session just streamed.
        capacity: ``K``, the number of turns that may be kept.
        candidates: what was kept so far followed by the new session's turns, in stream order.
        is_new: boolean mask over ``candidates``: True for turns of the session just streamed.
    """

    conversation: Conversation
    session_index: int
    capacity: int
    candidates: tuple[Turn, ...]
    is_new: np.ndarray


Scorer = Callable[[Decision], np.ndarray]
"""A policy: returns one finite score per candidate; the top ``capacity`` are kept (ties keep the
later turn). Any ordering, including a greedy diversity-aware one, can be returned as scores."""


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


def evaluate_retention(conversation: Conversation, scorer_fn: Scorer, p: float, *,
                       categories: Sequence[int] = RECALL_CATEGORIES) -> dict[str, Any]:
    """Run the README's retention protocol with one policy on one conversation.

    Args:
        conversation: a validated conversation.
        scorer_fn: the policy (see :data:`Scorer`); called only when candidates exceed ``K``.
        p: capacity as a fraction of the conversation's turns (0.10 and 0.20 in the headline).
        categories: QA categories counted in recall.

    Returns:
        ``{"sample_id", "capacity", "K", "n_turns", "kept" (dia_ids in stream order), "recall",
        "by_category" ({"1": recall or None, ...}), "n_pairs", "hits", "decisions"}``.

    Raises:
        ValidationError: if the scorer returns the wrong shape or non-finite scores.
    """
    k = capacity_for(conversation, p)
    kept: list[Turn] = []
    decisions = 0
    for si, session in enumerate(conversation.sessions):
        cands = kept + list(session.turns)
        if len(cands) <= k:
            kept = cands
            continue
        is_new = np.array([i >= len(kept) for i in range(len(cands))], dtype=bool)
        scores = np.asarray(scorer_fn(Decision(conversation, si, k, tuple(cands), is_new)),
                            dtype=np.float64)
        if scores.shape != (len(cands),) or not np.all(np.isfinite(scores)):
            raise ValidationError(f"{conversation.sample_id} session {session.number}: the scorer "
                                  f"must return {len(cands)} finite scores, got shape "
                                  f"{scores.shape}", field="scores")
        # Sort by (score desc, order desc): ties keep the later turn, deterministically.
        order = np.array([t.order for t in cands])
        top = np.lexsort((-order, -scores))[:k]
        kept = [cands[i] for i in sorted(top)]
        decisions += 1
    kept_ids = {t.dia_id for t in kept}
    hits: dict[int, int] = {c: 0 for c in categories}
    pairs: dict[int, int] = {c: 0 for c in categories}
    for q in conversation.qa:
        if q.category in pairs:
            pairs[q.category] += len(q.evidence)
            hits[q.category] += sum(e in kept_ids for e in q.evidence)
    n_pairs, n_hits = sum(pairs.values()), sum(hits.values())
    return {
        "sample_id": conversation.sample_id, "capacity": p, "K": k,
        "n_turns": conversation.n_turns, "kept": [t.dia_id for t in kept],
        "recall": n_hits / n_pairs if n_pairs else float("nan"),
        "by_category": {str(c): (hits[c] / pairs[c] if pairs[c] else None) for c in categories},
        "n_pairs": n_pairs, "hits": n_hits, "decisions": decisions,
    }


def recency_scorer(decision: Decision) -> np.ndarray:
    """Keep-most-recent: score = stream order."""
    return np.array([t.order for t in decision.candidates], dtype=np.float64)


def longest_scorer(decision: Decision) -> np.ndarray:
    """Keep-longest: score = whitespace tokens of the utterance (caption excluded, as in the
    README's 0.26 / 0.43 figure; counting the caption too gives 0.25 / 0.46 on the dev split)."""
    return np.array([len(t.text.split()) for t in decision.candidates], dtype=np.float64)


def oracle_scorer(decision: Decision) -> np.ndarray:
    """Hindsight oracle: score = number of recall pairs citing the turn (optimal for final recall,
    since a turn's score never changes and it can be held from the moment it arrives)."""
    counts = evidence_counts(decision.conversation)
    return np.array([counts.get(t.dia_id, 0) for t in decision.candidates], dtype=np.float64)
