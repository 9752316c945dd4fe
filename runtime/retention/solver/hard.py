"""Hard rules first: deterministic propagation, infeasibility diagnosis, and the residual problem.

The logical rules are 2-SAT clauses that all contain a negative literal (``x_a ≤ x_b`` is
``¬a ∨ b``; an exclusion is ``¬a ∨ ¬b``), so "forget everything not forced" satisfies them.
Hence unit propagation is *complete*: propagate must-keep forward through implications, then
must-forget (and the partners of kept items' exclusions) backward through implications; the rule
set is contradictory iff some item ends up both kept and forgotten, and the chains that put it
there are exactly the rules to name. What is left — items neither forced in nor out, with the
implications, exclusions and quotas among them and the capacity/budget they may still use — is the
:class:`Presolve` that every solver works on.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import numpy as np

from ...errors import InfeasibleError
from .problem import RetentionProblem
from .reasons import REASON_CODES, Reason

__all__ = ["Presolve", "presolve", "solver_infeasible_error"]

_R = {r: np.int8(REASON_CODES.index(r)) for r in Reason}
_MAX_REPORTED = 3  # contradiction chains spelled out in one message (all rules still go in .conflicts)


@dataclass
class Presolve:
    """The problem after the hard rules, in the solvers' terms.

    Attributes:
        keep, forget: bool masks of items fixed in / out by hard rules.
        reason: per item, index into ``REASON_CODES`` for fixed items, -1 for unfixed ones.
        cause: per fixed item, the item that forced it (implying item, kept exclusion partner, or
            the forgotten item it implies), -1 for roots and unfixed items.
        capacity: effective count capacity (raised to the forced count in overflow mode), or None.
        penalty: per-item penalty above ``capacity`` if the capacity is soft, else None.
        budget: effective budget (raised in overflow mode), or None.
        quota_lo, quota_hi: effective bounds per quota (``quota_hi`` -1 = unbounded).
        overflow: what overflow mode had to exceed: ``{"capacity": 2, "budget": 13.0, "<quota>": 1}``.
        free: bool mask of unfixed items. ``imp``/``exc``: residual pairs among unfixed items.
        quotas: residual quotas ``(quota index, unfixed members, lo, hi)`` that can still bind.
        cap_left: capacity left for unfixed items (may be < 0 with a soft capacity), or None.
        budget_left: budget left for unfixed items, or None when no budget can bind.
    """

    keep: np.ndarray
    forget: np.ndarray
    reason: np.ndarray
    cause: np.ndarray
    capacity: int | None
    penalty: float | None
    budget: float | None
    quota_lo: np.ndarray
    quota_hi: np.ndarray
    overflow: dict[str, float] = field(default_factory=dict)
    free: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))
    imp: np.ndarray = field(default_factory=lambda: np.zeros((0, 2), np.int64))
    exc: np.ndarray = field(default_factory=lambda: np.zeros((0, 2), np.int64))
    quotas: list[tuple[int, np.ndarray, int, int]] = field(default_factory=list)
    cap_left: int | None = None
    budget_left: float | None = None

    @property
    def relational(self) -> bool:
        """True if anything beyond a count capacity still couples the unfixed items."""
        return bool(len(self.imp) or len(self.exc) or self.quotas or self.budget_left is not None)


def _csr(src: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Adjacency by source item: ``order[starts[i]:starts[i+1]]`` are the rule rows leaving i."""
    order = np.argsort(src, kind="stable")
    starts = np.searchsorted(src[order], np.arange(n + 1))
    return order, starts


