"""Synthetic memory dumps for the batch-scoring benchmarks, written column-wise so that millions of
records take seconds, not the hours a record-at-a-time writer would.

Each user has sessions of ``session_len`` consecutive turns; records are spread over ``users``
scopes and interleaved (the dump is not grouped by scope, as an export of a live store is not);
content is short text from a vocabulary with numbers, like agent memories; embeddings are random
unit vectors. Parquet goes in the MemIR column layout ``Scope.snapshot`` writes; JSONL has one
MemIR per line with its ``embedding``, as ``snapshot`` writes it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import numpy as np

WORDS = np.array(["budget", "deadline", "hotel", "flight", "invoice", "meeting", "refund", "password", "Lisbon",
                  "Friday", "ASAP", "project", "orion", "review", "moved", "thanks", "must", "my", "the", "is"])
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _block(start: int, n: int, dim: int, users: int, session_len: int, rng: np.random.Generator) -> dict:
    i = np.arange(start, start + n)
    user = i % users
    turn = i // users                               # the k-th record of its user
    words = WORDS[rng.integers(0, len(WORDS), size=(n, 6))]
    nums = rng.integers(1, 9999, size=n)
    content = [f"{' '.join(w[: 2 + k % 5])} {x}" for k, (w, x) in enumerate(zip(words.tolist(), nums.tolist()))]
    vecs = rng.standard_normal((n, dim)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    return {"id": [f"m{k}" for k in i.tolist()], "content": content,
            "created_us": (int(T0.timestamp()) + i * 60) * 1_000_000,
            "user": [f"u{u}" for u in user.tolist()],
            "session": [f"u{u}-s{t // session_len}" for u, t in zip(user.tolist(), turn.tolist())],
            "role": np.where(i % 2 == 0, "user", "agent"), "confidence": np.round(rng.uniform(0.5, 1.0, n), 3),
            "flags": [["pinned"] if k % 97 == 0 else [] for k in i.tolist()], "vecs": vecs}


def _context(blocks: list[dict], users: int) -> np.ndarray:
    """The stored session context of every record, as ``Scope.snapshot`` stores it
    (:func:`runtime.annotate.consolidate.dump_session_context`: each scope in write order, vectors
    scaled in float32, then ``history_session_columns``), computed column-wise for millions of rows."""
    from runtime.annotate.consolidate import scopes_session_columns, write_order

    vecs = np.concatenate([b["vecs"] for b in blocks])
    vecs /= np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
    n = len(vecs)
    user = np.arange(n) % users
    by_scope = np.argsort(user, kind="stable")  # scope by scope, each in dump order
    sizes = np.bincount(user, minlength=users).tolist()
    created = np.concatenate([b["created_us"] for b in blocks])
    order = by_scope[write_order(created[by_scope], sizes)]
    hist = scopes_session_columns([s for b in blocks for s in b["session"]], np.ones(n, dtype=bool),
                                  [c for b in blocks for c in b["content"]], vecs,
                                  np.concatenate([b["role"] for b in blocks]), order, sizes)
    out = np.empty_like(hist)
    out[order] = hist
    return out


def write_parquet(path: Path, n: int, dim: int = 384, *, users: int = 1000, session_len: int = 20,
                  row_group: int = 65_536, seed: int = 0, context: bool = False) -> None:
    """A MemIR column-layout Parquet dump of ``n`` records; with ``context``, the stored features
    ``Scope.snapshot`` writes too (session context and text statistics; all rows are held in memory to
    compute the context)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from runtime.store.dumps import CONTEXT_COLUMN, TEXT_COLUMN, memir_arrow_schema
    from utilitynet.textstats import TEXT_STAT_NAMES, text_stats

    schema = memir_arrow_schema(features=context)
    rng = np.random.default_rng(seed)
    ts = pa.timestamp("us", tz="UTC")
    s = pa.string()
    starts = list(range(0, n, row_group))
    blocks = [_block(start, min(row_group, n - start), dim, users, session_len, rng) for start in starts] if context \
        else None
    ctx = _context(blocks, users) if blocks is not None else None
    with pq.ParquetWriter(str(path), schema) as w:
        for k, start in enumerate(starts):
            m = min(row_group, n - start)
            b = blocks[k] if blocks is not None else _block(start, m, dim, users, session_len, rng)
            nul_s, nul_t = pa.nulls(m, s), pa.nulls(m, ts)
            empty = pa.array([[]] * m, pa.list_(s))
            prov = pa.StructArray.from_arrays(
                [pa.repeat("direct_interaction", m), pa.array(b["user"]), pa.repeat("default", m),
                 pa.array(b["session"]), nul_t, nul_s, nul_s, empty, nul_s, nul_s],
                fields=list(schema.field("provenance").type))
            role = pa.StructArray.from_arrays([pa.repeat("general", m), nul_s, pa.array(b["role"]), nul_s, nul_s],
                                              fields=list(schema.field("role_context").type))
            md = pa.StructArray.from_arrays(
                [pa.array(b["confidence"]), pa.nulls(m, pa.duration("us")), nul_t, empty, empty,
                 pa.repeat("none", m), pa.array(b["flags"], pa.list_(s)), nul_s],
                fields=list(schema.field("metadata").type))
            usage = pa.StructArray.from_arrays([pa.array(np.zeros(m, np.int64)), nul_t, pa.nulls(m, pa.float64()),
                                                nul_s], fields=list(schema.field("usage").type))
            emb = pa.ListArray.from_arrays(pa.array(np.arange(0, (m + 1) * dim, dim, dtype=np.int32)),
                                           pa.array(b["vecs"].reshape(-1)))
            arrays = [pa.array(np.ones(m, np.int64)), pa.array(b["id"]), pa.array(b["content"]),
                      pa.array(b["created_us"], pa.int64()).cast(ts), prov, role, md, usage, emb,
                      pa.repeat("sentence-transformers/all-MiniLM-L6-v2", m)]
            if ctx is not None:
                part = ctx[start:start + m]
                stats = text_stats(b["content"])
                text = np.stack([stats[k] for k in TEXT_STAT_NAMES], axis=1)
                arrays += [pa.FixedSizeListArray.from_arrays(pa.array(x.reshape(-1)), x.shape[1]) for x in (part, text)]
                assert schema.names[-2:] == [CONTEXT_COLUMN, TEXT_COLUMN]
            t = pa.Table.from_arrays(arrays, schema=schema)
            w.write_table(t)


