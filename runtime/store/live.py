"""What a scope needs from its store, and the live context an agent gives a scope.

:class:`StoreServices` is the interface :class:`~runtime.store.scope.Scope` is written against:
the shared components (record builder, assembler, encoder, default scorer, settings) and the
per-scope :class:`LiveContext`. ``MemoryStore`` provides it; the scope never imports the store.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import numpy as np

if TYPE_CHECKING:
    from ..annotate.assembler import ContextAssembler
    from ..encoders.base import Embedder
    from ..record.builder import RecordBuilder
    from ..scoring.protocol import Scorer

__all__ = ["LiveContext", "StoreServices"]


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


class StoreServices(Protocol):
    """The store-wide components a scope uses."""

    @property
    def builder(self) -> RecordBuilder: ...

    @property
    def assembler(self) -> ContextAssembler: ...

    @property
    def embedder(self) -> Embedder: ...

    @property
    def candidate_pool(self) -> int: ...

    @property
    def log_recalls(self) -> bool: ...

    def default_scorer(self) -> Scorer: ...

    def live(self, user_id: str, agent_id: str) -> LiveContext: ...
