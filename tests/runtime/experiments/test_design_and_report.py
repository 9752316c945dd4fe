"""The statistics of ``memir ab report`` (seed 000 §5.3.3; issue 27 item 5), on simulated
populations: a sticky, weighted assignment; the report finds a truly better arm at the size it
says it needs; and two identical arms are "found" different no more often than the stated
false-positive rate."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from runtime.errors import ValidationError
from runtime.experiments import Arm, Experiment, compare_arms, needed_per_arm
from runtime.retention import RetentionPolicy


def _rows(rng: np.random.Generator, rates: dict[str, float], users: int, tasks: int = 1) -> list[tuple]:
    """Aggregated rows ``(user, arm, kind, count, sum)``: ``users`` per arm, each with ``tasks``
    tasks resolved with the arm's probability."""
    return [(f"{arm}-{i}", arm, "resolved", tasks, float((rng.random(tasks) < p).sum()))
            for arm, p in rates.items() for i in range(users)]


def test_assignment_is_deterministic_sticky_and_weighted() -> None:
    e = Experiment("exp", [Arm("a"), Arm("b", weight=3)])
    users = [f"user-{i}" for i in range(20_000)]
    first = [e.assign(u).name for u in users]
    again = Experiment("exp", [Arm("a"), Arm("b", weight=3)])                   # another process, same declaration
    assert [again.assign(u).name for u in users] == first
    share = Counter(first)["b"] / len(users)
    assert share == pytest.approx(0.75, abs=0.015)
    resalted = Experiment("exp", [Arm("a"), Arm("b", weight=3)], salt="round-2")
    moved = sum(x != resalted.assign(u).name for u, x in zip(users, first)) / len(users)
    assert 0.3 < moved < 0.45                                                    # a new salt reshuffles (≈ 2·¼·¾)
    other = Experiment("other", [Arm("a"), Arm("b", weight=3)])                  # independent of other experiments
    both = Counter((x, other.assign(u).name) for u, x in zip(users, first))
    assert both[("b", "b")] / len(users) == pytest.approx(0.75 * 0.75, abs=0.015)


@pytest.mark.parametrize("kw,field", [
    ({"arms": [Arm("a")]}, "arms"),
    ({"arms": [Arm("a"), Arm("a")]}, "arms"),
    ({"metric": "clicks"}, "metric"),
    ({"alpha": 0.7}, "alpha"),
    ({"min_effect": 0}, "min_effect"),
    ({"power": 1.0}, "power"),
])
def test_a_bad_experiment_is_refused_naming_the_field(kw: dict, field: str) -> None:
    base: dict = {"name": "e", "arms": [Arm("a"), Arm("b")]}
    with pytest.raises(ValidationError) as ei:
        Experiment(**{**base, **kw})
    assert ei.value.field == field


@pytest.mark.parametrize("kw,field", [
    ({"recall": {"rerank": "no"}}, "recall['rerank']"),
    ({"recall": {"temperature": 1}}, "recall['temperature']"),
    ({"recall": {"session_mix": 1.0}}, "recall['session_mix']"),
    ({"weight": 0}, "weight"),
    ({"policy": {"capacity": 3}}, "policy"),
])
def test_a_bad_arm_is_refused_naming_the_field(kw: dict, field: str) -> None:
    with pytest.raises(ValidationError) as ei:
        Arm("a", **kw)
    assert ei.value.field == field
    assert Arm("ok", recall={"rerank": False, "candidates": 20}, policy=RetentionPolicy(capacity=5)).recall["rerank"] is False


def test_the_report_finds_a_better_arm_at_the_size_it_says_it_needs() -> None:
    """Resolution 0.50 (control) against 0.60. A pilot of 60 users per arm says how many are needed
    to detect ±0.10 at power 0.8; at that size the report finds the better arm in ≥ 70% of 120
    simulated experiments (0.8 expected; 0.7 leaves room for the pilot's own noise)."""
    rng = np.random.default_rng(7)
    rates = {"control": 0.5, "better": 0.6}
    pilot = compare_arms(_rows(rng, rates, 60), experiment="e", arms=["control", "better"], min_effect=0.10, n_boot=500)
    assert not pilot.enough_data
    assert "needed" in pilot.verdict or "fewer than" in pilot.verdict
    n = pilot.needed_per_arm
    assert n == pytest.approx(needed_per_arm(0.2475, 0.10, 0.05, 0.8), rel=0.15)  # ≈ 389 for p(1-p) ≈ 0.2475
    found = 0
    for _ in range(120):
        r = compare_arms(_rows(rng, rates, n), experiment="e", arms=["control", "better"], min_effect=0.10, n_boot=400,
                   seed=int(rng.integers(1 << 30)))
        c = r.comparisons[0]
        found += c.significant and c.difference > 0
        assert r.enough_data
    assert found / 120 >= 0.7
    assert "better is better than control on resolution" in r.verdict or not c.significant


def test_two_identical_arms_are_found_different_at_most_at_the_stated_rate() -> None:
    """400 simulated experiments, two arms at resolution 0.5, 300 users each: the share "found"
    different stays within the stated 5% (+ three standard errors of the simulation: 0.083)."""
    rng = np.random.default_rng(11)
    false = 0
    for _ in range(400):
        r = compare_arms(_rows(rng, {"a": 0.5, "b": 0.5}, 300, tasks=3), experiment="e", arms=["a", "b"], n_boot=400,
                   seed=int(rng.integers(1 << 30)))
        false += r.comparisons[0].significant
    assert false / 400 <= 0.05 + 3 * (0.05 * 0.95 / 400) ** 0.5


def test_three_arms_split_the_false_positive_rate() -> None:
    rng = np.random.default_rng(3)
    false = 0
    for _ in range(200):
        r = compare_arms(_rows(rng, {"a": 0.4, "b": 0.4, "c": 0.4}, 200), experiment="e", arms=["a", "b", "c"], n_boot=400,
                   seed=int(rng.integers(1 << 30)))
        assert [c.alpha for c in r.comparisons] == [0.025, 0.025]
        false += any(c.significant for c in r.comparisons)
    assert false / 200 <= 0.05 + 3 * (0.05 * 0.95 / 200) ** 0.5


def test_metrics_and_the_plain_verdicts() -> None:
    rows = [("u1", "a", "useful", 3, 0.0), ("u1", "a", "wrong", 1, 0.0), ("u2", "a", "wrong", 2, 0.0),
            ("u3", "b", "useful", 1, 0.0), ("u3", "b", "satisfaction", 2, 1.5), ("u4", "b", "resolved", 2, 1.0)]
    r = compare_arms(rows, experiment="e", arms=["a", "b"], metric="usefulness", n_boot=200)
    assert [(x.name, x.users, x.events, x.mean) for x in r.arms] == [("a", 2, 6, 0.375), ("b", 1, 1, 1.0)]
    s = compare_arms(rows, experiment="e", arms=["a", "b"], metric="satisfaction", n_boot=200)
    assert [(x.users, x.mean) for x in s.arms] == [(0, None), (1, 0.75)]
    assert s.comparisons[0].difference is None and "no difference detected yet" in s.verdict
    rng = np.random.default_rng(5)
    same = compare_arms(_rows(rng, {"a": 0.5, "b": 0.5}, 3000), experiment="e", arms=["a", "b"], min_effect=0.1, n_boot=500)
    assert same.enough_data and "equivalent" in same.verdict
    with pytest.raises(ValidationError):
        compare_arms(rows, experiment="e", arms=["a"], n_boot=200)
    with pytest.raises(ValidationError):
        compare_arms(rows, experiment="e", metric="clicks", n_boot=200)
