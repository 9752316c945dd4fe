"""Batch scoring on Ray Data: ``memir score --engine ray DUMP... -o OUT_DIR``.

The same steps as the local engine, as Ray tasks on a local cluster (started here) or an existing
one (``--ray-address``):

1. **Read**: one task per chunk (:func:`runtime.batch.read.plan_chunks`) turns it into a scoring
   table; its rejected rows go to the quarantine, the valid ones into the dataset.
2. **Deduplicate**: the driver collects only the ids' hashes and line numbers
   (:func:`runtime.batch.dedup.first_occurrences`) and drops every later copy of an id.
3. **Group and decide**: rows are keyed by a hash bucket of their (user, agent) scope, the dataset
   is hash-partitioned on it (``repartition(keys=["bucket"])``: a block holds whole scopes), and
   ``map_batches(ScoreScopes)`` over whole blocks decides them in actors through the one
   retention plan.
4. **Write**: scored rows as Parquet part files in ``OUT_DIR/scored/``, the quarantine as
   ``OUT_DIR/quarantine.jsonl`` (line order per dump) and the summary as ``OUT_DIR/summary.json``.

:class:`ScoreScopes` is the documented unit for operators who build their own pipeline: pass it to
``ray.data.Dataset.map_batches`` (each batch must hold whole scopes) or to
``groupby(["user_id", "agent_id"]).map_groups`` over a dataset of scoring tables
(:func:`read_dataset`).

Paths must be readable by every node, and ``OUT_DIR`` writable by every node (one machine, or a
shared filesystem). Ray lives in the ``ray`` extra; nothing else in memir imports it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from ..errors import MissingDependencyError, ValidationError
from ..record.memir import utcnow
from .config import ScoreConfig, duplicate_reason, scope_failure_text

__all__ = ["ScoreScopes", "read_dataset", "score_with_ray"]

_QDIR = ".quarantine"


def _ray() -> Any:
    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError as e:
        raise MissingDependencyError("--engine ray needs Ray Data: pip install 'memir-runtime[ray]'") from e
    return ray


class ScoreScopes:
    """Decides every scope of a batch of scoring rows (a Ray Data UDF; one plan per actor).

    Each call must receive whole scopes — ``groupby(...).map_groups`` guarantees it; with
    ``map_batches``, partition by scope first. Returns the output rows
    (:data:`runtime.batch.scope_decision.OUTPUT_SCHEMA`); a scope whose rules contradict each other is
    written to ``quarantine_dir`` (one JSONL file per call) instead.

    Args:
        config: the :class:`~runtime.batch.ScoreConfig` (capacity, rules, model, ...).
        now: the decision time (the same for every actor).
        quarantine_dir: where failed scopes are reported (default: not written, raised).
        files: the dump paths, to name them in the quarantine.
    """

    def __init__(self, config: ScoreConfig, now: datetime, quarantine_dir: str | None = None,
                 files: Sequence[str] | None = None) -> None:
        from .scope_decision import ScopeDecider

        self.decider = ScopeDecider.for_config(config, now)
        self.quarantine_dir, self.files = quarantine_dir, list(files or [])

    def __call__(self, batch: pa.Table) -> pa.Table:
        from .partition import scope_runs
        from .scope_decision import OUTPUT_SCHEMA

        t = batch if isinstance(batch, pa.Table) else pa.Table.from_pydict(batch)
        scopes = list(scope_runs(t))
        if not scopes:
            return OUTPUT_SCHEMA.empty_table()
        out, _, failed = self.decider.decide_many(scopes)
        if failed:
            if self.quarantine_dir is None:
                raise failed[0][2]
            self._report(failed)
        return out

    def _report(self, failed: Sequence[tuple[str, str, Exception, pa.Table]]) -> None:
        assert self.quarantine_dir is not None
        rows = []
        for user, agent, e, t in failed:
            files = t.column("file").to_pylist() if "file" in t.schema.names else [0] * t.num_rows
            for f, line in zip(files, t.column("line").to_pylist()):
                rows.append({"file": f, "line": line, "error": scope_failure_text(user, agent, e), "record": None,
                             "scope": [user, agent]})
        key = hashlib.blake2b(json.dumps(sorted({tuple(r["scope"]) for r in rows})).encode(), digest_size=8)
        _write_jsonl(Path(self.quarantine_dir) / f"scopes-{key.hexdigest()}.jsonl", rows)


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        for r in rows:
            fh.write(json.dumps(r) + "\n")
    tmp.replace(path)


class _ReadChunks:
    """Ray UDF: chunk descriptions -> scoring rows (+ a ``file`` column); rejects to files."""

    def __init__(self, dim: int, quarantine_dir: str) -> None:
        self.dim, self.quarantine_dir = dim, quarantine_dir

    def __call__(self, batch: pa.Table) -> pa.Table:
        from .read import Chunk, read_chunk

        parts = []
        for item in batch.to_pylist():
            c = Chunk(item["path"], item["kind"], item["first_line"], item["start"], item["stop"], item["data"] or None)
            f = int(item["file"])
            res = read_chunk(c, self.dim)
            rows = [{"file": f, "line": line, "error": err, "record": raw} for line, err, raw in res.rejects]
            rows.append({"file": f, "line": 0, "error": None, "record": None, "read": res.rows, "fast": res.fast})
            _write_jsonl(Path(self.quarantine_dir) / f"read-{f}-{c.first_line}.jsonl", rows)
            t = res.table
            parts.append(t.append_column("file", pa.array(np.full(t.num_rows, f, np.int32))))
        return pa.concat_tables(parts)


def _bucket(buckets: int) -> Any:
    def add(batch: pa.Table) -> pa.Table:
        from .partition import scope_buckets

        return batch.append_column("bucket", pa.array(scope_buckets(batch, buckets).astype(np.int32)))
    return add


def _drop(dups: set[tuple[int, int]]) -> Any:
    def drop(batch: pa.Table) -> pa.Table:
        if not dups:
            return batch
        keep = [(f, line) not in dups for f, line in zip(batch.column("file").to_pylist(),
                                                          batch.column("line").to_pylist())]
        return batch.filter(pa.array(keep))
    return drop


def read_dataset(paths: Sequence[str | Path], dim: int, quarantine_dir: str | Path, *, chunk_mb: int = 16) -> Any:
    """A Ray Dataset of the scoring rows of ``paths`` (one read task per chunk, plus a ``file``
    column: the dump's index), rejected rows written under ``quarantine_dir``."""
    ray = _ray()
    from .read import plan_chunks

    items = []
    for f, p in enumerate(paths):
        for c in plan_chunks(p, target_bytes=chunk_mb << 20):
            items.append({"path": c.path, "kind": c.kind, "first_line": c.first_line, "start": c.start,
                          "stop": c.stop, "data": c.data or b"", "file": f})
    ds = ray.data.from_items(items, override_num_blocks=max(1, len(items)))
    cpus = max(1, int(ray.available_resources().get("CPU", 1)))
    return ds.map_batches(_ReadChunks, batch_size=1, batch_format="pyarrow", fn_constructor_args=(dim, str(quarantine_dir)),
                          compute=ray.data.ActorPoolStrategy(min_size=1, max_size=cpus))


def score_with_ray(paths: list[Path], out: Path, cfg: ScoreConfig, *, progress: bool = True,
                   address: str | None = None) -> dict[str, Any]:
    """Score dumps on Ray Data (see the module docstring); ``out`` is a directory."""
    ray = _ray()
    t0 = time.perf_counter()
    if out.exists() and not out.is_dir():
        raise ValidationError(f"--engine ray writes a directory of part files: {out} is a file", field="out")
    if not out.parent.is_dir():
        raise ValidationError(f"cannot write {out}: directory {str(out.parent)!r} does not exist", field="out")
    from ..scoring.utility import UtilityScorer
    from .dedup import first_occurrences

    dim = (UtilityScorer(cfg.model) if cfg.model else UtilityScorer()).spec.embedding_dim
    now = cfg.now or utcnow()
    started = False
    if not ray.is_initialized():
        kw: dict[str, Any] = {"address": address} if address else {"num_cpus": cfg.workers or os.cpu_count() or 1,
                                                                     "include_dashboard": False}
        ray.init(log_to_driver=False, configure_logging=False, **kw)
        started = True
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = progress
    cpus = max(1, int(ray.available_resources().get("CPU", 1)))
    work = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    shutil.rmtree(work, ignore_errors=True)
    qdir = work / _QDIR
    qdir.mkdir(parents=True)
    try:
        files = [str(p) for p in paths]
        ds = read_dataset(files, dim, qdir, chunk_mb=cfg.chunk_mb).materialize()
        t_read = time.perf_counter() - t0
        keys = ds.select_columns(["id", "file", "line"])
        dups = first_occurrences(b for b in keys.iter_batches(batch_format="pyarrow"))
        dup_rows = [{"file": f, "line": line, "error": duplicate_reason(i, first, f, files), "record": None}
                    for (f, line), (i, first) in dups.items()]
        buckets = max(8, 4 * cpus)
        # Hash-partition by scope bucket first (a block then holds whole scopes), and only then start
        # the decide actors: on a small cluster, actors waiting for input would hold the CPUs the
        # shuffle needs.
        keyed = ds.map_batches(_drop(set(dups)), batch_format="pyarrow").map_batches(_bucket(buckets),
                                                                                      batch_format="pyarrow")
        parts = keyed.repartition(buckets, keys=["bucket"]).materialize()
        scored = parts.map_batches(ScoreScopes, batch_size=None, batch_format="pyarrow",
                                   fn_constructor_args=(cfg, now, str(qdir), files),
                                   compute=ray.data.ActorPoolStrategy(size=cpus))
        scored.write_parquet(str(work / "scored"))
        summary = _finish(work, qdir, dup_rows, files)
        counts = _read_counts(work / "scored")
    finally:
        if started:
            ray.shutdown()
    out_rows = counts.num_rows if counts is not None else 0
    actions = {} if counts is None else {a["values"]: a["counts"] for a in
                                        pa.compute.value_counts(counts.column("action")).to_pylist()}
    n_scopes = 0 if counts is None else len(set(zip(counts.column("user_id").to_pylist(),
                                                    counts.column("agent_id").to_pylist())))
    total = time.perf_counter() - t0
    report = {"engine": "ray", "input": files[0] if len(files) == 1 else files, "output": str(out),
              "records": summary["read"], "valid": out_rows, "quarantined": summary["quarantined"],
              "duplicates": len(dup_rows), "quarantine_file": str(out / "quarantine.jsonl") if summary["quarantined"]
              else None, "scopes": n_scopes, "kept": actions.get("keep", 0) + actions.get("write", 0),
              "archived": actions.get("archive", 0), "deleted": actions.get("delete", 0),
              "rejected": summary["quarantined"], "failed_scopes": summary["failed_scopes"],
              "validated_columnwise": summary["fast"],
              "seconds": {"read": round(t_read, 3), "decide": round(total - t_read, 3), "total": round(total, 3)},
              "records_per_s": round(summary["read"] / total, 1) if total > 0 else None}
    if out_rows == 0:
        shutil.rmtree(work, ignore_errors=True)
        raise ValidationError(f"no valid record in {', '.join(files)} ({summary['read']} read, "
                              f"{summary['quarantined']} quarantined)", field="dump")
    (work / "summary.json").write_text(json.dumps(report, indent=2))
    if out.exists():
        shutil.rmtree(out)
    work.replace(out)
    return report


def _read_counts(scored: Path) -> pa.Table | None:
    import pyarrow.parquet as pq

    parts = sorted(scored.glob("*.parquet")) if scored.is_dir() else []
    if not parts:
        return None
    return pa.concat_tables([pq.read_table(p, columns=["user_id", "agent_id", "action"]) for p in parts])


def _finish(work: Path, qdir: Path, dup_rows: list[dict[str, Any]], files: list[str]) -> dict[str, Any]:
    """Merge the tasks' quarantine files into ``quarantine.jsonl`` (per dump, in line order)."""
    rows: list[dict[str, Any]] = list(dup_rows)
    read = fast = 0
    failed: dict[tuple[str, str], str] = {}
    for p in sorted(qdir.glob("*.jsonl")):
        for line in p.read_text(encoding="utf-8").splitlines():
            r = json.loads(line)
            if r.get("error") is None:
                read += r.get("read", 0)
                fast += r.get("fast", 0)
                continue
            if "scope" in r:
                failed[(r["scope"][0], r["scope"][1])] = r["error"]
                r.pop("scope")
            rows.append(r)
    rows.sort(key=lambda r: (r["file"], r["line"]))
    shutil.rmtree(qdir)
    if rows:
        with open(work / "quarantine.jsonl", "w", encoding="utf-8") as fh:
            for r in rows:
                f = r.pop("file")
                fh.write(json.dumps({"file": files[f], **r} if len(files) > 1 else r) + "\n")
    return {"read": read, "fast": fast, "quarantined": len(rows),
            "failed_scopes": [{"user_id": u, "agent_id": a, "error": e.split(": ", 1)[-1]} for (u, a), e in failed.items()]}
