"""The feature contract of the utility model (seed 001 §4.1) — numpy only, shared by trainer and runtime.

One function, :func:`featurize`, turns a batch of memories (+ their embeddings + the decision
context) into the float32 matrix the utility MLP reads. The trainer and the runtime scorer both call
it, so a feature can never drift between training and serving. The column layout is

    [ FEATURE_NAMES (named metadata/text/context features) | emb_0 … emb_{d-1} (unit embedding) ]

Named features come first so that a feature's column index does not depend on the encoder.

Adding or changing a feature is a one-place change: write a ``_Group`` function below and add one
row to ``_GROUPS`` (names + function + doc). ``FEATURE_NAMES`` is derived from that table; bump
``FEATURE_SCHEMA_VERSION`` (a test pins the names to the version so a forgotten bump fails), and
exported models carry both, so the runtime refuses a model fit on another schema.

Records are duck-typed (``runtime.record.MemIR`` or anything with the same attributes): this module
must not import ``runtime``. Enum fields are compared by their string ``.value``.

Cost: one Python pass over the records (attribute reads, ~5 µs/record), vectorised numpy over the
joined text (:mod:`utilitynet.textstats`), and — for redundancy — an O(n²·d) blocked similarity
matrix (:mod:`utilitynet.redundancy`; O(block²) extra memory, upper-triangle blocks only). Pass
``redundancy="none"`` (or set ``ctx.extras["skip_redundancy"] = 1``) for huge dumps; the
``has_redundancy`` bit then reads 0 and the redundancy columns 0.

Example:
    >>> import numpy as np
    >>> from datetime import datetime, timezone
    >>> from utilitynet.context import ScoringContext
    >>> X = featurize([], np.zeros((0, 8), np.float32), ScoringContext(now=datetime.now(timezone.utc)))
    >>> X.shape == (0, len(FEATURE_NAMES) + 8)
    True
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal

import numpy as np

from .context import ScoringContext
from .dialog import ATTRIBUTE_PREFIX, CONTEXT_NAMES
from .redundancy import NEAR_DUP_COS
from .redundancy import redundancy as batch_redundancy
from .textstats import TEXT_STAT_NAMES, text_stats

__all__ = [
    "AMBIENT_FEATURES",
    "KIND_FEATURES",
    "DYNAMIC_FEATURES",
    "FEATURE_NAMES",
    "FEATURE_SCHEMA_VERSION",
    "MODEL_INPUT",
    "MODEL_OUTPUT",
    "MODEL_SESSION_OUTPUT",
    "NEAR_DUP_COS",
    "FeatureSpec",
    "feature_names",
    "featurize",
    "featurize_segments",
    "spec_for",
]

FEATURE_SCHEMA_VERSION = "3"

MODEL_INPUT = "features"
"""Name of the exported ONNX model's input: float32 ``(batch, n_features)``."""
MODEL_OUTPUT = "logit"
"""Name of the exported ONNX model's first output: float32 ``(batch,)``, the memory's own logit *c*."""
MODEL_SESSION_OUTPUT = "session_logit"
"""Name of its second output: float32 ``(batch,)``, the memory's claim *b* within its session. The utility
is ``σ(c) · softmax_session(b)^w`` (:mod:`utilitynet.session`; *w* is the ``session_weight`` metadata)."""

from .columns import (  # noqa: E402  (the column codecs: vocabularies, timestamps, clipping)
    DIALOG_ROLES,
    FLAGS,
    SENSITIVITIES,
    SOURCE_TYPES,
    RecordColumns,
    log_count,
    log_hours,
    onehot,
    ts,
)


