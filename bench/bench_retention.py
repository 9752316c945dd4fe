"""Benchmark the retention solvers: greedy, exact and the cvxpy+HiGHS reference, in one run.

Shape (issue 3): N items, K = N/5, 2% must-keep, 2% must-forget, N/10 random implications,
N/50 random exclusions, utilities ~ U(-0.2, 1). Rules are drawn so the instance is feasible.
Prints ms per solve (median of a few repetitions; the cvxpy model is built once and cached, its
cold first solve is shown separately), the objectives side by side and the exact-vs-cvxpy speed-up.

Usage:
    python bench/bench_retention.py            # N = 100, 500, 2,000, 10,000
    python bench/bench_retention.py --quick    # N = 100, 500, 2,000 and fewer repetitions
"""

from __future__ import annotations

import argparse
import statistics
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


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smaller sizes and fewer repetitions")
    ap.add_argument("--reps", type=int, default=None, help="repetitions per timing (default 5, quick 3)")
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


if __name__ == "__main__":
    main()
