"""One scope's decision from its scoring table: the context ``Scope.retain`` would build, then
the one :class:`~runtime.retention.RetentionPlan`.

The context is the one the row-at-a-time path builds from a dump: write steps from ``created_at``
order, the recent-context vector of the scope's last ``recent_window`` writes, the session-context
features of every closed session (:func:`runtime.annotate.consolidate.history_session_columns`).
Records without a usable vector are embedded first, in batches, as that path does.

:class:`ScopeDecider` is what every engine runs per scope — the single-process path, a worker
process, a Ray task — so they decide the same way. It returns the output rows as an Arrow table.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from utilitynet.columns import FLAGS
from utilitynet.context import ScoringContext

from ..annotate.consolidate import scopes_session_columns
from ..errors import InfeasibleError
from ..retention.plan import RetentionPlan, recent_context, scoring_context
from .table import item_table, stored_context, vectors

__all__ = ["OUTPUT_SCHEMA", "ScopeDecider", "Totals"]

OUTPUT_SCHEMA = pa.schema([
    ("id", pa.string()), ("user_id", pa.string()), ("agent_id", pa.string()), ("utility", pa.float64()),
    ("model_utility", pa.float64()), ("keep", pa.bool_()), ("reason", pa.string()), ("action", pa.string()),
])
"""One output row per valid record: the decision of its scope about it."""

_PLACEHOLDER = 1 << FLAGS.index("placeholder")


@dataclass
class Totals:
    """Counts over the scopes decided so far."""

    scopes: int = 0
    valid: int = 0
    kept: int = 0
    archived: int = 0
    deleted: int = 0
    embedded: int = 0
    context_stored: int = 0
    """Rows whose session context came from the dump (the rest were computed)."""

    def add(self, other: Totals) -> None:
        for k in ("scopes", "valid", "kept", "archived", "deleted", "embedded", "context_stored"):
            setattr(self, k, getattr(self, k) + getattr(other, k))


def _round(x: float) -> float | None:
    return round(x, 6) if math.isfinite(x) else None


class ScopeDecider:
    """Decides scopes of a scoring table under one plan.

    Args:
        plan: the retention plan (policy + scorer).
        now: the decision time.
        recent_window: writes averaged into the recent-context vector.
        skip_redundancy: skip the O(n²) redundancy features.
        embedder: a zero-argument factory of the encoder for records without a vector (called
            only if one is needed).
        embed_batch: texts per encoder call.
        trigger: the decision trigger recorded (``"memir score"``).
    """

    def __init__(self, plan: RetentionPlan, *, now: datetime, recent_window: int = 5,
                 skip_redundancy: bool = False, embedder: Callable[[], Any] | None = None,
                 embed_batch: int = 8192, trigger: str = "memir score") -> None:
        self.plan, self.now, self.recent_window = plan, now, recent_window
        self.skip_redundancy, self.embed_batch, self.trigger = skip_redundancy, embed_batch, trigger
        self._embedder_factory: Callable[[], Any] | None = embedder
        self._embedder: Any = None

    @classmethod
    def for_config(cls, config: Any, now: datetime, *, threads: int = 1) -> ScopeDecider:
        """The decider a :class:`~runtime.batch.ScoreConfig` describes: its model (default: the
        shipped one), policy, context window, redundancy and encoder for records without vectors."""
        from ..scoring.utility import UtilityScorer
        from .config import make_embedder

        scorer = UtilityScorer(config.model, threads=threads) if config.model else UtilityScorer(threads=threads)
        return cls(RetentionPlan(config.policy(scorer), scorer), now=now, recent_window=config.recent_window,
                   skip_redundancy=config.redundancy == "none", embedder=lambda: make_embedder(config.encoder),
                   embed_batch=config.batch_size)

    @property
    def embedding_dim(self) -> int:
        """The vector width the plan's model reads."""
        return int(self.plan.scorer.spec.embedding_dim)  # type: ignore[attr-defined]

    def _embed(self, texts: list[str]) -> np.ndarray:
        if self._embedder is None:
            if self._embedder_factory is None:
                raise ValueError("records without a vector need an encoder")
            self._embedder = self._embedder_factory()
        parts = [self._embedder.encode(texts[s:s + self.embed_batch]) for s in range(0, len(texts), self.embed_batch)]
        return np.concatenate(parts).astype(np.float32)

    def decide_many(self, scopes: Sequence[tuple[str, str, pa.Table]]
                    ) -> tuple[pa.Table, Totals, list[tuple[str, str, InfeasibleError, pa.Table]]]:
        """Decide several scopes at once: their vectors, columns and utilities are computed in one
        pass (one model call), then each scope is planned and solved on its own. Each scope's
        decision is the one it gets in a block of its own.

        Returns:
            ``(output rows of the decided scopes, counts, failed scopes)``; a failed scope is
            ``(user, agent, the InfeasibleError, its rows)``.
        """
        tot = Totals()
        big = pa.concat_tables([t for _, _, t in scopes]) if len(scopes) > 1 else scopes[0][2]
        vecs, missing = vectors(big)
        if missing.any():
            idx = np.flatnonzero(missing)
            vecs[idx] = self._embed(big.column("content").take(pa.array(idx)).to_pylist())
        vecs /= np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
        items = item_table(big)
        sessions = big.column("session_id").to_pylist()
        turn = (items.columns.flags & _PLACEHOLDER) == 0
        bounds = np.cumsum([0] + [t.num_rows for _, _, t in scopes]).tolist()
        orders = [np.argsort(items.columns.created_at[lo:hi], kind="stable")
                  for lo, hi in zip(bounds[:-1], bounds[1:])]
        session, stored = stored_context(big)
        # A scope's stored context is used when the dump stored it for every row, from one dump, and
        # no row needed embedding here; every other scope's closed sessions are computed in one pass,
        # each scope in write order.
        one_file = None if "file" not in big.schema.names else np.asarray(big.column("file").to_numpy(), np.int64)
        todo = [k for k, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:]))
                if not (stored[lo:hi].all() and not missing[lo:hi].any()
                        and (one_file is None or (one_file[lo:hi] == one_file[lo]).all()))]
        tot.context_stored = int(bounds[-1] - sum(bounds[k + 1] - bounds[k] for k in todo))
        if todo:
            w = np.concatenate([bounds[k] + orders[k] for k in todo])
            session[w] = scopes_session_columns(sessions, turn, items.columns.content, vecs, items.columns.role, w,
                                                [bounds[k + 1] - bounds[k] for k in todo])
        segments: list[tuple[int, int, ScoringContext]] = []
        for lo, hi, order in zip(bounds[:-1], bounds[1:], orders):
            n = hi - lo
            steps = np.empty(n, dtype=np.int64)
            steps[order] = np.arange(1, n + 1)
            recent = recent_context(vecs[lo:hi][order[-self.recent_window:]])
            segments.append((lo, hi, scoring_context(now=self.now, steps=steps, recent=recent, session=session[lo:hi],
                                                     skip_redundancy=self.skip_redundancy)))
        score_segments = getattr(self.plan.scorer, "score_segments", None)
        utilities = (score_segments(items.columns, vecs, segments) if score_segments is not None
                     else None)  # a scorer without it scores scope by scope in build()
        parts: list[pa.Table] = []
        failed: list[tuple[str, str, InfeasibleError, pa.Table]] = []
        for (user, agent, t), (lo, hi, ctx) in zip(scopes, segments):
            try:
                plan = self.plan.build(items.slice(lo, hi), vecs[lo:hi], ctx,
                                       model_utility=None if utilities is None else utilities[lo:hi])
                result = self.plan.solve(plan)
            except InfeasibleError as e:
                failed.append((user, agent, e, t))
                continue
            cols = self.plan.item_columns(plan, result)
            n = hi - lo
            parts.append(pa.table({
                "id": t.column("id"), "user_id": pa.repeat(user, n), "agent_id": pa.repeat(agent, n),
                "utility": pa.array([_round(u) for u in cols.utility.tolist()], pa.float64()),
                "model_utility": pa.array([round(u, 6) for u in cols.model_utility.tolist()], pa.float64()),
                "keep": pa.array(cols.kept), "reason": pa.array(cols.reason, pa.string()),
                "action": pa.array(cols.action, pa.string()),
            }, schema=OUTPUT_SCHEMA))
            tot.scopes += 1
            tot.valid += n
            tot.embedded += int(missing[lo:hi].sum())
        out = pa.concat_tables(parts) if parts else OUTPUT_SCHEMA.empty_table()
        if out.num_rows:
            counts = {a["values"]: a["counts"] for a in pc.value_counts(out.column("action")).to_pylist()}
            tot.kept = counts.get("keep", 0) + counts.get("write", 0)
            tot.archived, tot.deleted = counts.get("archive", 0), counts.get("delete", 0)
        return out, tot, failed
