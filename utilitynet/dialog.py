"""Session-context features of dialogue turns (numpy + ``re`` only; part of the feature contract).

Whether a conversational turn is worth remembering depends a lot on its neighbours: a turn that
answers a question ("prev_q"), that the partner reacts to ("next_react"), that sits at the start of a
session where news gets told ("first3"), or that is central to what the session was about. Measured
on LoCoMo (leave-one-conversation-out, 5 dev conversations) these cues lift a linear model's evidence
recall from ~0.30 to ~0.40 / 0.61 at p = 0.10 / 0.20.

They must be computed **once, over the complete session**, and stored on the record
(``metadata.attributes["ctx.<name>"]``, see ``Scope.annotate_session``, which the scope calls when a session closes):
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

import hashlib
import re
from collections.abc import Iterator, Sequence

import numpy as np

from .textstats import text_stats

__all__ = ["ATTRIBUTE_PREFIX", "CONTEXT_NAMES", "CONTEXT_SCHEMA", "attribute_key", "session_context", "sessions_context"]

_BASE_NAMES: tuple[str, ...] = (
    "caption", "relpos", "first3", "last3", "logsesslen", "next_q", "next_react", "prev_q",
    "next_loglen", "cos_next", "cos_prev", "centrality", "maxcos_sess",
)
# Schema v3: where a turn stands among the turns of its own dialog role in the session, and what kind
# of session it is (measured on LongMemEval, issue 23: the fact a user later asks about is the turn
# that stands out among *their own* turns of a session that is about them).
_RELATIVE = ("first_person_log", "past_events_log", "numbers_log", "dates_log", "caps_words_log", "my_noun_log",
             "quantities_log", "time_words_log")
_ROLE_NAMES: tuple[str, ...] = (
    "role_pos", "first_of_role", "role_turns", "length_rank", "longest_of_role", "rel_length",
    *(f"rel_{k.removesuffix('_log')}" for k in _RELATIVE),
    "prev_request", "prev_first_person", "user_share", "session_user_first_person", "session_user_past_events",
    "session_user_length",
)
CONTEXT_NAMES: tuple[str, ...] = _BASE_NAMES + _ROLE_NAMES
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

Then, among the session's turns **of the same dialog role** (schema v3):

- ``role_pos``: log1p of the turn's position among them (0 = their first); ``first_of_role``: it is the first;
  ``role_turns``: log1p of how many there are.
- ``length_rank``: log1p of its rank by length (0 = the longest); ``longest_of_role``: it is the longest;
  ``rel_length``: log1p(characters) minus the largest among them (0 for the longest, negative otherwise).
- ``rel_first_person``, ``rel_past_events``, ``rel_numbers``, ``rel_dates``, ``rel_caps_words``, ``rel_my_noun``,
  ``rel_quantities``, ``rel_time_words``: the :mod:`utilitynet.textstats` count minus the largest among them.
- ``prev_request``: the previous turn asks for something ("can you recommend…"); ``prev_first_person``: the
  previous turn's first-person rate.

And of the session as a whole: ``user_share`` (share of its characters in ``user`` turns) and, over its
``user`` turns, the mean first-person rate, past-event count and log length
(``session_user_first_person``, ``session_user_past_events``, ``session_user_length``).
"""

_CONTEXT_FORMULAS = 3
"""Bumped whenever a formula of :func:`sessions_context` changes (the names alone would not show it)."""

CONTEXT_SCHEMA = f"ctx-{_CONTEXT_FORMULAS}-" + hashlib.sha256("\n".join(CONTEXT_NAMES).encode()).hexdigest()[:16]
"""A fingerprint of the context features (formula version and :data:`CONTEXT_NAMES` in order): values
stored under one schema are read back only by code of the same schema (a dump's ``session_context``
column is ignored, and the context recomputed, otherwise)."""

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


