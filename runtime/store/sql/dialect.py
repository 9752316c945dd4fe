"""What differs between SQLite's and PostgreSQL's SQL, as far as the shared tenant code needs it.

A :class:`SqlDialect` renders the few fragments the two engines spell differently: the parameter
marker, membership in a list of values bound as *one* parameter (SQLite's ``json_each``,
PostgreSQL's ``= ANY``), row locks, index hints, a substring test, and batched statements. The
code built on it (:mod:`runtime.store.sql.tenant`, ``.forgetting``, ``.decisions``) is written
once; each backend's tenant names its dialect (:data:`SQLITE`, :data:`POSTGRES`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

__all__ = ["POSTGRES", "SQLITE", "SqlDialect"]


class SqlDialect:
    """The SQL fragments one engine spells its own way (an immutable, stateless value)."""

    ph: str           # the parameter marker
    lock: str         # appended to a SELECT that must lock the rows it reads (writers lock in rowid order)
    greatest: str     # the two-argument maximum
    strpos: str       # position of a substring (0 when absent)

    def in_set(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        """``column`` is one of ``values``, as SQL with a single parameter (any number of values)."""
        raise NotImplementedError

    def index(self, name: str) -> str:
        """A hint naming the index a ``FROM memories m`` should use (empty where the planner needs none)."""
        return ""

    def many(self, conn: Any, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """Run ``sql`` once for each of ``rows`` (nothing when there are none)."""
        raise NotImplementedError


class _Sqlite(SqlDialect):
    ph, lock, greatest, strpos = "?", "", "max", "instr"

    def in_set(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        return f"{column} IN (SELECT value FROM json_each(?))", [json.dumps(list(values))]

    def index(self, name: str) -> str:
        # without table statistics SQLite prefers a (user_id, agent_id, ...) index even where a
        # narrower one serves: the hint keeps tier and expiry scans on theirs
        return f" INDEXED BY {name}"

    def many(self, conn: Any, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        if rows:
            conn.executemany(sql, rows)


class _Postgres(SqlDialect):
    ph, lock, greatest, strpos = "%s", " FOR UPDATE", "greatest", "strpos"

    def in_set(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        return f"{column} = ANY(%s)", [list(values)]

    def many(self, conn: Any, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        if rows:
            with conn.cursor() as cur:
                cur.executemany(sql, rows)


SQLITE: SqlDialect = _Sqlite()
POSTGRES: SqlDialect = _Postgres()
