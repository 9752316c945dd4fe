"""Memory dumps: the JSONL and Parquet files ``Scope.snapshot`` writes and ``memir score`` reads.

JSONL: one MemIR per line (``model_dump(mode="json")``) plus ``embedding`` (list of floats) and
``encoder_id`` keys; gzip-compressed (any name) and zstd-compressed (with ``zstandard``) files are
read too, and a UTF-8 byte-order mark is ignored.

Parquet is written in the **MemIR column layout** (:func:`memir_arrow_schema`): one column per
MemIR field, the nested groups (``provenance``, ``role_context``, ``metadata``, ``usage``) as
struct columns, datetimes as UTC timestamps, ``freshness_half_life`` as a duration,
``metadata.attributes`` as JSON text, plus ``embedding`` (list<float32>, null when absent) and
``encoder_id``. Batch scoring validates this layout column by column without building a record
per row. Older dumps with a ``record`` column of MemIR JSON are read too.

**Stored features.** A Parquet dump also carries the features that depend only on what the dump
holds, computed once by its writer exactly as ``memir score`` computes them:

- ``session_context``: each record's session-context features (:data:`utilitynet.dialog.CONTEXT_NAMES`;
  NaN where it has none), :func:`runtime.annotate.consolidate.dump_session_context`; null for a scope
  the writer could not compute (a record without a vector);
- ``text_stats``: each record's text statistics (:data:`utilitynet.textstats.TEXT_STAT_NAMES`).

The file's metadata names each column's schema (``memir.session_context`` =
:data:`utilitynet.dialog.CONTEXT_SCHEMA`, ``memir.text_stats`` = :data:`utilitynet.textstats.TEXT_STATS_SCHEMA`);
a reader of another schema, or of a dump without the column, recomputes them. Readers that rebuild
records (the record path, imports) ignore these columns.
Writes go to a temporary file in the target directory and are renamed into place, so a crash
never leaves half a dump. Parquet needs ``pyarrow`` (``pip install 'memir-runtime[parquet]'``) and nothing
else: no dataset library, no cache copy of the data outside the files named.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any

import numpy as np
from pydantic import ValidationError as PydanticValidationError

from ..errors import MissingDependencyError, NotFoundError, ValidationError
from ..record.memir import MemIR

__all__ = ["CONTEXT_COLUMN", "CONTEXT_METADATA", "PARQUET_ROW_GROUP", "STORED_FEATURES", "TEXT_COLUMN",
           "TEXT_METADATA", "DumpRow", "check_dump", "check_vector", "count_records", "decode_attributes",
           "is_compressed", "is_parquet", "iter_dump", "memir_arrow_schema", "memir_arrow_table", "open_jsonl",
           "parse_row", "pyarrow_modules", "stored_schemas", "write_dump"]

DumpRow = tuple[int, Any, Exception | None]
"""``(line or row number, (record, vector) or the raw input, error or None)``."""

_PARQUET = (".parquet", ".pq")

PARQUET_ROW_GROUP = 65_536
"""Rows per Parquet row group written: the unit a batch reader (or a worker) reads at once."""


CONTEXT_COLUMN = "session_context"
"""The Parquet column of stored session-context features (see the module docstring)."""

CONTEXT_METADATA = b"memir.session_context"
"""The Parquet metadata key naming the schema of :data:`CONTEXT_COLUMN`."""

TEXT_COLUMN = "text_stats"
"""The Parquet column of stored text statistics (see the module docstring)."""

TEXT_METADATA = b"memir.text_stats"
"""The Parquet metadata key naming the schema of :data:`TEXT_COLUMN`."""

STORED_FEATURES = {CONTEXT_COLUMN: CONTEXT_METADATA, TEXT_COLUMN: TEXT_METADATA}
"""Every stored-feature column with the metadata key naming its schema."""


def _current_schemas() -> dict[str, str]:
    from utilitynet.dialog import CONTEXT_SCHEMA
    from utilitynet.textstats import TEXT_STATS_SCHEMA
    return {CONTEXT_COLUMN: CONTEXT_SCHEMA, TEXT_COLUMN: TEXT_STATS_SCHEMA}


def stored_schemas(schema: Any) -> frozenset[str]:
    """The stored-feature columns of a Parquet file's Arrow schema that this code can read: present,
    with the schema its metadata names equal to the one of this code."""
    meta = schema.metadata or {}
    current = _current_schemas()
    return frozenset(c for c, key in STORED_FEATURES.items()
                     if c in schema.names and meta.get(key, b"").decode("utf-8", "replace") == current[c])


def memir_arrow_schema(*, features: bool = False) -> Any:
    """The Arrow schema of the MemIR column layout (Parquet dumps; see the module docstring), with
    the stored-feature columns (:data:`STORED_FEATURES`) when ``features``."""
    pa, _ = pyarrow_modules()
    ts, s, ids = pa.timestamp("us", tz="UTC"), pa.string(), pa.list_(pa.string())
    schema = pa.schema([
        ("schema_version", pa.int64()), ("id", s), ("content", s), ("created_at", ts),
        ("provenance", pa.struct([("type", s), ("user_id", s), ("agent_id", s), ("session_id", s), ("timestamp", ts),
                                  ("source_entity", s), ("trigger", s), ("derived_from", ids), ("source_uri", s),
                                  ("source_version", s)])),
        ("role_context", pa.struct([("active_role", s), ("sub_role", s), ("dialog_role", s), ("tone", s),
                                    ("task_id", s)])),
        ("metadata", pa.struct([("confidence", pa.float64()), ("freshness_half_life", pa.duration("us")),
                                ("expires_at", ts), ("tags", ids), ("related", ids), ("sensitivity", s),
                                ("flags", ids), ("attributes", s)])),
        ("usage", pa.struct([("access_count", pa.int64()), ("last_accessed_at", ts), ("utility", pa.float64()),
                             ("retention_reason", s)])),
        ("embedding", pa.list_(pa.float32())), ("encoder_id", s),
    ])
    if not features:
        return schema
    from utilitynet.dialog import CONTEXT_NAMES
    from utilitynet.textstats import TEXT_STAT_NAMES
    current = _current_schemas()
    return schema.append(pa.field(CONTEXT_COLUMN, pa.list_(pa.float64(), len(CONTEXT_NAMES)))).append(
        pa.field(TEXT_COLUMN, pa.list_(pa.float64(), len(TEXT_STAT_NAMES)))).with_metadata(
        {key: current[c].encode() for c, key in STORED_FEATURES.items()})


def memir_arrow_table(records: Sequence[MemIR], vectors: Sequence[np.ndarray | None],
                      encoder_ids: Sequence[str | None], *, features: bool = False) -> Any:
    """MemIR records (+ vectors and their encoder ids) as an Arrow table in the MemIR column layout,
    with the stored-feature columns computed here when ``features``."""
    pa, _ = pyarrow_modules()
    rows = []
    for r, v, e in zip(records, vectors, encoder_ids, strict=True):
        d = r.model_dump()
        md = d["metadata"]
        md["attributes"] = json.dumps(md["attributes"], ensure_ascii=False) if md["attributes"] else None
        d["embedding"] = None if v is None else np.asarray(v, np.float32)
        d["encoder_id"] = e if v is not None else None
        rows.append(d)
    table = pa.Table.from_pylist(rows, schema=memir_arrow_schema())
    if not features:
        return table
    from utilitynet.textstats import TEXT_STAT_NAMES, text_stats

    from ..annotate.consolidate import dump_session_context

    schema = memir_arrow_schema(features=True)
    ctx, known = dump_session_context(records, vectors)
    stats = text_stats([r.content for r in records])
    text = np.stack([stats[k] for k in TEXT_STAT_NAMES], axis=1) if records else np.zeros((0, len(TEXT_STAT_NAMES)))
    for name, values, mask in ((CONTEXT_COLUMN, ctx, ~known), (TEXT_COLUMN, text, None)):
        column = pa.FixedSizeListArray.from_arrays(pa.array(values.reshape(-1), pa.float64()), values.shape[1],
                                                   mask=None if mask is None else pa.array(mask))
        table = table.append_column(schema.field(name), column)
    return table.replace_schema_metadata(schema.metadata)


def decode_attributes(body: dict[str, Any], loads: Any) -> None:
    """The column layout keeps ``metadata.attributes`` as JSON text: decode it before validation."""
    md = body.get("metadata")
    if isinstance(md, dict):
        a = md.get("attributes")
        if a is None:
            md.pop("attributes", None)
        elif isinstance(a, str | bytes):
            md["attributes"] = loads(a)


def pyarrow_modules() -> tuple[Any, Any]:
    """``(pyarrow, pyarrow.parquet)``, or a typed error naming the extra to install."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as e:
        raise MissingDependencyError("Parquet dumps need pyarrow: pip install 'memir-runtime[parquet]'") from e
    return pa, pq


