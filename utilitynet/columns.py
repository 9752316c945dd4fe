"""Column codecs for ``featurize``: closed vocabularies, timestamps, and the clipping that keeps
every feature finite and bounded (numpy only). Kept apart from the feature groups themselves."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np

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


