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
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from ..encoders.embedder import Embedder
from ..record.links import LinkKind
from ..record.memir import MemIR, RoleContext
from .filters import MemoryFilter
from .forget_plan import Cascade, ForgetPlan
from .ranking import RankWeights, SearchResult

if TYPE_CHECKING:
    from ..experiments.events import Feedback
    from ..retention.decision import MemoryExplanation, RetentionDecision
    from .usage import Accesses, UsageBuffer

__all__ = ["LoggedDecision", "ScopeCopy", "ScopeLogs", "ScopeLogsAndDecisions", "ScopeReads", "ScopeRow", "ScopeWrites",
           "StoredRow", "StoreBackend", "TenantBackend"]


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


class ScopeWrites(Protocol):
    """The writes of one scope: each is one transaction, confined to the scope."""

    user_id: str
    agent_id: str

    def state(self) -> ScopeRow:
        """The scope's persisted state (write step, last decision step, open session)."""
        ...

    def set_session(self, session_id: str | None, last_at: float | None) -> None:
        """Record the scope's open session and the event time of its latest write (``None``: closed)."""
        ...

    def insert(self, records: Sequence[MemIR], vectors: Sequence[np.ndarray], *, batch: bool = False,
               session: tuple[str | None, float | None] | None = None,
               links: Sequence[tuple[str, str, LinkKind]] = ()) -> tuple[list[int], int]:
        """Insert records and vectors in one transaction (ids unique, ``derived_from``/``supersedes``
        inside the scope; ``store.write_checks``); ``session``: the open session row to set with it;
        ``links`` = ``(stored id, new id, kind)`` corroboration links the stored memories get in it
        (``runtime.record.links.with_link``). Returns (row ids, writes since the last decision)."""
        ...

    def set_session_context(self, pairs: Sequence[tuple[str, np.ndarray]]) -> int:
        """Store session-context feature rows by memory id (replacing earlier ones); returns rows stored."""
        ...

    def mark_superseded(self, old_id: str, new_id: str, *, archive: bool) -> None:
        """Flag ``old_id`` superseded by ``new_id`` (and move it to the archive with ``archive``)."""
        ...

    def drop_links(self, memory_ids: Sequence[str], gone: Sequence[str]) -> int:
        """Remove the ids ``gone`` from the links of the scope's memories ``memory_ids`` (forgetting)."""
        ...

    def add_tags(self, memory_ids: Sequence[str], tags: Sequence[str]) -> int:
        """Add ``tags`` to the scope's memories ``memory_ids`` (tag rows and the record body), in one
        transaction; ids of other scopes are never touched. Returns how many memories gained a tag."""
        ...

    def refresh_marks(self, memory_ids: Sequence[str]) -> dict[str, str]:
        """The semantic-refresh marker stored beside each of ``memory_ids`` that has one."""
        ...

    def put_refreshed(self, vectors: Sequence[tuple[str, np.ndarray]], mark: str) -> list[str]:
        """Replace the vectors of ``(memory id, vector)`` pairs and store ``mark`` beside them, in one
        transaction; returns the ids written (memories gone meanwhile are skipped)."""
        ...


class ScopeReads(Protocol):
    """The reads of one scope: records, vectors and search, never another scope's rows."""

    def get(self, memory_id: str) -> MemIR | None:
        """The record ``memory_id`` of this scope, in either tier (``None``: not in this scope)."""
        ...

    def tier_of(self, memory_id: str) -> str | None:
        """``working`` or ``archive`` (``None``: not in this scope)."""
        ...

    def lineage(self, memory_ids: Sequence[str], depth: int | None = None) -> list[list[str]]:
        """The scope's memories derived from ``memory_ids`` (through ``derived_from``), generation by
        generation, up to ``depth`` generations (``None``: all); ids sorted within a generation."""
        ...

    def parents(self, memory_id: str) -> list[str]:
        """The ids ``memory_id`` was derived from, in id order."""
        ...

    def existing_ids(self, ids: Sequence[str]) -> set[str]:
        """The subset of ``ids`` that are memories of this scope."""
        ...

    def versions(self, memory_id: str) -> list[str]:
        """The correction chain ``memory_id`` belongs to, oldest first."""
        ...

    def session_context(self, ids: Sequence[str], width: int) -> np.ndarray:
        """The stored session-context rows of ``ids`` (``(len(ids), width)``; NaN rows where none)."""
        ...

    def promotable(self, memory_ids: Sequence[str], now: datetime) -> list[tuple[str, float | None]]:
        """Of ``memory_ids``, the scope's archived memories a recall may promote (not superseded
        versions, not past their TTL at ``now``), with their stored utility, in the order given."""
        ...

    def select(self, flt: MemoryFilter, now: datetime, limit: int | None = None) -> list[MemIR]:
        """Records passing ``flt`` at ``now``, in write order (at most ``limit``)."""
        ...

    def count(self, flt: MemoryFilter, now: datetime) -> int:
        """How many records pass ``flt`` at ``now``."""
        ...

    def with_vectors(self, flt: MemoryFilter, now: datetime) -> tuple[list[MemIR], np.ndarray, np.ndarray]:
        """(records, unit vectors as float32, write steps) of the rows passing ``flt``, in write order."""
        ...

    def recent_vectors(self, n: int) -> np.ndarray:
        """Unit vectors of the scope's ``n`` most recent writes, any tier, oldest first (placeholders
        excluded: they are not what the conversation was about)."""
        ...

    def working_count(self) -> int:
        """How many memories are in the working tier."""
        ...

    def expired_ids(self, now: datetime, tier: str = "archive") -> list[str]:
        """Ids of the memories of ``tier`` past their TTL at ``now``."""
        ...

    def export(self) -> list[tuple[MemIR, np.ndarray | None, str | None]]:
        """Every record (all tiers, expired included) with its stored vector and encoder id."""
        ...

    def search(self, flt: MemoryFilter, now: datetime, q: np.ndarray, *, k: int, pool: int,
               context: RoleContext | None, weights: RankWeights, touch: bool) -> SearchResult:
        """Filtered vector search, re-ranked; with ``touch`` the hits' access counts and last-access
        times are updated (as part of the search where the backend can)."""
        ...

    def nearest(self, q: np.ndarray, k: int, now: datetime, *, at_least: float = float("-inf")) -> list[tuple[str, str, float]]:
        """``(id, stored JSON body, cosine)`` of the ``k`` memories most similar to ``q`` among those
        :class:`MemoryFilter`'s defaults pass (working tier, not expired), most similar first, each
        re-checked in SQL as a search's are — not re-ranked, not parsed, usage untouched (what
        corroboration judges a new memory against). Only those with a cosine of at least
        ``at_least``: on SQLite the others are neither re-checked nor read; PostgreSQL finds and reads
        the candidates in one statement and drops them there."""
        ...


