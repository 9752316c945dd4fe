"""The record-at-a-time batch scorer: ``memir score --engine rows`` (the reference path).

This is the path ``memir score`` took before the columnar engine: it builds one MemIR per row and
holds the whole dump in memory. It stays as the reference the columnar engine is tested against
(identical output, quarantine included) and the baseline ``bench/bench_batch.py`` measures beside
it. It reads a dump (:mod:`runtime.store.dumps`: JSONL or Parquet), validates every record, quarantines
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
from pathlib import Path
from typing import Any

import numpy as np

from ..annotate.consolidate import history_session_features
from ..errors import InfeasibleError, ValidationError
from ..record.memir import MemIR, utcnow
from ..retention.plan import RetentionPlan, recent_context, scoring_context
from ..store.dumps import count_records, iter_dump
from .config import ScoreConfig, duplicate_text, error_text, make_embedder, scope_failure_text
from .quarantine import Quarantine

__all__ = ["score_rows"]


def _read(dump: Path, cfg: ScoreConfig, q: Quarantine, bar: Any
          ) -> tuple[dict[tuple[str, str], list[tuple[MemIR, np.ndarray | None, int]]], int]:
    groups: dict[tuple[str, str], list[tuple[MemIR, np.ndarray | None, int]]] = defaultdict(list)
    seen: dict[str, int] = {}
    n = 0
    rows: Iterator[Any] = iter_dump(dump, cfg.batch_size)
    for line, item, err in rows:
        n += 1
        if bar is not None:
            bar.update(1)
        if err is not None:
            q.write([(line, error_text(err), item)], "")
            continue
        rec, vec = item
        first = seen.setdefault(rec.id, line)
        if first != line:
            q.write([(line, duplicate_text(rec.id, first), None)], "")
            continue
        groups[(rec.provenance.user_id, rec.provenance.agent_id)].append((rec, vec, line))
    return groups, n


def score_rows(dump: str | Path, out: str | Path, cfg: ScoreConfig, *, progress: bool = True) -> dict[str, Any]:
    """Score a dump record by record; returns counts and timings. See the module docstring."""
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
    quarantine = Quarantine(qpath)
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
        failed: list[dict[str, str]] = []
        with open(tmp, "w", encoding="utf-8") as fo:
            for (user, agent), items in groups.items():
                recs = [r for r, _, _ in items]
                missing = [i for i, (_, v, _) in enumerate(items) if v is None or v.shape[0] != dim]
                vecs = np.zeros((len(items), dim), dtype=np.float32)
                for i, (_, v, _) in enumerate(items):
                    if v is not None and v.shape[0] == dim:
                        vecs[i] = v
                if missing:
                    embedder = embedder or make_embedder(cfg.encoder)
                    for s in range(0, len(missing), cfg.batch_size):
                        idx = missing[s:s + cfg.batch_size]
                        vecs[idx] = embedder.encode([recs[i].content for i in idx])
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
                try:
                    d = plan.decide(recs, vecs, ctx, user_id=user, agent_id=agent, trigger="memir score")
                except InfeasibleError as e:  # one contradictory scope does not stop the dump
                    for _, _, line in items:
                        quarantine.write([(line, scope_failure_text(user, agent, e), None)], "")
                    failed.append({"user_id": user, "agent_id": agent, "error": str(e)})
                    continue
                t_score += time.perf_counter() - t1
                n_embedded += len(missing)
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
            "embedded": n_embedded, "scopes": len(groups) - len(failed), **totals, "failed_scopes": failed,
            "seconds": {"read": round(t_read, 3), "score": round(t_score, 3), "total": round(total, 3)},
            "records_per_s": round(n_lines / total, 1) if total > 0 else None}
