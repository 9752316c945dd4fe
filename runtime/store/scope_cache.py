"""An in-process cache of one scope's vectors and filter columns, for fast filter-first recall.

The cache proposes, SQL disposes. Recall evaluates the typed filter on a columnar copy of the
scope's filter columns (``MemoryFilter.mask``), takes the exact vector top-K over the rows that
pass, and then re-checks those few candidates with the scope's SQL (tenant clause + the same
filter) before anything is returned. Asking the database for *every* qualifying rowid costs about a
microsecond per row (tens of ms at 100k memories); the mask is a few numpy comparisons.

Why it cannot leak: a cache belongs to one ``(user, agent, encoder)`` and is filled only by a
query bound to that scope; every candidate is re-verified by SQL with the tenant clause.

Each backend fills it from its own SQL and keeps it fresh its own way (rows are only ever appended
here, in rowid order; anything that changes existing rows makes the backend drop the cache):
SQLite in :mod:`runtime.store.sqlite.vector_cache`, PostgreSQL in
:mod:`runtime.store.postgres.vector_cache`.

Cold-tier vectors (int8 / float16 on disk) are decoded to float32 here: the cache holds every
row at full width, so one recall compares working and archived memories alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from . import tiers

__all__ = ["MAX_BYTES", "VectorCache", "CODED_COLUMNS", "FLOAT_COLUMNS", "RANK_COLUMNS"]

MAX_BYTES = 256 << 20
"""Cached vectors and columns per store in one process (256 MiB: ~160k memories at 384 dimensions);
past it, the least recently used scopes are dropped (they reload on their next search)."""

# Filter columns mirrored from ``memories``: text columns as int codes (None -> -1), reals as float64.
CODED_COLUMNS = ("tier", "source_type", "session_id", "active_role", "sub_role", "dialog_role", "task_id",
                 "sensitivity")
FLOAT_COLUMNS = ("event_time", "expires_at", "confidence", "half_life_s")  # None -> NaN
RANK_COLUMNS = ("confidence", "half_life_s", "event_time", "active_role", "sub_role", "source_type", "dialog_role")
"""What re-ranking reads of a candidate besides its cosine, in :data:`runtime.store.ranking.Candidate`'s
order (:meth:`VectorCache.rank_rows`). ``half_life_s`` is mirrored for re-ranking only: no filter reads it,
and no statement changes it after the write."""
_UNKNOWN = -2  # code of a filter value the scope has never seen: matches nothing
_BLOCK = 256   # rows gathered per block in similarities(): 384 KB at dim 384, cache-resident
_FEW = 4       # append() fills up to this many rows element by element


class VectorCache:
    """Vectors and filter columns of one (user, agent, encoder) scope, keyed by rowid."""

    def __init__(self, user_id: str, agent_id: str, encoder_id: str, dim: int) -> None:
        self.user_id, self.agent_id, self.encoder_id, self.dim = user_id, agent_id, encoder_id, dim
        self.epoch: str | int | None = None       # the backend's freshness stamps, as of the last load
        self.data_version: int | None = None
        self.has_own_writes = False  # SQLite: holds every row this process committed (set once loaded)
        self.clear()

    def clear(self) -> None:
        """Drop everything (the next load starts from rowid 0)."""
        self._n = 0
        self._rowids = np.zeros(0, dtype=np.int64)       # sorted ascending
        self._mat = np.zeros((0, self.dim), dtype=np.float32)
        self._has_vec = np.zeros(0, dtype=bool)           # False: no vector from this encoder
        self._cols: dict[str, np.ndarray] = {c: np.zeros(0, np.int32) for c in CODED_COLUMNS}
        self._cols.update({c: np.zeros(0, np.float64) for c in FLOAT_COLUMNS})
        self._vocab: dict[str, dict[str, int]] = {c: {} for c in CODED_COLUMNS}
        self._tag_pos: dict[str, list[int]] = {}
        self._tag_arr: dict[str, np.ndarray] = {}        # _tag_pos as arrays, rebuilt after a load
        self._gather: np.ndarray | None = None            # reused block buffer (made on first use)
        self.data_version = None
        self.has_own_writes = False

    # ------------------------------------------------------------------ reads
    @property
    def n(self) -> int:
        """Number of cached rows."""
        return self._n

    @property
    def max_rowid(self) -> int:
        return int(self._rowids[self._n - 1]) if self._n else 0

    @property
    def rowids(self) -> np.ndarray:
        return self._rowids[: self._n]

    @property
    def matrix(self) -> np.ndarray:
        """The unit vectors, row-aligned with :attr:`rowids` (zero rows where ``has_vector`` is False)."""
        return self._mat[: self._n]

    @property
    def has_vector(self) -> np.ndarray:
        return self._has_vec[: self._n]

    def column(self, name: str) -> np.ndarray:
        """A filter column (codes or floats), row-aligned with :attr:`rowids`."""
        return self._cols[name][: self._n]

    def codes(self, name: str, values: Sequence[str]) -> np.ndarray:
        """Codes of ``values`` in column ``name`` (values never seen get a code no row has)."""
        vocab = self._vocab[name]
        return np.array([vocab.get(v, _UNKNOWN) for v in values], dtype=np.int32)

    def rank_rows(self, pos: np.ndarray, similarities: list[float]) -> list[tuple[Any, ...]]:
        """Each row at positions ``pos`` as re-ranking reads a candidate (``ranking.Candidate``): its
        similarity, then its :data:`RANK_COLUMNS` as the store's own columns read back (floats, ``None``
        for a missing half-life, text values for codes)."""
        columns: list[list[Any]] = [similarities]
        for c in RANK_COLUMNS:
            values = self._cols[c][pos].tolist()
            if c in self._vocab:  # codes -> values; -1 (None) indexes the None appended last
                names = [*self._vocab[c], None]
                values = [names[v] for v in values]
            elif c == "half_life_s":
                values = [None if v != v else v for v in values]
            columns.append(values)
        return list(zip(*columns))

    def tag_mask(self, tags: Sequence[str]) -> np.ndarray:
        """Rows carrying at least one of ``tags``."""
        out = np.zeros(self._n, dtype=bool)
        for t in tags:
            if t in self._tag_pos:
                arr = self._tag_arr.get(t)
                if arr is None:
                    arr = self._tag_arr[t] = np.asarray(self._tag_pos[t], dtype=np.int64)
                out[arr] = True
        return out

    def similarities(self, pos: np.ndarray, q: np.ndarray) -> np.ndarray:
        """Cosine of ``q`` with the rows at positions ``pos`` (float32, ``pos`` ascending).

        Gathers and multiplies in blocks of :data:`_BLOCK` rows through one small reused buffer that
        stays in cache: gathering all passing rows first (15 MB at 10k x 384) and reading them back
        costs about twice as much memory traffic (measured 12–15 ms vs 7 ms per recall at 100k).
        """
        if 2 * len(pos) > self._n:  # most rows pass: one mat-vec over all beats any gather
            return (self.matrix @ q)[pos]
        out = np.empty(len(pos), dtype=np.float32)
        if self._gather is None:
            self._gather = np.empty((_BLOCK, self.dim), dtype=np.float32)
        for s in range(0, len(pos), _BLOCK):
            p = pos[s:s + _BLOCK]
            blk = np.take(self._mat, p, axis=0, out=self._gather[: len(p)], mode="clip")
            np.dot(blk, q, out=out[s:s + len(p)])
        return out

    def lookup(self, rowids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Vectors of ``rowids``; returns (found_rowids, matrix rows). Rows without a vector from
        this encoder are not "found" (the caller reports the encoder mismatch)."""
        if not self._n:
            return rowids[:0], np.zeros((0, self.dim), np.float32)
        r = self.rowids
        pos = np.clip(np.searchsorted(r, rowids), 0, self._n - 1)
        ok = (r[pos] == rowids) & self._has_vec[pos]
        return rowids[ok], self._mat[pos[ok]]

    # ------------------------------------------------------------------ loading
    @property
    def nbytes(self) -> int:
        """Bytes held (the arrays' capacity)."""
        return int(self._mat.nbytes + self._rowids.nbytes + self._has_vec.nbytes
                   + sum(a.nbytes for a in self._cols.values()))

    def _grow(self, need: int) -> None:
        cap = len(self._rowids)
        if need <= cap:
            return
        cap = max(need, 2 * cap, 16)  # amortised growth, like a Python list; small scopes stay small

        def grown(a: np.ndarray) -> np.ndarray:
            b = np.zeros((cap, *a.shape[1:]), dtype=a.dtype)
            b[: self._n] = a[: self._n]
            return b

        self._rowids, self._mat, self._has_vec = grown(self._rowids), grown(self._mat), grown(self._has_vec)
        self._cols = {c: grown(a) for c, a in self._cols.items()}

    def append(self, rows: Sequence[Sequence[Any]], tags: Sequence[tuple[int, str]] = (), *,
               vectors: np.ndarray | None = None) -> int:
        """Append rows newer than every cached one, in rowid order: each
        ``(rowid, *CODED_COLUMNS, *FLOAT_COLUMNS, fmt, vector bytes)`` (fmt and bytes None when the
        memory has no vector of this encoder), and ``tags``, ``(rowid, tag)`` pairs of those rows.
        ``vectors``: the rows' unit vectors already decoded (``(len(rows), dim)``, zeros for rows
        without one), when the caller has them; the bytes are then not read. Returns how many rows were added."""
        if not rows:
            return 0
        lo, k = self._n, len(rows)
        self._grow(lo + k)
        hi = lo + k
        if k <= _FEW:  # a write's rows: element by element (numpy's per-call cost dominates a 1-row block)
            for i, r in enumerate(rows, lo):
                self._rowids[i] = r[0]
                for j, c in enumerate(CODED_COLUMNS, 1):
                    self._cols[c][i] = -1 if r[j] is None else self._vocab[c].setdefault(r[j], len(self._vocab[c]))
                for j, c in enumerate(FLOAT_COLUMNS, 1 + len(CODED_COLUMNS)):
                    self._cols[c][i] = np.nan if r[j] is None else r[j]
        else:  # column by column, each text column's distinct values coded once (most hold one or two)
            columns = list(zip(*rows))
            self._rowids[lo:hi] = columns[0]
            for j, c in enumerate(CODED_COLUMNS, 1):
                vocab = self._vocab[c]
                codes = {v: -1 if v is None else vocab.setdefault(v, len(vocab)) for v in dict.fromkeys(columns[j])}
                if len(codes) == 1:
                    self._cols[c][lo:hi] = next(iter(codes.values()))
                else:
                    self._cols[c][lo:hi] = list(map(codes.__getitem__, columns[j]))
            for j, c in enumerate(FLOAT_COLUMNS, 1 + len(CODED_COLUMNS)):
                self._cols[c][lo:hi] = np.array(columns[j], dtype=np.float64)  # None -> NaN
        has = np.fromiter((r[-1] is not None for r in rows), dtype=bool, count=k)
        self._has_vec[lo:hi] = has
        if vectors is not None:  # rows without a vector are zeros there, as here
            self._mat[lo:hi] = vectors
        elif has.all() and all(r[-2] == tiers.HOT_FORMAT for r in rows):
            # each row's bytes straight into its matrix row: joining them first allocated and copied
            # the whole block once more (~80 us of a 100-row load)
            out, width = self._mat[lo:hi].data.cast("B"), 4 * self.dim
            for i, r in enumerate(rows):
                out[i * width:(i + 1) * width] = r[-1]
        else:  # cold rows (or rows without a vector of this encoder) among them: decode by format
            idx = np.flatnonzero(has)
            self._mat[lo + idx] = tiers.decode_rows([(rows[i][-1], rows[i][-2]) for i in idx.tolist()], self.dim)
        if tags:
            pos = np.searchsorted(self._rowids[:hi], np.fromiter((t[0] for t in tags), np.int64, len(tags)))
            for p, (_, tag) in zip(pos.tolist(), tags):
                self._tag_pos.setdefault(tag, []).append(p)
                self._tag_arr.pop(tag, None)
        self._n = hi
        return k
