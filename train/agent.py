"""The simulated agent: replays an episode through the public runtime API under a retention policy.

Everything goes through what a production agent calls: one ``MemoryStore``, one scope per user
with a :class:`~runtime.retention.RetentionPolicy` (capacity K per user, the policy under test as
scorer, triggers every N writes and on task-phase changes), ``scope.write`` per event (sessions
close and get their context features by themselves), ``scope.set_task(goal=...)`` for the
episode's goal, ``scope.retain(trigger="question")`` right before a question is answered, and
``scope.recall`` to answer it. Success = the current (not superseded) fact is in the top-k and no
stale version ranks above it.

With ``record=True`` every decision is captured — the feature matrix the scorer saw (the same
``featurize`` the runtime's scorer runs), the ids and what was kept — for hindsight labelling.
Constraint violations are recomputed from each kept set and the rules
(:func:`runtime.retention.audit`), independent of the solver's own reason codes.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from runtime.annotate import AssemblerConfig, SessionConfig
from runtime.encoders import Embedder
from runtime.record import MemIR
from runtime.retention import DEFAULT_RULES, RetentionDecision, RetentionPolicy, RuleSet, Triggers, audit
from runtime.scoring import Scorer, ScoringContext
from runtime.store import MemoryStore, Scope, StoreConfig
from utilitynet.features import featurize

from .simulate import Episode, Event, Question

__all__ = ["AgentConfig", "RecordingScorer", "Decision", "EpisodeRun", "QuestionOutcome", "run_episode",
           "user_capacity"]


@dataclass(frozen=True)
class AgentConfig:
    """How the simulated agent uses its memory.

    Attributes:
        capacity_frac: capacity per user as a fraction of that user's events in the episode (0, 1].
        min_capacity: never fewer slots than this per user.
        every_n_writes: run retention after this many writes since the last decision.
        recall_k: hits per question; success needs the answer in the top ``recall_k``.
        recent_window: how many recent memories form the "recent context" vector.
        method: solver method ("auto" | "greedy" | "exact" | "cvxpy").
    """

    capacity_frac: float = 0.2
    min_capacity: int = 3
    every_n_writes: int = 8
    recall_k: int = 5
    recent_window: int = 5
    method: str = "auto"

    def __post_init__(self) -> None:
        if not 0 < self.capacity_frac <= 1:
            raise ValueError("AgentConfig.capacity_frac must be in (0, 1]")
        if self.min_capacity < 1 or self.every_n_writes < 1 or self.recall_k < 1:
            raise ValueError("AgentConfig.min_capacity, every_n_writes and recall_k must be >= 1")


@dataclass
class Decision:
    """One retention decision as the policy saw it (``sessions``: each item's session id, or None)."""

    user_id: str
    step: int
    ids: list[str]
    X: np.ndarray
    kept: np.ndarray
    trigger: str
    sessions: list[str | None] = field(default_factory=list)


@dataclass(frozen=True)
class QuestionOutcome:
    question_id: str
    user_id: str
    step: int
    success: bool
    stale: bool
    answer_kept: bool
    leaked: int


@dataclass
class EpisodeRun:
    """What happened in one episode under one policy."""

    episode_id: str
    policy: str
    questions: list[QuestionOutcome]
    decisions: list[Decision] = field(default_factory=list)
    forgotten: dict[str, int] = field(default_factory=dict)  # event id -> step it left working memory
    update_ms: list[float] = field(default_factory=list)
    violations: int = 0

    @property
    def success_rate(self) -> float:
        return float(np.mean([q.success for q in self.questions])) if self.questions else float("nan")


def user_capacity(ep: Episode, cfg: AgentConfig) -> dict[str, int]:
    """K per user = max(min_capacity, round(capacity_frac × that user's events))."""
    counts: dict[str, int] = {}
    for e in ep.events:
        counts[e.user_id] = counts.get(e.user_id, 0) + 1
    return {u: max(cfg.min_capacity, round(cfg.capacity_frac * n)) for u, n in counts.items()}


class RecordingScorer:
    """Wraps a scorer behind the same protocol; keeps what each call saw, for labels and audits.

    Attributes:
        calls: per call ``(records, features)`` — features only when ``record`` is on.
    """

    def __init__(self, inner: Scorer, record: bool) -> None:
        self.inner, self.record = inner, record
        self.calls: list[tuple[list[MemIR], np.ndarray | None]] = []

    @property
    def name(self) -> str:
        return self.inner.name

    def score(self, records: Sequence[MemIR], embeddings: np.ndarray, ctx: ScoringContext) -> np.ndarray:
        self.calls.append((list(records), featurize(records, embeddings, ctx) if self.record else None))
        return self.inner.score(records, embeddings, ctx)


class _Forced:
    """Counterfactual hook: pins an item's utility to +big (keep) or −big (drop) from a step on."""

    def __init__(self, inner: Any, keep: Mapping[str, int], drop: Mapping[str, int], step: list[int]) -> None:
        self.inner, self.keep, self.drop, self.step = inner, keep, drop, step

    @property
    def name(self) -> str:
        return self.inner.name

    def score(self, records: Sequence[MemIR], embeddings: np.ndarray, ctx: ScoringContext) -> np.ndarray:
        u = np.asarray(self.inner.score(records, embeddings, ctx), dtype=np.float64).copy()
        for i, r in enumerate(records):
            if r.id in self.keep and self.step[0] >= self.keep[r.id]:
                u[i] = 1e6
            if r.id in self.drop and self.step[0] >= self.drop[r.id]:
                u[i] = -1e6
        return u


def run_episode(ep: Episode, scorer: Scorer, embedder: Embedder, cfg: AgentConfig = AgentConfig(), *,
                record: bool = False, rules: RuleSet = DEFAULT_RULES, force_keep: Mapping[str, int] = {},
                force_drop: Mapping[str, int] = {}) -> EpisodeRun:
    """Replay ``ep`` with ``scorer`` as the retention policy. See the module docstring."""
    caps = user_capacity(ep, cfg)
    step_box = [0]
    inner: Any = _Forced(scorer, force_keep, force_drop, step_box) if (force_keep or force_drop) else scorer
    rec = RecordingScorer(inner, record)
    run = EpisodeRun(ep.episode_id, scorer.name, [])
    # The simulator names its sessions; the detector would only add splits of its own.
    store_cfg = StoreConfig(log_recalls=False, annotate=AssemblerConfig(session=SessionConfig(enabled=False)))
    with MemoryStore.open(":memory:", embedder=embedder, config=store_cfg) as store:
        scopes = {u: store.scope(user_id=u, agent_id="sim", policy=RetentionPolicy(
            capacity=caps[u], scorer=rec, rules=rules, method=cfg.method,  # type: ignore[arg-type]
            forgotten="archive", recent_window=cfg.recent_window,
            triggers=Triggers(every_n_writes=cfg.every_n_writes, events=frozenset({"task_phase_change"}))))
            for u in caps}
        for s in scopes.values():
            s.set_task(ep.goal)
        last_phase: dict[str, str] = {}

        def observe(user: str, step: int, t0: float, before: int) -> None:
            """Book the decisions the last call made (explicit or triggered)."""
            if len(rec.calls) == before:
                return
            run.update_ms.append((time.perf_counter() - t0) * 1000)
            scope = scopes[user]
            n = len(rec.calls) - before  # a decision over no items calls no scorer: skip those
            made = [d for d in scope.decisions(limit=2 * n + 2) if d.n_items][:n][::-1]
            for (recs, X), d in zip(rec.calls[before:], made):
                _book(run, scope, recs, X, d, step, rules, caps[user], record)

        for item in ep.timeline():
            if isinstance(item, Question):
                step_box[0] = item.step
                before, t0 = len(rec.calls), time.perf_counter()
                scopes[item.user_id].retain(trigger="question", now=item.timestamp)
                observe(item.user_id, item.step, t0, before)
                run.questions.append(_answer(item, scopes[item.user_id], cfg))
                continue
            ev: Event = item
            step_box[0] = ev.step + 1
            scope = scopes[ev.user_id]
            r = ev.to_memir(agent_id="sim")
            if r.provenance.derived_from:  # the agent can only cite parents it still has (TTL deletes)
                alive = scope.exists(r.provenance.derived_from)
                r = r.model_copy(update={"provenance": r.provenance.model_copy(
                    update={"derived_from": [p for p in r.provenance.derived_from if p in alive]})})
            before, t0 = len(rec.calls), time.perf_counter()
            scope.write(r)
            if last_phase.get(ev.user_id, ev.phase) != ev.phase:
                scope.event("task_phase_change", now=ev.timestamp)
            last_phase[ev.user_id] = ev.phase
            observe(ev.user_id, ev.step + 1, t0, before)
    return run


def _book(run: EpisodeRun, scope: Scope, recs: list[MemIR], X: np.ndarray | None, d: RetentionDecision, step: int,
          rules: RuleSet, capacity: int, record: bool) -> None:
    for mid in d.archived + d.deleted + d.redacted:
        run.forgotten.setdefault(mid, step)
    run.violations += len(audit(recs, d.kept, rules, now=d.at, capacity=capacity))
    if record and X is not None:
        kept = set(d.kept)
        ids = [r.id for r in recs]
        run.decisions.append(Decision(scope.user_id, step, ids, X, np.array([i in kept for i in ids]), d.trigger,
                                      [r.provenance.session_id for r in recs]))


def _answer(q: Question, scope: Scope, cfg: AgentConfig) -> QuestionOutcome:
    hits = scope.recall(q.text, k=cfg.recall_k, now=q.timestamp)
    ids = [h.record.id for h in hits]
    answers, stale = set(q.answer_event_ids), set(q.stale_event_ids)
    first_answer = next((i for i, x in enumerate(ids) if x in answers), None)
    first_stale = next((i for i, x in enumerate(ids) if x in stale), None)
    success = first_answer is not None and (first_stale is None or first_answer < first_stale)
    stale_hit = first_stale is not None and (first_answer is None or first_stale < first_answer)
    held = {r.id for r in scope.list(now=q.timestamp, include_expired=True)}
    leaked = sum(1 for h in hits if h.record.provenance.user_id != q.user_id)
    return QuestionOutcome(q.question_id, q.user_id, q.step, success, stale_hit, bool(answers & held), leaked)
