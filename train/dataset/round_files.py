"""Labelled retention rows on disk: one Arrow/Parquet file + a JSON manifest per round.

A *row* is one candidate item at one retention decision: the feature vector the policy saw, its
hindsight label and weight, and the ids that say where it came from. Rows are accumulated in a
:class:`RowBatch` (numpy chunks, no per-row Python objects for the numbers), written atomically
by :func:`write_round` to ``data/round_NNN/{rows.parquet, manifest.json}``, read back (several
rounds aggregated, each verified against its manifest hash) by :func:`load_rounds` as a
``datasets.Dataset``, and turned into training matrices by :func:`to_numpy` through Arrow buffers.

Columns (one row per item per decision):

============  ==========================  ====================================================
source        string                      ``"sim"`` (simulator), ``"logs"`` (your chat logs) or ``"locomo"`` (research)
episode_id    string                      the split group: a validation split never cuts one
family        string                      task family (``"travel"``, …; ``"locomo"`` for real)
round         int32                       collection round (policy generation)
decision      int32                       index of the decision within the episode
step          int32                       event step of the decision
user_id       string                      scope the decision was taken in
item_id       string                      the candidate memory's id
session       string                      its session id (``""`` = none): the memories of one session in one
                                          decision compete for its share (:mod:`utilitynet.session`)
features      fixed_size_list<float32>[F] ``featurize`` output (F = ``FeatureSpec.n_features``)
label         float32                     soft hindsight target in [0, 1]
weight        float32                     sample weight > 0
tag           string                      label reason (useful | stale | lookalike | mined | other)
kept          bool                        what the collecting policy did
============  ==========================  ====================================================

Example:
    >>> b = RowBatch(spec, round_index=0)                                   # doctest: +SKIP
    >>> b.add_run(run, labels, family="travel")                             # doctest: +SKIP
    >>> write_round(b, round_dir("data", 0), manifest={"seed": 7})          # doctest: +SKIP
    >>> X, y, w, groups = to_numpy(load_rounds([round_dir("data", 0)]))     # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from runtime.errors import DataIntegrityError, SchemaMismatchError, ValidationError
from utilitynet.features import FeatureSpec

if TYPE_CHECKING:  # datasets is heavy; imported where it is used
    import datasets

    from ..agent import EpisodeRun
    from ..label import Labels

__all__ = [
    "MANIFEST_FILE",
    "ROWS_FILE",
    "SOURCES",
    "RowBatch",
    "decision_groups",
    "fit_data",
    "load_rounds",
    "load_spec",
    "read_manifest",
    "round_dir",
    "to_numpy",
    "write_round",
]

SOURCES = ("sim", "locomo", "logs")
ROWS_FILE = "rows.parquet"
MANIFEST_FILE = "manifest.json"
_FORMAT = "memir.rows/2"
# Keys write_round fills in itself; a caller's manifest may not set them (they would lie).
_RESERVED = frozenset({"format", "created_at", "round", "rows", "file", "sha256", "bytes", "feature_spec",
                       "counts", "episodes", "decisions", "positive_rate", "label_mean", "weight_mean"})


from runtime.integrity import file_sha256  # noqa: E402

from .checks import (  # noqa: E402  (schema and value checks of a round)
    per_row,
    row_schema,
    spec_record,
    validate_table,
    value_counts,
)
from .groups import FitData, session_segments  # noqa: E402


class RowBatch:
    """Accumulates labelled rows for one round; :func:`write_round` turns it into Parquet.

    Args:
        spec: the feature spec every ``X`` was computed with (its width is checked on each ``add``).
        round_index: the collection round these rows belong to (the ``round`` column).
    """

    def __init__(self, spec: FeatureSpec, *, round_index: int = 0) -> None:
        if round_index < 0:
            raise ValidationError(f"round_index must be >= 0, got {round_index}", field="round_index")
        self.spec = spec
        self.round_index = int(round_index)
        self._chunks: list[dict[str, np.ndarray]] = []
        self._n = 0

    def __len__(self) -> int:
        return self._n

    def add(self, *, episode_id: str, family: str, decision: int, step: int | Sequence[int],
            user_id: str | Sequence[str], item_ids: Sequence[str], X: np.ndarray, y: np.ndarray,
            w: np.ndarray, tags: Sequence[str], kept: np.ndarray | Sequence[bool],
            source: str = "sim", sessions: Sequence[str | None] | None = None) -> None:
        """Append the rows of one decision (or any block of rows of one episode).

        Scalars (``step``, ``user_id``) are broadcast over the ``n = len(X)`` rows; the rest are
        per row (``sessions``: each row's session id, ``None``/``""`` = none; omitted = none for all).
        Shapes are checked here; values (finite, ranges) in :func:`write_round`, once.

        Raises:
            ValidationError: naming the argument whose shape or vocabulary is wrong.
        """
        X = np.asarray(X, dtype=np.float32)
        if X.ndim != 2 or X.shape[1] != self.spec.n_features:
            raise ValidationError(f"X must have shape (n, {self.spec.n_features}) for feature spec "
                                  f"v{self.spec.version}, got {X.shape}", field="X")
        if source not in SOURCES:
            raise ValidationError(f"source must be one of {SOURCES}, got {source!r}", field="source")
        n = X.shape[0]
        chunk = {
            "source": np.full(n, source, dtype=object),
            "episode_id": np.full(n, str(episode_id), dtype=object),
            "family": np.full(n, str(family), dtype=object),
            "round": np.full(n, self.round_index, dtype=np.int32),
            "decision": np.full(n, int(decision), dtype=np.int32),
            "step": per_row(step, n, "step", np.int32), "user_id": per_row(user_id, n, "user_id", object),
            "item_id": per_row(list(item_ids), n, "item_ids", object),
            "session": per_row([s or "" for s in sessions] if sessions is not None else "", n, "sessions", object),
            "features": X,
            "label": per_row(y, n, "y", np.float32), "weight": per_row(w, n, "w", np.float32),
            "tag": per_row(list(tags), n, "tags", object), "kept": per_row(kept, n, "kept", bool),
        }
        self._chunks.append(chunk)
        self._n += n

    def add_run(self, run: EpisodeRun, labels: Labels, *, family: str, source: str = "sim") -> None:
        """Append every decision of one agent run with its hindsight labels (rows in decision order)."""
        total = sum(len(d.ids) for d in run.decisions)
        if total != len(labels.y):
            raise ValidationError(f"labels cover {len(labels.y)} rows but the run's decisions have "
                                  f"{total} items", field="labels")
        at = 0
        for k, d in enumerate(run.decisions):
            n = len(d.ids)
            self.add(episode_id=run.episode_id, family=family, decision=k, step=d.step, user_id=d.user_id,
                     item_ids=d.ids, X=d.X, y=labels.y[at:at + n], w=labels.w[at:at + n],
                     tags=labels.tag[at:at + n], kept=d.kept, source=source, sessions=d.sessions or None)
            at += n

    def to_table(self) -> pa.Table:
        """All rows as one Arrow table (features as a ``FixedSizeListArray`` over one float32 buffer)."""
        F = self.spec.n_features
        schema = row_schema(F)
        if not self._chunks:
            return schema.empty_table()
        cols: dict[str, pa.Array] = {}
        for name in schema.names:
            parts = [c[name] for c in self._chunks]
            if name == "features":
                flat = np.concatenate([p.reshape(-1) for p in parts])
                cols[name] = pa.FixedSizeListArray.from_arrays(pa.array(flat, type=pa.float32()), F)
            else:
                cols[name] = pa.array(np.concatenate(parts), type=schema.field(name).type)
        return pa.Table.from_arrays(list(cols.values()), schema=schema)


def round_dir(root: str | os.PathLike[str], round_index: int) -> Path:
    """``root/round_NNN`` — where round ``round_index``'s rows live."""
    return Path(root) / f"round_{round_index:03d}"


def write_round(rows: RowBatch, out_dir: str | os.PathLike[str], *, manifest: dict[str, Any],
                overwrite: bool = False) -> Path:
    """Validate and write ``rows.parquet`` + ``manifest.json`` into ``out_dir``, atomically.

    Both files are written into a sibling temporary directory that is renamed into place at the
    end, so a crash never leaves a half-written round that :func:`load_rounds` would accept.

    Args:
        rows: the accumulated rows.
        out_dir: the round directory (usually :func:`round_dir`); must not exist unless ``overwrite``.
        manifest: caller facts to record (seeds, resolved configs, policy, …); JSON-serialisable,
            and none of the keys this function fills in (counts, hashes, feature spec, …).
        overwrite: replace an existing ``out_dir``.

    Returns:
        ``out_dir`` as a ``Path``.

    Raises:
        ValidationError: non-finite features, labels outside [0, 1], weights ≤ 0 (each named with
            its bad-row count), an empty batch, or a bad ``manifest``.
        FileExistsError: ``out_dir`` exists and ``overwrite`` is false.
    """
    out = Path(out_dir)
    if len(rows) == 0:
        raise ValidationError("no rows to write: the batch is empty (did the agent record decisions?)",
                              field="rows")
    clash = sorted(_RESERVED & set(manifest))
    if clash:
        raise ValidationError(f"manifest keys {clash} are filled in by write_round; rename them",
                              field="manifest")
    try:
        json.dumps(manifest)
    except (TypeError, ValueError) as e:
        raise ValidationError(f"manifest must be JSON-serialisable (convert dataclasses with asdict): {e}",
                              field="manifest") from e
    if out.exists() and not overwrite:
        raise FileExistsError(f"{out} already exists; pass overwrite=True or pick another round directory")

    table = rows.to_table()
    validate_table(table)
    y = table["label"].to_numpy()
    info = {
        "format": _FORMAT,
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "round": rows.round_index,
        "rows": table.num_rows,
        "episodes": len(pc.unique(table["episode_id"])),
        "decisions": len(pc.unique(pc.binary_join_element_wise(
            table["episode_id"], pc.cast(table["decision"], pa.string()), "#"))),
        "positive_rate": float(np.mean(y > 0.5)),
        "label_mean": float(np.mean(y)),
        "weight_mean": float(np.mean(table["weight"].to_numpy())),
        "counts": {c: value_counts(table[c]) for c in ("source", "family", "tag")},
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.tmp-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        # lz4: float features barely compress, and lz4 decodes ~2× faster than zstd here.
        pq.write_table(table, tmp / ROWS_FILE, compression="lz4")
        info.update(file=ROWS_FILE, sha256=file_sha256(tmp / ROWS_FILE), bytes=(tmp / ROWS_FILE).stat().st_size,
                    feature_spec=spec_record(rows.spec))
        (tmp / MANIFEST_FILE).write_text(json.dumps({**info, **manifest}, indent=2) + "\n")
        replace_dir(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def replace_dir(tmp: Path, out: Path) -> None:
    """Put the finished directory ``tmp`` at ``out``, replacing what is there with two renames (a
    reader sees the old one or the new one, never a half-written one)."""
    if out.exists():
        old = out.parent / f".{out.name}.old-{uuid.uuid4().hex[:8]}"
        out.rename(old)
        tmp.rename(out)
        shutil.rmtree(old, ignore_errors=True)
    else:
        tmp.rename(out)


def read_manifest(round_path: str | os.PathLike[str], *, verify: bool = True) -> dict[str, Any]:
    """The manifest of one round; with ``verify`` the Parquet file's sha256 is checked against it.

    Raises:
        DataIntegrityError: missing/unreadable manifest, missing rows file, or a hash mismatch.
    """
    d = Path(round_path)
    try:
        man = json.loads((d / MANIFEST_FILE).read_text())
    except (OSError, ValueError) as e:
        raise DataIntegrityError(f"{d} has no readable {MANIFEST_FILE} ({e}); it was not written by "
                                 "train.dataset.write_round — regenerate that round") from e
    if man.get("format") != _FORMAT:
        raise DataIntegrityError(f"{d / MANIFEST_FILE} has format {man.get('format')!r}, "
                                 f"expected {_FORMAT!r}")
    rows = d / man.get("file", ROWS_FILE)
    if not rows.is_file():
        raise DataIntegrityError(f"{rows} is missing; regenerate round {man.get('round')}")
    if verify:
        got = file_sha256(rows)
        if got != man.get("sha256"):
            raise DataIntegrityError(f"{rows} does not match its manifest: sha256 {got[:12]}… != recorded "
                                     f"{str(man.get('sha256'))[:12]}… — the file was modified or truncated; "
                                     "regenerate that round (do not edit rows by hand)")
    return man


def _as_dirs(dirs: str | os.PathLike[str] | Sequence[str | os.PathLike[str]]) -> list[Path]:
    out = [Path(dirs)] if isinstance(dirs, (str, os.PathLike)) else [Path(d) for d in dirs]
    if not out:
        raise ValidationError("no round directories given", field="dirs")
    return out


def _common_spec(mans: Sequence[tuple[Path, dict[str, Any]]]) -> dict[str, Any]:
    (d0, m0), key = mans[0], ("version", "names_sha256", "encoder_id")
    for d, m in mans[1:]:
        a, b = m0["feature_spec"], m["feature_spec"]
        if tuple(a[k] for k in key) != tuple(b[k] for k in key):
            raise SchemaMismatchError(
                f"rounds use different feature specs: {d0} has v{a['version']} ({a['encoder_id']}, names "
                f"{a['names_sha256'][:12]}…), {d} has v{b['version']} ({b['encoder_id']}, names "
                f"{b['names_sha256'][:12]}…). Aggregate only rounds of one spec, or re-collect the old ones.")
    return m0["feature_spec"]


def load_spec(dirs: str | os.PathLike[str] | Sequence[str | os.PathLike[str]]) -> FeatureSpec:
    """The :class:`FeatureSpec` shared by the given rounds (raises ``SchemaMismatchError`` if they differ)."""
    mans = [(d, read_manifest(d, verify=False)) for d in _as_dirs(dirs)]
    s = _common_spec(mans)
    return FeatureSpec(s["version"], tuple(s["names"]), int(s["embedding_dim"]), s["encoder_id"])


def load_rounds(dirs: str | os.PathLike[str] | Sequence[str | os.PathLike[str]]) -> datasets.Dataset:
    """Aggregate the rows of several rounds into one ``datasets.Dataset`` (rounds in the given order).

    Each round's Parquet file is verified against its manifest's sha256 first, and all rounds
    must share one feature spec. The Parquet files are memory-mapped while decoding; the result
    is an in-memory Arrow table (no copy into the Hugging Face cache, nothing written).

    Raises:
        DataIntegrityError: a missing manifest/rows file or a hash mismatch (names the file).
        SchemaMismatchError: rounds fit on different feature specs.
    """
    import datasets
    from datasets.table import InMemoryTable

    paths = _as_dirs(dirs)
    mans = [(d, read_manifest(d, verify=True)) for d in paths]
    _common_spec(mans)
    tables = [pq.read_table(d / m["file"], memory_map=True) for d, m in mans]
    table = pa.concat_tables(tables).replace_schema_metadata(None)
    desc = "memir retention rows from " + ", ".join(str(d) for d in paths)
    # The content hashes are the fingerprint: without one, datasets would hash the whole table.
    fp = hashlib.sha256("".join(m["sha256"] for _, m in mans).encode()).hexdigest()[:16]
    return datasets.Dataset(InMemoryTable(table), info=datasets.DatasetInfo(description=desc), fingerprint=fp)


def _arrow(ds: datasets.Dataset | pa.Table) -> pa.Table:
    # with_format("arrow")[:] honours any select/shuffle indices and is a zero-copy slice otherwise.
    return ds if isinstance(ds, pa.Table) else ds.with_format("arrow")[:]


def to_numpy(ds: datasets.Dataset | pa.Table) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Training matrices straight from the Arrow buffers (no per-row Python).

    Returns:
        ``(X, y, w, groups)``: ``X`` float32 ``(n, F)``, ``y``/``w`` float32 ``(n,)``, and ``groups``
        int64 ``(n,)`` — a dense code per ``episode_id`` (the validation-split group).
    """
    t = _arrow(ds)
    feats = t["features"].combine_chunks()
    F = feats.type.list_size
    # flatten() (not .values) respects slice offsets; np.array copies once into a writable buffer.
    X = np.array(feats.flatten().to_numpy(zero_copy_only=False), dtype=np.float32).reshape(-1, F)
    y = np.array(t["label"].to_numpy(), dtype=np.float32)
    w = np.array(t["weight"].to_numpy(), dtype=np.float32)
    groups = np.asarray(pc.dictionary_encode(t["episode_id"].combine_chunks()).indices, dtype=np.int64)
    return X, y, w, groups


def fit_data(ds: datasets.Dataset | pa.Table, *, source_weights: dict[str, float] | None = None) -> FitData:
    """The rows as a :class:`~train.dataset.FitData`: features, labels, weights and the three groupings
    (split group = episode, decision group, session segment within it), plus what the policy kept.
    ``source_weights`` multiplies the weights of the rows of a source (``{"sim": 0.03}``)."""
    t = _arrow(ds)
    X, y, w, groups = to_numpy(t)
    for src, k in (source_weights or {}).items():
        w = np.where(t["source"].to_numpy(zero_copy_only=False) == src, w * np.float32(k), w).astype(np.float32)
    dec = decision_groups(t)
    sessions = t["session"].to_numpy(zero_copy_only=False)
    kept = np.asarray(t["kept"].to_numpy(zero_copy_only=False), dtype=bool)
    return FitData(X, y, w, groups, dec, session_segments(dec, sessions), kept)


def decision_groups(ds: datasets.Dataset | pa.Table) -> np.ndarray:
    """A dense int64 code per ``(episode_id, decision)`` — the items ranked against each other."""
    t = _arrow(ds)
    ep = np.asarray(pc.dictionary_encode(t["episode_id"].combine_chunks()).indices, dtype=np.int64)
    dec = np.asarray(t["decision"].to_numpy(), dtype=np.int64)
    _, codes = np.unique(ep * (int(dec.max(initial=0)) + 1) + dec, return_inverse=True)
    return codes.astype(np.int64)
