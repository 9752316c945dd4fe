"""A scope's place in the store's experiments and the outcomes it records (seed 000 §5.3.3).

:func:`arm_settings` puts a user in one arm of each experiment of ``StoreConfig.experiments``
(:meth:`runtime.experiments.Experiment.assign`: deterministic and sticky) and returns what the arms
change for the scope: its retention policy and its recall defaults. :func:`record` is
``Scope.feedback``: one typed outcome event, checked at the boundary, stored with the user's arms.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..errors import NotFoundError, ValidationError
from ..record.memir import utcnow

if TYPE_CHECKING:
    from ..experiments.design import Experiment
    from ..experiments.events import Feedback
    from ..retention.policy import RetentionPolicy
    from .scope_core import ScopeCore

__all__ = ["arm_settings", "record"]


def arm_settings(experiments: Sequence[Experiment], user_id: str, policy: RetentionPolicy
                 ) -> tuple[dict[str, str], RetentionPolicy, dict[str, Any]]:
    """``(experiment → arm name, the scope's policy, its recall defaults)`` for ``user_id``."""
    arms: dict[str, str] = {}
    recall: dict[str, Any] = {}
    for e in experiments:
        arm = e.assign(user_id)
        arms[e.name] = arm.name
        recall.update(arm.recall)
        if arm.policy is not None:
            policy = arm.policy
    return arms, policy, recall


def record(core: ScopeCore, kind: str, value: float | bool | None, *, memory_id: str | None, task_id: str | None,
           session_id: str | None, now: datetime | None, arms: Mapping[str, str]) -> Feedback:
    """Validate one outcome event of the scope and append it to the scope's log.

    Raises:
        ValidationError: a bad kind, value or id (the field is named).
        NotFoundError: ``memory_id`` is not a memory of this scope.
    """
    from pydantic import ValidationError as PydanticValidationError

    from ..experiments.events import Feedback

    try:
        fb = Feedback(user_id=core.user_id, agent_id=core.agent_id, at=now or utcnow(), kind=kind,  # type: ignore[arg-type]
                      value=value, memory_id=memory_id, task_id=task_id, session_id=session_id, arms=dict(arms))
    except PydanticValidationError as e:
        raise ValidationError.from_pydantic(e, what="feedback") from None
    if fb.memory_id is not None and core.tenant.tier_of(fb.memory_id) is None:
        raise NotFoundError(f"no memory {fb.memory_id!r} in this scope: feedback is about a memory the scope recalled")
    core.tenant.record_feedback(fb)
    return fb
