"""Duplicate ids across a whole dump, in bounded memory: 16 bytes and a line number per id.

A set of Python strings costs ~100 bytes an id (500 MB for 5M); here every id is hashed
column-wise into two independent 64-bit hashes (a random polynomial over its bytes, then a
mixer), kept in sorted runs merged like a log-structured tree. Two ids are taken as the same
when both hashes agree: for a dump of 10^9 ids the chance that two different ids collide on 128
bits is below 10^-20. The first occurrence (lowest line) is scored; every later one is reported.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .config import FILE_SHIFT

__all__ = ["FILE_SHIFT", "IdSeen", "first_occurrences", "id_hashes"]

_MAX_ID_BYTES = 512  # ids are at most 128 characters (MemIR's Id), at most 4 bytes each
_rng = np.random.default_rng(0x6D656D6972)
_K1 = _rng.integers(1, 2**63, size=_MAX_ID_BYTES, dtype=np.uint64) | np.uint64(1)
_K2 = _rng.integers(1, 2**63, size=_MAX_ID_BYTES, dtype=np.uint64) | np.uint64(1)


def _mix(h: np.ndarray) -> np.ndarray:
    # splitmix64's finaliser: every input bit affects every output bit
    with np.errstate(over="ignore"):
        h = (h ^ (h >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        h = (h ^ (h >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return h ^ (h >> np.uint64(31))


def id_hashes(ids: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """Two independent 64-bit hashes of each (non-empty) id string."""
    arr = ids.combine_chunks() if isinstance(ids, pa.ChunkedArray) else ids
    arr = pc.cast(arr, pa.string())
    n = len(arr)
    if n == 0:
        return np.zeros(0, np.uint64), np.zeros(0, np.uint64)
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int32)[arr.offset:arr.offset + n + 1].astype(np.int64)
    data = np.frombuffer(arr.buffers()[2], dtype=np.uint8)
    lo, hi = int(offsets[0]), int(offsets[-1])
    b = data[lo:hi].astype(np.uint64) + np.uint64(1)
    lengths = np.diff(offsets)
    if (lengths <= 0).any() or lengths.max() > _MAX_ID_BYTES:
        raise ValueError("ids must be 1-128 characters")
    starts = offsets[:-1] - lo
    pos = np.arange(hi - lo) - np.repeat(starts, lengths)
    with np.errstate(over="ignore"):
        h1 = np.add.reduceat(b * _K1[pos], starts) + lengths.astype(np.uint64) * _K2[0]
        h2 = np.add.reduceat(b * _K2[pos], starts) + lengths.astype(np.uint64) * _K1[0]
    return _mix(h1), _mix(h2 ^ np.uint64(0x9E3779B97F4A7C15))


MERGE_MAX = 1 << 20
"""Largest sorted run built by merging (24 MB of hashes and lines)."""


class IdSeen:
    """The ids seen so far (with the line each was first seen at), in sorted runs."""

    def __init__(self) -> None:
        self._runs: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # (h1, h2, line) sorted by (h1, h2)

    def __len__(self) -> int:
        return sum(len(r[0]) for r in self._runs)

    def check(self, ids: pa.Array | pa.ChunkedArray, lines: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Record a batch of ids (lines ascending, all after the lines seen so far).

        Returns:
            ``(duplicate, first_line)``: which ids were seen before (earlier in this batch or in an
            earlier one), and the line each duplicate was first seen at (0 where not a duplicate).
        """
        h1, h2 = id_hashes(ids)
        lines = np.asarray(lines, dtype=np.int64)
        n = len(h1)
        dup = np.zeros(n, dtype=bool)
        first = np.zeros(n, dtype=np.int64)
        for r1, r2, rl in self._runs:
            i = np.searchsorted(r1, h1)
            hit = np.flatnonzero((i < len(r1)) & (r1[np.minimum(i, len(r1) - 1)] == h1))
            for k in hit.tolist():  # equal first hashes: rare (a duplicate, or a 64-bit collision)
                j = int(i[k])
                while j < len(r1) and r1[j] == h1[k]:
                    if r2[j] == h2[k]:
                        dup[k], first[k] = True, rl[j]
                        break
                    j += 1
        order = np.lexsort((lines, h2, h1))
        s1, s2, sl = h1[order], h2[order], lines[order]
        same = np.zeros(n, dtype=bool)
        same[1:] = (s1[1:] == s1[:-1]) & (s2[1:] == s2[:-1])
        if same.any():  # within the batch: the earliest line of each run of equal hashes is first
            run_start = np.maximum.accumulate(np.where(~same, np.arange(n), 0))
            within = order[same]
            fresh = ~dup[within]
            dup[within[fresh]] = True
            first[within[fresh]] = sl[run_start[same]][fresh]
        new = ~dup[order]
        self._push(s1[new], s2[new], sl[new])
        return dup, first

    def _push(self, h1: np.ndarray, h2: np.ndarray, lines: np.ndarray) -> None:
        run = (h1, h2, lines)
        # merge equal-sized runs (log-structured), but never past MERGE_MAX: a merge's temporaries are
        # a few times its size, and a handful of large runs costs one binary search each
        while self._runs and len(self._runs[-1][0]) <= len(run[0]) and (
                len(self._runs[-1][0]) + len(run[0]) <= MERGE_MAX):
            a = self._runs.pop()
            c1, c2, cl = (np.concatenate([a[k], run[k]]) for k in range(3))
            o = np.lexsort((c2, c1))
            run = (c1[o], c2[o], cl[o])
        self._runs.append(run)


def first_occurrences(batches: Iterable[pa.Table]) -> dict[tuple[int, int], tuple[str, int]]:
    """Duplicates among ids that arrive in any order (a data engine's blocks): batches with ``id``,
    ``file`` and ``line`` columns. Returns ``{(file, line): (id, order key of the first copy)}`` for
    every copy after the first in dump order (keys: ``file << FILE_SHIFT | line``). Memory: 24
    bytes an id."""
    h1s, h2s, keys, ids = [], [], [], []
    for b in batches:
        h1, h2 = id_hashes(b.column("id"))
        h1s.append(h1)
        h2s.append(h2)
        keys.append((np.asarray(b.column("file").to_numpy(), np.int64) << FILE_SHIFT)
                    | np.asarray(b.column("line").to_numpy(), np.int64))
        ids.append(b.column("id"))
    if not keys:
        return {}
    h1, h2, key = np.concatenate(h1s), np.concatenate(h2s), np.concatenate(keys)
    order = np.lexsort((key, h2, h1))
    s1, s2 = h1[order], h2[order]
    same = np.zeros(len(order), dtype=bool)
    same[1:] = (s1[1:] == s1[:-1]) & (s2[1:] == s2[:-1])
    if not same.any():
        return {}
    run_start = np.maximum.accumulate(np.where(~same, np.arange(len(order)), 0))
    all_ids = pa.chunked_array([c for col in ids for c in (col.chunks if isinstance(col, pa.ChunkedArray) else [col])])
    out: dict[tuple[int, int], tuple[str, int]] = {}
    mask = (1 << FILE_SHIFT) - 1
    for k in np.flatnonzero(same).tolist():
        row, first = int(order[k]), int(key[order[run_start[k]]])
        kk = int(key[row])
        out[(kk >> FILE_SHIFT, kk & mask)] = (all_ids[row].as_py(), first)
    return out
