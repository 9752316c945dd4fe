"""The production sentence encoder: all-MiniLM-L6-v2 as ONNX, run with onnxruntime + ``tokenizers``.

No torch at run time (DESIGN.md): the encoder is built once from the all-MiniLM-L6-v2 weights —
``memir encoder install`` writes the ONNX graph with ``onnx`` + numpy (:mod:`runtime.encoders.install`,
:mod:`runtime.encoders.build`; ``pip install 'memir-runtime[encoder]'``; ``python -m train.encoder``
runs the same build and checks it against sentence-transformers) — into a directory holding exactly
three files:

- ``model.onnx`` — the BERT body, fp32, inputs ``input_ids``/``attention_mask``/``token_type_ids``
  with dynamic batch and sequence axes, output ``last_hidden_state``;
- ``tokenizer.json`` — the model's own fast tokenizer, copied unchanged;
- ``encoder.json`` — the :class:`EncoderCard` (id, dimension, max sequence length, pooling).

:class:`OnnxEncoder` then reproduces sentence-transformers' ``encode(..., normalize_embeddings=True)``:
truncate to ``max_seq_length`` tokens, mean-pool the token vectors over the attention mask, L2-normalise.
The export checks parity against sentence-transformers (max abs diff ≤ 1e-5, typically ~3e-7).

Example:
    >>> from runtime.encoders import load_default_embedder
    >>> enc = load_default_embedder()            # raises EncoderUnavailableError with the fix
    >>> vecs = enc.encode(["book a flight to Oslo", "reserve a plane ticket to Oslo"])
    >>> vecs.shape, vecs.dtype
    ((2, 384), dtype('float32'))
"""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import onnxruntime as ort
import pydantic
from tokenizers import Encoding, Tokenizer

from ..distribution import pip_extra
from ..errors import EncoderIntegrityError, EncoderUnavailableError, ValidationError, check_text
from ..integrity import file_sha256 as _sha256
from .default import CARD_FILE, DEFAULT_ENCODER_ID, ENV_DIR, default_encoder_dir
from .embedder import l2_normalize

__all__ = [
    "DEFAULT_ENCODER_ID",
    "ENCODER_FILES",
    "EncoderCard",
    "OnnxEncoder",
    "OnnxEncoderConfig",
    "default_encoder_dir",
    "encoder_remedy",
    "load_default_embedder",
]

MODEL_FILE = "model.onnx"
TOKENIZER_FILE = "tokenizer.json"
#: The exact file set of an exported encoder directory.
ENCODER_FILES = (MODEL_FILE, TOKENIZER_FILE, CARD_FILE)


class EncoderCard(pydantic.BaseModel):
    """``encoder.json``: what the runtime needs to know about an exported encoder, and how it was made."""

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)

    format_version: Literal[1] = 1
    """Version of this card's layout."""
    encoder_id: str = pydantic.Field(min_length=1)
    """Stable id stored beside every vector this encoder makes."""
    dim: int = pydantic.Field(gt=0)
    """Output vector dimension (384 for MiniLM-L6)."""
    max_seq_length: int = pydantic.Field(gt=2)
    """Tokens per text, [CLS]/[SEP] included; longer texts are truncated (sentence-transformers: 256)."""
    max_position_embeddings: int = pydantic.Field(gt=2)
    """Hard ceiling of the model's position table; ``max_seq_length`` overrides may not exceed it."""
    pooling: Literal["mean"] = "mean"
    """How token vectors become one vector: mean over the attention mask (then L2-normalised)."""
    source: str
    """Where the weights came from (package and version, or a path)."""
    exported_with: dict[str, str] = pydantic.Field(default_factory=dict)
    """Library versions used for the export (torch, transformers, sentence-transformers, onnx)."""
    opset: int
    """ONNX opset of ``model.onnx``."""
    onnx_sha256: str
    """SHA-256 of ``model.onnx`` (deterministic export: the same weights give the same hash)."""
    parity_max_abs_diff: float | None = None
    """Max |onnx − sentence-transformers| over the export's check sentences, or ``None`` if unchecked."""


