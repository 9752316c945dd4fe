"""LoCoMo conversations through the production path: the retention protocol end to end.

:func:`replay_conversation` turns one conversation (LoCoMo layout, :mod:`train.locomo.reader`) into
:class:`~train.stream.StreamTurn` s and streams them through the public API
(:func:`train.stream.stream_conversation`):

- ``source_entity`` = the speaker, ``session_id = "session_<n>"``, ``created_at`` = the session's
  date plus one second per turn;
- content = the utterance, with a shared image's caption appended as ``" [image: <caption>]"``;
- id = the turn's ``dia_id`` (``"D1:3"`` is already a valid MemIR id; anything else is sanitised).

The scope's policy keeps at most ``K = round(p × N)`` turns and decides at every session end (the
session's context features are computed there by the scope itself); archived turns never come
back. At the end it reports evidence recall (categories 1–4) overall and by category, and
retrieval recall@k: for each question, whether any of its evidence turns is in the top-k of
``scope.recall(question)`` over the kept memories.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

from runtime.encoders import Embedder
from runtime.scoring import Scorer

from ..oracle import HindsightOracle
from ..stream import StreamDecision, StreamTurn, budget_label, stored_texts, stream_conversation, token_budget_for
from .protocol import capacity_for, evidence_counts
from .reader import RECALL_CATEGORIES, Conversation, parse_session_datetime

__all__ = ["ConversationRun", "locomo_oracle", "memory_id", "recall_questions", "replay_conversation",
           "stream_turns", "turn_texts"]

_BAD_ID_CHARS = re.compile(r"[^A-Za-z0-9_.:@\-]")
_FALLBACK_START = datetime(2023, 1, 1, tzinfo=UTC)  # sessions without a parseable date: one per day from here


def memory_id(dia_id: str) -> str:
    """The MemIR id of a turn: its dia_id with characters outside the Id pattern replaced by ``_``."""
    return _BAD_ID_CHARS.sub("_", dia_id)[:128] or "_"


def turn_texts(conv: Conversation) -> list[str]:
    """Every turn's stored content, in stream order (caption appended as ``" [image: …]"``)."""
    return [t.full_text for t in conv.turns]


@dataclass
class ConversationRun:
    """The outcome of one conversation under one policy and capacity.

    Attributes:
        sample_id, policy, capacity (p), K, n_turns, unit: the setting (``unit = "turns"``: K turns kept,
            K = round(p × n_turns); ``"tokens"``: K tokens, K = round(p × the conversation's tokens)).
        kept: dia_ids still held at the end, in stream order.
        recall: evidence recall over (question, evidence turn) pairs of categories 1–4.
        by_category: recall per category (``"1"``..``"4"``; ``None`` when a category has no pairs).
        n_pairs, hits: the counts behind ``recall``.
        retrieval_recall_at_k: share of category 1–4 questions with evidence whose top-k recall holds
            at least one evidence turn; k = ``k``.
        retrieval_by_category: the same per category.
        category_counts: per category ``[hits, pairs]`` (for pooling over conversations).
        retrieval_counts: per category ``[questions found, questions asked]``.
        decisions: the recorded decisions (empty unless ``record=True``).
        violations: hard-rule violations recomputed from every kept set (must be 0).
        seconds: wall time of the replay.
    """

    sample_id: str
    policy: str
    capacity: float
    K: int
    n_turns: int
    kept: list[str]
    recall: float
    by_category: dict[str, float | None]
    n_pairs: int
    hits: int
    retrieval_recall_at_k: float
    retrieval_by_category: dict[str, float | None]
    k: int
    category_counts: dict[str, list[int]] = field(default_factory=dict)
    retrieval_counts: dict[str, list[int]] = field(default_factory=dict)
    decisions: list[StreamDecision] = field(default_factory=list)
    violations: int = 0
    seconds: float = 0.0
    unit: str = "turns"

    @property
    def label(self) -> str:
        """The budget as reported: ``"0.1"`` (a share of the turns) or ``"0.1 tokens"``."""
        return budget_label(self.capacity, self.unit)

    def to_dict(self) -> dict[str, Any]:
        """The JSON row of ``python -m train.eval locomo`` (no decisions)."""
        return {"policy": self.policy, "capacity": self.capacity, "unit": self.unit, "sample_id": self.sample_id, "K": self.K,
                "n_turns": self.n_turns, "kept": self.kept, "recall": self.recall,
                "by_category": self.by_category, "n_pairs": self.n_pairs, "hits": self.hits,
                "retrieval_recall_at_k": self.retrieval_recall_at_k,
                "retrieval_by_category": self.retrieval_by_category, "k": self.k,
                "category_counts": self.category_counts, "retrieval_counts": self.retrieval_counts,
                "violations": self.violations, "seconds": round(self.seconds, 3)}


def locomo_oracle(conv: Conversation) -> HindsightOracle:
    """The hindsight oracle of one conversation: utility = recall pairs citing the turn."""
    return HindsightOracle({memory_id(d): c for d, c in evidence_counts(conv).items()})


def _session_start(date_text: str, index: int) -> datetime:
    dt = parse_session_datetime(date_text) if date_text else None
    return dt.replace(tzinfo=UTC) if dt is not None else _FALLBACK_START + timedelta(days=index)


def stream_turns(conv: Conversation) -> list[StreamTurn]:
    """The conversation's turns as the agent writes them (see the module docstring)."""
    texts = turn_texts(conv)
    out = []
    for si, session in enumerate(conv.sessions):
        start = _session_start(session.date_time, si)
        for j, t in enumerate(session.turns):
            out.append(StreamTurn(memory_id(t.dia_id), texts[t.order], f"session_{session.number}",
                                  start + timedelta(seconds=j), t.speaker))
    return out


