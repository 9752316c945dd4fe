"""Explanations: every reason code on one crafted problem, slacks, the cut, JSON, laziness."""

from __future__ import annotations

import json

import numpy as np
import pytest

from runtime.retention import Quota, Reason, RetentionProblem, solve

# Items (utility): 0 (.9) ⇒ 1 (.05); 2 (.6) and 3 (.58) share quota Q1 (max 1); 2 excludes 6 (.4);
# 5 (.01) is the only member of Q2 (min 1); 7 (.7) ⇒ 8 (−1); 4 (.45) and 9 (.3) are in no rule;
# 10 (.2) must be kept and implies 11 (.1); 12 (.8) must be forgotten and 13 (.9) implies it;
# 14 (−.2). Capacity 7. Optimum: {0, 1, 2, 4, 5, 10, 11}.
U = [0.9, 0.05, 0.6, 0.58, 0.45, 0.01, 0.4, 0.7, -1.0, 0.3, 0.2, 0.1, 0.8, 0.9, -0.2]
EXPECTED = ["above_cut", "required_by_implication", "above_cut", "quota_max", "above_cut", "quota_min",
            "excluded_by", "requires_dropped", "nonpositive_utility", "below_cut", "must_keep",
            "forced_by_implication", "must_forget", "forgotten_by_implication", "nonpositive_utility"]


def _problem() -> RetentionProblem:
    return RetentionProblem(
        utility=U, capacity=7, implies=[(0, 1), (7, 8), (10, 11), (13, 12)], excludes=[(2, 6)],
        must_keep=[10], must_forget=[12], item_ids=[f"m{i}" for i in range(15)],
        quotas=[Quota(members=[2, 3], max=1, name="Q1"), Quota(members=[5], min=1, name="Q2")])


@pytest.mark.parametrize("method", ["exact", "cvxpy", "auto"])
def test_every_reason_code_is_assigned_as_designed(method: str) -> None:
    r = solve(_problem(), method=method)
    assert np.flatnonzero(r.keep).tolist() == [0, 1, 2, 4, 5, 10, 11]
    e = r.explanation
    assert [e.reason(i).value for i in range(15)] == EXPECTED
    causes = {i: e.item(i)["cause"] for i in range(15) if e.item(i)["cause"] is not None}
    assert causes == {1: "m0", 6: "m2", 7: "m8", 11: "m10", 13: "m12"}
    # over_budget needs a token budget; accessed is a promotion on access, not the optimiser's
    assert {c.value for c in Reason} == set(EXPECTED) | {"over_budget", "accessed"}


def test_constraints_report_tight_and_slack() -> None:
    e = solve(_problem()).explanation
    by = {c["name"]: c for c in e.constraints}
    assert by["capacity(K=7)"] == {"name": "capacity(K=7)", "kind": "capacity", "used": 7, "limit": 7,
                                   "slack": 0, "tight": True, "soft": False, "over": 0}
    assert by["Q1"]["count"] == 1 and by["Q1"]["slack_max"] == 0 and by["Q1"]["tight"]
    assert by["Q2"]["slack_min"] == 0 and by["Q2"]["tight"]
    assert by["implies(m0⇒m1)"]["tight"] and not by["implies(m7⇒m8)"]["tight"]
    assert by["excludes(m2,m6)"] == {"name": "excludes(m2,m6)", "kind": "excludes", "slack": 0, "tight": True}


def test_the_cut_and_its_marginal_utility() -> None:
    e = solve(_problem()).explanation
    assert e.cut["worst_kept"] == {"item": "m4", "index": 4, "utility": 0.45}
    assert e.cut["best_dropped"] == {"item": "m9", "index": 9, "utility": 0.3}
    assert e.cut["marginal_utility"] == 0.3
    spare = solve(RetentionProblem(utility=[0.5, -0.1], capacity=5)).explanation
    assert spare.cut["best_dropped"] is None and spare.cut["marginal_utility"] == 0.0
    assert spare.reason(1) is Reason.NONPOSITIVE_UTILITY


def test_budget_reason_and_slack() -> None:
    p = RetentionProblem(utility=[0.9, 0.8, 0.7], weights=[5, 5, 2], budget=8.0)
    r = solve(p)
    assert r.keep.tolist() == [True, False, True]
    e = r.explanation
    assert e.reason(1) is Reason.OVER_BUDGET
    b = e.constraints[0]
    assert (b["kind"], b["used"], b["slack"], b["tight"]) == ("budget", 7.0, 1.0, False)


def test_explanation_is_json_and_carries_the_decision_metadata() -> None:
    r = solve(_problem(), method="greedy")
    d = json.loads(json.dumps(r.explanation.to_dict()))
    assert d["method"] == "greedy" and d["status"] == "greedy_repaired" and d["engine"] == "greedy_repair"
    assert d["objective"] == pytest.approx(r.objective) and d["solve_ms"] > 0
    assert d["upper_bound"] >= d["objective"] and d["n_items"] == 15 and len(d["items"]) == 15
    assert d["items"][10] == {"item": "m10", "index": 10, "kept": True, "reason": "must_keep",
                              "utility": 0.2, "cause": None}
    assert sum(d["counts"].values()) == 15


def test_explanation_is_built_lazily_and_once() -> None:
    r = solve(RetentionProblem(utility=np.linspace(-1, 1, 10_000), capacity=100))
    assert r._explanation is None  # a big greedy decision pays nothing for its explanation until asked
    e = r.explanation
    assert e is r.explanation and e.counts() == {"above_cut": 100, "nonpositive_utility": 5000, "below_cut": 4900}
