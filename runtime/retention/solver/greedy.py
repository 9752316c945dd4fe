"""Greedy retention: closed form where it is exact, rule-respecting repair where it is not.

Closed form (provably optimal): once the hard rules are applied and only a count capacity couples
the remaining items, the objective is a sum of independent utilities under ``Σx ≤ K'`` — an
exchange argument shows the K' largest *positive* utilities are optimal. Items with utility ≤ 0
are dropped even when there is spare capacity: keeping them can only lower the objective. With a
soft capacity the marginal value of the r-th item is ``u`` while r ≤ K' and ``u − penalty`` after,
a non-increasing sequence, so "take while the marginal value is positive" is still exact.

Repair (heuristic, only when asked for ``method="greedy"`` on a relational problem): items are
added together with everything they imply, best utility-per-slot first, skipping any addition that
would break an exclusion, a quota maximum, the capacity or the budget; quota minimums are met
first. Every hard rule holds by construction; the result is re-checked anyway.
"""

from __future__ import annotations

import heapq
from collections import deque

import numpy as np

from .hard import Presolve
from .problem import RetentionProblem

__all__ = ["closed_form", "greedy_repair", "upper_bound"]

_EPS = 1e-12


def closed_form(p: RetentionProblem, pre: Presolve) -> np.ndarray:
    """Optimal keep-vector when only a count capacity couples the unfixed items.

    On a relational problem this is the answer of the *relaxation* without residual
    implications/exclusions/quotas/budget (used for :func:`upper_bound`).
    """
    u = p.utility
    keep = pre.keep.copy()
    cand = np.flatnonzero(pre.free & (u > 0))
    if pre.cap_left is None or len(cand) <= max(pre.cap_left, 0):
        keep[cand] = True  # everything positive fits (a soft penalty never applies then)
        return keep
    k = max(pre.cap_left, 0)
    if k > 0:
        top = cand[np.argpartition(-u[cand], k - 1)[:k]]
        keep[top] = True
    if pre.penalty is not None:
        # Past K' an item is worth u − penalty; any item with u > penalty is kept.
        keep[cand[u[cand] > pre.penalty]] = True
    return keep


def upper_bound(p: RetentionProblem, pre: Presolve) -> float:
    """An upper bound on the optimum: drop the residual relational rules (a relaxation).

    With a budget, also the fractional-knapsack (LP) bound under the budget alone; the smaller of
    the two is returned. Used to report how much a greedy-repair answer may have given up.
    """
    from .check import objective

    bound = objective(p, closed_form(p, pre))
    if pre.budget_left is not None:
        u, w = p.utility, p.weights
        cand = np.flatnonzero(pre.free & (u > 0))
        zero = cand[w[cand] <= 0]
        rest = cand[w[cand] > 0]
        rest = rest[np.argsort(-u[rest] / w[rest], kind="stable")]
        cum = np.cumsum(w[rest])
        full = int(np.searchsorted(cum, pre.budget_left, side="right"))
        val = float(u[pre.keep].sum() + u[zero].sum() + u[rest[:full]].sum())
        if full < len(rest):
            room = pre.budget_left - (cum[full - 1] if full else 0.0)
            val += float(u[rest[full]] * room / w[rest[full]])
        bound = min(bound, val)
    return bound


class _Repair:
    """State of the greedy repair: kept set, blocked items, quota counts, capacity/budget used."""

    def __init__(self, p: RetentionProblem, pre: Presolve) -> None:
        self.p, self.pre, n = p, pre, p.n
        self.kept = pre.keep.copy()
        self.blocked = pre.forget.copy()
        self.fwd: dict[int, list[int]] = {}
        for a, b in pre.imp.tolist():
            self.fwd.setdefault(a, []).append(b)
        self.excl: dict[int, list[int]] = {}
        for a, b in pre.exc.tolist():
            self.excl.setdefault(a, []).append(b)
            self.excl.setdefault(b, []).append(a)
        self.q_of: dict[int, list[int]] = {}
        self.q_count = np.zeros(len(pre.quotas), np.int64)
        self.q_hi = np.array([hi for _, _, _, hi in pre.quotas], np.int64)
        for j, (_, mem, _, _) in enumerate(pre.quotas):
            for i in mem.tolist():
                self.q_of.setdefault(i, []).append(j)
        self.count = 0     # unfixed items kept so far
        self.weight = 0.0  # their weight
        self.u = p.utility.tolist()
        self.w = p.weights.tolist() if p.weights is not None else [0.0] * n
        self.hard_cap = pre.cap_left if (pre.cap_left is not None and pre.penalty is None) else None

    def closure(self, i: int) -> list[int] | None:
        """Items that keeping ``i`` adds (i and everything it implies), or None if blocked."""
        if self.kept[i]:
            return []
        seen, order, queue = {i}, [i], deque([i])
        while queue:
            a = queue.popleft()
            if self.blocked[a]:
                return None
            for b in self.fwd.get(a, ()):
                if b not in seen and not self.kept[b]:
                    seen.add(b)
                    order.append(b)
                    queue.append(b)
        for a in order:  # an exclusion inside the addition itself
            if any(b in seen for b in self.excl.get(a, ())):
                return None
        return order

    def gain(self, add: list[int]) -> float:
        g = sum(self.u[a] for a in add)
        pre = self.pre
        if pre.penalty is not None and pre.cap_left is not None:
            before = max(0, self.count - pre.cap_left)
            after = max(0, self.count + len(add) - pre.cap_left)
            g -= pre.penalty * (after - before)
        return g

    def cost(self, add: list[int]) -> float:
        """Share of the scarce resources an addition uses (slots and/or budget)."""
        pre, c = self.pre, 0.0
        if pre.cap_left is not None and pre.penalty is None:
            c += len(add) / max(pre.cap_left, 1)
        if pre.budget_left is not None:
            c += sum(self.w[a] for a in add) / max(pre.budget_left, _EPS)
        return c if c > 0 else len(add) * _EPS

    def fits(self, add: list[int]) -> bool:
        pre = self.pre
        if pre.cap_left is not None and pre.penalty is None and self.count + len(add) > pre.cap_left:
            return False
        if pre.budget_left is not None and self.weight + sum(self.w[a] for a in add) > pre.budget_left + 1e-9:
            return False
        if len(self.q_hi):
            extra = np.zeros(len(self.q_hi), np.int64)
            for a in add:
                for j in self.q_of.get(a, ()):
                    extra[j] += 1
            if ((self.q_hi >= 0) & (self.q_count + extra > self.q_hi)).any():
                return False
        return True

    def take(self, add: list[int]) -> None:
        for a in add:
            self.kept[a] = True
            for b in self.excl.get(a, ()):
                self.blocked[b] = True
            for j in self.q_of.get(a, ()):
                self.q_count[j] += 1
        self.count += len(add)
        self.weight += sum(self.w[a] for a in add)


