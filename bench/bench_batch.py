"""Batch scoring at engine scale (`memir score`), every figure beside its baselines in the same run:
the ONNX utility model alone on the same rows, and the record-at-a-time path (`--engine rows`,
what `memir score` did before the columnar engine).

    python bench/bench_batch.py                       # 1M Parquet, 200k JSONL, 5M-record RSS, Ray cluster up to 1M
    python bench/bench_batch.py --n 200000 --rss-n 0 --no-ray     # a quick run

Dumps are generated here (bench/batch_dumps.py: 1,000 users, sessions of 20 turns, 384-d unit
vectors, rows of all users interleaved) into a temporary directory and deleted afterwards.
Scoring goes through the public path only: `runtime.batch.score_dump` in this process, and the
CLI (`python -m runtime.cli`, what the `memir` script runs) in a child process for the peak-memory
figure (the process tree sampled every 0.2 s) and for Ray, on a two-node cluster started with
`ray start --head` plus `ray start --address` (one CPU each). Results are printed, saved to
reports/bench_batch.json and plotted in reports/bench_batch.png.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from batch_dumps import write_jsonl, write_parquet  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def _score(dump: Path, out: Path, engine: str = "local", redundancy: str = "none", **kw: Any) -> dict[str, Any]:
    from runtime.batch import ScoreConfig, score_dump

    cfg = ScoreConfig(capacity=200, redundancy=redundancy, **kw)
    return score_dump(dump, out, cfg, progress=False, engine=engine)


def _mlp_alone(n: int) -> float:
    from runtime.scoring import UtilityScorer

    scorer = UtilityScorer(threads=2)
    X = np.random.default_rng(0).standard_normal((n, scorer.spec.n_features)).astype(np.float32)
    scorer.score_features(X[:1000])
    t = time.perf_counter()
    scorer.score_features(X)
    return n / (time.perf_counter() - t)


def _tree(pid: int) -> list[int]:
    """``pid`` and its descendants (Linux /proc)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        for task in Path(f"/proc/{p}/task").glob("*/children"):
            try:
                todo += [int(c) for c in task.read_text().split()]
            except OSError:
                pass
    return out


def _memory_mb(pid: int) -> tuple[float, float]:
    """``(RSS, PSS)`` of a process in MB (Linux ``smaps_rollup``). RSS counts every page the process
    maps, shared ones (the libraries every decider loads) in full; PSS divides each shared page among
    the processes sharing it, so PSS summed over a process tree is what the tree holds."""
    rss = pss = 0.0
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Rss:"):
                rss = int(line.split()[1]) / 1024
            elif line.startswith("Pss:"):
                pss = int(line.split()[1]) / 1024
    except OSError:
        pass
    return rss, pss


def _peak_rss(dump: Path, out: Path) -> dict[str, Any]:
    """Peak memory (MB) of `memir score` on the dump, run as the CLI in a child process and sampled
    every 0.2 s: the process itself (RSS), its largest decider process (RSS), and the whole process
    tree at once, as the sum of RSS (shared pages counted once per process) and of PSS (what the
    machine must hold)."""
    cmd = [sys.executable, "-m", "runtime.cli", "score", str(dump), "-o", str(out), "--capacity", "200",
           "--redundancy", "none", "--quiet", "--json"]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    main_mb = child_mb = tree_mb = tree_pss_mb = 0.0
    while p.poll() is None:
        sizes = {q: _memory_mb(q) for q in _tree(p.pid)}
        main_mb = max(main_mb, sizes.get(p.pid, (0.0, 0.0))[0])
        child_mb = max([child_mb] + [v[0] for q, v in sizes.items() if q != p.pid])
        tree_mb = max(tree_mb, sum(v[0] for v in sizes.values()))
        tree_pss_mb = max(tree_pss_mb, sum(v[1] for v in sizes.values()))
        time.sleep(0.2)
    stdout, stderr = p.communicate()
    if p.returncode != 0:
        raise SystemExit(f"memir score failed: {stderr[-2000:]}")
    return {"main_mb": main_mb, "largest_child_mb": child_mb, "tree_mb": tree_mb, "tree_pss_mb": tree_pss_mb,
            "report": json.loads(stdout)}