def _loads() -> tuple[Any, tuple[type[Exception], ...]]:
    """orjson when installed (~8x faster on float-heavy lines), else the standard library."""
    try:
        import orjson
        return orjson.loads, (orjson.JSONDecodeError, json.JSONDecodeError)
    except ImportError:
        return json.loads, (json.JSONDecodeError,)


def parse_row(obj: Any) -> tuple[MemIR, np.ndarray | None]:
    """One dump row (a dict) -> ``(record, vector or None)``; raises on anything invalid."""
    if not isinstance(obj, dict):
        raise ValidationError("each line must be a JSON object (a MemIR record)", field="<line>")
    emb = obj.pop("embedding", None)
    obj.pop("encoder_id", None)
    for name in STORED_FEATURES:
        obj.pop(name, None)  # derived from the records: recomputed by whoever needs them
    rec = MemIR.model_validate(obj)
    return rec, None if emb is None else check_vector(np.asarray(emb, dtype=np.float32))


def check_vector(vec: np.ndarray) -> np.ndarray:
    """``vec`` if it is a non-zero finite 1-d vector; else a typed error (a dump row's embedding)."""
    # one reduction instead of isfinite+any: a NaN/inf makes the sum non-finite, all-zero makes it 0
    s = float(np.abs(vec).sum()) if vec.ndim == 1 else float("nan")
    if not (s > 0.0 and math.isfinite(s)):
        raise ValidationError("embedding must be a non-zero finite vector", field="embedding")
    return vec


