"""Decomposition of the open items into *units* whose choices are independent but for shared limits.

A unit is a connected component of the open items under the residual implications and exclusions
(an item in no such rule is a unit of one). Inside a unit every subset is enumerated (≤ ``ENUM_MAX``
items: 2^s subsets, vectorised and batched by size), infeasible ones (breaking an implication or an
exclusion) get value −inf. Across units only the capacity, the budget and the quotas couple the
choices, which is what :mod:`.lagrange` relaxes and :mod:`.exact` solves.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .hard import Presolve

__all__ = ["ENUM_MAX", "Group", "Units", "build_units"]

ENUM_MAX = 16  # 2^16 subsets × 16 bits per component is a few MB; larger components go to HiGHS whole
_BITS: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # s → (subset bits (2^s, s), popcount), lazily


def subset_bits(s: int) -> tuple[np.ndarray, np.ndarray]:
    """All subsets of s items as a bool matrix (row = subset index) and their sizes."""
    if s not in _BITS:
        bits = ((np.arange(1 << s)[:, None] >> np.arange(s)[None, :]) & 1).astype(bool)
        _BITS[s] = (bits, bits.sum(1))
    return _BITS[s]


@dataclass
class Group:
    """All units of one size s.

    Attributes:
        s: items per unit. idx: (n_units, s) item indices. bits/pop: subset matrix and sizes.
        vals: (n_units, 2^s) utility of each subset, −inf where a rule inside the unit breaks.
    """

    s: int
    idx: np.ndarray
    bits: np.ndarray
    pop: np.ndarray
    vals: np.ndarray

    def profile(self) -> tuple[np.ndarray, np.ndarray]:
        """``f[c, k]`` = best value keeping exactly k items of unit c, and the subset achieving it."""
        n_c = len(self.idx)
        f = np.full((n_c, self.s + 1), -np.inf)
        arg = np.zeros((n_c, self.s + 1), np.int64)
        for k in range(self.s + 1):
            sub = np.flatnonzero(self.pop == k)
            v = self.vals[:, sub]
            a = v.argmax(1)
            f[:, k] = v[np.arange(n_c), a]
            arg[:, k] = sub[a]
        return f, arg


@dataclass
class Units:
    """The open items as groups of equal-size units (single loose items form the group of size 1)."""

    groups: list[Group]

    @property
    def n_units(self) -> int:
        return sum(len(g.idx) for g in self.groups)


def _labels(n: int, pairs: np.ndarray) -> np.ndarray:
    """Connected-component label (smallest member) per item: min-label propagation with pointer
    jumping, vectorised (components here are small, so it converges in a few rounds)."""
    lab = np.arange(n)
    if not len(pairs):
        return lab
    a, b = pairs[:, 0], pairs[:, 1]
    while True:
        m = np.minimum(lab[a], lab[b])
        new = lab.copy()
        np.minimum.at(new, a, m)
        np.minimum.at(new, b, m)
        new = new[new]  # pointer jumping: follow labels to their own labels
        if np.array_equal(new, lab):
            return lab
        lab = new


def build_units(u: np.ndarray, pre: Presolve, *, loose_only: np.ndarray | None = None) -> Units | None:
    """Group the open items (``pre.free``) into units; None if a component exceeds ``ENUM_MAX``.

    Args:
        u: utilities.
        pre: the hard-rule result (its ``imp``/``exc`` are the residual rules among open items).
        loose_only: optional mask of open items to include as single-item units (default: all
            open items in no residual implication/exclusion).
    """
    n = len(u)
    related = np.zeros(n, bool)
    related[pre.imp.ravel()] = True
    related[pre.exc.ravel()] = True
    loose = pre.free & ~related if loose_only is None else loose_only
    groups: list[Group] = []
    li = np.flatnonzero(loose)
    if len(li):
        bits, pop = subset_bits(1)
        vals = np.stack([np.zeros(len(li)), u[li]], 1)
        groups.append(Group(1, li[:, None], bits, pop, vals))
    items = np.flatnonzero(related)
    if not len(items):
        return Units(groups)
    local = np.full(n, -1, np.int64)
    local[items] = np.arange(len(items))
    pairs = np.concatenate([pre.imp, pre.exc])
    lab = _labels(len(items), local[pairs])
    order = np.argsort(lab, kind="stable")
    _, start, size = np.unique(lab[order], return_index=True, return_counts=True)
    if size.max() > ENUM_MAX:
        return None
    # Position of each item inside its unit, for translating rules into bit tests.
    slot = np.empty(len(items), np.int64)
    slot[order] = np.arange(len(items)) - np.repeat(start, size)
    unit_of = np.empty(len(items), np.int64)
    unit_of[order] = np.repeat(np.arange(len(start)), size)
    for s in np.unique(size).tolist():
        us = np.flatnonzero(size == s)
        row = np.full(len(start), -1, np.int64)
        row[us] = np.arange(len(us))
        idx = items[order[start[us][:, None] + np.arange(s)[None, :]]]
        bits, pop = subset_bits(s)
        vals = u[idx] @ bits.T.astype(np.float64)
        ok = np.ones(vals.shape, bool)
        for rules, both in ((pre.imp, False), (pre.exc, True)):
            if not len(rules):
                continue
            la, lb = local[rules[:, 0]], local[rules[:, 1]]
            sel = size[unit_of[la]] == s
            if not sel.any():
                continue
            la, lb = la[sel], lb[sel]
            ba, bb = bits[:, slot[la]], bits[:, slot[lb]]  # (2^s, E)
            bad = (ba & bb) if both else (ba & ~bb)
            r = row[unit_of[la]]
            o = np.argsort(r, kind="stable")
            first = np.flatnonzero(np.r_[True, np.diff(r[o]) != 0])
            anybad = np.logical_or.reduceat(bad[:, o], first, axis=1)  # (2^s, units with rules)
            ok[r[o][first]] &= ~anybad.T
        vals[~ok] = -np.inf
        groups.append(Group(s, idx, bits, pop, vals))
    return Units(groups)
