"""LongMemEval on the production path: the retention protocol for every question, policy and capacity.

Each question's haystack is streamed through the public API (:func:`train.stream.stream_conversation`,
:mod:`train.lme.protocol`). Questions are read one at a time and every run is written to the
output as it finishes, so memory stays bounded whatever the number of questions; embeddings come
from a content-addressed cache (:class:`train.embedcache.CachedEmbedder`), so re-running a policy
never re-encodes a turn.

Output: ``{"args", "runs": [{"policy", "capacity", "sample_id": question_id, "kept": [turn ids],
"question_type", "K", "n_turns", "n_evidence", "hits", "recall", "violations"}], "summary"}``
with, per policy and capacity, evidence recall overall and per question type.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from runtime.encoders import Embedder
from runtime.errors import MemirError
from runtime.scoring import Scorer

from ..lme.protocol import capacity_for, lme_turns
from ..lme.reader import QUESTION_TYPES, LmeQuestion, iter_lme
from ..oracle import HindsightOracle
from ..stream import StreamDecision, budget_label, budget_order, stored_texts, stream_conversation, token_budget_for
from ..workers import ordered_map

__all__ = ["LME_CAPACITIES", "LME_POLICIES", "LmeRun", "LmeSummary", "evaluate_lme", "lme_oracle", "lme_table",
           "replay_question", "token_budget_for"]

LME_POLICIES = ("utilitynet", "recency", "longest", "longest_user", "memoryos", "generative_agents", "oracle")
LME_CAPACITIES = (0.05, 0.1, 0.2)


@dataclass
class LmeRun:
    """One question under one policy and capacity.

    Attributes:
        question_id, question_type, policy, capacity, K, n_turns: the setting (``unit = "turns"``: K turns,
            K = round(capacity × n_turns); ``unit = "tokens"``: K tokens, K = round(capacity × the stream's
            tokens)).
        kept: turn ids still held at the end, in stream order.
        evidence: the question's ``has_answer`` turn ids; hits: how many of them are kept.
        answerable: counted in recall (not ``_abs``, has evidence).
        violations: hard-rule violations recomputed from every kept set (must be 0).
        decisions: recorded decisions (``record=True``).
    """

    question_id: str
    question_type: str
    policy: str
    capacity: float
    K: int
    n_turns: int
    kept: list[str]
    evidence: list[str]
    hits: int
    answerable: bool
    violations: int = 0
    decisions: list[StreamDecision] = field(default_factory=list)
    seconds: float = 0.0
    unit: str = "turns"

    @property
    def label(self) -> str:
        """The budget as reported: ``"0.05"`` (a share of the turns) or ``"0.05 tokens"``."""
        return budget_label(self.capacity, self.unit)

    @property
    def recall(self) -> float | None:
        return self.hits / len(self.evidence) if self.evidence else None

    def to_dict(self) -> dict[str, Any]:
        return {"policy": self.policy, "capacity": self.capacity, "unit": self.unit, "sample_id": self.question_id,
                "kept": self.kept,
                "question_type": self.question_type, "K": self.K, "n_turns": self.n_turns,
                "n_evidence": len(self.evidence), "hits": self.hits, "recall": self.recall,
                "answerable": self.answerable, "violations": self.violations, "seconds": round(self.seconds, 3)}


def lme_oracle(q: LmeQuestion) -> HindsightOracle:
    """The hindsight oracle of one question: its evidence turns first."""
    return HindsightOracle({t: 1.0 for t in q.evidence})


def question_vectors(q: LmeQuestion, emb: Embedder) -> np.ndarray:
    """Embeddings of the question's stored turns (from the cache when ``emb`` is a CachedEmbedder)."""
    return np.asarray(emb.encode(stored_texts(lme_turns(q))), dtype=np.float32)


def replay_question(q: LmeQuestion, scorer: Scorer, emb: Embedder, p: float, *, record: bool = False,
                    vectors: np.ndarray | None = None, unit: str = "turns") -> LmeRun:
    """Stream one question's haystack under ``scorer`` at capacity ``p`` (production path): ``p`` of its
    turns (``unit="turns"``), or ``p`` of its tokens (``unit="tokens"``: a token budget, the solver
    counting ≈ 4 characters a token of each stored turn)."""
    t0 = time.perf_counter()
    turns = lme_turns(q)
    vecs = vectors if vectors is not None else question_vectors(q, emb)
    if unit == "turns":
        K = capacity_for(q, p)
        res = stream_conversation(turns, vecs, scorer, emb, K, user_id="lme", record=record)
    elif unit == "tokens":
        K = token_budget_for(turns, p)
        res = stream_conversation(turns, vecs, scorer, emb, None, budget_tokens=K, user_id="lme", record=record)
    else:
        raise ValueError(f"unit must be 'turns' or 'tokens', got {unit!r}")
    kept = set(res.kept)
    evidence = list(q.evidence)
    return LmeRun(q.question_id, q.question_type, scorer.name, p, K, len(turns), [t.memory_id for t in turns
                  if t.memory_id in kept], evidence, sum(e in kept for e in evidence), q.answerable,
                  res.violations, res.decisions, time.perf_counter() - t0, unit)


