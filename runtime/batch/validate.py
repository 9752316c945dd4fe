"""Column-wise validation of MemIR column-layout batches (:func:`runtime.store.dumps.memir_arrow_schema`).

Validating a record with pydantic costs tens of microseconds; a Parquet dump holds millions. This
module checks every column of a batch at once with Arrow compute kernels and numpy, and accepts a
row only when MemIR would accept it **and** would store exactly the values read: ids that match
the id pattern, labels already stripped, enums from the closed sets, finite confidences in [0, 1],
timestamps in whole microseconds, vectors finite and non-zero, no unknown fields. Every other row
— a real error, or merely something MemIR would normalise (a label with spaces around it, a naive
or string timestamp, a non-empty ``attributes``) — goes to the record-at-a-time path, which
validates it with MemIR itself and either normalises it or quarantines it with MemIR's own
message. The checks may only be stricter than MemIR, never looser; a test holds them to that on
generated rows, and the whole path to the row-at-a-time output on the same dumps.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from utilitynet.columns import DIALOG_ROLES, FLAGS, SENSITIVITIES, SOURCE_TYPES

from ..record.memir import ID_PATTERN
from ..store.dumps import STORED_FEATURES, memir_arrow_schema
from .table import STORED_TYPE, empty_table, score_schema

__all__ = ["fast_rows"]

# A label MemIR keeps as given: 1–128 characters, no NUL, and no whitespace at either end (a letter,
# number, punctuation or symbol there: none of those is whitespace to Python's str.strip).
_EDGE = r"[\pL\pN\pP\pS]"
_LABEL = rf"(?s)^{_EDGE}(.*{_EDGE})?$"
_TEXT = r"[\pL\pN]"  # content with a letter or a number is not blank
_TS_UNITS = ("s", "ms", "us")


def _b(a: Any) -> np.ndarray:
    """A boolean Arrow array (nulls = False) as numpy."""
    return np.asarray(pc.fill_null(a, False).to_numpy(zero_copy_only=False), dtype=bool)


def _is_null(a: Any) -> np.ndarray:
    return _b(pc.is_null(a))


def _id_ok(a: Any) -> np.ndarray:
    return _b(pc.and_(pc.match_substring_regex(a, ID_PATTERN), pc.less_equal(pc.utf8_length(a), 128)))


def _label_ok(a: Any) -> np.ndarray:
    return _b(pc.and_(pc.and_(pc.match_substring_regex(a, _LABEL), pc.less_equal(pc.utf8_length(a), 128)),
                      pc.invert(pc.match_substring(a, "\x00"))))


def _opt(a: Any, ok: Any) -> np.ndarray:
    """Null, or valid by ``ok``."""
    return _is_null(a) | ok(a)


def _in(a: Any, values: tuple[str, ...]) -> np.ndarray:
    return _b(pc.is_in(a, value_set=pa.array(values)))


def _list_all(a: Any, ok: Any) -> np.ndarray:
    """Non-null lists whose every element passes ``ok`` (an empty list passes)."""
    n = len(a)
    good = ~_is_null(a)
    flat = pc.list_flatten(a)
    if len(flat):
        bad_el = ~ok(flat)
        if bad_el.any():
            parents = np.asarray(pc.list_parent_indices(a).to_numpy(), dtype=np.int64)
            good[np.unique(parents[bad_el])] = False
    return good if n else np.zeros(0, dtype=bool)


def _seconds(a: Any) -> np.ndarray:
    """A timestamp or duration column as float seconds (NaN for null): exactly what MemIR's
    ``datetime.timestamp()`` / ``timedelta.total_seconds()`` give for whole microseconds."""
    unit = a.type.unit
    us = np.asarray(pc.cast(a, pa.int64()).to_numpy(zero_copy_only=False), dtype=np.float64)
    scale = {"s": 1e6, "ms": 1e3, "us": 1.0}[unit]
    return (us * scale) / 1e6 if scale != 1.0 else us / 1e6


def _codes(a: Any, vocab: tuple[str, ...]) -> np.ndarray:
    return np.asarray(pc.fill_null(pc.index_in(a, value_set=pa.array(vocab)), -1).to_numpy(), dtype=np.int8)


def _flag_bits(a: Any) -> np.ndarray:
    bits = np.zeros(len(a), dtype=np.int64)
    flat = pc.list_flatten(a)
    if len(flat):
        idx = np.asarray(pc.index_in(flat, value_set=pa.array(FLAGS)).to_numpy(zero_copy_only=False), dtype=np.int64)
        parents = np.asarray(pc.list_parent_indices(a).to_numpy(), dtype=np.int64)
        np.bitwise_or.at(bits, parents, np.left_shift(1, idx))
    return bits


def _vectors(a: Any, dim: int) -> tuple[np.ndarray, pa.Array]:
    """Which rows' vectors pass (absent, or finite, non-zero and of moderate magnitude so that
    MemIR's float32 check cannot overflow either way), and the vectors as a fixed-size list of
    ``dim`` — null where absent or of another width, as the row-at-a-time path re-embeds those."""
    n = len(a)
    lengths = np.asarray(pc.fill_null(pc.list_value_length(a), -1).to_numpy(), dtype=np.int64)
    present = lengths >= 0
    flat = np.asarray(pc.list_flatten(a).to_numpy(zero_copy_only=False), dtype=np.float32)
    ok = ~present
    if (lengths[present] == dim).all():  # the usual dump: one width, so one (rows, dim) matrix
        M = flat.reshape(-1, dim)
        if len(M):  # max |x| from the row max and min: no temporary the size of the vectors
            peak = np.maximum(np.abs(M.max(axis=1)), np.abs(M.min(axis=1)))
        else:
            peak = np.zeros(0, np.float32)
        ok[present] = (peak <= 1e30) & (peak > 0)       # NaN and inf fail the first test
        if present.all():
            vecs = M
        else:
            vecs = np.zeros((n, dim), dtype=np.float32)
            vecs[present] = M
        keep = present
    else:
        parents = np.repeat(np.arange(n), np.maximum(lengths, 0))
        mag = np.abs(flat)
        any_bad = np.zeros(n, dtype=bool)
        any_bad[parents[~(mag <= 1e30)]] = True
        nonzero = np.zeros(n, dtype=bool)
        nonzero[parents[mag > 0]] = True
        ok |= present & (lengths > 0) & ~any_bad & nonzero
        keep = present & (lengths == dim)
        vecs = np.zeros((n, dim), dtype=np.float32)
        if keep.any():
            starts = np.concatenate([[0], np.cumsum(np.maximum(lengths, 0))[:-1]])
            idx = starts[keep][:, None] + np.arange(dim)
            vecs[keep] = flat[idx]
    fixed = pa.FixedSizeListArray.from_arrays(pa.array(vecs.reshape(-1), pa.float32()), dim, mask=pa.array(~keep))
    return ok, fixed


def _stored(t: pa.Table, name: str, keep: pa.Array, m: int) -> Any:
    """The kept rows of a stored-feature column, or nulls when it is absent or not a list of numbers
    (a row of the wrong length or with a non-finite value is dropped when the decision reads it:
    :func:`runtime.batch.table.stored_values`)."""
    if name not in t.schema.names:
        return pa.nulls(m, STORED_TYPE)
    c = t.column(name)
    lists = pa.types.is_list(c.type) or pa.types.is_large_list(c.type) or pa.types.is_fixed_size_list(c.type)
    if not lists or not pa.types.is_floating(c.type.value_type):
        return pa.nulls(m, STORED_TYPE)
    return pc.cast(pc.filter(c, keep), STORED_TYPE)


def fast_rows(batch: pa.RecordBatch | pa.Table, first_line: int, dim: int, *,
              stored: frozenset[str] = frozenset()) -> tuple[pa.Table, np.ndarray]:
    """Validate a column-layout batch column-wise.

    ``stored``: the dump's stored-feature columns (:data:`runtime.store.dumps.STORED_FEATURES`) that are
    of this code's schemas, carried into the table; the others are null there (computed while deciding).

    Returns:
        ``(table, slow)``: the scoring table of the rows accepted here (their line numbers are
        ``first_line + row``), and the row indices that need the record-at-a-time path.
    """
    t = batch if isinstance(batch, pa.Table) else pa.Table.from_batches([batch])
    n = t.num_rows
    expected = memir_arrow_schema()
    ok = np.ones(n, dtype=bool)
    names = set(t.schema.names)
    for name in names - set(expected.names) - set(STORED_FEATURES):  # an unknown column: MemIR refuses what it holds
        ok &= _is_null(t.column(name))
    col: dict[str, Any] = {}
    for f in expected:
        if f.name not in names:
            continue
        c = t.column(f.name)
        if pa.types.is_struct(f.type):
            have = c.type
            if not pa.types.is_struct(have) or {have.field(i).name for i in range(have.num_fields)} - set(
                    f.type.field(i).name for i in range(f.type.num_fields)):
                return empty_table(dim), np.arange(n)  # unknown struct fields: MemIR's to judge
            ok &= ~_is_null(c)
            for i in range(have.num_fields):
                col[f"{f.name}.{have.field(i).name}"] = pc.struct_field(c, [i])
        else:
            col[f.name] = c

    def typed(key: str, want: Any) -> Any | None:
        """The column if present with a type this path reads exactly; ``False`` marks a column
        whose type needs the record path for every row; ``None`` = absent (MemIR's default)."""
        if key not in col:
            return None
        c = col[key]
        if pa.types.is_timestamp(want):
            return c if pa.types.is_timestamp(c.type) and c.type.unit in _TS_UNITS else False
        if pa.types.is_duration(want):
            return c if pa.types.is_duration(c.type) and c.type.unit in _TS_UNITS else False
        if pa.types.is_list(want):
            return c if (pa.types.is_list(c.type) or pa.types.is_large_list(c.type)) and pa.types.is_string(
                c.type.value_type) else False
        if pa.types.is_string(want):
            return c if pa.types.is_string(c.type) else False
        if pa.types.is_integer(want):
            return c if pa.types.is_integer(c.type) else False
        if pa.types.is_floating(want):
            return c if pa.types.is_floating(c.type) or pa.types.is_integer(c.type) else False
        return c

    wants = {f"{f.name}.{ch.name}" if pa.types.is_struct(f.type) else f.name: ch.type
             for f in expected for ch in (f.type if pa.types.is_struct(f.type) else [f])}
    cols = {k: typed(k, w) for k, w in wants.items() if k not in ("embedding", "encoder_id")}
    if any(v is False for v in cols.values()):
        return empty_table(dim), np.arange(n)

    def need(key: str, check: Any, *, optional: bool = False, required: bool = False) -> None:
        nonlocal ok
        c = cols.get(key)
        if c is None:
            if required:
                ok &= False
            return
        ok &= (_opt(c, check) if optional else (~_is_null(c) & check(c)))

    sv = cols.get("schema_version")
    if sv is not None:
        ok &= _is_null(sv) | _b(pc.equal(sv, 1))
    need("id", _id_ok, required=True)  # an absent id gets a random one: the record path decides
    content = cols.get("content")
    if content is None:
        ok &= False
    else:
        ok &= ~_is_null(content) & _b(pc.match_substring_regex(content, _TEXT)) & ~_b(
            pc.match_substring(content, "\x00"))
    need("created_at", lambda c: np.ones(len(c), dtype=bool), required=True)
    if "provenance" not in names:
        ok &= False
    need("provenance.type", lambda c: _in(c, SOURCE_TYPES))
    need("provenance.user_id", _id_ok, required=True)
    need("provenance.agent_id", _id_ok)
    need("provenance.session_id", _id_ok, optional=True)
    need("provenance.timestamp", lambda c: np.ones(len(c), dtype=bool), optional=True)
    for k in ("provenance.source_entity", "provenance.trigger", "provenance.source_version",
              "role_context.sub_role", "role_context.tone", "usage.retention_reason"):
        need(k, _label_ok, optional=True)
    need("provenance.derived_from", lambda c: _list_all(c, _id_ok))
    need("provenance.source_uri", lambda c: _b(pc.less_equal(pc.utf8_length(c), 2048)), optional=True)
    need("role_context.active_role", _label_ok)
    need("role_context.dialog_role", lambda c: _in(c, DIALOG_ROLES))
    need("role_context.task_id", _id_ok, optional=True)
    need("metadata.confidence", lambda c: _b(pc.and_(pc.greater_equal(c, 0.0), pc.less_equal(c, 1.0))))
    need("metadata.freshness_half_life", lambda c: _b(pc.greater(pc.cast(c, pa.int64()), 0)), optional=True)
    need("metadata.expires_at", lambda c: np.ones(len(c), dtype=bool), optional=True)
    need("metadata.tags", lambda c: _list_all(c, _label_ok))
    need("metadata.related", lambda c: _list_all(c, _id_ok))
    need("metadata.sensitivity", lambda c: _in(c, SENSITIVITIES))
    need("metadata.flags", lambda c: _list_all(c, lambda x: _in(x, FLAGS)))
    need("metadata.attributes", lambda c: _b(pc.equal(c, "{}")), optional=True)  # non-empty: MemIR's to check
    need("usage.access_count", lambda c: _b(pc.greater_equal(c, 0)))
    need("usage.last_accessed_at", lambda c: np.ones(len(c), dtype=bool), optional=True)
    need("usage.utility", lambda c: _b(pc.is_finite(pc.cast(c, pa.float64()))), optional=True)
    emb = t.column("embedding") if "embedding" in names else None
    if emb is not None:
        if not (pa.types.is_list(emb.type) or pa.types.is_large_list(emb.type) or pa.types.is_fixed_size_list(
                emb.type)) or not pa.types.is_floating(emb.type.value_type):
            return empty_table(dim), np.arange(n)
        emb = pc.cast(emb.combine_chunks(), pa.list_(pa.float32()))
        vec_ok, fixed = _vectors(emb, dim)
        ok &= vec_ok
    parents = cols.get("provenance.derived_from")
    if parents is not None and ok.any():  # MemIR refuses a record that is its own parent
        flat = pc.list_flatten(parents)
        if len(flat):
            owner = np.asarray(pc.list_parent_indices(parents).to_numpy(), dtype=np.int64)
            ids = pc.take(cols["id"], pa.array(owner))
            own = _b(pc.equal(flat, ids))
            ok[np.unique(owner[own])] = False

    keep = pa.array(ok)
    m = int(ok.sum())

    def take(key: str, default: Any = None, typ: Any = pa.string()) -> Any:
        c = cols.get(key)
        if c is None:
            return pa.repeat(pa.scalar(default, typ), m)
        return pc.filter(c, keep)

    def secs(key: str) -> np.ndarray:
        c = cols.get(key)
        return np.full(m, np.nan) if c is None else _seconds(pc.filter(c, keep))

    def codes(key: str, vocab: tuple[str, ...], default: str) -> np.ndarray:
        c = cols.get(key)
        return np.full(m, vocab.index(default), dtype=np.int8) if c is None else _codes(pc.filter(c, keep), vocab)

    def num(key: str, default: float) -> np.ndarray:
        c = cols.get(key)
        if c is None:
            return np.full(m, default)
        return np.asarray(pc.cast(pc.filter(c, keep), pa.float64()).to_numpy(zero_copy_only=False), dtype=np.float64)

    def lists(key: str) -> Any:
        c = cols.get(key)
        return pa.repeat(pa.scalar([], pa.list_(pa.string())), m) if c is None else pc.cast(
            pc.filter(c, keep), pa.list_(pa.string()))

    flags = cols.get("metadata.flags")
    parents_n = cols.get("provenance.derived_from")
    idx = np.flatnonzero(ok)
    out = {
        "line": pa.array(first_line + idx, pa.int64()), "id": take("id"), "user_id": take("provenance.user_id"),
        "agent_id": take("provenance.agent_id", "default"), "session_id": take("provenance.session_id"),
        "content": pc.filter(content, keep) if content is not None else pa.nulls(m, pa.string()),
        "created_at": secs("created_at"), "source": codes("provenance.type", SOURCE_TYPES, "direct_interaction"),
        "dialog_role": codes("role_context.dialog_role", DIALOG_ROLES, "user"),
        "sensitivity": codes("metadata.sensitivity", SENSITIVITIES, "none"),
        "confidence": num("metadata.confidence", 1.0),
        "flags": np.zeros(m, np.int64) if flags is None else _flag_bits(pc.filter(flags, keep)),
        "expires_at": secs("metadata.expires_at"), "half_life_s": secs("metadata.freshness_half_life"),
        "access_count": num("usage.access_count", 0.0), "last_accessed_at": secs("usage.last_accessed_at"),
        "n_parents": np.zeros(m) if parents_n is None else np.asarray(
            pc.list_value_length(pc.filter(parents_n, keep)).to_numpy(zero_copy_only=False), dtype=np.float64),
        "active_role": take("role_context.active_role", "general"), "sub_role": take("role_context.sub_role"),
        "tags": lists("metadata.tags"), "attributes": pa.nulls(m, pa.string()),
        **{name: _stored(t, name, keep, m) if name in stored else pa.nulls(m, STORED_TYPE) for name in STORED_FEATURES},
    }
    schema = score_schema(dim)
    arrays = [pa.array(out[f.name], f.type) if isinstance(out[f.name], np.ndarray) else
              pc.cast(out[f.name], f.type) for f in schema if f.name != "embedding"]
    if emb is None:
        arrays.append(pa.nulls(m, schema.field("embedding").type))
    else:
        arrays.append(fixed if m == n else fixed.filter(keep))
    table = pa.Table.from_arrays([a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a for a in arrays],
                                 schema=schema)
    return table, np.flatnonzero(~ok)
