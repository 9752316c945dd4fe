"""The retention problem as data: which items, what they are worth, and the rules they must obey.

maximise  Σ u_i·x_i  − overflow_penalty · max(0, Σ x_i − K)          (the penalty only if soft)
s.t.      Σ x_i ≤ K            (count capacity; hard unless ``overflow_penalty`` is set)
          Σ w_i·x_i ≤ B        (budget, e.g. tokens)
          x_i = 1 (must_keep),  x_j = 0 (must_forget)
          x_a ≤ x_b            (implies: keep a ⇒ keep b)
          x_a + x_b ≤ 1        (excludes: not both)
          min_g ≤ Σ_{i∈g} x_i ≤ max_g   (quotas)
          x ∈ {0,1}^N

Everything is validated at construction; a bad field raises :class:`runtime.errors.ValidationError`
listing every problem. Rules may carry names so an infeasibility error can say *which* rules clash.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from ...errors import ValidationError

__all__ = ["OnInfeasible", "Quota", "RetentionProblem", "TaskCapacity"]

OnInfeasible = Literal["raise", "overflow"]

# Accepted spellings of an item rule list and of a pair rule list (documented on RetentionProblem).
ItemRules = Sequence[int] | Mapping[int, str]
PairRule = tuple[int, int] | tuple[int, int, str]


@dataclass(frozen=True)
class Quota:
    """A bound on how many of ``members`` are kept: ``min ≤ Σ_{i∈members} x_i ≤ max``.

    Attributes:
        members: item indices in the group (no duplicates).
        min: at least this many members are kept (0 = no lower bound).
        max: at most this many members are kept (``None`` = no upper bound).
        name: shown in explanations and infeasibility errors; defaults to ``"quota[k]"``.
    """

    members: Sequence[int]
    min: int = 0
    max: int | None = None
    name: str | None = None


@dataclass(frozen=True)
class TaskCapacity:
    """A capacity that grows with the task (seed 001, pitfall 2: a fixed K is too rigid).

    ``K = clip(base + per_entity·entities + per_1k_chars·chars/1000 + per_utility·Σu⁺, minimum, maximum)``.

    Attributes:
        base: items kept for a trivial task.
        per_entity: extra items per entity the task mentions (people, projects, places...).
        per_1k_chars: extra items per 1,000 characters of user instructions.
        per_utility: extra items per unit of total positive utility among the candidates.
        minimum: never fewer slots than this.
        maximum: never more slots than this.
    """

    base: int = 20
    per_entity: float = 1.0
    per_1k_chars: float = 2.0
    per_utility: float = 0.0
    minimum: int = 5
    maximum: int = 500

    def __post_init__(self) -> None:
        if self.minimum < 0 or self.maximum < self.minimum:
            raise ValidationError("TaskCapacity needs 0 ≤ minimum ≤ maximum", field="TaskCapacity.minimum")

    def resolve(self, *, entities: int = 0, instruction_chars: int = 0,
                utility: np.ndarray | None = None) -> int:
        """Return the capacity K for a task of this size.

        Example:
            >>> TaskCapacity(base=10, per_entity=2).resolve(entities=3)
            16
        """
        pos = float(np.clip(utility, 0, None).sum()) if utility is not None else 0.0
        k = (self.base + self.per_entity * entities + self.per_1k_chars * instruction_chars / 1000.0
             + self.per_utility * pos)
        return int(min(self.maximum, max(self.minimum, math.floor(k))))


def _is_index(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


@dataclass(frozen=True, eq=False)
class RetentionProblem:
    """One retention decision: N items, their utilities, a capacity and the hard rules.

    Construction normalises and validates every field (collecting all problems, then raising one
    :class:`~runtime.errors.ValidationError`). After construction the public fields hold the
    normalised forms noted below; the object is immutable.

    Attributes:
        utility: one finite float per item (→ read-only float64 array). Items with utility ≤ 0 are
            never kept unless a rule forces them, even when there is spare capacity.
        capacity: count capacity K ≥ 0 (``Σ x ≤ K``); ``None`` = no count limit.
        weights: optional non-negative cost per item, e.g. tokens (→ read-only float64 array).
        budget: ``Σ w·x ≤ budget``; requires ``weights``. ``None`` = no budget.
        must_keep: items that must be kept — a list of indices, or ``{index: rule_name}``
            (→ tuple of indices; names via :meth:`rule_name`).
        must_forget: items that must be forgotten, same forms as ``must_keep``.
        implies: pairs ``(a, b)`` or ``(a, b, name)``: keeping a requires keeping b (→ tuple of pairs).
        excludes: pairs ``(a, b)`` or ``(a, b, name)``: a and b are never both kept (a ≠ b).
        quotas: :class:`Quota` groups (→ tuple of quotas with names filled in).
        item_ids: optional unique string id per item, used in explanations.
        overflow_penalty: if set, the count capacity is *soft*: each item kept beyond K costs this
            much utility (so an item is kept past K only if it is worth more than the penalty).
        on_infeasible: ``"raise"`` (default) raises :class:`~runtime.errors.InfeasibleError` naming
            the rules in conflict. ``"overflow"`` keeps every hard rule and exceeds the capacity,
            budget or quota maximum as little as needed, reporting ``RetentionResult.overflow``.
            Contradictions among the logical rules themselves (must-keep vs must-forget through
            implications or exclusions) and unreachable quota minimums still raise.

    Example:
        >>> p = RetentionProblem(utility=[0.9, 0.2, 0.5], capacity=1, implies=[(0, 1, "budget⇒deadline")])
        >>> p.rule_name("implies", 0)
        'budget⇒deadline'
    """

    utility: Any
    capacity: int | None = None
    weights: Any = None
    budget: float | None = None
    must_keep: Any = ()
    must_forget: Any = ()
    implies: Any = ()
    excludes: Any = ()
    quotas: Any = ()
    item_ids: Sequence[str] | None = None
    overflow_penalty: float | None = None
    on_infeasible: OnInfeasible = "raise"
    # Normalised index arrays and explicit rule names (filled in __post_init__).
    _names: dict[str, dict[int, str]] = field(init=False, repr=False, default_factory=dict)
    _arrays: dict[str, np.ndarray] = field(init=False, repr=False, default_factory=dict)

    def __post_init__(self) -> None:
        problems: list[tuple[str, str]] = []
        u = self._float_array("utility", self.utility, problems)
        n = 0 if u is None else len(u)
        if u is not None:
            object.__setattr__(self, "utility", u)
        self._check_capacity(problems)
        self._check_weights(n, problems)
        self._check_item_rules("must_keep", n, problems)
        self._check_item_rules("must_forget", n, problems)
        self._check_pairs("implies", n, problems)
        self._check_pairs("excludes", n, problems)
        self._check_quotas(n, problems)
        self._check_item_ids(n, problems)
        if self.on_infeasible not in ("raise", "overflow"):
            problems.append(("on_infeasible", f"must be 'raise' or 'overflow', got {self.on_infeasible!r}"))
        if problems:
            msg = "; ".join(f"{f}: {m}" for f, m in problems)
            raise ValidationError(f"invalid RetentionProblem — {msg}", field=problems[0][0], problems=problems)

    # ------------------------------------------------------------------ public helpers
    @property
    def n(self) -> int:
        """Number of items."""
        return len(self.utility)

    def arr(self, key: str) -> np.ndarray:
        """Internal normalised int arrays: ``keep``, ``forget``, ``imp`` (M×2), ``exc`` (M×2)."""
        return self._arrays[key]

    def rule_name(self, kind: str, index: int) -> str:
        """Name of one rule: ``kind`` is must_keep/must_forget (index = item) or implies/excludes/quota
        (index = position in that list). Defaults: ``must_keep[item 3]``, ``implies(5⇒7)``."""
        explicit = self._names.get(kind, {}).get(index)
        if explicit is not None:
            return explicit
        if kind in ("must_keep", "must_forget"):
            return f"{kind}[item {self.item_label(index)}]"
        if kind == "implies":
            a, b = self._arrays["imp"][index]
            return f"implies({self.item_label(int(a))}⇒{self.item_label(int(b))})"
        if kind == "excludes":
            a, b = self._arrays["exc"][index]
            return f"excludes({self.item_label(int(a))},{self.item_label(int(b))})"
        if kind == "quota":
            return str(self.quotas[index].name)
        raise KeyError(kind)

    def item_label(self, i: int) -> str:
        """``item_ids[i]`` if ids were given, else the index as text."""
        return str(self.item_ids[i]) if self.item_ids is not None else str(i)

    # ------------------------------------------------------------------ validation pieces
    @staticmethod
    def _float_array(name: str, value: Any, problems: list[tuple[str, str]]) -> np.ndarray | None:
        try:
            a = np.array(value, dtype=np.float64)  # a copy: the caller may mutate theirs
        except (TypeError, ValueError):
            problems.append((name, "must be a 1-D array of numbers"))
            return None
        if a.ndim != 1:
            problems.append((name, f"must be 1-D, got shape {a.shape}"))
            return None
        if not np.isfinite(a).all():
            bad = np.flatnonzero(~np.isfinite(a))[:5].tolist()
            problems.append((name, f"must be finite; NaN/inf at items {bad}"))
        a.setflags(write=False)
        return a

    def _check_capacity(self, problems: list[tuple[str, str]]) -> None:
        k = self.capacity
        if k is not None and (not _is_index(k) or k < 0):
            problems.append(("capacity", f"must be an int ≥ 0 or None, got {k!r}"))
        elif k is not None:
            object.__setattr__(self, "capacity", int(k))
        pen = self.overflow_penalty
        if pen is not None:
            if not isinstance(pen, (int, float, np.floating, np.integer)) or not math.isfinite(pen) or pen < 0:
                problems.append(("overflow_penalty", f"must be a finite number ≥ 0, got {pen!r}"))
            elif k is None:
                problems.append(("overflow_penalty", "a soft capacity needs capacity=K (the count it penalises above)"))
            else:
                object.__setattr__(self, "overflow_penalty", float(pen))

    def _check_weights(self, n: int, problems: list[tuple[str, str]]) -> None:
        if self.weights is not None:
            w = self._float_array("weights", self.weights, problems)
            if w is not None:
                if len(w) != n:
                    problems.append(("weights", f"needs one weight per item ({n}), got {len(w)}"))
                elif (w < 0).any():
                    problems.append(("weights", f"must be ≥ 0; negative at items {np.flatnonzero(w < 0)[:5].tolist()}"))
                object.__setattr__(self, "weights", w)
        b = self.budget
        if b is not None:
            if not isinstance(b, (int, float, np.floating, np.integer)) or not math.isfinite(b) or b < 0:
                problems.append(("budget", f"must be a finite number ≥ 0, got {b!r}"))
            elif self.weights is None:
                problems.append(("budget", "a budget needs weights= (one cost per item, e.g. tokens)"))
            else:
                object.__setattr__(self, "budget", float(b))

    def _check_item_rules(self, kind: str, n: int, problems: list[tuple[str, str]]) -> None:
        value = getattr(self, kind)
        names: dict[int, str] = {}
        if isinstance(value, Mapping):
            items = list(value.keys())
            for i, nm in value.items():
                if not isinstance(nm, str) or not nm:
                    problems.append((f"{kind}[{i}]", "rule name must be a non-empty string"))
                elif _is_index(i):
                    names[int(i)] = nm
        elif isinstance(value, (str, bytes)) or not isinstance(value, (Sequence, np.ndarray)):
            problems.append((kind, "must be a list of item indices or a {index: rule_name} dict"))
            items = []
        else:
            items = list(value)
        bad = [i for i in items if not _is_index(i) or not 0 <= i < n]
        if bad:
            problems.append((kind, f"indices must be ints in [0, {n}); bad: {bad[:5]}"))
        idx = np.unique(np.array([int(i) for i in items if _is_index(i) and 0 <= i < n], dtype=np.int64))
        object.__setattr__(self, kind, tuple(int(i) for i in idx))
        self._arrays["keep" if kind == "must_keep" else "forget"] = idx
        self._names[kind] = names

    def _check_pairs(self, kind: str, n: int, problems: list[tuple[str, str]]) -> None:
        value = getattr(self, kind)
        pairs: list[tuple[int, int]] = []
        names: dict[int, str] = {}
        if isinstance(value, (str, bytes)) or not isinstance(value, (Sequence, np.ndarray)):
            problems.append((kind, "must be a list of (a, b) or (a, b, name) tuples"))
            value = ()
        for k, rule in enumerate(value):
            where = f"{kind}[{k}]"
            if not isinstance(rule, (tuple, list, np.ndarray)) or len(rule) not in (2, 3):
                problems.append((where, f"must be (a, b) or (a, b, name), got {rule!r}"))
                continue
            a, b = rule[0], rule[1]
            if not (_is_index(a) and _is_index(b) and 0 <= a < n and 0 <= b < n):
                problems.append((where, f"items must be ints in [0, {n}), got ({a!r}, {b!r})"))
                continue
            if kind == "excludes" and a == b:
                problems.append((where, f"an item cannot exclude itself (item {a}); use must_forget"))
                continue
            if len(rule) == 3:
                if not isinstance(rule[2], str) or not rule[2]:
                    problems.append((where, "rule name must be a non-empty string"))
                    continue
                names[len(pairs)] = rule[2]
            pairs.append((int(a), int(b)))
        object.__setattr__(self, kind, tuple(pairs))
        arr = np.array(pairs, dtype=np.int64).reshape(-1, 2)
        self._arrays["imp" if kind == "implies" else "exc"] = arr
        self._names[kind] = names

    def _check_quotas(self, n: int, problems: list[tuple[str, str]]) -> None:
        value = self.quotas
        if isinstance(value, Quota):
            value = (value,)
        out: list[Quota] = []
        for k, q in enumerate(value):
            where = f"quotas[{k}]"
            if not isinstance(q, Quota):
                problems.append((where, f"must be a Quota, got {type(q).__name__}"))
                continue
            mem = list(q.members) if isinstance(q.members, (Sequence, np.ndarray)) else None
            if mem is None or isinstance(q.members, (str, bytes)):
                problems.append((f"{where}.members", "must be a list of item indices"))
                continue
            bad = [i for i in mem if not _is_index(i) or not 0 <= i < n]
            if bad:
                problems.append((f"{where}.members", f"indices must be ints in [0, {n}); bad: {bad[:5]}"))
                continue
            if len({int(i) for i in mem}) != len(mem):
                problems.append((f"{where}.members", "contains duplicates"))
                continue
            if not _is_index(q.min) or q.min < 0:
                problems.append((f"{where}.min", f"must be an int ≥ 0, got {q.min!r}"))
                continue
            if q.max is not None and (not _is_index(q.max) or q.max < q.min):
                problems.append((f"{where}.max", f"must be None or an int ≥ min ({q.min}), got {q.max!r}"))
                continue
            if q.name is not None and (not isinstance(q.name, str) or not q.name):
                problems.append((f"{where}.name", "must be a non-empty string"))
                continue
            out.append(Quota(members=tuple(sorted(int(i) for i in mem)), min=int(q.min),
                             max=None if q.max is None else int(q.max), name=q.name or f"quota[{k}]"))
        object.__setattr__(self, "quotas", tuple(out))

    def _check_item_ids(self, n: int, problems: list[tuple[str, str]]) -> None:
        ids = self.item_ids
        if ids is None:
            return
        if isinstance(ids, (str, bytes)) or not isinstance(ids, (Sequence, np.ndarray)):
            problems.append(("item_ids", "must be a list of strings, one per item"))
            return
        ids = [str(i) if isinstance(i, str) else i for i in ids]
        if len(ids) != n:
            problems.append(("item_ids", f"needs one id per item ({n}), got {len(ids)}"))
        elif not all(isinstance(i, str) for i in ids):
            problems.append(("item_ids", "must all be strings"))
        elif len(set(ids)) != n:
            problems.append(("item_ids", "must be unique"))
        else:
            object.__setattr__(self, "item_ids", tuple(ids))
