"""The memory store: an SQLite file or a PostgreSQL database, every read and write through a user scope.

Example:
    >>> from runtime import MemoryStore
    >>> from runtime.encoders import HashEmbedder
    >>> with MemoryStore.open(":memory:", embedder=HashEmbedder()) as store:
    ...     alice = store.scope(user_id="alice")
    ...     _ = alice.write("Alice's flight is on 3 May", sub_role="travel", tags=["trip"])
    ...     [h.record.content for h in alice.recall("when is the flight?", k=1)]
    ["Alice's flight is on 3 May"]

Isolation is structural: a :class:`~runtime.store.scope.Scope` works through a tenant object that
binds ``user_id``/``agent_id`` into every statement and into its vector cache. The only calls that
see several users are the explicit admin paths here (:meth:`MemoryStore.admin_export`,
:meth:`MemoryStore.admin_stats`, :meth:`MemoryStore.admin_users`, :meth:`MemoryStore.forget_user`,
:meth:`MemoryStore.admin_experiment_report`, which reads aggregates only).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..annotate.assembler import ContextAssembler
from ..encoders.default import declared_default
from ..encoders.embedder import Embedder, LazyEmbedder
from ..errors import NotFoundError, ValidationError
from ..experiments.design import Arm as _Arm
from ..record.builder import RecordBuilder
from ..retention.policy import RetentionPolicy
from . import dumps
from .backend import StoreBackend
from .config import StoreConfig
from .location import is_postgres_url
from .migrate import CopyReport, check_batch_size, copy_store
from .scope import Scope
from .scope_core import check_id
from .services import StoreServices
from .sqlite.backend import SqliteStoreBackend
from .usage import UsageBuffer, usage_journal_dir

if TYPE_CHECKING:
    from ..experiments.report import ExperimentReport

__all__ = ["MemoryStore", "StoreConfig"]


def _default_embedder() -> Embedder:
    from ..encoders.onnx import load_default_embedder
    return load_default_embedder()


class MemoryStore:
    """A memir store backed by an SQLite file (or ``":memory:"``) or a PostgreSQL database
    (``postgresql://...``; the ``postgres`` extra).

    Use :meth:`open`; work through :meth:`scope`. Thread-safe; several processes may open the same
    SQLite file (WAL + busy timeout), and many the same PostgreSQL database (a connection pool each).
    """

    def __init__(self, db: StoreBackend, embedder: LazyEmbedder, config: StoreConfig) -> None:
        self._db = db
        self._embedder = embedder
        self.config = config
        self._services = StoreServices(config, embedder)

    # ------------------------------------------------------------------ lifecycle
    @classmethod
    def open(cls, path: str | Path, *, embedder: Embedder | None = None, config: StoreConfig | None = None,
             create: bool = True) -> MemoryStore:
        """Open a store, creating it if needed (``create=False`` refuses a missing file).

        Args:
            path: SQLite file path, or ``":memory:"``.
            embedder: the sentence encoder; default: the ONNX all-MiniLM-L6-v2
                (``runtime.encoders.load_default_embedder``), loaded on first use.
            config: :class:`StoreConfig`.
            create: create the file when it does not exist.

        Raises:
            NotFoundError: the file does not exist and ``create`` is False.
            ValidationError: the path is a directory, not a memir store, or from a newer memir.
        """
        cfg = config or StoreConfig()
        lazy = LazyEmbedder(_default_embedder, embedder, declared=declared_default)
        db: StoreBackend
        if is_postgres_url(path):
            from .postgres.backend import PgStoreBackend  # psycopg lives in the `postgres` extra
            from .postgres.schema import HnswSettings
            db = PgStoreBackend.open(str(path), pool_size=cfg.pool_size, create=create, embedder=lazy,
                                     exact_search_max=cfg.exact_search_max, cold_vectors=cfg.cold_vectors,
                                     hnsw=HnswSettings(cfg.hnsw_m, cfg.hnsw_ef_construction, cfg.hnsw_ef_search))
        else:
            db = SqliteStoreBackend.open(path, busy_timeout_ms=cfg.busy_timeout_ms, create=create, embedder=lazy,
                                  cold_vectors=cfg.cold_vectors)
        if cfg.usage_flush_s > 0:
            try:
                try:
                    db.usage = UsageBuffer(db.apply_usage, usage_journal_dir(db.path), cfg.usage_flush_s)
                except OSError:  # no journal can be kept here (a read-only home, say): write through
                    db.usage = None
                if db.usage is not None:
                    db.usage.recover()  # what a crashed process left pending
            except BaseException:
                db.close()
                raise
        return cls(db, lazy, cfg)

    @property
    def backend(self) -> StoreBackend:
        """The storage backend (:class:`~runtime.store.backend.StoreBackend`): for admin tools that
        work across stores, such as copying one into another. Agents work through :meth:`scope`."""
        return self._db

    @property
    def path(self) -> str:
        """The store file (``":memory:"`` for an in-memory store)."""
        return self._db.path

    def close(self) -> None:
        """Finish running async calls, checkpoint the WAL and close the file. Idempotent."""
        self._services.close()
        self._db.close()

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ shared components
    @property
    def embedder(self) -> Embedder:
        """The encoder in use (loaded lazily; raises ``EncoderUnavailableError`` with the remedy)."""
        return self._embedder.inner

    @property
    def builder(self) -> RecordBuilder:
        """The record builder every write goes through (redaction, defaults, validation)."""
        return self._services.builder

    @property
    def assembler(self) -> ContextAssembler:
        """The assembler ``Scope.write`` annotates through (roles, sessions)."""
        return self._services.assembler

    # ------------------------------------------------------------------ the public surface
    def scope(self, *, user_id: str, agent_id: str = "default", policy: RetentionPolicy | None = None) -> Scope:
        """The only way to read or write memories: everything it does is confined to this user/agent.

        Args:
            user_id: the user (letters, digits and ``_ . : @ -``, 1–128 characters).
            agent_id: the agent (the same alphabet; default ``"default"``).
            policy: this scope's retention policy (default: ``StoreConfig.policy``).
        """
        self._db.check_open()
        check_id(user_id, "user_id")  # a regular expression: a pydantic validator built at import was
        check_id(agent_id, "agent_id")  # ~45 ms of a cold MemoryStore.open
        if policy is not None and not isinstance(policy, RetentionPolicy):
            raise ValidationError("policy must be a RetentionPolicy(...)", field="policy")
        return Scope(self._services, self._db.tenant(user_id, agent_id), policy or self.config.policy)

    def forget_user(self, user_id: str) -> int:
        """Delete everything of ``user_id``: rows, vectors, tags, logs, decisions, scope state and
        in-memory session and task context — then scrub: ``secure_delete`` zeroes the freed cells, the
        WAL is checkpointed and truncated, and the file is vacuumed. Returns the number of memories
        deleted."""
        n = self._db.forget_user(user_id, self.config.scrub_wait_s)
        self._services.forget_user(user_id)
        return n

    def scrub(self) -> None:
        """Push deleted content out of the WAL and the free pages (checkpoint, vacuum, truncate)."""
        self._db.scrub(self.config.scrub_wait_s)

    async def ascrub(self) -> None:
        """:meth:`scrub`, awaitable (it runs on the store's async thread pool)."""
        await self._services.aio.run(self.scrub)

    def checkpoint(self) -> None:
        """Copy committed pages from the WAL into the main file and truncate the WAL."""
        self._db.checkpoint()

    def admin_users(self) -> list[tuple[str, str, int]]:
        """Admin path: (user_id, agent_id, memory count) for every scope in the store."""
        return self._db.users()

    def admin_stats(self) -> dict[str, Any]:
        """Admin path: counts by tier, source type, role and user; last decisions (``memir inspect``)."""
        return self._db.stats()

    def admin_export(self, path: str | Path) -> int:
        """Admin path: every scope's records (+ vectors) into one dump (JSONL, or Parquet by suffix)."""
        rows: list[tuple[Any, np.ndarray | None, str | None]] = []
        for user_id, agent_id, _ in self.admin_users():
            rows += self.scope(user_id=user_id, agent_id=agent_id).export_rows()
        return dumps.write_dump(rows, path)

    def admin_compact_vectors(self) -> int:
        """Admin path: store every vector in the format its tier calls for — archived memories in
        ``StoreConfig.cold_vectors``, working ones in float32 (after the setting changed, or an
        upgrade from a store without tiers). Returns how many were re-encoded. ``memir compact``."""
        return self._db.compact_vectors()

    def admin_build_indexes(self) -> list[str]:
        """Admin path: build now the vector index of every scope that needs one (PostgreSQL: an HNSW
        index per scope past ``StoreConfig.exact_search_max``; SQLite: none). Run it after a bulk
        import; otherwise each index is built in the background on its scope's first search."""
        emb = self.embedder
        return self._db.build_indexes(emb.encoder_id, emb.dim)

    def admin_experiments(self) -> list[str]:
        """Admin path: the experiments outcome events were recorded under (declared or not any more)."""
        self._db.check_open()
        return self._db.experiments()

    def admin_experiment_report(self, experiment: str, *, metric: str | None = None, control: str | None = None,
                                min_effect: float | None = None, alpha: float | None = None,
                                power: float | None = None, n_boot: int = 2000, seed: int = 0) -> ExperimentReport:
        """Admin path: compare an experiment's arms on its outcome events (``memir ab report``).

        Reads only aggregates (events and sums per user, arm and kind), and reports arms, never users.
        Settings left at ``None`` come from the experiment as declared in ``StoreConfig.experiments``
        (arm order, the first arm as control, metric, minimum effect, alpha, power), else the defaults
        of :class:`~runtime.experiments.Experiment` with the arms seen in sorted order.

        Raises:
            NotFoundError: no outcome was recorded under ``experiment`` (the message lists those that were).
        """
        from ..experiments.design import Experiment
        from ..experiments.report import compare_arms

        self._db.check_open()
        rows = self._db.outcome_counts(experiment)
        if not rows:
            known = self._db.experiments()
            raise NotFoundError(f"no outcome recorded under experiment {experiment!r}; recorded: "
                                f"{', '.join(known) if known else 'none (Scope.feedback records outcomes)'}")
        declared = next((e for e in self.config.experiments if e.name == experiment), None)
        seen = sorted({r[1] for r in rows})
        arms = [a.name for a in declared.arms] if declared else seen
        arms += [a for a in seen if a not in arms]  # an arm since removed from the declaration
        if control is not None:
            if control not in arms:
                raise ValidationError(f"control {control!r} is not an arm of {experiment!r}; arms: {arms}",
                                      field="control")
            arms = [control] + [a for a in arms if a != control]
        base = declared or Experiment(experiment, [_Arm(a) for a in arms[:2]])
        return compare_arms(rows, experiment=experiment, arms=arms, metric=metric or base.metric,
                      min_effect=base.min_effect if min_effect is None else min_effect,
                      alpha=base.alpha if alpha is None else alpha, power=base.power if power is None else power,
                      n_boot=n_boot, seed=seed)

    def admin_copy_to(self, dest: MemoryStore, *, batch_size: int = 500, progress: bool = False) -> CopyReport:
        """Admin path: copy every scope of this store into ``dest`` (another backend, or another
        file), exactly as stored, then verify each scope by count and checksum. Resumable and
        idempotent (what ``dest`` already has is skipped). ``memir migrate SRC DST`` runs this."""
        self._db.check_open()
        dest.backend.check_open()
        return copy_store(self._db, dest.backend, batch_size=batch_size, progress=progress)

    def reembed(self, embedder: Embedder | None = None, *, batch_size: int = 256, progress: bool = False) -> int:
        """Re-encode every memory whose vector was made by another encoder (seed 001 pitfall 3).

        All-or-nothing per batch; safe to re-run (it only touches rows not yet on ``embedder``).
        Returns the number of vectors rewritten.
        """
        import json

        check_batch_size(batch_size)
        if embedder is not None:
            self._embedder.replace(embedder)
            self._db.drop_caches()
        emb = self.embedder
        todo = self._db.stale_vectors(emb.encoder_id)
        bar = None
        if progress:
            from tqdm import tqdm
            bar = tqdm(total=len(todo), desc="reembed", unit="mem")
        for start in range(0, len(todo), batch_size):
            chunk = todo[start:start + batch_size]
            vecs = np.asarray(emb.encode([json.loads(r[1])["content"] for r in chunk]), dtype=np.float32)
            self._db.put_vectors([(r[0], v.tobytes()) for r, v in zip(chunk, vecs)], emb.encoder_id, emb.dim)
            if bar is not None:
                bar.update(len(chunk))
        if bar is not None:
            bar.close()
        return len(todo)
