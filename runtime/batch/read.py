"""Reading dumps in chunks into scoring tables: the unit of work every engine maps over.

A dump is cut into :class:`Chunk` s — byte ranges of a JSONL file (cut at line ends), the
decompressed lines of a gzip/zstd one, or row-group ranges of a Parquet file — each small enough
to hold in memory and each knowing the line (row) number it starts at. :func:`read_chunk` turns
one into a :class:`ChunkResult`: the scoring table of its valid records (:mod:`runtime.batch.table`)
and its rejected rows with their line numbers and errors. Chunks are plain data, so worker
processes and Ray tasks read them by themselves.

How a row is validated depends on the layout, never the outcome:

- **Parquet in the MemIR column layout** is validated column-wise (:mod:`runtime.batch.validate`);
  rows that check cannot accept go through MemIR one by one.
- **JSONL** is parsed with orjson, line by line, and the records put in that column layout
  (:mod:`runtime.batch.jsonl_columns`) and validated column-wise the same way; what cannot be put
  there exactly, or what the checks refuse, goes through MemIR one by one.
- **Parquet with a ``record`` column of JSON** is parsed with orjson and validated by MemIR per
  record — the same calls as the row-at-a-time path; its vectors come straight from the Parquet
  column when there is one.
"""

from __future__ import annotations

import functools
import gc
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Literal, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import ValidationError as PydanticValidationError

from ..errors import ValidationError
from ..record.memir import MemIR
from ..store import dumps
from .config import error_text
from .jsonl_columns import as_vector, to_columns
from .table import empty_table, table_from_records
from .validate import fast_rows

__all__ = ["Chunk", "ChunkResult", "error_text", "parquet_file", "plan_chunks", "read_chunk", "read_chunk_parts",
           "renumbered"]

Kind = Literal["jsonl", "parquet"]


@dataclass(frozen=True)
class Chunk:
    """One unit of reading work.

    Attributes:
        path: the dump file.
        kind: ``jsonl`` or ``parquet``.
        first_line: line (Parquet: row) number of the chunk's first line, 1-based.
        start, stop: JSONL: the byte range; Parquet: the row-group range ``[start, stop)``.
        data: the chunk's lines themselves (a compressed JSONL dump, read sequentially).
        numbered: whether ``first_line`` is the line number in the file. False (``plan_chunks(...,
            numbered=False)``): the chunk's lines are numbered from 1 and :func:`renumbered` gives
            them their numbers in the file once the lines of the chunks before it are known.
    """

    path: str
    kind: Kind
    first_line: int
    start: int = 0
    stop: int = 0
    data: bytes | None = None
    numbered: bool = True


@dataclass
class ChunkResult:
    """What reading a chunk gave.

    Attributes:
        table: the scoring table of its valid records (dump order).
        rejects: ``(line, error, raw input)`` of every invalid record, in line order.
        rows: records read (blank lines are not records).
        fast: rows validated column-wise (the rest went through MemIR one by one).
        lines: the line ends in the chunk (JSONL): the next chunk starts this many lines later.
    """

    table: pa.Table
    rejects: list[tuple[int, str, str]] = field(default_factory=list)
    rows: int = 0
    fast: int = 0
    lines: int = 0


_ROW_ERRORS: tuple[type[Exception], ...] = (PydanticValidationError, ValidationError, ValueError, TypeError)


