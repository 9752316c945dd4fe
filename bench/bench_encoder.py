"""Sentence-encoder throughput: OnnxEncoder (onnxruntime, no torch) vs sentence-transformers (torch).

Both encode the same seeded, realistic memory-like sentences, interleaved call by call in one process,
with the same thread count. Prints ms per call and sentences/s at batch 1 and batch 32, the ratio, and the max
abs difference between the two encoders' vectors.

Usage:
    python bench/bench_encoder.py                      # exports into a temp dir if none is found
    python bench/bench_encoder.py --threads 1 --seconds 5
    MEMIR_ENCODER_DIR=~/.cache/memir/encoders/all-MiniLM-L6-v2 python bench/bench_encoder.py
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without install

from runtime.encoders import OnnxEncoder, OnnxEncoderConfig, default_encoder_dir
from runtime.errors import EncoderUnavailableError

_SUBJECTS = ["The user", "Alice", "The customer in ticket 4411", "My manager", "The project lead", "Bob"]
_VERBS = ["prefers", "asked for", "wants to avoid", "confirmed", "changed the deadline for", "mentioned"]
_OBJECTS = ["aisle seats on long flights", "the vegetarian menu option", "the Q3 budget review",
            "a refund for the duplicated order", "meetings before 10am", "the draft of chapter four",
            "the hotel near the conference centre in Lisbon", "weekly status reports on Fridays"]
_TAILS = ["", " because of a back injury", " after the last sprint planning",
          " — see the thread from Monday",
          " and said it is urgent", " unless the client objects, in which case fall back to plan B"]


def make_sentences(n: int, seed: int) -> list[str]:
    """``n`` memory-like sentences (8–40 tokens), reproducible from ``seed``."""
    rng = random.Random(seed)
    return [f"{rng.choice(_SUBJECTS)} {rng.choice(_VERBS)} {rng.choice(_OBJECTS)}{rng.choice(_TAILS)}."
            for _ in range(n)]


Encode = Callable[[Sequence[str], int], np.ndarray]


def bench_pair(encoders: dict[str, Encode], sentences: list[str], batch: int,
               seconds: float) -> dict[str, tuple[float, float]]:
    """Time the encoders *interleaved* (one call each, alternating which goes first) for ``seconds``.

    Interleaving makes both see the same background load, so the ratio stays meaningful on a shared
    machine even when absolute numbers drift. Each call gets the next ``batch`` sentences.

    Returns:
        name -> (median ms per call, sentences/s).
    """
    times: dict[str, list[float]] = {name: [] for name in encoders}
    names = list(encoders)
    for name in names:  # warm-up: first calls allocate arenas and pick kernels
        encoders[name](sentences[:batch], batch)
    i, rnd = 0, 0
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline or rnd < 5:
        chunk = [sentences[(i + j) % len(sentences)] for j in range(batch)]
        i += batch
        for name in (names if rnd % 2 == 0 else names[::-1]):
            t = time.perf_counter()
            encoders[name](chunk, batch)
            times[name].append(time.perf_counter() - t)
        rnd += 1
    out = {}
    for name, ts in times.items():
        ms = statistics.median(ts) * 1e3
        out[name] = (ms, batch / (ms / 1e3))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark and print the table."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="threads for both encoders")
    p.add_argument("--seconds", type=float, default=6.0, help="measuring time per batch size")
    p.add_argument("--encoder-dir", type=Path, default=None, help="exported ONNX encoder (default: cache)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)

    enc_dir = args.encoder_dir or default_encoder_dir()
    tmp = None
    try:
        OnnxEncoder(enc_dir)
    except EncoderUnavailableError:
        from runtime.encoders.install import install_encoder
        tmp = tempfile.TemporaryDirectory(prefix="memir-bench-enc-")
        print(f"no encoder at {enc_dir}; building one into {tmp.name}", file=sys.stderr)
        enc_dir = install_encoder(Path(tmp.name) / "enc")

    t = time.perf_counter()
    onnx = OnnxEncoder(enc_dir, config=OnnxEncoderConfig(intra_op_threads=args.threads))
    onnx_load = time.perf_counter() - t

    t = time.perf_counter()
    import torch

    from train.encoder.reference import SentenceTransformerEmbedder
    torch.set_num_threads(args.threads)
    st = SentenceTransformerEmbedder()
    st_load = time.perf_counter() - t

    sentences = make_sentences(512, args.seed)
    diff = float(np.abs(onnx.encode(sentences[:64]) - st.encode(sentences[:64])).max())

    print(f"encoder: {onnx.encoder_id}  threads={args.threads}  torch {torch.__version__}  "
          f"cpu_count={os.cpu_count()}")
    print(f"load: onnx {onnx_load:.2f}s (no torch)  |  "
          f"sentence-transformers {st_load:.2f}s (incl. torch import)")
    print(f"max |onnx - st| over 64 sentences: {diff:.2e}")
    print(f"{'batch':>5} | {'onnx ms/call':>12} {'onnx sent/s':>11} | {'st ms/call':>10} {'st sent/s':>9} "
          f"| {'speed-up (st/onnx)':>18}")
    with torch.inference_mode():
        for batch in (1, 32):
            r = bench_pair({"onnx": lambda s, b: onnx.encode(s, batch_size=b),
                            "st": lambda s, b: st.encode(s, batch_size=b)}, sentences, batch, args.seconds)
            (o_ms, o_sps), (s_ms, s_sps) = r["onnx"], r["st"]
            print(f"{batch:>5} | {o_ms:>12.2f} {o_sps:>11.0f} | {s_ms:>10.2f} {s_sps:>9.0f} "
                  f"| {s_ms / o_ms:>17.2f}x")
    if tmp is not None:
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
