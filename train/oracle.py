"""The hindsight oracle for conversation benchmarks, as a runtime ``Scorer``.

It reads the answers (which turns later questions cite), so it bounds what any policy could reach
under the same protocol; it is an evaluation tool and never trains or ships. Used by the LoCoMo
and LongMemEval evaluators through the same production path as every other policy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from runtime.record import MemIR
from runtime.scoring import ScoringContext

__all__ = ["HindsightOracle"]


class HindsightOracle:
    """Utility = how many (question, evidence) pairs cite the memory.

    Memories no question cites get a tiny positive floor that grows with write order, so ties keep
    the later turn.

    Args:
        counts: memory id -> number of pairs citing it.
    """

    name = "oracle"

    def __init__(self, counts: Mapping[str, float]) -> None:
        self._counts = dict(counts)

    def score(self, records: Sequence[MemIR], embeddings: np.ndarray, ctx: ScoringContext) -> np.ndarray:
        steps = (np.asarray(ctx.record_steps, dtype=np.float64) if ctx.record_steps is not None
                 else np.arange(len(records), dtype=np.float64))
        floor = 1e-3 * (1.0 + steps / (1.0 + steps.max(initial=0.0)))
        return np.array([float(self._counts.get(r.id, 0)) for r in records]) + floor
