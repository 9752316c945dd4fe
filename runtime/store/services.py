"""The store-wide components every scope of a store shares.

A :class:`~runtime.store.scope.Scope` is written against this object, not against the store:
the record builder, the assembler (roles and session detection), the encoder, the default
scorer, the settings it reads, and the registry of live contexts. ``MemoryStore`` makes one and
hands it to every scope it opens, so calls only ever go from the store and the scope *down*.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from ..annotate.assembler import ContextAssembler
from ..encoders.embedder import Embedder, LazyEmbedder
from ..record.builder import RecordBuilder
from .config import StoreConfig
from .live import LiveContext

if TYPE_CHECKING:
    from ..scoring.scorer import Scorer
    from .aio import AsyncRunner

__all__ = ["StoreServices"]


class StoreServices:
    """Builder, assembler, encoder, default scorer and live contexts of one store. Thread-safe.

    Args:
        config: the store's settings.
        embedder: the store's encoder (loaded on first use).
    """

    def __init__(self, config: StoreConfig, embedder: LazyEmbedder) -> None:
        self.config = config
        self.builder = RecordBuilder(config.annotate.record)
        self._embedder = embedder
        self._assembler: ContextAssembler | None = None
        self._scorer: Scorer | None = None
        self._live: dict[tuple[str, str], LiveContext] = {}
        self._aio: AsyncRunner | None = None
        self._lock = threading.Lock()

    @property
    def embedder(self) -> Embedder:
        """The encoder in use: loaded at its first text (``EncoderUnavailableError``, with the remedy, if
        it cannot be); its id and width come from its card until then (:class:`LazyEmbedder`)."""
        return self._embedder

    @property
    def assembler(self) -> ContextAssembler:
        """The assembler ``Scope.write`` annotates through (roles, sessions; built on first use)."""
        with self._lock:
            if self._assembler is None:
                enrich = self.config.annotate.enrich
                needs = bool(self.config.annotate.roles.descriptions) or (enrich.tone and enrich.tone_fn is None)
                self._assembler = ContextAssembler(self.config.annotate, embedder=self.embedder if needs else None,
                                                   builder=self.builder)
            return self._assembler

    @property
    def candidate_pool(self) -> int:
        """Raw top-K taken from vector search before re-ranking (``StoreConfig.candidate_pool``)."""
        return self.config.candidate_pool

    @property
    def log_recalls(self) -> bool:
        """Whether explained recalls are logged (``StoreConfig.log_recalls``)."""
        return self.config.log_recalls

    def default_scorer(self) -> Scorer:
        """The shipped utility model, loaded once per store."""
        with self._lock:
            if self._scorer is None:
                from ..scoring.utility import UtilityScorer
                self._scorer = UtilityScorer()
            return self._scorer

    @property
    def aio(self) -> AsyncRunner:
        """The thread pool and encode batcher behind the scopes' async methods (made on first use)."""
        with self._lock:
            if self._aio is None:
                from .aio import AsyncRunner
                self._aio = AsyncRunner(lambda: self.embedder, self.builder, self.config.async_workers)
            return self._aio

    def close(self) -> None:
        """Stop the async thread pool (calls already running finish first). Idempotent."""
        with self._lock:
            aio, self._aio = self._aio, None
        if aio is not None:
            aio.close()

    def live(self, user_id: str, agent_id: str) -> LiveContext:
        """The in-process live context of a scope (shared by every ``Scope`` object of it)."""
        key = (user_id, agent_id)
        with self._lock:
            ctx = self._live.get(key)
            if ctx is None:
                ctx = self._live[key] = LiveContext()
            return ctx

    def forget_user(self, user_id: str) -> None:
        """Drop every in-memory trace of ``user_id``: live contexts and tracked sessions."""
        with self._lock:
            for key in [k for k in self._live if k[0] == user_id]:
                del self._live[key]
            assembler = self._assembler
        if assembler is not None:
            assembler.forget_user(user_id)
