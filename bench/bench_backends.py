"""PostgreSQL + pgvector beside SQLite, in one run, through the public API (``bench_store.py --backend postgres``).

For each size (default 100k and 1M memories over 1,000 users):

- write throughput: ``scope.write_many`` with precomputed 384-d embeddings, every memory of every
  user, into an SQLite file and into a PostgreSQL database (redaction off: the store is measured);
- recall p50 / p99 with ``clients`` concurrent client processes (default 8), each opening the store
  itself and recalling for a random user with one of the typed filters that keep ~10% of a user's
  memories (session, sub-role + confidence, time window, tag), k=10; on PostgreSQL a second time
  with the clients' usage bookkeeping written behind (``StoreConfig(usage_flush_s=1)``), side by side;
- HNSW recall@10 against exact search on one large scope (default 100k memories), with and
  without a filter, and the latency of both — two store objects on one database, one with
  ``exact_search_max`` above the scope's size.

The PostgreSQL server is started from the ``pgserver`` wheel (as the unprivileged ``postgres`` user
when run as root), or given by ``MEMIR_PG_DSN``. Goal (issue 11): p50 <= 10 ms at 1M.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_store import DIM, FILTERS, Corpus, unit  # noqa: E402

from runtime import AssemblerConfig, MemoryStore, RecordConfig, StoreConfig  # noqa: E402
from runtime.encoders import HashEmbedder  # noqa: E402

CFG = StoreConfig(annotate=AssemblerConfig(record=RecordConfig(redact=False)))


def _open(target: str, **cfg: Any) -> MemoryStore:
    config = StoreConfig(annotate=CFG.annotate, **cfg)
    return MemoryStore.open(target, embedder=HashEmbedder(dim=DIM), config=config)


def load(target: str, corpus: Corpus, users: int, per: int) -> float:
    """Every user's memories through write_many; returns memories per second."""
    t = time.perf_counter()
    with _open(target) as st:
        for u in range(users):
            sc = st.scope(user_id=f"user{u}")
            for lo in range(u * per, (u + 1) * per, 1000):
                sc.write_many(corpus.items(lo, min((u + 1) * per, lo + 1000)))
            if (u + 1) % max(1, users // 10) == 0:
                print(f"    loaded {u + 1}/{users} users ({(u + 1) * per / (time.perf_counter() - t):,.0f} mem/s)",
                      flush=True)
    return users * per / (time.perf_counter() - t)


def client(target: str, users: int, n_queries: int, seed: int, out: str) -> None:
    """One client process: warm up, then time ``n_queries`` recalls for random users and filters."""
    rng = np.random.default_rng(seed)
    names = list(FILTERS)
    with _open(target, usage_flush_s=float(os.environ.get("MEMIR_BENCH_USAGE_FLUSH_S", "0"))) as st:
        lat = []
        for i in range(n_queries + 20):
            u, f = int(rng.integers(users)), names[int(rng.integers(len(names)))]
            q = unit(rng, 1)[0]
            t = time.perf_counter()
            st.scope(user_id=f"user{u}").recall(q, k=10, **FILTERS[f][0])
            if i >= 20:
                lat.append(time.perf_counter() - t)
    Path(out).write_text(json.dumps(lat))


def concurrent_recall(target: str, users: int, clients: int, n_queries: int, tmp: Path,
                      usage_flush_s: float = 0.0) -> dict[str, float]:
    """``clients`` processes recalling at once; ``usage_flush_s`` > 0: their usage written behind."""
    outs = [tmp / f"lat{i}.json" for i in range(clients)]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
           "MEMIR_BENCH_USAGE_FLUSH_S": str(usage_flush_s), "XDG_CACHE_HOME": str(tmp / "cache")}
    t = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, __file__, "_client", target, str(users), str(n_queries), str(i),
                               str(outs[i])], env=env) for i in range(clients)]
    for p in procs:
        if p.wait() != 0:
            raise RuntimeError(f"a recall client failed ({p.returncode})")
    wall = time.perf_counter() - t
    lat = np.concatenate([json.loads(o.read_text()) for o in outs]) * 1e3
    return {"p50": float(np.percentile(lat, 50)), "p99": float(np.percentile(lat, 99)),
            "qps": len(lat) / wall, "n": len(lat)}