class _Propagation:
    """Forward keep / backward forget closure with parent pointers for explanations."""

    def __init__(self, p: RetentionProblem) -> None:
        self.p = p
        n = p.n
        self.keep = np.zeros(n, bool)
        self.forget = np.zeros(n, bool)
        self.keep_par = np.full(n, -1, np.int64)   # implication row that forced the keep
        self.forget_par = np.full(n, -1, np.int64)  # implication row (kind 1) or exclusion row (kind 2)
        self.forget_kind = np.zeros(n, np.int8)     # 0 must_forget root, 1 implies, 2 excludes
        imp, exc = p.arr("imp"), p.arr("exc")
        self.keep[p.arr("keep")] = True
        if len(imp):
            self._forward(imp, n)
        self.forget[p.arr("forget")] = True
        if len(exc):
            for side in (0, 1):
                rows = np.flatnonzero(self.keep[exc[:, side]])
                for r in rows:  # first rule wins, deterministically (roots already set win too)
                    j = exc[r, 1 - side]
                    if not self.forget[j]:
                        self.forget[j], self.forget_par[j], self.forget_kind[j] = True, r, 2
        if len(imp) and self.forget.any():
            self._backward(imp, n)

    def _forward(self, imp: np.ndarray, n: int) -> None:
        order, starts = (v.tolist() for v in _csr(imp[:, 0], n))
        head = imp[:, 1].tolist()
        keep, par = self.keep, self.keep_par
        queue = deque(self.p.arr("keep").tolist())
        while queue:
            i = queue.popleft()
            for r in order[starts[i]:starts[i + 1]]:
                j = head[r]
                if not keep[j]:
                    keep[j], par[j] = True, r
                    queue.append(j)

    def _backward(self, imp: np.ndarray, n: int) -> None:
        order, starts = (v.tolist() for v in _csr(imp[:, 1], n))
        tail = imp[:, 0].tolist()
        forget = self.forget
        queue = deque(np.flatnonzero(forget).tolist())
        while queue:
            j = queue.popleft()
            for r in order[starts[j]:starts[j + 1]]:
                i = tail[r]
                if not forget[i]:
                    forget[i], self.forget_par[i], self.forget_kind[i] = True, r, 1
                    queue.append(i)

    # ------------------------------------------------------------------ chains, for messages
    def keep_chain(self, x: int) -> list[str]:
        """Rules from a must-keep root down to ``x``, in order."""
        p, imp, out = self.p, self.p.arr("imp"), []
        while self.keep_par[x] >= 0:
            r = int(self.keep_par[x])
            out.append(p.rule_name("implies", r))
            x = int(imp[r, 0])
        out.append(p.rule_name("must_keep", x))
        return out[::-1]

    def forget_chain(self, x: int) -> tuple[list[str], list[str]]:
        """Rules from ``x`` to the reason it must go, and (for an exclusion) the partner's keep chain."""
        p, imp, exc, out = self.p, self.p.arr("imp"), self.p.arr("exc"), []
        while self.forget_kind[x] == 1:
            r = int(self.forget_par[x])
            out.append(p.rule_name("implies", r))
            x = int(imp[r, 1])
        if self.forget_kind[x] == 2:
            r = int(self.forget_par[x])
            out.append(p.rule_name("excludes", r))
            partner = int(exc[r, 0] if exc[r, 1] == x else exc[r, 1])
            return out, self.keep_chain(partner)
        out.append(p.rule_name("must_forget", x))
        return out, []

    def forget_rule(self, x: int) -> str:
        """The single rule that removed ``x`` (for quota messages)."""
        kind = ("must_forget", "implies", "excludes")[int(self.forget_kind[x])]
        return self.p.rule_name(kind, x if kind == "must_forget" else int(self.forget_par[x]))

    def keep_rule(self, x: int) -> str:
        r = int(self.keep_par[x])
        return self.p.rule_name("must_keep", x) if r < 0 else self.p.rule_name("implies", r)

    def contradiction(self) -> None:
        both = np.flatnonzero(self.keep & self.forget)
        if not len(both):
            return
        names: list[str] = []
        found: dict[frozenset[str], tuple[int, list[str], list[str], list[str]]] = {}
        for x in both.tolist():
            kc = self.keep_chain(x)
            fc, partner = self.forget_chain(x)
            key = frozenset(kc + fc + partner)
            names += kc + fc + partner
            # One line per distinct set of rules; the item with the longest keep chain tells it best.
            if key not in found or len(kc) > len(found[key][1]):
                found[key] = (x, kc, fc, partner)
        lines = []
        for x, kc, fc, partner in list(found.values())[:_MAX_REPORTED]:
            why_out = " → ".join(fc) + (f" (the other item is kept via {' → '.join(partner)})" if partner else "")
            lines.append(f"item {self.p.item_label(x)} must be kept via {' → '.join(kc)} "
                         f"but forgotten via {why_out}")
        more = f" (+{len(found) - _MAX_REPORTED} more conflicts)" if len(found) > _MAX_REPORTED else ""
        raise InfeasibleError(
            "retention rules contradict each other: " + "; ".join(lines) + more
            + ". Remove or change one of the rules named above (overflow mode cannot fix a logical contradiction).",
            conflicts=list(dict.fromkeys(names)))


