"""How the utility model turns its two outputs into a utility: a memory competes with its own session.

The model gives every memory two numbers (schema v3):

- ``logit`` *c*: how likely the memory is worth keeping at all (its kind, its content, its session's kind);
- ``session_logit`` *b*: how strongly it claims to be *the* memory of its session worth keeping.

Its utility is ``u = σ(c) · softmax_session(b)^w``, i.e. ``log u = log σ(c) + w · (b − log Σ_{j∈session} e^{b_j})``,
where the softmax runs over the memories **of the same session in the same batch** (what one retention
decision holds; memories without a session are a session of their own, share 0) and ``w ≥ 0`` is a weight the
fit learns (stored in the model's metadata as ``session_weight``).

Why: a conversation usually carries one or two facts per session that anyone asks about later, among many
turns that look alike. Scored one by one, every turn of a session about the user looks as worth keeping as
the others, and a budget fills up with a few sessions' look-alikes. The share makes the turns of a session
compete for that session's mass. Measured on LongMemEval (issue 23), it lifted evidence recall at p = 0.05 by
seven points; computing the softmax over the turns a decision still holds, rather than over the whole
session as it was written, gave the same figures (within ±0.01), so nothing needs storing.

Example:
    >>> import numpy as np
    >>> codes = session_codes(["s1", "s1", None, "s2"])
    >>> codes.tolist()
    [0, 0, 1, 2]
    >>> share = session_log_share(np.array([2.0, 0.0, 5.0, 1.0]), codes)
    >>> np.round(np.exp(share), 3).tolist()
    [0.881, 0.119, 1.0, 1.0]
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["SESSION_WEIGHT_KEY", "combine_groups", "log_utility", "session_codes", "session_log_share"]

SESSION_WEIGHT_KEY = "session_weight"
"""The exported model's metadata key holding the learned session weight *w* (a decimal string)."""


def session_codes(session_ids: Sequence[str | None]) -> np.ndarray:
    """Integer group per memory: equal session ids share a code; each ``None`` (or empty id) is its own."""
    codes = np.empty(len(session_ids), dtype=np.int64)
    seen: dict[str, int] = {}
    nxt = 0
    for i, s in enumerate(session_ids):
        if s:
            c = seen.get(s)
            if c is None:
                c = seen[s] = nxt
                nxt += 1
        else:
            c = nxt
            nxt += 1
        codes[i] = c
    return codes


def combine_groups(*codes: np.ndarray) -> np.ndarray:
    """One code per distinct tuple of codes (e.g. segment × session), dense from 0."""
    if not codes:
        raise ValueError("combine_groups needs at least one code array")
    stacked = np.stack([np.asarray(c, dtype=np.int64) for c in codes], axis=1)
    if not len(stacked):
        return np.zeros(0, dtype=np.int64)
    return np.unique(stacked, axis=0, return_inverse=True)[1].reshape(-1).astype(np.int64)


def session_log_share(session_logit: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """``b_i − log Σ_{j: code_j = code_i} e^{b_j}`` (float64; 0 for a memory alone in its group)."""
    b = np.asarray(session_logit, dtype=np.float64).reshape(-1)
    g = np.asarray(codes, dtype=np.int64).reshape(-1)
    if b.shape != g.shape:
        raise ValueError(f"session_logit has {b.shape[0]} rows but codes has {g.shape[0]}")
    if not len(b):
        return np.zeros(0)
    b = np.nan_to_num(b, nan=0.0, posinf=50.0, neginf=-50.0)
    k = int(g.max()) + 1
    top = np.full(k, -np.inf)
    np.maximum.at(top, g, b)
    z = np.bincount(g, weights=np.exp(b - top[g]), minlength=k)
    return b - top[g] - np.log(z[g])


def log_utility(logit: np.ndarray, session_logit: np.ndarray, codes: np.ndarray, weight: float) -> np.ndarray:
    """``log σ(c) + w · session_log_share(b)``: the log of the utility (≤ 0)."""
    c = np.asarray(logit, dtype=np.float64).reshape(-1)
    if not np.isfinite(weight) or weight < 0:
        raise ValueError(f"session weight must be a finite number >= 0, got {weight}")
    log_sig = -np.logaddexp(0.0, -np.clip(np.nan_to_num(c), -700.0, 700.0))
    if weight == 0:
        return log_sig
    return log_sig + weight * session_log_share(session_logit, codes)