class _Batch:
    """Columnar view of one featurize call: raw arrays read once, derived arrays computed lazily."""

    def __init__(self, cols: RecordColumns, emb: np.ndarray, ctx: ScoringContext,
                 redundancy: bool, workers: int = 1) -> None:
        self.n = n = len(cols)
        self.workers = workers
        self.ctx, self.emb, self.want_redundancy = ctx, emb, redundancy
        self.now = ts(ctx.now)
        self.attributes = cols.attributes
        self.content = cols.content
        self.stored_text = cols.text_stats
        self.created = np.asarray(cols.created_at, dtype=np.float64)
        self.expires = np.asarray(cols.expires_at, dtype=np.float64)
        self.last_access = np.asarray(cols.last_accessed_at, dtype=np.float64)
        self.src, self.role = np.asarray(cols.source, np.int64), np.asarray(cols.role, np.int64)
        self.sens = np.asarray(cols.sensitivity, np.int64)
        self.flags = np.asarray(cols.flags, dtype=np.int64)
        self.confidence = np.clip(np.nan_to_num(np.asarray(cols.confidence, np.float64), nan=1.0), 0.0, 1.0)
        self.half_life = np.asarray(cols.half_life_s, dtype=np.float64)
        self.access_count = np.asarray(cols.access_count, dtype=np.float64)
        self.n_parents = np.asarray(cols.n_parents, dtype=np.float64)
        self.age_s = np.where(np.isnan(self.created), 0.0, self.now - self.created)
        steps = None if ctx.record_steps is None else np.asarray(ctx.record_steps, dtype=np.float64)
        if steps is not None and steps.shape != (n,):
            raise ValueError(f"ctx.record_steps has shape {steps.shape}, expected ({n},): "
                             "one write step per record")
        self.steps = steps

    @cached_property
    def text(self) -> dict[str, np.ndarray]:
        stored = self.stored_text
        if stored is None or stored.shape[1] != len(TEXT_STAT_NAMES):
            return text_stats(self.content, workers=self.workers)
        out = np.array(stored, dtype=np.float64)
        todo = np.flatnonzero(np.isnan(out).any(axis=1))   # rows stored without values: computed here
        if len(todo):
            computed = text_stats([self.content[i] for i in todo.tolist()], workers=self.workers)
            out[todo] = np.stack([computed[k] for k in TEXT_STAT_NAMES], axis=1)
        return {k: out[:, j] for j, k in enumerate(TEXT_STAT_NAMES)}

    @cached_property
    def write_rank(self) -> np.ndarray:
        """Dense rank of write order (step, then created_at); equal keys share a rank."""
        ts = np.nan_to_num(self.created, nan=0.0)
        st = np.zeros(self.n) if self.steps is None else np.nan_to_num(self.steps, nan=-1.0)
        order = np.lexsort((ts, st))
        s, t = st[order], ts[order]
        new = np.ones(self.n, dtype=bool)
        new[1:] = (s[1:] != s[:-1]) | (t[1:] != t[:-1])
        rank = np.empty(self.n, dtype=np.int64)
        rank[order] = np.cumsum(new) - 1
        return rank

    @cached_property
    def redundancy(self) -> dict[str, np.ndarray]:
        return batch_redundancy(self.emb, self.write_rank)


# --- feature groups: each returns an (n, len(names)) array, columns in the order of its names ----

def _g_age(b: _Batch) -> np.ndarray:
    if b.steps is None:
        age_steps, known = np.zeros(b.n), np.zeros(b.n)
    else:
        known = np.isfinite(b.steps).astype(np.float64)
        age_steps = log_count(np.where(known > 0, b.ctx.step - np.nan_to_num(b.steps), 0.0))
    return np.stack([age_steps, known, log_hours(b.age_s)], axis=1)


def _g_usage(b: _Batch) -> np.ndarray:
    accessed = ((b.access_count > 0) | np.isfinite(b.last_access)).astype(np.float64)
    touched = np.where(np.isfinite(b.last_access), b.last_access, b.created)  # last read, else write
    return np.stack([log_count(b.access_count), accessed, log_hours(b.now - touched)], axis=1)


def _g_position(b: _Batch) -> np.ndarray:
    if b.n <= 1:
        return np.ones((b.n, 1))
    ranks = np.sort(b.write_rank)
    less = np.searchsorted(ranks, b.write_rank, "left")
    tied = np.searchsorted(ranks, b.write_rank, "right") - less - 1
    return ((less + tied / 2.0) / (b.n - 1))[:, None]  # 0 = oldest, 1 = newest; ties share


