"""Cold-tier vector formats through the public API: what int8 / float16 archives cost and save.

For each backend (SQLite; with ``--backend postgres`` also a local PostgreSQL from ``pgserver``)
and each cold format, one store holds ``--n`` memories written with real all-MiniLM-L6-v2 vectors
of LongMemEval turns (``data/vectors/lme_turns.parquet``, MIT), every one archived by
``scope.retain(capacity=0, forgotten="archive")``. Then ``--queries`` held-out vectors are recalled
with ``scope.recall(q, k=10, tier="archive", update_usage=False)``, the stores queried in rotating
order within each query (the machine is noisy: the baseline, float32, runs side by side).

Reported per backend and format: stored vector bytes per archived memory, the time to archive them
all (the retain call), archive recall p50 / p90, the ratios to float32 in the same run, and the
first recall after the archiving decision (it reloads the scope's search cache on both backends).
Writes ``reports/bench_tiers.json`` and ``.png``. The recall cost of the formats (how often the
top-10 changes) is ``python -m train.eval tiers``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from runtime import FakeScorer, MemoryStore, StoreConfig  # noqa: E402
from runtime.encoders import HashEmbedder  # noqa: E402

FORMATS = ("float32", "int8", "float16")


def _vectors(n: int) -> np.ndarray:
    import pyarrow.parquet as pq

    col = pq.read_table(ROOT / "data" / "vectors" / "lme_turns.parquet").column("vector")
    if n > len(col):
        raise SystemExit(f"data/vectors/lme_turns.parquet has {len(col)} vectors; ask for at most that many (--n + --queries)")
    v = np.asarray(col.slice(0, n).to_pylist(), dtype=np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _fill(target: Any, fmt: str, docs: np.ndarray) -> tuple[MemoryStore, Any, float]:
    st = MemoryStore.open(target, embedder=HashEmbedder(dim=docs.shape[1]),
                          config=StoreConfig(cold_vectors=fmt, promote_on_access=False))
    me = st.scope(user_id="bench")
    for i in range(0, len(docs), 1000):
        me.write_many([{"content": f"turn {j}", "embedding": docs[j]} for j in range(i, min(i + 1000, len(docs)))])
    t = time.perf_counter()
    me.retain(capacity=0, scorer=FakeScorer(lambda r: 0.5), method="greedy")
    return st, me, time.perf_counter() - t


def bench_backend(name: str, targets: dict[str, Any], docs: np.ndarray, queries: np.ndarray) -> dict[str, Any]:
    stores, scopes, archive_s = {}, {}, {}
    for fmt in FORMATS:
        stores[fmt], scopes[fmt], archive_s[fmt] = _fill(targets[fmt], fmt, docs)
    times: dict[str, list[float]] = {f: [] for f in FORMATS}
    for r, q in enumerate(queries):
        order = FORMATS[r % len(FORMATS):] + FORMATS[:r % len(FORMATS)]
        for f in order:
            t = time.perf_counter()
            scopes[f].recall(q, k=10, tier="archive", update_usage=False)
            times[f].append(time.perf_counter() - t)
    out: dict[str, Any] = {}
    for f in FORMATS:
        tier = stores[f].admin_stats()["tiers"]["archive"]
        out[f] = {"archived": tier["memories"], "bytes_per_vector": tier["vector_bytes"] / tier["memories"],
                  "formats": tier["formats"], "archive_s": round(archive_s[f], 3),
                  "recall_p50_ms": round(1000 * float(np.median(times[f])), 3),
                  "recall_p90_ms": round(1000 * float(np.percentile(times[f], 90)), 3),
                  # the first search after the archiving decision reloads the scope's search cache
                  "first_recall_ms": round(1000 * times[f][0], 3)}
        stores[f].close()
    base = out["float32"]
    for f in FORMATS:
        out[f]["bytes_ratio"] = round(out[f]["bytes_per_vector"] / base["bytes_per_vector"], 3)
        out[f]["recall_ratio"] = round(out[f]["recall_p50_ms"] / base["recall_p50_ms"], 3)
    print(f"  -- {name}: {len(docs)} archived memories, {len(queries)} queries, k = 10")
    for f in FORMATS:
        o = out[f]
        print(f"  {f:<8} {o['bytes_per_vector']:7.0f} B/vector (x{o['bytes_ratio']:.2f})   archive all "
              f"{o['archive_s']:6.2f} s   archive recall p50 {o['recall_p50_ms']:8.2f} ms  p90 {o['recall_p90_ms']:8.2f} ms"
              f"   x{o['recall_ratio']:.2f} vs float32   first (cache reload) {o['first_recall_ms']:.1f} ms")
    return out


def _plot(res: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    backends = list(res["backends"])
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    x = np.arange(len(FORMATS))
    w = 0.8 / max(1, len(backends))
    for j, b in enumerate(backends):
        vals = [res["backends"][b][f]["recall_p50_ms"] for f in FORMATS]
        bars = axes[0].bar(x + (j - (len(backends) - 1) / 2) * w, vals, w, label=b)
        axes[0].bar_label(bars, fmt="%.1f", fontsize=8)
    axes[0].set_xticks(x, FORMATS)
    axes[0].set_ylabel("ms")
    axes[0].set_title(f"archive recall p50 ({res['n']} archived, k = 10)", fontsize=9)
    axes[0].legend(fontsize=8)
    b0 = backends[0]
    bars = axes[1].bar(x, [res["backends"][b0][f]["bytes_per_vector"] for f in FORMATS], 0.5, color="tab:gray")
    axes[1].bar_label(bars, fmt="%.0f", fontsize=8)
    axes[1].set_xticks(x, FORMATS)
    axes[1].set_title("stored bytes per archived vector", fontsize=9)
    fig.suptitle("Cold-tier vector formats (all-MiniLM-L6-v2 vectors of LongMemEval turns)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog="Example: python bench/bench_tiers.py --backend postgres --n 10000")
    ap.add_argument("--n", type=int, default=10_000, help="archived memories per store (default 10,000)")
    ap.add_argument("--queries", type=int, default=40, help="held-out query vectors (default 40)")
    ap.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite",
                    help="postgres: also a local PostgreSQL (pgserver), beside SQLite")
    ap.add_argument("--out", default=str(ROOT / "reports" / "bench_tiers.json"))
    a = ap.parse_args()
    print(f"[cold-tier formats] {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f} at start")
    vecs = _vectors(a.n + a.queries)
    docs, queries = vecs[:a.n], vecs[a.n:]
    res: dict[str, Any] = {"n": a.n, "queries": a.queries, "backends": {}}
    with tempfile.TemporaryDirectory(prefix="memir-bench-tiers-") as d:
        tmp = Path(d)
        res["backends"]["sqlite"] = bench_backend(
            "SQLite", {f: tmp / f"{f}.sqlite" for f in FORMATS}, docs, queries)
        if a.backend == "postgres":
            from runtime.store.postgres.local import LocalPostgres

            base = tmp / "pg"
            base.mkdir()
            os.chmod(tmp, 0o755)
            os.chmod(base, 0o755)
            pg = LocalPostgres(base / "data").start()
            try:
                res["backends"]["postgres"] = bench_backend(
                    "PostgreSQL", {f: pg.dsn(f"tiers_{f}") for f in FORMATS}, docs, queries)
            finally:
                pg.stop()
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=1))
    _plot(res, out.with_suffix(".png"))
    print(f"  load average at end: {os.getloadavg()[0]:.1f}; wrote {out} and {out.with_suffix('.png').name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
