"""memir beside the stores an agent would otherwise use, on one workload, side by side.

Peers: LangGraph's ``SqliteStore`` (sqlite-vec) and ``InMemoryStore``, Chroma ``PersistentClient``,
Qdrant in local mode, and mem0 OSS with ``infer=False`` (no LLM: each message stored as is, in its
default Qdrant store). They are installed at pinned versions into an isolated virtual environment
this script builds itself (``--peers-venv``, reused while the pins are unchanged), so none of them
enters memir's own environment.

The workload (bench/peers_worker.py runs it in every store, each in its own process):
- ``--users`` users × ``--per-user`` memories of varied agent facts (bookings, orders, people,
  preferences, incidents), embedded once with all-MiniLM-L6-v2 (memir's default encoder); every
  store is handed those same vectors by an embedding function that looks them up;
- one ``remember`` call per memory (an agent remembering as it goes);
- ``--queries`` questions, each asked inside its user's namespace (the filter every store has).

Figures per store: writes/s, query p50/p95, recall@10 against the exact cosine top-10 within the
user (``exact``), whether the memory a question was written from is in the top 10 (``source``),
hits from another user (must be 0), and the bytes on disk. Ratios are against memir, measured in
the same run. memir's recall re-ranks by confidence × freshness × role (all equal here), so its
ranking is the cosine ranking plus that re-rank; memir's write also redacts, types and
session-tracks each memory, which the peers do not do.

    python bench/bench_peers.py                 # 20 users x 500 memories, 400 queries
    python bench/bench_peers.py --per-user 100 --queries 100 --only memir chroma
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


def make_workload(users: int, per_user: int, queries: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    ids, owners, texts, slots_of = [], [], [], []
    for u in range(users):
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
            owners.append(f"user-{u:03d}")
            texts.append(text)
            slots_of.append((k, slots))
    qs = []
    for _ in range(queries):
        i = rng.randrange(len(ids))
        k, slots = slots_of[i]
        qs.append({"user": owners[i], "text": _TEMPLATES[k][1].format(**slots), "source": ids[i]})
    return {"ids": ids, "users": owners, "texts": texts, "queries": qs}


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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--users", type=int, default=20)
    ap.add_argument("--per-user", type=int, default=500)
    ap.add_argument("--queries", type=int, default=400)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--only", nargs="*", default=None, choices=STORES, help="these stores only (memir always runs)")
    ap.add_argument("--peers-venv", type=Path, default=Path.home() / ".cache" / "memir" / "bench-peers-venv")
    ap.add_argument("--out", type=Path, default=ROOT / "reports" / "bench_peers.json")
    a = ap.parse_args(argv)
    stores = ["memir"] + [s for s in (a.only or STORES) if s != "memir"]
    py_peers = peers_python(a.peers_venv) if len(stores) > 1 else None

    from runtime.encoders import load_default_embedder

    w = make_workload(a.users, a.per_user, a.queries, a.seed)
    enc = load_default_embedder()
    vectors = enc.encode(w["texts"]).astype(np.float32)
    qvectors = enc.encode([q["text"] for q in w["queries"]]).astype(np.float32)
    truth = exact_top(vectors, w["users"], w["ids"], w["queries"], qvectors)
    print(f"workload: {len(w['ids']):,} memories of {a.users} users, {len(w['queries'])} queries, "
          f"all-MiniLM-L6-v2 vectors ({vectors.shape[1]}-d), one write per call, search inside the user")
    res: dict[str, Any] = {"workload": {"users": a.users, "per_user": a.per_user, "queries": a.queries,
                                        "peers": PEERS}, "stores": {}}
    with tempfile.TemporaryDirectory(prefix="memir-peers-") as d:
        wdir = Path(d) / "workload"
        wdir.mkdir()
        (wdir / "workload.json").write_text(json.dumps(w))
        np.save(wdir / "vectors.npy", vectors)
        np.save(wdir / "qvectors.npy", qvectors)
        for name in stores:
            py = sys.executable if name == "memir" else str(py_peers)
            env = {**os.environ, "PYTHONPATH": str(ROOT) if name == "memir" else ""}
            r = subprocess.run([py, str(WORKER), name, str(wdir), str(Path(d) / name)], capture_output=True, text=True,
                               env=env, cwd=d)
            if r.returncode != 0:
                print(f"  {name}: failed — {r.stderr.strip().splitlines()[-1] if r.stderr.strip() else r.returncode}")
                res["stores"][name] = {"error": r.stderr[-3000:]}
                continue
            rep = json.loads(r.stdout.strip().splitlines()[-1])
            results = rep.pop("results")
            rep["recall_at_10_exact"] = float(np.mean([len(set(h) & set(t)) / len(t) for h, t in zip(results, truth)]))
            rep["source_in_top_10"] = float(np.mean([q["source"] in h for q, h in zip(w["queries"], results)]))
            res["stores"][name] = rep
    base = res["stores"]["memir"]
    print(f"\n  {'store':<18} {'writes/s':>9} {'query p50':>10} {'p95':>8} {'recall@10':>10} {'source@10':>10} "
          f"{'other users':>12} {'disk MB':>8}   vs memir: writes, query p50")
    for name, r in res["stores"].items():
        if "error" in r:
            print(f"  {name:<18} failed (see {a.out.name})")
            continue
        ratio = "" if name == "memir" else (f"   {r['write_per_s'] / base['write_per_s']:.2f}x, "
                                            f"{r['query_p50_ms'] / base['query_p50_ms']:.2f}x")
        print(f"  {name:<18} {r['write_per_s']:>9,.0f} {r['query_p50_ms']:>8.2f}ms {r['query_p95_ms']:>6.2f}ms "
              f"{r['recall_at_10_exact']:>10.3f} {r['source_in_top_10']:>10.3f} {r['other_users_hits']:>12} "
              f"{r['disk_bytes'] / 1e6:>8.1f}{ratio}")
    a.out.write_text(json.dumps(res, indent=2))
    _plot(res, a.out.with_suffix(".png"))
    print(f"\nsaved {a.out} and {a.out.with_suffix('.png')}")
    return 0


def _plot(res: dict[str, Any], path: Path) -> None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    ok = {k: v for k, v in res["stores"].items() if "error" not in v}
    names = list(ok)
    fig, axes = plt.subplots(1, 3, figsize=(13, 4))
    for ax, key, label in ((axes[0], "write_per_s", "writes / s (one per call)"),
                           (axes[1], "query_p50_ms", "query p50 (ms), inside the user"),
                           (axes[2], "recall_at_10_exact", "recall@10 vs exact cosine")):
        vals = [ok[n][key] for n in names]
        if key != "recall_at_10_exact":
            ax.set_yscale("log")  # the stores differ by orders of magnitude
        ax.bar(names, vals, color=["#2a6" if n == "memir" else "#999" for n in names])
        ax.set_title(label, fontsize=10)
        ax.tick_params(axis="x", rotation=35, labelsize=8)
        for k, v in enumerate(vals):
            ax.text(k, v, f"{v:,.2f}" if v < 100 else f"{v:,.0f}", ha="center", va="bottom", fontsize=7)
    fig.suptitle(f"memir beside peer stores: {res['workload']['users']} users x {res['workload']['per_user']} memories")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    raise SystemExit(main())
