"""The store: :class:`MemoryStore` (an SQLite file or a PostgreSQL database), the :class:`Scope` facade
every read and write goes through and the rooms behind it, typed filters, recall ranking and prompt
formatting, and dumps."""

from .filters import MemoryFilter
from .ranking import Hit, RankWeights, ScoreBreakdown, format_context
from .refresh import RefreshReport
from .scope import ForgetReport, Scope, Version
from .store import MemoryStore, StoreConfig
from .time_travel import MemoriesAt, MemoryAt

__all__ = ["ForgetReport", "Hit", "MemoriesAt", "MemoryAt", "MemoryFilter", "MemoryStore", "RankWeights",
           "RefreshReport", "Scope", "ScoreBreakdown", "StoreConfig", "Version", "format_context"]
