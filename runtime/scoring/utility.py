"""The ONNX utility scorer (the learned ``Scorer``) and a deterministic ``FakeScorer`` test double.

:class:`UtilityScorer` runs the exported utility MLP with onnxruntime — no torch. On load it reads
the feature spec from the model's metadata and refuses a model fit on another feature schema (names,
version or embedding width) with :class:`~runtime.errors.SchemaMismatchError` saying what to run.
``score`` = :func:`utilitynet.features.featurize` (the same function the trainer used) + the MLP in
batches, whose two outputs make a utility in (0, 1] by :func:`utilitynet.session.log_utility`: the
memory's own odds, times its share of its session among the memories scored together (utilities are
comparable within one call).

Model location: the ``model`` argument, else ``$MEMIR_MODEL``, else the model that ships inside the
package (a repository checkout: ``checkpoints/utilitynet.onnx``, which ``make train`` rewrites).

Example:
    >>> from datetime import datetime, timezone
    >>> import numpy as np
    >>> from runtime.record import MemIR, Provenance
    >>> from runtime.scoring import ScoringContext
    >>> scorer = UtilityScorer()                                           # doctest: +SKIP
    >>> recs = [MemIR(content="Always book aisle seats", provenance=Provenance(user_id="u1"))]
    >>> ctx = ScoringContext(now=datetime.now(timezone.utc))
    >>> scorer.score(recs, np.ones((1, scorer.spec.embedding_dim), np.float32), ctx)  # doctest: +SKIP
    array([0.83...])
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from utilitynet.columns import RecordColumns
from utilitynet.context import ScoringContext
from utilitynet.features import (
    FEATURE_SCHEMA_VERSION,
    MODEL_INPUT,
    MODEL_OUTPUT,
    MODEL_SESSION_OUTPUT,
    FeatureSpec,
    feature_names,
    featurize,
    featurize_segments,
)
from utilitynet.session import SESSION_WEIGHT_KEY, combine_groups, log_utility

from ..distribution import DIST
from ..errors import EncoderMismatchError, ModelNotFoundError, SchemaMismatchError, VectorError
from ..record.memir import MemIR

__all__ = ["MODEL_ENV", "FakeScorer", "ModelInfo", "UtilityScorer", "default_model_path"]

MODEL_ENV = "MEMIR_MODEL"
"""Environment variable naming the ONNX model file (overrides the shipped default)."""

_RETRAIN = (f"reinstall the package (`pip install --force-reinstall {DIST}`) to get the model it ships, or "
            f"set ${MODEL_ENV} to a model trained on this feature schema")


def default_model_path() -> Path:
    """Where the default model is: ``$MEMIR_MODEL`` if set; else the model shipped inside the
    installed package (``runtime/checkpoints/``, put there when the wheel is built); else, in a
    repository checkout, ``checkpoints/utilitynet.onnx`` (what ``make train`` promotes)."""
    env = os.environ.get(MODEL_ENV)
    if env:
        return Path(env).expanduser()
    shipped = Path(__file__).resolve().parents[1] / "checkpoints" / "utilitynet.onnx"
    if shipped.is_file():
        return shipped
    return Path(__file__).resolve().parents[2] / "checkpoints" / "utilitynet.onnx"


@dataclass(frozen=True)
class ModelInfo:
    """What a loaded model says about itself.

    Attributes:
        path: the ONNX file.
        spec: the feature spec it was fit on (checked equal to this runtime's).
        metadata: every ``metadata_props`` entry (training summary, config, ...).
    """

    path: Path
    spec: FeatureSpec
    metadata: dict[str, str] = field(default_factory=dict)


def _ort_errors(ort: Any) -> tuple[type[BaseException], ...]:
    # onnxruntime's load errors derive from Exception directly; catch exactly those, not everything.
    state = getattr(getattr(ort, "capi", None), "onnxruntime_pybind11_state", None)
    names = ("Fail", "InvalidArgument", "InvalidProtobuf", "InvalidGraph", "NoSuchFile", "NoModel",
             "RuntimeException", "NotImplemented")
    found = tuple(c for c in (getattr(state, n, None) for n in names) if isinstance(c, type))
    return found + (RuntimeError,)


class UtilityScorer:
    """The learned utility model behind the :class:`~runtime.scoring.Scorer` protocol.

    Args:
        model: ONNX file; default :func:`default_model_path`.
        batch_size: rows per onnxruntime call.
        redundancy: passed to ``featurize`` (``"none"`` skips the O(n²) redundancy features).
        encoder_id: if given, the model must have been fit on embeddings from this encoder.
        threads: CPU threads the scorer may use: onnxruntime intra-op threads, and threads for the
            per-text features of large batches. The default, 1, suits an agent process (the MLP
            alone scores ~400k rows/s on one thread); batch scoring raises it. Thread spinning is
            disabled either way so an idle scorer burns no CPU.

    Raises:
        ModelNotFoundError: no file at the path.
        SchemaMismatchError: not a memir utility model, or fit on another feature schema.
        EncoderMismatchError: ``encoder_id`` differs from the model's.
    """

    def __init__(self, model: str | os.PathLike[str] | None = None, *, batch_size: int = 4096,
                 redundancy: Literal["batch", "none"] | None = None, encoder_id: str | None = None,
                 threads: int = 1) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        path = Path(model) if model is not None else default_model_path()
        if not path.is_file():
            raise ModelNotFoundError(f"no utility model at {path}: {_RETRAIN}")
        import onnxruntime as ort  # lazy: FakeScorer users never pay for it

        if threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        # No arena: it kept the largest batch's activations (~40 MB at 8,192 rows of the 8-member
        # model) for the process's life, and allocating them per run costs no measurable time
        # (outputs() of 20 / 200 / 8,192 rows, arena on and off alternated: within 1-3%).
        opts.enable_cpu_mem_arena = False
        try:
            sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
        except _ort_errors(ort) as e:
            raise SchemaMismatchError(f"{path} cannot be loaded as an ONNX model ({e}): {_RETRAIN}") from e
        md = dict(sess.get_modelmeta().custom_metadata_map)
        try:
            spec = FeatureSpec.from_metadata(md)
        except ValueError as e:
            raise SchemaMismatchError(f"{path} is not a memir utility model ({e}): {_RETRAIN}") from e
        self._check_spec(path, spec, sess)
        try:
            weight = float(md.get(SESSION_WEIGHT_KEY, "nan"))
        except ValueError:
            weight = float("nan")
        if not (np.isfinite(weight) and weight >= 0):
            raise SchemaMismatchError(f"{path} has no valid {SESSION_WEIGHT_KEY!r} in its metadata (got "
                                      f"{md.get(SESSION_WEIGHT_KEY)!r}): {_RETRAIN}")
        self._session_weight = weight
        if encoder_id is not None and encoder_id != spec.encoder_id:
            raise EncoderMismatchError(f"{path} was fit on embeddings from {spec.encoder_id!r}, but the "
                                       f"store uses {encoder_id!r}: re-embed the store with the model's encoder "
                                       f"(`memir reembed`), or set ${MODEL_ENV} to a model fit on {encoder_id!r}")
        self._sess, self._info = sess, ModelInfo(path, spec, md)
        self._batch_size, self._redundancy, self._threads = batch_size, redundancy, threads

    @staticmethod
    def _check_spec(path: Path, spec: FeatureSpec, sess: Any) -> None:
        if spec.version != FEATURE_SCHEMA_VERSION:
            raise SchemaMismatchError(f"{path} was fit on feature schema v{spec.version}, but this runtime "
                                      f"computes v{FEATURE_SCHEMA_VERSION}: {_RETRAIN}")
        expected = feature_names(spec.embedding_dim)
        if spec.names != expected:
            missing = [n for n in expected if n not in spec.names][:5]
            extra = [n for n in spec.names if n not in expected][:5]
            raise SchemaMismatchError(f"{path} lists other features than schema v{FEATURE_SCHEMA_VERSION} "
                                      f"(missing {missing}, unknown {extra}, or reordered): {_RETRAIN}")
        inputs = sess.get_inputs()
        if len(inputs) != 1 or inputs[0].name != MODEL_INPUT or inputs[0].shape[-1] != spec.n_features:
            got = [(i.name, i.shape) for i in inputs]
            raise SchemaMismatchError(f"{path} takes inputs {got}, expected {MODEL_INPUT!r} of width "
                                      f"{spec.n_features}: {_RETRAIN}")
        outputs = [o.name for o in sess.get_outputs()]
        if outputs != [MODEL_OUTPUT, MODEL_SESSION_OUTPUT]:
            raise SchemaMismatchError(f"{path} has outputs {outputs}, expected [{MODEL_OUTPUT!r}, "
                                      f"{MODEL_SESSION_OUTPUT!r}]: {_RETRAIN}")

    @property
    def name(self) -> str:
        """``"utilitynet"``."""
        return "utilitynet"

    @property
    def info(self) -> ModelInfo:
        """Path, feature spec and metadata of the loaded model."""
        return self._info

    @property
    def spec(self) -> FeatureSpec:
        """The feature spec the model was fit on (= this runtime's)."""
        return self._info.spec

    @property
    def session_weight(self) -> float:
        """The learned weight *w* of a memory's share of its session (:mod:`utilitynet.session`)."""
        return self._session_weight

    def score(self, records: Sequence[MemIR], embeddings: np.ndarray, ctx: ScoringContext) -> np.ndarray:
        """Utilities in (0, 1), one per record (float64), from featurize + the MLP.

        Raises:
            EncoderMismatchError: the embeddings have another width than the model was fit on.
            VectorError: embeddings not row-aligned with ``records``.
        """
        return self._score(records, embeddings, ctx)

    def score_columns(self, columns: RecordColumns, embeddings: np.ndarray, ctx: ScoringContext) -> np.ndarray:
        """:meth:`score` for a batch held column-wise (a Parquet/Arrow dump, a data-engine block):
        the same utilities, without a per-record Python pass."""
        return self._score(columns, embeddings, ctx)

    def score_segments(self, columns: RecordColumns, embeddings: np.ndarray,
                       segments: Sequence[tuple[int, int, ScoringContext]]) -> np.ndarray:
        """:meth:`score_columns` of many batches at once — rows ``start:stop`` of each
        ``(start, stop, ctx)`` are scored as one batch with that context (the scopes of a dump) —
        with one model call for all of them."""
        emb = self._check(columns, embeddings)
        X = featurize_segments(columns, emb, segments, redundancy=self._redundancy, workers=self._threads)
        seg = np.repeat(np.arange(len(segments)), [hi - lo for lo, hi, _ in segments])
        return self.score_features(X, combine_groups(seg, self._sessions(columns)))

    @staticmethod
    def _sessions(batch: Sequence[MemIR] | RecordColumns) -> np.ndarray:
        cols = batch if isinstance(batch, RecordColumns) else None
        if cols is not None and cols.session is not None:
            return np.asarray(cols.session, dtype=np.int64)
        if cols is not None:  # no session column: every memory is a session of its own
            return np.arange(len(cols), dtype=np.int64)
        return RecordColumns.from_records(batch).session  # type: ignore[arg-type, return-value]

    def _check(self, batch: Sequence[MemIR] | RecordColumns, embeddings: np.ndarray) -> np.ndarray:
        emb = np.asarray(embeddings, dtype=np.float32)
        if emb.ndim != 2 or emb.shape[0] != len(batch):
            raise VectorError(f"embeddings must be (len(records)={len(batch)}, d), got {emb.shape}",
                              field="embeddings")
        if emb.shape[1] != self.spec.embedding_dim:
            raise EncoderMismatchError(
                f"embeddings have {emb.shape[1]} dims but the model was fit on "
                f"{self.spec.embedding_dim}-dim vectors from {self.spec.encoder_id!r}: embed with that "
                f"encoder, or set ${MODEL_ENV} to a model fit on yours")
        return emb

    def _score(self, batch: Sequence[MemIR] | RecordColumns, embeddings: np.ndarray,
               ctx: ScoringContext) -> np.ndarray:
        emb = self._check(batch, embeddings)
        cols = batch if isinstance(batch, RecordColumns) else RecordColumns.from_records(batch)
        X = featurize(cols, emb, ctx, redundancy=self._redundancy, workers=self._threads)
        return self.score_features(X, self._sessions(cols))

    def outputs(self, features: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The model's two outputs (``logit`` *c*, ``session_logit`` *b*; float32) for precomputed
        ``featurize`` rows, run in batches."""
        X = np.ascontiguousarray(features, dtype=np.float32)
        if X.ndim != 2 or X.shape[1] != self.spec.n_features:
            raise VectorError(f"features must be (n, {self.spec.n_features}), got {X.shape}",
                              field="features")
        if X.shape[0] == 0:
            return np.zeros(0, dtype=np.float32), np.zeros(0, dtype=np.float32)
        bs = self._batch_size
        names = [MODEL_OUTPUT, MODEL_SESSION_OUTPUT]
        parts = [self._sess.run(names, {MODEL_INPUT: X[i:i + bs]}) for i in range(0, len(X), bs)]
        return (np.concatenate([p[0] for p in parts]).reshape(-1),
                np.concatenate([p[1] for p in parts]).reshape(-1))

    def score_features(self, features: np.ndarray, sessions: np.ndarray | None = None) -> np.ndarray:
        """Utilities in (0, 1] (float64) for precomputed ``featurize`` rows scored together.

        Args:
            features: the rows.
            sessions: per row, a session group code (rows sharing a code compete for their session's
                share, :mod:`utilitynet.session`); ``None`` = every row its own session.
        """
        c, b = self.outputs(features)
        codes = np.arange(len(c), dtype=np.int64) if sessions is None else np.asarray(sessions, dtype=np.int64)
        if codes.shape != c.shape:
            raise VectorError(f"sessions must have one code per row ({len(c)}), got shape {codes.shape}",
                              field="sessions")
        return np.exp(log_utility(c, b, codes, self._session_weight))


def _hash_utility(text: str) -> float:
    h = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(h, "little") / 2.0**64


class FakeScorer:
    """Deterministic stand-in for :class:`UtilityScorer` (same protocol, no model).

    Args:
        utilities: ``{record id: utility}`` or a function ``record -> utility``; ``None`` = a stable
            hash of the content in [0, 1).
        default: utility for ids missing from a mapping (``None`` = the content hash).
        name: reported scorer name.

    Attributes:
        calls: number of records in each ``score`` call, in order (for assertions in tests).
    """

    def __init__(self, utilities: Mapping[str, float] | Callable[[MemIR], float] | None = None, *,
                 default: float | None = None, name: str = "fake") -> None:
        self._utilities, self._default, self._name = utilities, default, name
        self.calls: list[int] = []

    @property
    def name(self) -> str:
        """The name given at construction (``"fake"``)."""
        return self._name

    def _one(self, r: MemIR) -> float:
        u = self._utilities
        if callable(u):
            return float(u(r))
        if u is not None and r.id in u:
            return float(u[r.id])
        return self._default if self._default is not None else _hash_utility(r.content)

    def score(self, records: Sequence[MemIR], embeddings: np.ndarray, ctx: ScoringContext) -> np.ndarray:
        """One utility per record (float64); checks ``embeddings`` is row-aligned like the real scorer."""
        emb = np.asarray(embeddings)
        if emb.ndim != 2 or emb.shape[0] != len(records):
            raise VectorError(f"embeddings must be (len(records)={len(records)}, d), got {emb.shape}",
                              field="embeddings")
        self.calls.append(len(records))
        return np.array([self._one(r) for r in records], dtype=np.float64)
