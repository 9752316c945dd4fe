"""An embedding cache for the offline loop: every text is encoded once across all rounds.

The simulator replays the same episodes every round (only the policy changes), and encoding is
the most expensive part of a replay; the cache is keyed by text and persisted beside the data.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from runtime.encoders import Embedder

__all__ = ["CachedEmbedder"]


class CachedEmbedder:
    """Wraps an :class:`Embedder`; same ``encoder_id``/``dim``; memoises ``encode`` per text.

    Args:
        inner: the real encoder.
        path: optional ``.npz`` file to load from / :meth:`save` to.
    """

    def __init__(self, inner: Embedder, path: str | Path | None = None) -> None:
        self.inner = inner
        self.path = Path(path) if path else None
        self._cache: dict[str, np.ndarray] = {}
        self._dirty = False
        if self.path and self.path.exists():
            z = np.load(self.path, allow_pickle=False)
            if str(z["encoder_id"]) == inner.encoder_id:
                self._cache = dict(zip(z["texts"].tolist(), z["vecs"]))

    @property
    def encoder_id(self) -> str:
        return self.inner.encoder_id

    @property
    def dim(self) -> int:
        return self.inner.dim

    def __len__(self) -> int:
        return len(self._cache)

    def encode(self, texts: Sequence[str], *, batch_size: int = 64) -> np.ndarray:
        missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if missing:
            vecs = np.asarray(self.inner.encode(missing, batch_size=batch_size), dtype=np.float32)
            self._cache.update(zip(missing, vecs))
            self._dirty = True
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._cache[t] for t in texts])

    def warm(self, texts: Sequence[str], batch_size: int = 64) -> None:
        """Encode many texts in large batches up front (much faster than one at a time)."""
        todo = list(dict.fromkeys(t for t in texts if t not in self._cache))
        for i in range(0, len(todo), 1024):
            self.encode(todo[i:i + 1024], batch_size=batch_size)

    def save(self) -> None:
        if not (self.path and self._dirty):
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        texts = list(self._cache)
        tmp = self.path.with_suffix(".tmp.npz")
        np.savez(tmp, texts=np.array(texts), vecs=np.stack([self._cache[t] for t in texts]),
                 encoder_id=np.array(self.inner.encoder_id))
        tmp.replace(self.path)
        self._dirty = False
