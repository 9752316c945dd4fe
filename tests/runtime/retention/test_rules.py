"""Validation, hard rules, infeasibility messages, overflow mode, soft capacity, dependencies."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from runtime.errors import InfeasibleError, MissingDependencyError, SolverError, ValidationError
from runtime.retention import Quota, RetentionProblem, Status, TaskCapacity, solve, violations

METHODS = ("auto", "greedy", "exact", "cvxpy")


# ------------------------------------------------------------------ validation
def test_validation_collects_every_problem_and_names_fields() -> None:
    with pytest.raises(ValidationError) as ei:
        RetentionProblem(utility=[1.0, float("nan")], capacity=-1, must_keep=[5], budget=3.0,
                         implies=[(0, 0, "")], excludes=[(1, 1)], quotas=[Quota(members=[0, 0])],
                         overflow_penalty=-1.0, on_infeasible="ignore")  # type: ignore[arg-type]
    fields = [f for f, _ in ei.value.problems]
    assert fields == ["utility", "capacity", "overflow_penalty", "budget", "must_keep", "implies[0]",
                      "excludes[0]", "quotas[0].members", "on_infeasible"]
    assert ei.value.field == "utility"
    assert "needs weights=" in str(ei.value)


@pytest.mark.parametrize("kw,field", [
    ({"utility": [[1.0, 2.0]]}, "utility"),
    ({"utility": [1.0], "weights": [1.0, 2.0], "budget": 1.0}, "weights"),
    ({"utility": [1.0], "weights": [-1.0], "budget": 1.0}, "weights"),
    ({"utility": [1.0], "capacity": 1.5}, "capacity"),
    ({"utility": [1.0], "capacity": True}, "capacity"),
    ({"utility": [1.0], "overflow_penalty": 1.0}, "overflow_penalty"),
    ({"utility": [1.0, 2.0], "implies": [(0, 2)]}, "implies[0]"),
    ({"utility": [1.0, 2.0], "implies": [(0,)]}, "implies[0]"),
    ({"utility": [1.0, 2.0], "must_forget": {0: ""}}, "must_forget[0]"),
    ({"utility": [1.0, 2.0], "must_keep": "01"}, "must_keep"),
    ({"utility": [1.0, 2.0], "quotas": [Quota(members=[0], min=2, max=1)]}, "quotas[0].max"),
    ({"utility": [1.0, 2.0], "quotas": [Quota(members=[0], min=-1)]}, "quotas[0].min"),
    ({"utility": [1.0, 2.0], "item_ids": ["a", "a"]}, "item_ids"),
    ({"utility": [1.0, 2.0], "item_ids": ["a"]}, "item_ids"),
])
def test_each_bad_field_is_named(kw: dict, field: str) -> None:
    with pytest.raises(ValidationError) as ei:
        RetentionProblem(**kw)
    assert ei.value.field == field


def test_problem_is_normalised_and_immutable() -> None:
    u = np.array([0.5, 0.2, 0.1])
    p = RetentionProblem(utility=u, must_keep={2: "core instruction"}, implies=[(0, 1, "budget⇒deadline")],
                         quotas=[Quota(members=[2, 0], max=1)])
    u[0] = 9.0  # the caller's array is copied
    assert p.utility[0] == 0.5 and not p.utility.flags.writeable
    assert p.must_keep == (2,) and p.implies == ((0, 1),)
    assert p.rule_name("must_keep", 2) == "core instruction"
    assert p.rule_name("implies", 0) == "budget⇒deadline"
    assert p.quotas[0].members == (0, 2) and p.quotas[0].name == "quota[0]"
    with pytest.raises(AttributeError):
        p.capacity = 3  # type: ignore[misc]


def test_bad_method_and_time_limit_are_rejected() -> None:
    p = RetentionProblem(utility=[1.0])
    with pytest.raises(ValidationError, match="method"):
        solve(p, method="fast")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="time_limit_s"):
        solve(p, time_limit_s=0)


# ------------------------------------------------------------------ hard rules and infeasibility
def test_hard_rules_propagate_both_ways() -> None:
    # keep 0 ⇒ keep 1 ⇒ keep 2; forget 5 ⇒ forget 4 (4⇒5) ⇒ forget 3 (3⇒4); 0 excludes 6.
    p = RetentionProblem(utility=[-1.0, -1.0, -1.0, 5.0, 5.0, 5.0, 5.0], must_keep=[0], must_forget=[5],
                         implies=[(0, 1), (1, 2), (3, 4), (4, 5)], excludes=[(0, 6)])
    for m in METHODS:
        r = solve(p, method=m)
        assert r.keep.tolist() == [True, True, True, False, False, False, False], m
        e = r.explanation
        assert [e.reason(i).value for i in range(7)] == [
            "must_keep", "forced_by_implication", "forced_by_implication", "forgotten_by_implication",
            "forgotten_by_implication", "must_forget", "excluded_by"]
        assert e.item(2)["cause"] == "1" and e.item(3)["cause"] == "4" and e.item(6)["cause"] == "0"


def test_implication_chain_into_must_forget_names_the_chain() -> None:
    p = RetentionProblem(utility=[1.0] * 4, must_keep=[0], implies=[(0, 1), (1, 2, "budget⇒deadline")],
                         must_forget={2: "expired TTL"})
    for m in METHODS:
        with pytest.raises(InfeasibleError) as ei:
            solve(p, method=m)
        assert ei.value.conflicts == ["must_keep[item 0]", "implies(0⇒1)", "budget⇒deadline", "expired TTL"]
        assert "must_keep[item 0] → implies(0⇒1) → budget⇒deadline but forgotten via expired TTL" in str(ei.value)


def test_exclusion_between_forced_items_names_both_chains() -> None:
    p = RetentionProblem(utility=[1.0] * 4, must_keep=[0, 3], implies=[(0, 1)], excludes=[(1, 3, "superseded")],
                         item_ids=["a", "b", "c", "d"])
    with pytest.raises(InfeasibleError) as ei:
        solve(p)
    assert set(ei.value.conflicts) == {"must_keep[item a]", "implies(a⇒b)", "superseded", "must_keep[item d]"}
    assert "overflow mode cannot fix" in str(ei.value)
    p2 = RetentionProblem(utility=[1.0] * 4, must_keep=[0, 3], implies=[(0, 1)], excludes=[(1, 3)],
                          on_infeasible="overflow")
    with pytest.raises(InfeasibleError):  # a logical contradiction is not a capacity problem
        solve(p2)


def test_must_keep_and_must_forget_on_the_same_item() -> None:
    with pytest.raises(InfeasibleError) as ei:
        solve(RetentionProblem(utility=[1.0, 1.0], must_keep={0: "user pinned"}, must_forget={0: "user deleted"}))
    assert ei.value.conflicts == ["user pinned", "user deleted"]


@pytest.mark.parametrize("kw,conflicts,remedy", [
    ({"must_keep": [0, 1], "implies": [(1, 2)], "capacity": 2},
     ["capacity(K=2)", "must_keep[item 0]", "must_keep[item 1]", "implies(1⇒2)"], "on_infeasible='overflow'"),
    ({"must_keep": [0, 1], "weights": [5, 5, 1, 1], "budget": 6.0},
     ["budget(B=6)", "must_keep[item 0]", "must_keep[item 1]"], "on_infeasible='overflow'"),
    ({"must_keep": [0, 1], "quotas": [Quota(members=[0, 1, 2], max=1, name="tool results")]},
     ["tool results", "must_keep[item 0]", "must_keep[item 1]"], "on_infeasible='overflow'"),
    ({"must_forget": [0, 1], "quotas": [Quota(members=[0, 1, 2], min=2, name="user facts")]},
     ["user facts", "must_forget[item 0]", "must_forget[item 1]"], "Lower user facts.min"),
    ({"capacity": 1, "quotas": [Quota(members=[0, 1], min=1, name="A"), Quota(members=[2, 3], min=1, name="B")]},
     ["A", "B", "capacity(K=1)"], "on_infeasible='overflow'"),
])
def test_limit_conflicts_name_the_rules(kw: dict, conflicts: list[str], remedy: str) -> None:
    p = RetentionProblem(utility=[1.0] * 4, **kw)
    for m in METHODS:
        with pytest.raises(InfeasibleError) as ei:
            solve(p, method=m)
        assert ei.value.conflicts == conflicts, m
        assert remedy in str(ei.value)  # the message says what to do


# ------------------------------------------------------------------ overflow mode
@pytest.mark.parametrize("kw,keep,overflow", [
    ({"must_keep": [0, 1, 2], "capacity": 2}, [1, 1, 1, 0], {"capacity": 1}),
    ({"must_keep": [0, 1], "quotas": [Quota(members=[0, 1, 2], max=1)]}, [1, 1, 0, 1], {"quota[0]": 1}),
    ({"must_keep": [0, 1], "weights": [5, 5, 1, 1], "budget": 6.0}, [1, 1, 0, 0], {"budget": 4.0}),
    ({"capacity": 1, "quotas": [Quota(members=[0, 1], min=1), Quota(members=[2, 3], min=1)]},
     [0, 1, 0, 1], {"capacity": 1}),
])
def test_overflow_mode_keeps_the_hard_rules_and_reports_the_excess(kw: dict, keep: list[int], overflow: dict) -> None:
    p = RetentionProblem(utility=[0.5, 0.9, 0.4, 0.8], on_infeasible="overflow", **kw)
    for m in METHODS:
        r = solve(p, method=m)
        assert r.keep.astype(int).tolist() == keep, m
        assert r.overflow == overflow, m
        assert violations(p, r.keep, limits=False) == []
        assert r.explanation.to_dict()["overflow"] == overflow


# ------------------------------------------------------------------ soft and task-dependent capacity
def test_soft_capacity_keeps_past_k_only_what_beats_the_penalty() -> None:
    p = RetentionProblem(utility=[0.9, 0.8, 0.5, 0.3], capacity=2, overflow_penalty=0.4)
    for m in METHODS:
        r = solve(p, method=m)
        assert r.keep.tolist() == [True, True, True, False], m
        assert r.objective == pytest.approx(0.9 + 0.8 + 0.5 - 0.4)
        cap = r.explanation.constraints[0]
        assert cap["soft"] and cap["over"] == 1 and cap["slack"] == -1


def test_soft_capacity_with_relational_rules_matches_the_reference() -> None:
    rng = np.random.default_rng(3)
    u = rng.uniform(-0.2, 1.0, 40)
    p = RetentionProblem(utility=u, capacity=8, overflow_penalty=0.5, must_keep=[0, 1],
                         implies=[(2, 3), (4, 5), (5, 6)], excludes=[(7, 8)])
    e, c = solve(p, method="exact"), solve(p, method="cvxpy")
    assert e.objective == pytest.approx(c.objective, abs=1e-9)
    assert int(e.keep.sum()) > 8  # items worth more than the penalty stay past K


def test_task_capacity_grows_with_the_task_and_is_clipped() -> None:
    cap = TaskCapacity(base=10, per_entity=2.0, per_1k_chars=4.0, minimum=5, maximum=30)
    assert cap.resolve() == 10
    assert cap.resolve(entities=3, instruction_chars=500) == 18
    assert cap.resolve(entities=100) == 30
    assert TaskCapacity(base=0, per_utility=1.0, minimum=2).resolve(utility=np.array([0.5, -3.0])) == 2
    with pytest.raises(ValidationError):
        TaskCapacity(minimum=5, maximum=3)


# ------------------------------------------------------------------ time limits, dependencies, imports
def test_time_limited_milp_falls_back_to_greedy_repair(monkeypatch: pytest.MonkeyPatch) -> None:
    import runtime.retention.solver.dispatch as solve_mod

    monkeypatch.setattr(solve_mod, "solve_cvxpy", lambda p, pre, time_limit_s: (None, Status.TIME_LIMIT_GREEDY_FALLBACK))
    p = RetentionProblem(utility=[0.9, 0.1, 0.5, 0.4], capacity=2, implies=[(0, 1)], excludes=[(2, 3)])
    r = solve(p, method="cvxpy")
    assert r.status is Status.TIME_LIMIT_GREEDY_FALLBACK and r.engine == "cvxpy_highs→greedy_repair"
    assert violations(p, r.keep) == [] and r.upper_bound is not None


def test_real_time_limit_is_passed_to_highs() -> None:
    # A tiny limit on a real model: HiGHS either finishes or stops; every outcome must be rule-safe.
    rng = np.random.default_rng(0)
    n = 300
    p = RetentionProblem(utility=rng.uniform(0, 1, n), weights=rng.integers(20, 400, n), budget=9000.0,
                         capacity=60, implies=[(i, i + 1) for i in range(0, n - 1, 7)])
    r = solve(p, method="cvxpy", time_limit_s=1e-3)
    assert r.status in (Status.OPTIMAL, Status.TIME_LIMIT_GREEDY_FALLBACK)
    assert violations(p, r.keep) == []


def test_missing_solver_dependencies_name_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    p = RetentionProblem(utility=[0.5, 0.4, 0.3], capacity=1, quotas=[Quota(members=[0, 1], min=1)],
                         implies=[(2, 0)])
    monkeypatch.setitem(sys.modules, "cvxpy", None)
    with pytest.raises(MissingDependencyError, match=r"pip install 'memir-runtime\[solver\]'"):
        solve(p, method="cvxpy")
    monkeypatch.setitem(sys.modules, "highspy", None)
    with pytest.raises(MissingDependencyError, match=r"pip install 'memir-runtime\[solver\]'"):
        solve(p, method="exact")
    # Count capacity + implications needs neither: the DP core is pure numpy.
    r = solve(RetentionProblem(utility=[0.5, 0.4, 0.3], capacity=2, implies=[(2, 0)]), method="exact")
    assert r.keep.tolist() == [True, True, False]


def test_importing_retention_loads_no_solver_or_training_stack() -> None:
    code = ("import sys, runtime.retention as r; "
            "print(sorted(m for m in ('cvxpy', 'highspy', 'torch', 'lightning', 'datasets', 'scipy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_solver_answer_that_breaks_a_rule_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    import runtime.retention.solver.dispatch as solve_mod

    monkeypatch.setattr(solve_mod, "solve_exact",
                        lambda p, pre, time_limit_s: (np.ones(p.n, bool), Status.OPTIMAL, "broken"))
    with pytest.raises(SolverError, match="bug"):
        solve(RetentionProblem(utility=[0.5, 0.4], capacity=1, implies=[(0, 1)]), method="exact")


def test_bench_script_has_help_and_a_feasible_generator() -> None:
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    out = subprocess.run([sys.executable, str(root / "bench" / "bench_retention.py"), "--help"],
                         capture_output=True, text=True, check=True)
    assert "--quick" in out.stdout and "N = 100, 500, 2,000, 10,000" in out.stdout
    sys.path.insert(0, str(root / "bench"))
    try:
        from bench_retention import bench_problem, scale_problem
    finally:
        sys.path.remove(str(root / "bench"))
    p = bench_problem(1000, seed=3)
    assert (p.capacity, len(p.must_keep), len(p.must_forget), len(p.implies)) == (200, 20, 20, 100)
    r = solve(p)
    assert r.status is Status.OPTIMAL and violations(p, r.keep) == []
    for relational in (False, True):  # the scale section's shape, small: feasible, 1% rules
        p = scale_problem(5000, relational=relational, seed=3)
        assert (p.capacity, len(p.must_keep), len(p.must_forget)) == (1000, 50, 50)
        assert bool(p.implies) == bool(p.excludes) == relational
        r = solve(p)
        assert r.status is Status.OPTIMAL and violations(p, r.keep) == []


def test_cvxpy_model_is_built_once_per_structure_and_is_dpp() -> None:
    from runtime.retention.solver import milp_cvxpy

    milp_cvxpy.clear_cache()
    kw = {"capacity": 2, "implies": [(0, 1)], "quotas": [Quota(members=[1, 2, 3], max=2)]}
    a = solve(RetentionProblem(utility=[0.9, 0.1, 0.5, 0.4], **kw), method="cvxpy")
    assert len(milp_cvxpy._CACHE) == 1
    (prob, _, _), = milp_cvxpy._CACHE.values()
    assert prob.is_dpp() and prob.is_mixed_integer()
    b = solve(RetentionProblem(utility=[0.1, 0.1, 0.5, 0.4], **kw), method="cvxpy")  # new scores only
    assert len(milp_cvxpy._CACHE) == 1 and next(iter(milp_cvxpy._CACHE.values()))[0] is prob
    assert a.keep.tolist() == [True, True, False, False] and b.keep.tolist() == [False, False, True, True]