class ScopeLogsAndDecisions(Protocol):
    """Forgetting, retention decisions and the logs of one scope."""

    def forget_plan(self, memory_ids: Sequence[str], cascade: Cascade) -> ForgetPlan:
        """What forgetting ``memory_ids`` under ``cascade`` deletes and redacts (nothing written)."""
        ...

    def forget(self, plan: ForgetPlan, *, reason: str, scrub: bool, wait_s: float) -> None:
        """Carry out ``plan`` in one transaction: rows, vectors, tags, links, log mentions and caches;
        with ``scrub`` the old bytes leave the WAL/free pages too (waiting up to ``wait_s`` for readers)."""
        ...

    def apply_decision(self, decision: RetentionDecision, *, candidates: Sequence[tuple[MemIR, np.ndarray]] = (),
                       dry_run: bool = False) -> RetentionDecision:
        """Apply a decision in one transaction: ``archive`` moves to the cold tier (vector re-encoded
        in the store's ``cold_format``), ``promote`` back to working (vector at float32)."""
        ...

    def explain(self, memory_id: str) -> MemoryExplanation:
        """Every logged decision about ``memory_id``, and where it is now."""
        ...

    def decisions(self, limit: int) -> list[RetentionDecision]:
        """The scope's decisions, most recently recorded first, without per-item details."""
        ...

    def decision(self, decision_id: str) -> RetentionDecision:
        """One decision of this scope with every item (``NotFoundError`` otherwise)."""
        ...

    def log_recall(self, payload: dict[str, Any], at: datetime) -> None:
        """Append an explained recall (already redacted) to the scope's recall log."""
        ...

    def recall_log(self, limit: int) -> list[dict[str, Any]]:
        """The scope's latest explained recalls, newest first."""
        ...

    def record_feedback(self, fb: Feedback) -> None:
        """Append an outcome event (``Scope.feedback``) to the scope's log."""
        ...

    def feedback(self, limit: int) -> list[Feedback]:
        """The scope's latest outcome events, newest first."""
        ...


class ScopeCopy(Protocol):
    """Copying a scope between stores (``memir migrate``): rows and logs exactly as stored."""

    def stored_rows(self, after_seq: int, limit: int) -> list[StoredRow]:
        """Up to ``limit`` rows written after step ``after_seq``, in write order."""
        ...

    def restore_rows(self, rows: Sequence[StoredRow]) -> int:
        """Write ``rows`` as they were (ids, tiers, steps, vectors); returns how many were new."""
        ...

    def logs(self) -> ScopeLogs:
        """The scope's state, decision log and recall log."""
        ...

    def restore_logs(self, logs: ScopeLogs) -> bool:
        """Write ``logs`` into an empty log (``False``: the scope already had a log; nothing written)."""
        ...


class TenantBackend(ScopeWrites, ScopeReads, ScopeLogsAndDecisions, ScopeCopy, Protocol):
    """Every read and write of one ``(user_id, agent_id)`` scope, by concern."""


class StoreBackend(Protocol):
    """Connections, transactions, and the explicit cross-user admin paths of one store."""

    path: str
    cold_format: str  # how archived memories' vectors are stored (runtime.store.tiers)
    usage: UsageBuffer | None  # recall accesses written behind (runtime.store.usage); None: written through

    @property
    def embedder(self) -> Embedder: ...
    def tenant(self, user_id: str, agent_id: str) -> TenantBackend: ...
    def apply_usage(self, accesses: Accesses) -> None:
        """Recall accesses ``{(user, agent): [(rowid, count, latest time)]}`` in one transaction."""
        ...
    def flush_usage(self) -> None:
        """Apply the recall accesses pending in this process (outside any transaction)."""
        ...
    def erase_usage(self) -> None:
        """A deletion happened: apply the pending recall accesses and zero their journal."""
        ...
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
    def experiments(self) -> list[str]: ...
    def outcome_counts(self, experiment: str) -> list[tuple[str, str, str, int, float]]:
        """``(user_id, arm, kind, events, sum of values)`` of one experiment's outcome events."""
        ...
    def forget_user(self, user_id: str, wait_s: float = 30.0) -> int: ...
    def scrub(self, wait_s: float = 30.0) -> None: ...
    def checkpoint(self, wait_s: float = 0.0, *, required: bool = False) -> bool: ...
    def drop_caches(self) -> None: ...
    def build_indexes(self, encoder_id: str, dim: int) -> list[str]: ...
    def stale_vectors(self, encoder_id: str) -> list[tuple[int, str]]: ...
    def put_vectors(self, rows: list[tuple[int, bytes]], encoder_id: str, dim: int) -> None: ...
