"""Batch scoring of memory dumps: ``memir score DUMP -o OUT``.

Reads MemIR dumps — JSONL as ``Scope.snapshot()`` writes it (one record per line plus optional
``embedding`` and ``encoder_id`` keys) or Parquet of the same fields (read through ``datasets``,
memory-mapped, in batches) — validates every record, quarantines the bad ones with their line
number and error (nothing valid is lost, and the counts are reported), embeds records that have
no vector in batches, scores with the utility model and, per (user, agent) scope, decides
keep/forget under the capacity and rules. Writes one row per valid record: id, user, agent,
utility, keep, reason. The output is written to a temporary file and renamed at the end, so a
crash never leaves half an output.
"""

from __future__ import annotations

import json
import math
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import ValidationError as PydanticValidationError

from utilitynet.context import ScoringContext

from .errors import MissingDependencyError, ValidationError
from .memir import MemIR, utcnow

__all__ = ["ScoreConfig", "score_dump", "iter_dump", "write_dump", "write_jsonl_lines", "write_parquet_dump"]


@dataclass(frozen=True)
class ScoreConfig:
    """Options of ``memir score``.

    Attributes:
        capacity: per (user, agent) scope, keep at most this many; ``None`` = keep every record
            whose utility is positive and that no rule forces out.
        rules: YAML rules path (default: ``runtime.rules.DEFAULT_RULES``).
        model: utility model ONNX (default: the shipped ``checkpoints/utilitynet.onnx``).
        batch_size: records per read/score batch.
        quarantine: where rejected records go (default ``OUT.quarantine.jsonl``).
        redundancy: ``"batch"`` computes redundancy features within each scope (O(n²) per scope,
            blocked); ``"none"`` skips them for very large dumps.
        method: retention solver method.
        now: decision time (default: now, UTC).
        encoder: ``"default"`` (ONNX MiniLM) or ``"hash"`` (test double) for records without vectors.
    """

    capacity: int | None = None
    rules: str | None = None
    model: str | None = None
    batch_size: int = 8192
    quarantine: str | None = None
    redundancy: str = "batch"
    method: str = "auto"
    now: datetime | None = None
    encoder: str = "default"

    def __post_init__(self) -> None:
        if self.capacity is not None and self.capacity < 0:
            raise ValidationError("capacity must be >= 0", field="capacity")
        if self.batch_size < 1:
            raise ValidationError("batch_size must be >= 1", field="batch_size")
        if self.redundancy not in ("batch", "none"):
            raise ValidationError("redundancy must be 'batch' or 'none'", field="redundancy")


def _error_text(e: Exception) -> str:
    if isinstance(e, PydanticValidationError):
        return "; ".join(f"{'.'.join(map(str, err['loc']))}: {err['msg']}" for err in e.errors())
    return str(e)


def _loads() -> Any:
    """orjson when installed (~8x faster on float-heavy lines), else the standard library."""
    try:
        import orjson
        return orjson.loads, (orjson.JSONDecodeError, json.JSONDecodeError)
    except ImportError:
        return json.loads, (json.JSONDecodeError,)


def _parse(obj: Any) -> tuple[MemIR, np.ndarray | None]:
    if not isinstance(obj, dict):
        raise ValidationError("each line must be a JSON object (a MemIR record)", field="<line>")
    emb = obj.pop("embedding", None)
    obj.pop("encoder_id", None)
    rec = MemIR.model_validate(obj)
    vec = None
    if emb is not None:
        vec = np.asarray(emb, dtype=np.float32)
        # one reduction instead of isfinite+any: a NaN/inf makes the sum non-finite, all-zero makes it 0
        s = float(np.abs(vec).sum()) if vec.ndim == 1 else float("nan")
        if not (s > 0.0 and math.isfinite(s)):
            raise ValidationError("embedding must be a non-zero finite vector", field="embedding")
    return rec, vec


