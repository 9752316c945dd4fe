"""Dynamic role weights (seed 000 §5.2.3): the live context -> a distribution over sub-roles.

:class:`RoleWeigher` runs a tiny exported model (multinomial logistic regression over sentence
embeddings, fit by ``python -m train.fit.role_weights``) with onnxruntime — no torch, no LLM. Its input is the
*context vector* (:func:`context_vector`): the unit mean of the unit query vector and the scope's
recent-context vector (unit mean of its last ``policy.recent_window`` memories); with no recent
memories it is the query alone. Its output is a softmax over the sub-role labels listed in the
model's card.

A recall with dynamic roles on (``StoreConfig(dynamic_roles=True)`` or
``scope.recall(..., dynamic_roles=True)``) turns the weights into the role-match factor
(:mod:`runtime.store.ranking`): a memory of sub-role ``r`` gets
``role_match = max(static, 1 + full_role_bonus · w[r] / max(w))`` — never above the static maximum,
monotone in ``w[r]``; a sub-role the model does not know gets the static factor only.

Files: ``checkpoints/role_weights.onnx`` and its card ``checkpoints/role_weights.json`` (labels,
encoder id and width, the ONNX file's sha256 — checked on load). Location: the ``model`` argument,
else ``$MEMIR_ROLE_MODEL``, else the model shipped inside the package, else the repository's
``checkpoints/``.

Example:
    >>> from runtime.encoders import load_default_embedder
    >>> enc, rw = load_default_embedder(), RoleWeigher()                       # doctest: +SKIP
    >>> q = enc.encode(["the app crashes with a timeout error after the update"])[0]
    >>> w = rw.weights(context_vector(q, None))                                # doctest: +SKIP
    >>> max(w, key=w.get)                                                      # doctest: +SKIP
    'technical'
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..encoders.embedder import l2_normalize
from ..errors import DataIntegrityError, EncoderMismatchError, ModelNotFoundError, SchemaMismatchError, VectorError
from ..integrity import file_sha256

__all__ = ["ROLE_MODEL_ENV", "ROLE_MODEL_FILE", "ROLE_CARD_FILE", "ROLE_MODEL_KIND", "ROLE_INPUT", "ROLE_OUTPUT",
           "RoleCard", "RoleWeigher", "card_path_for", "context_vector", "default_role_model_path", "default_role_weigher"]

ROLE_MODEL_ENV = "MEMIR_ROLE_MODEL"
"""Environment variable naming the role-weight ONNX file (its card sits next to it)."""
ROLE_MODEL_FILE = "role_weights.onnx"
ROLE_CARD_FILE = "role_weights.json"
ROLE_MODEL_KIND = "memir-role-weights"
ROLE_INPUT = "context"
ROLE_OUTPUT = "weights"

_HERE = Path(__file__).resolve()
_FIX = "re-run `python -m train.fit.role_weights --out checkpoints/role_weights.onnx`, or reinstall the package"


def default_role_model_path() -> Path:
    """``$MEMIR_ROLE_MODEL`` if set; else the model shipped inside the installed package
    (``runtime/checkpoints/``); else the repository's ``checkpoints/role_weights.onnx``."""
    env = os.environ.get(ROLE_MODEL_ENV)
    if env:
        return Path(env).expanduser()
    shipped = _HERE.parents[1] / "checkpoints" / ROLE_MODEL_FILE
    if shipped.is_file():
        return shipped
    return _HERE.parents[2] / "checkpoints" / ROLE_MODEL_FILE


def card_path_for(model: Path) -> Path:
    """The card of a model file: same directory, ``.json`` instead of ``.onnx``."""
    return model.with_suffix(".json")


@dataclass(frozen=True)
class RoleCard:
    """What a role-weight model is: its labels (output order), encoder, width and file checksum.

    Attributes:
        labels: the sub-role labels, in the order of the model's output columns.
        encoder_id: the sentence encoder whose vectors the model was fit on.
        embedding_dim: the width of those vectors (the model's input width).
        sha256: hex sha256 of the ONNX file.
        training: the training summary (data, sizes, held-out accuracy...), informational.
    """

    labels: tuple[str, ...]
    encoder_id: str
    embedding_dim: int
    sha256: str
    training: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def read(cls, path: Path) -> RoleCard:
        try:
            d = json.loads(path.read_text(encoding="utf-8"))
            card = cls(tuple(str(x) for x in d["labels"]), str(d["encoder_id"]), int(d["embedding_dim"]),
                       str(d["sha256"]), dict(d.get("training", {})))
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise SchemaMismatchError(f"{path} is not a role-weight model card ({e}): {_FIX}") from e
        if not card.labels or len(set(card.labels)) != len(card.labels) or card.embedding_dim < 1:
            raise SchemaMismatchError(f"{path}: labels must be distinct and non-empty, width >= 1: {_FIX}")
        return card


def context_vector(query: np.ndarray, recent: np.ndarray | None) -> np.ndarray:
    """The live context the role model reads: ``unit(unit(query) + unit(recent))``, or
    ``unit(query)`` when the scope has no recent-context vector yet."""
    q = l2_normalize(np.asarray(query, dtype=np.float32).reshape(-1))
    if recent is None:
        return q
    return l2_normalize(q + l2_normalize(np.asarray(recent, dtype=np.float32).reshape(-1)))


