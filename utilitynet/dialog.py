"""Session-context features of dialogue turns (numpy + ``re`` only; part of the feature contract).

Whether a conversational turn is worth remembering depends a lot on its neighbours: a turn that
answers a question ("prev_q"), that the partner reacts to ("next_react"), that sits at the start of a
session where news gets told ("first3"), or that is central to what the session was about. Measured
on LoCoMo (leave-one-conversation-out, 5 dev conversations) these cues lift a linear model's evidence
recall from ~0.30 to ~0.40 / 0.61 at p = 0.10 / 0.20.

They must be computed **once, over the complete session**, and stored on the record
(``metadata.attributes["ctx.<name>"]``, see :func:`runtime.annotate.consolidate.annotate_session`):
recomputing them at each retention decision over what is still held (the neighbours of an old turn
may be forgotten by then) drops recall to 0.36 / 0.56. :mod:`utilitynet.features` reads the stored
values (0 when absent, plus a ``ctx_present`` bit).

Example:
    >>> import numpy as np
    >>> X = session_context(["Hi!", "I got a dog.", "Wow, cool!"], np.eye(3, 4, dtype=np.float32))
    >>> X.shape == (3, len(CONTEXT_NAMES))
    True
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

__all__ = ["ATTRIBUTE_PREFIX", "CONTEXT_NAMES", "attribute_key", "session_context", "sessions_context"]

CONTEXT_NAMES: tuple[str, ...] = (
    "caption", "relpos", "first3", "last3", "logsesslen", "next_q", "next_react", "prev_q",
    "next_loglen", "cos_next", "cos_prev", "centrality", "maxcos_sess",
)
"""Columns of :func:`session_context`, in order:

- ``caption``: the turn shares an image (its text carries ``[image: …]``).
- ``relpos``: position in the session, 0 = first … 1 = last.
- ``first3`` / ``last3``: among the first / last three turns of the session.
- ``logsesslen``: log of the session's turn count.
- ``next_q``: the next turn contains a ``?`` (the partner asks a follow-up about this turn).
- ``next_react``: the next turn is a reaction ("wow", "congrats", "that's great"...).
- ``prev_q``: the previous turn contains a ``?`` (this turn answers a question; the strongest cue).
- ``next_loglen``: log1p of the next turn's word count (0 for the last turn).
- ``cos_next`` / ``cos_prev``: cosine to the next / previous turn (0 at the ends).
- ``centrality``: mean cosine to the session's other turns.
- ``maxcos_sess``: max cosine to another turn of the session.
"""

ATTRIBUTE_PREFIX = "ctx."
"""Key prefix of these features in ``MemIR.metadata.attributes`` (``"ctx.prev_q"``, …)."""

_REACT = re.compile(r"\b(wow|awesome|amazing|great|cool|glad|proud|love that|so happy|congrats|"
                    r"congratulations|sounds|that's)\b", re.IGNORECASE)
_CAPTION = re.compile(r"\s*\[image:[^\]]*\]\s*$")


def attribute_key(name: str) -> str:
    """``"ctx." + name`` — the attribute a context feature is stored under."""
    return ATTRIBUTE_PREFIX + name


def _strip_caption(text: str) -> str:
    # The replay appends captions as " [image: …]"; lexical cues of the *utterance* ignore it.
    return _CAPTION.sub("", text)


def session_context(texts: Sequence[str], emb: np.ndarray) -> np.ndarray:
    """Context features of every turn of one complete session.

    Args:
        texts: the session's turns in order (image captions appended as ``" [image: …]"``).
        emb: ``(len(texts), d)`` embeddings of the turns, row-aligned (re-normalised here).

    Returns:
        float64 ``(len(texts), len(CONTEXT_NAMES))``, every value finite.

    Raises:
        ValueError: if ``emb`` is not row-aligned with ``texts``.
    """
    return sessions_context(texts, emb, np.array([0, len(texts)]))


def sessions_context(texts: Sequence[str], emb: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """:func:`session_context` of many sessions at once: session ``k`` is rows
    ``bounds[k]:bounds[k + 1]`` (each in turn order). Everything is computed for all turns in one
    pass except the max cosine, which needs each session's cosine matrix. Every value equals what
    :func:`session_context` gives for that session alone (it is this function with one session).
    """
    n = len(texts)
    E = np.asarray(emb, dtype=np.float64)
    if E.ndim != 2 or E.shape[0] != n:
        raise ValueError(f"emb must have shape ({n}, d) to match the texts, got {E.shape}")
    b = np.asarray(bounds, dtype=np.int64)
    if b.ndim != 1 or len(b) < 1 or b[0] != 0 or b[-1] != n or (np.diff(b) < 0).any():
        raise ValueError(f"bounds must rise from 0 to {n}")
    out = np.zeros((n, len(CONTEXT_NAMES)))
    if n == 0:
        return out
    E = np.nan_to_num(E)
    E = E / np.maximum(np.linalg.norm(E, axis=1, keepdims=True), 1e-12)
    bare = [_strip_caption(t) for t in texts]
    has_q = np.array(["?" in t for t in bare])
    react = np.array([bool(_REACT.search(t)) for t in bare])
    loglen = np.log1p([len(t.split()) for t in bare])
    sizes = np.diff(b)
    length = np.repeat(sizes, sizes)                       # the session length of each turn
    i = np.arange(n) - np.repeat(b[:-1], sizes)            # the turn's position in its session
    nxt, prv = i + 1 < length, i > 0
    out[:, 0] = [t != u for t, u in zip(texts, bare)]
    out[:, 1] = i / np.maximum(length - 1, 1)
    out[:, 2] = i < 3
    out[:, 3] = i >= length - 3
    out[:, 4] = np.log(length)
    out[:-1, 5] = np.where(nxt[:-1], has_q[1:], 0.0)
    out[:-1, 6] = np.where(nxt[:-1], react[1:], 0.0)
    out[1:, 7] = np.where(prv[1:], has_q[:-1], 0.0)
    out[:-1, 8] = np.where(nxt[:-1], loglen[1:], 0.0)
    # cosines: to the neighbours and to the session's centre row by row; only the max needs a matrix
    dots = np.einsum("ij,ij->i", E[:-1], E[1:])
    out[:-1, 9] = np.where(nxt[:-1], dots, 0.0)
    out[1:, 10] = np.where(prv[1:], dots, 0.0)
    starts = b[:-1][sizes > 0]
    total = np.add.reduceat(E, starts, axis=0)             # each session's sum of unit vectors
    own = np.repeat(np.arange(len(starts)), sizes[sizes > 0])
    self_dot = np.einsum("ij,ij->i", E, E)
    many = length > 1
    out[many, 11] = (np.einsum("ij,ij->i", E, total[own]) - self_dot)[many] / (length[many] - 1)
    for lo, hi in zip(b[:-1].tolist(), b[1:].tolist()):
        if hi - lo > 1:
            S = E[lo:hi] @ E[lo:hi].T
            np.fill_diagonal(S, -np.inf)
            out[lo:hi, 12] = S.max(axis=1)
    return np.nan_to_num(out)
