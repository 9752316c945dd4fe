"""The live context an agent gives a scope: its task, its open session, its fill (in memory)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import numpy as np

__all__ = ["LiveContext"]


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
        lock: serialises a scope's writes within the process (session decisions are ordered).
    """

    goal: str | None = None
    goal_vector: np.ndarray | None = None
    stage: float | None = None
    open_session: str | None = None
    working: int | None = None
    loaded: bool = False
    lock: threading.RLock = field(default_factory=threading.RLock)
