"""The analysis behind ``memir ab report``: per-arm metrics, bootstrap confidence intervals, the
sample size an experiment needs, and a plain verdict.

The unit is the user (users are what is randomised): each user contributes one value of the metric
(their resolution rate, mean satisfaction or share of useful recalls), and intervals come from
resampling users within each arm (percentile bootstrap). Each non-control arm is compared with the
control at ``alpha / (arms - 1)`` (Bonferroni), so the chance of any false "finding" stays at
``alpha``. The size needed per arm is the two-sample normal approximation
``2 (z_{1-a/2} + z_{power})² s² / min_effect²`` with ``s²`` the pooled per-user variance.

Read the verdict once, at the size the report asks for: looking again and again and stopping at the
first "better" raises the false-positive rate above ``alpha``.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from statistics import NormalDist

import numpy as np
from pydantic import BaseModel, ConfigDict

from ..errors import ValidationError
from .design import METRICS

__all__ = ["ArmResult", "Comparison", "ExperimentReport", "compare_arms", "needed_per_arm", "user_values"]

_KINDS = {"resolution": ("resolved",), "satisfaction": ("satisfaction",), "usefulness": ("useful", "wrong")}


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ArmResult(_Model):
    """One arm: users with an outcome, their events, the metric's mean over users and its CI."""

    name: str
    users: int
    events: int
    mean: float | None
    ci_low: float | None
    ci_high: float | None


class Comparison(_Model):
    """An arm against the control: the difference of means (arm − control), its CI at the
    per-comparison level ``1 - alpha``, and whether the CI excludes 0."""

    arm: str
    control: str
    difference: float | None
    ci_low: float | None
    ci_high: float | None
    alpha: float
    significant: bool


class ExperimentReport(_Model):
    """What ``memir ab report`` prints (``--json``: this, as JSON)."""

    experiment: str
    metric: str
    control: str
    arms: list[ArmResult]
    comparisons: list[Comparison]
    min_effect: float
    alpha: float
    power: float
    needed_per_arm: int
    enough_data: bool
    n_boot: int
    verdict: str


def user_values(rows: Iterable[tuple[str, str, str, int, float]], metric: str) -> dict[str, dict[str, tuple[float, int]]]:
    """Per arm, per user: ``(metric value, events)`` from aggregated event rows
    ``(user_id, arm, kind, count, sum of values)``. Users with no event of the metric are left out."""
    if metric not in METRICS:
        raise ValidationError(f"metric must be one of {list(METRICS)}, got {metric!r}", field="metric")
    kinds = _KINDS[metric]
    acc: dict[tuple[str, str], dict[str, list[float]]] = defaultdict(lambda: defaultdict(lambda: [0.0, 0.0]))
    for user, arm, kind, n, total in rows:
        if kind in kinds:
            a = acc[(arm, user)][kind]
            a[0] += int(n)
            a[1] += float(total or 0.0)
    out: dict[str, dict[str, tuple[float, int]]] = defaultdict(dict)
    for (arm, user), by in acc.items():
        if metric == "usefulness":
            good, bad = by["useful"][0], by["wrong"][0]
            if good + bad:
                out[arm][user] = (float(good / (good + bad)), int(good + bad))
        else:
            count, total_value = by[kinds[0]]
            if count:
                out[arm][user] = (total_value / count, int(count))
    return dict(out)


def needed_per_arm(variance: float, min_effect: float, alpha: float, power: float) -> int:
    """Users per arm to detect a difference of ``min_effect`` with two-sided level ``alpha`` and
    the given ``power`` (two-sample normal approximation)."""
    z = NormalDist().inv_cdf
    return max(2, math.ceil(2.0 * (z(1 - alpha / 2) + z(power)) ** 2 * variance / min_effect ** 2))


