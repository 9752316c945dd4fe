"""The LongMemEval training rows that ship with the repository (``data/lme``; MIT).

``make train`` on a fresh clone has no LongMemEval file and cannot spend an hour encoding one, so the
rows a fit needs are precomputed by ``python -m train.lme.build_rows`` and committed, compactly:

- ``rows.parquet``: one row per (decision group, memory) (:mod:`train.conversation_rows`): question id,
  fold, split (``lme`` = training, ``lme-validation`` = round selection and promotion, never fit on),
  decision group, write step, turn id, session id, whether the collecting policy kept it, tag
  (evidence / superseded / other), label, weight, the named features as float16 (they are counts,
  bits and logs: float16 keeps them to 3 significant digits, which the fit cannot tell apart), and the
  index of the row's embedding in ``vectors.parquet`` (-1 when the rows were built without them);
- ``vectors.parquet``: the unit embeddings of the turns those rows read, once per (question, turn),
  as float16 — only when built with ``--vectors``: the shipped model does not read the embedding
  (``embedding_proj = 0``), so the shipped rows leave them out and the fit sees zeros there;
- ``manifest.json``: the encoder id, the feature spec, counts, the LongMemEval file it came from and
  the sha256 of both Parquet files (checked on every load: an edited or truncated file is refused);
- ``LICENSE``: LongMemEval's MIT notice, which travels with the rows.

A model fit on these rows may ship: the rows are derived from MIT-licensed data only.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from runtime.errors import ValidationError
from runtime.integrity import file_sha256 as _sha256
from utilitynet.features import FEATURE_NAMES, FeatureSpec

from ..conversation_rows import ConversationRows
from ..dataset.round_files import replace_dir

__all__ = ["LME_LICENSE", "SPLIT_TRAIN", "SPLIT_VALIDATION", "ShippedRows", "read_shipped", "write_shipped"]

SPLIT_TRAIN = "lme"
SPLIT_VALIDATION = "lme-validation"
FORMAT = "memir-lme-rows/2"
ROWS, VECTORS, MANIFEST, LICENSE = "rows.parquet", "vectors.parquet", "manifest.json", "LICENSE"

LME_LICENSE = """\
The rows in this directory are derived from LongMemEval (Di Wu, Hongwei Wang, Wenhao Yu, Yuwei Zhang,
Kai-Wei Chang, Dong Yu: "LongMemEval: Benchmarking Chat Assistants on Long-Term Interactive Memory",
ICLR 2025; https://github.com/xiaowu0162/LongMemEval), released under the MIT License:

MIT License

Copyright (c) 2024 Di Wu

Permission is hereby granted, free of charge, to any person obtaining a copy
of this software and associated documentation files (the "Software"), to deal
in the Software without restriction, including without limitation the rights
to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
copies of the Software, and to permit persons to whom the Software is
furnished to do so, subject to the following conditions:

The above copyright notice and this permission notice shall be included in all
copies or substantial portions of the Software.

THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE
SOFTWARE.
"""


@dataclass
class ShippedRows:
    """The rows of one split, ready for a fit (``X`` float32, embeddings widened back)."""

    X: np.ndarray
    y: np.ndarray
    w: np.ndarray
    question: np.ndarray
    decision: np.ndarray
    tag: np.ndarray
    session: np.ndarray
    kept: np.ndarray
    has_vectors: bool


def _names_sha(names: Sequence[str]) -> str:
    return hashlib.sha256("\n".join(names).encode()).hexdigest()


def write_shipped(rows: Sequence[ConversationRows], folds: dict[str, int], validation_fold: int, spec: FeatureSpec,
                  out: str | Path, *, source: dict[str, Any], want_vectors: bool = False) -> Path:
    """Write the rows of every question (atomically: a sibling temp dir renamed into place).

    Args:
        rows: per-question rows (:func:`train.lme.rows.question_rows`), all computed with ``spec``.
        folds: question id → fold; questions in ``validation_fold`` form the validation split.
        validation_fold: the fold held out of every fit.
        spec: the feature spec (its encoder id and names are recorded and checked on load).
        out: the directory (replaced if it exists).
        source: what the rows came from (file name, sha256, split), recorded in the manifest.
        want_vectors: also write the embeddings (for fits that read them: ``embedding_proj > 0``).
    """
    m = len(FEATURE_NAMES)
    if spec.n_features != m + spec.embedding_dim:
        raise ValidationError(f"feature spec v{spec.version} has {spec.n_features} features, expected "
                              f"{m} named + {spec.embedding_dim} embedding columns", field="spec")
    cols: dict[str, list[Any]] = {k: [] for k in ("question_id", "fold", "split", "decision", "step", "item_id",
                                                  "session", "kept", "tag", "label", "weight", "vector")}
    named: list[np.ndarray] = []
    vectors: list[np.ndarray] = []
    vectors_on = want_vectors
    for r in rows:
        if len(r.y) == 0:
            continue
        if r.X.shape[1] != spec.n_features:
            raise ValidationError(f"question {r.conversation_id}: rows have {r.X.shape[1]} features, the spec "
                                  f"{spec.n_features}", field="rows")
        fold = folds[r.conversation_id]
        index: dict[str, int] = {}
        for i, item in enumerate(r.item_ids):
            if not vectors_on:
                cols["vector"].append(-1)
                continue
            if item not in index:
                index[item] = len(vectors)
                vectors.append(r.X[i, m:])
            cols["vector"].append(index[item])
        n = len(r.y)
        named.append(r.X[:, :m])
        cols["question_id"] += [r.conversation_id] * n
        cols["fold"] += [fold] * n
        cols["split"] += [SPLIT_VALIDATION if fold == validation_fold else SPLIT_TRAIN] * n
        cols["decision"] += r.decision.tolist()
        cols["step"] += r.step.tolist()
        cols["item_id"] += list(r.item_ids)
        cols["session"] += list(r.session)
        cols["kept"] += r.kept.tolist()
        cols["tag"] += list(r.tag)
        cols["label"] += r.y.tolist()
        cols["weight"] += r.w.tolist()
    if not named:
        raise ValidationError("no rows to write", field="rows")
    N = np.vstack(named).astype(np.float16)
    V = np.vstack(vectors).astype(np.float16) if vectors else np.zeros((0, spec.embedding_dim), np.float16)
    if not (np.isfinite(N).all() and np.isfinite(V).all()):
        raise ValidationError("non-finite features: rebuild the rows", field="rows")
    table = pa.table({
        "question_id": pa.array(cols["question_id"], pa.string()), "fold": pa.array(cols["fold"], pa.int8()),
        "split": pa.array(cols["split"], pa.string()), "decision": pa.array(cols["decision"], pa.int32()),
        "step": pa.array(cols["step"], pa.int32()), "item_id": pa.array(cols["item_id"], pa.string()),
        "session": pa.array(cols["session"], pa.string()), "kept": pa.array(cols["kept"], pa.bool_()),
        "tag": pa.array(cols["tag"], pa.string()), "label": pa.array(cols["label"], pa.float32()),
        "weight": pa.array(cols["weight"], pa.float32()),
        "named": pa.FixedSizeListArray.from_arrays(pa.array(N.reshape(-1), pa.float16()), m),
        "vector": pa.array(cols["vector"], pa.int32()),
    })
    vtable = pa.table({"vector": pa.FixedSizeListArray.from_arrays(pa.array(V.reshape(-1), pa.float16()),
                                                                   spec.embedding_dim)})
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.tmp-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        pq.write_table(table, tmp / ROWS, compression="zstd", compression_level=9)
        pq.write_table(vtable, tmp / VECTORS, compression="zstd", compression_level=9)
        y = np.asarray(cols["label"])
        split = np.asarray(cols["split"])
        manifest = {
            "format": FORMAT, "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "license": "MIT (LongMemEval); see LICENSE", "source": source,
            "encoder_id": spec.encoder_id, "feature_schema_version": spec.version,
            "named_features": m, "named_sha256": _names_sha(FEATURE_NAMES), "embedding_dim": spec.embedding_dim,
            "validation_fold": validation_fold, "rows": int(len(y)), "vectors": int(len(V)),
            "questions": {s: len({q for q, sp in zip(cols["question_id"], split) if sp == s})
                          for s in (SPLIT_TRAIN, SPLIT_VALIDATION)},
            "positive_rate": float(np.mean(y > 0.5)),
            "tags": {t: int(c) for t, c in zip(*np.unique(cols["tag"], return_counts=True))},
            "sha256": {ROWS: _sha256(tmp / ROWS), VECTORS: _sha256(tmp / VECTORS)},
        }
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
        (tmp / LICENSE).write_text(LME_LICENSE)
        replace_dir(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def read_manifest(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    try:
        man: dict[str, Any] = json.loads((p / MANIFEST).read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ValidationError(f"{p / MANIFEST}: unreadable ({e}); rebuild with `python -m train.lme.build_rows`",
                              field="lme_rows") from e
    if man.get("format") != FORMAT:
        raise ValidationError(f"{p}: format {man.get('format')!r}, expected {FORMAT!r}", field="lme_rows")
    return man


def read_shipped(path: str | Path, spec: FeatureSpec) -> tuple[ShippedRows, ShippedRows, dict[str, Any]]:
    """The (training, validation) rows at ``path`` and its manifest, verified against ``spec``.

    Raises:
        ValidationError: a checksum mismatch, another encoder or feature schema (naming what to rebuild).
    """
    p = Path(path)
    man = read_manifest(p)
    for name in (ROWS, VECTORS):
        if _sha256(p / name) != man["sha256"][name]:
            raise ValidationError(f"{p / name} does not match its manifest's sha256 (edited or truncated?): "
                                  "restore it from git or rebuild", field="lme_rows")
    if man["encoder_id"] != spec.encoder_id or man["embedding_dim"] != spec.embedding_dim:
        raise ValidationError(f"{p}: rows were built with encoder {man['encoder_id']!r} "
                              f"({man['embedding_dim']} dims), this run uses {spec.encoder_id!r}: rebuild "
                              "them with `python -m train.lme.build_rows`", field="lme_rows")
    if man["feature_schema_version"] != spec.version or man["named_sha256"] != _names_sha(FEATURE_NAMES):
        raise ValidationError(f"{p}: rows hold feature schema v{man['feature_schema_version']}, this run computes "
                              f"v{spec.version}: rebuild them with `python -m train.lme.build_rows`",
                              field="lme_rows")
    t = pq.read_table(p / ROWS)
    V = pq.read_table(p / VECTORS)["vector"].combine_chunks().flatten().to_numpy(zero_copy_only=False)
    V = V.reshape(-1, spec.embedding_dim).astype(np.float32)
    m = man["named_features"]
    N = t["named"].combine_chunks().flatten().to_numpy(zero_copy_only=False).reshape(-1, m)
    vi = t["vector"].to_numpy()
    has_vectors = bool(len(V)) and bool((vi >= 0).all())
    X = np.zeros((len(N), spec.n_features), dtype=np.float32)
    X[:, :m] = N
    if has_vectors:
        X[:, m:] = V[vi]
    qid = t["question_id"].to_numpy(zero_copy_only=False)
    _, qidx = np.unique(qid, return_inverse=True)
    # decision ids are per question: offset them so that no two questions share one
    dec = qidx.astype(np.int64) * (int(t["decision"].to_numpy().max()) + 1) + t["decision"].to_numpy()
    split = t["split"].to_numpy(zero_copy_only=False)
    y, w, tag = t["label"].to_numpy(), t["weight"].to_numpy(), t["tag"].to_numpy(zero_copy_only=False)
    sess, kept = t["session"].to_numpy(zero_copy_only=False), t["kept"].to_numpy(zero_copy_only=False)

    def part(mask: np.ndarray) -> ShippedRows:
        return ShippedRows(X[mask], y[mask], w[mask], qidx[mask], dec[mask], tag[mask], sess[mask],
                           np.asarray(kept[mask], bool), has_vectors)

    return part(split == SPLIT_TRAIN), part(split == SPLIT_VALIDATION), man
