"""Scopes' vectors and filter columns held in the process, for exact searches that can include the
archive: a :class:`~runtime.store.scope_cache.VectorCache` per scope, as on SQLite.

Archived memories' vectors are stored in the cold format (int8 / float16 bytes, :mod:`.vectors`),
outside the HNSW index, so a search that can include the archive is exact: it used to have the
server compute every float32 distance, or read and decode every cold vector, on every query
(58–120 ms at 10,000 archived memories). With the cache, the filter runs as a numpy mask over the
scope's cached columns, the top candidates by cosine are re-checked in SQL (tenant clause + the
same filter, row-level security underneath) and only rows SQL returns are read back: a stale cache
can lose a row, never leak one (:func:`runtime.store.postgres.search.search`).

Freshness, checked at every search with one indexed read of the scope's ``scopes`` row:

- ``seq`` moves when the scope is written; the cache then loads rows with a higher rowid. Writers
  of a scope take its ``scopes`` row lock before their rows get rowids and hold it until they
  commit, so within a scope rowids become visible in order and none is skipped.
- ``vector_epoch`` takes a new value of a store-wide sequence whenever existing rows change in a way
  the cache mirrors: an ``UPDATE`` or ``DELETE`` of ``vectors``, an ``UPDATE`` of a filter column or
  a ``DELETE`` of ``memories`` (SQL triggers, so no code path can forget), a tag added to a stored
  memory or a restore (``PgTenant.vectors_changed``). The cache then reloads from scratch. Values
  are never reused, so a scope deleted and written again cannot match a stale cache.

A reload costs about what one search cost before (150–250 ms at 10,000 memories, float32 or
int8: the rows, their vectors and filter columns read and decoded); the searches after it cost a
few milliseconds. The re-check statement reads ``vector_epoch`` again: if it moved while the
search ran, the search is redone from SQL alone.

Deletion: this process drops a scope's cache as soon as it deletes or changes its rows; another
process drops it at its next search of the scope, as SQLite does. At most :data:`MAX_BYTES` are
held per store; the least recently used scopes go first. A scope past
``StoreConfig.exact_search_max`` writes (20,000 by default) is never held: it is searched in SQL
as before.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import tiers
from ..scope_cache import CODED_COLUMNS, FLOAT_COLUMNS, MAX_BYTES, VectorCache

__all__ = ["MAX_BYTES", "ScopeCaches"]

Key = tuple[str, str, str, int]
"""(user_id, agent_id, encoder_id, dim)."""

_COLS = ", ".join(f"m.{c}" for c in CODED_COLUMNS + FLOAT_COLUMNS)


class ScopeCaches:
    """Every cached scope of one store in this process, least recently used first.

    Hold :attr:`lock` from :meth:`fresh` until the search is done with the cache it returned."""

    def __init__(self, max_bytes: int = MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self.lock = threading.RLock()
        self._scopes: OrderedDict[Key, VectorCache] = OrderedDict()

    def fresh(self, conn: Any, user_id: str, agent_id: str, encoder_id: str, dim: int,
              max_writes: int) -> VectorCache | None:
        """The scope's cache, brought up to date in ``conn``'s scoped transaction (call under
        :attr:`lock`); ``None`` when the scope has no ``scopes`` row (nothing written yet) or has
        had more than ``max_writes`` writes (a scope that large is searched in SQL, never held)."""
        row = conn.execute("SELECT vector_epoch, seq FROM scopes WHERE user_id = %s AND agent_id = %s",
                           (user_id, agent_id)).fetchone()
        key = (user_id, agent_id, encoder_id, dim)
        if row is None or int(row[1]) > max_writes:
            self._scopes.pop(key, None)
            return None
        epoch, seq = int(row[0]), int(row[1])
        cache = self._scopes.get(key)
        if cache is None:
            cache = self._scopes[key] = VectorCache(user_id, agent_id, encoder_id, dim)
        self._scopes.move_to_end(key)
        if cache.epoch != epoch:
            cache.clear()
            cache.epoch = epoch
        if cache.data_version != seq:
            _load_since(cache, conn)
            cache.data_version = seq
            self._trim()
        return cache

    def _trim(self) -> None:
        total = sum(c.nbytes for c in self._scopes.values())
        while total > self.max_bytes and len(self._scopes) > 1:  # the most recent one stays
            _, old = self._scopes.popitem(last=False)
            total -= old.nbytes

    def drop(self, user_id: str | None = None, agent_id: str | None = None) -> None:
        """Forget the caches of one scope, one user (``agent_id`` None) or everything (both None)."""
        with self.lock:
            for key in [k for k in self._scopes if (user_id is None or k[0] == user_id)
                        and (agent_id is None or k[1] == agent_id)]:
                del self._scopes[key]

    def held(self) -> list[tuple[Key, int]]:
        """``(scope key, bytes)`` of every cached scope, least recently used first."""
        with self.lock:
            return [(k, c.nbytes) for k, c in self._scopes.items()]

    def __len__(self) -> int:
        return len(self._scopes)


def _load_since(cache: VectorCache, conn: Any) -> int:
    """Append the scope's rows with rowid above the cached maximum, with their tags."""
    base, dim = cache.max_rowid, cache.dim
    # each memory's vector by its primary key (LATERAL, OFFSET 0: a join over stale statistics can
    # scan the scope's vectors once per memory; see runtime.store.postgres.vectors.conform); float32
    # vectors in pgvector's binary form (vector_send), decoded below in one numpy pass
    rows = conn.execute(
        f"SELECT m.rowid, {_COLS}, v.fmt, coalesce(vector_send(v.vec), v.cold) FROM memories m LEFT JOIN LATERAL "
        f"(SELECT * FROM vectors v WHERE v.mem_rowid = m.rowid AND v.encoder_id = %s AND v.dim = %s OFFSET 0) v "
        f"ON true WHERE m.user_id = %s AND m.agent_id = %s AND m.rowid > %s ORDER BY m.rowid",
        (cache.encoder_id, dim, cache.user_id, cache.agent_id, base), binary=True).fetchall()
    if not rows:
        return 0
    tags = conn.execute(
        "SELECT t.mem_rowid, t.tag FROM memory_tags t WHERE t.user_id = %s AND t.agent_id = %s "
        "AND t.mem_rowid > %s AND t.mem_rowid <= %s",
        (cache.user_id, cache.agent_id, base, int(rows[-1][0]))).fetchall()
    return cache.append(rows, [(int(a), str(b)) for a, b in tags], vectors=_decode(rows, dim))


def _decode(rows: Sequence[Sequence[Any]], dim: int) -> np.ndarray:
    """The vectors of ``(..., fmt, bytes)`` rows: float32 ones from pgvector's binary form (a 4-byte
    header, then big-endian floats), cold ones by their format; zeros where there is none."""
    out = np.zeros((len(rows), dim), np.float32)
    hot = [i for i, r in enumerate(rows) if r[-2] == tiers.HOT_FORMAT]
    if hot:
        raw = np.frombuffer(b"".join(rows[i][-1] for i in hot), dtype=">f4").reshape(len(hot), dim + 1)
        out[hot] = raw[:, 1:]
    cold = [i for i, r in enumerate(rows) if r[-2] is not None and r[-2] != tiers.HOT_FORMAT]
    if cold:
        out[cold] = tiers.decode_rows([(bytes(rows[i][-1]), str(rows[i][-2])) for i in cold], dim)
    return out
