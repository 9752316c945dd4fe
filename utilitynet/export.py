"""Export :class:`~utilitynet.model.UtilityNet` to ONNX for the torch-free runtime, and check parity.

The file is fp32 with a dynamic batch axis (input :data:`~utilitynet.features.MODEL_INPUT`, outputs
:data:`~utilitynet.features.MODEL_OUTPUT` and :data:`~utilitynet.features.MODEL_SESSION_OUTPUT`) and
carries in ``metadata_props`` the feature spec it was fit on (``FeatureSpec.to_metadata``: schema version,
feature names as JSON, embedding dim, encoder id), the model config, the learned ``session_weight``
(:mod:`utilitynet.session`), and whatever the caller adds (training summary, commit...).
``runtime.scoring.UtilityScorer`` reads them back and refuses a model whose spec does not match.

We use the TorchScript exporter (``dynamo=False``): it handles this static MLP exactly and needs no
``onnxscript``; the dynamo exporter buys nothing here.

Example:
    >>> from utilitynet.features import spec_for
    >>> from utilitynet.model import UtilityNet, UtilityNetConfig
    >>> spec = spec_for(384, "all-MiniLM-L6-v2")
    >>> net = UtilityNet(UtilityNetConfig.for_spec(spec))
    >>> export_onnx(net, spec, "utilitynet.onnx", metadata={"round": 0})   # doctest: +SKIP
    >>> check_parity(net, "utilitynet.onnx")                                # doctest: +SKIP
    {1: 5.9e-08, 7: 1.1e-07}
"""

from __future__ import annotations

import copy
import json
import os
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import torch

from .features import MODEL_INPUT, MODEL_OUTPUT, MODEL_SESSION_OUTPUT, FeatureSpec
from .model import UtilityNet
from .session import SESSION_WEIGHT_KEY

__all__ = ["RESERVED_METADATA_KEYS", "ParityError", "check_parity", "export_onnx",
           "read_metadata"]

RESERVED_METADATA_KEYS = frozenset(
    {"feature_schema_version", "feature_names", "embedding_dim", "encoder_id", "model_config", "output",
     SESSION_WEIGHT_KEY})

"""Keys written by :func:`export_onnx` itself; ``metadata`` may not override them."""


class ParityError(AssertionError):
    """ONNX Runtime and torch disagree beyond tolerance on the same input."""


def export_onnx(model: UtilityNet, spec: FeatureSpec, path: str | os.PathLike[str], *,
                metadata: Mapping[str, Any] | None = None, opset: int = 17) -> Path:
    """Write ``model`` as an fp32 ONNX file with the feature spec in its metadata.

    Args:
        model: the network (any mode/device; a CPU eval copy is exported, the original is untouched).
        spec: the feature spec the model was fit on; its width and embedding dim must match the model.
        path: output file (parent directories are created; written atomically via a temp file).
        metadata: extra ``metadata_props`` (e.g. training summary); non-string values are JSON-encoded.
        opset: ONNX opset (≥ 17: LayerNormalization is a native op from 17 on).

    Returns:
        The path written.

    Raises:
        ValueError: model/spec mismatch, opset < 17, or a metadata key that collides with a reserved one.
    """
    cfg = model.config
    if cfg.in_features != spec.n_features or cfg.embedding_dim != spec.embedding_dim:
        raise ValueError(f"model expects {cfg.in_features} features ({cfg.embedding_dim} embedding dims) "
                         f"but the spec has {spec.n_features} ({spec.embedding_dim}): build the config with "
                         "UtilityNetConfig.for_spec(spec)")
    if opset < 17:
        raise ValueError(f"opset must be >= 17, got {opset}")
    extra = dict(metadata or {})
    clash = sorted(RESERVED_METADATA_KEYS & extra.keys())
    if clash:
        raise ValueError(f"metadata keys {clash} are reserved (written from the spec and config); "
                         "rename them")

    net = copy.deepcopy(model).cpu().eval()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    raw, tmp = out.with_name(out.name + ".raw.tmp"), out.with_name(out.name + ".tmp")
    with warnings.catch_warnings(), torch.no_grad():
        # The TorchScript exporter is deprecated upstream but exact for this graph; keep logs clean.
        warnings.simplefilter("ignore", category=DeprecationWarning)
        warnings.simplefilter("ignore", category=FutureWarning)
        torch.onnx.export(
            net, (torch.zeros(2, cfg.in_features),), str(raw), dynamo=False, opset_version=opset,
            input_names=[MODEL_INPUT], output_names=[MODEL_OUTPUT, MODEL_SESSION_OUTPUT],
            dynamic_axes={MODEL_INPUT: {0: "batch"}, MODEL_OUTPUT: {0: "batch"}, MODEL_SESSION_OUTPUT: {0: "batch"}},
        )
    try:
        proto = onnx.load(str(raw))
    finally:
        raw.unlink(missing_ok=True)
    props = {**spec.to_metadata(), "model_config": json.dumps(cfg.to_dict()),
             SESSION_WEIGHT_KEY: repr(float(net.session_weight.detach())),
             "output": f"{MODEL_OUTPUT} c and {MODEL_SESSION_OUTPUT} b per memory; utility = sigmoid(c) * "
                       f"softmax over the memory's session of b, to the power {SESSION_WEIGHT_KEY}"}
    props.update({k: v if isinstance(v, str) else json.dumps(v, sort_keys=True, default=str)
                  for k, v in extra.items()})
    del proto.metadata_props[:]
    for k, v in props.items():
        entry = proto.metadata_props.add()
        entry.key, entry.value = str(k), v
    proto.producer_name, proto.doc_string = "memir.utilitynet", "memir utility model (see metadata_props)"
    onnx.checker.check_model(proto)

    tmp.write_bytes(proto.SerializeToString())
    os.replace(tmp, out)
    return out


