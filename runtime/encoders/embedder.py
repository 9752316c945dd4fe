"""Sentence encoders behind one small protocol.

The store never cares which encoder made a vector beyond its ``encoder_id`` (kept beside every
vector, so a change of encoder is detected and ``memir reembed`` can fix it — seed 001 pitfall 3).

- :class:`HashEmbedder` — a deterministic, dependency-free test double (hashed word and character
  n-grams). Good enough for tests and for lexical similarity; not a semantic model.
- ``runtime.encoders.OnnxEncoder`` — all-MiniLM-L6-v2 run with onnxruntime + ``tokenizers``: the
  production default, no torch at run time.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ..errors import EncoderUnavailableError, VectorError

__all__ = ["Embedder", "HashEmbedder", "LazyEmbedder", "check_vector", "l2_normalize"]


@runtime_checkable
class Embedder(Protocol):
    """Anything that turns texts into L2-normalised float32 vectors of a fixed dimension."""

    @property
    def encoder_id(self) -> str:
        """Stable id of the encoder (name + revision); stored with every vector."""
        ...

    @property
    def dim(self) -> int:
        """Vector dimension."""
        ...

    def encode(self, texts: Sequence[str], *, batch_size: int = 64) -> np.ndarray:
        """Return an ``(len(texts), dim)`` float32 array of unit-norm rows."""
        ...


class LazyEmbedder:
    """An :class:`Embedder` that is built on first use (loading an encoder costs a second and may
    fail with ``EncoderUnavailableError``; a store that never embeds never pays or fails).

    Args:
        factory: builds the real encoder.
        embedder: an encoder to use right away instead.
        declared: ``(encoder_id, dim)`` the factory's encoder will have, known without building it
            (``None`` when unknown), so that work given precomputed vectors never builds it; the
            encoder built later must match, or ``EncoderUnavailableError`` is raised.
    """

    def __init__(self, factory: Callable[[], Embedder], embedder: Embedder | None = None,
                 declared: Callable[[], tuple[str, int] | None] | None = None) -> None:
        self._factory, self._inner, self._declare = factory, embedder, declared
        self._declared: tuple[str, int] | None = None

    @property
    def inner(self) -> Embedder:
        """The real encoder (built now if needed)."""
        if self._inner is None:
            inner = self._factory()
            if self._declared is not None and (inner.encoder_id, inner.dim) != self._declared:
                raise EncoderUnavailableError(
                    f"the encoder loaded is {inner.encoder_id} ({inner.dim}-d), but this store was told "
                    f"{self._declared[0]} ({self._declared[1]}-d) when it opened: its directory changed while "
                    f"the store was open. Open the store again")
            self._inner = inner
        return self._inner

    def replace(self, embedder: Embedder) -> None:
        """Use another encoder from now on (``MemoryStore.reembed``)."""
        self._inner = embedder

    def _known(self) -> tuple[str, int] | None:
        """What the encoder is declared to be, while it is not built."""
        if self._inner is not None or self._declare is None:
            return None
        if self._declared is None:
            self._declared = self._declare()
            if self._declared is None:
                self._declare = None  # nothing declared: build it
        return self._declared

    @property
    def encoder_id(self) -> str:
        known = self._known()
        return known[0] if known is not None else self.inner.encoder_id

    @property
    def dim(self) -> int:
        known = self._known()
        return known[1] if known is not None else self.inner.dim

    def encode(self, texts: Sequence[str], **kwargs: Any) -> np.ndarray:
        return self.inner.encode(texts, **kwargs)  # as called: a caller's encoder may take no batch_size


def l2_normalize(x: np.ndarray) -> np.ndarray:
    """Row-normalise ``x`` to unit L2 norm (zero rows stay zero), as float32."""
    x = np.asarray(x, dtype=np.float32)
    n = np.linalg.norm(x, axis=-1, keepdims=True)
    return (x / np.maximum(n, 1e-12)).astype(np.float32)


_WORD = re.compile(r"[a-z0-9]+")


class HashEmbedder:
    """Deterministic hashed bag of words + character trigrams (a test double, no model needed).

    Args:
        dim: output dimension.
        seed: salt for the hash, so two instances with different seeds disagree.
    """

    def __init__(self, dim: int = 64, seed: int = 0) -> None:
        if dim < 8:
            raise ValueError("HashEmbedder.dim must be >= 8")
        self._dim = dim
        self._seed = seed

    @property
    def encoder_id(self) -> str:
        return f"hash-{self._dim}-s{self._seed}"

    @property
    def dim(self) -> int:
        return self._dim

    def _bucket(self, token: str) -> tuple[int, float]:
        h = hashlib.blake2b(f"{self._seed}:{token}".encode(), digest_size=8).digest()
        v = int.from_bytes(h, "little")
        return v % self._dim, (1.0 if (v >> 40) & 1 else -1.0)

    def encode(self, texts: Sequence[str], *, batch_size: int = 64) -> np.ndarray:
        out = np.zeros((len(texts), self._dim), dtype=np.float32)
        for i, t in enumerate(texts):
            words = _WORD.findall(t.lower())
            feats = words + [w[j:j + 3] for w in words for j in range(max(1, len(w) - 2))]
            if not feats:  # no letters or digits ("!!!", emoji): hash the raw characters instead
                feats = list(t) or ["<empty>"]
            for tok in feats:
                b, s = self._bucket(tok)
                out[i, b] += s
        return l2_normalize(out)


def check_vector(embedding: object, embedder: Embedder) -> np.ndarray:
    """Validate a caller-supplied vector for ``embedder`` and return it unit-normalised (float32).

    The vector must have the encoder's dimension, be finite *as float32* (``1e38`` overflows) and
    have a direction (non-zero norm).

    Raises:
        VectorError: naming ``embedding`` and what is wrong with it.
    """
    try:
        with np.errstate(over="ignore"):
            v = np.asarray(embedding, dtype=np.float32).reshape(-1)
    except (TypeError, ValueError, OverflowError) as e:
        raise VectorError(f"embedding is not a numeric vector: {e}", field="embedding") from e
    if v.shape[0] != embedder.dim:
        raise VectorError(f"embedding has dimension {v.shape[0]}, the store's encoder {embedder.encoder_id!r} "
                          f"makes {embedder.dim}", field="embedding")
    with np.errstate(over="ignore", invalid="ignore"):
        n = np.sqrt(np.dot(v, v))  # what np.linalg.norm computes for a 1-D real vector, minus its overhead
    if not np.isfinite(n):  # a NaN/inf, a value beyond float32's range, or a norm that overflows
        if not np.isfinite(v).all():
            big = np.isfinite(np.asarray(embedding, dtype=np.float64).reshape(-1)).all()
            raise VectorError("embedding has values beyond float32's range (about 3.4e38)" if big
                              else "embedding contains NaN or inf", field="embedding")
        v64 = v.astype(np.float64)
        return (v64 / np.linalg.norm(v64)).astype(np.float32)
    if n < 1e-12:
        raise VectorError("embedding is all zeros (no direction to compare)", field="embedding")
    return v / n
