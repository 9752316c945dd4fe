"""Scoring memories for retention: the :class:`Scorer` protocol, the learned ONNX utility model,
its ``FakeScorer`` test double, and the baselines (keep-recent, LRU, keep-longest, Generative
Agents, MemoryBank, MemoryOS) behind the same protocol.

Names resolve at first use (PEP 562): importing one submodule (``runtime.scoring.role_weights``)
does not load the utility model's feature code with it."""

from typing import TYPE_CHECKING

from ..lazy import lazy_names

_EXPORTS = {
    "ScoringContext": "utilitynet.context",
    **dict.fromkeys(("BASELINES", "make_baseline"), ".baselines"),
    "Scorer": ".scorer",
    **dict.fromkeys(("MODEL_ENV", "FakeScorer", "ModelInfo", "UtilityScorer", "default_model_path"), ".utility"),
}

if TYPE_CHECKING:
    from utilitynet.context import ScoringContext

    from .baselines import BASELINES, make_baseline
    from .scorer import Scorer
    from .utility import MODEL_ENV, FakeScorer, ModelInfo, UtilityScorer, default_model_path

__getattr__, __dir__ = lazy_names(__name__, _EXPORTS, globals())

__all__ = ["BASELINES", "MODEL_ENV", "FakeScorer", "ModelInfo", "Scorer", "ScoringContext", "UtilityScorer",
           "default_model_path", "make_baseline"]
