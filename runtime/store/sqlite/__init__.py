"""The SQLite backend: :class:`SqliteDB` owns the file (connection, lock, transactions, vector
caches); :class:`SqliteTenant` runs one scope's statements; search, forgetting and the decision log
are built on those two."""

from .db import SqliteDB
from .tenant import SqliteTenant

__all__ = ["SqliteDB", "SqliteTenant"]