def iter_dump(path: str | Path, batch_size: int = 8192) -> Iterator[tuple[int, Any, Exception | None]]:
    """Yield ``(line_number, parsed_or_raw, error)`` for every record of a JSONL or Parquet dump."""
    p = Path(path)
    if p.suffix in (".parquet", ".pq"):
        try:
            import datasets
        except ImportError as e:
            raise MissingDependencyError("reading Parquet dumps needs `datasets`: pip install 'memir[train]'") from e
        ds = datasets.Dataset.from_parquet(str(p))
        loads, decode_errors = _loads()
        line = 0
        # Layout written by `Scope.snapshot("x.parquet")` / `write_parquet_dump`: a `record` column of
        # MemIR JSON, plus `embedding` (list<float32>) and `encoder_id`. Rows whose columns are the
        # MemIR fields themselves (nested structs) are accepted too.
        for batch in ds.with_format("numpy", columns=["embedding"], output_all_columns=True).iter(
                batch_size=batch_size) if "embedding" in ds.column_names else ds.iter(batch_size=batch_size):
            keys = list(batch)
            for i in range(len(batch[keys[0]]) if keys else 0):
                line += 1
                row = {k: batch[k][i] for k in keys}
                try:
                    if "record" in row:
                        body = loads(row["record"])
                        if row.get("embedding") is not None:
                            body["embedding"] = row["embedding"]
                        row = body
                    else:
                        row = {k: v for k, v in row.items() if v is not None}
                    yield line, _parse(row), None
                except (*decode_errors, PydanticValidationError, ValidationError, ValueError, TypeError) as e:
                    yield line, row, e
        return
    loads, decode_errors = _loads()
    with open(p, "rb") as fh:
        for line, raw in enumerate(fh, 1):
            if not raw.strip():
                continue
            try:
                yield line, _parse(loads(raw)), None
            except (*decode_errors, PydanticValidationError, ValidationError, ValueError, TypeError) as e:
                yield line, raw.decode("utf-8", errors="replace").rstrip("\n"), e


def write_jsonl_lines(fh: Any, rows: list[tuple[MemIR, np.ndarray | None]], encoder_id: str) -> int:
    """One JSON line per record: the MemIR fields plus ``embedding`` and ``encoder_id``."""
    for r, v in rows:
        line = r.model_dump(mode="json")
        if v is not None:
            line["embedding"] = [float(x) for x in v]
            line["encoder_id"] = encoder_id
        fh.write(json.dumps(line, separators=(",", ":"), ensure_ascii=False) + "\n")
    return len(rows)


