"""Store settings (:class:`StoreConfig`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..annotate.assembler import AssemblerConfig
from ..errors import ValidationError
from ..experiments.design import Experiment, check_experiments
from ..retention.policy import RetentionPolicy
from .freshness import FreshnessConfig
from .tiers import COLD_FORMATS

__all__ = ["StoreConfig"]


@dataclass(frozen=True)
class StoreConfig:
    """Store settings.

    Attributes:
        busy_timeout_ms: how long a writer waits for a lock held by another connection.
        log_recalls: keep a per-scope log of recalls made with ``explain=True``.
        candidate_pool: raw top-K taken from vector search before re-ranking.
        annotate: how records are built and annotated: redaction, confidence defaults, length
            limit (``annotate.record``), role classification and session detection.
        policy: the retention policy every scope starts with (``store.scope(..., policy=...)``
            overrides it per scope). Its triggers are off by default.
        scrub_wait_s: how long ``forget`` (and ``forget_user``, ``scrub``) waits for another
            connection's read transaction to leave the WAL before it raises
            ``DeletionPendingError`` instead of reporting a deletion whose bytes remain.
        pool_size: PostgreSQL only: the most connections one store object holds open.
        exact_search_max: PostgreSQL only: scopes with at most this many writes are searched
            exactly inside the filter; a larger scope gets an HNSW index of its own (built in the
            background) and is searched through it.
        recall_session_mix: the weight ``w`` a recall gives the scope's recent-context vector when
            it names none (``Scope.recall(session_mix=...)``): query = normalize((1-w)·q + w·s).
            0 (default) = off; 0.2 lets the conversation break near-ties (:mod:`runtime.store.refresh`).
        async_workers: threads behind the scopes' async methods (``awrite``, ``arecall``...): the
            blocking work of concurrent coroutines runs on them, never on the event loop.
        dynamic_roles: recall weighs roles by the live context (``Scope.recall(dynamic_roles=...)``
            overrides it): the role-weight model (:class:`runtime.scoring.role_weights.RoleWeigher`) maps
            the query + recent context to weights over sub-roles, which raise the role-match factor
            of memories of the context's sub-roles. Off by default (static role match only).
        cold_vectors: how the cold tier (``archive``) stores vectors: ``int8`` (default; 388 bytes
            for 384 dims, a quarter of float32), ``float16`` or ``float32`` (no compression).
            Working memories always keep float32. :mod:`runtime.store.tiers`; the recall cost is
            measured by ``python -m train.eval tiers``.
        hnsw_m, hnsw_ef_construction: PostgreSQL only: the HNSW index's links per node (2–100) and
            build-time candidate list (4–1000, at least ``2 × hnsw_m``); they apply to indexes built
            after they are set. Defaults 16 / 64 (pgvector's).
        hnsw_ef_search: PostgreSQL only: the search-time candidate list (1–1000); ``None`` (default)
            = 4 × ``candidate_pool``, between 100 and 1000. Their effect on recall@10 and latency is
            measured by ``bench/bench_backends.py``.
        promote_on_access: a recall (with ``update_usage``) that returns an archived memory moves it
            back to the working tier, vector back at float32, by a logged decision (trigger
            ``access:recall``). Superseded versions and memories past their TTL are never promoted.
            Default on.
        freshness: how fast memories that declare no ``freshness_half_life`` lose recall weight:
            a half-life per source type and dialog role (:class:`~runtime.store.freshness.FreshnessConfig`;
            default: what people say does not decay; 90 days for documents, 30 for the agent's inferences, 7
            for system feedback and tool output). ``None``: only declared half-lives decay.
        usage_flush_s: 0 (default): each recall updates its hits' usage (access count, last access)
            in a transaction of its own. Above 0: the usage is written behind — counted in the
            process, journalled, applied in one transaction within this many seconds and before any
            other operation of the store object (:mod:`runtime.store.usage`; other processes see it
            once applied). Worth it for read-heavy processes (PostgreSQL, 8 clients, 100k memories:
            recall p50 14.2–14.5 → 11.4–12.3 ms, p99 29–31 → 40–57 ms); an agent that alternates one
            recall and one write pays the update, and a journal sync, on the write instead
            (SQLite: 1.8–2.1 → 3.4–3.6 ms per recall + write).
        experiments: online A/B experiments (:class:`~runtime.experiments.Experiment`): each user is
            put in one arm of each, deterministically, and their scopes recall and retain with the
            arm's settings; ``Scope.feedback`` records outcomes, ``memir ab report`` compares arms.
    """

    busy_timeout_ms: int = 5_000
    log_recalls: bool = True
    candidate_pool: int = 50
    annotate: AssemblerConfig = field(default_factory=AssemblerConfig)
    policy: RetentionPolicy = field(default_factory=RetentionPolicy)
    scrub_wait_s: float = 30.0
    pool_size: int = 10
    exact_search_max: int = 20_000
    async_workers: int = 4
    recall_session_mix: float = 0.0
    dynamic_roles: bool = False
    cold_vectors: str = "int8"
    promote_on_access: bool = True
    hnsw_m: int = 16
    hnsw_ef_construction: int = 64
    hnsw_ef_search: int | None = None
    freshness: FreshnessConfig | None = field(default_factory=FreshnessConfig)
    experiments: tuple[Experiment, ...] = ()
    usage_flush_s: float = 0.0

    def __post_init__(self) -> None:
        problems = []
        if self.busy_timeout_ms < 0:
            problems.append(("busy_timeout_ms", "must be >= 0"))
        if not isinstance(self.scrub_wait_s, (int, float)) or not 0 <= self.scrub_wait_s < 86_400:
            problems.append(("scrub_wait_s", "must be seconds in [0, 86400)"))
        if not isinstance(self.exact_search_max, int) or self.exact_search_max < 0:
            problems.append(("exact_search_max", "must be an int >= 0"))
        if not isinstance(self.pool_size, int) or self.pool_size < 1:
            problems.append(("pool_size", "must be an int >= 1"))
        if not isinstance(self.async_workers, int) or not 1 <= self.async_workers <= 256:
            problems.append(("async_workers", "must be an int in [1, 256]"))
        if isinstance(self.recall_session_mix, bool) or not isinstance(self.recall_session_mix, (int, float)) \
                or not 0.0 <= self.recall_session_mix < 1.0:
            problems.append(("recall_session_mix", "must be a number in [0, 1)"))
        if not isinstance(self.dynamic_roles, bool):
            problems.append(("dynamic_roles", "must be a bool"))
        if self.cold_vectors not in COLD_FORMATS:
            problems.append(("cold_vectors", f"must be one of {', '.join(COLD_FORMATS)}"))
        if isinstance(self.usage_flush_s, bool) or not isinstance(self.usage_flush_s, (int, float)) \
                or not 0.0 <= self.usage_flush_s <= 3600.0:
            problems.append(("usage_flush_s", "must be seconds in [0, 3600] (0 = write through)"))
        if not isinstance(self.promote_on_access, bool):
            problems.append(("promote_on_access", "must be a bool"))
        if isinstance(self.hnsw_m, bool) or not isinstance(self.hnsw_m, int) or not 2 <= self.hnsw_m <= 100:
            problems.append(("hnsw_m", "must be an int in [2, 100]"))
        efc = self.hnsw_ef_construction
        if isinstance(efc, bool) or not isinstance(efc, int) or not 4 <= efc <= 1000:
            problems.append(("hnsw_ef_construction", "must be an int in [4, 1000]"))
        elif isinstance(self.hnsw_m, int) and efc < 2 * self.hnsw_m:
            problems.append(("hnsw_ef_construction", f"must be at least 2 × hnsw_m = {2 * self.hnsw_m} (pgvector)"))
        efs = self.hnsw_ef_search
        if efs is not None and (isinstance(efs, bool) or not isinstance(efs, int) or not 1 <= efs <= 1000):
            problems.append(("hnsw_ef_search", "must be an int in [1, 1000] or None (automatic)"))
        if self.candidate_pool < 1:
            problems.append(("candidate_pool", "must be >= 1"))
        if not isinstance(self.annotate, AssemblerConfig):
            problems.append(("annotate", "must be an AssemblerConfig"))
        if not isinstance(self.policy, RetentionPolicy):
            problems.append(("policy", "must be a RetentionPolicy"))
        if not isinstance(self.experiments, (list, tuple)):
            problems.append(("experiments", "must be a sequence of Experiment(...)"))
        else:
            problems += check_experiments(self.experiments)
            object.__setattr__(self, "experiments", tuple(self.experiments))
        if self.freshness is not None and not isinstance(self.freshness, FreshnessConfig):
            problems.append(("freshness", "must be a FreshnessConfig or None (only declared half-lives decay)"))
        if problems:
            raise ValidationError.from_problems("StoreConfig", problems)
