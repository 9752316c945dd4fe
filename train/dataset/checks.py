"""Schema, hashing and value checks for the training rounds written by :mod:`train.dataset`.

Every problem is collected and reported at once, naming the column, the bad-row count and the
first offending row, so a bad labeller or featurizer never writes half-valid data.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from runtime.errors import ValidationError
from utilitynet.features import FeatureSpec


def names_sha256(names: Sequence[str]) -> str:
    return hashlib.sha256("\n".join(names).encode()).hexdigest()


def spec_record(spec: FeatureSpec) -> dict[str, Any]:
    return {"version": spec.version, "n_features": spec.n_features, "embedding_dim": spec.embedding_dim,
            "encoder_id": spec.encoder_id, "names_sha256": names_sha256(spec.names),
            "names": list(spec.names)}


def row_schema(n_features: int) -> pa.Schema:
    return pa.schema([
        ("source", pa.string()), ("episode_id", pa.string()), ("family", pa.string()),
        ("round", pa.int32()), ("decision", pa.int32()), ("step", pa.int32()),
        ("user_id", pa.string()), ("item_id", pa.string()), ("session", pa.string()),
        ("features", pa.list_(pa.float32(), n_features)),
        ("label", pa.float32()), ("weight", pa.float32()), ("tag", pa.string()), ("kept", pa.bool_()),
    ])


def per_row(value: Any, n: int, name: str, dtype: Any) -> np.ndarray:
    """A scalar broadcast to ``n`` rows, or a length-``n`` sequence as an array."""
    if np.ndim(value) == 0:
        return np.full(n, value, dtype=dtype)
    arr = np.asarray(value, dtype=dtype)
    if arr.shape != (n,):
        raise ValidationError(f"{name} must be a scalar or have one entry per row ({n}), "
                              f"got shape {arr.shape}", field=name)
    return arr


def validate_table(t: pa.Table) -> None:
    """Every value problem at once, each naming its column, the bad-row count and a first example."""
    problems: list[tuple[str, str]] = []

    def report(col: str, bad: np.ndarray, what: str) -> None:
        idx = np.flatnonzero(bad)
        if idx.size:
            i = int(idx[0])
            where = f"episode {t['episode_id'][i].as_py()!r} decision {t['decision'][i].as_py()}"
            problems.append((col, f"{idx.size} rows {what} (first: row {i}, {where})"))

    F = t.schema.field("features").type.list_size
    X = t["features"].combine_chunks().flatten().to_numpy().reshape(-1, F)
    report("features", ~np.isfinite(X).all(axis=1), "have NaN/inf features")
    y = t["label"].to_numpy()
    report("label", ~((y >= 0) & (y <= 1)), "have a label outside [0, 1] (or NaN)")
    w = t["weight"].to_numpy()
    report("weight", ~((w > 0) & np.isfinite(w)), "have a weight that is not a finite number > 0")
    if problems:
        raise ValidationError("refusing to write invalid rows — "
                              + "; ".join(f"{c}: {m}" for c, m in problems)
                              + ". Fix the labeller/featurizer output before writing.",
                              field=problems[0][0], problems=problems)


def value_counts(col: pa.ChunkedArray) -> dict[str, int]:
    return {str(s["values"]): int(s["counts"]) for s in pc.value_counts(col).to_pylist()}