def plan_chunks(path: str | Path, *, target_bytes: int = 16 << 20, numbered: bool = True) -> Iterator[Chunk]:
    """Cut a dump into chunks (lazily: a huge JSONL file is scanned once, as chunks are taken).

    JSONL chunks end at a line end and hold about ``target_bytes``; Parquet chunks are row groups
    (one per chunk; :data:`runtime.store.dumps.PARQUET_ROW_GROUP` rows when memir wrote the file).
    ``numbered=False``: an uncompressed JSONL file is cut without being read here (a seek and one
    line per chunk), its chunks numbered from 1 each (:attr:`Chunk.numbered`): whoever takes the
    results in order numbers them with :func:`renumbered`.
    """
    p = dumps.check_dump(path)
    if dumps.is_parquet(p):
        _, pq = dumps.pyarrow_modules()
        md = pq.ParquetFile(p).metadata
        line = 1
        for g in range(md.num_row_groups):
            yield Chunk(str(p), "parquet", line, g, g + 1)
            line += md.row_group(g).num_rows
        return
    line = 1
    if dumps.is_compressed(p):
        with dumps.open_jsonl(p) as fh:
            for block in _line_blocks(fh, target_bytes):
                yield Chunk(str(p), "jsonl", line, data=block)
                line += block.count(b"\n")
        return
    if not numbered:
        yield from _cut(p, target_bytes)
        return
    with open(p, "rb") as fh:
        pos = 0
        for block in _line_blocks(fh, target_bytes):
            yield Chunk(str(p), "jsonl", line, pos, pos + len(block))
            line += block.count(b"\n")
            pos += len(block)


def _cut(p: Path, target_bytes: int) -> Iterator[Chunk]:
    """Chunks of about ``target_bytes`` ending where :func:`_line_blocks` would end them (after the
    line end at or past ``target_bytes``), found by seeking: only one line per chunk is read."""
    size = p.stat().st_size
    with open(p, "rb") as fh:
        pos = 0
        while pos < size:
            stop = pos + max(1, target_bytes)
            if stop < size:
                fh.seek(stop - 1)
                fh.readline()
                stop = fh.tell()
            stop = min(stop, size)
            yield Chunk(str(p), "jsonl", 1, pos, stop, numbered=False)
            pos = stop


def renumbered(res: ChunkResult, first_line: int) -> ChunkResult:
    """A result of a chunk numbered from 1 (``Chunk.numbered`` False) with its lines numbered from
    ``first_line``, the line in the file it starts at."""
    shift = first_line - 1
    if not shift:
        return res
    t = res.table
    if t.num_rows:
        i = t.schema.get_field_index("line")
        t = t.set_column(i, "line", pc.add(t.column(i), pa.scalar(shift, pa.int64())))
    return ChunkResult(t, [(line + shift, e, raw) for line, e, raw in res.rejects], res.rows, res.fast, res.lines)


def _line_blocks(fh: IO[bytes], target_bytes: int) -> Iterator[bytes]:
    """About ``target_bytes`` at a time, each block ending at a line end."""
    while True:
        block = fh.read(target_bytes)
        if not block:
            return
        if not block.endswith(b"\n"):
            block += fh.readline()
        yield block


def read_chunk(chunk: Chunk, dim: int) -> ChunkResult:
    """Read and validate one chunk (see the module docstring)."""
    if chunk.kind == "parquet":
        return _read_parquet(chunk, dim)
    data = chunk.data
    if data is None:
        with open(chunk.path, "rb") as fh:
            fh.seek(chunk.start)
            data = fh.read(chunk.stop - chunk.start)
    return _read_jsonl(data, chunk.first_line, dim, head=chunk.first_line == 1 and chunk.start == 0)


def _loads() -> tuple[Any, tuple[type[Exception], ...]]:
    import orjson
    return orjson.loads, (orjson.JSONDecodeError, json.JSONDecodeError)


F = TypeVar("F", bound=Callable[..., Any])


def _gc_paused(fn: F) -> F:
    """Run ``fn`` with the cyclic garbage collector paused (restored after, as it was).

    Building a chunk's records allocates hundreds of thousands of containers (each row's dicts, its
    embedding as a list of floats, the MemIR models) that all stay alive until the chunk's table is
    made, so the collector's generation thresholds fire again and again, each full pass walking every
    live record: measured on a 20k-line JSONL chunk, 1.6–3.1 s with the collector on and 0.9–1.1 s
    paused. Nothing built here forms a reference cycle; whatever the caller leaves is collected once
    the collector runs again."""
    @functools.wraps(fn)
    def paused(*args: Any, **kwargs: Any) -> Any:
        was = gc.isenabled()
        gc.disable()
        try:
            return fn(*args, **kwargs)
        finally:
            if was:
                gc.enable()
    return paused  # type: ignore[return-value]


