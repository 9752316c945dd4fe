"""Session-context features: each column means what CONTEXT_NAMES says, on a hand-made session."""

from __future__ import annotations

import numpy as np
import pytest

from utilitynet.dialog import CONTEXT_NAMES, attribute_key, session_context

COL = {n: i for i, n in enumerate(CONTEXT_NAMES)}
TEXTS = [
    "Hey Mel! How was your week?",
    "I adopted a puppy on Saturday [image: a small brown dog]",
    "Wow, congrats! What's its name?",
    "Her name is Luna.",
    "Bye!",
]


def _emb(n: int, d: int = 8, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, d)).astype(np.float32)


def test_columns_follow_the_neighbours() -> None:
    E = _emb(5)
    X = session_context(TEXTS, E)
    assert X.shape == (5, len(CONTEXT_NAMES)) and np.isfinite(X).all()
    col = lambda n: X[:, COL[n]].tolist()
    assert col("caption") == [0, 1, 0, 0, 0]
    assert col("prev_q") == [0, 1, 0, 1, 0]          # turns 1 and 3 answer a question
    assert col("next_q") == [0, 1, 0, 0, 0]          # turn 2 (after turn 1) asks
    assert col("next_react") == [0, 1, 0, 0, 0]
    assert col("first3") == [1, 1, 1, 0, 0] and col("last3") == [0, 0, 1, 1, 1]
    assert col("relpos") == [0, 0.25, 0.5, 0.75, 1.0]
    assert col("logsesslen") == pytest.approx([np.log(5)] * 5)
    assert col("next_loglen")[1] == pytest.approx(np.log1p(5)) and col("next_loglen")[4] == 0
    U = E / np.linalg.norm(E, axis=1, keepdims=True)
    assert col("cos_next")[0] == pytest.approx(float(U[0] @ U[1]), abs=1e-6)
    assert col("cos_prev")[0] == 0 and col("cos_next")[4] == 0
    S = U @ U.T
    np.fill_diagonal(S, np.nan)
    assert col("centrality") == pytest.approx(np.nanmean(S, axis=1).tolist(), abs=1e-6)
    assert col("maxcos_sess") == pytest.approx(np.nanmax(S, axis=1).tolist(), abs=1e-6)


def test_edge_cases() -> None:
    assert session_context([], np.zeros((0, 4))).shape == (0, len(CONTEXT_NAMES))
    one = session_context(["hello"], _emb(1))
    assert np.isfinite(one).all() and one[0, COL["centrality"]] == 0
    with pytest.raises(ValueError, match="shape"):
        session_context(["a", "b"], _emb(3))
    assert attribute_key("prev_q") == "ctx.prev_q"
