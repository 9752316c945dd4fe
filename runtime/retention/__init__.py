"""Retention as a constrained optimisation: which memories to keep, under hard rules, explained.

- :mod:`.solver` — the pure optimiser: :class:`RetentionProblem` -> :func:`solve` -> answer.
- :mod:`.rules` — declarative rules over MemIR fields (YAML), compiled per decision.
- :mod:`.policy` — :class:`RetentionPolicy` and its :class:`Triggers`: how and when a scope decides.
- :mod:`.summary` — :class:`SummaryPolicy` and the extractive session summariser.
- :mod:`.plan` — :class:`RetentionPlan`: the one road from records to a typed decision.
- :mod:`.decision` — :class:`RetentionDecision`, :class:`MemoryExplanation` (pydantic).

Example:
    >>> from runtime.retention import RetentionProblem, Quota, solve
    >>> p = RetentionProblem(utility=[0.9, 0.2, 0.5, -0.1], capacity=2, must_forget=[2],
    ...                      implies=[(0, 1)], quotas=[Quota(members=[1, 3], max=1)])
    >>> r = solve(p)
    >>> r.keep.tolist(), r.explanation.reason(2).value
    ([True, True, False, False], 'must_forget')

Only numpy and pydantic are imported here; cvxpy and highspy are imported inside the functions
that need them.
"""

from typing import TYPE_CHECKING

from ..lazy import lazy_names

# Names resolve at first use (PEP 562), so importing one submodule (``runtime.retention.decision``)
# does not load the solver, the rules and the summariser with it.
_EXPORTS = {
    **dict.fromkeys(("extract_summary", "key_facts"), "..annotate.summary"),  # the summariser, re-exported
    **dict.fromkeys(("Action", "ItemDecision", "MemoryExplanation", "RetentionDecision"), ".decision"),
    **dict.fromkeys(("RetentionPlan", "approx_tokens", "audit", "recent_context", "scoring_context"), ".plan"),
    **dict.fromkeys(("CapacityFn", "RetentionPolicy", "Triggers"), ".policy"),
    **dict.fromkeys(("DEFAULT_RULES", "CompiledRules", "RuleSet", "load_rules"), ".rules"),
    **dict.fromkeys(("REASON_CODES", "Explanation", "Method", "OnInfeasible", "Quota", "Reason", "RetentionProblem",
                     "RetentionResult", "Status", "TaskCapacity", "objective", "solve", "violations"), ".solver"),
    "SummaryPolicy": ".summary_policy",
}

if TYPE_CHECKING:
    from ..annotate.summary import extract_summary, key_facts
    from .decision import Action, ItemDecision, MemoryExplanation, RetentionDecision
    from .plan import RetentionPlan, approx_tokens, audit, recent_context, scoring_context
    from .policy import CapacityFn, RetentionPolicy, Triggers
    from .rules import DEFAULT_RULES, CompiledRules, RuleSet, load_rules
    from .solver import (
        REASON_CODES,
        Explanation,
        Method,
        OnInfeasible,
        Quota,
        Reason,
        RetentionProblem,
        RetentionResult,
        Status,
        TaskCapacity,
        objective,
        solve,
        violations,
    )
    from .summary_policy import SummaryPolicy


__getattr__, __dir__ = lazy_names(__name__, _EXPORTS, globals())


__all__ = [
    "DEFAULT_RULES", "REASON_CODES", "Action", "CapacityFn", "CompiledRules", "Explanation", "ItemDecision",
    "MemoryExplanation", "Method", "OnInfeasible", "Quota", "Reason", "RetentionDecision", "RetentionPlan",
    "RetentionPolicy", "RetentionProblem", "RetentionResult", "RuleSet", "Status", "SummaryPolicy", "TaskCapacity",
    "Triggers", "approx_tokens", "audit", "extract_summary", "key_facts", "load_rules", "objective",
    "recent_context", "scoring_context", "solve", "violations",
]
