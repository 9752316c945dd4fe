"""The default encoder: where it lives, and what its card declares, known without loading it.

Loading the ONNX encoder (onnxruntime, the tokenizer, a hash of the weights) costs ~0.4 s. A store
that is only ever given precomputed vectors needs two facts about its encoder — the id stored beside
each vector and the width every vector must have — and both are in the exported directory's card
(``encoder.json``), a few hundred bytes of JSON. :func:`declared_default` reads them; the encoder
itself loads the first time a text must be embedded, and is checked against what was declared.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

__all__ = ["CARD_FILE", "DEFAULT_ENCODER_ID", "ENV_DIR", "declared_default", "default_encoder_dir"]

#: Id of the default encoder. The ONNX and the sentence-transformers paths share it on purpose: their
#: vectors agree to ≤ 1e-5, so switching between them must not force a ``memir reembed``.
DEFAULT_ENCODER_ID = "sentence-transformers/all-MiniLM-L6-v2"

CARD_FILE = "encoder.json"
"""The card of an exported encoder directory (``runtime.encoders.onnx.EncoderCard``)."""

ENV_DIR = "MEMIR_ENCODER_DIR"
"""The environment variable that points the runtime at another encoder directory."""


def default_encoder_dir() -> Path:
    """Where the default encoder lives.

    ``$MEMIR_ENCODER_DIR`` if set (read at call time), else ``~/.cache/memir/encoders/all-MiniLM-L6-v2``.
    """
    env = os.environ.get(ENV_DIR)
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "memir" / "encoders" / "all-MiniLM-L6-v2"


def declared_default() -> tuple[str, int] | None:
    """``(encoder_id, dim)`` of the default encoder as its card declares them, or ``None`` when the
    card is missing or not what an export writes (loading the encoder then says what is wrong)."""
    try:
        card = json.loads((default_encoder_dir() / CARD_FILE).read_bytes())
    except (OSError, ValueError):
        return None
    if not isinstance(card, dict):
        return None
    encoder_id, dim = card.get("encoder_id"), card.get("dim")
    if not isinstance(encoder_id, str) or not encoder_id or type(dim) is not int or dim <= 0:
        return None
    return encoder_id, dim
