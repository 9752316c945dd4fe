"""The PostgreSQL backend as the store sees it: :class:`PgStoreBackend` (the database) hands out
:class:`PgTenantBackend` objects (one scope's rows, forgetting and decisions from the shared SQL
core, plus search with pgvector), satisfying :mod:`runtime.store.backend`'s contract."""

from __future__ import annotations

from datetime import datetime

import numpy as np

from ...record.memir import RoleContext
from ..filters import MemoryFilter
from ..ranking import RankWeights, SearchResult
from ..sql.backend import SqlTenantBackend
from .db import PgDB
from .search import nearest, search
from .tenant import PgTenant

__all__ = ["PgTenantBackend", "PgStoreBackend"]


class PgTenantBackend(PgTenant, SqlTenantBackend):
    """One scope of a PostgreSQL store: :class:`PgTenant`'s rows, the shared forgetting and decisions,
    and search."""

    def search(self, flt: MemoryFilter, now: datetime, q: np.ndarray, *, k: int, pool: int,
               context: RoleContext | None, weights: RankWeights, touch: bool) -> SearchResult:
        """Exact inside the filter for small scopes, HNSW for large ones; re-ranked as on SQLite; with
        ``touch``, then the usage update of the hits."""
        return search(self, flt, now, q, k=k, pool=pool, context=context, weights=weights, touch=touch)

    def nearest(self, q: np.ndarray, k: int, now: datetime, *, at_least: float = float("-inf")) -> list[tuple[str, str, float]]:
        """The ``k`` most similar memories under the default filter (cosine ``at_least``), as a search
        finds them, unparsed."""
        return nearest(self, now, q, k, at_least=at_least)


class PgStoreBackend(PgDB):
    """A PostgreSQL store: :class:`PgDB` plus the scopes it hands out."""

    def tenant(self, user_id: str, agent_id: str) -> PgTenantBackend:
        return PgTenantBackend(self, user_id, agent_id)