@dataclass(frozen=True)
class OnnxEncoderConfig:
    """Run-time knobs of :class:`OnnxEncoder` (the model itself is fixed by its directory)."""

    intra_op_threads: int | None = None
    """onnxruntime threads per call (``None``: onnxruntime's default, one per physical core)."""
    max_seq_length: int | None = None
    """Override the card's truncation length (tokens); ``None`` keeps the card's (256 for MiniLM)."""
    spin: bool = False
    """Let onnxruntime's threads spin, waiting for the next call, after each one (onnxruntime's own
    default). Off here: an agent encodes one short text at a time between other work, and threads
    spinning after each call take the CPUs that work (and the machine's other processes) need.
    Measured on 2 CPUs with the machine busy, 300 single-sentence calls with Python work between
    them: spinning 10.4–10.9 s wall and 8.4–9.1 s of CPU, not spinning 7.3–7.9 s and 4.1–4.6 s.
    Turn it on for a process that does nothing but encode, back to back."""

    def __post_init__(self) -> None:
        problems = []
        if self.intra_op_threads is not None and self.intra_op_threads < 1:
            problems.append(("intra_op_threads", f"must be >= 1 or None, got {self.intra_op_threads}"))
        if self.max_seq_length is not None and self.max_seq_length < 3:
            problems.append(("max_seq_length", f"must be >= 3 or None, got {self.max_seq_length}"))
        if problems:
            msg = "; ".join(f"OnnxEncoderConfig.{f}: {m}" for f, m in problems)
            raise ValidationError(msg, field=f"OnnxEncoderConfig.{problems[0][0]}", problems=problems)


def encoder_remedy(model_dir: Path | None = None) -> str:
    """The sentence that tells a user how to get an encoder into ``model_dir`` (used in error messages)."""
    target = Path(model_dir) if model_dir is not None else default_encoder_dir()
    out = "" if target == default_encoder_dir() else f" --out {target}"
    text = f"Build it once with `memir encoder install{out}`, or set {ENV_DIR} to an encoder directory."
    # find_spec looks on disk without importing anything.
    if importlib.util.find_spec("onnx") is None:
        text += f" The build needs onnx: {pip_extra('encoder')} (no torch)."
    return text


def _unavailable(model_dir: Path, reason: str) -> EncoderUnavailableError:
    return EncoderUnavailableError(f"No usable ONNX sentence encoder at {model_dir}: {reason}. "
                                   f"{encoder_remedy(model_dir)}")


def _load_card(model_dir: Path) -> EncoderCard:
    path = model_dir / CARD_FILE
    try:
        return EncoderCard.model_validate_json(path.read_bytes())
    except pydantic.ValidationError as e:
        fields = "; ".join(f"{'.'.join(map(str, err['loc'])) or '<root>'}: {err['msg']}"
                           for err in e.errors())
        raise _unavailable(model_dir, f"{CARD_FILE} is invalid ({fields})") from e
    except OSError as e:
        raise _unavailable(model_dir, f"cannot read {CARD_FILE} ({e})") from e


