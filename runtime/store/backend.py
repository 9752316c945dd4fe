"""What a storage backend provides: the contract :class:`~runtime.store.scope.Scope` and
:class:`~runtime.store.store.MemoryStore` are written against.

Two backends implement it: SQLite (:mod:`runtime.store.sqlite`, one file, an in-process vector
cache) and PostgreSQL + pgvector (:mod:`runtime.store.postgres`, many clients, row-level
security). A :class:`TenantBackend` is one ``(user_id, agent_id)`` scope: every statement it runs
is confined to that scope (by the tenant clause it binds, and on Postgres also by the database's
row-level security). A :class:`StoreBackend` owns connections and transactions and holds the few
explicitly named admin paths that see several users.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

import numpy as np

from ..annotate.enrich import LinkKind
from ..encoders.base import Embedder
from ..record.memir import MemIR, RoleContext
from ..retention.decision import MemoryExplanation, RetentionDecision
from .filters import MemoryFilter
from .forgetting import Cascade, ForgetPlan
from .ranking import RankWeights, SearchResult

__all__ = ["LoggedDecision", "ScopeLogs", "ScopeRow", "StoredRow", "StoreBackend", "TenantBackend"]


@dataclass(frozen=True)
class ScopeRow:
    """The persisted per-scope state.

    Attributes:
        seq: write step of the scope's latest write (0 = none yet).
        decision_seq: ``seq`` at the scope's last retention decision.
        open_session: the session the scope's latest writes belong to, if any.
        session_last_at: event time (epoch s) of the latest write in ``open_session``.
    """

    seq: int = 0
    decision_seq: int = 0
    open_session: str | None = None
    session_last_at: float | None = None


@dataclass(frozen=True)
class StoredRow:
    """A memory exactly as a backend holds it (for copying a store between backends)."""

    record: MemIR
    tier: str
    seq: int
    vector: np.ndarray | None
    encoder_id: str | None
    context: bytes | None  # session-context features (float64 bytes), if the session closed


@dataclass(frozen=True)
class LoggedDecision:
    """One entry of the decision log as stored: its head JSON and its items."""

    decision_id: str
    at: float
    head: str
    items: list[tuple[str, bool, str, str]]  # (memory_id, kept, reason, item JSON)


@dataclass(frozen=True)
class ScopeLogs:
    """A scope's state, decision log and recall log as stored (for copying a store)."""

    state: ScopeRow
    decisions: list[LoggedDecision]
    recalls: list[tuple[float, str]]  # (at, payload JSON)