def presolve(p: RetentionProblem, *, penalty: float | None = None) -> Presolve:
    """Apply the hard rules; raise :class:`InfeasibleError` naming the rules if they cannot all hold.

    Args:
        p: the problem.
        penalty: override the soft-capacity penalty (used for the overflow-mode retry, where a huge
            penalty turns the capacity into "exceed it as little as possible").
    """
    prop = _Propagation(p)
    prop.contradiction()
    keep, forget, n = prop.keep, prop.forget, p.n
    reason = np.full(n, -1, np.int8)
    cause = np.full(n, -1, np.int64)
    imp_all, exc_all = p.arr("imp"), p.arr("exc")
    reason[keep] = _R[Reason.FORCED_BY_IMPLICATION]
    reason[p.arr("keep")] = _R[Reason.MUST_KEEP]
    kp = np.flatnonzero(keep & (prop.keep_par >= 0))
    cause[kp] = imp_all[prop.keep_par[kp], 0]
    for kind, code in ((1, Reason.FORGOTTEN_BY_IMPLICATION), (2, Reason.EXCLUDED_BY)):
        m = np.flatnonzero(forget & (prop.forget_kind == kind))
        reason[m] = _R[code]
        if kind == 1:
            cause[m] = imp_all[prop.forget_par[m], 1]
        else:
            rows = exc_all[prop.forget_par[m]]
            cause[m] = np.where(rows[:, 0] == m, rows[:, 1], rows[:, 0])
    reason[p.arr("forget")] = _R[Reason.MUST_FORGET]

    overflow: dict[str, float] = {}
    pen = penalty if penalty is not None else p.overflow_penalty
    n_keep = int(keep.sum())
    cap = p.capacity
    if cap is not None and pen is None and n_keep > cap:
        _limit_or_raise(p, prop, overflow, "capacity", f"capacity(K={cap})", n_keep, cap,
                        f"{n_keep} items must be kept but capacity is {cap}")
        cap = n_keep
    budget = p.budget
    if budget is not None:
        used = float(p.weights[keep].sum())
        if used > budget * (1 + 1e-12) + 1e-12:
            _limit_or_raise(p, prop, overflow, "budget", f"budget(B={budget:g})", used, budget,
                            f"items that must be kept weigh {used:g} but the budget is {budget:g}")
            budget = used
    qlo = np.array([q.min for q in p.quotas], np.int64)
    qhi = np.array([-1 if q.max is None else q.max for q in p.quotas], np.int64)
    residual_q: list[tuple[int, np.ndarray, int, int]] = []
    for k, q in enumerate(p.quotas):
        mem = np.asarray(q.members, np.int64)
        forced = int(keep[mem].sum())
        avail = int((~forget[mem]).sum())
        if avail < q.min:
            gone = mem[forget[mem]]
            raise InfeasibleError(
                f"{q.name} needs at least {q.min} kept members but only {avail} can be kept; the rest "
                f"are removed by hard rules. Lower {q.name}.min or relax the rules named.",
                conflicts=list(dict.fromkeys([q.name] + [prop.forget_rule(int(x)) for x in gone])))
        if qhi[k] >= 0 and forced > qhi[k]:
            _limit_or_raise(p, prop, overflow, q.name, q.name, forced, int(qhi[k]),
                            f"{forced} members of {q.name} must be kept but its max is {qhi[k]}",
                            members=mem)
            qhi[k] = forced
        free_mem = mem[~keep[mem] & ~forget[mem]]
        lo = max(0, q.min - forced)
        hi = -1 if qhi[k] < 0 else int(qhi[k]) - forced
        if lo > 0 or (hi >= 0 and hi < len(free_mem)):
            residual_q.append((k, free_mem, lo, hi))

    free = ~keep & ~forget
    imp = imp_all[free[imp_all[:, 0]] & free[imp_all[:, 1]]] if len(imp_all) else imp_all
    exc = exc_all[free[exc_all[:, 0]] & free[exc_all[:, 1]]] if len(exc_all) else exc_all
    cap_left = None if cap is None else cap - n_keep
    budget_left = None
    if budget is not None:
        left = budget - float(p.weights[keep].sum())
        in_rules = np.zeros(n, bool)
        in_rules[imp.ravel()] = True
        in_rules[exc.ravel()] = True
        for _, mem, _, _ in residual_q:
            in_rules[mem] = True
        candidates = free & ((p.utility > 0) | in_rules)
        if float(p.weights[candidates].sum()) > left + 1e-12:
            budget_left = max(0.0, left)  # the budget can still bind: a knapsack for the solver
    return Presolve(keep=keep, forget=forget, reason=reason, cause=cause, capacity=cap, penalty=pen,
                    budget=budget, quota_lo=qlo, quota_hi=qhi, overflow=overflow, free=free, imp=imp,
                    exc=exc, quotas=residual_q, cap_left=cap_left, budget_left=budget_left)


