"""Parsed JSONL records into the MemIR column layout, so a JSONL chunk is validated column-wise
(:func:`runtime.batch.validate.fast_rows`) like a Parquet one instead of by MemIR record by record.

Why: validating one record with pydantic cost ~45 µs of the ~70 µs a JSONL line took to read
(orjson and the vector ~22 µs); the column checks cost a few µs a row.

Only what can be carried over *exactly* enters the columns; a row with anything else is marked for
the record path, where MemIR judges it as before (and normalises or quarantines it):

- every value of exactly the JSON type its field takes — no coercion here: a number where a
  string is due, a bool or a float where an integer is due, a string where a number is due;
- timestamps in the canonical UTC form (``2026-01-01T00:00:00Z`` / ``+00:00``, up to 6 fractional
  digits), the form memir writes; other spellings and offsets go to MemIR;
- no ``freshness_half_life`` (durations have several JSON spellings) and empty ``attributes``;
- no field MemIR does not know, at any level; a vector of the scoring width or none.

Absent fields get MemIR's own defaults, read from the model (so they cannot drift from it); a field
whose default is made per record (``id``, ``created_at``) is required here. The column checks then
accept only what MemIR would store unchanged, so a result never depends on the path a row took;
the tests compare the two on generated records and on hand-made bad lines.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime
from enum import Enum
from typing import Any

import numpy as np
import pyarrow as pa
from pydantic_core import PydanticUndefined

from ..record.memir import MemIR
from ..store.dumps import STORED_FEATURES, memir_arrow_schema

__all__ = ["as_vector", "to_columns"]

_REQUIRED = object()  # no default this module may fill in

# The canonical UTC timestamp memir writes; anything else is MemIR's to parse.
_TS = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,6})?(?:Z|\+00:00)")
_I64 = 1 << 63


def _default(model: type[Any], name: str) -> Any:
    f = model.model_fields[name]
    if f.default is not PydanticUndefined:
        d = f.default
        return d.value if isinstance(d, Enum) else d
    if f.default_factory is list:
        return []
    if f.default_factory is dict:
        return {}
    return _REQUIRED


def _layout() -> list[tuple[str, tuple[tuple[str, str, Any], ...] | None, str, Any]]:
    """``(field, children or None, kind, default)`` of the column layout, in its order."""
    schema = memir_arrow_schema()
    kinds = {"string": "str", "int64": "int", "double": "num", "timestamp[us, tz=UTC]": "ts",
             "list<item: string>": "strs", "duration[us]": "dur"}
    out: list[tuple[str, tuple[tuple[str, str, Any], ...] | None, str, Any]] = []
    for f in schema:
        if f.name in ("embedding", "encoder_id"):
            continue
        if pa.types.is_struct(f.type):
            sub = MemIR.model_fields[f.name].annotation
            assert isinstance(sub, type)  # Provenance, RoleContext, Metadata, Usage
            children = tuple((c.name, "attrs" if c.name == "attributes" else kinds[str(c.type)], _default(sub, c.name))
                             for c in f.type)
            out.append((f.name, children, "struct", _REQUIRED if f.name == "provenance" else None))
        else:
            out.append((f.name, None, kinds[str(f.type)], _default(MemIR, f.name)))
    return out


_LAYOUT = _layout()
_TOP = frozenset(name for name, _, _, _ in _LAYOUT) | {"embedding", "encoder_id"} | frozenset(STORED_FEATURES)
_KEYS = {name: frozenset(c[0] for c in children) for name, children, _, _ in _LAYOUT if children is not None}


_STRUCTS = tuple((name, children, default) for name, children, _, default in _LAYOUT if children is not None)
_REQUIRED_TOP = tuple(name for name, children, _, default in _LAYOUT if children is None and default is _REQUIRED)
_EMPTY: dict[str, Any] = {}


def _plain(obj: Any) -> bool:
    """The row's shape is one the columns can hold: a JSON object of known fields, every struct an
    object of known fields, nothing without a default missing."""
    if type(obj) is not dict or not obj.keys() <= _TOP:
        return False
    for name in _REQUIRED_TOP:
        if name not in obj:
            return False
    for name, _, default in _STRUCTS:
        v = obj.get(name, _EMPTY if default is None else None)
        if type(v) is not dict or not v.keys() <= _KEYS[name]:
            return False
    return True


def _typed(col: list[Any], kind: str, plain: np.ndarray) -> list[Any]:
    """``col`` with each value that is not exactly of ``kind`` set to None and its row marked
    (``plain[i] = False``). Timestamps become datetimes."""
    if kind == "str":
        for i, v in enumerate(col):
            if v is not None and type(v) is not str:
                col[i], plain[i] = None, False
        return col
    if kind == "strs":
        for i, v in enumerate(col):
            if v is not None and (type(v) is not list or not all(type(x) is str for x in v)):
                col[i], plain[i] = None, False
        return col
    if kind == "int":
        for i, v in enumerate(col):
            if v is not None and (type(v) is not int or not -_I64 <= v < _I64):
                col[i], plain[i] = None, False
        return col
    if kind == "num":
        for i, v in enumerate(col):
            if v is not None and type(v) is not float and (type(v) is not int or not -_I64 <= v < _I64):
                col[i], plain[i] = None, False
        return col
    if kind == "ts":
        for i, v in enumerate(col):
            if v is None:
                continue
            if type(v) is str and _TS.fullmatch(v):
                try:
                    col[i] = datetime.fromisoformat(v)
                    continue
                except ValueError:
                    pass
            col[i], plain[i] = None, False
        return col
    if kind == "attrs":  # empty only: MemIR checks the rest
        for i, v in enumerate(col):
            if v is not None and not (type(v) is dict and not v):
                plain[i] = False
            col[i] = None
        return col
    # "dur": none only (durations have several JSON spellings)
    for i, v in enumerate(col):
        if v is not None:
            col[i], plain[i] = None, False
    return col


def as_vector(e: Any, dim: int) -> Any:
    """A record's ``embedding`` that is a list of ``dim`` numbers as a float32 array (the conversion the
    record path makes), else ``e`` as it was, for the record path to judge."""
    if type(e) is list and len(e) == dim:
        try:
            return np.asarray(e, dtype=np.float32)
        except (ValueError, TypeError):
            pass
    return e


def _vectors(objs: Sequence[Any], plain: np.ndarray, dim: int) -> tuple[np.ndarray, np.ndarray]:
    """The rows' vectors as one (n, dim) float32 matrix and which rows have one: an ``embedding`` that
    is a list of ``dim`` numbers or such a float32 array (the reader converts them as it parses); a
    row whose ``embedding`` is anything else but null is marked."""
    n = len(objs)
    vecs = np.zeros((n, dim), dtype=np.float32)
    has = np.zeros(n, dtype=bool)
    for i, (o, p) in enumerate(zip(objs, plain.tolist(), strict=True)):
        if not p:
            continue
        e = o.get("embedding")
        if e is None:
            continue
        e = as_vector(e, dim)
        if type(e) is np.ndarray and e.dtype == np.float32 and e.shape == (dim,):
            vecs[i] = e
            has[i] = True
        else:
            plain[i] = False
    return vecs, has


def to_columns(objs: Sequence[Any], dim: int) -> tuple[pa.Table, np.ndarray]:
    """Parsed JSONL records -> ``(table in the MemIR column layout, rows marked for the record path)``.

    A marked row has a null ``content`` in the table (so the column checks refuse it too). Raises
    ``pyarrow.ArrowException`` / ``ValueError`` / ``TypeError`` / ``OverflowError`` if a column
    cannot be built after all; the caller then reads the chunk record by record."""
    n = len(objs)
    plain = np.fromiter((_plain(o) for o in objs), dtype=bool, count=n)
    rows = [o if p else _EMPTY for o, p in zip(objs, plain.tolist(), strict=True)]
    schema = memir_arrow_schema()
    values: dict[str, list[Any]] = {}  # field (struct fields as "struct.field") -> its values
    for name, children, kind, default in _LAYOUT:
        if children is None:
            values[name] = _typed([r.get(name, default) if r is not _EMPTY else None for r in rows], kind, plain)
            continue
        subs = [r.get(name, _EMPTY) if r is not _EMPTY else _EMPTY for r in rows]
        for cname, ckind, cdefault in children:  # a required field left out is null: the checks refuse it
            d = None if cdefault is _REQUIRED else cdefault
            values[f"{name}.{cname}"] = _typed([s.get(cname, d) for s in subs], ckind, plain)
    vecs, has = _vectors(objs, plain, dim)
    keep = plain.tolist()
    values["content"] = [v if p else None for v, p in zip(values["content"], keep, strict=True)]  # marked: refused
    out = []
    for name, children, _, _ in _LAYOUT:
        f = schema.field(name)
        if children is None:
            out.append(pa.array(values[name], f.type))
        else:
            kids = [pa.array(values[f"{name}.{c.name}"], c.type) for c in f.type]
            out.append(pa.StructArray.from_arrays(kids, fields=list(f.type)))
    out.append(pa.FixedSizeListArray.from_arrays(pa.array(vecs.reshape(-1), pa.float32()), dim, mask=pa.array(~has)))
    names = [name for name, _, _, _ in _LAYOUT] + ["embedding"]
    return pa.Table.from_arrays(out, names=names), np.flatnonzero(~plain)
