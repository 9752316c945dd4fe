"""Real conversations through the real runtime: the LoCoMo retention protocol end to end.

:func:`replay_conversation` streams one conversation (LoCoMo layout, :mod:`train.locomo`) into an
in-memory :class:`runtime.store.MemoryStore`, turn by turn, as typed MemIR records:

- ``provenance.type = direct_interaction``, ``source_entity`` = the speaker,
  ``session_id = "session_<n>"``, ``created_at`` = the session's date plus one second per turn;
- content = the utterance, with a shared image's caption appended as ``" [image: <caption>]"``;
- id = the turn's ``dia_id`` (``"D1:3"`` is already a valid MemIR id; anything else is sanitised).

After each session: :func:`runtime.consolidate.annotate_session` stores the session context on its
records, then, if more than ``K = round(p × N)`` turns are held, ``scope.retain(capacity=K,
forgotten="archive")`` runs the policy under test. Archived turns are never reconsidered (retention
reads the working tier only), so forgotten turns never come back. At the end it reports evidence
recall (categories 1–4) overall and by category, exactly as :func:`train.locomo_protocol.evaluate_retention`
defines it, and retrieval recall@k: for each question, whether any of its evidence turns is in the
top-k of ``scope.recall(question)`` over the kept memories.

:class:`LocomoOracle` is the hindsight oracle as a runtime ``Scorer`` (it reads the questions).
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

from runtime.consolidate import annotate_session
from runtime.embed import Embedder
from runtime.memir import MemIR
from runtime.scoring import Scorer
from runtime.store import MemoryStore, StoreConfig
from utilitynet.context import ScoringContext

from .agent import RecordingScorer
from .locomo import RECALL_CATEGORIES, Conversation, parse_session_datetime
from .locomo_protocol import capacity_for, evidence_counts

__all__ = ["ConversationDecision", "ConversationRun", "LocomoOracle", "memory_id", "recall_questions", "replay_conversation",
           "turn_texts"]

_BAD_ID_CHARS = re.compile(r"[^A-Za-z0-9_.:@\-]")
_FALLBACK_START = datetime(2023, 1, 1, tzinfo=UTC)  # sessions without a parseable date: one per day from here
_RECENT_WINDOW = 5  # turns averaged into the "recent context" vector (as the simulated agent does)


def memory_id(dia_id: str) -> str:
    """The MemIR id of a turn: its dia_id with characters outside the Id pattern replaced by ``_``."""
    return _BAD_ID_CHARS.sub("_", dia_id)[:128] or "_"


def turn_texts(conv: Conversation) -> list[str]:
    """Every turn's stored content, in stream order (caption appended as ``" [image: …]"``)."""
    return [t.full_text for t in conv.turns]


@dataclass
class ConversationDecision:
    """One retention decision as the policy saw it (``record=True``).

    Attributes:
        session: the session number just streamed.
        step: turns streamed so far.
        ids: the candidates' dia_ids, in the order the scorer saw them.
        X: the ``featurize`` matrix the scorer saw (row-aligned with ``ids``).
        kept: what the decision kept.
    """

    session: int
    step: int
    ids: list[str]
    X: np.ndarray
    kept: np.ndarray


