"""Throughput of the utility scorer: featurize, the ONNX MLP alone, and end to end.

Synthetic MemIR rows (templated texts of 3–60 words, mixed sources/roles/flags/TTLs/usage) with
random 384-dim embeddings, scored in batches; redundancy (O(batch²·d)) on and off. The baseline,
measured in the same run, is the keep-recent heuristic (read ``created_at`` per record and rank):
the cheapest scorer there is, so ratios say what the learned scorer costs on top of it.

Columnar input (:class:`utilitynet.columns.RecordColumns`, what a Parquet dump or a data-engine
block holds) skips the per-record Python pass; ``--threads`` sets the columnar scorer's threads.

Usage:
    python bench/bench_scorer.py                       # 200k rows, batch 4096, dim 384
    python bench/bench_scorer.py --rows 20000 --model checkpoints/utilitynet.onnx
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

from runtime.record import DialogRole, Flag, MemIR, Metadata, Provenance, RoleContext, SourceType, Usage
from runtime.scoring import UtilityScorer
from utilitynet.columns import RecordColumns
from utilitynet.context import ScoringContext
from utilitynet.features import featurize

NOW = datetime(2025, 6, 1, tzinfo=UTC)
_TEXT = ("the flight to Lisbon leaves on Friday at 10:30 and I must book a hotel near the center "
         "budget is 400 euros Caroline said thanks ok great the meeting moved to Tuesday please "
         "remember my passport number important deadline next week you asked about the report draft "
         "v2 tool returned status 200")
WORDS = tuple(_TEXT.split())


def make_records(n: int, seed: int) -> list[MemIR]:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(3, 60, size=n)
    src, role = list(SourceType), list(DialogRole)
    out = []
    for i in range(n):
        md: dict[str, object] = {"confidence": float(rng.uniform(0.3, 1.0))}
        if i % 7 == 0:
            md["flags"] = [Flag.core_instruction]
        if i % 11 == 0:
            md["expires_at"] = NOW + timedelta(hours=float(rng.uniform(-10, 100)))
        out.append(MemIR(
            content=" ".join(rng.choice(WORDS, int(lengths[i]))),
            created_at=NOW - timedelta(minutes=float(rng.uniform(0, 60 * 24 * 30))),
            provenance=Provenance(user_id="u1", type=src[i % 4]),
            role_context=RoleContext(dialog_role=role[i % 4]),
            metadata=Metadata(**md),  # type: ignore[arg-type]
            usage=Usage(access_count=int(rng.integers(0, 5)),
                        last_accessed_at=NOW - timedelta(hours=1) if i % 3 == 0 else None)))
    return out


def batch_embeddings(b: int, n: int, dim: int) -> np.ndarray:
    """Deterministic per-batch embeddings (not held for all rows: 200k × 384 floats is 300 MB)."""
    E = np.random.default_rng(1000 + b).standard_normal((n, dim)).astype(np.float32)
    return E / np.linalg.norm(E, axis=1, keepdims=True)


def timed(fn: Callable[[], object], repeat: int) -> tuple[float, float]:
    """Best (wall, CPU) seconds of ``repeat`` runs.

    CPU = this process's CPU time (all its threads). On a shared machine wall time mostly measures
    the scheduler; CPU time is what the work costs.
    """
    wall = cpu = float("inf")
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        fn()
        wall, cpu = min(wall, time.perf_counter() - t), min(cpu, time.process_time() - c)
    return wall, cpu


def default_model(dim: int, out: Path) -> Path:
    import torch

    from utilitynet.export import export_onnx
    from utilitynet.features import spec_for
    from utilitynet.model import UtilityNet, UtilityNetConfig

    torch.manual_seed(0)
    spec = spec_for(dim, f"bench-{dim}")
    return export_onnx(UtilityNet(UtilityNetConfig.for_spec(spec)), spec, out / "utilitynet.onnx")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--batch", type=int, default=4096)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--repeat", type=int, default=2, help="passes per measurement; the best is kept")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                    help="threads of the columnar scorer's second run (default: every CPU)")
    ap.add_argument("--model", type=Path, default=None, help="ONNX model (default: a fresh random one)")
    args = ap.parse_args()

    t0 = time.perf_counter()
    recs = make_records(args.rows, seed=0)
    print(f"built {args.rows} records in {time.perf_counter() - t0:.1f}s; batch {args.batch}, "
          f"dim {args.dim}, cpus {os.cpu_count()}, load avg {os.getloadavg()[0]:.1f}")
    batches = [(b, recs[i:i + args.batch]) for b, i in enumerate(range(0, args.rows, args.batch))]
    embs = [batch_embeddings(b, len(r), args.dim) for b, r in batches]
    ctxs = [ScoringContext(now=NOW, step=args.rows, record_steps=np.arange(len(r)), goal_embedding=e[0],
                           recent_embedding=e[-1], stage=0.5) for (_, r), e in zip(batches, embs)]

    with tempfile.TemporaryDirectory() as tmp:
        model = args.model or default_model(args.dim, Path(tmp))
        scorer_none = UtilityScorer(model, batch_size=args.batch, redundancy="none")
        scorer_batch = UtilityScorer(model, batch_size=args.batch, redundancy="batch")
        scorer_cols = {t: UtilityScorer(model, batch_size=args.batch, redundancy="none", threads=t)
                       for t in (1, args.threads)}
        columns = [RecordColumns.from_records(r) for _, r in batches]

        def recency() -> None:
            for _, r in batches:
                np.argsort(np.fromiter((x.created_at.timestamp() for x in r), dtype=np.float64, count=len(r)))

        feats: list[np.ndarray] = []

        def feat(red: str) -> Callable[[], None]:
            def run() -> None:
                feats.clear()
                for (_, r), e, c in zip(batches, embs, ctxs, strict=True):
                    feats.append(featurize(r, e, c, redundancy=red))  # type: ignore[arg-type]
            return run

        def mlp() -> None:
            for X in feats:
                scorer_none.score_features(X)

        def e2e(s: UtilityScorer) -> Callable[[], None]:
            def run() -> None:
                for (_, r), e, c in zip(batches, embs, ctxs, strict=True):
                    s.score(r, e, c)
            return run

        def cols_e2e(s: UtilityScorer) -> Callable[[], None]:
            def run() -> None:
                for c, e, x in zip(columns, embs, ctxs, strict=True):
                    s.score_columns(c, e, x)
            return run

        def to_columns() -> None:
            for _, r in batches:
                RecordColumns.from_records(r)

        rows = {}
        rows["baseline: keep-recent (created_at sort)"] = timed(recency, args.repeat)
        rows["MemIR objects -> columns"] = timed(to_columns, args.repeat)
        rows["featurize, redundancy=batch"] = timed(feat("batch"), args.repeat)
        rows["featurize, redundancy=none"] = timed(feat("none"), args.repeat)
        rows["ONNX MLP alone (score_features)"] = timed(mlp, args.repeat)
        rows["end-to-end score, redundancy=batch"] = timed(e2e(scorer_batch), args.repeat)
        rows["end-to-end score, redundancy=none"] = timed(e2e(scorer_none), args.repeat)
        for t, s in scorer_cols.items():
            rows[f"columns: featurize+ONNX, threads={t}"] = timed(cols_e2e(s), args.repeat)

    _, base_cpu = rows["baseline: keep-recent (created_at sort)"]
    print(f"load avg now {os.getloadavg()[0]:.1f}")
    print(f"{'stage':40s} {'wall s':>7s} {'rows/s':>10s} {'cpu s':>7s} {'rows/cpu-s':>11s} {'cpu × base':>10s}")
    for name, (wall, cpu) in rows.items():
        print(f"{name:40s} {wall:7.2f} {args.rows / wall:10,.0f} {cpu:7.2f} {args.rows / cpu:11,.0f} "
              f"{cpu / base_cpu:10.1f}")
    on, off = rows["featurize, redundancy=batch"], rows["featurize, redundancy=none"]
    print(f"redundancy on/off featurize ratio: wall {on[0] / off[0]:.1f}×, cpu {on[1] / off[1]:.1f}×")
    obj = rows["end-to-end score, redundancy=none"]
    for t in scorer_cols:
        col = rows[f"columns: featurize+ONNX, threads={t}"]
        print(f"columns (threads={t}) vs MemIR objects, end to end without redundancy: "
              f"{obj[0] / col[0]:.2f}× faster wall, {args.rows / col[0]:,.0f} rows/s")


if __name__ == "__main__":
    main()
