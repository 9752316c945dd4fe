"""Lagrangian relaxation of the shared limits: an upper bound and, per unit, how sure its choice is.

Write every shared limit as ``Σ_i a_ri x_i ≤ b_r`` (capacity: a = 1; budget: a = w; quota max:
a = 1 on members; quota min: a = −1 on members, b = −min) and price it with ``m_r ≥ 0``
(``m ≤ penalty`` for a soft capacity, since ``−pen·max(0, t−K) ≤ m·(K − t)`` for ``0 ≤ m ≤ pen``).
For every feasible x:

    obj(x) ≤ Σ_r m_r b_r + Σ_units score_c(S_c)  ≤  L(m) − Σ_units [best_c − score_c(S_c)]

with ``score_c(S) = u(S) − Σ_r m_r a_r(S)`` and ``best_c`` its maximum over the unit's subsets.
So ``L(m)`` bounds the optimum, and a unit whose every alternative subset scores more than
``L − LB`` below its best (``dmin > L − LB``) keeps its Lagrangian choice in *every* solution
worth at least LB — the reduced-cost argument :mod:`.exact` uses to shrink the problem to a core.
With one shared limit the best multiplier is found exactly by a search over breakpoints; with
several, the LP relaxation's duals are used (LP duality makes them good). Any multipliers give a
valid bound — better ones only make the core smaller.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .hard import Presolve
from .units import Units

__all__ = ["Relaxation", "Resources", "at_prices", "best_choice", "build_resources", "multipliers_from_duals",
           "relax_single"]

_BISECT = 40  # bisection steps when breakpoints are not all listed (~1e-12 of the bracket)


@dataclass
class Resources:
    """Shared limits as rows ``coef[r] @ x ≤ limit[r]``; ``upper[r]`` caps the multiplier.

    Attributes:
        kind: per row ``capacity`` / ``budget`` / ``quota_max`` / ``quota_min``.
        quota: per row the index into ``pre.quotas`` (-1 for capacity/budget).
    """

    coef: np.ndarray
    limit: np.ndarray
    upper: np.ndarray
    kind: list[str]
    quota: list[int]

    @property
    def count_only(self) -> bool:
        """Only a count capacity (hard or soft) couples the units: the DP core applies."""
        return all(k == "capacity" for k in self.kind)


def build_resources(n: int, w: np.ndarray | None, pre: Presolve) -> Resources:
    """The residual limits of ``pre`` as rows over all n items (zero outside the open items)."""
    coef, limit, upper, kind, quota = [], [], [], [], []
    free = pre.free.astype(np.float64)
    if pre.cap_left is not None:
        coef.append(free)
        limit.append(float(pre.cap_left))
        upper.append(np.inf if pre.penalty is None else float(pre.penalty))
        kind.append("capacity")
        quota.append(-1)
    if pre.budget_left is not None and w is not None:
        coef.append(w * free)
        limit.append(float(pre.budget_left))
        upper.append(np.inf)
        kind.append("budget")
        quota.append(-1)
    for j, (_, mem, lo, hi) in enumerate(pre.quotas):
        a = np.zeros(n)
        a[mem] = 1.0
        if hi >= 0:
            coef.append(a)
            limit.append(float(hi))
            upper.append(np.inf)
            kind.append("quota_max")
            quota.append(j)
        if lo > 0:
            coef.append(-a)
            limit.append(-float(lo))
            upper.append(np.inf)
            kind.append("quota_min")
            quota.append(j)
    c = np.array(coef) if coef else np.zeros((0, n))
    return Resources(c, np.array(limit, np.float64), np.array(upper, np.float64), kind, quota)


@dataclass
class Relaxation:
    """The best multipliers found, the bound ``L``, the Lagrangian choice and per-unit ``dmin``.

    ``choice`` is a bool mask over items; ``dmin`` is a list aligned with ``units.groups``, one array
    per group (inf where the unit has a single feasible subset).
    """

    m: np.ndarray
    bound: float
    choice: np.ndarray
    dmin: list[np.ndarray]


def best_choice(units: Units, price: np.ndarray, n: int) -> tuple[np.ndarray, float]:
    """Each unit's best subset under item prices: the chosen-item mask and Σ best scores."""
    x = np.zeros(n, bool)
    total = 0.0
    for g in units.groups:
        if g.s == 1:  # single items: keep iff utility beats the price
            sc = g.vals[:, 1] - price[g.idx[:, 0]]
            pick = sc > 0
            x[g.idx[pick, 0]] = True
            total += float(sc[pick].sum())
            continue
        score = g.vals - price[g.idx] @ g.bits.T
        arg = score.argmax(1)
        total += float(score[np.arange(len(arg)), arg].sum())
        x[g.idx[g.bits[arg]]] = True
    return x, total