class _Records:
    """Valid records of a chunk, collected one by one, then turned into a table at once."""

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self.lines: list[int] = []
        self.records: list[MemIR] = []
        self.vectors: list[np.ndarray | None] = []

    def add(self, line: int, rec: MemIR, vec: np.ndarray | None) -> None:
        self.lines.append(line)
        self.records.append(rec)
        self.vectors.append(vec)

    def table(self) -> pa.Table:
        return table_from_records(self.lines, self.records, self.vectors, self.dim)


@_gc_paused
def _read_jsonl(data: bytes, first_line: int, dim: int, *, head: bool) -> ChunkResult:
    """``head``: the chunk starts the file (a byte-order mark may open it)."""
    loads, decode_errors = _loads()
    rejects: list[tuple[int, str, str]] = []
    rows = 0
    lines: list[int] = []
    objs: list[Any] = []
    raws: list[bytes] = []
    parts = data.split(b"\n")
    for k, raw in enumerate(parts):
        line = first_line + k
        if head and k == 0 and raw.startswith(b"\xef\xbb\xbf"):
            raw = raw[3:]  # a UTF-8 byte-order mark is not part of the first record
        if not raw.strip():
            continue
        rows += 1
        try:
            obj = loads(raw)
        except decode_errors as e:
            rejects.append((line, error_text(e), raw.decode("utf-8", errors="replace").rstrip("\n")))
            continue
        if type(obj) is dict and "embedding" in obj:  # float32 now: a chunk holds no vector as Python floats
            obj["embedding"] = as_vector(obj["embedding"], dim)
        lines.append(line)
        objs.append(obj)
        raws.append(raw)
    fast, slow = _columnwise(objs, dim)
    if len(fast):  # its line column holds row indices into objs
        at = np.asarray(lines, dtype=np.int64)[np.asarray(fast.column("line").to_numpy(), dtype=np.int64)]
        fast = fast.set_column(fast.schema.get_field_index("line"), "line", pa.array(at, pa.int64()))
    good = _Records(dim)
    for i in slow.tolist():
        try:
            rec, vec = dumps.parse_row(objs[i])
        except _ROW_ERRORS as e:
            rejects.append((lines[i], error_text(e), raws[i].decode("utf-8", errors="replace").rstrip("\n")))
            continue
        good.add(lines[i], rec, vec)
    rejects.sort(key=lambda r: r[0])
    spans = len(parts) - 1  # the chunk's line ends
    if not good.lines:
        return ChunkResult(fast, rejects, rows, fast.num_rows, spans)
    table = pa.concat_tables([fast, good.table()]).sort_by("line") if len(fast) else good.table()
    return ChunkResult(table, rejects, rows, fast.num_rows, spans)


def _columnwise(objs: list[Any], dim: int) -> tuple[pa.Table, np.ndarray]:
    """Parsed records validated column-wise: ``(scoring table with row indices as its lines, indices of
    the rows for MemIR)``; every row goes to MemIR if the columns cannot be built."""
    if not objs:
        return empty_table(dim), np.zeros(0, dtype=np.int64)
    try:
        table, marked = to_columns(objs, dim)
        fast, slow = fast_rows(table, 0, dim)
    except (pa.ArrowException, ValueError, TypeError, OverflowError):
        return empty_table(dim), np.arange(len(objs))
    return fast, np.union1d(slow, marked)


PARQUET_BATCH = 16_384
"""Rows validated at once within a row group: bounds the temporaries of the column checks."""

PARQUET_BUFFER = 1 << 20
"""Bytes a Parquet column is read ahead by. Streaming a row group page by page (instead of
pre-buffering it whole, pyarrow's default) halves the peak memory of a read and is no slower."""


def parquet_file(path: str | Path) -> Any:
    """A Parquet file opened for streaming reads (see :data:`PARQUET_BUFFER`)."""
    _, pq = dumps.pyarrow_modules()
    return pq.ParquetFile(path, pre_buffer=False, buffer_size=PARQUET_BUFFER)


