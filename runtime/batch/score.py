"""Batch scoring of memory dumps: ``memir score DUMP -o OUT``.

Reads a dump (:mod:`runtime.store.dumps`: JSONL or Parquet), validates every record, quarantines
the bad ones with their line number and error (nothing valid is lost, and the counts are
reported), embeds records that have no vector, and decides per ``(user, agent)`` scope through the
same :class:`~runtime.retention.RetentionPlan` as ``Scope.retain`` — same scorer, same rules, same
context (write steps from ``created_at`` order, the recent-context vector of the scope's last
writes), same typed decision. Writes one row per valid record: id, user, agent, utility, model
utility, keep, reason and action, plus one decision summary per scope. Outputs are written to
temporary files and renamed at the end, so a crash never leaves half an output.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import IO, Any

import numpy as np
from pydantic import ValidationError as PydanticValidationError

from ..annotate.consolidate import history_session_features
from ..errors import ValidationError
from ..record.memir import MemIR, utcnow
from ..retention.plan import RetentionPlan, recent_context, scoring_context
from ..retention.policy import RetentionPolicy
from ..retention.solver import Method, OnInfeasible
from ..store.dumps import count_records, iter_dump

__all__ = ["ScoreConfig", "score_dump"]


@dataclass(frozen=True)
class ScoreConfig:
    """Options of ``memir score``.

    Attributes:
        capacity: per (user, agent) scope, keep at most this many; ``None`` = keep every record
            whose utility is positive and that no rule forces out.
        budget_tokens: per scope, keep at most this many tokens (≈ 4 characters each).
        rules: YAML rules path (default: ``runtime.retention.DEFAULT_RULES``).
        model: utility model ONNX (default: the shipped model).
        batch_size: records per read batch.
        quarantine: where rejected records go (default ``OUT.quarantine.jsonl``).
        redundancy: ``"batch"`` computes redundancy features within each scope (as ``Scope.retain``
            does); ``"none"`` skips them for very large scopes.
        method: retention solver method.
        on_infeasible: ``overflow`` (default: one bad scope does not stop a dump) or ``raise``.
        recent_window: writes averaged into each scope's recent-context vector.
        now: decision time (default: now, UTC).
        encoder: ``"default"`` (ONNX MiniLM) or ``"hash"`` (test double) for records without vectors.
    """

    capacity: int | None = None
    budget_tokens: int | None = None
    rules: str | None = None
    model: str | None = None
    batch_size: int = 8192
    quarantine: str | None = None
    redundancy: str = "batch"
    method: Method = "auto"
    on_infeasible: OnInfeasible = "overflow"
    recent_window: int = 5
    now: datetime | None = None
    encoder: str = "default"

    def __post_init__(self) -> None:
        p: list[tuple[str, str]] = []
        if self.capacity is not None and self.capacity < 0:
            p.append(("capacity", "must be >= 0"))
        if self.batch_size < 1:
            p.append(("batch_size", "must be >= 1"))
        if self.redundancy not in ("batch", "none"):
            p.append(("redundancy", "must be 'batch' or 'none'"))
        if self.encoder not in ("default", "hash"):
            p.append(("encoder", "must be 'default' or 'hash'"))
        if p:
            raise ValidationError.from_problems("ScoreConfig", p)

    def policy(self, scorer: Any) -> RetentionPolicy:
        """The retention policy every scope of the dump is decided under."""
        return RetentionPolicy(capacity=self.capacity, budget_tokens=self.budget_tokens, rules=self.rules,
                               scorer=scorer, method=self.method, on_infeasible=self.on_infeasible,
                               recent_window=self.recent_window)


def _error_text(e: Exception) -> str:
    if isinstance(e, PydanticValidationError):
        return "; ".join(f"{'.'.join(map(str, err['loc']))}: {err['msg']}" for err in e.errors())
    return str(e)


class _Quarantine:
    """Rejected rows, written to a temporary file and kept only if there are any."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        self.fh: IO[str] = open(self.tmp, "w", encoding="utf-8")
        self.count = 0

    def add(self, line: int, error: str, raw: Any) -> None:
        text = raw if isinstance(raw, str) else json.dumps(raw, default=str)
        self.fh.write(json.dumps({"line": line, "error": error, "record": text}) + "\n")
        self.count += 1

    def close(self, keep: bool) -> None:
        self.fh.close()
        if keep and self.count:
            self.tmp.replace(self.path)
        else:
            self.tmp.unlink(missing_ok=True)


def _read(dump: Path, cfg: ScoreConfig, q: _Quarantine, bar: Any
          ) -> tuple[dict[tuple[str, str], list[tuple[MemIR, np.ndarray | None]]], int]:
    groups: dict[tuple[str, str], list[tuple[MemIR, np.ndarray | None]]] = defaultdict(list)
    seen: dict[str, int] = {}
    n = 0
    rows: Iterator[Any] = iter_dump(dump, cfg.batch_size)
    for line, item, err in rows:
        n += 1
        if bar is not None:
            bar.update(1)
        if err is not None:
            q.add(line, _error_text(err), item)
            continue
        rec, vec = item
        first = seen.setdefault(rec.id, line)
        if first != line:
            q.add(line, f"duplicate id {rec.id!r} (first seen at line {first}); scored once", rec.model_dump(mode="json"))
            continue
        groups[(rec.provenance.user_id, rec.provenance.agent_id)].append((rec, vec))
    return groups, n