def clustered(rng: np.random.Generator, n: int, n_centers: int, spread: float = 0.75) -> np.ndarray:
    """Unit vectors around ``n_centers`` topics (cosine to their topic ~0.8), the way sentence
    embeddings of real memories cluster; uniform random vectors are the worst case for any ANN index."""
    centers = unit(rng, n_centers)
    x = centers[rng.integers(0, n_centers, n)] + rng.standard_normal((n, DIM)).astype(np.float32) * (spread / DIM ** 0.5)
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def hnsw_recall(url: str, n: int, n_queries: int, rng: np.random.Generator, data: str = "uniform") -> list[str]:
    corpus = Corpus.make(rng, n)
    if data == "clustered":
        corpus.vecs = clustered(rng, n, max(1, n // 50))
    with _open(url, exact_search_max=1000) as st, _open(url, exact_search_max=10 ** 9) as exact_st:
        sc = st.scope(user_id="big")
        t = time.perf_counter()
        for lo in range(0, n, 1000):
            # no session ids here: ten sessions interleaved item by item would close a session at nearly
            # every write, and each close computes features over that session so far (quadratic)
            sc.write_many([{k: v for k, v in item.items() if k != "session_id"}
                           for item in corpus.items(lo, min(n, lo + 1000))])
        fill = time.perf_counter() - t
        _analyze(url)
        t = time.perf_counter()
        built = st.admin_build_indexes()
        build = time.perf_counter() - t
        ex = exact_st.scope(user_id="big")
        lines = [f"  one scope of {n:,} memories, {data} vectors: fill {fill:.0f} s, HNSW index build {build:.0f} s "
                 f"({len(built)} index)"]
        for name, kw in (("no filter", {}), ("tag (10%)", FILTERS["tag"][0]), ("time window (10%)", FILTERS["time_window"][0]),
                         ("sub_role+min_conf", FILTERS["sub_role+min_conf"][0])):
            qs = unit(rng, n_queries) if data == "uniform" else _near(rng, corpus.vecs, n_queries)
            te, ta, overlap = [], [], []
            for q in qs:
                t = time.perf_counter()
                e = [h.record.id for h in ex.recall(q, k=10, **kw)]
                te.append(time.perf_counter() - t)
                t = time.perf_counter()
                a = [h.record.id for h in sc.recall(q, k=10, **kw)]
                ta.append(time.perf_counter() - t)
                overlap.append(len(set(a) & set(e)) / max(1, len(e)))
            lines.append(f"  {name:<18} recall@10 vs exact {np.mean(overlap):.3f} | HNSW p50 "
                         f"{np.percentile(ta, 50) * 1e3:6.2f} ms, exact p50 {np.percentile(te, 50) * 1e3:6.2f} ms "
                         f"-> exact/HNSW {np.percentile(te, 50) / np.percentile(ta, 50):4.1f}x")
        qs = unit(rng, n_queries) if data == "uniform" else _near(rng, corpus.vecs, n_queries)
        truth = [[h.record.id for h in ex.recall(q, k=10, update_usage=False)] for q in qs]
    lines += hnsw_settings(url, qs, truth)
    return lines


HNSW_INDEX_GRID = ((8, 32), (16, 64), (32, 128))
"""(hnsw_m, hnsw_ef_construction) the settings sweep builds; (16, 64) is the default."""
HNSW_EF_GRID = (None, 50, 100, 400)
"""hnsw_ef_search values measured on each index (None = automatic: 200 for the default pool of 50)."""


def hnsw_settings(url: str, qs: np.ndarray, truth: list[list[str]]) -> list[str]:
    """recall@10 against exact search and p50 for each index setting (the index rebuilt in place)
    and each search setting, no filter: what ``StoreConfig.hnsw_*`` trade."""
    import psycopg

    lines = [f"  settings sweep, no filter ({len(qs)} queries): m / ef_construction -> build time; ef_search -> "
             "recall@10, p50"]
    for m, efc in HNSW_INDEX_GRID:
        with psycopg.connect(url, autocommit=True) as conn:
            for (name,) in conn.execute("SELECT indexname FROM pg_indexes WHERE indexname LIKE 'ix_vec_hnsw_%%'").fetchall():
                conn.execute(f"DROP INDEX {name}")
        with _open(url, exact_search_max=1000, hnsw_m=m, hnsw_ef_construction=efc) as st:
            t = time.perf_counter()
            st.admin_build_indexes()
            build = time.perf_counter() - t
        cells = []
        for efs in HNSW_EF_GRID:
            with _open(url, exact_search_max=1000, hnsw_m=m, hnsw_ef_construction=efc, hnsw_ef_search=efs) as st:
                sc = st.scope(user_id="big")
                times, overlap = [], []
                for q, e in zip(qs, truth):
                    t = time.perf_counter()
                    a = [h.record.id for h in sc.recall(q, k=10, update_usage=False)]
                    times.append(time.perf_counter() - t)
                    overlap.append(len(set(a) & set(e)) / max(1, len(e)))
            cells.append(f"ef {'auto' if efs is None else efs}: {np.mean(overlap):.3f} {np.percentile(times, 50) * 1e3:5.2f} ms")
        lines.append(f"    m={m:<2} ef_construction={efc:<3} build {build:6.1f} s | " + " | ".join(cells))
    return lines


def _near(rng: np.random.Generator, vecs: np.ndarray, n: int) -> np.ndarray:
    """Queries near stored memories (a question about something the agent was told)."""
    x = vecs[rng.integers(0, len(vecs), n)] + rng.standard_normal((n, DIM)).astype(np.float32) * (0.75 / DIM ** 0.5)
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def _analyze(url: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ANALYZE")


def _server(tmp: Path) -> tuple[Any, Any]:
    """(make_url(name), stop())."""
    dsn = os.environ.get("MEMIR_PG_DSN")
    if dsn:
        from urllib.parse import urlsplit, urlunsplit

        import psycopg

        def make(name: str) -> str:
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
                conn.execute(f'CREATE DATABASE "{name}"')
            p = urlsplit(dsn)
            return urlunsplit((p.scheme, p.netloc, f"/{name}", p.query, p.fragment))
        return make, lambda: None
    from runtime.store.postgres.local import LocalPostgres

    base = tmp / "pg"
    base.mkdir()
    os.chmod(tmp, 0o755)
    os.chmod(base, 0o755)
    pg = LocalPostgres(base / "data").start()
    return pg.dsn, pg.stop


def run(sizes: list[int], users: int, clients: int, n_queries: int, hnsw_n: int, seed: int) -> int:
    rng = np.random.default_rng(seed)
    print(f"[backends: SQLite vs PostgreSQL + pgvector] dim={DIM}, {users} users, {clients} client processes, "
          f"{n_queries} recalls per client, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="memir-bench-pg-") as d:
        tmp = Path(d)
        make_url, stop = _server(tmp)
        try:
            for n in sizes:  # (none: only the HNSW section)
                per = n // users
                corpus = Corpus.make(rng, users * per)
                print(f"\n  -- {users * per:,} memories ({users} users x {per}) --", flush=True)
                targets = {"sqlite": str(tmp / f"s{n}.sqlite"), "postgres": make_url(f"bench_{n}")}
                for name, target in targets.items():
                    print(f"  {name}: loading", flush=True)
                    wps = load(target, corpus, users, per)
                    if name == "postgres":
                        _analyze(target)
                    r = concurrent_recall(target, users, clients, n_queries, tmp)
                    results[f"{name}@{n}"] = {"write_per_s": wps, **r}
                    print(f"  {name:<9} write {wps:8,.0f} mem/s | recall with {clients} clients: p50 {r['p50']:6.2f} "
                          f"ms, p99 {r['p99']:7.2f} ms, {r['qps']:6.0f} recalls/s ({r['n']} timed)", flush=True)
                    if name == "postgres":  # the same clients with their usage written behind (usage_flush_s=1)
                        b = concurrent_recall(target, users, clients, n_queries, tmp, usage_flush_s=1.0)
                        results[f"{name}+usage_behind@{n}"] = b
                        print(f"  {'  usage written behind':<9}: p50 {b['p50']:6.2f} ms ({b['p50'] / r['p50']:.2f}x), "
                              f"p99 {b['p99']:7.2f} ms, {b['qps']:6.0f} recalls/s", flush=True)
                s, p = results[f"sqlite@{n}"], results[f"postgres@{n}"]
                print(f"  postgres/sqlite: write {p['write_per_s'] / s['write_per_s']:.2f}x, p50 "
                      f"{p['p50'] / s['p50']:.2f}x, p99 {p['p99'] / s['p99']:.2f}x, throughput "
                      f"{p['qps'] / s['qps']:.2f}x")
            print("\n[HNSW recall@10 against exact search, PostgreSQL]", flush=True)
            for data in ("uniform", "clustered"):
                for line in hnsw_recall(make_url(f"bench_hnsw_{data}"), hnsw_n, 100, rng, data):
                    print(line, flush=True)
        finally:
            stop()
    if not sizes:
        return 0
    big = max(sizes)
    p50 = results[f"postgres@{big}"]["p50"]
    print(f"\n  goal: PostgreSQL recall p50 <= 10 ms at 1M with {clients} clients: p50 at {big:,} = {p50:.2f} ms -> "
          f"{'met' if p50 <= 10 and big >= 1_000_000 else ('MISSED' if big >= 1_000_000 else 'not measured at 1M')}")
    out = ROOT / "reports" / "bench_backends.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=2))
    print(f"  figures written to {out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_client":
        client(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6])
    else:
        print("run it as: python bench/bench_store.py --backend postgres", file=sys.stderr)
        raise SystemExit(2)