def _dmin(units: Units, price: np.ndarray) -> list[np.ndarray]:
    out = []
    for g in units.groups:
        if g.s == 1:
            out.append(np.abs(g.vals[:, 1] - price[g.idx[:, 0]]))
            continue
        score = g.vals - price[g.idx] @ g.bits.T
        top2 = np.partition(score, -2, axis=1)[:, -2:]
        with np.errstate(invalid="ignore"):
            d = top2[:, 1] - top2[:, 0]
        out.append(np.where(np.isfinite(top2[:, 0]), d, np.inf))
    return out


def at_prices(units: Units, res: Resources, m: np.ndarray, n: int) -> Relaxation:
    """The bound, Lagrangian choice and per-unit ``dmin`` at multipliers ``m``."""
    price = m @ res.coef if len(m) else np.zeros(n)
    x, tot = best_choice(units, price, n)
    return Relaxation(m, float(m @ res.limit) + tot, x, _dmin(units, price))


_PAIRS: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # s → subset index pairs, built lazily


def _pairs(s: int) -> tuple[np.ndarray, np.ndarray]:
    if s not in _PAIRS:
        _PAIRS[s] = np.triu_indices(1 << s, 1)
    return _PAIRS[s]


def _breakpoints(units: Units, uses: list[np.ndarray]) -> tuple[np.ndarray, bool]:
    """Multiplier values where some unit's best subset can change (for one priced limit).

    ``uses[g]`` is the limit's use per subset of group g. Exact for single items and units of
    ≤ 5 items (all subset pairs); the flag says whether larger units exist, whose breakpoints are
    then found by bisection.
    """
    out = []
    big = False
    for g, A in zip(units.groups, uses):
        if g.s == 1:
            ai = A[:, 1]
            nz = ai != 0
            out.append(g.vals[nz, 1] / ai[nz])
            continue
        if g.s > 5:  # only the feasible subsets matter; list their pairs if there are few
            for r in range(len(g.idx)):
                ok = np.flatnonzero(np.isfinite(g.vals[r]))
                if len(ok) > 64:
                    big = True
                    continue
                i, j = np.triu_indices(len(ok), 1)
                v, A_ = g.vals[r, ok], A[r, ok]
                with np.errstate(divide="ignore", invalid="ignore"):
                    bp = (v[i] - v[j]) / (A_[i] - A_[j])
                out.append(bp[np.isfinite(bp)])
            continue
        i, j = _pairs(g.s)
        with np.errstate(divide="ignore", invalid="ignore"):
            bp = (g.vals[:, i] - g.vals[:, j]) / (A[:, i] - A[:, j])
        out.append(bp[np.isfinite(bp)])
    c = np.concatenate(out) if out else np.zeros(0)
    return np.unique(c[c > 0]), big


