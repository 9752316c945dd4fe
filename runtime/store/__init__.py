"""The store: :class:`MemoryStore` (an SQLite file or a PostgreSQL database), the :class:`Scope` facade
every read and write goes through and the rooms behind it, typed filters, recall ranking and prompt
formatting, and dumps.

Names resolve at first use (PEP 562), so opening a store does not load what only a decision or
time travel needs."""

from typing import TYPE_CHECKING

from ..lazy import lazy_names

_EXPORTS = {
    "MemoryFilter": ".filters",
    **dict.fromkeys(("FreshnessConfig", "NEVER"), ".freshness"),
    **dict.fromkeys(("Hit", "RankWeights", "ScoreBreakdown", "format_context"), ".ranking"),
    "RefreshReport": ".refresh",
    **dict.fromkeys(("ForgetReport", "Scope", "Version"), ".scope"),
    **dict.fromkeys(("MemoryStore", "StoreConfig"), ".store"),
    **dict.fromkeys(("MemoriesAt", "MemoryAt"), ".time_travel"),
}

if TYPE_CHECKING:
    from .filters import MemoryFilter
    from .freshness import NEVER, FreshnessConfig
    from .ranking import Hit, RankWeights, ScoreBreakdown, format_context
    from .refresh import RefreshReport
    from .scope import ForgetReport, Scope, Version
    from .store import MemoryStore, StoreConfig
    from .time_travel import MemoriesAt, MemoryAt

__getattr__, __dir__ = lazy_names(__name__, _EXPORTS, globals())

__all__ = ["NEVER", "ForgetReport", "FreshnessConfig", "Hit", "MemoriesAt", "MemoryAt", "MemoryFilter", "MemoryStore", "RankWeights",
           "RefreshReport", "Scope", "ScoreBreakdown", "StoreConfig", "Version", "format_context"]