RAY_ENV = {"RAY_AUTH_MODE": "token", "RAY_USAGE_STATS_ENABLED": "0"}
"""Ray 2.5x's `ray start --head` turns token authentication on (the token in ~/.ray/auth_token);
every other node and the driver must then run with RAY_AUTH_MODE=token."""


@contextlib.contextmanager
def ray_cluster(nodes: int = 2, cpus_per_node: int = 1) -> Iterator[str]:
    """A Ray cluster the way an operator starts one: `ray start --head`, then `ray start --address`
    for each further node (here on this machine, one CPU each). Yields the head's address."""
    ray_bin = str(Path(sys.executable).with_name("ray"))
    env = {**os.environ, **RAY_ENV}
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    addr = f"127.0.0.1:{port}"
    tmp = tempfile.mkdtemp(prefix="ray-memir-", dir="/tmp")  # short: Ray's socket paths must fit 107 bytes

    def run(*args: str) -> None:
        r = subprocess.run([ray_bin, *args], env=env, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"ray {' '.join(args)} failed: {r.stderr[-1500:]}")

    try:
        run("start", "--head", "--port", str(port), "--num-cpus", str(cpus_per_node), "--include-dashboard=false",
            "--temp-dir", tmp, "--disable-usage-stats")
        for _ in range(nodes - 1):
            run("start", "--address", addr, "--num-cpus", str(cpus_per_node), "--disable-usage-stats")
        yield addr
    finally:
        subprocess.run([ray_bin, "stop", "--force"], env=env, capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)


def _cli_score(dump: Path, out: Path, *extra: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    """`memir score` as an operator runs it (the CLI in its own process); the report and the wall time."""
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "runtime.cli", "score", str(dump), "-o", str(out), "--capacity", "200",
                        "--redundancy", "none", "--quiet", "--json", *extra], capture_output=True, text=True, cwd=ROOT,
                       env={**os.environ, **(env or {})})
    if r.returncode != 0:
        raise SystemExit(f"memir score {' '.join(extra)} failed: {r.stderr[-2000:]}")
    return {**json.loads(r.stdout), "wall_s": time.perf_counter() - t}


