"""One memory store under the peer benchmark's workload (bench/bench_peers.py builds it).

Runs inside the isolated peers environment for the peer stores, and inside memir's own for memir,
so it imports nothing of memir at module level. Every store gets the same memories, the same
precomputed all-MiniLM-L6-v2 vectors (an embedding function that looks them up: no store pays for
embedding) and the same queries. Ingest hands each store batches of up to ``BATCH`` memories of
one user through its own batch call (memir ``write_many``, LangGraph ``batch`` of ``PutOp``, Chroma
``add``, Qdrant ``upsert``, mem0 ``add`` of several messages with ``infer=False``); ``BATCH`` 1 is one
call per memory, an agent remembering as it goes. Then one filtered ``search`` per query, always
inside the querying user's namespace.

    python bench/peers_worker.py STORE WORKLOAD_DIR WORK_DIR [BATCH [QUERY_BUDGET_S]]   # prints one JSON object

STORE: memir | langgraph-sqlite | langgraph-memory | chroma | qdrant | mem0
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

K = 10


class Workload:
    def __init__(self, d: Path) -> None:
        meta = json.loads((d / "workload.json").read_text())
        self.ids: list[str] = meta["ids"]
        self.users: list[str] = meta["users"]
        self.texts: list[str] = meta["texts"]
        self.queries: list[dict[str, str]] = meta["queries"]
        self.vectors = np.load(d / "vectors.npy")
        self.qvectors = np.load(d / "qvectors.npy")
        self.by_text = {t: v for t, v in zip(self.texts, self.vectors)}
        self.by_text.update({q["text"]: v for q, v in zip(self.queries, self.qvectors)})

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [self.by_text[self._text(t)].tolist() for t in texts]

    def _text(self, t: str) -> str:
        if t in self.by_text:
            return t
        return str(json.loads(t)["text"])  # LangGraph's SqliteStore hands over the indexed field as JSON


Remember = Callable[[list[str], str, list[str], np.ndarray], None]
"""``remember(ids, user, texts, vectors)``: one batch of one user's memories."""
Search = Callable[[str, str, np.ndarray], list[str]]


def memir(w: Workload, work: Path) -> tuple[Remember, Search, Callable[[], None]]:
    from runtime import MemoryStore

    store = MemoryStore.open(str(work / "memir.sqlite"))
    scopes: dict[str, Any] = {}
    ours: dict[str, str] = {}

    def scope(user: str) -> Any:
        if user not in scopes:
            scopes[user] = store.scope(user_id=user)
        return scopes[user]

    def remember(mids: list[str], user: str, texts: list[str], vecs: np.ndarray) -> None:
        if len(mids) == 1:
            recs = [scope(user).write(texts[0], embedding=vecs[0])]
        else:
            recs = scope(user).write_many([{"content": t, "embedding": v} for t, v in zip(texts, vecs)])
        for rec, mid in zip(recs, mids):
            ours[rec.id] = mid

    def search(user: str, text: str, vec: np.ndarray) -> list[str]:
        return [ours.get(h.record.id, "?") for h in scope(user).recall(vec, k=K)]

    return remember, search, store.close


def langgraph(w: Workload, work: Path, kind: str) -> tuple[Remember, Search, Callable[[], None]]:
    index = {"dims": w.vectors.shape[1], "embed": w.embed, "fields": ["text"]}
    if kind == "sqlite":
        import sqlite3

        from langgraph.store.sqlite import SqliteStore

        if not hasattr(sqlite3.Connection, "enable_load_extension"):  # this Python cannot load sqlite-vec
            import pysqlite3.dbapi2 as sqlite3  # type: ignore[import-not-found,no-redef]
        conn = sqlite3.connect(str(work / "langgraph.sqlite"), check_same_thread=False, isolation_level=None)
        store: Any = SqliteStore(conn, index=index)  # type: ignore[arg-type]
        store.setup()
        close = conn.close
    else:
        from langgraph.store.memory import InMemoryStore

        store = InMemoryStore(index=index)  # type: ignore[arg-type]

        def close() -> None:
            return None

    from langgraph.store.base import PutOp

    def remember(mids: list[str], user: str, texts: list[str], vecs: np.ndarray) -> None:
        if len(mids) == 1:
            store.put((user, "memories"), mids[0], {"text": texts[0]})
        else:
            store.batch([PutOp((user, "memories"), mid, {"text": t}) for mid, t in zip(mids, texts)])

    def search(user: str, text: str, vec: np.ndarray) -> list[str]:
        return [it.key for it in store.search((user, "memories"), query=text, limit=K)]

    return remember, search, close


def chroma(w: Workload, work: Path) -> tuple[Remember, Search, Callable[[], None]]:
    import chromadb

    client = chromadb.PersistentClient(path=str(work / "chroma"), settings=chromadb.Settings(anonymized_telemetry=False))
    col = client.create_collection("memories", configuration={"hnsw": {"space": "cosine"}}, embedding_function=None)

    def remember(mids: list[str], user: str, texts: list[str], vecs: np.ndarray) -> None:
        col.add(ids=mids, embeddings=vecs.tolist(), documents=texts, metadatas=[{"user_id": user}] * len(mids))

    def search(user: str, text: str, vec: np.ndarray) -> list[str]:
        r = col.query(query_embeddings=[vec.tolist()], n_results=K, where={"user_id": user}, include=[])
        return list(r["ids"][0])

    return remember, search, lambda: None


