"""The live context an agent gives a scope: its task, its open session, its fill (in memory)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import numpy as np

__all__ = ["ActingAs", "LiveContext"]


@dataclass(frozen=True)
class ActingAs:
    """The agent's live role context (seed 000 §3.1, §4.4): the role and sub-role it acts in, the task
    it works on and the tone it must adopt. Writes take them unless given; recalls re-rank by the role."""

    active_role: str = "general"
    sub_role: str | None = None
    task_id: str | None = None
    required_tone: str | None = None


@dataclass
class LiveContext:
    """What an agent told a scope about its current task (in memory, per process).

    Attributes:
        goal: the redacted goal text; goal_vector: its unit embedding.
        stage: task progress in [0, 1], if the agent tracks it.
        open_session: the session the scope's latest writes belong to (mirrors the store).
        working: memories in working memory as this process last saw them (``None``: read it from
            the store); kept current by writes and decisions, for the fill-watermark trigger.
        loaded: ``open_session`` was read from the store.
        acting: the role the agent is acting in (``Scope.acting_as``), for its writes and recalls.
        dialog: unit vectors of the scope's latest writes, oldest first (``None``: read them from
            the store), the recent dialog the role model reads; dropped when anything is forgotten.
        lock: serialises a scope's writes within the process (session decisions are ordered).
    """

    goal: str | None = None
    goal_vector: np.ndarray | None = None
    stage: float | None = None
    acting: ActingAs | None = None
    dialog: list[np.ndarray] | None = None
    open_session: str | None = None
    working: int | None = None
    loaded: bool = False
    lock: threading.RLock = field(default_factory=threading.RLock)
