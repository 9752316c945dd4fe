"""Independent checks of an answer: which rules a keep-vector breaks, and what it is worth.

Written straight from the problem statement (no presolve), so solvers and tests can use it as the
referee: every solver re-checks its rounded answer here before returning it.
"""

from __future__ import annotations

import numpy as np

from .problem import RetentionProblem

__all__ = ["objective", "violations"]

_TOL = 1e-9


def violations(p: RetentionProblem, keep: np.ndarray, *, limits: bool = True,
               capacity: int | None = None, budget: float | None = None) -> list[str]:
    """Names of the rules ``keep`` violates (empty list = feasible).

    Args:
        p: the problem.
        keep: bool array, one per item.
        limits: also check capacity, budget and quota maximums (turn off to check only the logical
            rules, e.g. for an overflow-mode answer that exceeds a limit on purpose).
        capacity, budget: override the limits to check against (e.g. the raised overflow limits).
    """
    x = np.asarray(keep, bool)
    if x.shape != (p.n,):
        return [f"keep has shape {x.shape}, expected ({p.n},)"]
    out: list[str] = []
    out += [p.rule_name("must_keep", int(i)) for i in p.arr("keep") if not x[i]]
    out += [p.rule_name("must_forget", int(i)) for i in p.arr("forget") if x[i]]
    imp, exc = p.arr("imp"), p.arr("exc")
    if len(imp):
        out += [p.rule_name("implies", int(r)) for r in np.flatnonzero(x[imp[:, 0]] & ~x[imp[:, 1]])]
    if len(exc):
        out += [p.rule_name("excludes", int(r)) for r in np.flatnonzero(x[exc[:, 0]] & x[exc[:, 1]])]
    for k, q in enumerate(p.quotas):
        c = int(x[list(q.members)].sum()) if q.members else 0
        if c < q.min or (limits and q.max is not None and c > q.max):
            out.append(p.rule_name("quota", k))
    if limits:
        cap = capacity if capacity is not None else p.capacity
        if cap is not None and p.overflow_penalty is None and int(x.sum()) > cap:
            out.append(f"capacity(K={cap})")
        b = budget if budget is not None else p.budget
        if b is not None and float(p.weights[x].sum()) > b + _TOL * max(1.0, abs(b)):
            out.append(f"budget(B={b:g})")
    return out


def objective(p: RetentionProblem, keep: np.ndarray) -> float:
    """``Σ u·x`` minus the soft-capacity penalty ``overflow_penalty · max(0, Σx − K)`` if soft."""
    x = np.asarray(keep, bool)
    val = float(p.utility[x].sum())
    if p.overflow_penalty is not None and p.capacity is not None:
        val -= p.overflow_penalty * max(0, int(x.sum()) - p.capacity)
    return val