_ROW_ERRORS: tuple[type[Exception], ...] = (PydanticValidationError, ValidationError, ValueError, TypeError)


_GZIP, _ZSTD, _PAR1 = b"\x1f\x8b", b"\x28\xb5\x2f\xfd", b"PAR1"


def _head(p: Path) -> bytes:
    with open(p, "rb") as fh:
        return fh.read(4)


def is_parquet(path: str | Path) -> bool:
    """Whether a dump is Parquet (by its ``.parquet``/``.pq`` name or its magic bytes)."""
    p = Path(path)
    return p.suffix in _PARQUET or _head(p) == _PAR1


def is_compressed(path: str | Path) -> bool:
    """Whether a JSONL dump is gzip- or zstd-compressed (by its magic bytes, whatever its name)."""
    head = _head(Path(path))
    return head.startswith(_GZIP) or head == _ZSTD


def open_jsonl(p: Path) -> IO[bytes]:
    """The dump's bytes, decompressed when it is gzip (any name) or zstd (with ``zstandard``)."""
    head = _head(p)
    if head.startswith(_GZIP):
        import gzip
        return gzip.open(p, "rb")  # type: ignore[return-value]
    if head == _ZSTD:
        try:
            import zstandard
        except ImportError:
            raise MissingDependencyError(f"{p} is zstd-compressed: pip install zstandard, or decompress it first "
                                         f"(zstd -d {p.name})") from None
        return zstandard.ZstdDecompressor().stream_reader(open(p, "rb"), closefd=True)  # type: ignore[no-any-return]
    return open(p, "rb")


def check_dump(path: str | Path) -> Path:
    """The dump's path if it can be read as a dump at all; else a typed error naming the fix."""
    p = Path(path)
    if not p.exists():
        raise NotFoundError(f"no dump at {p}: check the path")
    if p.is_dir():
        raise ValidationError(f"{p} is a directory: give a JSONL or Parquet dump file", field="dump")
    if is_parquet(p):
        _, pq = pyarrow_modules()
        try:
            pq.ParquetFile(p)
        except Exception as e:  # pyarrow's ArrowInvalid / OSError: not a readable Parquet file
            raise ValidationError(f"{p} is not a readable Parquet file ({str(e).splitlines()[0]})",
                                  field="dump") from None
    return p


