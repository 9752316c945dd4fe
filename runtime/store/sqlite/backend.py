"""The SQLite backend as the store sees it: :class:`SqliteStoreBackend` (the file) hands out
:class:`SqliteTenantBackend` objects (one scope's rows, forgetting and decisions from the shared SQL
core, plus search over the scope's vector cache), satisfying :mod:`runtime.store.backend`'s contract."""

from __future__ import annotations

from datetime import datetime

import numpy as np

from ...record.memir import RoleContext
from ..filters import MemoryFilter
from ..ranking import RankWeights, SearchResult
from ..sql.backend import SqlTenantBackend
from .db import SqliteDB
from .search import nearest, search
from .tenant import SqliteTenant

__all__ = ["SqliteTenantBackend", "SqliteStoreBackend"]


class SqliteTenantBackend(SqliteTenant, SqlTenantBackend):
    """One scope of an SQLite store: :class:`SqliteTenant`'s rows, the shared forgetting and decisions,
    and search."""

    def search(self, flt: MemoryFilter, now: datetime, q: np.ndarray, *, k: int, pool: int,
               context: RoleContext | None, weights: RankWeights, touch: bool) -> SearchResult:
        """Typed filter (on the vector cache) -> exact top-``pool`` -> re-rank -> top ``k`` re-checked in
        SQL; with ``touch``, then the usage update of the hits."""
        res = search(self, flt, now, q, k=k, pool=pool, context=context, weights=weights)
        if touch and res.rowids:
            self.touch(res.rowids, now)
        return res


    def nearest(self, q: np.ndarray, k: int, now: datetime, *, at_least: float = float("-inf")) -> list[tuple[str, str, float]]:
        """The ``k`` most similar memories under the default filter (cosine ``at_least``), re-checked
        in SQL, unparsed."""
        return nearest(self, now, q, k, at_least=at_least)


class SqliteStoreBackend(SqliteDB):
    """An SQLite store file: :class:`SqliteDB` plus the scopes it hands out."""

    def tenant(self, user_id: str, agent_id: str) -> SqliteTenantBackend:
        return SqliteTenantBackend(self, user_id, agent_id)
