"""The ``Scorer`` protocol: anything that gives each memory a utility for retention.

The ONNX utility model (``runtime.scoring.UtilityScorer``), the baselines (``runtime.scoring.baselines``) and
the ``FakeScorer`` test double all implement it, so the retention code never knows which it has.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from utilitynet.context import ScoringContext

from ..record.memir import MemIR

__all__ = ["Scorer", "ScoringContext"]


@runtime_checkable
class Scorer(Protocol):
    """Scores memories: higher = more worth keeping. Scores are compared within one call only."""

    @property
    def name(self) -> str:
        """Short id used in decision records and reports (e.g. ``"utilitynet"``, ``"recency"``)."""
        ...

    def score(self, records: Sequence[MemIR], embeddings: np.ndarray, ctx: ScoringContext) -> np.ndarray:
        """Return a float64 array of utilities, one per record (``embeddings`` row-aligned)."""
        ...
