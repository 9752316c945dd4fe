"""The columns batch scoring works on: validated memories as an Arrow table, one row per record.

Every reader (JSONL, Parquet of record JSON, Parquet of MemIR struct columns, a data engine's
block) produces this table, and every decision is made from it. It holds exactly what the
retention plan reads — the scorer's :class:`~utilitynet.columns.RecordColumns`, the rules'
:class:`~runtime.retention.rules.RuleView`, the scope and session keys — plus the dump line
(or row) number each record came from. Enum fields are codes into ``utilitynet.columns``'
vocabularies; datetimes are POSIX seconds (NaN = none); ``attributes`` is the record's
``metadata.attributes`` as JSON (null when empty); ``session_context`` and ``text_stats`` are the
features the dump stored for the record (null when it stored none: they are computed while
deciding); ``embedding`` is null when the dump had no usable vector (it is embedded before scoring,
as the row-at-a-time path does).

Because the table is plain Arrow, it pickles cheaply between processes, spills to disk as Arrow
IPC, and is a Ray Data block as it stands.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from utilitynet.columns import RecordColumns
from utilitynet.dialog import CONTEXT_NAMES
from utilitynet.session import session_codes
from utilitynet.textstats import TEXT_STAT_NAMES

from ..record.memir import MemIR
from ..retention.plan import ItemTable
from ..retention.rules import RuleView, referenced_at

__all__ = ["KEY_COLUMNS", "STORED_TYPE", "empty_table", "item_table", "score_schema", "stored_context", "stored_values",
           "table_from_records", "vectors"]

KEY_COLUMNS = ("user_id", "agent_id")
"""The scope of a row: decisions are made per (user, agent)."""


STORED_TYPE = pa.list_(pa.float64())
"""The type of the stored-feature columns (``session_context``: ``len(CONTEXT_NAMES)`` values, NaN = the
record has no context; ``text_stats``: ``len(TEXT_STAT_NAMES)``). A list, not a fixed-size one: a row
without stored values costs 4 bytes, not 8 per value."""


def score_schema(dim: int) -> pa.Schema:
    """The schema of the scoring table for ``dim``-wide embeddings."""
    return pa.schema([
        ("line", pa.int64()), ("id", pa.string()), ("user_id", pa.string()), ("agent_id", pa.string()),
        ("session_id", pa.string()), ("content", pa.string()), ("created_at", pa.float64()),
        ("source", pa.int8()), ("dialog_role", pa.int8()), ("sensitivity", pa.int8()),
        ("confidence", pa.float64()), ("flags", pa.int64()), ("expires_at", pa.float64()),
        ("half_life_s", pa.float64()), ("access_count", pa.float64()), ("last_accessed_at", pa.float64()),
        ("n_parents", pa.float64()), ("active_role", pa.string()), ("sub_role", pa.string()),
        ("tags", pa.list_(pa.string())), ("attributes", pa.string()),
        ("session_context", STORED_TYPE), ("text_stats", STORED_TYPE), ("embedding", pa.list_(pa.float32(), dim)),
    ])


def empty_table(dim: int) -> pa.Table:
    """A scoring table with no rows."""
    return score_schema(dim).empty_table()


def _embedding_array(vecs: Sequence[np.ndarray | None], dim: int) -> pa.Array:
    n = len(vecs)
    flat = np.zeros((n, dim), dtype=np.float32)
    valid = np.zeros(n, dtype=bool)
    for i, v in enumerate(vecs):
        if v is not None and v.ndim == 1 and v.shape[0] == dim:
            flat[i] = v
            valid[i] = True
    return pa.FixedSizeListArray.from_arrays(pa.array(flat.reshape(-1), pa.float32()), dim,
                                             mask=pa.array(~valid))


def table_from_records(lines: Sequence[int], records: Sequence[MemIR], vecs: Sequence[np.ndarray | None],
                       dim: int) -> pa.Table:
    """The scoring table of validated MemIR records (the record-at-a-time readers' output).

    A vector of another width than ``dim`` is kept as missing (it is re-embedded), as the
    row-at-a-time path does."""
    if not records:
        return empty_table(dim)
    cols = RecordColumns.from_records(records)
    view = RuleView.from_records(records)
    pv = [r.provenance for r in records]
    attrs = [r.metadata.attributes for r in records]
    data = {
        "line": pa.array(lines, pa.int64()), "id": view.ids, "user_id": [p.user_id for p in pv],
        "agent_id": [p.agent_id for p in pv], "session_id": [p.session_id for p in pv], "content": view.content,
        "created_at": cols.created_at, "source": cols.source.astype(np.int8), "dialog_role": cols.role.astype(np.int8),
        "sensitivity": cols.sensitivity.astype(np.int8), "confidence": cols.confidence, "flags": cols.flags,
        "expires_at": cols.expires_at, "half_life_s": cols.half_life_s, "access_count": cols.access_count,
        "last_accessed_at": cols.last_accessed_at, "n_parents": cols.n_parents, "active_role": view.active_role,
        "sub_role": view.sub_role, "tags": [list(t) for t in view.tags],
        "attributes": [json.dumps(a, sort_keys=True) if a else None for a in attrs],
        "session_context": pa.nulls(len(records), STORED_TYPE), "text_stats": pa.nulls(len(records), STORED_TYPE),
    }
    schema = score_schema(dim)
    arrays = [pa.array(data[f.name], f.type) for f in schema if f.name != "embedding"]
    arrays.append(_embedding_array(vecs, dim))
    return pa.Table.from_arrays(arrays, schema=schema)


def _np(t: pa.Table, name: str, dtype: Any) -> np.ndarray:
    return np.asarray(t.column(name).to_numpy(), dtype=dtype)


def vectors(t: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """``(vectors (n, d) float32, missing (n,) bool)``: the embedding column, zeros where missing."""
    col = t.column("embedding").combine_chunks()
    n, dim = len(col), col.type.list_size
    missing = np.asarray(col.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    # a fixed-size list's child holds dim slots per row, null rows included; .values ignores the offset
    flat = col.values.to_numpy(zero_copy_only=False)[col.offset * dim:(col.offset + n) * dim]
    out = np.array(flat, dtype=np.float32).reshape(n, dim)
    out[missing] = 0.0
    return out, missing


def stored_values(t: pa.Table, name: str, width: int, *, none_rows: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """``(values (n, width) float64, stored (n,) bool)``: a stored-feature column, NaN rows where the
    dump stored none. A row counts as stored only if it has ``width`` finite values (or, with
    ``none_rows``, ``width`` NaNs: a stored "none"); any other row — of another length, with an
    infinity, partly NaN — is computed instead, so a damaged dump cannot put a non-finite feature
    before the model."""
    col = t.column(name).combine_chunks()
    n = len(col)
    out = np.full((n, width), np.nan)
    lengths = np.asarray(pc.list_value_length(col).to_numpy(zero_copy_only=False), dtype=np.float64)
    stored = lengths == width  # null rows have a NaN length
    if stored.any():
        good = col.filter(pa.array(stored))
        values = np.asarray(pc.list_flatten(good).to_numpy(zero_copy_only=False), dtype=np.float64).reshape(-1, width)
        ok = np.isfinite(values).all(axis=1)
        if none_rows:
            ok |= np.isnan(values).all(axis=1)
        rows = np.flatnonzero(stored)
        out[rows[ok]] = values[ok]
        stored[rows[~ok]] = False
    return out, stored


def stored_context(t: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """:func:`stored_values` of the ``session_context`` column."""
    return stored_values(t, "session_context", len(CONTEXT_NAMES), none_rows=True)


def _stored_text(t: pa.Table) -> np.ndarray | None:
    if t.column("text_stats").null_count == t.num_rows:
        return None
    values, _ = stored_values(t, "text_stats", len(TEXT_STAT_NAMES))
    return values


def item_table(t: pa.Table) -> ItemTable:
    """The retention plan's view of a scoring table (what the scorer and the rules read)."""
    content = t.column("content").to_pylist()
    attrs_json = t.column("attributes")
    attributes: list[Any] | None = None
    if attrs_json.null_count < len(attrs_json):
        attributes = [None if a is None else json.loads(a) for a in attrs_json.to_pylist()]
    created, expires = _np(t, "created_at", np.float64), _np(t, "expires_at", np.float64)
    src, role = _np(t, "source", np.int64), _np(t, "dialog_role", np.int64)
    sens, conf, flags = _np(t, "sensitivity", np.int64), _np(t, "confidence", np.float64), _np(t, "flags", np.int64)
    columns = RecordColumns(
        content=content, created_at=created, source=src, role=role, confidence=conf, flags=flags,
        sensitivity=sens, expires_at=expires, half_life_s=_np(t, "half_life_s", np.float64),
        access_count=_np(t, "access_count", np.float64), last_accessed_at=_np(t, "last_accessed_at", np.float64),
        n_parents=_np(t, "n_parents", np.float64), attributes=attributes,
        session=session_codes(t.column("session_id").to_pylist()), text_stats=_stored_text(t))
    ids = t.column("id").to_pylist()
    view = RuleView(ids=ids, content=content, flags=flags, source=src, dialog_role=role, sensitivity=sens,
                    expires_at=expires, confidence=conf, active_role=t.column("active_role").to_pylist(),
                    sub_role=t.column("sub_role").to_pylist(), tags=t.column("tags").to_pylist(),
                    attributes=attributes, referenced_at=referenced_at(created, columns.last_accessed_at))
    lengths = np.asarray(pc.utf8_length(t.column("content")).to_numpy(), dtype=np.int64)
    return ItemTable(ids=ids, columns=columns, view=view, content_lengths=lengths)
