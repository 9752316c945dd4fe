"""The reference MILP in cvxpy: the whole problem as written, solved by HiGHS with a time limit.

Built the way cvxpy's tutorials recommend: the model for one rule *structure* is built once and
cached; per-call data (utilities, capacity, weights, budget, penalty) are ``cp.Parameter``s, so
re-solving the same structure with new scores skips canonicalisation (DPP). The solver is named
explicitly with a time limit and ``mip_rel_gap=0`` (a reference must be exact); ``problem.status``
is checked before ``x.value`` is read; the rounded answer is re-checked against every rule by the
caller. This is deliberately the plain formulation — no presolve reductions — so it is an
independent referee for the exact solver and the baseline in ``bench/bench_retention.py``.
"""

from __future__ import annotations

import warnings
from collections import OrderedDict
from typing import Any

import numpy as np

from ...errors import MissingDependencyError, SolverError
from .hard import Presolve
from .problem import RetentionProblem
from .reasons import Status

__all__ = ["clear_cache", "solve_cvxpy"]

_CACHE_SIZE = 8
_CACHE: OrderedDict[tuple[Any, ...], tuple[Any, Any, dict[str, Any]]] = OrderedDict()


def clear_cache() -> None:
    """Forget every built model (e.g. in benchmarks, to time a cold build)."""
    _CACHE.clear()


def _import_cvxpy() -> Any:
    try:
        import cvxpy as cp
    except ImportError as e:
        raise MissingDependencyError(
            "method='cvxpy' needs cvxpy and HiGHS; run: pip install 'memir-runtime[solver]' "
            "(or use method='exact', which needs neither for most problems)") from e
    if "HIGHS" not in cp.installed_solvers():
        raise MissingDependencyError("cvxpy is installed but HiGHS is not; run: pip install 'memir-runtime[solver]'")
    return cp


def _structure(p: RetentionProblem, pre: Presolve) -> tuple[Any, ...]:
    mode = "none" if pre.capacity is None else ("soft" if pre.penalty is not None else "hard")
    quotas = tuple((q.members, int(pre.quota_lo[k]), int(pre.quota_hi[k])) for k, q in enumerate(p.quotas))
    return (p.n, mode, pre.budget is not None, p.must_keep, p.must_forget, p.implies, p.excludes, quotas)


def _build(cp: Any, key: tuple[Any, ...]) -> tuple[Any, Any, dict[str, Any]]:
    n, mode, has_budget, must_keep, must_forget, implies, excludes, quotas = key
    x = cp.Variable(n, boolean=True)
    par: dict[str, Any] = {"u": cp.Parameter(n)}
    obj = par["u"] @ x
    cons = []
    if mode == "hard":
        par["K"] = cp.Parameter(nonneg=True)
        cons.append(cp.sum(x) <= par["K"])
    elif mode == "soft":
        par["K"] = cp.Parameter()
        par["lam"] = cp.Parameter(nonneg=True)
        over = cp.Variable(nonneg=True)
        cons.append(cp.sum(x) - over <= par["K"])
        obj = obj - par["lam"] * over
    if has_budget:
        par["w"] = cp.Parameter(n, nonneg=True)
        par["B"] = cp.Parameter(nonneg=True)
        cons.append(par["w"] @ x <= par["B"])
    if must_keep:
        cons.append(x[list(must_keep)] == 1)
    if must_forget:
        cons.append(x[list(must_forget)] == 0)
    if implies:
        a, b = (list(v) for v in zip(*implies))
        cons.append(x[a] <= x[b])
    if excludes:
        a, b = (list(v) for v in zip(*excludes))
        cons.append(x[a] + x[b] <= 1)
    for members, lo, hi in quotas:
        s = cp.sum(x[list(members)]) if members else 0
        if lo > 0:
            cons.append(s >= lo)
        if hi >= 0:
            cons.append(s <= hi)
    prob = cp.Problem(cp.Maximize(obj), cons)
    return prob, x, par


def solve_cvxpy(p: RetentionProblem, pre: Presolve, *, time_limit_s: float = 30.0,
                ) -> tuple[np.ndarray | None, Status | None]:
    """Solve the full MILP with cvxpy + HiGHS.

    Returns:
        ``(keep, status)``; ``keep`` None with status None means infeasible, with status
        ``TIME_LIMIT_GREEDY_FALLBACK`` that the time limit passed (cvxpy returns no incumbent then).

    Raises:
        MissingDependencyError: cvxpy or HiGHS is not installed.
        SolverError: the solver failed for another reason.
    """
    cp = _import_cvxpy()
    if p.n == 0:  # cvxpy cannot build a zero-length variable; nothing to decide
        return np.zeros(0, bool), Status.OPTIMAL
    key = _structure(p, pre)
    if key in _CACHE:
        _CACHE.move_to_end(key)
        prob, x, par = _CACHE[key]
    else:
        prob, x, par = _CACHE[key] = _build(cp, key)
        if len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    par["u"].value = np.asarray(p.utility, np.float64)
    if "K" in par:
        par["K"].value = float(pre.capacity)  # type: ignore[arg-type]
    if "lam" in par:
        par["lam"].value = float(pre.penalty)  # type: ignore[arg-type]
    if "w" in par:
        par["w"].value = np.asarray(p.weights, np.float64)
        par["B"].value = float(pre.budget)  # type: ignore[arg-type]
    try:
        with warnings.catch_warnings():  # "solution may be inaccurate" on a time limit: handled below
            warnings.simplefilter("ignore", UserWarning)
            prob.solve(solver=cp.HIGHS, time_limit=float(time_limit_s), mip_rel_gap=0.0)
    except (cp.error.SolverError, ValueError) as e:  # ValueError: cvxpy could not unpack HiGHS's answer
        raise SolverError(f"cvxpy/HiGHS failed on the retention MILP: {e}. Try method='exact'.") from e
    if prob.status == cp.OPTIMAL:
        if x.value is None:
            raise SolverError("cvxpy reported optimal but returned no values; try method='exact'")
        return np.asarray(x.value) > 0.5, Status.OPTIMAL
    if prob.status in (cp.INFEASIBLE, cp.INFEASIBLE_INACCURATE):
        return None, None
    if prob.status == cp.USER_LIMIT:
        return None, Status.TIME_LIMIT_GREEDY_FALLBACK
    raise SolverError(f"cvxpy/HiGHS ended with status {prob.status!r} on the retention MILP; try method='exact'")
