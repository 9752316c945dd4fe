"""The exact solver: decompose, relax, fix what is provably fixed, solve the small core exactly.

1. After the hard rules, the open items split into *units* (:mod:`.units`): connected components
   of the residual implications/exclusions, each enumerated, and single loose items.
2. The shared limits (capacity, budget, quotas) are priced (:mod:`.lagrange`), giving an upper
   bound ``L`` and per unit ``dmin``: how much any other choice of that unit costs in the bound.
3. Units with small ``dmin`` form the *core*; the others keep their Lagrangian choice. The core
   is solved exactly — by a max-plus DP over slots when only a count capacity is shared
   (``dp ← max_k dp[t−k] + f_c(k)``, loose items as a sorted list), else by HiGHS on the core.
4. The answer (value LB) is optimal if every fixed unit has ``dmin > L − LB`` (reduced-cost
   argument, see :mod:`.lagrange`); otherwise the core grows to include them and is re-solved —
   at most twice, since the previous answer stays feasible.

With a count capacity and ~N/10 random implications the core is a few dozen units, so a
10,000-item decision takes milliseconds. A rule-connected component larger than ``ENUM_MAX``
items sends the whole reduced problem to HiGHS instead (still exact).
"""

from __future__ import annotations

import time

import numpy as np

from .greedy import closed_form
from .hard import Presolve
from .lagrange import Resources, at_prices, best_choice, build_resources, multipliers_from_duals, relax_single
from .milp_highs import lp_duals, retention_milp
from .problem import RetentionProblem
from .reasons import Status
from .units import Group, Units, build_units

__all__ = ["solve_exact"]

_CORE0 = 64  # units in the first core for the slot DP (cheap per unit)
_CORE0_MILP = 24  # ... for the knapsack DP / HiGHS cores (cost grows fast with the core)


def _value(u: np.ndarray, pre: Presolve, keep: np.ndarray) -> float:
    v = float(u[keep].sum())
    if pre.penalty is not None and pre.capacity is not None:
        v -= pre.penalty * max(0, int(keep.sum()) - pre.capacity)
    return v


def solve_exact(p: RetentionProblem, pre: Presolve, *, time_limit_s: float = 30.0,
                ) -> tuple[np.ndarray | None, Status | None, str]:
    """Exact optimum of ``p`` after the hard rules.

    Returns:
        ``(keep, status, engine)``. ``keep`` None: no selection satisfies the rules (status None),
        or a MILP hit its time limit without an answer (status says so). ``engine`` is
        ``closed_form``, ``core_dp``, ``core_knapsack``, ``core_highs`` or ``highs`` (the whole
        reduced problem).
    """
    if not pre.relational:
        return closed_form(p, pre), Status.OPTIMAL, "closed_form"
    u, n = p.utility, p.n
    deadline = time.perf_counter() + time_limit_s

    def left() -> float:  # every HiGHS call shares the one time limit
        return max(1e-3, deadline - time.perf_counter())

    units = build_units(u, pre)
    if units is None:
        keep, status = _reduced_highs(p, pre, time_limit_s)
        return keep, status, "highs"
    res = build_resources(n, p.weights, pre)
    if not len(res.limit):  # nothing shared: every unit takes its best subset
        best, _ = best_choice(units, np.zeros(n), n)
        return pre.keep | best, Status.OPTIMAL, "core_dp"
    if units.n_units <= _CORE0:
        rel = at_prices(units, res, np.zeros(len(res.limit)), n)
        rel.dmin = [np.zeros(len(d)) for d in rel.dmin]  # everything in the core
    elif len(res.limit) == 1:
        rel = relax_single(units, res, n)
    else:
        duals = lp_duals(u, np.flatnonzero(pre.free), imp=pre.imp, exc=pre.exc,
                         quotas=[(mem, lo, hi) for _, mem, lo, hi in pre.quotas], cap=pre.cap_left,
                         penalty=pre.penalty, weights=p.weights, budget=pre.budget_left,
                         time_limit_s=left())
        m = multipliers_from_duals(res, duals) if duals is not None else np.zeros(len(res.limit))
        rel = at_prices(units, res, m, n)
    bound = rel.bound + float(u[pre.keep].sum())
    d_all = np.concatenate(rel.dmin)
    k0 = min(_CORE0 if res.count_only else _CORE0_MILP, len(d_all)) - 1
    delta = float(np.partition(d_all, k0)[k0])
    tol = 1e-9 * max(1.0, abs(bound))
    engine = ""
    while True:
        core = [d <= delta for d in rel.dmin]
        fixed = np.zeros(n, bool)
        for g, c in zip(units.groups, core):
            sel = g.idx[~c]
            fixed[sel[rel.choice[sel]]] = True
        x, status, engine = _solve_core(p, pre, res, units, core, fixed, left())
        all_in = all(c.all() for c in core)
        if x is None:
            if all_in or status is not None:
                return None, status, engine
            nxt = d_all[d_all > delta]
            delta = float(np.inf if not len(nxt) else max(nxt.min(), 4 * delta))
            continue
        keep = pre.keep | fixed | x
        gap = bound - _value(u, pre, keep)
        d_fixed = min((float(d[~c].min()) for d, c in zip(rel.dmin, core) if (~c).any()), default=np.inf)
        if all_in or d_fixed > gap + tol or status is not Status.OPTIMAL:
            return keep, status, engine
        delta = max(gap + tol, delta)


