"""One scope's rows in a PostgreSQL store: the connection hooks of the shared tenant core.

Every statement about a scope's rows is written once, in :class:`runtime.store.sql.tenant.SqlTenant`,
in the PostgreSQL dialect here. :class:`PgTenant` supplies what is PostgreSQL's own: each call runs
in a transaction of :meth:`PgDB.scoped`, which row-level security confines to ``(user_id,
agent_id)`` (every statement also carries the explicit tenant clause, so the planner uses the scope
indexes and isolation never rests on one mechanism alone); a call that loses a deadlock or a
serialization conflict runs again, whole; vectors are pgvector values (cold ones a blob beside);
a batch of rows is inserted in one round trip; a scrub rewrites the tables.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any, TypeVar

import numpy as np

from ..row_codec import COLUMNS, N_COLUMNS
from ..sql.dialect import POSTGRES
from ..sql.tenant import SqlTenant, TakenId
from .db import PgDB
from .vectors import VEC_COLS, conform, stack, vector_of

__all__ = ["PgTenant"]

_INSERT_MEMORY = f"INSERT INTO memories({COLUMNS}) VALUES ({','.join(['%s'] * N_COLUMNS)}) RETURNING rowid"

T = TypeVar("T")

# `placeholder` in the record JSON's metadata.flags array (model_dump_json is compact; inside a JSON
# string every quote is escaped, so `"flags":[` can only be that array: attribute values are scalars)
_PLACEHOLDER_FLAG = r'"flags":\[[^]]*"placeholder"'


class PgTenant(SqlTenant):
    """Reads and writes of one ``(user_id, agent_id)`` scope of a PostgreSQL store."""

    dialect = POSTGRES
    RETRIES = True  # concurrent clients: a transaction can lose a deadlock or serialization conflict
    VEC_COLS = VEC_COLS
    db: PgDB

    @contextmanager
    def tx(self) -> Iterator[Any]:
        """A transaction confined to this scope (nested uses join the outer one)."""
        with self.db.scoped(self.user_id, self.agent_id) as conn:
            yield conn

    def clause(self, alias: str = "m", *, check_only: bool = False) -> tuple[str, list[Any]]:
        """The scope's SQL condition and parameters (row-level security enforces it as well)."""
        return f"{alias}.user_id = %s AND {alias}.agent_id = %s", [self.user_id, self.agent_id]

    def reading(self) -> AbstractContextManager[Any]:
        """A scoped transaction for statements that change nothing, after the recall accesses
        pending in this process are applied (:mod:`runtime.store.usage`)."""
        self.db.flush_usage()
        return self.tx()

    def writing(self) -> AbstractContextManager[Any]:
        """A scoped transaction (nested uses join the outer one), after the recall accesses pending
        in this process are applied."""
        self.db.flush_usage()
        return self.tx()

    def retrying(self, fn: Callable[[], T]) -> T:
        """``fn`` again, whole, when its transaction lost a deadlock or serialization conflict (``PgDB.retrying``)."""
        return self.db.retrying(fn)

    def insert_memories(self, conn: Any, rows: Sequence[tuple[Any, ...]]) -> list[int]:
        import psycopg

        if not rows:
            return []
        with conn.cursor() as cur:
            conn.execute("SAVEPOINT memir_insert")
            try:
                cur.executemany(_INSERT_MEMORY, rows, returning=True)
            except psycopg.errors.UniqueViolation:  # ids are unique store-wide; this reveals only "taken"
                conn.execute("ROLLBACK TO SAVEPOINT memir_insert")
                raise TakenId(_first_duplicate(conn, rows)) from None
            return _returned_rowids(cur)

    def insert_vectors(self, conn: Any, rows: Sequence[tuple[int, str, int, np.ndarray]]) -> None:
        self.dialect.many(conn, "INSERT INTO vectors(mem_rowid, encoder_id, dim, vec) VALUES (%s,%s,%s,%b)",
                          [(rowid, enc, int(dim), np.asarray(v, np.float32)) for rowid, enc, dim, v in rows])

    def conform_vectors(self, conn: Any, memory_ids: Sequence[str]) -> int:
        if not memory_ids:
            return 0
        t, tp = self.clause()
        return conform(conn, self.db.cold_format, t, tp, ids=memory_ids)

    def vector_of(self, cols: Sequence[Any]) -> np.ndarray | None:
        vec, cold, fmt, dim = cols
        return vector_of(vec, cold, fmt, dim)

    def stack(self, rows: Sequence[Sequence[Any]], dim: int) -> np.ndarray:
        return stack([(r[0], r[1], r[2], r[3]) for r in rows], dim)

    def not_placeholder(self, record: str) -> tuple[str, list[Any]]:
        # read from the record's text, never through ::jsonb: jsonb cannot hold the \u0000 escape a
        # stored string may carry (an attribute value, a source_uri), and one such record would make
        # every recall of the scope fail
        return f"(strpos({record}, '\"placeholder\"') = 0 OR {record} !~ %s)", [_PLACEHOLDER_FLAG]

    def vectors_changed(self, conn: Any) -> None:
        """Inside a write transaction: the scope's ``vector_epoch`` moves (every process's cache of it
        reloads at its next search, :mod:`.vector_cache`) and this process forgets its cache at once."""
        conn.execute("UPDATE scopes SET vector_epoch = nextval('memir_vector_epoch') WHERE user_id = %s "
                     "AND agent_id = %s", (self.user_id, self.agent_id))
        self.db.vector_caches.drop(self.user_id, self.agent_id)

    def release_freed(self, wait_s: float, *, required: bool) -> None:
        """A required scrub rewrites the tables (``VACUUM (FULL)`` + ``CHECKPOINT``, ``PgDB.scrub``); a
        decision's deletions leave that to the next scrub (it is too heavy to run per decision). The
        usage journal is zeroed either way."""
        if required:
            self.db.scrub(wait_s)  # it zeroes the journal first
        else:
            self.db.erase_usage()


def _returned_rowids(cur: Any) -> list[int]:
    """The ``RETURNING rowid`` of every statement of an ``executemany(..., returning=True)``."""
    out = []
    while True:
        out.append(int(cur.fetchone()[0]))
        if not cur.nextset():
            return out


def _first_duplicate(conn: Any, rows: Sequence[tuple[Any, ...]]) -> int:
    """Index of the first row whose id is taken (inserted one at a time, each undone; another
    scope's rows are invisible under row-level security, so the unique index is the only witness)."""
    import psycopg

    for j, row in enumerate(rows):
        conn.execute("SAVEPOINT memir_probe")
        try:
            conn.execute(_INSERT_MEMORY, row)
        except psycopg.errors.UniqueViolation:
            conn.execute("ROLLBACK TO SAVEPOINT memir_probe")
            return j
        conn.execute("ROLLBACK TO SAVEPOINT memir_probe")
    return 0
