"""Column codecs for ``featurize``: closed vocabularies, timestamps, and the clipping that keeps
every feature finite and bounded (numpy only). Kept apart from the feature groups themselves."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np

from .session import session_codes

_MAX_HOURS = 1e5       # ~11 years: clip for every duration before log-scaling
_MAX_COUNT = 1e6       # clip for counts (access count, steps) before log-scaling

# Closed vocabularies (the ``.value`` strings of runtime.record's enums). Unknown values one-hot to 0.
SOURCE_TYPES = ("direct_interaction", "derived_inference", "external_ingest", "system_feedback")
DIALOG_ROLES = ("user", "agent", "system", "tool")
SENSITIVITIES = ("none", "pii", "secret")
FLAGS = ("core_instruction", "user_confirmed", "pinned", "key_result", "urgent", "used",
          "placeholder", "superseded")


def _index(values: Sequence[str]) -> dict[str, int]:
    return {v: i for i, v in enumerate(values)}


SRC_IDX, ROLE_IDX, SENS_IDX = _index(SOURCE_TYPES), _index(DIALOG_ROLES), _index(SENSITIVITIES)
_FLAG_BIT = {f: 1 << i for i, f in enumerate(FLAGS)}


def _lookup(table: dict[str, int], v: Any) -> int:
    # StrEnum members hash like their value, so the first lookup hits for MemIR; a plain Enum or
    # an unknown value falls back to ``.value`` and then to -1 (= all-zero one-hot).
    i = table.get(v)
    if i is None:
        i = table.get(getattr(v, "value", ""), -1)
    return i


NAN = float("nan")


def ts(dt: datetime | None) -> float:
    """POSIX seconds; naive datetimes are UTC (as in MemIR); None → NaN."""
    if dt is None:
        return NAN
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.timestamp()


def timestamps(col: Sequence[datetime | None]) -> np.ndarray:
    # Fast path for MemIR (always tz-aware); ``ts`` only for None/naive values.
    return np.array([d.timestamp() if d is not None and d.tzinfo is not None else ts(d) for d in col],
                    dtype=np.float64)


def codes(table: dict[str, int], col: Sequence[Any]) -> np.ndarray:
    codes = [table.get(v, -1) for v in col]
    if -1 in codes:  # plain Enums / unknown values: the slower ``.value`` path, only for those
        codes = [c if c >= 0 else _lookup(table, v) for c, v in zip(codes, col, strict=True)]
    return np.array(codes, dtype=np.int64)


def flag_bits(flags: Sequence[Any]) -> int:
    bits = 0
    for f in flags:
        bits |= _FLAG_BIT.get(f) or _FLAG_BIT.get(getattr(f, "value", ""), 0)
    return bits


def floats(col: Sequence[Any]) -> np.ndarray:
    """Numbers → float64 (None → NaN); ints beyond float range are clipped, not an error."""
    try:
        return np.array(col, dtype=np.float64)
    except (OverflowError, TypeError, ValueError):
        return np.array([NAN if v is None else float(min(max(v, -1e300), 1e300)) for v in col],
                        dtype=np.float64)


def log_hours(seconds: np.ndarray) -> np.ndarray:
    return np.log1p(np.clip(np.nan_to_num(seconds / 3600.0, nan=0.0), 0.0, _MAX_HOURS))


def log_count(x: np.ndarray) -> np.ndarray:
    return np.log1p(np.clip(np.nan_to_num(x, nan=0.0), 0.0, _MAX_COUNT))


def onehot(idx: np.ndarray, k: int) -> np.ndarray:
    out = np.zeros((len(idx), k))
    ok = idx >= 0
    out[np.flatnonzero(ok), idx[ok]] = 1.0
    return out




_COLUMNS = ("created_at", "source", "role", "confidence", "flags", "sensitivity", "expires_at", "half_life_s",
            "access_count", "last_accessed_at", "n_parents")


@dataclass(frozen=True)
class RecordColumns:
    """A batch of memories as columns: what :func:`utilitynet.features.featurize` reads.

    Batch scorers that hold their memories column-wise (a Parquet or Arrow dump, a data engine's
    block) build this directly and skip the per-record Python pass; :meth:`from_records` is that
    pass for MemIR objects. Every numeric column is a length-``n`` array:

    Attributes:
        content: the texts (a sequence of ``str``).
        created_at, expires_at, last_accessed_at: POSIX seconds, NaN when unknown / absent.
        source, role, sensitivity: codes into :data:`SOURCE_TYPES`, :data:`DIALOG_ROLES`,
            :data:`SENSITIVITIES` (−1 = unknown: an all-zero one-hot); see :func:`codes`.
        confidence: in [0, 1] (NaN = 1, the MemIR default).
        flags: bit ``i`` set = ``FLAGS[i]`` (see :func:`flag_bits`).
        half_life_s: freshness half-life in seconds, NaN when none.
        access_count: times recalled. n_parents: ``len(provenance.derived_from)``.
        attributes: per-record ``metadata.attributes`` mappings (or ``None``), read only for session
            context that older stores kept there; ``None`` for the whole batch = none.
        session: per-record session group codes (:func:`utilitynet.session.session_codes` of
            ``provenance.session_id``), which the scorer's session share reads; ``None`` = every record
            is a session of its own.
        text_stats: ``(n, len(TEXT_STAT_NAMES))`` float64, the records' text statistics as stored (a dump's
            stored features: :func:`utilitynet.textstats.text_stats` of the same contents); a row of NaN, or
            ``None`` for the whole batch, is computed from ``content``.
    """

    content: Sequence[str]
    created_at: np.ndarray
    source: np.ndarray
    role: np.ndarray
    confidence: np.ndarray
    flags: np.ndarray
    sensitivity: np.ndarray
    expires_at: np.ndarray
    half_life_s: np.ndarray
    access_count: np.ndarray
    last_accessed_at: np.ndarray
    n_parents: np.ndarray
    attributes: Sequence[Any] | None = None
    session: np.ndarray | None = None
    text_stats: np.ndarray | None = None

    def __post_init__(self) -> None:
        n = len(self.content)
        for name in _COLUMNS:
            v = getattr(self, name)
            if np.ndim(v) != 1 or len(v) != n:
                raise ValueError(f"RecordColumns.{name} must be a 1-d array of len(content) = {n}, "
                                 f"got shape {np.shape(v)}")
        if self.attributes is not None and len(self.attributes) != n:
            raise ValueError(f"RecordColumns.attributes must have len(content) = {n}, got {len(self.attributes)}")
        if self.session is not None and (np.ndim(self.session) != 1 or len(self.session) != n):
            raise ValueError(f"RecordColumns.session must be a 1-d array of len(content) = {n}, "
                             f"got shape {np.shape(self.session)}")
        if self.text_stats is not None and (np.ndim(self.text_stats) != 2 or len(self.text_stats) != n):
            raise ValueError(f"RecordColumns.text_stats must be a 2-d array of len(content) = {n} rows, "
                             f"got shape {np.shape(self.text_stats)}")

    def __len__(self) -> int:
        return len(self.content)

    @classmethod
    def from_records(cls, records: Sequence[Any]) -> RecordColumns:
        """Columns of MemIR records (or duck-typed equivalents): one pass of attribute reads (~3 µs
        a record), then one transpose and a typed conversion per column."""
        rows = [(r.content, r.created_at, (pv := r.provenance).type, r.role_context.dialog_role,
                 (md := r.metadata).confidence, md.flags, md.sensitivity, md.expires_at,
                 md.freshness_half_life, (us := r.usage).access_count, us.last_accessed_at,
                 pv.derived_from, getattr(md, "attributes", None), getattr(pv, "session_id", None)) for r in records]
        cols: list[tuple[Any, ...]] = list(zip(*rows, strict=True)) if rows else [()] * 14
        (content, created, src, role, conf, flags, sens, expires, half_life, access, last_access,
         parents, attributes, sessions) = cols
        return cls(
            content=[c or "" for c in content] if None in content else list(content),
            created_at=timestamps(created), source=codes(SRC_IDX, src), role=codes(ROLE_IDX, role),
            confidence=floats(conf), flags=np.array([flag_bits(f) if f else 0 for f in flags], dtype=np.int64),
            sensitivity=codes(SENS_IDX, sens), expires_at=timestamps(expires),
            half_life_s=np.array([NAN if h is None else h.total_seconds() for h in half_life], dtype=np.float64),
            access_count=floats(access), last_accessed_at=timestamps(last_access),
            n_parents=np.array([len(p) if p else 0 for p in parents], dtype=np.float64),
            attributes=attributes if any(a for a in attributes) else None, session=session_codes(sessions))

    def slice(self, start: int, stop: int) -> RecordColumns:
        """Rows ``start:stop`` (views of the arrays)."""
        kw = {name: getattr(self, name)[start:stop] for name in _COLUMNS}
        return RecordColumns(content=self.content[start:stop], **kw,
                             attributes=None if self.attributes is None else self.attributes[start:stop],
                             session=None if self.session is None else self.session[start:stop],
                             text_stats=None if self.text_stats is None else self.text_stats[start:stop])