def _solve_core(p: RetentionProblem, pre: Presolve, res: Resources, units: Units, core: list[np.ndarray],
                fixed: np.ndarray, time_limit_s: float) -> tuple[np.ndarray | None, Status | None, str]:
    """Pick the core solver: slot DP, token knapsack DP, or HiGHS."""
    if res.count_only:
        x, st = _core_dp(p.utility, pre, units, core, fixed)
        return x, st, "core_dp"
    knap = _core_knapsack(p, pre, res, units, core, fixed)
    if knap is not None:
        return knap[0], (Status.OPTIMAL if knap[0] is not None else None), "core_knapsack"
    x, st = _core_highs(p, pre, units, core, fixed, time_limit_s)
    return x, st, "core_highs"


def _core_dp(u: np.ndarray, pre: Presolve, units: Units, core: list[np.ndarray], fixed: np.ndarray,
             ) -> tuple[np.ndarray | None, Status | None]:
    """Exact core solve under a count capacity (hard or soft) by a max-plus DP over slots."""
    n = len(u)
    cap = None if pre.cap_left is None else pre.cap_left - int(fixed.sum())
    hard = pre.penalty is None
    loose = np.zeros(0, np.int64)
    profs: list[tuple[np.ndarray, np.ndarray, Group, int]] = []
    for g, c in zip(units.groups, core):
        rows = np.flatnonzero(c)
        if not len(rows):
            continue
        if g.s == 1:
            loose = g.idx[rows, 0]
            continue
        sub = Group(g.s, g.idx[rows], g.bits, g.pop, g.vals[rows])
        f, arg = sub.profile()
        profs += [(f[r], arg[r], sub, r) for r in range(len(rows))]
    if hard and cap is not None and cap < 0:
        return None, None
    cand = loose[u[loose] > 0]
    if hard and cap is not None and len(cand) > cap:
        cand = cand[np.argpartition(-u[cand], cap - 1)[:cap]] if cap > 0 else cand[:0]
    cand = cand[np.argsort(-u[cand], kind="stable")]
    G = np.concatenate([[0.0], np.cumsum(u[cand])])
    total = sum(len(f) - 1 for f, _, _, _ in profs)
    limit = total if (cap is None or not hard) else min(total, cap)
    x = np.zeros(n, bool)
    if cap is None:  # cannot happen with a count capacity resource, kept for safety
        ks = [int(np.argmax(f)) for f, _, _, _ in profs]
        t_free = len(cand)
    else:
        dp = np.zeros(1)
        choices: list[np.ndarray] = []
        for f, _, _, _ in profs:
            s = len(f) - 1
            new_len = min(len(dp) + s, limit + 1)
            m = np.full((s + 1, new_len), -np.inf)
            for k in range(s + 1):
                span = min(len(dp), new_len - k)
                if span > 0 and f[k] > -np.inf:
                    m[k, k:k + span] = dp[:span] + f[k]
            ch = m.argmax(0)
            dp = m[ch, np.arange(new_len)]
            choices.append(ch)
        t = np.arange(len(dp))
        n_loose = len(cand)
        under = np.clip(cap - t, 0, n_loose)
        if hard:
            t_f = under
            tot = dp + G[t_f]
        else:  # soft: loose items fill the slots left under the cap, then any worth the penalty
            t_f = np.maximum(under, int((u[cand] > pre.penalty).sum()))
            tot = dp + G[t_f] - pre.penalty * np.maximum(0, t + t_f - cap)  # type: ignore[operator]
        tc = int(np.argmax(tot))
        if tot[tc] == -np.inf:
            return None, None
        t_free = int(t_f[tc])
        ks = [0] * len(profs)
        for j in range(len(profs) - 1, -1, -1):  # back-pointers
            ks[j] = int(choices[j][tc])
            tc -= ks[j]
    x[cand[:t_free]] = True
    for (_f, arg, sub, r), k in zip(profs, ks):
        x[sub.idx[r][sub.bits[arg[k]]]] = True
    return x, Status.OPTIMAL


