"""A content-addressed embedding cache: every text is encoded once, across rounds, runs and commands.

Encoding dominates every replay (the ONNX MiniLM encodes ~30–50 long turns a second on two cores),
so vectors are kept on disk keyed by the SHA-256 of the text — never the text itself, so a cache of
a CC BY-NC corpus holds no copy of it — one directory per encoder id, in append-only shards that
are written atomically as encoding progresses (an interrupted run resumes where it stopped).

Example:
    >>> emb = CachedEmbedder(load_default_embedder(), "data/cache/embeddings")   # doctest: +SKIP
    >>> emb.warm(texts, progress=True)       # encodes only what is missing, saving as it goes
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from runtime.encoders import Embedder

__all__ = ["CachedEmbedder", "cached_embedder", "text_key"]

_KEY_BYTES = 16


def text_key(text: str) -> bytes:
    """The cache key of a text: the first 16 bytes of its SHA-256."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()[:_KEY_BYTES]


class CachedEmbedder:
    """Wraps an :class:`Embedder` (same ``encoder_id``/``dim``) and memoises ``encode`` by content.

    Args:
        inner: the real encoder.
        root: cache directory (vectors go to ``root/<encoder id>/shard_*.npz``); ``None`` = in memory.
        save_every: texts encoded between two shard writes.
    """

    def __init__(self, inner: Embedder, root: str | Path | None = None, *, save_every: int = 2048) -> None:
        self.inner = inner
        self.dir = Path(root) / re.sub(r"[^A-Za-z0-9_.-]", "_", inner.encoder_id) if root is not None else None
        self.save_every = save_every
        self._index: dict[bytes, int] = {}
        self._keys: list[bytes] = []
        self._rows: list[np.ndarray] = []
        self._pending: list[int] = []
        if self.dir is not None and self.dir.is_dir():
            for shard in sorted(self.dir.glob("shard_*.npz")):
                z = np.load(shard, allow_pickle=False)
                keys, vecs = z["keys"], z["vecs"]
                if vecs.shape[1:] != (inner.dim,):
                    continue  # another dimension under the same id: ignore, do not trust
                for k, v in zip(keys, vecs):
                    kb = k.tobytes()
                    if kb not in self._index:
                        self._index[kb] = len(self._rows)
                        self._keys.append(kb)
                        self._rows.append(v)

    @property
    def encoder_id(self) -> str:
        return self.inner.encoder_id

    @property
    def dim(self) -> int:
        return self.inner.dim

    def __len__(self) -> int:
        return len(self._rows)

    def __contains__(self, text: str) -> bool:
        return text_key(text) in self._index

    def encode(self, texts: Sequence[str], *, batch_size: int = 64) -> np.ndarray:
        """Vectors of ``texts`` (float32, row-aligned), encoding only those not cached yet."""
        keys = [text_key(t) for t in texts]
        todo: dict[bytes, str] = {}
        for k, t in zip(keys, texts):
            if k not in self._index and k not in todo:
                todo[k] = t
        if todo:
            vecs = np.asarray(self.inner.encode(list(todo.values()), batch_size=batch_size), dtype=np.float32)
            for k, v in zip(todo, vecs):
                self._index[k] = len(self._rows)
                self._pending.append(len(self._rows))
                self._keys.append(k)
                self._rows.append(v)
            if len(self._pending) >= self.save_every:
                self.save()
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._rows[self._index[k]] for k in keys])

    def warm(self, texts: Sequence[str], *, batch_size: int = 64, chunk: int = 512, progress: bool = False) -> int:
        """Encode every text not cached yet, in chunks, saving shards as it goes; returns how many."""
        todo = list({text_key(t): t for t in texts if text_key(t) not in self._index}.values())
        bar = None
        if progress and todo:
            from tqdm import tqdm
            bar = tqdm(total=len(todo), desc=f"encode ({self.encoder_id})", unit="text")
        for i in range(0, len(todo), chunk):
            part = todo[i:i + chunk]
            self.encode(part, batch_size=batch_size)
            if bar is not None:
                bar.update(len(part))
        if bar is not None:
            bar.close()
        self.save()
        return len(todo)

    def save(self) -> None:
        """Write the vectors encoded since the last save as one new shard (atomically)."""
        if self.dir is None or not self._pending:
            return
        self.dir.mkdir(parents=True, exist_ok=True)
        idx = self._pending
        keys = np.stack([np.frombuffer(self._keys[i], dtype=np.uint8) for i in idx])
        vecs = np.stack([self._rows[i] for i in idx]).astype(np.float32)
        n = len(list(self.dir.glob("shard_*.npz")))
        final = self.dir / f"shard_{n:05d}_{os.getpid()}.npz"
        tmp = final.with_name(final.name + ".tmp.npz")
        np.savez(tmp, keys=keys, vecs=vecs)
        tmp.replace(final)
        self._pending = []


def cached_embedder(kind: str, root: str | Path | None) -> CachedEmbedder:
    """``"onnx"`` (all-MiniLM-L6-v2, production) or ``"hash"`` (a fast test double), cached under ``root``."""
    inner: Embedder
    if kind == "hash":
        from runtime.encoders import HashEmbedder
        inner = HashEmbedder(dim=64)
    else:
        from runtime.encoders import load_default_embedder
        inner = load_default_embedder()
    return CachedEmbedder(inner, root)
