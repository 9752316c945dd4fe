"""Real conversations as labelled training rows (LoCoMo layout; evidence ids = hindsight labels).

Each conversation is replayed through the runtime (:func:`train.locomo.replay.replay_conversation`, the production path)
with ``record=True``; every retention decision contributes one row per candidate: the features the
policy saw, label 1 if the turn is evidence for a category 1–4 question (else 0), and weight
``weight × (1 + pairs citing it)`` for positives (``weight`` for the rest), so a turn that answers
three questions counts like three.

Which policy collects: the rows should look like the decisions the model will face once deployed,
i.e. a working set that already holds mostly useful turns plus a fresh session. The hindsight oracle
produces exactly that state (at the capacities of the benchmark); keep-longest adds states of a
plausible but imperfect policy. Both are used by default, at p = 0.1 and 0.2.

The texts are encoded with the embedder's *inner* encoder when it is a cache: the conversations
(CC BY-NC) must not be copied into the project's ``data/`` by a persisted embedding cache.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from runtime.encoders import Embedder
from runtime.scoring import Scorer
from runtime.scoring.baselines import LongestScorer

from ..dataset import RowBatch
from ..stream import stored_texts
from .protocol import evidence_counts
from .reader import Conversation, load_locomo
from .replay import ConversationRun, locomo_oracle, recall_questions, replay_conversation, stream_turns

__all__ = ["COLLECT_POLICIES", "add_conversation_rows", "add_locomo_rows", "conversation_vectors"]

COLLECT_POLICIES: dict[str, Callable[[Conversation], Scorer]] = {
    "oracle": locomo_oracle,
    "longest": lambda conv: LongestScorer(),
}
"""Collection policies (name -> factory per conversation)."""


def conversation_vectors(conv: Conversation, emb: Embedder) -> tuple[np.ndarray, np.ndarray]:
    """(turn vectors, recall-question vectors) of one conversation, encoded without any disk cache."""
    enc: Any = getattr(emb, "inner", emb)
    tv = np.asarray(enc.encode(stored_texts(stream_turns(conv))), np.float32)
    qs = [conv.qa[i].question for i in recall_questions(conv)]
    qv = np.asarray(enc.encode(qs), np.float32) if qs else np.zeros((0, tv.shape[1]), np.float32)
    return tv, qv


def add_conversation_rows(rows: RowBatch, conv: Conversation, emb: Embedder, *, weight: float = 1.0,
                          policies: Sequence[str] = ("oracle", "longest"),
                          capacities: Sequence[float] = (0.1, 0.2),
                          vectors: tuple[np.ndarray, np.ndarray] | None = None) -> list[ConversationRun]:
    """Replay one conversation under each collection policy × capacity and append its labelled rows.

    Returns:
        The runs (with their decisions), for inspection.
    """
    if weight <= 0:
        raise ValueError(f"weight must be > 0, got {weight}")
    unknown = [p for p in policies if p not in COLLECT_POLICIES]
    if unknown:
        raise ValueError(f"unknown collection policies {unknown}; valid: {sorted(COLLECT_POLICIES)}")
    tv, qv = vectors if vectors is not None else conversation_vectors(conv, emb)
    counts = evidence_counts(conv)
    runs = []
    n_dec = 0
    for name in policies:
        for p in capacities:
            run = replay_conversation(conv, COLLECT_POLICIES[name](conv), emb, p, record=True,
                                      turn_vectors=tv, question_vectors=qv)
            for d in run.decisions:
                c = np.array([counts.get(i, 0) for i in d.ids], dtype=np.float32)
                y = (c > 0).astype(np.float32)
                rows.add(episode_id=conv.sample_id, family="locomo", decision=n_dec, step=d.step,
                         user_id=f"locomo_{conv.sample_id}", item_ids=d.ids, X=d.X, y=y,
                         w=weight * np.where(c > 0, 1.0 + c, 1.0),
                         tags=["evidence" if v > 0 else "other" for v in c], kept=d.kept, source="locomo",
                         sessions=d.sessions)
                n_dec += 1
            runs.append(run)
    return runs


def add_locomo_rows(rows: RowBatch, files: list[str], emb: Embedder, weight: float = 1.0) -> int:
    """Append labelled rows of every conversation in ``files`` (LoCoMo layout) to ``rows``.

    Called by :mod:`train.loop` in round 0. ``episode_id`` = the conversation's ``sample_id`` (the
    validation split never cuts a conversation), ``family = "locomo"``, ``source = "locomo"``.

    Returns:
        The number of rows added.
    """
    before = len(rows)
    for f in files:
        convs, _ = load_locomo(f)
        for conv in convs:
            add_conversation_rows(rows, conv, emb, weight=weight)
    return len(rows) - before
