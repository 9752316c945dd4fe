"""Integrations benchmark: the async scope against the sync path, and MCP recall over stdio.

Prints, side by side in one run (every figure through the public API a user calls):

- **async throughput**: 100 coroutines each doing ``await scope.awrite(...)`` (then
  ``arecall``), gathered, against the same 100 calls made one after another through the sync
  ``scope.write`` / ``scope.recall`` on a store of the same kind — the real ONNX encoder, an SQLite
  file. Rounds alternate between the two so a noisy neighbour hits both. Also the longest
  event-loop stall seen by a 1 ms heartbeat while the coroutines run;
- **MCP recall round-trip**: ``memir mcp serve DB --user alice`` started over stdio by the MCP
  SDK's own client, ``recall`` called repeatedly (p50/p99 ms), beside the same recall made
  in-process through ``scope.recall`` on the same store.

Writes ``reports/bench_integrations.json`` and ``reports/bench_integrations.png``.

Usage:
    python bench/bench_integrations.py            # ~1–2 minutes
    python bench/bench_integrations.py --quick    # smoke check
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from runtime import MemoryStore  # noqa: E402

N_COROUTINES = 100
TOPICS = ["flight to Lisbon on Friday", "budget for project Orion", "allergic to peanuts", "prefers aisle seats",
          "meeting with Ana at 10:30", "hotel booking in Porto", "refund for order 8812", "dentist on Monday"]


def _text(i: int, rnd: int) -> str:
    return f"round {rnd} note {i}: {TOPICS[i % len(TOPICS)]} (item {i * 7919 % 1000})"


async def with_heartbeat(work: Any) -> tuple[Any, float]:
    """Await ``work`` while a 1 ms heartbeat measures the longest the event loop was held up:
    ``(result, longest stall in seconds)``. (tests/integrations/test_async_scope.py uses it too.)"""
    lag = 0.0
    stop = asyncio.Event()

    async def beat() -> None:
        nonlocal lag
        while not stop.is_set():
            t = time.perf_counter()
            await asyncio.sleep(0.001)
            lag = max(lag, time.perf_counter() - t - 0.001)

    hb = asyncio.create_task(beat())
    await asyncio.sleep(0)
    try:
        out = await work
    finally:
        stop.set()
        await hb
    return out, lag


async def _async_round(scope: Any, rnd: int) -> tuple[float, float, float]:
    async def work() -> tuple[float, float]:
        t0 = time.perf_counter()
        await asyncio.gather(*(scope.awrite(_text(i, rnd), session_id=f"a{rnd}") for i in range(N_COROUTINES)))
        t1 = time.perf_counter()
        await asyncio.gather(*(scope.arecall(TOPICS[i % len(TOPICS)], k=5) for i in range(N_COROUTINES)))
        return t1 - t0, time.perf_counter() - t1

    (w, r), lag = await with_heartbeat(work())
    return w, r, lag


def _sync_round(scope: Any, rnd: int) -> tuple[float, float]:
    t0 = time.perf_counter()
    for i in range(N_COROUTINES):
        scope.write(_text(i, rnd), session_id=f"s{rnd}")
    t1 = time.perf_counter()
    for i in range(N_COROUTINES):
        scope.recall(TOPICS[i % len(TOPICS)], k=5)
    return t1 - t0, time.perf_counter() - t1


def bench_async(a_target: Any, s_target: Any, rounds: int) -> dict[str, Any]:
    """Async (100 coroutines) vs sync (the same 100 calls in a loop), alternating rounds."""
    with MemoryStore.open(a_target) as a_store, MemoryStore.open(s_target) as s_store:
        a, s = a_store.scope(user_id="alice"), s_store.scope(user_id="alice")
        s.write("warm-up")
        a.write("warm-up")
        s.recall("warm-up", k=1)
        sw, sr, aw, ar, lags = [], [], [], [], []
        for rnd in range(rounds):
            w, r = _sync_round(s, rnd)
            sw.append(w)
            sr.append(r)
            w, r, lag = asyncio.run(_async_round(a, rnd))
            aw.append(w)
            ar.append(r)
            lags.append(lag)
    med = statistics.median
    out = {
        "coroutines": N_COROUTINES, "rounds": rounds,
        "sync_write_per_s": N_COROUTINES / med(sw), "async_write_per_s": N_COROUTINES / med(aw),
        "sync_recall_per_s": N_COROUTINES / med(sr), "async_recall_per_s": N_COROUTINES / med(ar),
        "max_loop_stall_ms": max(lags) * 1000, "median_loop_stall_ms": med(lags) * 1000,
    }
    out["write_speedup"] = out["async_write_per_s"] / out["sync_write_per_s"]
    out["recall_speedup"] = out["async_recall_per_s"] / out["sync_recall_per_s"]
    return out


def bench_mcp(tmp: Path, calls: int) -> dict[str, Any]:
    """MCP ``recall`` over stdio (the SDK's own client spawning ``memir mcp serve``) vs in-process."""
    db = tmp / "mcp.sqlite"
    with MemoryStore.open(db) as store:
        s = store.scope(user_id="alice")
        s.write_many([_text(i, 0) for i in range(200)])
        s.recall("warm-up", k=1)
        inproc = []
        for i in range(calls):
            t = time.perf_counter()
            s.recall(TOPICS[i % len(TOPICS)], k=5)
            inproc.append(time.perf_counter() - t)
    stdio = asyncio.run(recall_round_trips(db, [TOPICS[i % len(TOPICS)] for i in range(calls)]))
    q = statistics.quantiles
    return {
        "calls": calls,
        "mcp_stdio_p50_ms": statistics.median(stdio) * 1000, "mcp_stdio_p99_ms": q(stdio, n=100)[98] * 1000,
        "in_process_p50_ms": statistics.median(inproc) * 1000, "in_process_p99_ms": q(inproc, n=100)[98] * 1000,
    }


def server_params(db: Path, *args: str) -> Any:
    """How an MCP client spawns ``memir mcp serve DB ARGS`` over stdio from this source tree."""
    import os

    from mcp import StdioServerParameters

    env = {k: os.environ[k] for k in ("MEMIR_ENCODER_DIR", "PYTHONPATH", "PATH", "HOME") if k in os.environ}
    return StdioServerParameters(command=sys.executable, args=["-m", "runtime.cli", "mcp", "serve", str(db), *args],
                                 cwd=str(ROOT), env=env)


async def recall_round_trips(db: Path, queries: list[str], user: str = "alice") -> list[float]:
    """Seconds per MCP ``recall`` over stdio, one per query, on one connection to a spawned
    ``memir mcp serve DB --user USER`` (the MCP SDK's own client; the store must exist)."""
    from mcp import Client
    from mcp.client.stdio import stdio_client

    async with Client(stdio_client(server_params(db, "--user", user))) as client:
        await client.call_tool("recall", {"query": queries[0], "k": 5})  # warm-up (connection, caches)
        times = []
        for q in queries:
            t = time.perf_counter()
            r = await client.call_tool("recall", {"query": q, "k": 5})
            times.append(time.perf_counter() - t)
            if r.is_error:
                raise RuntimeError(f"recall over MCP failed: {r.content}")
    return times


def _plot(res: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    a = res["async"]
    ax = axes[0]
    labels = ["write", "recall"]
    x = range(len(labels))
    ax.bar([i - 0.2 for i in x], [a["sync_write_per_s"], a["sync_recall_per_s"]], 0.4, label="sync loop")
    ax.bar([i + 0.2 for i in x], [a["async_write_per_s"], a["async_recall_per_s"]], 0.4,
           label=f"{a['coroutines']} coroutines")
    ax.set_xticks(list(x), labels)
    ax.set_ylabel("calls / s")
    ax.set_title("async scope vs sync path (ONNX encoder, SQLite)")
    ax.legend()
    if "mcp" in res:
        m = res["mcp"]
        ax = axes[1]
        ax.bar(["in-process recall", "MCP recall (stdio)"], [m["in_process_p50_ms"], m["mcp_stdio_p50_ms"]])
        ax.set_ylabel("p50 latency (ms)")
        ax.set_title("recall round-trip")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer rounds and calls")
    ap.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite",
                    help="postgres: the async section also on a local PostgreSQL (pgserver), beside SQLite")
    ap.add_argument("--out", type=Path, default=ROOT / "reports" / "bench_integrations.json")
    args = ap.parse_args()
    rounds, calls = (2, 50) if args.quick else (7, 300)
    res: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        targets = {"sqlite": (tmp / "async.sqlite", tmp / "sync.sqlite")}
        pg = None
        if args.backend == "postgres":
            from runtime.store.postgres.local import LocalPostgres

            for p in (tmp, tmp / "pg"):
                p.mkdir(exist_ok=True)
                p.chmod(0o755)
            pg = LocalPostgres(tmp / "pg" / "data").start()
            targets["postgres"] = (pg.dsn("bench_async"), pg.dsn("bench_sync"))
        try:
            for name, (at, st) in targets.items():
                res["async" if name == "sqlite" else f"async_{name}"] = a = bench_async(at, st, rounds)
                print(f"async scope on {name}, {a['coroutines']} coroutines vs the same calls in a sync loop "
                      f"(median of {rounds}):")
                print(f"  write   sync {a['sync_write_per_s']:8.1f}/s   async {a['async_write_per_s']:8.1f}/s   "
                      f"ratio {a['write_speedup']:.2f}x")
                print(f"  recall  sync {a['sync_recall_per_s']:8.1f}/s   async {a['async_recall_per_s']:8.1f}/s   "
                      f"ratio {a['recall_speedup']:.2f}x")
                print(f"  longest event-loop stall {a['max_loop_stall_ms']:.1f} ms "
                      f"(median round {a['median_loop_stall_ms']:.1f})", flush=True)
        finally:
            if pg is not None:
                pg.stop()
        res["mcp"] = m = bench_mcp(tmp, calls)
        print(f"MCP recall over stdio, {calls} calls: p50 {m['mcp_stdio_p50_ms']:.2f} ms  p99 "
              f"{m['mcp_stdio_p99_ms']:.2f} ms   | in-process scope.recall p50 {m['in_process_p50_ms']:.2f} ms  "
              f"p99 {m['in_process_p99_ms']:.2f} ms   ratio {m['mcp_stdio_p50_ms'] / m['in_process_p50_ms']:.1f}x")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res, indent=2) + "\n")
    _plot(res, args.out.with_suffix(".png"))
    print(f"wrote {args.out} and {args.out.with_suffix('.png')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