def _g_metadata(b: _Batch) -> np.ndarray:
    bits = ((b.flags[:, None] >> np.arange(len(FLAGS))) & 1).astype(np.float64)
    has_exp = np.isfinite(b.expires)
    left = np.where(has_exp, b.expires - b.now, 0.0)
    has_hl = np.isfinite(b.half_life) & (np.nan_to_num(b.half_life) > 0)
    decay = np.where(has_hl, np.exp2(-np.clip(b.age_s, 0, None) / np.where(has_hl, b.half_life, 1.0)), 1.0)
    return np.column_stack([
        b.confidence, bits, onehot(b.sens, len(SENSITIVITIES)), has_exp, log_hours(left),
        has_exp & (left <= 0), has_hl, decay, log_count(b.n_parents),
    ]).astype(np.float64)


def _g_source(b: _Batch) -> np.ndarray:
    return np.hstack([onehot(b.src, len(SOURCE_TYPES)), onehot(b.role, len(DIALOG_ROLES))])


def _g_text(b: _Batch) -> np.ndarray:
    return np.stack([b.text[k] for k in TEXT_STAT_NAMES], axis=1)


def _g_redundancy(b: _Batch) -> np.ndarray:
    if not b.want_redundancy or b.n == 0:
        return np.zeros((b.n, 7))
    red = b.redundancy
    has_newer = red["newer"] > NEAR_DUP_COS
    newest = (red["ndup"] > 0) & ~has_newer
    return np.column_stack([np.ones(b.n), red["all"], log_count(red["ndup"]), red["newer"], red["older"],
                            has_newer, newest]).astype(np.float64)


def _sim_to(b: _Batch, v: np.ndarray | None, what: str) -> tuple[np.ndarray, np.ndarray]:
    if v is None:
        return np.zeros(b.n), np.zeros(b.n)
    v = np.nan_to_num(np.asarray(v, dtype=np.float32).reshape(-1), nan=0.0, posinf=0.0, neginf=0.0)
    if v.shape[0] != b.emb.shape[1]:
        raise ValueError(f"ctx.{what} has dimension {v.shape[0]}, but the embeddings have {b.emb.shape[1]}: "
                         "embed the goal/recent context with the same encoder as the memories")
    v = v / max(float(np.linalg.norm(v)), 1e-12)
    # einsum, not ``@``: a threaded BLAS gemv is ~10× slower than this loop on a busy machine.
    return np.clip(np.einsum("ij,j->i", b.emb, v).astype(np.float64), -1.0, 1.0), np.ones(b.n)


def _g_context(b: _Batch) -> np.ndarray:
    g, has_g = _sim_to(b, b.ctx.goal_embedding, "goal_embedding")
    rc, has_rc = _sim_to(b, b.ctx.recent_embedding, "recent_embedding")
    stage = np.full(b.n, np.clip(np.nan_to_num(float(b.ctx.stage)), 0.0, 1.0))
    return np.stack([g, has_g, rc, has_rc, stage], axis=1)


_CTX_KEYS = tuple(ATTRIBUTE_PREFIX + n for n in CONTEXT_NAMES)
_CTX_CLIP = 1e3  # stored attributes are caller data: bound them like every other column


def _g_dialog(b: _Batch) -> np.ndarray:
    # Session-context features are computed once per complete session, when it closes, and kept
    # beside the record (the runtime passes them as ctx.session_context); recomputing them here over
    # whatever is still held would change their meaning as neighbours get forgotten.
    out = np.zeros((b.n, len(_CTX_KEYS) + 1))
    sc = b.ctx.session_context
    if sc is not None:
        S = np.asarray(sc, dtype=np.float64)
        if S.shape != (b.n, len(_CTX_KEYS)):
            raise ValueError(f"ctx.session_context has shape {S.shape}, expected ({b.n}, {len(_CTX_KEYS)})")
        present = ~np.isnan(S).any(axis=1)
        out[present, :-1] = S[present]
        out[present, -1] = 1.0
        return np.clip(np.nan_to_num(out), -_CTX_CLIP, _CTX_CLIP)
    for i, a in enumerate(b.attributes or ()):  # records annotated in their attributes (older stores, dumps)
        if a and _CTX_KEYS[0] in a:
            vals = [a.get(k) for k in _CTX_KEYS]
            out[i, :-1] = [float(v) if isinstance(v, (int, float)) else 0.0 for v in vals]
            out[i, -1] = 1.0
    return np.clip(np.nan_to_num(out), -_CTX_CLIP, _CTX_CLIP)