def replay_conversation(conv: Conversation, scorer: Scorer, embedder: Embedder, p: float, *, k: int = 5,
                        record: bool = False, turn_vectors: np.ndarray | None = None,
                        question_vectors: np.ndarray | None = None, unit: str = "turns") -> ConversationRun:
    """Stream ``conv`` through the public API under ``scorer`` at capacity ``p`` (module docstring).

    Args:
        conv: a validated conversation (:func:`train.locomo.reader.load_locomo`).
        scorer: the retention policy (any ``runtime.scoring.Scorer``).
        embedder: the store's encoder (turns and questions are embedded with it).
        p: the budget as a fraction of the conversation's turns (``unit="turns"``) or of its tokens
            (``unit="tokens"``: the solver counting ≈ 4 characters a token of each stored turn), in (0, 1].
        k: hits per question for retrieval recall@k.
        record: keep every decision's ids, features and outcome (for training rows).
        turn_vectors: precomputed embeddings of the turns' stored texts
            (:func:`train.stream.stored_texts` of :func:`stream_turns`; skips encoding).
        question_vectors: precomputed embeddings of the category 1–4 questions, in ``conv.qa`` order.
        unit: ``"turns"`` or ``"tokens"`` (what ``p`` is a share of).

    Returns:
        A :class:`ConversationRun`.
    """
    t0 = time.perf_counter()
    turns = stream_turns(conv)
    if unit == "turns":
        K, budget = capacity_for(conv, p), None
    elif unit == "tokens":
        K = budget = token_budget_for(turns, p)
    else:
        raise ValueError(f"unit must be 'turns' or 'tokens', got {unit!r}")
    vecs = (np.asarray(turn_vectors, np.float32) if turn_vectors is not None
            else np.asarray(embedder.encode(stored_texts(turns)), np.float32))
    if vecs.shape[0] != len(turns):
        raise ValueError(f"turn_vectors has {vecs.shape[0]} rows for {len(turns)} turns")
    to_dia = {memory_id(t.dia_id): t.dia_id for t in conv.turns}
    retrieval: list[Any] = []
    res = stream_conversation(turns, vecs, scorer, embedder, None if budget is not None else K,
                              budget_tokens=budget, user_id=f"locomo_{memory_id(conv.sample_id)}",
                              record=record, after=lambda scope, now: retrieval.append(
                                  _retrieval(conv, scope, embedder, k, now, question_vectors)))
    kept_set = {to_dia.get(i, i) for i in res.kept}
    kept_ids = [t.dia_id for t in conv.turns if t.dia_id in kept_set]
    for d in res.decisions:
        d.ids = [to_dia.get(i, i) for i in d.ids]
    hits = {c: 0 for c in RECALL_CATEGORIES}
    pairs = {c: 0 for c in RECALL_CATEGORIES}
    for q in conv.qa:
        if q.category in pairs:
            pairs[q.category] += len(q.evidence)
            hits[q.category] += sum(e in kept_set for e in q.evidence)
    n_pairs, n_hits = sum(pairs.values()), sum(hits.values())
    r_all, r_cat, r_counts = retrieval[0]
    return ConversationRun(
        sample_id=conv.sample_id, policy=scorer.name, capacity=p, K=K, n_turns=len(turns), kept=kept_ids,
        recall=n_hits / n_pairs if n_pairs else float("nan"),
        by_category={str(c): (hits[c] / pairs[c] if pairs[c] else None) for c in RECALL_CATEGORIES},
        n_pairs=n_pairs, hits=n_hits, retrieval_recall_at_k=r_all, retrieval_by_category=r_cat,
        k=k, category_counts={str(c): [hits[c], pairs[c]] for c in RECALL_CATEGORIES},
        retrieval_counts=r_counts, decisions=res.decisions, violations=res.violations,
        seconds=time.perf_counter() - t0, unit=unit)


def recall_questions(conv: Conversation) -> list[int]:
    """Indices into ``conv.qa`` of the questions retrieval recall is measured on (cat 1–4, with evidence)."""
    return [i for i, q in enumerate(conv.qa) if q.category in RECALL_CATEGORIES and q.evidence]


def _retrieval(conv: Conversation, scope: Any, embedder: Embedder, k: int, now: datetime,
               question_vectors: np.ndarray | None
               ) -> tuple[float, dict[str, float | None], dict[str, list[int]]]:
    idx = recall_questions(conv)
    if not idx:
        return float("nan"), {str(c): None for c in RECALL_CATEGORIES}, {str(c): [0, 0] for c in RECALL_CATEGORIES}
    qv = (np.asarray(question_vectors, np.float32) if question_vectors is not None
          else np.asarray(embedder.encode([conv.qa[i].question for i in idx]), np.float32))
    found = {c: 0 for c in RECALL_CATEGORIES}
    asked = {c: 0 for c in RECALL_CATEGORIES}
    for row, i in enumerate(idx):
        q = conv.qa[i]
        hits = scope.recall(qv[row], k=k, now=now, update_usage=False)
        got = {h.record.id for h in hits}
        asked[q.category] += 1
        found[q.category] += any(memory_id(e) in got for e in q.evidence)
    total = sum(asked.values())
    return (sum(found.values()) / total,
            {str(c): (found[c] / asked[c] if asked[c] else None) for c in RECALL_CATEGORIES},
            {str(c): [found[c], asked[c]] for c in RECALL_CATEGORIES})