def write_dump(rows: list[tuple[MemIR, np.ndarray | None]], encoder_id: str, path: str | Path) -> int:
    """Write a dump as Parquet (``.parquet``) or JSONL (anything else), atomically."""
    if str(path).endswith(".parquet"):
        return write_parquet_dump(rows, encoder_id, path)
    tmp = Path(str(path) + ".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        n = write_jsonl_lines(fh, rows, encoder_id)
    tmp.replace(path)
    return n


def write_parquet_dump(rows: list[tuple[MemIR, np.ndarray | None]], encoder_id: str, path: str | Path) -> int:
    """Write records (+ vectors) as a Parquet dump: ``record`` (MemIR JSON), ``embedding``
    (list<float32>, null when absent) and ``encoder_id`` — the layout ``memir score`` reads."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({
        "record": pa.array([r.model_dump_json() for r, _ in rows], type=pa.string()),
        "embedding": pa.array([None if v is None else np.asarray(v, np.float32) for _, v in rows],
                              type=pa.list_(pa.float32())),
        "encoder_id": pa.array([encoder_id] * len(rows), type=pa.string()),
    })
    tmp = Path(str(path) + ".tmp")
    pq.write_table(table, tmp)
    tmp.replace(path)
    return len(rows)


def score_dump(dump: str | Path, out: str | Path, cfg: ScoreConfig = ScoreConfig(), *,
               progress: bool = True) -> dict[str, Any]:
    """Score a dump; returns counts and timings. See the module docstring."""
    from .retention import RetentionProblem, solve
    from .rules import DEFAULT_RULES, load_rules
    from .scorer import UtilityScorer

    t0 = time.perf_counter()
    out = Path(out)
    qpath = Path(cfg.quarantine) if cfg.quarantine else out.with_name(out.name + ".quarantine.jsonl")
    scorer = UtilityScorer(cfg.model) if cfg.model else UtilityScorer()
    rules = load_rules(cfg.rules) if cfg.rules else DEFAULT_RULES
    now = cfg.now or utcnow()
    groups: dict[tuple[str, str], list[tuple[MemIR, np.ndarray | None]]] = defaultdict(list)
    n_bad = n_lines = 0
    bar = None
    if progress:
        from tqdm import tqdm
        bar = tqdm(desc="read", unit="rec")
    qtmp = qpath.with_name(qpath.name + ".tmp")
    with open(qtmp, "w", encoding="utf-8") as qf:
        for line, item, err in iter_dump(dump, cfg.batch_size):
            n_lines += 1
            if err is not None:
                n_bad += 1
                raw = item if isinstance(item, str) else json.dumps(item, default=str)
                qf.write(json.dumps({"line": line, "error": _error_text(err), "record": raw}) + "\n")
            else:
                rec, vec = item
                groups[(rec.provenance.user_id, rec.provenance.agent_id)].append((rec, vec))
            if bar is not None and n_lines % 1000 == 0:
                bar.update(1000)
    if bar is not None:
        bar.update(n_lines % 1000)
        bar.close()
    if n_bad:
        qtmp.replace(qpath)
    else:
        qtmp.unlink()
    t_read = time.perf_counter() - t0
    embedder = None
    dim = scorer.spec.embedding_dim
    n_embedded = 0
    tmp = out.with_name(out.name + ".tmp")
    t_score = 0.0
    n_valid = 0
    with open(tmp, "w", encoding="utf-8") as fo:
        for (user, agent), items in groups.items():
            recs = [r for r, _ in items]
            missing = [i for i, (_, v) in enumerate(items) if v is None or v.shape[0] != dim]
            vecs = np.zeros((len(items), dim), dtype=np.float32)
            for i, (_, v) in enumerate(items):
                if v is not None and v.shape[0] == dim:
                    vecs[i] = v
            if missing:
                if embedder is None:
                    embedder = _embedder(cfg.encoder)
                for s in range(0, len(missing), cfg.batch_size):
                    idx = missing[s:s + cfg.batch_size]
                    vecs[idx] = embedder.encode([recs[i].content for i in idx])
                n_embedded += len(missing)
            t1 = time.perf_counter()
            order = np.argsort([r.created_at.timestamp() for r in recs], kind="stable")
            steps = np.empty(len(recs), dtype=np.int64)
            steps[order] = np.arange(len(recs))
            ctx = ScoringContext(now=now, step=len(recs), record_steps=steps,
                                 extras={"skip_redundancy": 1.0 if cfg.redundancy == "none" else 0.0})
            u = np.asarray(scorer.score(recs, vecs, ctx), dtype=np.float64)
            c = rules.compile(recs, now)
            from .retention import Quota
            prob = RetentionProblem(utility=u + np.asarray(c.bonus), capacity=cfg.capacity, must_keep=c.must_keep,
                                    must_forget=c.must_forget, implies=c.implies, excludes=c.excludes,
                                    quotas=[Quota(members=m, min=lo, max=hi, name=nm) for m, lo, hi, nm in c.quotas],
                                    on_infeasible="overflow")
            res = solve(prob, method=cfg.method)  # type: ignore[arg-type]
            expl = res.explanation
            t_score += time.perf_counter() - t1
            for i, r in enumerate(recs):
                fo.write(json.dumps({"id": r.id, "user_id": user, "agent_id": agent,
                                     "utility": None if not math.isfinite(u[i]) else round(float(u[i]), 6),
                                     "keep": bool(res.keep[i]), "reason": expl.reason(i).value}) + "\n")
            n_valid += len(recs)
    tmp.replace(out)
    total = time.perf_counter() - t0
    return {"input": str(dump), "output": str(out), "records": n_lines, "valid": n_valid, "quarantined": n_bad,
            "quarantine_file": str(qpath) if n_bad else None, "embedded": n_embedded, "scopes": len(groups),
            "seconds": {"read": round(t_read, 3), "score": round(t_score, 3), "total": round(total, 3)},
            "records_per_s": round(n_lines / total, 1) if total > 0 else None}


def _embedder(kind: str) -> Any:
    if kind == "hash":
        from .embed import HashEmbedder
        return HashEmbedder()
    from .encoder import load_default_embedder
    return load_default_embedder()
