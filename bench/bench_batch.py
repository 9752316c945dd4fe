"""Batch scoring throughput (`memir score`): records/s end to end on a dump with precomputed
embeddings, and with embeddings computed, beside the ONNX MLP alone on the same rows (baseline).

    python bench/bench_batch.py            # 100k records (JSONL), 2k records needing embeddings
    python bench/bench_batch.py --n 1000000
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np


def make_dump(path: Path, n: int, dim: int, with_embeddings: bool, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    topics = ["budget", "deadline", "hotel", "flight", "invoice", "meeting", "refund", "password reset"]
    with open(path, "w", encoding="utf-8") as fh:
        for i in range(n):
            v = rng.standard_normal(dim).astype(np.float32)
            v /= np.linalg.norm(v)
            rec = {
                "schema_version": 1, "id": f"m{i}", "content": f"Note {i}: the {topics[i % 8]} for project P{i % 97} "
                f"is {rng.integers(1, 9999)} as of {t0.date()}",
                "created_at": (t0 + timedelta(minutes=i)).isoformat(),
                "provenance": {"type": "direct_interaction", "user_id": f"u{i % 100}", "session_id": f"s{i // 50}"},
                "metadata": {"confidence": 0.9, "tags": [topics[i % 8]]},
            }
            if with_embeddings:
                rec["embedding"] = [round(float(x), 6) for x in v]
                rec["encoder_id"] = "sentence-transformers/all-MiniLM-L6-v2"
            fh.write(json.dumps(rec) + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=100_000, help="records with precomputed embeddings")
    ap.add_argument("--n-embed", type=int, default=2_000, help="records that need embedding")
    ap.add_argument("--model", default=None)
    a = ap.parse_args(argv)
    from runtime.batch import ScoreConfig, score_dump
    from runtime.scoring import UtilityScorer

    scorer = UtilityScorer(a.model) if a.model else UtilityScorer()
    dim = scorer.spec.embedding_dim
    with tempfile.TemporaryDirectory() as d:
        dump = Path(d) / "dump.jsonl"
        t = time.perf_counter()
        make_dump(dump, a.n, dim, True)
        print(f"made {a.n:,} records ({dump.stat().st_size / 1e6:.0f} MB) in {time.perf_counter() - t:.1f} s")
        rep = score_dump(dump, Path(d) / "out.jsonl", ScoreConfig(capacity=200, redundancy="none", model=a.model),
                         progress=False)
        X = np.random.default_rng(0).standard_normal((min(a.n, 200_000), scorer.spec.n_features)).astype(np.float32)
        t = time.perf_counter()
        scorer.score_features(X)
        mlp = len(X) / (time.perf_counter() - t)
        print(f"\nprecomputed embeddings, {a.n:,} records, {rep['scopes']} scopes, capacity 200/scope:")
        print(f"  end to end         {rep['records_per_s']:>12,.0f} records/s  (read+validate {rep['seconds']['read']} s, "
              f"featurize+score+solve {rep['seconds']['score']} s, total {rep['seconds']['total']} s)")
        print(f"  ONNX MLP alone     {mlp:>12,.0f} rows/s     (baseline, same process)")
        print(f"  ratio end-to-end / MLP alone: {rep['records_per_s'] / mlp:.3f}")
        dump2 = Path(d) / "dump_noemb.jsonl"
        make_dump(dump2, a.n_embed, dim, False, seed=1)
        rep2 = score_dump(dump2, Path(d) / "out2.jsonl", ScoreConfig(capacity=200, redundancy="none", model=a.model),
                          progress=False)
        print(f"\nembeddings computed (ONNX MiniLM), {a.n_embed:,} records:")
        print(f"  end to end         {rep2['records_per_s']:>12,.0f} records/s  (embedded {rep2['embedded']:,})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