def qdrant(w: Workload, work: Path) -> tuple[Remember, Search, Callable[[], None]]:
    from qdrant_client import QdrantClient
    from qdrant_client.models import Distance, FieldCondition, Filter, MatchValue, PointStruct, VectorParams

    client = QdrantClient(path=str(work / "qdrant"))
    client.create_collection("memories", vectors_config=VectorParams(size=w.vectors.shape[1], distance=Distance.COSINE))
    ids: dict[int, str] = {}

    def remember(mids: list[str], user: str, texts: list[str], vecs: np.ndarray) -> None:
        points = []
        for mid, t, v in zip(mids, texts, vecs):
            n = len(ids)
            ids[n] = mid
            points.append(PointStruct(id=n, vector=v.tolist(), payload={"user_id": user, "text": t}))
        client.upsert("memories", points)

    def search(user: str, text: str, vec: np.ndarray) -> list[str]:
        flt = Filter(must=[FieldCondition(key="user_id", match=MatchValue(value=user))])
        res = client.query_points("memories", query=vec.tolist(), query_filter=flt, limit=K)
        return [ids[int(p.id)] for p in res.points]

    return remember, search, client.close


def mem0(w: Workload, work: Path) -> tuple[Remember, Search, Callable[[], None]]:
    os.environ.setdefault("OPENAI_API_KEY", "unused: infer=False never calls the LLM")
    os.environ.setdefault("MEM0_TELEMETRY", "False")
    from mem0 import Memory

    m = Memory.from_config({
        "vector_store": {"provider": "qdrant", "config": {"path": str(work / "mem0-qdrant"), "collection_name": "memories",
                                                          "embedding_model_dims": int(w.vectors.shape[1]),
                                                          "on_disk": True}},
        "history_db_path": str(work / "mem0-history.db"),
    })

    class Lookup:  # the same precomputed vectors as every other store
        def embed(self, text: str, memory_action: str | None = None) -> list[float]:
            return w.embed([text])[0]

        def embed_batch(self, texts: list[str], memory_action: str | None = None) -> list[list[float]]:
            return w.embed(texts)

    m.embedding_model = Lookup()
    ours: dict[str, str] = {}

    by_content = {(u, t): mid for u, t, mid in zip(w.users, w.texts, w.ids)}

    def remember(mids: list[str], user: str, texts: list[str], vecs: np.ndarray) -> None:
        # infer=False stores each message as it is: one memory per message
        out = m.add([{"role": "user", "content": t} for t in texts], user_id=user, infer=False)
        for r in out.get("results", []):
            ours[r["id"]] = by_content.get((user, r.get("memory", "")), "?")

    def search(user: str, text: str, vec: np.ndarray) -> list[str]:
        out = m.search(text, filters={"user_id": user}, top_k=K, threshold=0.0)
        return [ours.get(r["id"], "?") for r in out.get("results", [])]

    return remember, search, lambda: None


STORES: dict[str, Callable[[Workload, Path], tuple[Remember, Search, Callable[[], None]]]] = {
    "memir": memir,
    "langgraph-sqlite": lambda w, d: langgraph(w, d, "sqlite"),
    "langgraph-memory": lambda w, d: langgraph(w, d, "memory"),
    "chroma": chroma,
    "qdrant": qdrant,
    "mem0": mem0,
}


def du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def batches(w: Workload, size: int) -> list[tuple[int, int]]:
    """``(start, end)`` of runs of up to ``size`` consecutive memories of one user."""
    out, start = [], 0
    for i in range(1, len(w.ids) + 1):
        if i == len(w.ids) or w.users[i] != w.users[start] or i - start == size:
            out.append((start, i))
            start = i
    return out


def main(argv: list[str]) -> int:
    name, wdir, work = argv[0], Path(argv[1]), Path(argv[2])
    batch = int(argv[3]) if len(argv) > 3 else 1
    query_budget_s = float(argv[4]) if len(argv) > 4 else float("inf")
    work.mkdir(parents=True, exist_ok=True)
    w = Workload(wdir)
    t = time.perf_counter()
    remember, search, close = STORES[name](w, work)
    open_s = time.perf_counter() - t
    owner = dict(zip(w.ids, w.users))
    t0 = time.perf_counter()
    for lo, hi in batches(w, batch):
        remember(w.ids[lo:hi], w.users[lo], w.texts[lo:hi], w.vectors[lo:hi])
    ingest_s = time.perf_counter() - t0
    for q, v in zip(w.queries[:5], w.qvectors[:5]):  # warm caches and lazy loads, as a running agent has
        search(q["user"], q["text"], v)
    query_s: list[float] = []
    results: list[list[str]] = []
    crossed = 0
    for q, v in zip(w.queries, w.qvectors):
        t = time.perf_counter()
        hits = search(q["user"], q["text"], v)
        query_s.append(time.perf_counter() - t)
        results.append(hits)
        crossed += sum(owner.get(h) != q["user"] for h in hits)
        if sum(query_s) > query_budget_s:  # a store this slow is measured on the queries it finished
            break
    close()
    qs = np.array(query_s)
    print(json.dumps({
        "store": name, "memories": len(w.ids), "batch": batch, "queries": len(qs), "open_s": open_s,
        "ingest_s": ingest_s, "ingest_per_s": len(w.ids) / ingest_s,
        "query_p50_ms": float(np.median(qs) * 1e3), "query_p99_ms": float(np.percentile(qs, 99) * 1e3),
        "results": results, "other_users_hits": crossed, "disk_bytes": du(work),
    }))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