@dataclass(frozen=True)
class _Group:
    names: tuple[str, ...]
    fn: Callable[[_Batch], np.ndarray]
    doc: str
    per_segment: bool = False  # reads the context (steps, goal, recent, session) or the batch as a whole


# THE feature table (order = column order). Units: *_log = log1p of the clipped quantity.
_GROUPS: tuple[_Group, ...] = (
    _Group(("age_steps_log", "has_step", "age_hours_log"), _g_age,
           "steps since written (ctx.step − record_steps); step known; hours since created_at", True),
    _Group(("access_count_log", "accessed", "since_touch_hours_log"), _g_usage,
           "times recalled; ever recalled; hours since last recall (else since written)"),
    _Group(("position",), _g_position, "write-order rank within the batch, 0 = oldest … 1 = newest", True),
    _Group(tuple(f"src_{s}" for s in SOURCE_TYPES) + tuple(f"role_{r}" for r in DIALOG_ROLES), _g_source,
           "provenance.type and role_context.dialog_role one-hots"),
    _Group(("confidence",) + tuple(f"flag_{f}" for f in FLAGS) + tuple(f"sens_{s}" for s in SENSITIVITIES)
           + ("has_expiry", "to_expiry_hours_log", "expired", "has_half_life", "freshness", "parents_log"),
           _g_metadata, "confidence, flags, sensitivity, TTL, freshness decay 0.5^(age/half-life), #parents"),
    _Group(TEXT_STAT_NAMES, _g_text, "length and lexical markers of the content (utilitynet.textstats)"),
    _Group(("has_redundancy", "max_sim_other", "near_dups_log", "max_sim_newer", "max_sim_older",
            "has_newer_near_dup", "newest_of_near_dups"), _g_redundancy,
           f"cosine redundancy with the other memories of the batch (near-duplicate: cos > {NEAR_DUP_COS})", True),
    _Group(("goal_sim", "has_goal", "recent_sim", "has_recent", "stage"), _g_context,
           "cosine to ctx.goal_embedding / ctx.recent_embedding (0 + bit 0 when absent); task stage", True),
    _Group(tuple(f"ctx_{n}" for n in CONTEXT_NAMES) + ("ctx_present",), _g_dialog,
           "dialog session context computed when the record's session closed (utilitynet.dialog; "
           "ctx.session_context, else metadata.attributes['ctx.<name>']; 0 when absent) and a bit saying it is "
           "present", True),
)

FEATURE_NAMES: tuple[str, ...] = tuple(name for g in _GROUPS for name in g.names)
"""The named (non-embedding) features in column order; embedding columns follow them."""

DYNAMIC_FEATURES: tuple[str, ...] = (
    "age_steps_log", "age_hours_log", "access_count_log", "accessed", "since_touch_hours_log", "position",
    "flag_used", "flag_placeholder", "flag_superseded", "to_expiry_hours_log", "expired", "freshness",
    "has_redundancy", "max_sim_other", "near_dups_log", "max_sim_newer", "max_sim_older", "has_newer_near_dup",
    "newest_of_near_dups", "goal_sim", "has_goal", "recent_sim", "has_recent", "stage",
)
"""The named features whose value changes after a memory is written: with time (age, freshness, TTL),
with use (recalls, flags set later), or with the other memories held or the agent's live context
(position, redundancy, goal and recent context, stage). Every other named feature depends only on the
memory's content, provenance and session, fixed once its session closes."""

