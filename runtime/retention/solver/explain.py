"""What a retention decision returns, and why each item went where it went.

:class:`RetentionResult` carries the answer; its :attr:`~RetentionResult.explanation` is built on
first access (so a 10,000-item greedy solve stays sub-millisecond) and is JSON-serialisable via
:meth:`Explanation.to_dict` for the store's decision log.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .hard import Presolve
from .problem import RetentionProblem
from .reasons import REASON_CODES, Reason, Status

__all__ = ["Explanation", "RetentionResult", "build_explanation"]

_R = {r: np.int8(REASON_CODES.index(r)) for r in Reason}


def _num(v: float | None) -> float | None:
    """JSON-safe float: inf/NaN become None."""
    return None if v is None or not math.isfinite(v) else float(v)


@dataclass(frozen=True, eq=False)
class Explanation:
    """An auditable record of one retention decision.

    Attributes:
        method, engine, status: which solver ran (``engine``: closed_form / component_dp / highs /
            greedy_repair / cvxpy_highs) and how far the answer can be trusted.
        objective: ``Σ u·x`` (minus the soft-capacity penalty, if any).
        solve_ms: wall time of :func:`runtime.retention.solve`, excluding this explanation.
        overflow: limits exceeded in overflow mode, ``{"capacity": 2, ...}`` (empty normally).
        upper_bound, gap: for greedy answers, a bound on the optimum, and (when computed) the exact
            objective given up.
        kept: bool per item. reason_codes: index into ``REASON_CODES`` per item. cause: the related
            item per item (implying item, kept exclusion partner, dropped implied item) or -1.
        utility: the utilities the decision was made on.
        constraints: one dict per constraint: ``name``, ``kind`` (capacity / budget / quota / implies /
            excludes), its use and limits, ``slack`` (how far from binding; < 0 = exceeded, e.g. in
            overflow mode; None for a quota without bounds) and ``tight`` (slack ≤ 0; for an
            implication: active, i.e. its premise is kept so its conclusion had to be).
        cut: the capacity cut: ``worst_kept`` / ``best_dropped`` item competing only on utility
            (``{"item", "index", "utility"}`` or None) and ``marginal_utility`` = what one more
            slot would have bought (the best dropped item's utility; 0 if nothing was cut).
        item_ids: labels for items (indices as strings if the problem had none).
    """

    method: str
    engine: str
    status: Status
    objective: float
    solve_ms: float
    overflow: dict[str, float]
    upper_bound: float | None
    gap: float | None
    kept: np.ndarray
    reason_codes: np.ndarray
    cause: np.ndarray
    utility: np.ndarray
    constraints: list[dict[str, Any]]
    cut: dict[str, Any]
    item_ids: tuple[str, ...]

    def reason(self, i: int) -> Reason:
        """Reason code of item ``i``."""
        return REASON_CODES[int(self.reason_codes[i])]

    def item(self, i: int) -> dict[str, Any]:
        """Per-item record: ``{"item", "index", "kept", "reason", "utility", "cause"}``."""
        c = int(self.cause[i])
        return {"item": self.item_ids[i], "index": int(i), "kept": bool(self.kept[i]),
                "reason": self.reason(i).value, "utility": _num(float(self.utility[i])),
                "cause": self.item_ids[c] if c >= 0 else None}

    def counts(self) -> dict[str, int]:
        """How many items got each reason code."""
        codes, n = np.unique(self.reason_codes, return_counts=True)
        return {REASON_CODES[int(c)].value: int(k) for c, k in zip(codes, n)}

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict of the whole explanation (for the decision log)."""
        return {
            "method": self.method, "engine": self.engine, "status": self.status.value,
            "objective": _num(self.objective), "solve_ms": _num(self.solve_ms),
            "overflow": {k: _num(v) for k, v in self.overflow.items()},
            "upper_bound": _num(self.upper_bound), "gap": _num(self.gap),
            "n_items": len(self.kept), "n_kept": int(self.kept.sum()), "counts": self.counts(),
            "marginal_utility": self.cut["marginal_utility"], "cut": self.cut, "constraints": self.constraints,
            "items": [self.item(i) for i in range(len(self.kept))],
        }


@dataclass(eq=False)
class RetentionResult:
    """The answer of :func:`runtime.retention.solve`.

    Attributes:
        keep: bool array, True = keep the item.
        objective: ``Σ u·x`` minus the soft-capacity penalty (if the capacity is soft).
        method: ``greedy`` | ``exact`` | ``cvxpy`` — what actually ran (``auto`` resolves to one).
        status: a :class:`~runtime.retention.Status`; every status satisfies every hard rule.
        engine: the algorithm inside the method (closed_form, component_dp, highs, greedy_repair,
            cvxpy_highs).
        solve_ms: wall time of the solve in milliseconds.
        overflow: in overflow mode, how far each limit was exceeded (empty otherwise).
        upper_bound: for ``greedy_repaired`` answers, an upper bound on the optimum.
        gap: exact optimum − objective, when ``solve(..., compare_exact=True)`` computed it.
    """

    keep: np.ndarray
    objective: float
    method: str
    status: Status
    engine: str
    solve_ms: float
    overflow: dict[str, float] = field(default_factory=dict)
    upper_bound: float | None = None
    gap: float | None = None
    _problem: RetentionProblem | None = field(default=None, repr=False)
    _pre: Presolve | None = field(default=None, repr=False)
    _explanation: Explanation | None = field(default=None, repr=False)

    @property
    def explanation(self) -> Explanation:
        """Per-item reasons, constraint slacks and the cut, built on first access."""
        if self._explanation is None:
            assert self._problem is not None and self._pre is not None
            self._explanation = build_explanation(self._problem, self._pre, self)
        return self._explanation

    @property
    def gap_bound(self) -> float | None:
        """``upper_bound − objective``: at most this much utility was given up (greedy answers)."""
        return None if self.upper_bound is None else max(0.0, self.upper_bound - self.objective)


def build_explanation(p: RetentionProblem, pre: Presolve, r: RetentionResult) -> Explanation:
    """Assign reason codes, constraint slacks and the cut for answer ``r.keep``."""
    x = np.asarray(r.keep, bool)
    u = p.utility
    imp, exc = p.arr("imp"), p.arr("exc")
    codes = pre.reason.copy()
    cause = pre.cause.copy()
    free = pre.free
    in_rules = np.zeros(p.n, bool)
    in_rules[pre.imp.ravel()] = True
    in_rules[pre.exc.ravel()] = True
    counts = [int(x[list(q.members)].sum()) if q.members else 0 for q in p.quotas]
    for q in p.quotas:
        in_rules[list(q.members)] = True
    loose = free & ~in_rules
    dropped_loose = np.flatnonzero(loose & ~x & (u > 0))
    theta = float(u[dropped_loose].max()) if len(dropped_loose) else 0.0

    # Kept, not forced: on merit, or pulled in by an implication / a quota minimum.
    kf = free & x
    codes[kf] = _R[Reason.ABOVE_CUT]
    weak = kf & (u <= theta)
    if len(imp):
        act = imp[x[imp[:, 0]] & weak[imp[:, 1]]]
        codes[act[:, 1]] = _R[Reason.REQUIRED_BY_IMPLICATION]
        cause[act[:, 1]] = act[:, 0]
    for k, q in enumerate(p.quotas):
        if counts[k] == q.min and q.min > 0:
            m = np.asarray(q.members, np.int64)
            m = m[weak[m] & (codes[m] == _R[Reason.ABOVE_CUT])]
            codes[m] = _R[Reason.QUOTA_MIN]

    # Dropped, not forced: most specific reason first.
    df = free & ~x
    codes[df] = _R[Reason.BELOW_CUT]
    if p.budget is not None:
        slack_b = p.budget - float(p.weights[x].sum())
        codes[df & (p.weights > slack_b + 1e-9)] = _R[Reason.OVER_BUDGET]
    for k, q in enumerate(p.quotas):
        if q.max is not None and counts[k] >= q.max:
            m = np.asarray(q.members, np.int64)
            codes[m[df[m]]] = _R[Reason.QUOTA_MAX]
    if len(imp):
        act = imp[df[imp[:, 0]] & ~x[imp[:, 1]]]
        codes[act[:, 0]] = _R[Reason.REQUIRES_DROPPED]
        cause[act[:, 0]] = act[:, 1]
    if len(exc):
        for s in (0, 1):
            act = exc[df[exc[:, s]] & x[exc[:, 1 - s]]]
            codes[act[:, s]] = _R[Reason.EXCLUDED_BY]
            cause[act[:, s]] = act[:, 1 - s]
    codes[df & (u <= 0)] = _R[Reason.NONPOSITIVE_UTILITY]
    cause[df & (u <= 0)] = -1

    ids = tuple(p.item_ids) if p.item_ids is not None else tuple(str(i) for i in range(p.n))
    return Explanation(
        method=r.method, engine=r.engine, status=r.status, objective=r.objective, solve_ms=r.solve_ms,
        overflow=dict(r.overflow), upper_bound=r.upper_bound, gap=r.gap, kept=x, reason_codes=codes,
        cause=cause, utility=u, constraints=_constraints(p, x, counts), cut=_cut(u, codes, ids, x),
        item_ids=ids)


def _cut(u: np.ndarray, codes: np.ndarray, ids: tuple[str, ...], x: np.ndarray) -> dict[str, Any]:
    def pick(mask: np.ndarray, worst: bool) -> dict[str, Any] | None:
        idx = np.flatnonzero(mask)
        if not len(idx):
            return None
        i = int(idx[np.argmin(u[idx])] if worst else idx[np.argmax(u[idx])])
        return {"item": ids[i], "index": i, "utility": _num(float(u[i]))}

    worst = pick(x & (codes == _R[Reason.ABOVE_CUT]), True)
    best = pick(~x & (codes == _R[Reason.BELOW_CUT]), False)
    return {"worst_kept": worst, "best_dropped": best,
            "marginal_utility": best["utility"] if best is not None else 0.0}


def _constraints(p: RetentionProblem, x: np.ndarray, counts: list[int]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    used = int(x.sum())
    if p.capacity is not None:
        slack = p.capacity - used
        out.append({"name": f"capacity(K={p.capacity})", "kind": "capacity", "used": used,
                    "limit": p.capacity, "slack": slack, "tight": slack <= 0,
                    "soft": p.overflow_penalty is not None, "over": max(0, -slack)})
    if p.budget is not None:
        wu = float(p.weights[x].sum())
        slack_b = p.budget - wu
        out.append({"name": f"budget(B={p.budget:g})", "kind": "budget", "used": wu, "limit": p.budget,
                    "slack": slack_b, "tight": slack_b <= 1e-9 * max(1.0, p.budget)})
    for k, q in enumerate(p.quotas):
        smin = counts[k] - q.min
        smax = None if q.max is None else q.max - counts[k]
        q_slack = min([v for v in (smin if q.min > 0 else None, smax) if v is not None], default=None)
        out.append({"name": q.name, "kind": "quota", "count": counts[k], "min": q.min, "max": q.max,
                    "slack_min": smin, "slack_max": smax, "slack": q_slack,
                    "tight": q_slack is not None and q_slack <= 0})
    imp, exc = p.arr("imp"), p.arr("exc")
    for r, (a, b) in enumerate(imp.tolist()):
        # x_a ≤ x_b: slack x_b − x_a; "tight" when it is active (a kept, so b had to be).
        out.append({"name": p.rule_name("implies", r), "kind": "implies", "slack": int(x[b]) - int(x[a]),
                    "tight": bool(x[a])})
    for r, (a, b) in enumerate(exc.tolist()):
        slack = 1 - int(x[a]) - int(x[b])
        out.append({"name": p.rule_name("excludes", r), "kind": "excludes", "slack": slack,
                    "tight": slack == 0})
    return out