def greedy_repair(p: RetentionProblem, pre: Presolve) -> np.ndarray | None:
    """A rule-respecting greedy answer, or None if greedy could not meet every quota minimum."""
    st = _Repair(p, pre)
    u = p.utility
    for j, (_, mem, lo, _) in enumerate(pre.quotas):  # quota minimums first
        while st.q_count[j] < lo:
            best: tuple[float, int, list[int]] | None = None
            for i in mem.tolist():
                add = st.closure(i)
                if add and st.fits(add):
                    g = st.gain(add)
                    if best is None or g > best[0]:
                        best = (g, i, add)
            if best is None:
                return None
            st.take(best[2])
    # Items in residual rules go through a lazy heap (their closure changes as others are kept);
    # loose items have a fixed score, so they stream from one sorted array and merge with the heap.
    in_rules = np.zeros(p.n, bool)
    in_rules[pre.imp.ravel()] = True
    in_rules[pre.exc.ravel()] = True
    for _, mem, _, _ in pre.quotas:
        in_rules[mem] = True
    open_pos = pre.free & (u > 0) & ~st.kept
    heap = [(-u[i] / st.cost([i]), i) for i in np.flatnonzero(open_pos & in_rules).tolist()]
    heapq.heapify(heap)
    loose = np.flatnonzero(open_pos & ~in_rules)
    l_cost = np.zeros(len(loose))  # st.cost([i]) for every loose item at once
    if pre.cap_left is not None and pre.penalty is None:
        l_cost += 1.0 / max(pre.cap_left, 1)
    if pre.budget_left is not None:
        l_cost += np.asarray(st.w)[loose] / max(pre.budget_left, _EPS)
    l_cost[l_cost <= 0] = _EPS
    l_score = u[loose] / l_cost
    order = np.argsort(-l_score, kind="stable")
    loose_l, l_score_l = loose[order].tolist(), l_score[order].tolist()
    l_sorted = l_score[order]
    # Loose items touch no exclusion or quota; without a budget or soft capacity they can be
    # taken in runs (all positive, one slot each).
    bulk = pre.budget_left is None and pre.penalty is None
    ptr = 0
    while heap or ptr < len(loose_l):
        if st.hard_cap is not None and st.count >= st.hard_cap:
            break  # every addition needs a slot
        if not heap or (ptr < len(loose_l) and l_score_l[ptr] > -heap[0][0]):
            if bulk:  # count capacity only: take the whole run of loose items that beats the heap
                top = -heap[0][0] if heap else -np.inf
                end = ptr + int(np.searchsorted(-l_sorted[ptr:], -top, side="left"))
                end = min(max(end, ptr + 1), ptr + st.hard_cap - st.count if st.hard_cap is not None else len(loose_l))
                run = loose_l[ptr:end]
                st.kept[run] = True
                st.count += len(run)
                ptr = end
                continue
            i = loose_l[ptr]
            ptr += 1
            if st.gain([i]) > _EPS and st.fits([i]):
                st.take([i])
            continue
        neg, i = heapq.heappop(heap)
        add = st.closure(i)
        if not add:
            continue
        g = st.gain(add)
        if g <= _EPS:
            continue
        score = g / st.cost(add)
        if score < -neg - 1e-12:  # its closure grew or got cheaper elsewhere: re-queue at the new score
            heapq.heappush(heap, (-score, i))
            continue
        if st.fits(add):
            st.take(add)
    return st.kept
