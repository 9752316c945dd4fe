"""Benchmark the retention solvers: greedy, exact and the cvxpy+HiGHS reference, in one run.

Shape (issue 3): N items, K = N/5, 2% must-keep, 2% must-forget, N/10 random implications,
N/50 random exclusions, utilities ~ U(-0.2, 1). Rules are drawn so the instance is feasible.
Prints ms per solve (median of a few repetitions; the cvxpy model is built once and cached, its
cold first solve is shown separately), the objectives side by side and the exact-vs-cvxpy speed-up.

At scale (issue 26): N = 100k and 1M candidates, K = N/5, 1% must-keep and 1% must-forget, first
alone (the greedy-optimal case), then with implications and exclusions on 1% of the items each;
``method="auto"`` (what ``Scope.retain`` runs) beside cvxpy + HiGHS at the largest N that cvxpy
finishes within 5 minutes (each cvxpy size runs in a child process that is stopped at the limit).
The time includes drawing the random instance and building the :class:`RetentionProblem` (validation).

Usage:
    python bench/bench_retention.py            # N = 100, 500, 2,000, 10,000, then the scale section
    python bench/bench_retention.py --quick    # N = 100, 500, 2,000, fewer repetitions, no scale section
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from runtime.retention import Quota, RetentionProblem, solve
from runtime.retention.solver.hard import presolve
from runtime.retention.solver.milp_cvxpy import clear_cache


def bench_problem(n: int, seed: int = 0, *, relational: bool = True, quotas: bool = False,
                  budget: bool = False, capacity: bool = True) -> RetentionProblem:
    """The issue-3 benchmark shape (feasible by construction)."""
    rng = np.random.default_rng(seed)
    u = rng.uniform(-0.2, 1.0, n)
    n_rule = max(1, n // 50)
    perm = rng.permutation(n)
    must_keep = np.sort(perm[:n_rule]).tolist()
    implies: list[tuple[int, int]] = []
    excludes: list[tuple[int, int]] = []
    if relational:
        a = rng.integers(0, n, n // 10)
        b = (a + rng.integers(1, n, n // 10)) % n
        implies = list(zip(a.tolist(), b.tolist()))
    closure = presolve(RetentionProblem(utility=u, must_keep=must_keep, implies=implies)).keep
    pool = np.flatnonzero(~closure)
    must_forget = np.sort(rng.choice(pool, n_rule, replace=False)).tolist()
    if relational:
        a = rng.integers(0, n, n // 50)
        b = (a + rng.integers(1, n, n // 50)) % n
        ok = ~(closure[a] & closure[b])
        excludes = list(zip(a[ok].tolist(), b[ok].tolist()))
    qs = []
    if quotas:  # four "source types", each capped at N/20 kept, one with a minimum
        groups = np.array_split(rng.permutation(n), 4)
        qs = [Quota(members=g.tolist(), min=(n // 100 if k == 0 else 0), max=n // 20, name=f"source[{k}]")
              for k, g in enumerate(groups)]
    w = rng.integers(20, 400, n).astype(float) if budget else None  # tokens per memory
    return RetentionProblem(utility=u, capacity=n // 5 if capacity else None, must_keep=must_keep, must_forget=must_forget,
                            implies=implies, excludes=excludes, quotas=qs, weights=w,
                            budget=(float(w.sum()) / 8 if budget else None))


def timed(p: RetentionProblem, method: str, reps: int) -> tuple[float, float, str, str]:
    """Median ms over ``reps`` solves; also the objective, engine and status of the last one."""
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        r = solve(p, method=method)  # type: ignore[arg-type]
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times), r.objective, r.engine, r.status.value


def scale_problem(n: int, *, relational: bool, seed: int = 0) -> RetentionProblem:
    """The scale shape: K = N/5, 1% must-keep, 1% must-forget, and with ``relational`` N/100
    implications and N/100 exclusions between random items (feasible by construction)."""
    rng = np.random.default_rng(seed)
    u = rng.uniform(-0.2, 1.0, n)
    m = max(1, n // 100)
    perm = rng.permutation(n)
    must_keep, pool = np.sort(perm[:m]), perm[m:]
    implies: list[tuple[int, int]] = []
    excludes: list[tuple[int, int]] = []
    if relational:
        a, b = rng.integers(0, n, m), rng.integers(0, n, m)
        ok = a != b
        implies = list(zip(a[ok].tolist(), b[ok].tolist()))
    closure = presolve(RetentionProblem(utility=u, must_keep=must_keep.tolist(), implies=implies)).keep
    must_forget = np.sort(rng.choice(pool[~closure[pool]], m, replace=False))
    if relational:
        a, b = rng.integers(0, n, m), rng.integers(0, n, m)
        ok = (a != b) & ~(closure[a] & closure[b])
        excludes = list(zip(a[ok].tolist(), b[ok].tolist()))
    return RetentionProblem(utility=u, capacity=n // 5, must_keep=must_keep.tolist(), must_forget=must_forget.tolist(),
                            implies=implies, excludes=excludes)


_CVXPY_CHILD = """
import json, sys, time
sys.path.insert(0, {bench!r})
from bench_retention import scale_problem
from runtime.retention import solve
p = scale_problem({n}, relational=True)
t = time.perf_counter()
r = solve(p, method="cvxpy")
print(json.dumps({{"seconds": time.perf_counter() - t, "objective": r.objective, "status": r.status.value}}))
"""


def scale_section(limit_s: float = 300.0) -> None:
    """Retention over 100k and 1M candidates, beside cvxpy at the largest size it finishes in ``limit_s``."""
    print("\nat scale — seconds per decision including drawing the instance and building the problem, method=auto (what retain runs); "
          "K=N/5, 1% must-keep, 1% must-forget")
    goals = {False: 1.0, True: 10.0}
    for relational in (False, True):
        label = "+ implies/excludes on 1% each" if relational else "capacity + must-keep/forget only"
        for n in (100_000, 1_000_000):
            t0 = time.perf_counter()
            p = scale_problem(n, relational=relational)
            built = time.perf_counter()
            r = solve(p, method="auto")
            done = time.perf_counter()
            dt = done - t0
            note = (f"   goal <= {goals[relational]:.0f} s: {'met' if dt <= goals[relational] else 'MISSED'}"
                    if n == 1_000_000 else "")
            print(f"  {label:<34} N={n:>9,}  {dt:7.3f} s (instance + problem {built - t0:6.3f} s, solve {done - built:6.3f} s; "
                  f"{r.engine}, {r.status.value}){note}")
    print(f"  cvxpy + HiGHS on the relational shape, each size stopped at {limit_s:.0f} s:")
    bench_dir = str(Path(__file__).resolve().parent)
    largest = None
    for n in (10_000, 30_000, 100_000, 300_000, 1_000_000):
        code = _CVXPY_CHILD.format(bench=bench_dir, n=n)
        try:
            out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=limit_s,
                                 check=True)
        except subprocess.TimeoutExpired:
            print(f"    N={n:>9,}  did not finish in {limit_s:.0f} s")
            break
        res = json.loads(out.stdout.strip().splitlines()[-1])
        p = scale_problem(n, relational=True)
        t0 = time.perf_counter()
        r = solve(p, method="auto")
        ex = time.perf_counter() - t0
        agree = abs(r.objective - res["objective"]) <= 1e-6 * max(1.0, abs(res["objective"]))
        print(f"    N={n:>9,}  cvxpy {res['seconds']:8.2f} s   auto {ex:7.3f} s   ratio {res['seconds'] / ex:7.1f}×   "
              f"objectives {'equal' if agree else 'DIFFER'} ({r.objective:.4f} vs {res['objective']:.4f})")
        largest = n
    print(f"  largest N cvxpy finished within {limit_s:.0f} s: {largest:,}" if largest else
          f"  cvxpy finished no size within {limit_s:.0f} s")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smaller sizes and fewer repetitions")
    ap.add_argument("--reps", type=int, default=None, help="repetitions per timing (default 5, quick 3)")
    ap.add_argument("--cvxpy-limit", type=float, default=300.0, help="seconds cvxpy gets per size in the scale section")
    args = ap.parse_args(argv)
    sizes = [100, 500, 2000] if args.quick else [100, 500, 2000, 10000]
    reps = args.reps or (3 if args.quick else 5)

    print(f"retention solvers — ms per solve (median of {reps}); shape K=N/5, 2% must-keep, "
          "2% must-forget, N/10 implications, N/50 exclusions")
    hdr = (f"{'N':>6} {'greedy':>9} {'exact':>9} {'cvxpy':>9} {'cvxpy cold':>10} {'speed-up':>9}   "
           f"{'obj greedy':>11} {'obj exact':>11} {'obj cvxpy':>11}  exact engine")
    print(hdr)
    print("-" * len(hdr))
    for n in sizes:
        p = bench_problem(n, seed=n)
        g_ms, g_obj, _, _ = timed(p, "greedy", reps)
        e_ms, e_obj, e_eng, _ = timed(p, "exact", reps)
        clear_cache()
        t0 = time.perf_counter()
        solve(p, method="cvxpy")
        cold = (time.perf_counter() - t0) * 1000
        c_ms, c_obj, _, _ = timed(p, "cvxpy", max(1, min(reps, 3)))
        print(f"{n:>6} {g_ms:>9.2f} {e_ms:>9.2f} {c_ms:>9.1f} {cold:>10.1f} {c_ms / e_ms:>8.1f}×   "
              f"{g_obj:>11.4f} {e_obj:>11.4f} {c_obj:>11.4f}  {e_eng}")
        if abs(e_obj - c_obj) > 1e-6 * max(1.0, abs(c_obj)):
            print(f"       !! exact and cvxpy disagree at N={n}: {e_obj} vs {c_obj}")

    n = 10000
    p = bench_problem(n, seed=1, relational=False)
    print(f"\ngreedy-solvable N={n} (capacity + must-keep/forget only), ms per solve (median of {max(reps, 20)}):")
    for m in ("auto", "exact", "greedy"):
        ms, obj, eng, st = timed(p, m, max(reps, 20))
        print(f"  method={m:<6} {ms:8.3f} ms   objective {obj:.4f}  ({eng}, {st})")

    print("\nother shapes at N=2000 (same implications/exclusions/must-rules plus ...):")
    shapes = (("4 quotas (max N/20, one min)", {"quotas": True}),
              ("token budget, no count cap", {"budget": True, "capacity": False}),
              ("token budget + count cap", {"budget": True}))
    for label, kw in shapes:
        p = bench_problem(2000, seed=7, **kw)
        e_ms, e_obj, e_eng, _ = timed(p, "exact", reps)
        clear_cache()
        solve(p, method="cvxpy")
        c_ms, c_obj, _, _ = timed(p, "cvxpy", max(1, min(reps, 3)))
        g_ms, g_obj, _, g_st = timed(p, "greedy", reps)
        print(f"  {label:<29} exact {e_ms:7.2f} ms ({e_eng:<13}) cvxpy {c_ms:7.1f} ms  speed-up {c_ms / e_ms:5.1f}×  "
              f"obj exact {e_obj:.4f} cvxpy {c_obj:.4f} | greedy {g_ms:6.2f} ms {g_obj:.4f} ({g_st})")
    if not args.quick:
        scale_section(args.cvxpy_limit)


if __name__ == "__main__":
    main()
