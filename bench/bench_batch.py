"""Batch scoring at engine scale (`memir score`), every figure beside its baselines in the same run:
the ONNX utility model alone on the same rows, and the record-at-a-time path (`--engine rows`,
what `memir score` did before the columnar engine).

    python bench/bench_batch.py                       # 1M Parquet, 200k JSONL, 5M-record RSS, Ray
    python bench/bench_batch.py --n 200000 --rss-n 0 --no-ray     # a quick run

Dumps are generated here (bench/batch_dumps.py: 1,000 users, sessions of 20 turns, 384-d unit
vectors, rows of all users interleaved) into a temporary directory and deleted afterwards.
Scoring goes through the public path only: `runtime.batch.score_dump` in this process, and the
CLI (`runtime.cli.main`, what the `memir` script runs) in a child process for the peak-memory figure. Results are printed, saved
to reports/bench_batch.json and plotted in reports/bench_batch.png.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from batch_dumps import write_jsonl, write_parquet  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def _score(dump: Path, out: Path, engine: str = "local", **kw: Any) -> dict[str, Any]:
    from runtime.batch import ScoreConfig, score_dump

    cfg = ScoreConfig(capacity=200, redundancy="none", **kw)
    return score_dump(dump, out, cfg, progress=False, engine=engine)


def _mlp_alone(n: int) -> float:
    from runtime.scoring import UtilityScorer

    scorer = UtilityScorer(threads=2)
    X = np.random.default_rng(0).standard_normal((n, scorer.spec.n_features)).astype(np.float32)
    scorer.score_features(X[:1000])
    t = time.perf_counter()
    scorer.score_features(X)
    return n / (time.perf_counter() - t)


_RSS_PROBE = """
import json, resource, sys
from runtime.cli import main
rc = main(sys.argv[1:])
print(json.dumps({"rc": rc, "self_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                  "readers_kb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}), file=sys.stderr)
"""


def _peak_rss(dump: Path, out: Path) -> tuple[float, float, dict[str, Any]]:
    """Peak RSS (MB) of `memir score` on the dump, run as the CLI in a child process: the process
    itself, and the largest of its reader processes (none for Parquet)."""
    p = subprocess.run([sys.executable, "-c", _RSS_PROBE, "score", str(dump), "-o", str(out), "--capacity", "200",
                        "--redundancy", "none", "--quiet", "--json"], capture_output=True, text=True, check=False,
                       cwd=ROOT)
    probe = json.loads(p.stderr.strip().splitlines()[-1])
    if probe["rc"] != 0:
        raise SystemExit(f"memir score failed: {p.stderr[-2000:]}")
    return probe["self_kb"] / 1024, probe["readers_kb"] / 1024, json.loads(p.stdout)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=1_000_000, help="Parquet records for the throughput figure")
    ap.add_argument("--n-jsonl", type=int, default=200_000, help="JSONL records")
    ap.add_argument("--n-rows", type=int, default=100_000, help="records for the record-at-a-time baseline")
    ap.add_argument("--rss-n", type=int, default=5_000_000, help="Parquet records for the peak-memory figure (0: skip)")
    ap.add_argument("--ray-n", type=int, default=200_000, help="Parquet records for the Ray figure (0: skip)")
    ap.add_argument("--no-ray", action="store_true", help="skip the Ray figure")
    ap.add_argument("--tmp", default=None, help="where the dumps go (default: the temporary directory)")
    a = ap.parse_args(argv)
    res: dict[str, Any] = {"machine": {"cpus": __import__("os").cpu_count()}}
    with tempfile.TemporaryDirectory(dir=a.tmp) as d:
        tmp = Path(d)
        res["mlp_alone_rows_per_s"] = mlp = _mlp_alone(200_000)
        print(f"ONNX utility model alone (featurized rows, 2 threads): {mlp:>12,.0f} rows/s  [baseline]")

        pq_big, pq_small = tmp / "big.parquet", tmp / "small.parquet"
        t = time.perf_counter()
        write_parquet(pq_big, a.n)
        write_parquet(pq_small, a.n_rows)
        print(f"\nmade Parquet dumps of {a.n:,} and {a.n_rows:,} records in {time.perf_counter() - t:.0f} s "
              f"({pq_big.stat().st_size / 1e9:.2f} GB)")
        local = _score(pq_big, tmp / "o.parquet")
        local_small = _score(pq_small, tmp / "o2.parquet")
        rows = _score(pq_small, tmp / "o3.jsonl", engine="rows")
        res["parquet"] = {"n": a.n, "local": local, "local_on_rows_n": local_small, "rows": rows}
        print(f"Parquet (MemIR column layout), capacity 200 per scope, {local['scopes']:,} scopes:")
        print(f"  columnar engine, {a.n:>9,} records   {local['records_per_s']:>10,.0f} records/s  "
              f"(read {local['seconds']['read']} s, decide {local['seconds']['decide']} s; "
              f"{local['validated_columnwise']:,} validated column-wise, {local['spilled']:,} spilled)")
        print(f"  columnar engine, {a.n_rows:>9,} records   {local_small['records_per_s']:>10,.0f} records/s")
        print(f"  record path,     {a.n_rows:>9,} records   {rows['records_per_s']:>10,.0f} records/s  [today's path]")
        print(f"  ratio columnar / record path: {local_small['records_per_s'] / rows['records_per_s']:.2f}x;  "
              f"columnar / model alone: {local['records_per_s'] / mlp:.3f}   (goal: 200,000 records/s)")

        js = tmp / "d.jsonl"
        t = time.perf_counter()
        write_jsonl(js, a.n_jsonl)
        print(f"\nmade a JSONL dump of {a.n_jsonl:,} records in {time.perf_counter() - t:.0f} s "
              f"({js.stat().st_size / 1e9:.2f} GB)")
        jl = _score(js, tmp / "j.parquet")
        jr = _score(js, tmp / "j2.jsonl", engine="rows")
        res["jsonl"] = {"n": a.n_jsonl, "local": jl, "rows": jr}
        print(f"  columnar engine   {jl['records_per_s']:>10,.0f} records/s  ({jl['readers']} reader processes; "
              f"read {jl['seconds']['read']} s, decide {jl['seconds']['decide']} s)")
        print(f"  record path       {jr['records_per_s']:>10,.0f} records/s  [today's path]")
        print(f"  ratio: {jl['records_per_s'] / jr['records_per_s']:.2f}x   (goal: 50,000 records/s)")
        js.unlink()

        if not a.no_ray and a.ray_n > 0:
            rp = tmp / "ray.parquet"
            write_parquet(rp, a.ray_n, seed=2)
            single = _score(rp, tmp / "r1.parquet")
            t = time.perf_counter()
            ray_rep = _score(rp, tmp / "ray_out", engine="ray", workers=2)
            wall = time.perf_counter() - t
            res["ray"] = {"n": a.ray_n, "local": single, "ray": ray_rep, "wall_s": wall}
            print(f"\nRay Data, local cluster of 2 workers, {a.ray_n:,} Parquet records (start-up included):")
            print(f"  ray               {ray_rep['records_per_s']:>10,.0f} records/s  ({wall:.1f} s)")
            print(f"  single process    {single['records_per_s']:>10,.0f} records/s  ({single['seconds']['total']} s)")
            print(f"  overhead: Ray takes {wall / single['seconds']['total']:.2f}x the single-process time")

        if a.rss_n:
            big = tmp / "rss.parquet"
            pq_big.unlink()
            t = time.perf_counter()
            write_parquet(big, a.rss_n, seed=3)
            print(f"\nmade a Parquet dump of {a.rss_n:,} records in {time.perf_counter() - t:.0f} s "
                  f"({big.stat().st_size / 1e9:.2f} GB)")
            rss, readers, rep = _peak_rss(big, tmp / "rss_out.parquet")
            res["rss"] = {"n": a.rss_n, "peak_rss_mb": rss, "largest_reader_rss_mb": readers, "report": rep}
            print(f"  peak RSS of `memir score`: {rss:,.0f} MB (largest reader process: {readers:,.0f} MB)   "
                  f"(goal: <= 1,024 MB); {rep['records_per_s']:,.0f} records/s, {rep['spilled']:,} rows spilled")
    out = ROOT / "reports" / "bench_batch.json"
    out.write_text(json.dumps(res, indent=2, default=str))
    _plot(res, ROOT / "reports" / "bench_batch.png")
    print(f"\nsaved {out.relative_to(ROOT)} and reports/bench_batch.png")
    return 0


def _plot(res: dict[str, Any], path: Path) -> None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    bars = [("Parquet\ncolumnar", res["parquet"]["local"]["records_per_s"]),
            ("Parquet\nrecord path", res["parquet"]["rows"]["records_per_s"]),
            ("JSONL\ncolumnar", res["jsonl"]["local"]["records_per_s"]),
            ("JSONL\nrecord path", res["jsonl"]["rows"]["records_per_s"])]
    if "ray" in res:
        bars.append(("Parquet\nRay (2 workers)", res["ray"]["ray"]["records_per_s"]))
    fig, ax = plt.subplots(figsize=(8, 4))
    ax.bar([b[0] for b in bars], [b[1] for b in bars], color=["#2a6", "#999", "#2a6", "#999", "#36c"][:len(bars)])
    for k, (_, v) in enumerate(bars):
        ax.text(k, v, f"{v:,.0f}", ha="center", va="bottom", fontsize=9)
    ax.set_ylabel("records / s (end to end)")
    ax.set_title("memir score on a 2-core machine (capacity 200 per scope, 1,000 scopes)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    raise SystemExit(main())