def read_metadata(path: str | os.PathLike[str]) -> dict[str, str]:
    """The ``metadata_props`` of an ONNX file as a dict."""
    return {p.key: p.value for p in onnx.load(str(path), load_external_data=False).metadata_props}


def check_parity(model: UtilityNet, path: str | os.PathLike[str], batch_sizes: Sequence[int] = (1, 7),
                 atol: float = 1e-5, *, features: np.ndarray | None = None,
                 seed: int = 0) -> dict[int, float]:
    """Compare torch and onnxruntime outputs on the same inputs, per batch size.

    Args:
        model: the torch network that was exported (evaluated as a CPU eval copy).
        path: the ONNX file.
        batch_sizes: batch sizes to test (the first rows of ``features`` are used for each).
        atol: maximum allowed absolute difference of either output.
        features: input rows (≥ max(batch_sizes)); default: random rows at the scale of the model's
            normalisation buffers (``feature_mean + feature_std · N(0, 1)``) from ``seed``.
        seed: seed of the default inputs.

    Returns:
        ``{batch_size: max |torch − onnx|}`` over both outputs.

    Raises:
        ParityError: some batch differs by more than ``atol``.
    """
    import onnxruntime as ort  # heavy and only needed here

    need = max(batch_sizes)
    if features is None:  # inputs at the scale the model was normalised for: mean + std · N(0, 1)
        z = np.random.default_rng(seed).standard_normal((need, model.config.in_features))
        features = model.feature_mean.cpu().numpy() + model.feature_std.cpu().numpy() * z
    X = np.asarray(features, dtype=np.float32)
    if X.shape[0] < need or X.shape[1] != model.config.in_features:
        raise ValueError(f"features must be (>= {need}, {model.config.in_features}), got {X.shape}")
    net = copy.deepcopy(model).cpu().eval()
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    diffs: dict[int, float] = {}
    for b in batch_sizes:
        with torch.no_grad():
            ref = np.stack([t.numpy() for t in net(torch.from_numpy(X[:b]))])
        got = np.stack(sess.run([MODEL_OUTPUT, MODEL_SESSION_OUTPUT], {MODEL_INPUT: X[:b]}))
        if got.shape != ref.shape:
            raise ParityError(f"batch {b}: onnx output shape {got.shape} != torch {ref.shape}")
        diffs[b] = float(np.max(np.abs(got - ref))) if b else 0.0
    bad = {b: d for b, d in diffs.items() if not d <= atol}
    if bad:
        raise ParityError(f"torch vs onnxruntime differ beyond atol={atol}: {bad} — re-export with "
                          "the same torch version, or check for ops the exporter approximates")
    return diffs
