"""Scoring memories for retention: the :class:`Scorer` protocol, the learned ONNX utility model,
its ``FakeScorer`` test double, and the baselines (keep-recent, LRU, keep-longest, Generative
Agents, MemoryBank, MemoryOS) behind the same protocol."""

from utilitynet.context import ScoringContext

from .baselines import BASELINES, make_baseline
from .scorer import Scorer
from .utility import MODEL_ENV, FakeScorer, ModelInfo, UtilityScorer, default_model_path

__all__ = ["BASELINES", "MODEL_ENV", "FakeScorer", "ModelInfo", "Scorer", "ScoringContext", "UtilityScorer",
           "default_model_path", "make_baseline"]
