"""The SQLite backend: :class:`SqliteDB` owns the file (connection, lock, transactions, vector
caches); :class:`SqliteTenant` gives the shared SQL core (:mod:`runtime.store.sql`) its SQLite
connection hooks; search over the scope's vector cache is this backend's own."""

from .db import SqliteDB
from .tenant import SqliteTenant

__all__ = ["SqliteDB", "SqliteTenant"]
