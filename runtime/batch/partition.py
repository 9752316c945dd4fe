"""Grouping a dump's rows by scope in bounded memory.

Decisions are per (user, agent) scope, and a scope's rows may be spread over the whole dump.
:class:`ScopeGroups` holds the scoring tables it is given in memory up to ``memory_bytes``; past
that it spills every row to one of ``partitions`` Arrow IPC files on disk, chosen by a hash of
the scope, so a partition holds whole scopes. :meth:`ScopeGroups.groups` then yields each scope's
rows in dump order, reading one partition at a time: memory stays around one partition
whatever the dump's size. The spill directory is removed when the groups are closed.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .table import KEY_COLUMNS

__all__ = ["ScopeGroups", "partition_scopes", "scope_buckets", "scope_runs"]


def scope_runs(t: pa.Table) -> Iterator[tuple[str, str, pa.Table]]:
    """Each scope of a table with its rows in dump order (by ``file`` — the dump's index, when
    there are several — then ``line``); scopes in order of first appearance."""
    if t.num_rows == 0:
        return
    seq, scopes = _scope_order(t)
    grouped = t.take(pa.array(seq))  # one gather into scope order, then zero-copy slices
    del t  # the caller hands its only reference: hold the rows once, not twice
    pos = 0
    for user, agent, size in scopes:
        yield user, agent, grouped.slice(pos, size)
        pos += size


def _scope_order(t: pa.Table) -> tuple[np.ndarray, list[tuple[str, str, int]]]:
    """The row order that groups ``t`` by scope (rows by dump order within a scope, scopes by first
    appearance), and each scope's ``(user, agent, rows)`` in that order."""
    key = pc.binary_join_element_wise(t.column("user_id"), t.column("agent_id"), "\x1f")
    enc = pc.dictionary_encode(key).combine_chunks()
    codes = np.asarray(enc.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
    lines = np.asarray(t.column("line").to_numpy(), dtype=np.int64)
    if "file" in t.schema.names:  # several dumps: dump order is (file, line)
        lines = (np.asarray(t.column("file").to_numpy(), dtype=np.int64) << 40) | lines
    order = np.lexsort((lines, codes))
    sorted_codes = codes[order]
    bounds = np.flatnonzero(np.diff(sorted_codes)) + 1
    starts = np.concatenate([[0], bounds])
    stops = np.concatenate([bounds, [len(order)]])
    first_line = lines[order[starts]]
    names = enc.dictionary.to_pylist()
    by_first = np.argsort(first_line, kind="stable").tolist()
    seq = np.concatenate([order[starts[k]:stops[k]] for k in by_first])
    scopes = [(*names[sorted_codes[starts[k]]].split("\x1f", 1), int(stops[k] - starts[k])) for k in by_first]
    return seq, scopes


def _read_partition(path: Path) -> pa.Table:
    import pyarrow.ipc as ipc

    with pa.memory_map(str(path)) as src:
        return ipc.open_file(src).read_all()


def partition_scopes(path: str | Path) -> Iterator[tuple[str, str, pa.Table]]:
    """Every scope of one spill partition (a file :meth:`ScopeGroups.partition_files` names) with its
    rows in dump order, scopes in order of first appearance: what :meth:`ScopeGroups.groups` yields
    for that partition, read by whichever process is given the path."""
    t = _read_partition(Path(path))
    if t.num_rows == 0:
        return
    # One contiguous copy (the file's many small batches would make every gather concatenate them
    # all first), then each scope gathered as it is taken: the rows are held once, not twice.
    t = t.combine_chunks()
    seq, scopes = _scope_order(t)
    pos = 0
    for user, agent, size in scopes:
        yield user, agent, t.take(pa.array(seq[pos:pos + size]))
        pos += size


def scope_buckets(t: pa.Table, buckets: int) -> np.ndarray:
    """Each row's bucket in ``0..buckets-1`` by a stable hash of its (user, agent) scope: rows of
    one scope always share a bucket (disk partitions here, Ray partitions in the Ray engine)."""
    key = pc.binary_join_element_wise(t.column(KEY_COLUMNS[0]), t.column(KEY_COLUMNS[1]), "\x1f")
    enc = pc.dictionary_encode(key).combine_chunks()
    per_scope = np.array([int.from_bytes(hashlib.blake2b(s.encode(), digest_size=8).digest(), "little") % buckets
                          for s in enc.dictionary.to_pylist()], dtype=np.int64)
    return per_scope[np.asarray(enc.indices.to_numpy(zero_copy_only=False), dtype=np.int64)]


class ScopeGroups:
    """Rows collected by scope: in memory while small, spilled to disk partitions past a budget.

    Args:
        memory_bytes: Arrow bytes held in memory before spilling.
        partitions: spill files (each holds whole scopes; about ``dump / partitions`` bytes each).
        spill_dir: where the spill files go (default: a temporary directory).
        expected_rows: the rows that will be added, when known (a Parquet dump's metadata): if the
            first rows show they will not fit in ``memory_bytes``, spilling starts at once instead of
            after ``memory_bytes`` were held for nothing.
    """

    def __init__(self, *, memory_bytes: int = 256 << 20, partitions: int = 256, spill_dir: str | None = None,
                 expected_rows: int | None = None) -> None:
        self.memory_bytes, self.partitions = memory_bytes, partitions
        self.expected_rows = expected_rows
        self._spill_parent = spill_dir
        self._held: list[pa.Table] = []
        self._held_bytes = 0
        self._dir: Path | None = None
        self._writers: dict[int, Any] = {}
        self._rows: dict[int, int] = {}  # rows spilled to each partition
        self._files: list[tuple[Path, int]] = []  # the partitions with their rows, once finished
        self.spilled_rows = 0

    @property
    def spilled(self) -> bool:
        """Whether rows went to disk."""
        return self._dir is not None

    def add(self, t: pa.Table) -> None:
        """Add rows (any scopes, in dump order)."""
        if t.num_rows == 0:
            return
        if self._dir is not None:
            self._spill(t)
            return
        self._held.append(t)
        self._held_bytes += t.nbytes
        projected = self.expected_rows * t.nbytes / t.num_rows if self.expected_rows else 0
        if self._held_bytes > self.memory_bytes or projected > self.memory_bytes or self.memory_bytes == 0:
            self._dir = Path(tempfile.mkdtemp(prefix="memir-score-", dir=self._spill_parent))
            held, self._held, self._held_bytes = self._held, [], 0
            for h in held:
                self._spill(h)

    def _spill(self, t: pa.Table) -> None:
        import pyarrow.ipc as ipc

        assert self._dir is not None
        part = scope_buckets(t, self.partitions)
        order = np.argsort(part, kind="stable")              # one gather, then a zero-copy slice per partition
        grouped = t.take(pa.array(order))
        ps, starts = np.unique(part[order], return_index=True)
        stops = np.r_[starts[1:], len(order)]
        for p, lo, hi in zip(ps.tolist(), starts.tolist(), stops.tolist()):
            w = self._writers.get(p)
            if w is None:
                w = self._writers[p] = ipc.new_file(str(self._dir / f"part-{p:04d}.arrow"), t.schema)
            w.write_table(grouped.slice(lo, hi - lo))
            self._rows[p] = self._rows.get(p, 0) + hi - lo
        self.spilled_rows += t.num_rows

    def groups(self) -> Iterator[tuple[str, str, pa.Table]]:
        """Every scope with all its rows in dump order (in memory: scopes in order of first
        appearance; spilled: partition by partition)."""
        if self._dir is None:
            if self._held:
                yield from scope_runs(self._take_held())
            return
        for path, _ in self.partition_files():
            yield from partition_scopes(path)
            path.unlink()
            pa.default_memory_pool().release_unused()  # a partition's buffers go back to the system

    def partition_files(self) -> list[tuple[Path, int]]:
        """The spill partitions, finished, in the order :meth:`groups` reads them, each with its row
        count (each holds whole scopes: :func:`partition_scopes` reads one). Empty when nothing
        spilled. The files stay until :meth:`close`; no rows can be added after this."""
        if self._dir is None:
            return []
        if self._writers:
            for w in self._writers.values():
                w.close()
            self._files = [(self._dir / f"part-{p:04d}.arrow", self._rows[p]) for p in sorted(self._writers)]
            self._writers = {}
        return list(self._files)

    def _take_held(self) -> pa.Table:
        held, self._held = self._held, []
        return pa.concat_tables(held)

    def close(self) -> None:
        """Drop what is held and remove the spill files."""
        for w in self._writers.values():
            try:
                w.close()
            except (OSError, pa.ArrowInvalid):
                pass
        self._writers = {}
        self._held = []
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None