_KNAP_CELLS = 20_000_000  # DP table cells (units × budget) above which the core goes to HiGHS
_KNAP_SUBSETS = 64        # feasible subsets per unit above which the core goes to HiGHS


def _core_knapsack(p: RetentionProblem, pre: Presolve, res: Resources, units: Units,
                   core: list[np.ndarray], fixed: np.ndarray) -> tuple[np.ndarray | None] | None:
    """Exact core solve for an integer budget (tokens) by DP over (slots ×) budget; None = not applicable.

    Applies when the shared limits are a budget with integer weights and possibly a hard count
    capacity (no quotas, no soft capacity) and the table stays under ``_KNAP_CELLS``. The count
    dimension is only added when the capacity can bind inside the core.
    """
    if any(k not in ("budget", "capacity") for k in res.kind) or pre.penalty is not None:
        return None
    w = p.weights
    assert w is not None and pre.budget_left is not None
    parts = [(g, np.flatnonzero(c)) for g, c in zip(units.groups, core) if c.any()]
    n_items = sum(len(r) * g.s for g, r in parts)
    C = None if pre.cap_left is None else pre.cap_left - int(fixed.sum())
    if C is not None and C < 0:
        return (None,)
    if C is not None and C >= n_items:
        C = None  # the capacity cannot bind inside the core
    B = pre.budget_left - float(w[fixed].sum())
    if B < -1e-9:
        return (None,)
    B_int = int(np.floor(B + 1e-9))
    opts: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
    for g, rows in parts:
        wi = w[g.idx[rows]]
        if not np.array_equal(wi, np.round(wi)):
            return None
        W = np.rint(wi @ g.bits.T).astype(np.int64)
        for r in range(len(rows)):
            ok = np.flatnonzero(np.isfinite(g.vals[rows[r]]) & (g.vals[rows[r]] > 0) & (W[r] <= B_int))
            if len(ok) > _KNAP_SUBSETS:
                return None
            if len(ok):
                opts.append((g.idx[rows[r]], g.bits[ok], W[r, ok], g.pop[ok], g.vals[rows[r], ok]))
    rows_c = 1 if C is None else C + 1
    if len(opts) * rows_c * (B_int + 1) > _KNAP_CELLS:
        return None
    dp = np.zeros((rows_c, B_int + 1))  # best value with ≤ c items (if counted) and weight ≤ b
    choice = np.full((len(opts), rows_c, B_int + 1), -1, np.int16)
    for j, (_, _, ws, ks, vs) in enumerate(opts):
        new = dp.copy()
        for o in range(len(ws)):
            wo, ko = int(ws[o]), (0 if C is None else int(ks[o]))
            if ko >= rows_c:
                continue
            cand = dp[:rows_c - ko, :B_int + 1 - wo] + vs[o]
            tgt = new[ko:, wo:]
            better = cand > tgt
            tgt[better] = cand[better]
            choice[j, ko:, wo:][better] = o
        dp = new
    x = np.zeros(p.n, bool)
    c, b = rows_c - 1, B_int
    for j in range(len(opts) - 1, -1, -1):  # back-pointers
        o = int(choice[j, c, b])
        if o >= 0:
            items, bits, ws, ks, _ = opts[j]
            x[items[bits[o]]] = True
            b -= int(ws[o])
            c -= 0 if C is None else int(ks[o])
    return (x,)