@dataclass
class LmeSummary:
    """Running counts per policy and capacity (evidence pairs kept / total, per question type)."""

    cells: dict[tuple[str, str], dict[str, list[int]]] = field(default_factory=dict)
    violations: dict[tuple[str, str], int] = field(default_factory=dict)
    questions: dict[tuple[str, str], int] = field(default_factory=dict)

    def add(self, run: LmeRun) -> None:
        key = (run.policy, run.label)
        cell = self.cells.setdefault(key, {t: [0, 0] for t in QUESTION_TYPES})
        self.violations[key] = self.violations.get(key, 0) + run.violations
        if run.answerable:
            cell[run.question_type][0] += run.hits
            cell[run.question_type][1] += len(run.evidence)
            self.questions[key] = self.questions.get(key, 0) + 1

    def to_dict(self) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for (pol, cap), cell in self.cells.items():
            hits, total = sum(v[0] for v in cell.values()), sum(v[1] for v in cell.values())
            out.setdefault(pol, {})[cap] = {
                "recall": hits / total if total else None, "n_evidence": total,
                "n_questions": self.questions.get((pol, cap), 0),
                "by_type": {t: (v[0] / v[1] if v[1] else None) for t, v in cell.items()},
                "counts": {t: list(v) for t, v in cell.items()}, "violations": self.violations[(pol, cap)]}
        return out


def lme_table(summary: dict[str, dict[str, Any]]) -> str:
    """Plain-text table: policy × capacity × question type (evidence recall)."""
    short = {"single-session-user": "ss-user", "single-session-assistant": "ss-asst",
             "single-session-preference": "ss-pref", "multi-session": "multi", "temporal-reasoning": "temporal",
             "knowledge-update": "update"}
    head = f"{'policy':<18} {'p':>11} {'recall':>7} " + " ".join(f"{short[t]:>8}" for t in QUESTION_TYPES)
    lines = [head, "-" * len(head)]
    f = (lambda v: f"{v:.3f}" if isinstance(v, (int, float)) else "  -  ")
    for pol, caps in summary.items():
        for p, cell in sorted(caps.items(), key=lambda kv: budget_order(kv[0])):
            lines.append(f"{pol:<18} {p:>11} {f(cell['recall']):>7} "
                         + " ".join(f"{f(cell['by_type'][t]):>8}" for t in QUESTION_TYPES))
    return "\n".join(lines)


def iter_questions(files: Sequence[str | Path], only: Callable[[LmeQuestion], bool] | None = None
                   ) -> Iterator[LmeQuestion]:
    """Every question of ``files``, streamed; an id seen twice is an error."""
    seen: set[str] = set()
    for f in files:
        for q in iter_lme(f):
            if q.question_id in seen:
                raise MemirError(f"{f}: question {q.question_id} appears twice; pass each question once")
            seen.add(q.question_id)
            if only is None or only(q):
                yield q


def sample_questions(file: str | Path, *, limit: int | None = None, seed: int = 0,
                     only: set[str] | None = None) -> list[LmeQuestion]:
    """The answerable questions of ``file`` (those in ``only`` if given), or a ``seed`` sample of
    ``limit`` of them, in id order."""
    qs = list(iter_questions([file], only=lambda q: q.answerable and (only is None or q.question_id in only)))
    if limit is not None and limit < len(qs):
        qs = sorted(random.Random(seed).sample(qs, limit), key=lambda q: q.question_id)
    return qs


def evaluate_lme(questions: Iterable[LmeQuestion], make_scorer: Callable[[str, LmeQuestion], Scorer],
                 policies: Sequence[str], capacities: Sequence[float], emb: Embedder, *, out: str | Path | None = None,
                 args: dict[str, Any] | None = None, total: int | None = None, progress: bool = True,
                 workers: int = 1) -> dict[str, dict[str, Any]]:
    """Run every (question, policy, capacity); write runs to ``out`` as they finish; return the summary.

    Args:
        questions: streamed questions (:func:`iter_questions`).
        make_scorer: ``(policy name, question) -> Scorer`` (the oracle reads its question).
        policies, capacities: the grid.
        emb: the encoder, ideally a :class:`~train.embedcache.CachedEmbedder`.
        out: the JSON file (written to a temporary file beside it, renamed at the end).
        args: recorded in the output.
        total: number of questions, for the progress bar.
        workers: processes replaying questions side by side (:func:`~train.workers.ordered_map`;
            results and the output keep the question order).
    """
    summary = LmeSummary()
    bar = None
    if progress:
        from tqdm import tqdm
        bar = tqdm(total=total, desc="longmemeval", unit="question", file=sys.stderr)
    fh = None
    tmp = None
    if out is not None:
        target = Path(out)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        fh = open(tmp, "w", encoding="utf-8")
        fh.write('{"args": ' + json.dumps(args or {}, default=str) + ',\n "runs": [\n')
    first = True

    def one(q: LmeQuestion) -> list[LmeRun]:
        vecs = question_vectors(q, emb)
        runs = []
        for name in policies:
            for p in capacities:
                run = replay_question(q, make_scorer(name, q), emb, p, vectors=vecs)
                run.policy = name
                runs.append(run)
        save = getattr(emb, "save", None)  # a CachedEmbedder keeps what it encoded, as it goes
        if save is not None:
            save()
        return runs

    try:
        for runs in ordered_map(one, questions, workers):
            for run in runs:
                summary.add(run)
                if fh is not None:
                    fh.write(("" if first else ",\n") + json.dumps(run.to_dict()))
                    first = False
            if bar is not None:
                bar.update(1)
        result = summary.to_dict()
        if fh is not None and tmp is not None:
            fh.write('\n ],\n "summary": ' + json.dumps(result) + "}\n")
            fh.close()
            fh = None
            tmp.replace(Path(out))  # type: ignore[arg-type]
        return result
    finally:
        if bar is not None:
            bar.close()
        if fh is not None:
            fh.close()
        if tmp is not None and tmp.exists():
            tmp.unlink()
