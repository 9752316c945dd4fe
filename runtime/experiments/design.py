"""What an experiment is: arms over recall settings and retention policies, and a deterministic,
sticky assignment of users to arms (seed 000 §5.3.3).

A user's arm is a pure function of the experiment's salt and the user id (SHA-256 → a point in
[0, 1) → the arm whose share of the weights covers it), so every process, every store client and
every restart puts a user in the same arm without storing anything, and adding a user never moves
another. The assignment is by user: all of a user's agents share the arm, and the report treats
the user as the unit.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from ..errors import ValidationError
from ..retention.policy import RetentionPolicy

__all__ = ["METRICS", "RECALL_SETTINGS", "Arm", "Experiment", "Metric", "check_experiments"]

Metric = Literal["resolution", "satisfaction", "usefulness"]
METRICS: tuple[str, ...] = ("resolution", "satisfaction", "usefulness")
"""``resolution``: the share of a user's tasks reported resolved; ``satisfaction``: a user's mean
satisfaction in [0, 1]; ``usefulness``: the share of a user's recalled memories marked useful
(useful / (useful + wrong))."""

RECALL_SETTINGS: Mapping[str, str] = MappingProxyType({
    "session_mix": "a number in [0, 1): the recent-context weight of the query (Scope.recall(session_mix=))",
    "dynamic_roles": "a bool: dynamic role weights (Scope.recall(dynamic_roles=))",
    "candidates": "an int >= 1: the raw candidate pool before re-ranking",
    "rerank": "a bool: False = untyped retrieval (cosine order only: no confidence, freshness or role factor)",
})
"""The recall settings an arm may set, and what each takes."""


def _recall_problem(key: str, v: Any) -> str | None:
    if key not in RECALL_SETTINGS:
        return f"unknown recall setting; valid: {sorted(RECALL_SETTINGS)}"
    ok = {"session_mix": not isinstance(v, bool) and isinstance(v, (int, float)) and 0 <= v < 1,
          "dynamic_roles": isinstance(v, bool), "rerank": isinstance(v, bool),
          "candidates": isinstance(v, int) and not isinstance(v, bool) and v >= 1}[key]
    return None if ok else f"must be {RECALL_SETTINGS[key]}, got {v!r}"


@dataclass(frozen=True)
class Arm:
    """One arm of an experiment.

    Attributes:
        name: the arm's label (reported; recorded with every outcome).
        weight: its share of users, relative to the other arms' (default equal shares).
        recall: recall settings for its users' scopes (:data:`RECALL_SETTINGS`); a recall that
            passes a setting explicitly still wins.
        policy: the retention policy of its users' scopes (``None``: the scope's own).
    """

    name: str
    weight: float = 1.0
    recall: Mapping[str, Any] = field(default_factory=dict)
    policy: RetentionPolicy | None = None

    def __post_init__(self) -> None:
        p: list[tuple[str, str]] = []
        if not isinstance(self.name, str) or not self.name.strip() or len(self.name) > 64:
            p.append(("name", f"must be a non-empty label of at most 64 characters, got {self.name!r}"))
        if isinstance(self.weight, bool) or not isinstance(self.weight, (int, float)) or not self.weight > 0:
            p.append(("weight", f"must be a positive number, got {self.weight!r}"))
        if not isinstance(self.recall, Mapping):
            p.append(("recall", "must be a mapping of recall settings"))
        else:
            p += [(f"recall[{k!r}]", m) for k, v in self.recall.items() if (m := _recall_problem(k, v))]
        if self.policy is not None and not isinstance(self.policy, RetentionPolicy):
            p.append(("policy", "must be a RetentionPolicy or None"))
        if p:
            raise ValidationError.from_problems(f"Arm {self.name!r}", p)
        object.__setattr__(self, "recall", MappingProxyType(dict(self.recall)))


@dataclass(frozen=True)
class Experiment:
    """An experiment declared in ``StoreConfig.experiments``.

    Attributes:
        name: its label (``memir ab report DB --experiment NAME``).
        arms: two or more :class:`Arm`; the first is the control the others are compared with.
        metric: the outcome it is judged on (:data:`METRICS`).
        min_effect: the smallest difference of the metric worth detecting (absolute; 0.05 = five
            points of resolution rate): the report sizes the experiment for it.
        alpha: the false-positive rate of each comparison (Bonferroni-split over the arms).
        power: the chance of detecting a true difference of ``min_effect`` at the needed size.
        salt: what the assignment hashes with the user id (default: the name). A new salt
            reshuffles users; keep it to keep them where they are.
    """

    name: str
    arms: Sequence[Arm]
    metric: Metric = "resolution"
    min_effect: float = 0.05
    alpha: float = 0.05
    power: float = 0.8
    salt: str | None = None

    def __post_init__(self) -> None:
        p: list[tuple[str, str]] = []
        if not isinstance(self.name, str) or not self.name.strip() or len(self.name) > 64:
            p.append(("name", f"must be a non-empty label of at most 64 characters, got {self.name!r}"))
        arms = tuple(self.arms) if isinstance(self.arms, (list, tuple)) else ()
        if len(arms) < 2 or not all(isinstance(a, Arm) for a in arms):
            p.append(("arms", "must be two or more Arm(...)"))
        elif len({a.name for a in arms}) != len(arms):
            p.append(("arms", f"arm names must differ, got {[a.name for a in arms]}"))
        if self.metric not in METRICS:
            p.append(("metric", f"must be one of {list(METRICS)}, got {self.metric!r}"))
        for name, lo, hi in (("min_effect", 0.0, 1.0), ("alpha", 0.0, 0.5), ("power", 0.5, 1.0)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not lo < v < hi:
                p.append((name, f"must be a number in ({lo:g}, {hi:g}), got {v!r}"))
        if p:
            raise ValidationError.from_problems(f"Experiment {self.name!r}", p)
        object.__setattr__(self, "arms", arms)

    def assign(self, user_id: str) -> Arm:
        """The arm of ``user_id``: deterministic and sticky (see the module docstring)."""
        salt = self.name if self.salt is None else self.salt
        h = hashlib.sha256(f"{salt}\x00{user_id}".encode()).digest()
        u = int.from_bytes(h[:8], "big") / 2.0 ** 64
        total = sum(a.weight for a in self.arms)
        acc = 0.0
        for a in self.arms:
            acc += a.weight / total
            if u < acc:
                return a
        return self.arms[-1]


def check_experiments(experiments: Sequence[Experiment]) -> list[tuple[str, str]]:
    """Problems of a store's experiments, as ``(field, message)``: every item an :class:`Experiment`,
    names unique, and no two experiments setting the same thing (a recall setting, or the policy),
    which would make their arms' effects inseparable."""
    p: list[tuple[str, str]] = []
    if not all(isinstance(e, Experiment) for e in experiments):
        return [("experiments", "must be a sequence of Experiment(...)")]
    names = [e.name for e in experiments]
    if len(set(names)) != len(names):
        p.append(("experiments", f"experiment names must differ, got {names}"))
    owner: dict[str, str] = {}
    for e in experiments:
        sets = {k for a in e.arms for k in a.recall} | ({"policy"} if any(a.policy for a in e.arms) else set())
        for k in sorted(sets):
            if k in owner and owner[k] != e.name:
                p.append(("experiments", f"{owner[k]!r} and {e.name!r} both set {k}: run them one after the "
                                         "other, or as one experiment with more arms"))
            owner.setdefault(k, e.name)
    return p