def session_context(texts: Sequence[str], emb: np.ndarray, roles: Sequence[str] | None = None) -> np.ndarray:
    """Context features of every turn of one complete session.

    Args:
        texts: the session's turns in order (image captions appended as ``" [image: …]"``).
        emb: ``(len(texts), d)`` embeddings of the turns, row-aligned (re-normalised here).
        roles: each turn's dialog role (``"user"``, ``"agent"``…); ``None`` = all one role.

    Returns:
        float64 ``(len(texts), len(CONTEXT_NAMES))``, every value finite.

    Raises:
        ValueError: if ``emb`` is not row-aligned with ``texts``.
    """
    return sessions_context(texts, emb, np.array([0, len(texts)]), roles)


def sessions_context(texts: Sequence[str], emb: np.ndarray, bounds: np.ndarray,
                     roles: Sequence[str] | None = None, *, emb_rows: np.ndarray | None = None) -> np.ndarray:
    """:func:`session_context` of many sessions at once: session ``k`` is rows
    ``bounds[k]:bounds[k + 1]`` (each in turn order). Everything is computed for all turns in one
    pass except the max cosine, which needs each session's cosine matrix. Every value equals what
    :func:`session_context` gives for that session alone (it is this function with one session).

    ``emb_rows``: text ``i``'s embedding is ``emb[emb_rows[i]]`` (default: ``emb`` is row-aligned
    with the texts), so a caller holding a larger matrix need not copy the rows out first.
    """
    n = len(texts)
    E = np.asarray(emb)
    if E.ndim != 2 or (emb_rows is None and E.shape[0] != n):
        raise ValueError(f"emb must have shape ({n}, d) to match the texts, got {E.shape}")
    if emb_rows is not None:
        emb_rows = np.asarray(emb_rows, dtype=np.int64)
        if emb_rows.shape != (n,) or (n > 0 and (emb_rows.min() < 0 or emb_rows.max() >= E.shape[0])):
            raise ValueError(f"emb_rows must be {n} row indices into emb's {E.shape[0]} rows")
    b = np.asarray(bounds, dtype=np.int64)
    if b.ndim != 1 or len(b) < 1 or b[0] != 0 or b[-1] != n or (np.diff(b) < 0).any():
        raise ValueError(f"bounds must rise from 0 to {n}")
    out = np.zeros((n, len(CONTEXT_NAMES)))
    if n == 0:
        return out
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
    # cosines, all from each session's cosine matrix, sessions of one length in one batched product
    starts = b[:-1][sizes > 0]
    own = np.repeat(np.arange(len(starts)), sizes[sizes > 0])
    for size, rows in _session_blocks(b, sizes):
        block = _unit_rows(E, rows if emb_rows is None else emb_rows[rows])  # (sessions, size, d)
        S = block @ block.transpose(0, 2, 1)
        diag = np.arange(size)
        out[rows[:, :-1], 9] = S[:, diag[:-1], diag[1:]]    # to the next turn
        out[rows[:, 1:], 10] = S[:, diag[1:], diag[:-1]]    # to the previous one
        S[:, diag, diag] = 0.0
        out[rows, 11] = S.sum(axis=2) / (size - 1)          # mean cosine to the session's other turns
        S[:, diag, diag] = -np.inf
        out[rows, 12] = S.max(axis=2)
    if roles is not None and len(roles) != n:
        raise ValueError(f"roles must have one entry per text ({n}), got {len(roles)}")
    out[:, len(_BASE_NAMES):] = _role_context(bare, roles, b, own, i)
    return np.nan_to_num(out)


_BLOCK_ROWS = 2048
"""Turns whose cosine matrices are computed at once: bounds the float64 copy of their vectors (a
scoring block of 8,192 turns copied whole was ~80 MB of a decider's peak); every session's matrix is
its own product, so the values do not depend on it."""


