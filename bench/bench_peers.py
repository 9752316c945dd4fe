"""memir beside the stores an agent would otherwise use, on one workload, side by side.

Peers: LangGraph's ``SqliteStore`` (sqlite-vec) and ``InMemoryStore``, Chroma ``PersistentClient``,
Qdrant in local mode, and mem0 OSS with ``infer=False`` (no LLM: each message stored as is, in its
default Qdrant store). They are installed at pinned versions into an isolated virtual environment
this script builds itself (``--peers-venv``, reused while the pins are unchanged), so none of them
enters memir's own environment.

The workload (bench/peers_worker.py runs it in every store, each in its own process), once per
size in ``--sizes`` (a fresh store each time):
- that many memories of varied agent facts (bookings, orders, people, preferences, incidents),
  spread evenly over ``--users`` users, embedded once with all-MiniLM-L6-v2 (memir's default
  encoder; the vectors are cached under ``~/.cache/memir``); every store is handed those same
  vectors by an embedding function that looks them up;
- ingest in batches of up to ``--batch`` memories of one user, each store through its own batch
  call (memir ``write_many``, redaction on, as by default; ``--batch 1``: one call per memory);
- ``--queries`` questions, each asked inside its user's namespace (the filter every store has), k
  = 10; memir's is its default ``recall`` (usage tracking and the recall log included). A store
  whose queries take longer than ``--query-budget`` seconds in all is measured on those it finished.

Figures per store and size: ingest/s, search p50/p99, recall@10 against the exact cosine top-10
within the user (``exact``), whether the memory a question was written from is in the top 10
(``source``), hits from another user (must be 0), and the bytes on disk. Ratios are against memir,
measured in the same run. memir's recall re-ranks by confidence × freshness × role (all equal here),
so its ranking is the cosine ranking plus that re-rank; memir's write also redacts, types and
session-tracks each memory, which the peers do not do.

    python bench/bench_peers.py                  # 1,000 users; 10k and 100k memories; 400 queries
    python bench/bench_peers.py --sizes 10000 --only memir chroma
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import subprocess
import sys
import tempfile
import venv
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
WORKER = Path(__file__).resolve().parent / "peers_worker.py"

PEERS = ["langgraph==1.2.22", "langgraph-checkpoint-sqlite==3.1.2", "sqlite-vec==0.1.9", "chromadb==1.5.9",
         "qdrant-client==1.20.0", "mem0ai==2.2.1", "numpy", "pysqlite3-binary==0.5.4.post2"]
"""The peers, pinned: a figure names the version it measured. (pysqlite3-binary: sqlite-vec is a
loadable extension, and some Python builds' sqlite3 cannot load extensions.)"""

STORES = ["memir", "langgraph-sqlite", "langgraph-memory", "chroma", "qdrant", "mem0"]

_SLOTS = {
    "city": ["Lisbon", "Osaka", "Denver", "Nairobi", "Oslo", "Quito", "Hanoi", "Porto", "Austin", "Krakow", "Seville",
             "Tbilisi", "Perth", "Bergen", "Cusco", "Gdansk"],
    "name": ["Priya", "Marcus", "Elena", "Tomasz", "Aiko", "Fatima", "Diego", "Sven", "Chloe", "Ravi", "Ingrid",
             "Kwame", "Lucia", "Omar", "Yuki", "Noah"],
    "product": ["standing desk", "espresso machine", "noise-cancelling headphones", "e-bike", "air purifier",
                "router", "label printer", "robot vacuum", "monitor arm", "sleeping bag", "drone", "smartwatch"],
    "food": ["peanuts", "shellfish", "gluten", "lactose", "sesame", "eggs", "soy", "kiwi"],
    "project": ["Atlas", "Beacon", "Cobalt", "Delta", "Ember", "Falcon", "Granite", "Harbor", "Iris", "Juniper"],
    "tool": ["Terraform", "Airflow", "Grafana", "Kafka", "dbt", "Jenkins", "Sentry", "Notion", "Figma", "Postgres"],
    "day": ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"],
    "relation": ["daughter", "son", "partner", "mother", "father", "flatmate", "brother", "sister"],
    "hobby": ["bouldering", "sourdough baking", "birdwatching", "chess", "trail running", "pottery", "sailing"],
}

_TEMPLATES = [
    ("I booked a flight to {city} leaving {day} the {n}th.", "When is my flight to {city}?"),
    ("Order {n} for the {product} is delayed; the courier says {day}.", "What happened with my {product} order?"),
    ("My {relation} {name} is allergic to {food}.", "What is {name} allergic to?"),
    ("The {product} stopped working after the firmware update {n}.", "Why did my {product} stop working?"),
    ("Meeting with {name} about project {project} moved to {day} at {n}:00.", "When do I meet {name} about {project}?"),
    ("Project {project} uses {tool} for its nightly jobs.", "Which tool does {project} use?"),
    ("The budget for project {project} is {n} thousand this quarter.", "What is the {project} budget?"),
    ("I prefer window seats and I am trying to learn {hobby}.", "What hobby am I learning?"),
    ("{name} from the {city} office owns the {tool} setup.", "Who owns {tool} in {city}?"),
    ("Return the {product} before day {n} to get the refund.", "How long do I have to return the {product}?"),
    ("My {relation} {name} starts {hobby} lessons on {day}.", "When does {name} start {hobby}?"),
    ("Incident {n}: {tool} alerts failed for project {project}.", "What went wrong with {tool} on {project}?"),
]


def make_workload(users: int, size: int, queries: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    ids, owners, texts, slots_of = [], [], [], []
    for u in range(users):
        per_user = size // users + (u < size % users)
        seen: set[str] = set()
        while len(seen) < per_user:
            k = rng.randrange(len(_TEMPLATES))
            slots = {name: rng.choice(vals) for name, vals in _SLOTS.items()}
            slots["n"] = str(rng.randint(2, 99))
            text = _TEMPLATES[k][0].format(**slots)
            if text in seen:
                continue
            seen.add(text)
            ids.append(f"m{len(ids):06d}")
            owners.append(f"user-{u:04d}")
            texts.append(text)
            slots_of.append((k, slots))
    qs = []
    for _ in range(queries):
        i = rng.randrange(len(ids))
        k, slots = slots_of[i]
        qs.append({"user": owners[i], "text": _TEMPLATES[k][1].format(**slots), "source": ids[i]})
    return {"ids": ids, "users": owners, "texts": texts, "queries": qs}


def embed_cached(texts: list[str], cache: Path) -> np.ndarray:
    """all-MiniLM-L6-v2 vectors of ``texts``, cached by their hash (100k take minutes on 2 cores)."""
    key = hashlib.sha256("\n".join(texts).encode()).hexdigest()[:20]
    path = cache / f"peers-{key}.npy"
    if path.exists():
        return np.load(path)
    from runtime.encoders import load_default_embedder

    vecs = load_default_embedder().encode(texts).astype(np.float32)
    cache.mkdir(parents=True, exist_ok=True)
    np.save(path, vecs)
    return vecs


def peers_python(venv_dir: Path) -> Path:
    """The isolated environment's interpreter, built (or rebuilt when the pins change) on first use."""
    stamp = hashlib.sha256(json.dumps(PEERS).encode()).hexdigest()[:16]
    py = venv_dir / "bin" / "python"
    if (venv_dir / "memir-peers.stamp").exists() and (venv_dir / "memir-peers.stamp").read_text() == stamp:
        return py
    print(f"building the peers' environment in {venv_dir} ({', '.join(PEERS)}) ...", flush=True)
    venv.EnvBuilder(with_pip=True, clear=True).create(venv_dir)
    r = subprocess.run([str(py), "-m", "pip", "install", "--quiet", *PEERS], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"installing the peers failed:\n{r.stderr[-3000:]}")
    (venv_dir / "memir-peers.stamp").write_text(stamp)
    return py


def exact_top(vectors: np.ndarray, owners: list[str], ids: list[str], queries: list[dict[str, str]],
              qvectors: np.ndarray, k: int = 10) -> list[list[str]]:
    owners_arr = np.array(owners)
    out = []
    for q, v in zip(queries, qvectors):
        rows = np.flatnonzero(owners_arr == q["user"])
        sims = vectors[rows] @ v
        out.append([ids[rows[j]] for j in np.argsort(-sims, kind="stable")[:k]])
    return out


def run_size(size: int, a: argparse.Namespace, stores: list[str], py_peers: Path | None) -> dict[str, Any]:
    w = make_workload(a.users, size, a.queries, a.seed)
    vectors = embed_cached(w["texts"], a.cache)
    qvectors = embed_cached([q["text"] for q in w["queries"]], a.cache)
    truth = exact_top(vectors, w["users"], w["ids"], w["queries"], qvectors)
    print(f"\n{len(w['ids']):,} memories of {a.users:,} users, {len(w['queries'])} queries, all-MiniLM-L6-v2 "
          f"vectors ({vectors.shape[1]}-d), ingest in batches of {a.batch}, search inside the user, k = 10",
          flush=True)
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="memir-peers-") as d:
        wdir = Path(d) / "workload"
        wdir.mkdir()
        (wdir / "workload.json").write_text(json.dumps(w))
        np.save(wdir / "vectors.npy", vectors)
        np.save(wdir / "qvectors.npy", qvectors)
        for name in stores:
            py = sys.executable if name == "memir" else str(py_peers)
            env = {**os.environ, "PYTHONPATH": str(ROOT) if name == "memir" else ""}
            r = subprocess.run([py, str(WORKER), name, str(wdir), str(Path(d) / name), str(a.batch),
                                str(a.query_budget)], capture_output=True, text=True, env=env, cwd=d)
            if r.returncode != 0:
                print(f"  {name}: failed — {r.stderr.strip().splitlines()[-1] if r.stderr.strip() else r.returncode}")
                out[name] = {"error": r.stderr[-3000:]}
                continue
            rep = json.loads(r.stdout.strip().splitlines()[-1])
            results = rep.pop("results")
            rep["recall_at_10_exact"] = float(np.mean([len(set(h) & set(t)) / len(t) for h, t in zip(results, truth)]))
            rep["source_in_top_10"] = float(np.mean([q["source"] in h for q, h in zip(w["queries"], results)]))
            out[name] = rep
            print(f"  {name}: {rep['ingest_per_s']:,.0f} ingested/s, search p50 {rep['query_p50_ms']:.2f} ms "
                  f"({rep['queries']} queries)", flush=True)
    return out


def table(size: int, stores: dict[str, Any]) -> str:
    base = stores.get("memir", {})
    lines = [f"  {size:,} memories", f"  {'store':<18} {'ingest/s':>9} {'search p50':>11} {'p99':>9} {'recall@10':>10} "
             f"{'source@10':>10} {'other users':>12} {'disk MB':>8}   memir ÷ store: ingest, p50"]
    for name, r in stores.items():
        if "error" in r:
            lines.append(f"  {name:<18} failed")
            continue
        ratio = "" if name == "memir" or "error" in base else (
            f"   {base['ingest_per_s'] / r['ingest_per_s']:.2f}x, {base['query_p50_ms'] / r['query_p50_ms']:.2f}x")
        lines.append(f"  {name:<18} {r['ingest_per_s']:>9,.0f} {r['query_p50_ms']:>9.2f}ms {r['query_p99_ms']:>7.2f}ms "
                     f"{r['recall_at_10_exact']:>10.3f} {r['source_in_top_10']:>10.3f} {r['other_users_hits']:>12} "
                     f"{r['disk_bytes'] / 1e6:>8.1f}{ratio}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--users", type=int, default=1000)
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--batch", type=int, default=100, help="memories of one user per ingest call")
    ap.add_argument("--queries", type=int, default=400)
    ap.add_argument("--query-budget", type=float, default=120.0, help="seconds of searching per store and size")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--only", nargs="*", default=None, choices=STORES, help="these stores only (memir always runs)")
    ap.add_argument("--peers-venv", type=Path, default=Path.home() / ".cache" / "memir" / "bench-peers-venv")
    ap.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "memir" / "bench-vectors")
    ap.add_argument("--out", type=Path, default=ROOT / "reports" / "bench_peers.json")
    a = ap.parse_args(argv)
    stores = ["memir"] + [s for s in (a.only or STORES) if s != "memir"]
    py_peers = peers_python(a.peers_venv) if len(stores) > 1 else None
    res: dict[str, Any] = {"workload": {"users": a.users, "sizes": a.sizes, "batch": a.batch, "queries": a.queries,
                                        "query_budget_s": a.query_budget, "peers": PEERS}, "sizes": {}}
    for size in a.sizes:
        res["sizes"][str(size)] = run_size(size, a, stores, py_peers)
    print()
    for size in a.sizes:
        print(table(size, res["sizes"][str(size)]) + "\n")
    a.out.write_text(json.dumps(res, indent=2))
    _plot(res, a.out.with_suffix(".png"))
    print(f"saved {a.out} and {a.out.with_suffix('.png')}")
    return 0


