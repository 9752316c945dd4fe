"""The decision-time context a scorer sees (numpy only; shared by trainer and runtime)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

import numpy as np

__all__ = ["ScoringContext"]


@dataclass(frozen=True)
class ScoringContext:
    """What is known at a retention decision besides the records themselves.

    Attributes:
        now: decision time (timezone-aware UTC); ages are measured from it.
        step: the agent's step counter at the decision (events seen so far).
        record_steps: per record (aligned with the records being scored), the step at which it was
            written; ``None`` when unknown (age in steps then falls back to 0).
        goal_embedding: unit vector of the task goal (or ``None``).
        recent_embedding: unit vector summarising recent context (mean of recent turns), or ``None``.
        stage: task progress in [0, 1] (0 = start, 1 = end), when the agent knows it.
        session_context: per record (row-aligned), the session-context features of
            :mod:`utilitynet.dialog` computed when its session closed, ``(n, len(CONTEXT_NAMES))``;
            a row of NaN = its session has not closed yet. ``None``: read them from each record's
            ``metadata.attributes["ctx.<name>"]`` (records annotated by older stores).
        extras: switches, e.g. ``{"skip_redundancy": 1.0}``.
    """

    now: datetime
    step: int = 0
    record_steps: np.ndarray | None = None
    goal_embedding: np.ndarray | None = None
    recent_embedding: np.ndarray | None = None
    stage: float = 0.0
    extras: dict[str, float] = field(default_factory=dict)
    session_context: np.ndarray | None = None
