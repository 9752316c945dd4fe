"""The store: :class:`MemoryStore` (one SQLite file), the :class:`Scope` facade every read and
write goes through, typed filters, recall ranking and prompt formatting, and dumps."""

from .filters import MemoryFilter
from .ranking import Hit, RankWeights, ScoreBreakdown, format_context
from .refresh import RefreshReport
from .scope import ForgetReport, Scope, Version
from .store import MemoryStore, StoreConfig
from .time_travel import MemoriesAt, MemoryAt

__all__ = ["ForgetReport", "Hit", "MemoriesAt", "MemoryAt", "MemoryFilter", "MemoryStore", "RankWeights",
           "RefreshReport", "Scope", "ScoreBreakdown", "StoreConfig", "Version", "format_context"]
