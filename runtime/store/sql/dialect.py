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
    vector_of_memory: str  # joins each ``memories m`` row's vector of the encoder and width bound next, as ``v``

    def in_set(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        """``column`` is one of ``values``, as SQL with a single parameter (any number of values)."""
        raise NotImplementedError

    def index(self, name: str) -> str:
        """A hint naming the index a ``FROM memories m`` should use (empty where the planner needs none)."""
        return ""

    def many(self, conn: Any, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """Run ``sql`` once for each of ``rows`` (nothing when there are none)."""
        raise NotImplementedError

    def vector_rows(self, conn: Any, sql: str, params: Sequence[Any]) -> list[Any]:
        """The rows of a ``SELECT`` that reads stored vectors."""
        return list(conn.execute(sql, params).fetchall())

    def insert_many(self, conn: Any, table: str, columns: Sequence[tuple[str, str]],
                    rows: Sequence[Sequence[Any]]) -> None:
        """Insert ``rows`` (values for ``columns``: ``(name, PostgreSQL type)``) into ``table``
        (nothing when there are none)."""
        marks = ",".join([self.ph] * len(columns))
        self.many(conn, f"INSERT INTO {table}({', '.join(n for n, _ in columns)}) VALUES ({marks})", rows)

    def update_memories(self, conn: Any, where: str, where_params: Sequence[Any], fixed: str,
                        columns: Sequence[tuple[str, str]], rows: Sequence[Sequence[Any]]) -> None:
        """Set columns of many memories by id: each of ``rows`` is ``(id, value, ...)`` for
        ``columns`` (``(name, PostgreSQL type)``), plus the constant assignments ``fixed`` (SQL,
        may be empty), on the rows of ``memories m`` that also match ``where``. Nothing when there
        are no rows."""
        raise NotImplementedError


class _Sqlite(SqlDialect):
    ph, lock, greatest, strpos = "?", "", "max", "instr"
    vector_of_memory = "JOIN vectors v ON v.mem_rowid = m.rowid AND v.encoder_id = ? AND v.dim = ?"

    def in_set(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        return f"{column} IN (SELECT value FROM json_each(?))", [json.dumps(list(values))]

    def index(self, name: str) -> str:
        # without table statistics SQLite prefers a (user_id, agent_id, ...) index even where a
        # narrower one serves: the hint keeps tier and expiry scans on theirs
        return f" INDEXED BY {name}"

    def many(self, conn: Any, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        if rows:
            conn.executemany(sql, rows)

    def update_memories(self, conn: Any, where: str, where_params: Sequence[Any], fixed: str,
                        columns: Sequence[tuple[str, str]], rows: Sequence[Sequence[Any]]) -> None:
        # one statement per row: SQLite finds each through the unique id index
        sets = ", ".join([*([fixed] if fixed else []), *(f"{name} = ?" for name, _ in columns)])
        self.many(conn, f"UPDATE memories AS m SET {sets} WHERE {where} AND m.id = ?",
                  [(*r[1:], *where_params, r[0]) for r in rows])


class _Postgres(SqlDialect):
    ph, lock, greatest, strpos = "%s", " FOR UPDATE", "greatest", "strpos"
    # a lookup by the vector's primary key per memory (OFFSET 0 keeps the planner from flattening it):
    # as a plain join, on tables not yet analyzed (right after a bulk load) and under row-level
    # security, the planner scans the scope's vectors once per memory (seconds at 10k memories)
    vector_of_memory = ("CROSS JOIN LATERAL (SELECT * FROM vectors v WHERE v.mem_rowid = m.rowid "
                        "AND v.encoder_id = %s AND v.dim = %s OFFSET 0) v")

    def in_set(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        return f"{column} = ANY(%s)", [list(values)]

    def many(self, conn: Any, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        if rows:
            with conn.cursor() as cur:
                cur.executemany(sql, rows)

    def insert_many(self, conn: Any, table: str, columns: Sequence[tuple[str, str]],
                    rows: Sequence[Sequence[Any]]) -> None:
        # one statement, the values as arrays: a pipelined INSERT per row cost 0.1 ms each (0.3 s
        # for the 3,000 items of one decision)
        if not rows:
            return
        values = [[r[k] for r in rows] for k in range(len(columns))]
        arrays = ", ".join(f"{_array_mark(v)}::{kind}[]" for v, (_, kind) in zip(values, columns))
        conn.execute(f"INSERT INTO {table}({', '.join(n for n, _ in columns)}) SELECT * FROM unnest({arrays})", values)

    def vector_rows(self, conn: Any, sql: str, params: Sequence[Any]) -> list[Any]:
        # in binary: pgvector's text parser costs ~0.1 ms a 384-d vector
        return list(conn.execute(sql, params, binary=True).fetchall())

    def update_memories(self, conn: Any, where: str, where_params: Sequence[Any], fixed: str,
                        columns: Sequence[tuple[str, str]], rows: Sequence[Sequence[Any]]) -> None:
        # one set-based statement: the values arrive as arrays and are joined on id, so the cost is
        # one pass whatever plan the statistics (or their absence, right after a bulk load) suggest
        if not rows:
            return
        sets = ", ".join([*([fixed] if fixed else []), *(f"{name} = x.{name}" for name, _ in columns)])
        values = [[r[0] for r in rows], *([r[k + 1] for r in rows] for k in range(len(columns)))]
        arrays = ", ".join(f"{_array_mark(v)}::{kind}[]" for v, kind in zip(values, ["text", *(k for _, k in columns)]))
        names = ", ".join(["id", *(name for name, _ in columns)])
        conn.execute(f"UPDATE memories AS m SET {sets} FROM unnest({arrays}) AS x({names}) "
                     f"WHERE {where} AND m.id = x.id", [*values, *where_params])


def _array_mark(values: Sequence[Any]) -> str:
    """The placeholder of an array parameter: binary (``%b``) — in text psycopg quotes every element
    through a regular expression, 0.3 s for 10k strings — unless it holds no value to type it by."""
    return "%b" if any(v is not None for v in values) else "%s"


SQLITE: SqlDialect = _Sqlite()
POSTGRES: SqlDialect = _Postgres()
