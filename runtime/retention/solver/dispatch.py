"""``solve``: hard rules first, then the requested method, then an independent re-check.

Method choice (``method=``):

- ``"auto"`` (default): greedy closed form when it is provably optimal (only a count capacity is
  left after the hard rules), else the exact solver. Always optimal.
- ``"greedy"``: closed form where exact; otherwise greedy with rule repair (status
  ``greedy_repaired``, with ``upper_bound``/``gap_bound``; ``compare_exact=True`` also computes the
  exact gap). If greedy cannot meet a quota minimum, the exact solver answers instead.
- ``"exact"``: decomposition + DP, or HiGHS on the reduced problem (see :mod:`.exact`).
- ``"cvxpy"``: the reference MILP (see :mod:`.milp_cvxpy`).

A MILP that hits ``time_limit_s`` returns its checked incumbent, or the greedy-repair answer when
it has none (the status says which).
"""

from __future__ import annotations

import time
from typing import Literal

import numpy as np

from ...errors import SolverError, ValidationError
from .check import objective, violations
from .exact import solve_exact
from .explain import RetentionResult
from .greedy import closed_form, greedy_repair, upper_bound
from .hard import Presolve, presolve, solver_infeasible_error
from .milp_cvxpy import solve_cvxpy
from .problem import RetentionProblem
from .reasons import Status

__all__ = ["Method", "solve"]

Method = Literal["auto", "greedy", "exact", "cvxpy"]
_METHODS = ("auto", "greedy", "exact", "cvxpy")


def solve(problem: RetentionProblem, method: Method = "auto", *, time_limit_s: float = 30.0,
          compare_exact: bool = False) -> RetentionResult:
    """Decide which items to keep.

    Args:
        problem: the validated problem.
        method: ``"auto"`` | ``"greedy"`` | ``"exact"`` | ``"cvxpy"`` (see the module docstring).
        time_limit_s: wall-clock limit for a MILP solver (HiGHS) in seconds.
        compare_exact: for a non-optimal greedy answer, also solve exactly and report ``gap``.

    Returns:
        A :class:`RetentionResult`; ``keep`` satisfies every hard rule and limit (except limits
        reported in ``overflow`` when ``problem.on_infeasible == "overflow"``).

    Raises:
        InfeasibleError: the rules cannot all hold; ``.conflicts`` names them.
        MissingDependencyError: the chosen path needs cvxpy/highspy and it is not installed.
        SolverError: a solver failed for a reason other than infeasibility.

    Example:
        >>> from runtime.retention import RetentionProblem, solve
        >>> r = solve(RetentionProblem(utility=[0.9, 0.1, 0.5], capacity=2, implies=[(0, 1)]))
        >>> r.keep.tolist(), r.method, r.status.value
        ([True, True, False], 'exact', 'optimal')
    """
    if method not in _METHODS:
        raise ValidationError(f"method must be one of {_METHODS}, got {method!r}", field="method")
    if not (isinstance(time_limit_s, (int, float)) and time_limit_s > 0):
        raise ValidationError(f"time_limit_s must be a number > 0, got {time_limit_s!r}", field="time_limit_s")
    t0 = time.perf_counter()
    pre = presolve(problem)
    keep, status, engine, used = _run(problem, pre, method, time_limit_s)
    overflow = dict(pre.overflow)
    if keep is None and problem.on_infeasible == "overflow" and pre.capacity is not None and pre.penalty is None:
        # Only quota minimums can make the solver fail; exceed the capacity as little as possible
        # by pricing each extra slot above any utility difference (lexicographic: overflow first).
        big = 1.0 + float(np.abs(problem.utility).sum())
        soft = presolve(problem, penalty=big)
        keep, status, engine, used = _run(problem, soft, "exact" if method == "greedy" else method, time_limit_s)
        if keep is not None:
            over = int(keep.sum()) - problem.capacity  # type: ignore[operator]
            if over > 0:
                overflow["capacity"] = over
            pre = soft
    if keep is None:
        raise solver_infeasible_error(problem, pre)
    _verify(problem, pre, keep, engine)
    obj = objective(problem, keep) if pre.penalty is None or problem.overflow_penalty is not None \
        else float(problem.utility[keep].sum())
    bound = gap = None
    if status is not Status.OPTIMAL:
        bound = upper_bound(problem, pre)
        if compare_exact:
            ek, _, _ = solve_exact(problem, pre, time_limit_s=time_limit_s)
            gap = None if ek is None else max(0.0, objective(problem, ek) - obj)
    ms = (time.perf_counter() - t0) * 1000.0
    return RetentionResult(keep=keep, objective=obj, method=used, status=status, engine=engine,
                           solve_ms=ms, overflow=overflow, upper_bound=bound, gap=gap,
                           _problem=problem, _pre=pre)


def _run(p: RetentionProblem, pre: Presolve, method: str, time_limit_s: float,
         ) -> tuple[np.ndarray | None, Status, str, str]:
    """Dispatch; returns ``(keep or None if infeasible, status, engine, method actually used)``."""
    if not pre.relational and method in ("auto", "greedy"):
        return closed_form(p, pre), Status.OPTIMAL, "closed_form", "greedy"
    if method == "greedy":
        keep = greedy_repair(p, pre)
        if keep is not None:
            return keep, Status.GREEDY_REPAIRED, "greedy_repair", "greedy"
        ek, es, eng = solve_exact(p, pre, time_limit_s=time_limit_s)
        return _fallback(p, pre, ek, es, f"exact_fallback:{eng}", "greedy")
    if method == "cvxpy":
        ck, cs = solve_cvxpy(p, pre, time_limit_s=time_limit_s)
        return _fallback(p, pre, ck, cs, "cvxpy_highs", "cvxpy")
    ek, es, eng = solve_exact(p, pre, time_limit_s=time_limit_s)
    return _fallback(p, pre, ek, es, eng, "exact")


def _fallback(p: RetentionProblem, pre: Presolve, keep: np.ndarray | None, status: Status | None,
              engine: str, method: str) -> tuple[np.ndarray | None, Status, str, str]:
    """Turn a time-limited MILP without an answer into the greedy-repair answer."""
    if keep is not None:
        return keep, status or Status.OPTIMAL, engine, method
    if status is Status.TIME_LIMIT_GREEDY_FALLBACK:
        gk = greedy_repair(p, pre)
        if gk is None:
            raise SolverError(f"{method} hit its time limit and greedy repair could not meet the quota "
                              "minimums; raise time_limit_s")
        return gk, status, f"{engine}→greedy_repair", method
    return None, Status.OPTIMAL, engine, method  # infeasible


def _verify(p: RetentionProblem, pre: Presolve, keep: np.ndarray, engine: str) -> None:
    """Re-check the answer against every rule and the effective limits; a failure is a bug."""
    bad = violations(p, keep, limits=False)
    if pre.capacity is not None and pre.penalty is None and int(keep.sum()) > pre.capacity:
        bad.append(f"capacity(K={pre.capacity})")
    if pre.budget is not None and float(p.weights[keep].sum()) > pre.budget + 1e-9 * max(1.0, pre.budget):
        bad.append(f"budget(B={pre.budget:g})")
    for k, q in enumerate(p.quotas):
        if pre.quota_hi[k] >= 0 and int(keep[list(q.members)].sum()) > pre.quota_hi[k]:
            bad.append(q.name)  # type: ignore[arg-type]
    if bad:
        raise SolverError(f"the {engine} answer violates {bad[:5]} — this is a bug in memir's retention "
                          "solver; please report it with the problem (method='cvxpy' is the reference)")
