"""Summary statistics of a set of episodes, for the data manifest and for eyeballing a config."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from .events import Episode, Kind

__all__ = ["SimStats", "summarize"]


def _dist(x: Sequence[float]) -> dict[str, float]:
    a = np.asarray(x, dtype=float)
    if a.size == 0:
        return {"mean": 0.0, "min": 0.0, "median": 0.0, "max": 0.0}
    return {"mean": round(float(a.mean()), 3), "min": float(a.min()), "median": float(np.median(a)),
            "max": float(a.max())}


@dataclass(frozen=True)
class SimStats:
    """What a generated set contains.

    Attributes:
        n_episodes: episodes summarised.
        families: episodes per family.
        events_per_episode: mean/min/median/max events per episode.
        questions_per_episode: mean/min/median/max questions per episode.
        kind_counts: events per ground-truth kind (all episodes).
        needed_fraction: share of events that answer at least one question.
        needed_by_kind: share of each kind's events that answer at least one question.
        answer_distance: steps between an answer event and the question that needs it.
        repeat_asked_fraction: share of needed events asked more than once.
        stale_question_fraction: share of questions whose slot has a superseded version before it.
        lookalikes_per_question: mean number of look-alike events per question.
        users_per_episode: mean/min/median/max users per episode.
    """

    n_episodes: int
    families: dict[str, int]
    events_per_episode: dict[str, float]
    questions_per_episode: dict[str, float]
    kind_counts: dict[str, int]
    needed_fraction: float
    needed_by_kind: dict[str, float]
    answer_distance: dict[str, float]
    repeat_asked_fraction: float
    stale_question_fraction: float
    lookalikes_per_question: float
    users_per_episode: dict[str, float]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return asdict(self)


def summarize(episodes: Sequence[Episode]) -> SimStats:
    """Count kinds, questions, needs and distances over ``episodes``."""
    kinds: Counter[str] = Counter()
    needed_kinds: Counter[str] = Counter()
    distances: list[int] = []
    n_needed = n_repeat = n_stale = n_looks = n_q = 0
    for ep in episodes:
        kinds.update(str(e.kind) for e in ep.events)
        asked: Counter[str] = Counter(i for q in ep.questions for i in q.answer_event_ids)
        n_needed += len(asked)
        n_repeat += sum(1 for c in asked.values() if c > 1)
        needed_kinds.update(str(ep.event(i).kind) for i in asked)
        for q in ep.questions:
            distances += [q.step - ep.event(i).step for i in q.answer_event_ids]
            n_stale += bool(q.stale_event_ids)
            n_looks += len(q.lookalike_event_ids)
        n_q += len(ep.questions)
    total = sum(kinds.values())
    return SimStats(
        n_episodes=len(episodes),
        families=dict(sorted(Counter(ep.family for ep in episodes).items())),
        events_per_episode=_dist([len(ep.events) for ep in episodes]),
        questions_per_episode=_dist([len(ep.questions) for ep in episodes]),
        kind_counts={str(k): kinds.get(str(k), 0) for k in Kind},
        needed_fraction=round(n_needed / max(total, 1), 4),
        needed_by_kind={str(k): round(needed_kinds.get(str(k), 0) / max(kinds.get(str(k), 0), 1), 4) for k in Kind},
        answer_distance=_dist(distances),
        repeat_asked_fraction=round(n_repeat / max(n_needed, 1), 4),
        stale_question_fraction=round(n_stale / max(n_q, 1), 4),
        lookalikes_per_question=round(n_looks / max(n_q, 1), 3),
        users_per_episode=_dist([len(ep.user_ids) for ep in episodes]),
    )
