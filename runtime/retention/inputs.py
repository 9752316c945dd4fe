"""Retention input assembly: what one decision sees, put together in one place.

A decision over a scope sees its working memories (records, unit vectors, write steps) and the
unsaved candidates offered with the call, which join at the next write steps. It scores them in the
scope's live context: the recent-context vector, the task's goal and stage, and the session
features stored when each record's session closed. :func:`decision_rows` lines the rows up, and
:func:`live_scoring_context` / :func:`with_steps` give the context, for
:class:`~runtime.retention.plan.RetentionPlan`; the store reads the rows, this module arranges them,
so the plan builder is one and the facade assembles nothing itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

import numpy as np

from ..record.memir import MemIR
from .plan import recent_context, scoring_context

if TYPE_CHECKING:
    from utilitynet.context import ScoringContext

__all__ = ["DecisionRows", "decision_rows", "live_scoring_context", "with_steps"]


@dataclass(frozen=True)
class DecisionRows:
    """The rows of one decision, row-aligned: stored memories first, then the candidates.

    Attributes:
        records: the records. vectors: ``(n, d)`` unit vectors. steps: write steps.
        candidate: ``True`` for the unsaved candidates (written only if kept).
    """

    records: list[MemIR]
    vectors: np.ndarray
    steps: np.ndarray
    candidate: np.ndarray


def live_scoring_context(*, now: datetime, steps: np.ndarray, recent_vectors: np.ndarray,
                         goal: np.ndarray | None, stage: float | None, session: np.ndarray) -> ScoringContext:
    """The scoring context from what a scope knows live: its last memories' vectors (their unit mean
    is the recent context), the task's goal vector and stage, and the stored session features."""
    return scoring_context(now=now, steps=steps, recent=recent_context(recent_vectors), goal=goal, stage=stage,
                           session=session)


def with_steps(given: ScoringContext, steps: np.ndarray, session: np.ndarray) -> ScoringContext:
    """A caller's own context (``Scope.retain(context=...)``) with the rows' write steps and stored
    session features filled in, when it came without them."""
    return scoring_context(now=given.now, steps=steps, recent=given.recent_embedding, goal=given.goal_embedding,
                           stage=given.stage, session=session)


def decision_rows(records: Sequence[MemIR], vectors: np.ndarray, steps: np.ndarray,
                  candidates: Sequence[tuple[MemIR, np.ndarray]], *, next_step: int, dim: int) -> DecisionRows:
    """Stored rows plus candidates, row-aligned.

    Args:
        records, vectors, steps: the working memories as the store returns them (write order).
        candidates: (record, vector) of each unsaved candidate, in the order given.
        next_step: the first write step a candidate would take (the scope's last step + 1).
        dim: the encoder's dimension (an empty working set still stacks).
    """
    recs = list(records) + [r for r, _ in candidates]
    if candidates:
        vecs = np.vstack([np.asarray(vectors, np.float32).reshape(-1, dim)] + [v[None, :] for _, v in candidates])
        all_steps = np.concatenate([steps, np.arange(next_step, next_step + len(candidates))])
    else:
        vecs, all_steps = vectors, steps
    cand = np.array([False] * len(records) + [True] * len(candidates), dtype=bool)
    return DecisionRows(recs, vecs, all_steps, cand)
