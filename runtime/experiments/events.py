"""Outcome events: what ``Scope.feedback`` records (seed 000 §5.3.3: business outcomes such as
resolution rate or satisfaction).

Every event is typed (its kind fixes what ``value`` and ``memory_id`` must be), scoped (the user and
agent of the scope that recorded it, nothing else can write it there) and carries the arm of every
experiment its user was in when it happened, so a report never has to recompute an assignment.
Events hold ids and numbers only: no free text reaches the log.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..record.memir import Id, Label, UTCDateTime

__all__ = ["FEEDBACK_KINDS", "Feedback", "FeedbackKind"]

FeedbackKind = Literal["resolved", "satisfaction", "useful", "wrong"]
FEEDBACK_KINDS: tuple[str, ...] = ("resolved", "satisfaction", "useful", "wrong")
"""``resolved``: a task ended (``value`` 1 resolved, 0 not; default 1); ``satisfaction``: a rating
in [0, 1] (``value`` required); ``useful`` / ``wrong``: a recalled memory helped, or misled
(``memory_id`` required, no value)."""


class Feedback(BaseModel):
    """One outcome event (see the module docstring).

    Attributes:
        user_id, agent_id: the scope that recorded it.
        at: when it happened (UTC).
        kind: :data:`FEEDBACK_KINDS`.
        value: 1/0 for ``resolved``, [0, 1] for ``satisfaction``, None otherwise.
        memory_id: the memory a ``useful``/``wrong`` event is about (in the scope when recorded).
        task_id, session_id: what it belongs to, if given.
        arms: experiment name → the user's arm when it happened.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    user_id: Id
    agent_id: Id
    at: UTCDateTime
    kind: FeedbackKind
    value: float | None = None
    memory_id: Id | None = None
    task_id: Id | None = None
    session_id: Id | None = None
    arms: dict[Label, Label] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _typed(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        d = dict(data)
        kind, v = d.get("kind"), d.get("value")
        if kind == "resolved":
            if v is None:
                v = 1.0
            if isinstance(v, bool):
                v = float(v)
            if v not in (0, 1):
                raise ValueError(f"resolved takes value=True/False (1/0), got {v!r}")
            d["value"] = float(v)
        elif kind == "satisfaction":
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 <= float(v) <= 1.0:
                raise ValueError(f"satisfaction takes value= a number in [0, 1] (rescale a 1-5 rating), got {v!r}")
            d["value"] = float(v)
        elif kind in ("useful", "wrong"):
            if v is not None:
                raise ValueError(f"{kind} takes no value, only memory_id=")
            if not d.get("memory_id"):
                raise ValueError(f"{kind} needs memory_id= (the recalled memory it is about)")
        return d

    @property
    def at_ts(self) -> float:
        """``at`` as POSIX seconds."""
        return self.at.timestamp()

