"""The simulated agent: replays an episode through the real runtime under a retention policy.

For each event it writes a typed MemIR record into a per-user scope of an in-memory SQLite store
(redaction, embedding cache, typed fields — the production write path). Retention runs at the
runtime's triggers (every N writes, the fill watermark, task-phase changes, and right before a
question is answered) with capacity K per user, scored by the policy under test through the same
``Scorer`` protocol and solver the runtime ships. Each question is answered by ``recall`` over what
the user's scope still holds; success = the current (not superseded) fact is in the top-k and no
stale version ranks above it.

With ``record=True`` every retention decision is captured (the feature matrix the scorer saw, the
ids, what was kept) for hindsight labelling.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from runtime.consolidate import annotate_session
from runtime.embed import Embedder
from runtime.memir import MemIR
from runtime.redact import redact
from runtime.retain import Triggers
from runtime.rules import DEFAULT_RULES, RuleSet
from runtime.scoring import Scorer
from runtime.store import MemoryStore, StoreConfig
from utilitynet.context import ScoringContext
from utilitynet.features import featurize

from .simulate import Episode, Event, Question

__all__ = ["AgentConfig", "RecordingScorer", "Decision", "EpisodeRun", "QuestionOutcome", "run_episode", "user_capacity"]


@dataclass(frozen=True)
class AgentConfig:
    """How the simulated agent uses its memory.

    Attributes:
        capacity_frac: capacity per user as a fraction of that user's events in the episode (0, 1].
        min_capacity: never fewer slots than this per user.
        every_n_writes: run retention after this many writes since the last decision.
        recall_k: hits per question; success needs the answer in the top ``recall_k``.
        recent_window: how many recent events form the "recent context" vector.
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
    """One retention decision as the policy saw it."""

    user_id: str
    step: int
    ids: list[str]
    X: np.ndarray
    kept: np.ndarray
    trigger: str


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
    """Wraps a scorer; keeps the ids and features of its last call so decisions can be labelled later."""

    def __init__(self, inner: Scorer, record: bool) -> None:
        self.inner, self.record = inner, record
        self.last: tuple[list[str], np.ndarray] | None = None

    @property
    def name(self) -> str:
        return self.inner.name

    def score(self, records: Sequence[MemIR], embeddings: np.ndarray, ctx: ScoringContext) -> np.ndarray:
        if self.record:
            self.last = ([r.id for r in records], featurize(records, embeddings, ctx))
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
    goal_vec = np.asarray(embedder.encode([ep.goal])[0], np.float32)
    recent: dict[str, list[np.ndarray]] = {}
    triggers = {u: Triggers(every_n_writes=cfg.every_n_writes, watermark=1.0) for u in caps}
    with MemoryStore.open(":memory:", embedder=embedder, config=StoreConfig(log_recalls=False)) as store:
        scopes = {u: store.scope(user_id=u, agent_id="sim") for u in caps}
        last_phase: dict[str, str] = {}
        last_session: dict[str, str | None] = {}

        def retain(user: str, now: Any, step: int, trigger: str) -> None:
            scope = scopes[user]
            rv = recent.get(user)
            ctx_recent = None if not rv else _unit(np.mean(rv[-cfg.recent_window:], axis=0))
            ctx = ScoringContext(now=now, step=step, goal_embedding=goal_vec, recent_embedding=ctx_recent,
                                 stage=step / max(len(ep.events), 1))
            t0 = time.perf_counter()
            d = scope.retain(capacity=caps[user], scorer=rec, rules=rules, method=cfg.method, now=now, ctx=ctx,
                             forgotten="archive", trigger=trigger)
            run.update_ms.append((time.perf_counter() - t0) * 1000)
            kept = set(d.kept)
            for mid in (m for m, it in d.items.items() if not it["candidate"] and not it["kept"]):
                run.forgotten.setdefault(mid, step)
            run.violations += _violations(d, caps[user])
            if record and rec.last is not None:
                ids, X = rec.last
                run.decisions.append(Decision(user, step, ids, X, np.array([i in kept for i in ids]), trigger))
            triggers[user].reset()

        for item in ep.timeline():
            if isinstance(item, Question):
                step_box[0] = item.step
                retain(item.user_id, item.timestamp, item.step, "question")
                run.questions.append(_answer(item, scopes, cfg, store))
                continue
            ev: Event = item
            step_box[0] = ev.step
            text = redact(ev.content).text
            vec = embedder.encode([text])[0]
            r = ev.to_memir(agent_id="sim")
            if r.provenance.derived_from:  # the agent can only cite parents it still has (TTL deletes)
                alive = scopes[ev.user_id]._existing_ids(r.provenance.derived_from)
                r = r.model_copy(update={"provenance": r.provenance.model_copy(
                    update={"derived_from": [p for p in r.provenance.derived_from if p in alive]})})
            # A new session for this user closes the previous one: store its dialogue context (as the
            # production assembler does at a session boundary; runtime.consolidate).
            prev_session = last_session.get(ev.user_id)
            if prev_session is not None and prev_session != r.provenance.session_id:
                annotate_session(scopes[ev.user_id], prev_session, now=ev.timestamp)
            last_session[ev.user_id] = r.provenance.session_id
            scopes[ev.user_id].write(r, embedding=vec)
            recent.setdefault(ev.user_id, []).append(np.asarray(vec, np.float32))
            trig = triggers[ev.user_id]
            trig.note_write()
            event = "task_phase_change" if last_phase.get(ev.user_id, ev.phase) != ev.phase else None
            last_phase[ev.user_id] = ev.phase
            working = scopes[ev.user_id].count(now=ev.timestamp, include_expired=True)
            why = trig.due(working=working, capacity=caps[ev.user_id] + cfg.every_n_writes, event=event)
            if why:
                retain(ev.user_id, ev.timestamp, ev.step + 1, why)
    return run


def _unit(v: np.ndarray) -> np.ndarray:
    return (v / max(float(np.linalg.norm(v)), 1e-12)).astype(np.float32)


def _violations(d: Any, capacity: int) -> int:
    """Hard-rule violations visible in a decision: must-keep dropped, must-forget kept, over capacity."""
    bad = 0
    for it in d.items.values():
        reason = it["reason"]
        if reason == "must_keep" and not it["kept"]:
            bad += 1
        if reason == "must_forget" and it["kept"]:
            bad += 1
    n_forced = sum(1 for it in d.items.values() if it["kept"] and it["reason"] in ("must_keep", "forced_by_implication"))
    if len(d.kept) > max(capacity, n_forced):
        bad += 1
    return bad


def _answer(q: Question, scopes: Mapping[str, Any], cfg: AgentConfig, store: MemoryStore) -> QuestionOutcome:
    scope = scopes[q.user_id]
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