AMBIENT_FEATURES: tuple[str, ...] = (
    "age_steps_log", "age_hours_log", "since_touch_hours_log", "position",
    "has_redundancy", "max_sim_other", "near_dups_log", "max_sim_newer", "max_sim_older", "has_newer_near_dup",
    "newest_of_near_dups", "recent_sim", "has_recent",
)
"""The dynamic features that change although nothing happened to the memory or to the agent's task: with
the clock alone (its age; hours since it was last touched, which for a memory never recalled is its age
again) and with which *other* memories the scope holds or wrote last (its rank among them, its
redundancy with them, its similarity to the newest ones). The rest of :data:`DYNAMIC_FEATURES` moves on
an event: a recall (``access_count_log``, ``accessed``), a flag the runtime sets, a TTL or half-life the
writer declared running down, a goal or stage the agent set.

A model that reads the ambient features re-ranks an old memory every time the stream moves on, for
reasons the memory does not carry: on long conversations (issue 23) a fact kept when its session closed
was evicted later because it had aged and its topic was no longer the newest, and the production
replay of a model fit on first judgements kept 0.491 of LongMemEval's evidence at p = 0.05 against
0.720 for the same fit reading no dynamic feature (the event ones are constant in those replays, so
this is the fit without the ambient ones). ``FitConfig(inputs="events")`` fits without them."""


KIND_FEATURES: tuple[str, ...] = ("ctx_user_share",)
"""The named features whose value tells the *kind* of conversation apart rather than a memory's worth
within it: ``ctx_user_share``, the share of a session's characters written in ``user`` turns, is about
0.1 in an assistant chat (the assistant writes most of it) and exactly 1.0 in a chat between people
(every turn is a person's). Within a human chat it is a constant; it only moves every input of the
model to where the assistant-chat training rows never are. On LoCoMo dev, a model fit on LongMemEval
rows kept 0.327 of the evidence at p = 0.10 with it as it is and 0.349 with it set to 0 (issue 23).
``FitConfig(inputs="portable")`` fits without them."""


def feature_names(embedding_dim: int) -> tuple[str, ...]:
    """All column names for an encoder of ``embedding_dim``: ``FEATURE_NAMES + (emb_0, …)``."""
    if embedding_dim < 0:
        raise ValueError(f"embedding_dim must be >= 0, got {embedding_dim}")
    return FEATURE_NAMES + tuple(f"emb_{i}" for i in range(embedding_dim))


@dataclass(frozen=True)
class FeatureSpec:
    """What a model was fit on; exported into the ONNX metadata and checked by the runtime.

    Attributes:
        version: ``FEATURE_SCHEMA_VERSION`` at fit time.
        names: every column name, in order (named features, then ``emb_i``).
        embedding_dim: width of the embedding block (the encoder's dimension).
        encoder_id: id of the sentence encoder that made the embeddings (e.g. ``"all-MiniLM-L6-v2"``).
    """

    version: str
    names: tuple[str, ...]
    embedding_dim: int
    encoder_id: str

    @property
    def n_features(self) -> int:
        """Total input width of the model."""
        return len(self.names)

    def to_metadata(self) -> dict[str, str]:
        """The ONNX ``metadata_props`` entries that describe this spec (all strings)."""
        return {"feature_schema_version": self.version, "feature_names": json.dumps(list(self.names)),
                "embedding_dim": str(self.embedding_dim), "encoder_id": self.encoder_id}

    @classmethod
    def from_metadata(cls, md: Mapping[str, str]) -> FeatureSpec:
        """Inverse of :meth:`to_metadata`. Raises ``ValueError`` naming a missing or malformed key."""
        keys = ("feature_schema_version", "feature_names", "embedding_dim", "encoder_id")
        missing = [k for k in keys if k not in md]
        if missing:
            raise ValueError(f"model metadata lacks {missing}: not exported by utilitynet.export.export_onnx")
        try:
            names = tuple(json.loads(md["feature_names"]))
            dim = int(md["embedding_dim"])
        except (ValueError, TypeError) as e:
            raise ValueError(f"model metadata feature_names/embedding_dim are malformed: {e}") from e
        return cls(str(md["feature_schema_version"]), names, dim, str(md["encoder_id"]))


def spec_for(embedding_dim: int, encoder_id: str) -> FeatureSpec:
    """The current feature spec for an encoder of ``embedding_dim`` dimensions."""
    return FeatureSpec(FEATURE_SCHEMA_VERSION, feature_names(embedding_dim), embedding_dim, encoder_id)