class RoleWeigher:
    """The role-weight model: a context vector -> a softmax over the card's sub-role labels.

    Args:
        model: ONNX file; default :func:`default_role_model_path`. Its card is the ``.json`` next to it.
        encoder_id: if given, the model must have been fit on vectors from this encoder.

    Raises:
        ModelNotFoundError: no model or no card at the path.
        DataIntegrityError: the ONNX file's sha256 differs from the card's (tampered or swapped).
        SchemaMismatchError: not a role-weight model, or the model and its card disagree.
        EncoderMismatchError: ``encoder_id`` differs from the model's.
    """

    def __init__(self, model: str | os.PathLike[str] | None = None, *, encoder_id: str | None = None) -> None:
        path = Path(model) if model is not None else default_role_model_path()
        cpath = card_path_for(path)
        for p in (path, cpath):
            if not p.is_file():
                raise ModelNotFoundError(f"no role-weight model file at {p}: {_FIX}")
        card = RoleCard.read(cpath)
        digest = file_sha256(path)
        if digest != card.sha256:
            raise DataIntegrityError(f"{path} has sha256 {digest[:16]}…, its card {cpath.name} says "
                                     f"{card.sha256[:16]}…: the file was modified or swapped; {_FIX}")
        import onnxruntime as ort  # lazy: recalls without dynamic roles never load it

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        try:
            sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
        except Exception as e:  # onnxruntime's load errors share no base class narrower than this
            raise SchemaMismatchError(f"{path} cannot be loaded as an ONNX model ({e}): {_FIX}") from e
        md = dict(sess.get_modelmeta().custom_metadata_map)
        if md.get("memir.model") != ROLE_MODEL_KIND or md.get("memir.labels") != json.dumps(list(card.labels)):
            raise SchemaMismatchError(f"{path} is not the role-weight model its card describes: {_FIX}")
        ins, outs = sess.get_inputs(), sess.get_outputs()
        if (len(ins) != 1 or ins[0].name != ROLE_INPUT or ins[0].shape[-1] != card.embedding_dim
                or len(outs) != 1 or outs[0].name != ROLE_OUTPUT or outs[0].shape[-1] != len(card.labels)):
            raise SchemaMismatchError(f"{path} takes {[(i.name, i.shape) for i in ins]}, expected "
                                      f"{ROLE_INPUT!r} of width {card.embedding_dim}: {_FIX}")
        _check_encoder(path, card.encoder_id, encoder_id)
        self._sess, self.path, self.card = sess, path, card

    @property
    def labels(self) -> tuple[str, ...]:
        """The sub-role labels, in output order."""
        return self.card.labels

    @property
    def encoder_id(self) -> str:
        """The encoder the model was fit on."""
        return self.card.encoder_id

    def predict(self, contexts: np.ndarray) -> np.ndarray:
        """Weights ``(n, len(labels))`` (float64, rows sum to 1) for ``(n, dim)`` context vectors.

        Raises:
            EncoderMismatchError: the vectors have another width than the model was fit on.
        """
        X = np.ascontiguousarray(contexts, dtype=np.float32)
        if X.ndim != 2:
            raise VectorError(f"contexts must be (n, {self.card.embedding_dim}), got {X.shape}", field="contexts")
        if X.shape[1] != self.card.embedding_dim:
            raise EncoderMismatchError(f"context vectors have {X.shape[1]} dims, the role model was fit on "
                                       f"{self.card.embedding_dim}-dim vectors from {self.card.encoder_id!r}")
        if len(X) == 0:
            return np.zeros((0, len(self.labels)))
        out = np.asarray(self._sess.run([ROLE_OUTPUT], {ROLE_INPUT: X})[0], dtype=np.float64)
        return out / out.sum(axis=1, keepdims=True)

    def weights(self, context: np.ndarray) -> dict[str, float]:
        """``{label: weight}`` for one context vector (sums to 1)."""
        row = self.predict(np.asarray(context, dtype=np.float32).reshape(1, -1))[0]
        return {lab: float(x) for lab, x in zip(self.labels, row)}

    def relative(self, context: np.ndarray) -> dict[str, float]:
        """``{label: w / max(w)}`` in (0, 1] — what recall's role-match factor uses."""
        w = self.weights(context)
        top = max(w.values())
        return {k: v / top for k, v in w.items()}


_CACHE: dict[str, tuple[float, RoleWeigher]] = {}


def _check_encoder(path: Path, fit_on: str, encoder_id: str | None) -> None:
    if encoder_id is not None and encoder_id != fit_on:
        raise EncoderMismatchError(f"{path} was fit on vectors from {fit_on!r}, but the store uses "
                                   f"{encoder_id!r}: set ${ROLE_MODEL_ENV} to a role model fit on {encoder_id!r}")


def default_role_weigher(encoder_id: str | None = None) -> RoleWeigher:
    """The default model (:func:`default_role_model_path`), loaded once per file version (a newer
    file replaces the cached one)."""
    path = default_role_model_path()
    mtime = path.stat().st_mtime if path.is_file() else 0.0
    hit = _CACHE.get(str(path))
    if hit is None or hit[0] != mtime:
        hit = _CACHE[str(path)] = (mtime, RoleWeigher(path))
    w = hit[1]
    _check_encoder(path, w.encoder_id, encoder_id)
    return w