def _plot(res: dict[str, Any], path: Path) -> None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    sizes = list(res["sizes"])
    names = list(dict.fromkeys(n for s in sizes for n, r in res["sizes"][s].items() if "error" not in r))
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2))
    width = 0.8 / max(len(sizes), 1)
    for ax, key, label in ((axes[0], "ingest_per_s", f"ingest / s (batches of {res['workload']['batch']})"),
                           (axes[1], "query_p50_ms", "search p50 (ms), inside the user, k = 10"),
                           (axes[2], "recall_at_10_exact", "recall@10 vs exact cosine")):
        for j, size in enumerate(sizes):
            ok = res["sizes"][size]
            xs = [k + (j - (len(sizes) - 1) / 2) * width for k, n in enumerate(names) if n in ok and "error" not in ok[n]]
            vals = [ok[n][key] for n in names if n in ok and "error" not in ok[n]]
            ax.bar(xs, vals, width, label=f"{int(size):,} memories")
            for x, v in zip(xs, vals):
                ax.text(x, v, f"{v:,.2f}" if v < 100 else f"{v:,.0f}", ha="center", va="bottom", fontsize=6)
        if key != "recall_at_10_exact":
            ax.set_yscale("log")  # the stores differ by orders of magnitude
        ax.set_xticks(range(len(names)), names, rotation=35, fontsize=8)
        ax.set_title(label, fontsize=10)
    axes[0].legend(fontsize=8)
    fig.suptitle(f"memir beside peer stores: {res['workload']['users']:,} users")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    raise SystemExit(main())