class OnnxEncoder:
    """all-MiniLM-L6-v2 (or any mean-pooled BERT-like encoder exported the same way) without torch.

    Thread-safe: ``encode`` holds no mutable state (onnxruntime sessions may be run concurrently).

    Args:
        model_dir: a directory written by :func:`runtime.encoders.build.build_encoder_dir`.
        config: run-time knobs (threads, truncation override).

    Raises:
        EncoderUnavailableError: the directory, a file in it, or the model is missing or unusable;
            the message says how to export one.

    Example:
        >>> enc = OnnxEncoder(default_encoder_dir(), config=OnnxEncoderConfig(intra_op_threads=1))
        >>> enc.encode(["hello"]).shape
        (1, 384)
    """

    def __init__(self, model_dir: str | Path, *, config: OnnxEncoderConfig | None = None) -> None:
        self._dir = Path(model_dir).expanduser()
        self._cfg = config or OnnxEncoderConfig()
        if not self._dir.is_dir():
            raise _unavailable(self._dir, "the directory does not exist")
        missing = [f for f in ENCODER_FILES if not (self._dir / f).is_file()]
        if missing:
            raise _unavailable(self._dir, f"missing {', '.join(missing)} (an interrupted or foreign export?)")
        self._card = _load_card(self._dir)

        max_len = self._cfg.max_seq_length or self._card.max_seq_length
        if max_len > self._card.max_position_embeddings:
            raise ValidationError(
                f"OnnxEncoderConfig.max_seq_length={max_len} exceeds the model's "
                f"{self._card.max_position_embeddings} positions; use at most that",
                field="OnnxEncoderConfig.max_seq_length")
        self._max_len = max_len

        try:
            tok = Tokenizer.from_file(str(self._dir / TOKENIZER_FILE))
        except Exception as e:  # tokenizers raises a bare Exception on a malformed file
            raise _unavailable(self._dir, f"{TOKENIZER_FILE} cannot be loaded ({e})") from e
        # The shipped tokenizer.json pads every text to a fixed 128 tokens and truncates at 128, which
        # would both waste compute and disagree with sentence-transformers (which truncates at 256).
        # We truncate at max_seq_length and pad ourselves, per batch, to that batch's longest text.
        pad = tok.padding or {}
        self._pad_id = int(pad.get("pad_id", 0))
        tok.no_padding()
        tok.enable_truncation(max_length=max_len)
        self._tok = tok

        # The card's hash is checked on every load. Hashing 90 MB costs ~0.1 s; it runs on a second
        # thread (hashlib releases the GIL) while onnxruntime builds its session from the same file.
        digest: list[str] = []
        hasher = threading.Thread(target=lambda: digest.append(_sha256(self._dir / MODEL_FILE)), daemon=True)
        hasher.start()
        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        opts.inter_op_num_threads = 1  # one graph, no parallel branches worth a second pool
        if self._cfg.intra_op_threads is not None:
            opts.intra_op_num_threads = self._cfg.intra_op_threads
        opts.add_session_config_entry("session.intra_op.allow_spinning", "1" if self._cfg.spin else "0")
        try:
            self._sess = ort.InferenceSession(str(self._dir / MODEL_FILE), sess_options=opts,
                                              providers=["CPUExecutionProvider"])
        except Exception as e:  # onnxruntime raises its own Fail/InvalidGraph types; all mean "unusable"
            hasher.join()
            raise _unavailable(self._dir, f"{MODEL_FILE} cannot be loaded by onnxruntime ({e})") from e
        hasher.join()
        if digest != [self._card.onnx_sha256]:
            raise EncoderIntegrityError(
                f"{self._dir / MODEL_FILE} does not match the sha256 in {CARD_FILE} "
                f"({(digest or ['unreadable'])[0][:16]}… vs {self._card.onnx_sha256[:16]}…): it was changed after it "
                f"was built. Rebuild it with `memir encoder install{'' if self._dir == default_encoder_dir() else ' --out ' + str(self._dir)}`")
        self._inputs = [i.name for i in self._sess.get_inputs()]
        unknown = set(self._inputs) - {"input_ids", "attention_mask", "token_type_ids"}
        if unknown or "input_ids" not in self._inputs:
            raise _unavailable(self._dir, f"{MODEL_FILE} has unexpected inputs {self._inputs}")
        self._output = self._sess.get_outputs()[0].name
        out_dim = self._sess.get_outputs()[0].shape[-1]
        if isinstance(out_dim, int) and out_dim != self._card.dim:
            raise _unavailable(self._dir, f"{MODEL_FILE} outputs dim {out_dim} but {CARD_FILE} says "
                                          f"{self._card.dim}")

    @property
    def encoder_id(self) -> str:
        """The card's id; a non-default truncation length is part of it (it changes long texts' vectors)."""
        if self._max_len != self._card.max_seq_length:
            return f"{self._card.encoder_id}@seq{self._max_len}"
        return self._card.encoder_id

    @property
    def dim(self) -> int:
        """Output dimension (from the card, checked against the model at load)."""
        return self._card.dim

    @property
    def card(self) -> EncoderCard:
        """The loaded ``encoder.json``."""
        return self._card

    @property
    def max_seq_length(self) -> int:
        """Truncation length in tokens, [CLS]/[SEP] included."""
        return self._max_len

    def __repr__(self) -> str:
        return f"OnnxEncoder({str(self._dir)!r}, encoder_id={self.encoder_id!r}, dim={self.dim})"

    def encode(self, texts: Sequence[str], *, batch_size: int = 64) -> np.ndarray:
        """Embed ``texts`` as unit-norm float32 rows, in input order.

        Texts are grouped by token length before batching (as sentence-transformers does), so a
        batch carries little padding; results do not depend on the grouping.

        Args:
            texts: the strings to embed (a bare ``str`` is rejected: wrap it in a list).
            batch_size: texts per onnxruntime call (≥ 1).

        Returns:
            An ``(len(texts), dim)`` float32 array.

        Raises:
            ValidationError: ``texts`` is a bare string or holds a non-string; ``batch_size`` < 1.
        """
        if isinstance(texts, str):
            raise ValidationError("texts must be a sequence of strings, not one string: pass [text]",
                                  field="texts")
        bad = next((i for i, t in enumerate(texts) if not isinstance(t, str)), None)
        if bad is not None:
            raise ValidationError(f"texts[{bad}] is {type(texts[bad]).__name__}, expected str",
                                  field=f"texts[{bad}]")
        for i, t in enumerate(texts):
            check_text(t, f"texts[{i}]")
        if batch_size < 1:
            raise ValidationError(f"batch_size must be >= 1, got {batch_size}", field="batch_size")
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out

        encodings = self._tok.encode_batch(list(texts))
        lengths = np.fromiter((len(e.ids) for e in encodings), dtype=np.int64, count=len(encodings))
        order = np.argsort(-lengths, kind="stable")
        for start in range(0, len(order), batch_size):
            idx = order[start:start + batch_size]
            out[idx] = self._embed_batch([encodings[i] for i in idx], int(lengths[idx].max()))
        return out

    def _embed_batch(self, encodings: list[Encoding], seq_len: int) -> np.ndarray:
        n = len(encodings)
        ids = np.full((n, seq_len), self._pad_id, dtype=np.int64)
        mask = np.zeros((n, seq_len), dtype=np.int64)
        types = np.zeros((n, seq_len), dtype=np.int64)
        for row, enc in enumerate(encodings):
            k = len(enc.ids)
            ids[row, :k] = enc.ids
            mask[row, :k] = 1
            types[row, :k] = enc.type_ids
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        tokens = self._sess.run([self._output], {k: feeds[k] for k in self._inputs})[0]
        # Mean over real tokens only — exactly sentence-transformers' Pooling(mean): pad positions have
        # mask 0, and the count is clamped so an all-pad row cannot divide by zero.
        m = mask[:, :, None].astype(np.float32)
        summed = (tokens * m).sum(axis=1)
        pooled = summed / np.maximum(m.sum(axis=1), 1e-9)
        return l2_normalize(pooled)


def load_default_embedder(*, config: OnnxEncoderConfig | None = None) -> OnnxEncoder:
    """Load the default encoder from :func:`default_encoder_dir`.

    Raises:
        EncoderUnavailableError: no exported encoder there; the message gives the export command
            (``memir encoder install``).

    Example:
        >>> enc = load_default_embedder()
        >>> enc.encoder_id
        'sentence-transformers/all-MiniLM-L6-v2'
    """
    return OnnxEncoder(default_encoder_dir(), config=config)
