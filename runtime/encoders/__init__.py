"""Sentence encoders: the :class:`Embedder` protocol, a hashing test double, and the production
ONNX all-MiniLM-L6-v2 encoder (onnxruntime + ``tokenizers``; no torch). ``OnnxEncoder`` and
``load_default_embedder`` are resolved lazily so that importing this package costs no onnxruntime."""

from typing import TYPE_CHECKING, Any

from .embedder import Embedder, HashEmbedder, check_vector, l2_normalize

if TYPE_CHECKING:
    from .onnx import DEFAULT_ENCODER_ID, OnnxEncoder, OnnxEncoderConfig, default_encoder_dir, load_default_embedder

_LAZY = {"OnnxEncoder", "OnnxEncoderConfig", "load_default_embedder", "default_encoder_dir", "DEFAULT_ENCODER_ID"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from . import onnx
        return getattr(onnx, name)
    raise AttributeError(f"module 'runtime.encoders' has no attribute {name!r}")


__all__ = ["DEFAULT_ENCODER_ID", "Embedder", "HashEmbedder", "OnnxEncoder", "OnnxEncoderConfig", "check_vector", "default_encoder_dir",
           "l2_normalize", "load_default_embedder"]