def _ray_section(tmp: Path, sizes: list[int]) -> dict[str, Any]:
    """Ray Data on a two-node cluster (`ray start --head` + a second node, one CPU each) beside one
    `memir score` process on the same two cores, from a small dump to the largest; where Ray starts
    to pay off is the smallest size at which it is faster (wall time, start-up included)."""
    print("\nRay Data on a 2-node cluster (ray start --head + a second node, 1 CPU each) vs the local engine "
          "on the same 2 cores; wall time of the CLI, start-up included:")
    print(f"  {'records':>10} {'local rec/s':>12} {'ray rec/s':>12} {'ray / local time':>17}")
    rows = []
    with ray_cluster(nodes=2, cpus_per_node=1) as addr:
        for n in sizes:
            dump = tmp / f"ray-{n}.parquet"
            write_parquet(dump, n, seed=2)
            local = _cli_score(dump, tmp / f"ray-{n}-local.parquet")
            ray = _cli_score(dump, tmp / f"ray-{n}-out", "--engine", "ray", "--ray-address", addr, env=RAY_ENV)
            shutil.rmtree(tmp / f"ray-{n}-out", ignore_errors=True)
            dump.unlink()
            same = ray["kept"] == local["kept"] and ray["archived"] == local["archived"]
            row = {"n": n, "local_rps": n / local["wall_s"], "ray_rps": n / ray["wall_s"], "local_s": local["wall_s"],
                   "ray_s": ray["wall_s"], "same_counts": same}
            rows.append(row)
            print(f"  {n:>10,} {row['local_rps']:>12,.0f} {row['ray_rps']:>12,.0f} {ray['wall_s'] / local['wall_s']:>16.2f}x"
                  f"{'' if same else '   (kept/archived counts differ!)'}")
    pays = next((r["n"] for r in rows if r["ray_rps"] >= r["local_rps"]), None)
    print("  Ray pays off from " + (f"{pays:,} records" if pays else
          f"no size up to {sizes[-1]:,} records on these 2 cores: the local engine already runs one decider "
          "process per core, so Ray adds its scheduling, object store and shuffle and no CPU; it pays when it "
          "brings more machines"))
    return {"nodes": 2, "cpus_per_node": 1, "sizes": rows, "pays_off_from": pays}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=1_000_000, help="Parquet records for the throughput figure")
    ap.add_argument("--n-jsonl", type=int, default=200_000, help="JSONL records")
    ap.add_argument("--n-rows", type=int, default=100_000, help="records for the record-at-a-time baseline")
    ap.add_argument("--rss-n", type=int, default=5_000_000, help="Parquet records for the peak-memory figure (0: skip)")
    ap.add_argument("--ray-n", type=int, default=1_000_000, help="largest Parquet dump for the Ray cluster figure (0: skip)")
    ap.add_argument("--no-ray", action="store_true", help="skip the Ray figure")
    ap.add_argument("--tmp", default=None, help="where the dumps go (default: the temporary directory)")
    a = ap.parse_args(argv)
    if a.tmp is not None and not Path(a.tmp).is_dir():
        ap.error(f"--tmp {a.tmp}: no such directory (create it, or leave --tmp out for the temporary directory)")
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

        res["parquet"]["stored_context"] = _stored_context_section(tmp, pq_big, a.n, local)
        res["parquet"]["default_options"] = _default_options_section(tmp, pq_big)

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
            res["ray"] = _ray_section(tmp, sorted({n for n in (20_000, 100_000, 300_000, a.ray_n) if n <= a.ray_n}))

        if a.rss_n:
            big = tmp / "rss.parquet"
            pq_big.unlink()
            t = time.perf_counter()
            write_parquet(big, a.rss_n, seed=3)
            print(f"\nmade a Parquet dump of {a.rss_n:,} records in {time.perf_counter() - t:.0f} s "
                  f"({big.stat().st_size / 1e9:.2f} GB)")
            peak = _peak_rss(big, tmp / "rss_out.parquet")
            rep = peak["report"]
            res["rss"] = {"n": a.rss_n, "peak_rss_mb": peak["main_mb"], "largest_child_rss_mb": peak["largest_child_mb"],
                          "tree_rss_mb": peak["tree_mb"], "tree_pss_mb": peak["tree_pss_mb"], "report": rep}
            print(f"  peak RSS of `memir score`: {peak['main_mb']:,.0f} MB; largest decider process "
                  f"{peak['largest_child_mb']:,.0f} MB; all its processes at once {peak['tree_pss_mb']:,.0f} MB PSS "
                  f"({peak['tree_mb']:,.0f} MB as the sum of their RSS)   "
                  f"(goal: <= 1,024 MB); {rep['records_per_s']:,.0f} records/s, {rep['spilled']:,} rows spilled")
    out = ROOT / "reports" / "bench_batch.json"
    out.write_text(json.dumps(res, indent=2, default=str))
    _plot(res, ROOT / "reports" / "bench_batch.png")
    print(f"\nsaved {out.relative_to(ROOT)} and reports/bench_batch.png")
    return 0


def _stored_context_section(tmp: Path, bare: Path, n: int, first: dict[str, Any]) -> dict[str, Any]:
    """The same records with the features stored in the dump (session context and text statistics,
    as ``Scope.snapshot`` writes them) against the dump without them (computed while deciding),
    alternated three times in this process; the decisions must agree."""
    import pyarrow.parquet as pq

    dump = tmp / "stored.parquet"
    t = time.perf_counter()
    write_parquet(dump, n, context=True)
    made = time.perf_counter() - t
    stored, computed = [], [first]
    for k in range(3):
        stored.append(_score(dump, tmp / "os.parquet"))
        if k < 2:
            computed.append(_score(bare, tmp / "ob.parquet"))
    a = pq.read_table(tmp / "os.parquet", columns=["id", "model_utility", "action"]).sort_by("id")
    b = pq.read_table(tmp / "ob.parquet", columns=["id", "model_utility", "action"]).sort_by("id")
    diff = float(np.abs(np.asarray(a.column("model_utility").to_numpy()) - np.asarray(b.column("model_utility").to_numpy())).max())
    same = a.column("id").equals(b.column("id")) and a.column("action").equals(b.column("action"))
    rs, rc = [r["records_per_s"] for r in stored], [r["records_per_s"] for r in computed]
    dump.unlink()
    print(f"  features stored in the dump (written with them in {made:.0f} s): {', '.join(f'{x:,.0f}' for x in rs)} "
          f"records/s; computed while deciding: {', '.join(f'{x:,.0f}' for x in rc)} records/s  [baseline]; "
          f"ratio of medians {np.median(rs) / np.median(rc):.2f}x; decisions the same: {same}, "
          f"max |model utility difference| {diff:.1e}")
    return {"stored": stored, "computed": computed, "ratio": float(np.median(rs) / np.median(rc)),
            "same_actions": same, "max_model_utility_diff": diff, "write_s": round(made, 1)}