def score_dump(dump: str | Path, out: str | Path, cfg: ScoreConfig = ScoreConfig(), *,
               progress: bool = True) -> dict[str, Any]:
    """Score a dump; returns counts and timings. See the module docstring."""
    from ..scoring.utility import UtilityScorer

    t0 = time.perf_counter()
    dump, out = Path(dump), Path(out)
    if not dump.is_file():
        raise ValidationError(f"no dump at {dump}" + (" (it is a directory)" if dump.is_dir() else ""), field="dump")
    for target in (out, Path(cfg.quarantine) if cfg.quarantine else out):
        if not target.parent.is_dir():
            raise ValidationError(f"cannot write {target}: directory {str(target.parent)!r} does not exist",
                                  field="out")
    scorer = UtilityScorer(cfg.model) if cfg.model else UtilityScorer()
    plan = RetentionPlan(cfg.policy(scorer), scorer)
    now = cfg.now or utcnow()
    qpath = Path(cfg.quarantine) if cfg.quarantine else out.with_name(out.name + ".quarantine.jsonl")
    quarantine = _Quarantine(qpath)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    ok = keep_quarantine = False
    bar = None
    try:
        if progress:
            from tqdm import tqdm
            bar = tqdm(desc="read", unit="rec", total=count_records(dump), mininterval=0.5)
        groups, n_lines = _read(dump, cfg, quarantine, bar)
        if bar is not None:
            bar.close()
        if not groups:
            keep_quarantine = True  # a complete read: the user needs to see why every record was rejected
            raise ValidationError(f"no valid record in {dump} ({n_lines} read"
                                  + (f", {quarantine.count} quarantined to {qpath}: see why each was rejected)"
                                     if quarantine.count else ")"), field="dump")
        t_read = time.perf_counter() - t0
        dim = scorer.spec.embedding_dim
        embedder = None
        n_embedded = n_valid = 0
        t_score = 0.0
        totals = {"kept": 0, "archived": 0, "deleted": 0}
        with open(tmp, "w", encoding="utf-8") as fo:
            for (user, agent), items in groups.items():
                recs = [r for r, _ in items]
                missing = [i for i, (_, v) in enumerate(items) if v is None or v.shape[0] != dim]
                vecs = np.zeros((len(items), dim), dtype=np.float32)
                for i, (_, v) in enumerate(items):
                    if v is not None and v.shape[0] == dim:
                        vecs[i] = v
                if missing:
                    embedder = embedder or _embedder(cfg.encoder)
                    for s in range(0, len(missing), cfg.batch_size):
                        idx = missing[s:s + cfg.batch_size]
                        vecs[idx] = embedder.encode([recs[i].content for i in idx])
                    n_embedded += len(missing)
                vecs /= np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
                t1 = time.perf_counter()
                order = np.argsort([r.created_at.timestamp() for r in recs], kind="stable")
                steps = np.empty(len(recs), dtype=np.int64)
                steps[order] = np.arange(1, len(recs) + 1)
                recent = recent_context(vecs[order[-cfg.recent_window:]])
                hist = history_session_features([recs[i] for i in order], vecs[order])
                session = np.empty_like(hist)
                session[order] = hist
                ctx = scoring_context(now=now, steps=steps, recent=recent, session=session,
                                      skip_redundancy=cfg.redundancy == "none")
                d = plan.decide(recs, vecs, ctx, user_id=user, agent_id=agent, trigger="memir score")
                t_score += time.perf_counter() - t1
                for r in recs:
                    it = d.items[r.id]
                    u = it.utility
                    fo.write(json.dumps({"id": r.id, "user_id": user, "agent_id": agent,
                                         "utility": round(u, 6) if math.isfinite(u) else None,
                                         "model_utility": round(it.model_utility, 6), "keep": it.kept,
                                         "reason": it.reason.value, "action": it.action}) + "\n")
                totals["kept"] += len(d.kept)
                totals["archived"] += len(d.archived)
                totals["deleted"] += len(d.deleted)
                n_valid += len(recs)
        tmp.replace(out)
        ok = True
    finally:
        if bar is not None:
            bar.close()
        quarantine.close(keep=ok or keep_quarantine)
        tmp.unlink(missing_ok=True)
    total = time.perf_counter() - t0
    return {"input": str(dump), "output": str(out), "records": n_lines, "valid": n_valid,
            "quarantined": quarantine.count, "quarantine_file": str(qpath) if quarantine.count else None,
            "embedded": n_embedded, "scopes": len(groups), **totals,
            "seconds": {"read": round(t_read, 3), "score": round(t_score, 3), "total": round(total, 3)},
            "records_per_s": round(n_lines / total, 1) if total > 0 else None}


def _embedder(kind: str) -> Any:
    if kind == "hash":
        from ..encoders.base import HashEmbedder
        return HashEmbedder()
    from ..encoders.onnx import load_default_embedder
    return load_default_embedder()
