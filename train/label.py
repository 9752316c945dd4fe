"""Hindsight labels for retention decisions (seed 001 §4.2), and their counterfactual check.

At a decision at step s, an item is *useful* if a later question of the same user needs it (it
states the then-current version of the slot asked about) and answering with it would succeed (the
question's text retrieves it: its cosine rank among the candidates is within ``retrievable_rank``).
Usefulness is discounted by the distance to that question: ``0.5 ** (Δsteps / half_life)``.

Negatives: superseded versions that a later question would be answered with (stale) and look-alike
distractors of a later question are labelled 0 with extra weight; so are *mined* hard negatives —
items whose similarity to a later question beats the true answer's. Everything else is 0, weight 1.

The counterfactual check re-runs the episode with one item forced kept and forced dropped from the
decision on; the label "useful" should agree with "keeping it answers more questions". Where it
does not, the counterfactual is the direct measurement: the loop relabels those rows with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from runtime.encoders import Embedder
from runtime.scoring import Scorer

from .agent import AgentConfig, Decision, EpisodeRun, run_episode
from .simulate import Episode

__all__ = ["Counterfactual", "LabelConfig", "Labels", "OracleScorer", "apply_corrections", "counterfactual_agreement",
           "label_decisions"]


@dataclass(frozen=True)
class LabelConfig:
    """Hindsight labelling knobs.

    Attributes:
        half_life_steps: usefulness halves for every this many steps until the question (> 0).
        retrievable_rank: a needed item counts as useful only if the question ranks it within this
            many candidates by cosine (else keeping it would not have answered anything).
        stale_weight: sample weight of superseded versions that a later question would hit.
        lookalike_weight: sample weight of look-alike distractors of a later question.
        mined_weight: sample weight of mined hard negatives (beat the true answer on similarity).
    """

    half_life_steps: float = 150.0
    retrievable_rank: int = 10
    stale_weight: float = 3.0
    lookalike_weight: float = 2.0
    mined_weight: float = 2.0


@dataclass
class Labels:
    """Per-row targets for one decision list (rows = concatenated decision items)."""

    y: np.ndarray
    w: np.ndarray
    tag: list[str]  # useful | stale | lookalike | mined | other (diagnostics)


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)


def label_decisions(ep: Episode, decisions: Sequence[Decision], embedder: Embedder, cfg: LabelConfig = LabelConfig(),
                    vectors: dict[str, np.ndarray] | None = None) -> Labels:
    """Label every item of every decision of one episode run. ``vectors``: id → unit embedding."""
    qvec = {q.question_id: v for q, v in zip(ep.questions, _unit(embedder.encode([q.text for q in ep.questions])))} \
        if ep.questions else {}
    if vectors is None:
        texts = {e.event_id: e.content for e in ep.events}
        ids = sorted({i for d in decisions for i in d.ids if i in texts})
        vecs = _unit(np.asarray(embedder.encode([texts[i] for i in ids]))) if ids else np.zeros((0, 1))
        vectors = dict(zip(ids, vecs))
    ys, ws, tags = [], [], []
    for d in decisions:
        future = [q for q in ep.questions if q.user_id == d.user_id and q.step >= d.step]
        cand = [i for i in d.ids]
        V = np.stack([vectors.get(i, np.zeros_like(next(iter(vectors.values())))) for i in cand]) if cand else None
        y = np.zeros(len(cand))
        w = np.ones(len(cand))
        tag = ["other"] * len(cand)
        pos = {i: k for k, i in enumerate(cand)}
        for q in future:
            sims = V @ qvec[q.question_id] if V is not None else np.zeros(0)
            order = np.argsort(-sims)
            rank = np.empty(len(cand), int)
            rank[order] = np.arange(len(cand))
            disc = 0.5 ** ((q.step - d.step) / cfg.half_life_steps)
            best_answer_sim = max((sims[pos[a]] for a in q.answer_event_ids if a in pos), default=None)
            for a in q.answer_event_ids:
                if a in pos and rank[pos[a]] < cfg.retrievable_rank and disc > y[pos[a]]:
                    y[pos[a]] = disc
                    tag[pos[a]] = "useful"
            for s in q.stale_event_ids:
                if s in pos and tag[pos[s]] != "useful":
                    w[pos[s]] = max(w[pos[s]], cfg.stale_weight)
                    tag[pos[s]] = "stale"
            for s in q.lookalike_event_ids:
                if s in pos and tag[pos[s]] == "other":
                    w[pos[s]] = max(w[pos[s]], cfg.lookalike_weight)
                    tag[pos[s]] = "lookalike"
            if best_answer_sim is not None:
                for k in np.nonzero(sims > best_answer_sim)[0]:
                    if tag[k] == "other":
                        w[k] = max(w[k], cfg.mined_weight)
                        tag[k] = "mined"
        ys.append(y)
        ws.append(w)
        tags.extend(tag)
    cat = (lambda a: np.concatenate(a) if a else np.zeros(0))
    return Labels(cat(ys).astype(np.float32), cat(ws).astype(np.float32), tags)


class OracleScorer:
    """The hindsight oracle: scores each item by its own hindsight label at the current step.

    It knows the future questions (it reads the episode's ground truth), so it bounds what any
    policy could reach with the same recall; never use it outside evaluation.
    """

    name = "oracle"

    def __init__(self, ep: Episode, embedder: Embedder, cfg: LabelConfig = LabelConfig()) -> None:
        self.ep, self.cfg = ep, cfg
        self._need: dict[str, list[tuple[int, str]]] = {}
        for q in ep.questions:
            for a in q.answer_event_ids:
                self._need.setdefault(a, []).append((q.step, q.user_id))
        # The episode step at a decision is read off its time (events are strictly time-ordered):
        # the runtime's step counters count each user's own writes, not the episode's events.
        self._times = np.array([e.timestamp.timestamp() for e in ep.events])

    def score(self, records, embeddings, ctx):  # type: ignore[no-untyped-def]
        step = int(np.searchsorted(self._times, ctx.now.timestamp(), side="right"))
        out = np.empty(len(records))
        for i, r in enumerate(records):
            future = [s for s, _ in self._need.get(r.id, []) if s >= step]
            if future:
                out[i] = 1.0 + 0.5 ** ((min(future) - step) / self.cfg.half_life_steps)
            else:
                out[i] = 1e-3 * (1 + (ctx.record_steps[i] if ctx.record_steps is not None else 0) / 1e4)
        return out


@dataclass
class Counterfactual:
    """The counterfactual check of a sample of labelled rows.

    Attributes:
        n: rows checked; agreement: share where the label and the counterfactual agree.
        corrections: ``(episode index, row index within that episode's labels, counterfactual
            label)`` of every row where they disagree — the counterfactual is the direct
            measurement, so the loop relabels those rows with it (:func:`apply_corrections`).
    """

    n: int
    agreement: float
    corrections: list[tuple[int, int, float]]


def counterfactual_agreement(episodes: Sequence[Episode], runs: Sequence[EpisodeRun], labels: Sequence[Labels],
                             scorer: Scorer, embedder: Embedder, agent: AgentConfig, *, n_samples: int = 16,
                             seed: int = 0, threshold: float = 0.2) -> Counterfactual:
    """Re-run episodes with one labelled item forced kept vs forced dropped; compare with its label.

    An item is counterfactually useful if forcing it kept answers more of the episode's questions
    than forcing it dropped. Samples are stratified: half labelled useful, half not.
    """
    rng = np.random.default_rng(seed)
    pool_pos: list[tuple[int, int, int, str, float]] = []
    pool_neg: list[tuple[int, int, int, str, float]] = []
    for e, (run, lab) in enumerate(zip(runs, labels)):
        row = 0
        for d in run.decisions:
            for i, mid in enumerate(d.ids):
                (pool_pos if lab.y[row + i] > threshold else pool_neg).append((e, row + i, d.step, mid,
                                                                               float(lab.y[row + i])))
            row += len(d.ids)
    picks = []
    for pool in (pool_pos, pool_neg):
        if pool:
            idx = rng.choice(len(pool), size=min(n_samples // 2, len(pool)), replace=False)
            picks += [pool[i] for i in idx]
    agree = 0
    corrections = []
    for e, row, step, mid, y in picks:
        ep = episodes[e]
        a = run_episode(ep, scorer, embedder, agent, force_keep={mid: step})
        b = run_episode(ep, scorer, embedder, agent, force_drop={mid: step})
        cf_useful = sum(q.success for q in a.questions) > sum(q.success for q in b.questions)
        if cf_useful == (y > threshold):
            agree += 1
        else:
            corrections.append((e, row, 1.0 if cf_useful else 0.0))
    return Counterfactual(len(picks), agree / len(picks) if picks else float("nan"), corrections)


def apply_corrections(labels: Sequence[Labels], corrections: Sequence[tuple[int, int, float]], *,
                      weight: float = 3.0) -> int:
    """Relabel rows where the counterfactual disagreed with hindsight, with extra weight (they were
    measured, not inferred); returns how many changed."""
    for e, row, y in corrections:
        labels[e].y[row] = y
        labels[e].w[row] = max(float(labels[e].w[row]), weight)
        labels[e].tag[row] = "counterfactual"
    return len(corrections)