def _core_highs(p: RetentionProblem, pre: Presolve, units: Units, core: list[np.ndarray],
                fixed: np.ndarray, time_limit_s: float) -> tuple[np.ndarray | None, Status | None]:
    """Exact core solve with HiGHS when a budget or quotas are shared."""
    n = p.n
    in_core = np.zeros(n, bool)
    for g, c in zip(units.groups, core):
        in_core[g.idx[c].ravel()] = True
    cols = np.flatnonzero(in_core)
    imp = pre.imp[in_core[pre.imp[:, 0]]] if len(pre.imp) else pre.imp
    exc = pre.exc[in_core[pre.exc[:, 0]]] if len(pre.exc) else pre.exc
    quotas = []
    for _, mem, lo, hi in pre.quotas:
        f_in = int(fixed[mem].sum())
        if hi >= 0 and f_in > hi:
            return None, None
        quotas.append((mem[in_core[mem]], max(0, lo - f_in), -1 if hi < 0 else hi - f_in))
    cap = None if pre.cap_left is None else pre.cap_left - int(fixed.sum())
    budget = None
    if pre.budget_left is not None:
        budget = pre.budget_left - float(p.weights[fixed].sum())
        if budget < -1e-9:
            return None, None
        budget = max(0.0, budget)
    xv, status = retention_milp(p.utility, cols, n_integer=len(cols), imp=imp, exc=exc, quotas=quotas,
                                cap=cap, penalty=pre.penalty, weights=p.weights, budget=budget,
                                time_limit_s=time_limit_s)
    if xv is None:
        return None, status
    x = np.zeros(n, bool)
    x[cols[xv > 0.5]] = True
    return x, status


def _reduced_highs(p: RetentionProblem, pre: Presolve, time_limit_s: float,
                   ) -> tuple[np.ndarray | None, Status | None]:
    """The whole reduced problem in HiGHS (a component too large to enumerate)."""
    u = p.utility
    in_rules = np.zeros(p.n, bool)
    in_rules[pre.imp.ravel()] = True
    in_rules[pre.exc.ravel()] = True
    for _, mem, _, _ in pre.quotas:
        in_rules[mem] = True
    rule_items = np.flatnonzero(in_rules)
    loose = np.flatnonzero(pre.free & ~in_rules & (u > 0))
    relax_loose = pre.budget_left is None
    if relax_loose and pre.cap_left is not None and pre.penalty is None and len(loose) > max(pre.cap_left, 0):
        k = max(pre.cap_left, 0)
        loose = loose[np.argpartition(-u[loose], k - 1)[:k]] if k > 0 else loose[:0]
    cols = np.concatenate([rule_items, loose])
    xv, status = retention_milp(
        u, cols, n_integer=len(rule_items) if relax_loose else len(cols), imp=pre.imp, exc=pre.exc,
        quotas=[(mem, lo, hi) for _, mem, lo, hi in pre.quotas], cap=pre.cap_left, penalty=pre.penalty,
        weights=p.weights, budget=pre.budget_left, time_limit_s=time_limit_s)
    if xv is None:
        return None, status
    keep = pre.keep.copy()
    keep[rule_items[xv[:len(rule_items)] > 0.5]] = True
    if len(loose):
        if relax_loose:  # the loose LP optimum is a sorted prefix: take the best round(Σy)
            t = round(float(xv[len(rule_items):].sum()))
            keep[loose[np.argsort(-u[loose], kind="stable")][:t]] = True
        else:
            keep[loose[xv[len(rule_items):] > 0.5]] = True
    return keep, status