class TenantBackend(Protocol):
    """Every read and write of one scope."""

    user_id: str
    agent_id: str

    # state and writes
    def state(self) -> ScopeRow: ...
    def set_session(self, session_id: str | None, last_at: float | None) -> None: ...
    def insert(self, records: Sequence[MemIR], vectors: Sequence[np.ndarray], *, batch: bool = False,
               session: tuple[str | None, float | None] | None = None,
               links: Sequence[tuple[str, str, LinkKind]] = ()) -> tuple[list[int], int]:
        """Insert records and vectors in one transaction; ``links`` = ``(stored id, new id, kind)``
        corroboration links the stored memories get in it (``runtime.annotate.enrich.with_link``)."""
        ...
    def existing_ids(self, ids: Sequence[str]) -> set[str]: ...
    def set_session_context(self, pairs: Sequence[tuple[str, np.ndarray]]) -> int: ...
    def session_context(self, ids: Sequence[str], width: int) -> np.ndarray: ...
    def mark_superseded(self, old_id: str, new_id: str, *, archive: bool) -> None: ...
    def drop_links(self, memory_ids: Sequence[str], gone: Sequence[str]) -> int:
        """Remove the ids ``gone`` from the links of the scope's memories ``memory_ids`` (forgetting)."""
        ...
    def add_tags(self, memory_ids: Sequence[str], tags: Sequence[str]) -> int:
        """Add ``tags`` to the scope's memories ``memory_ids`` (tag rows and the record body), in one
        transaction; ids of other scopes are never touched. Returns how many memories gained a tag."""
        ...

    # reads
    def get(self, memory_id: str) -> MemIR | None: ...
    def tier_of(self, memory_id: str) -> str | None: ...
    def promotable(self, memory_ids: Sequence[str], now: datetime) -> list[tuple[str, float | None]]:
        """Of ``memory_ids``, the scope's archived memories a recall may promote (not superseded
        versions, not past their TTL at ``now``), with their stored utility, in the order given."""
        ...
    def versions(self, memory_id: str) -> list[str]: ...
    def select(self, flt: MemoryFilter, now: datetime, limit: int | None = None) -> list[MemIR]: ...
    def count(self, flt: MemoryFilter, now: datetime) -> int: ...
    def with_vectors(self, flt: MemoryFilter, now: datetime) -> tuple[list[MemIR], np.ndarray, np.ndarray]: ...
    def recent_vectors(self, n: int) -> np.ndarray: ...
    def working_count(self) -> int: ...
    def expired_ids(self, now: datetime, tier: str = "archive") -> list[str]: ...
    def export(self) -> list[tuple[MemIR, np.ndarray | None, str | None]]: ...

    # search and the recall log
    def search(self, flt: MemoryFilter, now: datetime, q: np.ndarray, *, k: int, pool: int,
               context: RoleContext | None, weights: RankWeights, touch: bool) -> SearchResult:
        """Filtered vector search, re-ranked; with ``touch`` the hits' access counts and last-access
        times are updated (as part of the search where the backend can)."""
        ...
    def log_recall(self, payload: dict[str, Any], at: datetime) -> None: ...
    def recall_log(self, limit: int) -> list[dict[str, Any]]: ...

    # forgetting and retention decisions
    def forget_plan(self, memory_ids: Sequence[str], cascade: Cascade) -> ForgetPlan: ...
    def forget(self, plan: ForgetPlan, *, reason: str, scrub: bool, wait_s: float) -> None: ...
    def apply_decision(self, decision: RetentionDecision, *, candidates: Sequence[tuple[MemIR, np.ndarray]] = (),
                       dry_run: bool = False) -> RetentionDecision:
        """Apply a decision in one transaction: ``archive`` moves to the cold tier (vector re-encoded
        in the store's ``cold_format``), ``promote`` back to working (vector at float32)."""
        ...
    def explain(self, memory_id: str) -> MemoryExplanation: ...
    def decisions(self, limit: int) -> list[RetentionDecision]: ...
    def decision(self, decision_id: str) -> RetentionDecision: ...

    # semantic refresh (Scope.refresh): vectors re-encoded with their session context, marked
    def refresh_marks(self, memory_ids: Sequence[str]) -> dict[str, str]: ...
    def put_refreshed(self, vectors: Sequence[tuple[str, np.ndarray]], mark: str) -> list[str]: ...

    # copying a store (memir migrate): rows and logs exactly as stored
    def stored_rows(self, after_seq: int, limit: int) -> list[StoredRow]: ...
    def restore_rows(self, rows: Sequence[StoredRow]) -> int: ...
    def logs(self) -> ScopeLogs: ...
    def restore_logs(self, logs: ScopeLogs) -> bool: ...


class StoreBackend(Protocol):
    """Connections, transactions, and the explicit cross-user admin paths of one store."""

    path: str
    cold_format: str  # how archived memories' vectors are stored (runtime.store.tiers)

    @property
    def embedder(self) -> Embedder: ...
    def tenant(self, user_id: str, agent_id: str) -> TenantBackend: ...
    def check_open(self) -> None: ...
    def close(self) -> None: ...
    def users(self) -> list[tuple[str, str, int]]: ...
    def stats(self) -> dict[str, Any]:
        """Counts by tier, source type, role, sensitivity and user; encoders; the last decisions;
        ``tiers``: per tier ``{"memories", "vector_bytes", "formats": {format: count}}``."""
        ...
    def compact_vectors(self) -> int:
        """Re-encode every vector whose format does not match its tier (after ``cold_vectors``
        changed, or an upgrade); returns how many were rewritten."""
        ...
    def forget_user(self, user_id: str, wait_s: float = 30.0) -> int: ...
    def scrub(self, wait_s: float = 30.0) -> None: ...
    def checkpoint(self, wait_s: float = 0.0, *, required: bool = False) -> bool: ...
    def drop_caches(self) -> None: ...
    def build_indexes(self, encoder_id: str, dim: int) -> list[str]: ...
    def stale_vectors(self, encoder_id: str) -> list[tuple[int, str]]: ...
    def put_vectors(self, rows: list[tuple[int, bytes]], encoder_id: str, dim: int) -> None: ...
