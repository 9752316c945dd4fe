"""The small vocabularies of a retention decision: per-item reason codes and result statuses.

Kept apart so the solvers, the hard-rule pass and the explanation builder share one spelling, and so
the store can persist a code as a plain string (``Reason.MUST_KEEP == "must_keep"``).
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["REASON_CODES", "Reason", "Status"]


class Reason(StrEnum):
    """Why an item was kept or forgotten. The first group keeps, the second forgets.

    Hard-rule reasons (decided before any optimisation, deterministically):
    ``must_keep``, ``forced_by_implication`` (a must-keep item implies it, possibly through a chain),
    ``must_forget``, ``forgotten_by_implication`` (keeping it would force a must-forget item),
    ``excluded_by`` (an exclusion partner is kept — by a hard rule or by the optimiser).

    Optimiser reasons: ``above_cut`` (kept on its own utility), ``required_by_implication`` (kept
    because a kept item implies it although its own utility would not earn a place),
    ``quota_min`` (kept to reach a quota minimum), ``below_cut`` (lost the competition for
    capacity), ``nonpositive_utility`` (utility ≤ 0: never worth a place unless forced — even
    with spare capacity), ``requires_dropped`` (it implies an item that was dropped),
    ``quota_max`` (its quota is full), ``over_budget`` (it does not fit in the remaining budget).

    Not the optimiser's: ``accessed`` (a cold memory promoted to the working tier because a recall
    returned it; :mod:`runtime.store.tiers`).
    """

    MUST_KEEP = "must_keep"
    FORCED_BY_IMPLICATION = "forced_by_implication"
    ABOVE_CUT = "above_cut"
    REQUIRED_BY_IMPLICATION = "required_by_implication"
    QUOTA_MIN = "quota_min"
    MUST_FORGET = "must_forget"
    FORGOTTEN_BY_IMPLICATION = "forgotten_by_implication"
    EXCLUDED_BY = "excluded_by"
    NONPOSITIVE_UTILITY = "nonpositive_utility"
    REQUIRES_DROPPED = "requires_dropped"
    QUOTA_MAX = "quota_max"
    OVER_BUDGET = "over_budget"
    BELOW_CUT = "below_cut"
    ACCESSED = "accessed"


#: Index → code, so per-item reasons can live in a small int array until someone asks for strings.
REASON_CODES: tuple[Reason, ...] = tuple(Reason)


class Status(StrEnum):
    """How much to trust ``RetentionResult.keep``. Every status still satisfies every hard rule.

    ``optimal``: proven optimal (closed-form greedy where it is exact, the exact solver, or the
    MILP). ``greedy_repaired``: greedy asked for explicitly on a problem where greedy is not
    provably optimal; rules were enforced by repair, ``gap_bound`` says at most how much was given
    up. ``time_limit_incumbent``: a MILP hit its time limit; the best solution found so far was
    checked against every rule and returned. ``time_limit_greedy_fallback``: a MILP hit its time
    limit with no usable solution; the greedy-repair answer is returned instead.
    """

    OPTIMAL = "optimal"
    GREEDY_REPAIRED = "greedy_repaired"
    TIME_LIMIT_INCUMBENT = "time_limit_incumbent"
    TIME_LIMIT_GREEDY_FALLBACK = "time_limit_greedy_fallback"