def _session_blocks(b: np.ndarray, sizes: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
    """``(size, rows)`` for the sessions of more than one turn, those of one size together, at most
    about :data:`_BLOCK_ROWS` turns at a time: ``rows[j]`` are the row indices of one session."""
    for size in np.unique(sizes[sizes > 1]).tolist():
        rows = b[:-1][sizes == size][:, None] + np.arange(size)
        step = max(1, _BLOCK_ROWS // size)
        for lo in range(0, len(rows), step):
            yield size, rows[lo:lo + step]


def _unit_rows(emb: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The rows of ``emb`` picked by ``rows``, as float64 unit vectors (non-finite values zeroed first;
    a zero row stays zero): each row exactly as scaling the whole matrix would make it."""
    x = emb[rows].astype(np.float64, copy=False)  # the gather is a new array: scaled in place below
    if not np.isfinite(x).all():
        np.nan_to_num(x, copy=False)
    x /= np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)
    return x


def _segment_max(v: np.ndarray, seg: np.ndarray, k: int) -> np.ndarray:
    m = np.full(k, -np.inf)
    np.maximum.at(m, seg, v)
    return m


def _role_context(texts: Sequence[str], roles: Sequence[str] | None, b: np.ndarray, own: np.ndarray,
                  pos: np.ndarray) -> np.ndarray:
    """The schema-v3 columns (:data:`_ROLE_NAMES`), for turns grouped into sessions by ``own``."""
    n = len(texts)
    ts = text_stats(texts)
    user = np.ones(n, dtype=bool) if roles is None else np.array([r == "user" for r in roles], dtype=bool)
    codes = np.zeros(n, dtype=np.int64) if roles is None else np.unique(np.asarray(roles, dtype=object).astype(str),
                                                                         return_inverse=True)[1].reshape(-1)
    n_sess = int(own.max()) + 1 if n else 0
    group = own * (int(codes.max()) + 1 if n else 1) + codes      # (session, role) segments
    k = int(group.max()) + 1 if n else 0
    # Position among the same role: rows are in session order, so a running count per segment.
    order = np.lexsort((pos, group))
    g_sorted = group[order]
    starts = np.r_[0, np.flatnonzero(g_sorted[1:] != g_sorted[:-1]) + 1]
    run_start = np.repeat(starts, np.diff(np.r_[starts, n]))
    role_pos = np.empty(n)
    role_pos[order] = np.arange(n) - run_start
    count = np.bincount(group, minlength=k).astype(np.float64)
    length = ts["chars_log"]
    # Rank by length among the same role (0 = longest; ties share the better rank).
    by_len = np.lexsort((-length, group))
    gl = group[by_len]
    ls = np.r_[0, np.flatnonzero(gl[1:] != gl[:-1]) + 1]
    rank = np.empty(n)
    rank[by_len] = np.arange(n) - np.repeat(ls, np.diff(np.r_[ls, n]))
    cols = [np.log1p(role_pos), (role_pos == 0).astype(np.float64), np.log1p(count[group]), np.log1p(rank),
            (rank == 0).astype(np.float64), length - _segment_max(length, group, k)[group]]
    cols += [ts[key] - _segment_max(ts[key], group, k)[group] for key in _RELATIVE]
    request = (ts["requests_log"] > 0).astype(np.float64)
    prev_request, prev_fp = np.zeros(n), np.zeros(n)
    same_session = np.r_[False, own[1:] == own[:-1]]
    prev_request[1:] = np.where(same_session[1:], request[:-1], 0.0)
    prev_fp[1:] = np.where(same_session[1:], ts["first_person_rate"][:-1], 0.0)
    chars = np.array([len(t) for t in texts], dtype=np.float64)
    total = np.bincount(own, weights=chars, minlength=n_sess)
    user_chars = np.bincount(own, weights=chars * user, minlength=n_sess)
    n_user = np.bincount(own, weights=user.astype(np.float64), minlength=n_sess)

    def user_mean(v: np.ndarray) -> np.ndarray:
        return (np.bincount(own, weights=v * user, minlength=n_sess) / np.maximum(n_user, 1.0))[own]

    cols += [prev_request, prev_fp, (user_chars / np.maximum(total, 1.0))[own], user_mean(ts["first_person_rate"]),
             user_mean(ts["past_events_log"]), user_mean(length)]
    return np.column_stack(cols) if n else np.zeros((0, len(_ROLE_NAMES)))