@dataclass
class ConversationRun:
    """The outcome of one conversation under one policy and capacity.

    Attributes:
        sample_id, policy, capacity (p), K, n_turns: the setting.
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
    decisions: list[ConversationDecision] = field(default_factory=list)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """The JSON row of ``train.evaluate locomo`` (no decisions)."""
        return {"policy": self.policy, "capacity": self.capacity, "sample_id": self.sample_id, "K": self.K,
                "n_turns": self.n_turns, "kept": self.kept, "recall": self.recall,
                "by_category": self.by_category, "n_pairs": self.n_pairs, "hits": self.hits,
                "retrieval_recall_at_k": self.retrieval_recall_at_k,
                "retrieval_by_category": self.retrieval_by_category, "k": self.k,
                "category_counts": self.category_counts, "retrieval_counts": self.retrieval_counts,
                "seconds": round(self.seconds, 3)}


class LocomoOracle:
    """Hindsight oracle for one conversation: utility = number of recall pairs citing the turn.

    Turns no question cites get a tiny positive floor that grows with write order (ties keep the
    later turn, like :func:`train.locomo_protocol.oracle_scorer`). Never use it outside evaluation.
    """

    name = "oracle"

    def __init__(self, conv: Conversation) -> None:
        self._counts = {memory_id(d): c for d, c in evidence_counts(conv).items()}

    def score(self, records: Sequence[MemIR], embeddings: np.ndarray, ctx: ScoringContext) -> np.ndarray:
        steps = (np.asarray(ctx.record_steps, dtype=np.float64) if ctx.record_steps is not None
                 else np.arange(len(records), dtype=np.float64))
        floor = 1e-3 * (1.0 + steps / (1.0 + steps.max(initial=0.0)))
        return np.array([float(self._counts.get(r.id, 0)) for r in records]) + floor


def _session_start(date_text: str, index: int) -> datetime:
    dt = parse_session_datetime(date_text) if date_text else None
    return dt.replace(tzinfo=UTC) if dt is not None else _FALLBACK_START + timedelta(days=index)


def _unit(v: np.ndarray) -> np.ndarray:
    return (v / max(float(np.linalg.norm(v)), 1e-12)).astype(np.float32)


def replay_conversation(conv: Conversation, scorer: Scorer, embedder: Embedder, p: float, *, k: int = 5,
                        record: bool = False, turn_vectors: np.ndarray | None = None,
                        question_vectors: np.ndarray | None = None) -> ConversationRun:
    """Stream ``conv`` through the runtime under ``scorer`` at capacity ``p`` (see the module docstring).

    Args:
        conv: a validated conversation (:func:`train.locomo.load_locomo`).
        scorer: the retention policy (any ``runtime.scoring.Scorer``).
        embedder: the store's encoder (turns and questions are embedded with it).
        p: capacity as a fraction of the conversation's turns, in (0, 1].
        k: hits per question for retrieval recall@k.
        record: keep every decision's ids, features and outcome (for training rows).
        turn_vectors: precomputed embeddings of :func:`turn_texts` (skips encoding; row-aligned).
        question_vectors: precomputed embeddings of the category 1–4 questions, in ``conv.qa`` order.

    Returns:
        A :class:`ConversationRun`.
    """
    t0 = time.perf_counter()
    K = capacity_for(conv, p)
    turns = conv.turns
    texts = turn_texts(conv)
    vecs = (np.asarray(turn_vectors, np.float32) if turn_vectors is not None
            else np.asarray(embedder.encode(texts), np.float32))
    if vecs.shape[0] != len(turns):
        raise ValueError(f"turn_vectors has {vecs.shape[0]} rows for {len(turns)} turns")
    to_dia = {memory_id(t.dia_id): t.dia_id for t in turns}
    rec = RecordingScorer(scorer, record)
    decisions: list[ConversationDecision] = []
    # Redaction off: the benchmark measures retention of the dialogue as spoken; redaction would
    # rewrite some turns (names, dates) and make the stored text differ from what was embedded.
    cfg = StoreConfig(log_recalls=False, redact=False)
    with MemoryStore.open(":memory:", embedder=embedder, config=cfg) as store:
        scope = store.scope(user_id=f"locomo_{memory_id(conv.sample_id)}", agent_id="replay")
        seen = 0
        now = _FALLBACK_START
        for si, session in enumerate(conv.sessions):
            if not session.turns:
                continue
            start = _session_start(session.date_time, si)
            sid = f"session_{session.number}"
            items = []
            for j, t in enumerate(session.turns):
                items.append({"content": texts[t.order], "id": memory_id(t.dia_id),
                              "created_at": start + timedelta(seconds=j), "source_type": "direct_interaction",
                              "source_entity": t.speaker, "session_id": sid, "embedding": vecs[t.order]})
            scope.write_many(items)
            seen += len(session.turns)
            now = start + timedelta(seconds=len(session.turns))
            annotate_session(scope, sid, now=now)
            if scope.count(now=now, include_expired=True) <= K:
                continue
            recent = _unit(vecs[max(0, seen - _RECENT_WINDOW):seen].mean(axis=0))
            ctx = ScoringContext(now=now, step=seen, recent_embedding=recent, stage=seen / len(turns))
            d = scope.retain(capacity=K, scorer=rec, forgotten="archive", now=now, ctx=ctx, method="greedy",
                             trigger="session_end")
            if record and rec.last is not None:
                ids, X = rec.last
                kept = set(d.kept)
                decisions.append(ConversationDecision(session.number, seen, [to_dia.get(i, i) for i in ids], X,
                                                      np.array([i in kept for i in ids], dtype=bool)))
        held = {r.id for r in scope.list(now=now, include_expired=True)}
        kept_ids = [t.dia_id for t in turns if memory_id(t.dia_id) in held]
        retrieval = _retrieval(conv, scope, embedder, k, now, question_vectors)
    kept_set = set(kept_ids)
    hits = {c: 0 for c in RECALL_CATEGORIES}
    pairs = {c: 0 for c in RECALL_CATEGORIES}
    for q in conv.qa:
        if q.category in pairs:
            pairs[q.category] += len(q.evidence)
            hits[q.category] += sum(e in kept_set for e in q.evidence)
    n_pairs, n_hits = sum(pairs.values()), sum(hits.values())
    return ConversationRun(
        sample_id=conv.sample_id, policy=scorer.name, capacity=p, K=K, n_turns=len(turns), kept=kept_ids,
        recall=n_hits / n_pairs if n_pairs else float("nan"),
        by_category={str(c): (hits[c] / pairs[c] if pairs[c] else None) for c in RECALL_CATEGORIES},
        n_pairs=n_pairs, hits=n_hits, retrieval_recall_at_k=retrieval[0], retrieval_by_category=retrieval[1],
        k=k, category_counts={str(c): [hits[c], pairs[c]] for c in RECALL_CATEGORIES},
        retrieval_counts=retrieval[2], decisions=decisions, seconds=time.perf_counter() - t0)


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