def read_chunk_parts(chunk: Chunk, dim: int) -> Iterator[ChunkResult]:
    """:func:`read_chunk` in parts of at most :data:`PARQUET_BATCH` rows (a Parquet chunk in the
    column layout; any other chunk is one part), so a reader holds one part at a time."""
    if chunk.kind != "parquet":
        yield read_chunk(chunk, dim)
        return
    f = parquet_file(chunk.path)
    groups = list(range(chunk.start, chunk.stop))
    if "record" in f.schema_arrow.names:
        yield _read_record_json(f.read_row_groups(groups), chunk.first_line, dim)
        return
    line = chunk.first_line
    stored = dumps.stored_schemas(f.schema_arrow)  # stored-feature columns of this code's schemas
    for batch in f.iter_batches(batch_size=PARQUET_BATCH, row_groups=groups):
        yield _read_columns(pa.Table.from_batches([batch]), line, dim, stored=stored)
        line += batch.num_rows


def _read_parquet(chunk: Chunk, dim: int) -> ChunkResult:
    results = list(read_chunk_parts(chunk, dim))
    if len(results) == 1:
        return results[0]
    if not results:
        return ChunkResult(empty_table(dim))
    return ChunkResult(pa.concat_tables([r.table for r in results]), [x for r in results for x in r.rejects],
                       sum(r.rows for r in results), sum(r.fast for r in results))


@_gc_paused
def _read_columns(t: pa.Table, first_line: int, dim: int, *, stored: frozenset[str] = frozenset()) -> ChunkResult:
    fast, slow = fast_rows(t, first_line, dim, stored=stored)
    if not len(slow):
        return ChunkResult(fast, [], t.num_rows, fast.num_rows)
    loads, decode_errors = _loads()
    good = _Records(dim)
    rejects: list[tuple[int, str, str]] = []
    rows = t.take(pa.array(slow))
    for k, row in zip(slow.tolist(), rows.to_pylist(), strict=True):
        line = first_line + k
        try:
            body = {c: v for c, v in row.items() if v is not None and c != "encoder_id"}
            dumps.decode_attributes(body, loads)
            rec, vec = dumps.parse_row(body)
        except (*decode_errors, *_ROW_ERRORS) as e:
            raw = {c: v for c, v in row.items() if c != "embedding"}
            rejects.append((line, error_text(e), json.dumps(raw, default=str)))
            continue
        good.add(line, rec, vec)
    merged = pa.concat_tables([fast, good.table()]).sort_by("line") if good.lines else fast
    return ChunkResult(merged, rejects, t.num_rows, fast.num_rows)


@_gc_paused
def _read_record_json(t: pa.Table, first_line: int, dim: int) -> ChunkResult:
    loads, decode_errors = _loads()
    good = _Records(dim)
    rejects: list[tuple[int, str, str]] = []
    bodies = t.column("record").to_pylist()
    emb = t.column("embedding").combine_chunks() if "embedding" in t.schema.names else None
    for k, text in enumerate(bodies):
        line = first_line + k
        try:
            body = loads(text)
            if not isinstance(body, dict):
                raise ValidationError("the record column must hold a JSON object", field="record")
            v = emb[k] if emb is not None else None
            if v is not None and v.is_valid:
                body.pop("embedding", None)
                body.pop("encoder_id", None)
                rec = MemIR.model_validate(body)
                vec: np.ndarray | None = dumps.check_vector(
                    np.asarray(v.values.to_numpy(zero_copy_only=False), dtype=np.float32))
            else:
                rec, vec = dumps.parse_row(body)
        except (*decode_errors, *_ROW_ERRORS) as e:
            row = {c: t.column(c)[k].as_py() for c in t.schema.names if c != "embedding"}
            rejects.append((line, error_text(e), json.dumps(row, default=str)))
            continue
        good.add(line, rec, vec)
    return ChunkResult(good.table() if good.lines else empty_table(dim), rejects, t.num_rows, 0)