def count_records(path: str | Path) -> int | None:
    """Rows of a dump (Parquet metadata; lines of the decompressed JSONL): a progress bar's total."""
    p = check_dump(path)
    if is_parquet(p):
        _, pq = pyarrow_modules()
        return int(pq.ParquetFile(p).metadata.num_rows)
    n = 0
    with open_jsonl(p) as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            n += block.count(b"\n")
    return n


def iter_dump(path: str | Path, batch_size: int = 8192) -> Iterator[DumpRow]:
    """Yield every record of a JSONL (plain, gzip or zstd) or Parquet dump, with its line (row)
    number and error. Raises (before yielding anything) if the file cannot be read as a dump."""
    p = check_dump(path)
    if is_parquet(p):
        yield from _iter_parquet(p, batch_size)
        return
    loads, decode_errors = _loads()
    with open_jsonl(p) as fh:
        for line, raw in enumerate(fh, 1):
            if line == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]  # a UTF-8 byte-order mark is not part of the first record
            if not raw.strip():
                continue
            try:
                yield line, parse_row(loads(raw)), None
            except (*decode_errors, *_ROW_ERRORS) as e:
                yield line, raw.decode("utf-8", errors="replace").rstrip("\n"), e


def _iter_parquet(p: Path, batch_size: int) -> Iterator[DumpRow]:
    _, pq = pyarrow_modules()
    loads, decode_errors = _loads()
    f = pq.ParquetFile(p)
    line = 0
    for batch in f.iter_batches(batch_size=batch_size):
        cols = batch.schema.names
        data = {c: batch.column(c) for c in cols}
        emb = data.pop("embedding", None)
        pyrows = {c: a.to_pylist() for c, a in data.items()}
        vecs = emb.to_pylist() if emb is not None else None
        for i in range(batch.num_rows):
            line += 1
            row: dict[str, Any] = {c: pyrows[c][i] for c in pyrows}
            try:
                if "record" in row:
                    body = loads(row["record"])
                    if not isinstance(body, dict):
                        raise ValidationError("the record column must hold a JSON object", field="record")
                else:
                    body = {k: v for k, v in row.items() if v is not None and k != "encoder_id"}
                    decode_attributes(body, loads)
                if vecs is not None and vecs[i] is not None:
                    body["embedding"] = vecs[i]
                yield line, parse_row(body), None
            except (*decode_errors, *_ROW_ERRORS) as e:
                yield line, row, e


def _jsonl_lines(fh: IO[str], rows: Sequence[tuple[MemIR, np.ndarray | None, str | None]]) -> int:
    for r, v, encoder_id in rows:
        line = r.model_dump(mode="json")
        if v is not None:
            line["embedding"] = [float(x) for x in v]
            line["encoder_id"] = encoder_id
        fh.write(json.dumps(line, separators=(",", ":"), ensure_ascii=False) + "\n")
    return len(rows)


def write_dump(rows: Sequence[tuple[MemIR, np.ndarray | None, str | None]], path: str | Path) -> int:
    """Write ``(record, vector or None, encoder id of the vector)`` rows as Parquet
    (``.parquet``/``.pq``, with the stored features) or JSONL (anything else), atomically.

    Raises:
        ValidationError: the target directory does not exist or is not writable.
    """
    target = Path(path)
    if not target.parent.is_dir():
        raise ValidationError(f"cannot write {target}: directory {str(target.parent)!r} does not exist",
                              field="out")
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        if target.suffix in _PARQUET:
            pa, pq = pyarrow_modules()
            table = memir_arrow_table([r for r, _, _ in rows], [v for _, v, _ in rows], [e for _, _, e in rows],
                                      features=True)
            pq.write_table(table, tmp, row_group_size=PARQUET_ROW_GROUP)
        else:
            with open(tmp, "w", encoding="utf-8") as fh:
                _jsonl_lines(fh, rows)
        tmp.replace(target)
    except OSError as e:
        raise ValidationError(f"cannot write {target}: {e.strerror or e}", field="out") from e
    finally:
        if tmp.exists():
            tmp.unlink()
    return len(rows)
