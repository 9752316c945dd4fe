"""Baseline retention policies, each a :class:`runtime.scoring.Scorer` like the learned model.

All return strictly positive utilities (the solver never keeps an item of utility ≤ 0 unless a rule
forces it), so under a count capacity each reduces to "keep the K highest-scoring".

- ``recency``: keep the most recently written (FIFO eviction).
- ``lru``: keep the most recently *used* (last access, else write time).
- ``random``: uniform random scores from a seed.
- ``longest``: keep the longest contents.
- ``longest_user``: keep the longest turns the *user* wrote (an assistant's long answers come last).
- ``generative_agents``: Park et al. 2023 — recency × importance × relevance. Recency decays
  exponentially per hour since last access (0.995/h, the paper's constant); importance is a cheap
  proxy of the LLM-rated poignancy: a length/specificity score in (0, 1] (numbers, names, first-person
  events raise it); relevance is cosine to the recent context (1 when absent). The paper *adds* the
  three normalised terms; we multiply them as the issue asks, after mapping each to (0, 1].
- ``memorybank``: Zhong et al. 2023 — Ebbinghaus retention R = exp(−t/S), t = hours since last
  recall (or write), strength S = S0·(1 + access_count) (S0 = 24 h: each recall makes the memory
  last another day).
- ``memoryos``: MemoryOS heat = α·visits + β·interaction length + γ·exp(−Δh/24), with
  α = β = γ = 1 after scaling visits and length to [0, 1] by their batch maxima.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import numpy as np

from utilitynet.context import ScoringContext

from ..errors import ValidationError
from ..record.memir import MemIR

__all__ = ["RecencyScorer", "LRUScorer", "RandomScorer", "LongestScorer", "LongestUserScorer", "GenerativeAgentsScorer",
           "MemoryBankScorer", "MemoryOSScorer", "BASELINES", "make_baseline"]

_EPS = 1e-6


def _ranks01(x: np.ndarray) -> np.ndarray:
    """Map values to (0, 1] by rank (ties share order by position) — strictly positive."""
    n = len(x)
    if n == 0:
        return np.zeros(0)
    order = np.argsort(x, kind="stable")
    r = np.empty(n)
    r[order] = np.arange(1, n + 1)
    return r / n


def _hours(ctx: ScoringContext, records: Sequence[MemIR], last_access: bool) -> np.ndarray:
    now = ctx.now.timestamp()
    out = np.empty(len(records))
    for i, r in enumerate(records):
        t = r.usage.last_accessed_at if (last_access and r.usage.last_accessed_at) else r.event_time
        out[i] = max(now - t.timestamp(), 0.0) / 3600.0
    return out


def _steps(ctx: ScoringContext, records: Sequence[MemIR]) -> np.ndarray:
    if ctx.record_steps is not None and len(ctx.record_steps) == len(records):
        return np.asarray(ctx.record_steps, dtype=np.float64)
    return np.array([r.event_time.timestamp() for r in records])


class _Base:
    name = "baseline"

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class RecencyScorer(_Base):
    """Keep the most recently written (keep-most-recent / FIFO)."""

    name = "recency"

    def score(self, records: Sequence[MemIR], embeddings: np.ndarray, ctx: ScoringContext) -> np.ndarray:
        return _ranks01(_steps(ctx, records))


class LRUScorer(_Base):
    """Keep the most recently used (last access, falling back to write time)."""

    name = "lru"

    def score(self, records: Sequence[MemIR], embeddings: np.ndarray, ctx: ScoringContext) -> np.ndarray:
        return _ranks01(-_hours(ctx, records, last_access=True) + 1e-9 * _steps(ctx, records))


class RandomScorer(_Base):
    """Uniform random utilities (seeded; a fresh stream per call)."""

    name = "random"

    def __init__(self, seed: int = 0) -> None:
        self._rng = np.random.default_rng(seed)

    def score(self, records: Sequence[MemIR], embeddings: np.ndarray, ctx: ScoringContext) -> np.ndarray:
        return self._rng.uniform(_EPS, 1.0, size=len(records))


class LongestScorer(_Base):
    """Keep the longest contents (ties: newer first)."""

    name = "longest"

    def score(self, records: Sequence[MemIR], embeddings: np.ndarray, ctx: ScoringContext) -> np.ndarray:
        lengths = np.array([len(r.content) for r in records], dtype=np.float64)
        return _ranks01(lengths + 1e-6 * _ranks01(_steps(ctx, records)))


class LongestUserScorer(_Base):
    """Keep the longest turns the user wrote; everything else ranks below every user turn."""

    name = "longest_user"

    def score(self, records: Sequence[MemIR], embeddings: np.ndarray, ctx: ScoringContext) -> np.ndarray:
        user = np.array([r.role_context.dialog_role.value == "user" for r in records], dtype=np.float64)
        lengths = np.array([len(r.content) for r in records], dtype=np.float64)
        return _ranks01(user * 1e9 + lengths + 1e-6 * _ranks01(_steps(ctx, records)))


_SPECIFIC = re.compile(r"\d|\b[A-Z][a-z]+\b|\b(?:I|we|my|our)\s+(?:\w+ed|went|got|made|have|had|will)\b")


def importance_proxy(text: str) -> float:
    """(0, 1]: longer and more specific (numbers, names, first-person events) = more important."""
    length = min(math.log1p(len(text.split())) / math.log1p(60), 1.0)
    spec = min(len(_SPECIFIC.findall(text)) / 6.0, 1.0)
    return 0.1 + 0.9 * (0.6 * length + 0.4 * spec)


class GenerativeAgentsScorer(_Base):
    """recency(0.995^hours since access) × importance × relevance to recent context (Park et al. 2023)."""

    name = "generative_agents"

    def __init__(self, decay_per_hour: float = 0.995) -> None:
        self.decay = decay_per_hour

    def score(self, records: Sequence[MemIR], embeddings: np.ndarray, ctx: ScoringContext) -> np.ndarray:
        rec = np.power(self.decay, _hours(ctx, records, last_access=True))
        imp = np.array([importance_proxy(r.content) for r in records])
        if ctx.recent_embedding is not None and len(records):
            rel = (np.asarray(embeddings, np.float64) @ np.asarray(ctx.recent_embedding, np.float64) + 1) / 2
        else:
            rel = np.ones(len(records))
        return np.maximum(rec, _EPS) * imp * np.maximum(rel, _EPS)


class MemoryBankScorer(_Base):
    """Ebbinghaus forgetting curve R = exp(−t/S), S = S0·(1 + recalls) (Zhong et al. 2023)."""

    name = "memorybank"

    def __init__(self, s0_hours: float = 24.0) -> None:
        self.s0 = s0_hours

    def score(self, records: Sequence[MemIR], embeddings: np.ndarray, ctx: ScoringContext) -> np.ndarray:
        t = _hours(ctx, records, last_access=True)
        s = self.s0 * (1.0 + np.array([r.usage.access_count for r in records], dtype=np.float64))
        tie = 1e-9 * _ranks01(_steps(ctx, records))  # equal curves: prefer the newer
        return np.maximum(np.exp(-t / s), 1e-300) + tie + _EPS


class MemoryOSScorer(_Base):
    """MemoryOS heat: visits + interaction length + exp(−Δh/24h), each scaled to [0, 1]."""

    name = "memoryos"

    def score(self, records: Sequence[MemIR], embeddings: np.ndarray, ctx: ScoringContext) -> np.ndarray:
        if not records:
            return np.zeros(0)
        visits = np.array([r.usage.access_count for r in records], dtype=np.float64)
        length = np.array([len(r.content) for r in records], dtype=np.float64)
        rec = np.exp(-_hours(ctx, records, last_access=True) / 24.0)
        heat = visits / max(visits.max(), 1.0) + length / max(length.max(), 1.0) + rec
        return heat + _EPS + 1e-9 * _ranks01(_steps(ctx, records))


BASELINES = {
    "recency": RecencyScorer,
    "lru": LRUScorer,
    "random": RandomScorer,
    "longest": LongestScorer,
    "longest_user": LongestUserScorer,
    "generative_agents": GenerativeAgentsScorer,
    "memorybank": MemoryBankScorer,
    "memoryos": MemoryOSScorer,
}


def make_baseline(name: str, **kwargs: object) -> object:
    """A baseline scorer by name; the error lists the valid names."""
    try:
        return BASELINES[name](**kwargs)  # type: ignore[arg-type]
    except KeyError:
        raise ValidationError(f"unknown policy {name!r}; valid: {', '.join(BASELINES)}", field="policy") from None