def _boot_means(x: np.ndarray, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    out = np.empty(n_boot)
    step = max(1, 4_000_000 // max(len(x), 1))  # resample in blocks of ~4M draws
    for s in range(0, n_boot, step):
        b = min(step, n_boot - s)
        out[s:s + b] = x[rng.integers(0, len(x), size=(b, len(x)))].mean(axis=1)
    return out


def compare_arms(rows: Iterable[tuple[str, str, str, int, float]], *, experiment: str, arms: Sequence[str] | None = None,
           metric: str = "resolution", min_effect: float = 0.05, alpha: float = 0.05, power: float = 0.8,
           n_boot: int = 2000, seed: int = 0) -> ExperimentReport:
    """The report of one experiment from aggregated event rows ``(user_id, arm, kind, count, sum)``.

    Args:
        arms: the arms in order, the control first (default: the arms seen, sorted).
        metric, min_effect, alpha, power: as in :class:`~runtime.experiments.Experiment`.
        n_boot: bootstrap resamples; seed: their generator's seed (the report is reproducible).
    """
    per = user_values(rows, metric)
    names = list(arms) if arms else sorted(per)
    if len(names) < 2:
        raise ValidationError(f"experiment {experiment!r} has outcomes in {len(names)} arm(s) {names}: a report "
                              "compares two or more (record outcomes with scope.feedback)", field="experiment")
    rng = np.random.default_rng(seed)
    vals = {a: np.array([v for v, _ in per.get(a, {}).values()], dtype=np.float64) for a in names}
    boots: dict[str, np.ndarray] = {}
    alpha_c = alpha / (len(names) - 1)
    arm_results = []
    for a in names:
        x = vals[a]
        events = sum(n for _, n in per.get(a, {}).values())
        if len(x):
            boots[a] = _boot_means(x, n_boot, rng)
            lo, hi = np.quantile(boots[a], [alpha / 2, 1 - alpha / 2])
            arm_results.append(ArmResult(name=a, users=len(x), events=events, mean=float(x.mean()),
                                         ci_low=float(lo), ci_high=float(hi)))
        else:
            arm_results.append(ArmResult(name=a, users=0, events=0, mean=None, ci_low=None, ci_high=None))
    control = names[0]
    comparisons = []
    for a in names[1:]:
        if a in boots and control in boots:
            d = boots[a] - boots[control]
            lo, hi = np.quantile(d, [alpha_c / 2, 1 - alpha_c / 2])
            comparisons.append(Comparison(arm=a, control=control, difference=float(vals[a].mean() - vals[control].mean()),
                                          ci_low=float(lo), ci_high=float(hi), alpha=alpha_c,
                                          significant=bool(lo > 0 or hi < 0)))
        else:
            comparisons.append(Comparison(arm=a, control=control, difference=None, ci_low=None, ci_high=None,
                                          alpha=alpha_c, significant=False))
    pooled = [vals[a] - vals[a].mean() for a in names if len(vals[a]) > 1]
    dof = sum(len(x) - 1 for x in pooled)
    var = float(sum((x ** 2).sum() for x in pooled) / dof) if dof > 0 else 0.25
    needed = needed_per_arm(max(var, 1e-12), min_effect, alpha_c, power)
    smallest = min(r.users for r in arm_results)
    enough = smallest >= needed
    return ExperimentReport(experiment=experiment, metric=metric, control=control, arms=arm_results,
                            comparisons=comparisons, min_effect=min_effect, alpha=alpha, power=power,
                            needed_per_arm=needed, enough_data=enough, n_boot=n_boot,
                            verdict=_verdict(comparisons, metric, smallest, needed, min_effect, alpha))


def _verdict(comparisons: Sequence[Comparison], metric: str, smallest: int, needed: int, min_effect: float,
             alpha: float) -> str:
    found = [c for c in comparisons if c.significant]
    if found:
        parts = []
        for c in found:
            word = "better" if (c.difference or 0) > 0 else "worse"
            parts.append(f"{c.arm} is {word} than {c.control} on {metric}: {c.difference:+.3f} "
                         f"({1 - c.alpha:.1%} CI [{c.ci_low:+.3f}, {c.ci_high:+.3f}])")
        tail = "" if smallest >= needed else f" — with {smallest} users in the smallest arm, fewer than the {needed} planned"
        return "; ".join(parts) + tail
    if smallest < needed:
        return (f"no difference detected yet: {smallest} users in the smallest arm; {needed} per arm are needed to "
                f"detect a difference of ±{min_effect:g} in {metric} (at a false-positive rate of {alpha:g})")
    within = all(c.ci_low is not None and c.ci_high is not None and -min_effect < c.ci_low and c.ci_high < min_effect
                 for c in comparisons)
    return (f"no difference in {metric}: every interval includes 0"
            + (f" and lies within ±{min_effect:g} — the arms are equivalent for practical purposes" if within else
               f"; a difference smaller than ±{min_effect:g} cannot be ruled out"))