def relax_single(units: Units, res: Resources, n: int) -> Relaxation:
    """Optimal multiplier for a single shared limit by search over its breakpoints.

    ``slack(m) = limit − a·x(m)`` is a non-decreasing step function of m and ``L`` is convex with
    slope ``slack``; the minimiser is the first breakpoint where the slack turns non-negative.
    """
    a, limit, upper = res.coef[0], float(res.limit[0]), float(res.upper[0])
    uses = [a[g.idx] @ g.bits.T for g in units.groups]  # limit use per subset, per group
    rows = [np.arange(len(g.idx)) for g in units.groups]
    # Single items: item i is taken at price v iff u_i − v·a_i > 0, i.e. (a_i > 0) u_i/a_i > v or
    # (a_i < 0) u_i/a_i < v; sorted ratios + cumulative use answer each query by bisection.
    singles = [(g, A[:, 1]) for g, A in zip(units.groups, uses) if g.s == 1]
    pos_r = pos_c = neg_r = neg_c = np.zeros(0)
    zero_use = 0.0
    if singles:
        g1, a1 = singles[0]
        u1 = g1.vals[:, 1]
        p_, n_ = a1 > 0, a1 < 0
        o = np.argsort(u1[p_] / a1[p_])
        pos_r, pos_c = (u1[p_] / a1[p_])[o], np.concatenate([[0.0], np.cumsum(a1[p_][o][::-1])])
        o = np.argsort(u1[n_] / a1[n_])
        neg_r, neg_c = (u1[n_] / a1[n_])[o], np.concatenate([[0.0], np.cumsum(a1[n_][o])])

    def slack(v: float) -> float:
        k = len(pos_r) - int(np.searchsorted(pos_r, v, side="right"))  # ratios > v
        used = float(pos_c[k]) + float(neg_c[int(np.searchsorted(neg_r, v, side="left"))]) + zero_use
        for g, A, r in zip(units.groups, uses, rows):
            if g.s > 1:
                used += float(A[r, (g.vals - v * A).argmax(1)].sum())
        return limit - used

    if slack(0.0) >= 0:
        return at_prices(units, res, np.zeros(1), n)
    cand, big = _breakpoints(units, uses)
    cand = cand[cand <= upper] if np.isfinite(upper) else cand
    lo_v, hi_v = 0.0, 0.0
    if len(cand) and slack(float(cand[-1])) >= 0:
        lo_i, hi_i = -1, len(cand) - 1  # invariant: slack(cand[lo_i]) < 0 (or lo_i = -1), slack(cand[hi_i]) ≥ 0
        while hi_i - lo_i > 1:
            mid_i = (lo_i + hi_i) // 2
            if slack(float(cand[mid_i])) >= 0:
                hi_i = mid_i
            else:
                lo_i = mid_i
        lo_v, hi_v = (float(cand[lo_i]) if lo_i >= 0 else 0.0), float(cand[hi_i])
    elif np.isfinite(upper):
        return at_prices(units, res, np.array([upper]), n)  # a soft cap priced at its penalty
    else:
        lo_v = float(cand[-1]) if len(cand) else 0.0
        hi_v = max(2.0 * lo_v, 1.0)
        for _ in range(60):  # bracket (only units larger than 5 items have unlisted breakpoints)
            if slack(hi_v) >= 0:
                break
            lo_v, hi_v = hi_v, 4.0 * hi_v
        big = True
    if big:
        for _ in range(_BISECT):
            mid = 0.5 * (lo_v + hi_v)
            if not lo_v < mid < hi_v:
                break
            if slack(mid) < 0:
                lo_v = mid
            else:
                hi_v = mid
    return at_prices(units, res, np.array([hi_v]), n)


def multipliers_from_duals(res: Resources, duals: dict[str, float]) -> np.ndarray:
    """Map LP row duals (see :func:`.milp_highs.lp_duals`) onto the rows of ``res``."""
    m = np.zeros(len(res.limit))
    for r, (kind, j) in enumerate(zip(res.kind, res.quota)):
        key = {"capacity": "cap", "budget": "budget"}.get(kind, f"quota{j}_{kind[6:]}")
        m[r] = min(duals.get(key, 0.0), res.upper[r])
    return m