def write_jsonl(path: Path, n: int, dim: int = 384, *, users: int = 1000, session_len: int = 20,
                seed: int = 0) -> None:
    """A JSONL dump of ``n`` records (one MemIR per line, embedding to 6 decimals)."""
    import orjson

    rng = np.random.default_rng(seed)
    with open(path, "wb") as fh:
        for start in range(0, n, 50_000):
            m = min(50_000, n - start)
            b = _block(start, m, dim, users, session_len, rng)
            vecs = np.round(b["vecs"].astype(np.float64), 6)
            lines = []
            for k in range(m):
                created = datetime.fromtimestamp(int(b["created_us"][k]) / 1e6, UTC).isoformat()
                lines.append(orjson.dumps({
                    "schema_version": 1, "id": b["id"][k], "content": b["content"][k], "created_at": created,
                    "provenance": {"type": "direct_interaction", "user_id": b["user"][k], "agent_id": "default",
                                   "session_id": b["session"][k]},
                    "role_context": {"dialog_role": str(b["role"][k])},
                    "metadata": {"confidence": float(b["confidence"][k]), "flags": b["flags"][k]},
                    "embedding": vecs[k], "encoder_id": "sentence-transformers/all-MiniLM-L6-v2",
                }, option=orjson.OPT_SERIALIZE_NUMPY))
            fh.write(b"\n".join(lines) + b"\n")