def featurize(records: Sequence[Any] | RecordColumns, embeddings: np.ndarray, ctx: ScoringContext, *,
              redundancy: Literal["batch", "none"] | None = None, workers: int = 1) -> np.ndarray:
    """Compute the model input for a batch of memories.

    Args:
        records: MemIR records (or duck-typed equivalents), scored together, or the same batch as
            :class:`~utilitynet.columns.RecordColumns` (no per-record Python work at all).
        embeddings: ``(len(records), d)`` array, row-aligned with ``records`` (re-normalised here;
            NaN/inf become 0).
        ctx: the decision context (time, step, per-record write steps, goal/recent vectors, stage).
        redundancy: ``"batch"`` computes redundancy against the other records (O(n²·d));
            ``"none"`` skips it (columns 0, ``has_redundancy`` 0). ``None`` = ``"none"`` if
            ``ctx.extras["skip_redundancy"]`` is non-zero, else ``"batch"``.
        workers: threads for the per-text features of a large batch (same result; see
            :func:`utilitynet.textstats.text_stats`).

    Returns:
        float32 array ``(len(records), len(FEATURE_NAMES) + d)``; every value finite and bounded.

    Raises:
        ValueError: misaligned embeddings / record_steps, or a goal/recent vector of another dimension.
    """
    return featurize_segments(records, embeddings, [(0, len(records), ctx)], redundancy=redundancy, workers=workers)


def featurize_segments(records: Sequence[Any] | RecordColumns, embeddings: np.ndarray,
                       segments: Sequence[tuple[int, int, ScoringContext]], *,
                       redundancy: Literal["batch", "none"] | None = None, workers: int = 1) -> np.ndarray:
    """:func:`featurize` of many batches at once: rows ``start:stop`` of each ``(start, stop, ctx)``
    segment are one batch with its own context (a scope of a batch-scored dump). The features that
    depend on the context or on the batch as a whole (age in steps, position, redundancy, goal and
    recent similarity, session context) are computed per segment; every other one in one pass over
    all rows. Each row equals what :func:`featurize` gives for its segment alone (it is this
    function with one segment).

    Args:
        segments: ``(start, stop, ctx)`` covering ``0..len(records)`` in order; every ``ctx.now``
            must be the same decision time.

    Raises:
        ValueError: segments that do not tile the rows, or different decision times.
    """
    emb = np.asarray(embeddings, dtype=np.float32)
    if emb.ndim != 2 or emb.shape[0] != len(records):
        raise ValueError(f"embeddings must be (len(records)={len(records)}, d), got shape {emb.shape}")
    ends = [0] + [stop for _, stop, _ in segments]
    if [start for start, _, _ in segments] != ends[:-1] or ends[-1] != len(records) or not segments:
        raise ValueError(f"segments must tile rows 0..{len(records)} in order")
    ctx = segments[0][2]
    if any(c.now != ctx.now for _, _, c in segments):
        raise ValueError("every segment must be scored at the same decision time (ctx.now)")
    if redundancy is None:
        redundancy = "none" if ctx.extras.get("skip_redundancy", 0.0) else "batch"
    if redundancy not in ("batch", "none"):
        raise ValueError(f"redundancy must be 'batch' or 'none', got {redundancy!r}")
    if not np.isfinite(emb).all():
        emb = np.where(np.isfinite(emb), emb, np.float32(0.0))
    emb = emb / np.maximum(np.linalg.norm(emb, axis=1, keepdims=True), np.float32(1e-12))
    cols = records if isinstance(records, RecordColumns) else RecordColumns.from_records(records)
    whole = len(segments) == 1
    b = _Batch(cols, emb, ctx if whole else ScoringContext(now=ctx.now), redundancy == "batch", workers)
    parts = [b] if whole else [_Batch(cols.slice(lo, hi), emb[lo:hi], c, redundancy == "batch", workers)
                               for lo, hi, c in segments]
    m = len(FEATURE_NAMES)
    X = np.empty((b.n, m + emb.shape[1]), dtype=np.float32)  # one allocation, filled in place
    col = 0
    for g in _GROUPS:
        k = len(g.names)
        if g.per_segment and not whole:
            for (lo, hi, _), part in zip(segments, parts):
                X[lo:hi, col:col + k] = np.asarray(g.fn(part), dtype=np.float64).reshape(part.n, k)
        else:
            X[:, col:col + k] = np.asarray(g.fn(b), dtype=np.float64).reshape(b.n, k)
        col += k
    X[:, m:] = emb
    return X
