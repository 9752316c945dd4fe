"""What every room behind a :class:`~runtime.store.scope.Scope` works on: one scope's parts.

The scope facade owns none of the work. It hands this object to the rooms that do it — the write
pipeline (:mod:`.writing`), session closing (:mod:`.session_close`), recall (:mod:`.recalling`),
retention (:mod:`.retaining`), forgetting and refresh — so each room reads the same store
services, tenant, policy and live context, and no room calls back up into the facade.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import NotFoundError, ValidationError
from ..record.memir import MemIR, is_id
from ..scoring.role_weights import RoleWeigher
from .backend import TenantBackend
from .live import LiveContext
from .ranking import RankWeights
from .services import StoreServices

if TYPE_CHECKING:
    from utilitynet.context import ScoringContext

    from ..retention.policy import RetentionPolicy

__all__ = ["ScopeCore", "check_id", "check_limit"]


@dataclass
class ScopeCore:
    """One scope object's parts: the store's services, the tenant's SQL, and the scope's settings.

    Attributes:
        store: the store-wide services (builder, assembler, encoder, default scorer, live contexts).
        tenant: the backend confined to this ``(user_id, agent_id)``.
        policy: the scope's retention policy (replaceable).
        weights: the recall re-ranking weights (replaceable).
        role_weigher: the dynamic role-weight model (``None``: the shipped one).
        arms: experiment → the user's arm (``StoreConfig.experiments``).
        recall_defaults: recall settings the arms set (used where a recall passes none).
    """

    store: StoreServices
    tenant: TenantBackend
    policy: RetentionPolicy
    weights: RankWeights = field(default_factory=RankWeights)
    role_weigher: RoleWeigher | None = None
    arms: dict[str, str] = field(default_factory=dict)
    recall_defaults: dict[str, Any] = field(default_factory=dict)

    @property
    def user_id(self) -> str:
        return self.tenant.user_id

    @property
    def agent_id(self) -> str:
        return self.tenant.agent_id

    def live(self, *, session: bool = True) -> LiveContext:
        """The scope's live context (shared by every scope object of it), its open session read once
        from the store — unless ``session`` is False: a reader of in-process state only (a recall
        reading the acting role) need not open a transaction for it."""
        live = self.store.live(self.user_id, self.agent_id)
        if session and not live.loaded:
            with live.lock:
                if not live.loaded:
                    live.open_session = self.tenant.state().open_session
                    live.loaded = True
        return live

    def set_task(self, goal: str | None, stage: float | None) -> None:
        """The agent's goal (redacted, then embedded) and task stage in [0, 1] (``None`` clears)."""
        if stage is not None and (not isinstance(stage, (int, float)) or not 0.0 <= float(stage) <= 1.0):
            raise ValidationError(f"stage must be a number in [0, 1], got {stage!r}", field="stage")
        text = None if goal is None else self.store.builder.draft(goal, {}).text
        vec = None if text is None else np.asarray(self.store.embedder.encode([text])[0], dtype=np.float32)
        live = self.live()
        with live.lock:
            live.goal, live.goal_vector = text, vec
            live.stage = None if stage is None else float(stage)

    def session_context(self, ids: Sequence[str]) -> np.ndarray:
        """The stored session-context features of ``ids`` (row-aligned; NaN rows: session still open)."""
        from utilitynet.dialog import CONTEXT_NAMES  # the feature code loads with the first decision

        return self.tenant.session_context(list(ids), len(CONTEXT_NAMES))

    def scoring_context(self, now: datetime, steps: np.ndarray, recs: Sequence[MemIR],
                        recent_window: int) -> ScoringContext:
        """What the utility model scores ``recs`` with, from the live context and the stored features."""
        from ..retention.inputs import live_scoring_context

        live = self.live()
        with live.lock:
            goal, stage = live.goal_vector, live.stage
        return live_scoring_context(now=now, steps=steps, recent_vectors=self.tenant.recent_vectors(recent_window),
                                    goal=goal, stage=stage, session=self.session_context([r.id for r in recs]))

    def not_found(self, memory_id: str) -> NotFoundError:
        return NotFoundError(f"no memory {memory_id!r} in scope user={self.user_id!r} agent={self.agent_id!r}")


def check_id(value: Any, name: str = "memory_id") -> str:
    """An id argument must look like an id before it reaches SQL (a typed error otherwise)."""
    if not is_id(value):
        raise ValidationError(f"{name} must be an id (letters, digits and _ . : @ -, 1–128 characters), "
                              f"got {str(value)[:40]!r}", field=name)
    return value


def check_limit(limit: Any, *, allow_none: bool = True) -> Any:
    """A ``limit`` argument: an int >= 0 (or ``None`` where allowed)."""
    if limit is None and allow_none:
        return None
    if isinstance(limit, bool) or not isinstance(limit, int) or not 0 <= limit <= 2**62:
        raise ValidationError(f"limit must be an int >= 0{' or None' if allow_none else ''}, got {limit!r}",
                              field="limit")
    return limit
