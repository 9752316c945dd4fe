"""Retention as a constrained optimisation: which memories to keep, under hard rules, explained.

Example:
    >>> from runtime.retention.solver import RetentionProblem, Quota, solve
    >>> p = RetentionProblem(utility=[0.9, 0.2, 0.5, -0.1], capacity=2, must_forget=[2],
    ...                      implies=[(0, 1)], quotas=[Quota(members=[1, 3], max=1)])
    >>> r = solve(p)
    >>> r.keep.tolist(), r.explanation.reason(2).value
    ([True, True, False, False], 'must_forget')

Only numpy is imported here; cvxpy and highspy are imported inside the functions that need them.
"""

from .check import objective, violations
from .dispatch import Method, solve
from .explain import Explanation, RetentionResult
from .problem import OnInfeasible, Quota, RetentionProblem, TaskCapacity
from .reasons import REASON_CODES, Reason, Status

__all__ = [
    "REASON_CODES",
    "Explanation",
    "Method",
    "OnInfeasible",
    "Quota",
    "Reason",
    "RetentionProblem",
    "RetentionResult",
    "Status",
    "TaskCapacity",
    "objective",
    "solve",
    "violations",
]