def _limit_or_raise(p: RetentionProblem, prop: _Propagation, overflow: dict[str, float], key: str,
                    limit_name: str, need: float, limit: float, what: str,
                    members: np.ndarray | None = None) -> None:
    """Record an overflow (overflow mode) or raise naming the limit and the rules that fill it."""
    if p.on_infeasible == "overflow":
        overflow[key] = need - limit
        return
    forced = np.flatnonzero(prop.keep) if members is None else members[prop.keep[members]]
    rules = [prop.keep_rule(int(x)) for x in forced]
    raise InfeasibleError(
        f"{what}. The forced items come from {len(rules)} rules ({', '.join(rules[:6])}"
        f"{', …' if len(rules) > 6 else ''}). Raise the limit, drop a must-keep rule, or solve with "
        "RetentionProblem(on_infeasible='overflow') to keep them all and report the overflow.",
        conflicts=list(dict.fromkeys([limit_name] + rules)))


def solver_infeasible_error(p: RetentionProblem, pre: Presolve) -> InfeasibleError:
    """The error for a problem the hard-rule pass could not refute but no selection satisfies.

    That only happens through quota minimums (everything else is satisfied by forgetting), so the
    message names the quotas with an unmet minimum and the limits/rules that compete with them.
    """
    names = [p.quotas[k].name for k, _, lo, _ in pre.quotas if lo > 0]
    if pre.cap_left is not None and pre.penalty is None:
        names.append(f"capacity(K={p.capacity})")
    if pre.budget_left is not None:
        names.append(f"budget(B={p.budget:g})")
    names += [p.quotas[k].name for k, _, lo, hi in pre.quotas if lo == 0 and hi >= 0]
    rel = ([p.rule_name("excludes", int(r)) for r in _rows(p.arr("exc"), pre.exc)]
           + [p.rule_name("implies", int(r)) for r in _rows(p.arr("imp"), pre.imp)])
    return InfeasibleError(
        "no selection meets the quota minimums of " + ", ".join(names[:1] or ["the quotas"])
        + " together with " + ", ".join(names[1:] + rel[:6] or ["the other rules"])
        + ". Lower a quota minimum, raise the capacity/budget, or solve with on_infeasible='overflow'"
        " (which may exceed the capacity).",
        conflicts=list(dict.fromkeys(names + rel)))


def _rows(all_pairs: np.ndarray, residual: np.ndarray) -> np.ndarray:
    """Row numbers in ``all_pairs`` of the residual pairs (for naming them)."""
    if not len(residual):
        return np.zeros(0, np.int64)
    key_all = all_pairs[:, 0] * (1 << 32) + all_pairs[:, 1]
    key_res = set((residual[:, 0] * (1 << 32) + residual[:, 1]).tolist())
    return np.flatnonzero([k in key_res for k in key_all.tolist()])