def _default_options_section(tmp: Path, dump: Path) -> dict[str, Any]:
    """The CLI's default options (redundancy features within each scope; the figures above leave them
    out) with each decider process's BLAS limited to its share of the CPUs, as memir runs it, against
    the same run with BLAS on every CPU in every process (the code before the limit) [baseline],
    alternated twice; the decisions must agree."""
    import pyarrow.parquet as pq

    from runtime.batch import processes

    limited, unlimited = [], []
    share = processes.worker_threads
    for _ in range(2):
        limited.append(_score(dump, tmp / "ol.parquet", redundancy="batch"))
        processes.worker_threads = lambda workers: share(1)  # type: ignore[assignment]
        try:
            unlimited.append(_score(dump, tmp / "ou.parquet", redundancy="batch"))
        finally:
            processes.worker_threads = share  # type: ignore[assignment]
    a = pq.read_table(tmp / "ol.parquet", columns=["id", "model_utility", "action"]).sort_by("id")
    b = pq.read_table(tmp / "ou.parquet", columns=["id", "model_utility", "action"]).sort_by("id")
    diff = float(np.abs(np.asarray(a.column("model_utility").to_numpy()) - np.asarray(b.column("model_utility").to_numpy())).max())
    same = a.column("id").equals(b.column("id")) and a.column("action").equals(b.column("action"))
    rl, ru = [r["records_per_s"] for r in limited], [r["records_per_s"] for r in unlimited]
    print(f"  default options (redundancy features), decider BLAS limited to its share of the CPUs: "
          f"{', '.join(f'{x:,.0f}' for x in rl)} records/s; BLAS on every CPU in every decider: "
          f"{', '.join(f'{x:,.0f}' for x in ru)} records/s  [baseline]; ratio of medians "
          f"{np.median(rl) / np.median(ru):.2f}x; decisions the same: {same}, max |model utility difference| {diff:.1e}")
    return {"limited": limited, "unlimited": unlimited, "ratio": float(np.median(rl) / np.median(ru)),
            "same_actions": same, "max_model_utility_diff": diff}


def _plot(res: dict[str, Any], path: Path) -> None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    bars = [("Parquet\ncolumnar", res["parquet"]["local"]["records_per_s"]),
            ("Parquet, stored\nfeatures", float(np.median([r["records_per_s"] for r in
                                                           res["parquet"]["stored_context"]["stored"]]))),
            ("Parquet\nrecord path", res["parquet"]["rows"]["records_per_s"]),
            ("JSONL\ncolumnar", res["jsonl"]["local"]["records_per_s"]),
            ("JSONL\nrecord path", res["jsonl"]["rows"]["records_per_s"])]
    if "ray" in res:
        big = res["ray"]["sizes"][-1]
        size = f"{big['n'] / 1e6:g}M" if big["n"] >= 1_000_000 else f"{big['n'] // 1000}k"
        bars.append((f"Parquet {size}\nRay, 2 nodes", big["ray_rps"]))
    fig, ax = plt.subplots(figsize=(8, 4))
    ax.bar([b[0] for b in bars], [b[1] for b in bars], color=["#2a6", "#1a5", "#999", "#2a6", "#999", "#36c"][:len(bars)])
    for k, (_, v) in enumerate(bars):
        ax.text(k, v, f"{v:,.0f}", ha="center", va="bottom", fontsize=9)
    ax.set_ylabel("records / s (end to end)")
    ax.set_title("memir score on a 2-core machine (capacity 200 per scope, 1,000 scopes)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    raise SystemExit(main())
