"""The bag-of-words baseline: TF-IDF + logistic regression on turn text, fit on the training folds.

It scores each memory by the probability that its words belong to an evidence turn, learnt from
the training questions' stored turns (label = ``has_answer``). It is the bar a learnt utility
model has to clear: anything it cannot beat, plain word statistics already do. It runs behind
the runtime's ``Scorer`` protocol, on the same production path as every other policy.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from runtime.record import MemIR
from runtime.scoring import ScoringContext

__all__ = ["BowScorer"]


class BowScorer:
    """TF-IDF (word 1–2-grams, sublinear tf) + balanced logistic regression.

    Args:
        texts, labels: the training turns (stored text) and whether each is evidence.
        seed: the solver's seed.
    """

    name = "bow"

    def __init__(self, texts: Sequence[str], labels: Sequence[int], *, seed: int = 0, max_features: int = 200_000
                 ) -> None:
        from sklearn.feature_extraction.text import TfidfVectorizer
        from sklearn.linear_model import LogisticRegression

        if not texts or len(set(labels)) < 2:
            raise ValueError("the bag-of-words baseline needs training turns of both labels")
        self._vec: Any = TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True, max_features=max_features)
        Xt = self._vec.fit_transform(texts)
        self._lr: Any = LogisticRegression(C=1.0, class_weight="balanced", max_iter=2000, random_state=seed)
        self._lr.fit(Xt, np.asarray(labels))

    def score(self, records: Sequence[MemIR], embeddings: np.ndarray, ctx: ScoringContext) -> np.ndarray:
        if not records:
            return np.zeros(0)
        p = self._lr.predict_proba(self._vec.transform([r.content for r in records]))[:, 1]
        return np.asarray(p, dtype=np.float64) + 1e-9  # strictly positive: kept when there is room
