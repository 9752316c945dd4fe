"""Batch scoring of memory dumps: ``memir score DUMP... -o OUT``.

The default engine, ``local``, is columnar and streaming:

1. **Read.** The dumps are cut into chunks (:mod:`runtime.batch.read`) that reader processes turn
   into scoring tables (:mod:`runtime.batch.table`) — Parquet in the MemIR column layout validated
   column-wise, everything else record by record with MemIR. Rejected rows go to the quarantine
   file with their line (row) number and reason, in line order.
2. **Deduplicate.** Ids are checked across all the dumps (:mod:`runtime.batch.dedup`): the first
   occurrence is scored, every later one quarantined as a duplicate.
3. **Group.** Rows are grouped by (user, agent) scope, in memory up to ``memory_mb`` and in disk
   partitions past it (:mod:`runtime.batch.partition`), so memory stays bounded.
4. **Decide.** Each scope is decided by :class:`~runtime.batch.scope_decision.ScopeDecider` through the
   one :class:`~runtime.retention.RetentionPlan` — the same scorer, rules, context and solver as
   ``Scope.retain`` — and its rows are written out at once. Blocks of scopes are decided side by
   side by processes (one per CPU from :data:`PARALLEL_DECIDE_ROWS` records) and written in order;
   when the rows were spilled, each process reads its partitions from disk itself.

Outputs (JSONL, or Parquet when ``OUT`` ends in ``.parquet``) and the quarantine are written to
temporary files and renamed at the end, so a crash never leaves half a file. The output has one
row per valid record — id, user, agent, utility, model utility, keep, reason, action — grouped by
scope. ``engine="rows"`` is the record-at-a-time reference path (:mod:`runtime.batch.reference`), and
``engine="ray"`` runs the same steps as Ray Data tasks (:mod:`runtime.batch.ray_engine`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import MissingDependencyError, ValidationError
from ..record.memir import utcnow
from .config import ENGINES, FILE_SHIFT, ScoreConfig, duplicate_reason, scope_failure_text
from .memory import give_back, release_promptly
from .processes import in_processes
from .quarantine import Quarantine

__all__ = ["ScoreConfig", "score_dump"]

_AUTO_WORKERS_BYTES = 64 << 20
"""Below this much JSONL a dump is read in-process (starting readers costs ~1 s)."""
BLOCK_ROWS = 8_192
"""Scopes are decided in blocks of about this many rows: one feature pass and one model call each."""
PARALLEL_DECIDE_ROWS = 100_000
"""From this many records (and more than one CPU), blocks are decided by processes side by side."""


def _has_pyarrow() -> bool:
    import importlib.util

    return importlib.util.find_spec("pyarrow") is not None


def _pyarrow_check() -> None:
    try:
        import pyarrow  # noqa: F401
    except ImportError as e:
        raise MissingDependencyError("batch scoring reads dumps as Arrow: pip install 'memir-runtime[batch]' "
                                     "(or use --engine rows)") from e


def _paths(dumps: str | Path | Sequence[str | Path]) -> list[Path]:
    items = [dumps] if isinstance(dumps, str | Path) else list(dumps)
    if not items:
        raise ValidationError("give at least one dump", field="dump")
    out = []
    for d in items:
        p = Path(d)
        if not p.is_file():
            raise ValidationError(f"no dump at {p}" + (" (it is a directory)" if p.is_dir() else ""), field="dump")
        out.append(p)
    return out


class OutputWriter:
    """Scored rows to a temporary file (JSONL, or Parquet by suffix), renamed into place by
    :meth:`commit`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        self.parquet = path.suffix in (".parquet", ".pq")
        self._pq: Any = None
        self._fh: Any = None if self.parquet else open(self.tmp, "wb")
        self.rows = 0

    def write(self, t: Any) -> None:
        if self.parquet:
            import pyarrow.parquet as pq

            if self._pq is None:
                self._pq = pq.ParquetWriter(str(self.tmp), t.schema)
            self._pq.write_table(t)
        else:
            import orjson

            dumps = orjson.dumps
            self._fh.write(b"".join(dumps(r) + b"\n" for r in t.to_pylist()))
        self.rows += t.num_rows

    def commit(self) -> None:
        self._close()
        if self.parquet and self._pq is None:  # no rows: still a valid, empty Parquet file
            import pyarrow.parquet as pq

            from .scope_decision import OUTPUT_SCHEMA
            pq.write_table(OUTPUT_SCHEMA.empty_table(), str(self.tmp))
        self.tmp.replace(self.path)

    def _close(self) -> None:
        if self._pq is not None:
            self._pq.close()
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def abort(self) -> None:
        try:
            self._close()
        finally:
            self.tmp.unlink(missing_ok=True)


def _read_in_worker(chunk: Any, dim: int) -> Any:
    from .read import read_chunk
    return read_chunk(chunk, dim)


def _results(chunks: Iterator[Any], dim: int, workers: int) -> Iterator[Any]:
    """Chunk results in chunk order, read by ``workers`` processes (0 = in this one), at most
    ``2 × workers`` chunks ahead so memory stays bounded."""
    from .read import read_chunk_parts

    if workers <= 1:  # in parts: one row group of a Parquet dump is not held whole
        for c in chunks:
            for part in read_chunk_parts(c, dim):
                yield c, part
        return
    yield from in_processes(chunks, lambda c: (_read_in_worker, (c, dim)), workers, "reader", "read")


_DECIDER: Any = None  # a decider process's ScopeDecider, made once by _start_decider


def _start_decider(cfg: ScoreConfig, now: Any) -> None:
    global _DECIDER
    from .scope_decision import ScopeDecider
    _DECIDER = ScopeDecider.for_config(cfg, now, threads=1)


def _packed(block: list[tuple[str, str, Any]]) -> tuple[list[tuple[str, str]], Any, list[int]]:
    """A block as one compact table: a slice would pickle every buffer it is a view of."""
    import pyarrow as pa
    table = pa.concat_tables([t for _, _, t in block]).combine_chunks()
    return [(u, a) for u, a, _ in block], table, [t.num_rows for _, _, t in block]


def _decide_in_worker(keys: list[tuple[str, str]], table: Any, sizes: list[int]) -> Any:
    block, pos = [], 0
    for (user, agent), n in zip(keys, sizes):
        block.append((user, agent, table.slice(pos, n)))
        pos += n
    return _shipped(_DECIDER.decide_many(block))


def _decide_partitions_in_worker(paths: list[str]) -> list[tuple[int, Any]]:
    """Every scope of some spill partitions, read and decided in this process (the main process sends
    their paths, not their rows): each block's row count with its decision, in block order."""
    from .partition import partition_scopes

    return [(sum(t.num_rows for _, _, t in block), _shipped(_DECIDER.decide_many(block)))
            for block in _blocks(scope for p in paths for scope in partition_scopes(p))]


def _partition_jobs(files: list[tuple[Path, int]]) -> Iterator[list[str]]:
    """Consecutive spill partitions (``(path, rows)``) in jobs of at least :data:`BLOCK_ROWS` rows, so
    small partitions still make blocks of the usual size."""
    job: list[str] = []
    rows = 0
    for path, n in files:
        job.append(str(path))
        rows += n
        if rows >= BLOCK_ROWS:
            yield job
            job, rows = [], 0
    if job:
        yield job


def _shipped(decision: Any) -> Any:
    """A decision (``decide_many``'s result) with its tables as Arrow IPC bytes, to send back to the
    main process: a pickled table carries every buffer its columns are views of — the output's ids
    are views of the whole block or partition read — while IPC writes only the rows."""
    scored, tot, bad = decision
    return _ipc(scored), tot, [(user, agent, e, _ipc(rows)) for user, agent, e, rows in bad]


def _received(decision: Any) -> Any:
    """:func:`_shipped`'s decision as tables again."""
    scored, tot, bad = decision
    return _table(scored), tot, [(user, agent, e, _table(rows)) for user, agent, e, rows in bad]


def _ipc(table: Any) -> bytes:
    import pyarrow as pa
    import pyarrow.ipc as ipc

    sink = pa.BufferOutputStream()
    with ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    return sink.getvalue().to_pybytes()


def _table(data: bytes) -> Any:
    import pyarrow.ipc as ipc

    return ipc.open_stream(data).read_all()


def _decisions(groups: Any, decider: Any, cfg: ScoreConfig, now: Any, workers: int) -> Iterator[tuple[int, Any]]:
    """Each block's row count with its decision (``decide_many``'s result), in block order: decided
    here (``workers <= 1``) or by ``workers`` processes. A scope's decision does not depend on where
    it was made.

    - Spilled groups: each process reads whole partitions from disk itself, given their paths (a job
      of partitions holds at least :data:`BLOCK_ROWS` rows), at most ``2 × workers`` jobs ahead; the
      main process holds no rows while they decide, and nothing is pickled but the decisions.
    - Groups held in memory: blocks are sent to the processes, at most ``2 × workers`` ahead, each as
      the compact table sent, not as views that keep the groups' tables alive.
    """
    if workers <= 1:
        for block in _blocks(groups.groups()):
            yield sum(t.num_rows for _, _, t in block), decider.decide_many(block)
        return
    if groups.spilled:
        for _, results in in_processes(_partition_jobs(groups.partition_files()),
                                       lambda job: (_decide_partitions_in_worker, (job,)), workers, "decider",
                                       "decide", initializer=_start_decider, initargs=(cfg, now)):
            for rows, result in results:
                yield rows, _received(result)
        return
    for (_, table, _), result in in_processes((_packed(b) for b in _blocks(groups.groups())),
                                             lambda p: (_decide_in_worker, p), workers, "decider", "decide",
                                             initializer=_start_decider, initargs=(cfg, now)):
        yield table.num_rows, _received(result)


def _blocks(groups: Iterator[tuple[str, str, Any]]) -> Iterator[list[tuple[str, str, Any]]]:
    """Scopes in blocks of at most :data:`BLOCK_ROWS` rows, or one scope when it alone is larger: a
    block is what a decider holds at once, its features and the model's activations included."""
    block: list[tuple[str, str, Any]] = []
    size = 0
    for user, agent, rows in groups:
        if block and size + rows.num_rows > BLOCK_ROWS:
            yield block
            block, size = [], 0
        block.append((user, agent, rows))
        size += rows.num_rows
    if block:
        yield block


def _decide_workers(cfg: ScoreConfig, rows: int) -> int:
    """Processes deciding scopes: ``cfg.workers`` when set; else one per CPU (up to 8) from
    :data:`PARALLEL_DECIDE_ROWS` rows, below which starting them costs more than they save."""
    if cfg.workers:
        return cfg.workers
    return min(os.cpu_count() or 1, 8) if rows >= PARALLEL_DECIDE_ROWS else 0


def _workers(cfg: ScoreConfig, paths: list[Path]) -> int:
    """Reader processes: JSONL parsing is CPU-bound Python and gains from them; Parquet decoding is
    native code whose tables would cost more to ship between processes than to read here."""
    if cfg.workers:
        return cfg.workers
    jsonl = [p for p in paths if p.suffix not in (".parquet", ".pq")]
    if sum(p.stat().st_size for p in jsonl) < _AUTO_WORKERS_BYTES:
        return 0
    return min(os.cpu_count() or 1, 8)


def score_dump(dump: str | Path | Sequence[str | Path], out: str | Path, cfg: ScoreConfig = ScoreConfig(), *,
               progress: bool = True, engine: str = "local", ray_address: str | None = None) -> dict[str, Any]:
    """Score one or more dumps; returns the summary (counts, timings, records/s).

    Args:
        dump: a dump file, or several (ids must be unique across them).
        out: the output file (``engine="ray"``: a directory of part files).
        cfg: the options.
        progress: show progress bars (records read, scopes decided) on stderr.
        engine: ``local`` (default), ``rows`` (record-at-a-time reference) or ``ray``.
        ray_address: ``engine="ray"``: an existing cluster (default: start a local one).

    Raises:
        ValidationError: no dump, no valid record, or an output directory that does not exist.
    """
    if engine not in ENGINES:
        raise ValidationError(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}", field="engine")
    paths = _paths(dump)
    out = Path(out)
    if engine == "rows":
        if len(paths) != 1:
            raise ValidationError("--engine rows scores one dump at a time", field="dump")
        from .reference import score_rows
        return {**score_rows(paths[0], out, cfg, progress=progress), "engine": "rows"}
    if engine == "local" and not _has_pyarrow():
        from ..store.dumps import is_parquet

        if len(paths) == 1 and not is_parquet(paths[0]):
            # a lean install scores JSONL record by record rather than not at all, and says so
            from .reference import score_rows
            report = score_rows(paths[0], out, cfg, progress=progress)
            return {**report, "engine": "rows", "note": "pyarrow is not installed, so the record-at-a-time "
                    "engine ran: pip install 'memir-runtime[batch]' for the columnar one"}
    release_promptly()  # before Arrow is loaded here, and before any worker process starts
    _pyarrow_check()
    if engine == "ray":
        from .ray_engine import score_with_ray
        return score_with_ray(paths, out, cfg, progress=progress, address=ray_address)
    return _score_local(paths, out, cfg, progress=progress)


def _score_local(paths: list[Path], out: Path, cfg: ScoreConfig, *, progress: bool) -> dict[str, Any]:
    import pyarrow as pa

    from ..store.dumps import count_records, is_parquet
    from .dedup import IdSeen
    from .partition import ScopeGroups
    from .read import plan_chunks, renumbered
    from .scope_decision import ScopeDecider, Totals

    t0 = time.perf_counter()
    for target in (out, Path(cfg.quarantine) if cfg.quarantine else out):
        if not target.parent.is_dir():
            raise ValidationError(f"cannot write {target}: directory {str(target.parent)!r} does not exist",
                                  field="out")
    workers = _workers(cfg, paths)
    decider = ScopeDecider.for_config(cfg, cfg.now or utcnow(), threads=2)
    dim = decider.embedding_dim
    qpath = Path(cfg.quarantine) if cfg.quarantine else out.with_name(out.name + ".quarantine.jsonl")
    quarantine = Quarantine(qpath, with_file=len(paths) > 1)
    writer = OutputWriter(out)
    parquet_rows = [count_records(p) or 0 for p in paths if is_parquet(p)]  # metadata only
    groups = ScopeGroups(memory_bytes=cfg.memory_mb << 20, spill_dir=cfg.spill_dir,
                         expected_rows=sum(parquet_rows) if len(parquet_rows) == len(paths) else None)
    seen = IdSeen()
    ok = keep_quarantine = False
    bar: Any = None
    n_rows = n_fast = parts = 0
    totals = Totals()
    try:
        if progress:
            from tqdm import tqdm
            total = sum(count_records(p) or 0 for p in paths)
            bar = tqdm(desc="read", unit="rec", total=total, mininterval=0.5, smoothing=0.1)
        for file_index, path in enumerate(paths):
            chunks = plan_chunks(path, target_bytes=cfg.chunk_mb << 20, numbered=False)
            line = 1  # where the next chunk starts in the file (chunks come back in order)
            for chunk, res in _results(chunks, dim, workers):
                if not chunk.numbered:
                    res, line = renumbered(res, line), line + res.lines
                entries: list[tuple[int, str, str | None]] = list(res.rejects)
                t = res.table
                if t.num_rows:
                    lines = np.asarray(t.column("line").to_numpy(), dtype=np.int64)
                    dup, first = seen.check(t.column("id"), (file_index << FILE_SHIFT) | lines)
                    if dup.any():
                        ids = t.column("id").to_pylist()
                        entries += [(int(lines[i]), duplicate_reason(ids[i], int(first[i]), file_index, paths), None)
                                    for i in np.flatnonzero(dup)]
                        quarantine.duplicates += int(dup.sum())
                        t = t.filter(pa.array(~dup))
                    if len(paths) > 1:
                        t = t.append_column("file", pa.array(np.full(t.num_rows, file_index, np.int32)))
                    groups.add(t)
                if entries:
                    quarantine.write(entries, str(path))
                n_rows += res.rows
                n_fast += res.fast
                parts += 1
                if parts % 16 == 0:
                    give_back()
                if bar is not None:
                    bar.update(res.rows)
                    bar.set_postfix(quarantined=quarantine.count, refresh=False)
        if bar is not None:
            bar.close()
            bar = None
        t_read = time.perf_counter() - t0
        del seen  # the ids' hashes are not needed to decide
        give_back()
        if progress:
            from tqdm import tqdm
            bar = tqdm(desc="decide", unit="rec", total=n_rows - quarantine.count, mininterval=0.5)
        failed: list[dict[str, str]] = []

        deciders = _decide_workers(cfg, n_rows - quarantine.count)
        for block_rows, (scored, tot, bad) in _decisions(groups, decider, cfg, decider.now, deciders):
            writer.write(scored)
            totals.add(tot)
            for user, agent, e, rows in bad:  # one contradictory scope does not stop the dump
                lines = rows.column("line").to_pylist()
                files = rows.column("file").to_pylist() if "file" in rows.schema.names else [0] * len(lines)
                for k in sorted(set(files)):
                    quarantine.write([(line, scope_failure_text(user, agent, e), None)
                                      for line, f in zip(lines, files) if f == k], str(paths[k]))
                failed.append({"user_id": user, "agent_id": agent, "error": str(e)})
            if bar is not None:
                bar.update(block_rows)
                bar.set_postfix(scopes=totals.scopes, kept=totals.kept, refresh=False)
        if totals.valid == 0:
            keep_quarantine = True  # a complete read: the user needs to see why every record was rejected
            names = ", ".join(map(str, paths))
            raise ValidationError(f"no valid record in {names} ({n_rows} read"
                                  + (f", {quarantine.count} quarantined to {qpath}: see why each was rejected)"
                                     if quarantine.count else ")"), field="dump")
        writer.commit()
        ok = True
    finally:
        if bar is not None:
            bar.close()
        if not ok:
            writer.abort()
        quarantine.close(keep=ok or keep_quarantine)
        groups.close()
    total_s = time.perf_counter() - t0
    return {"engine": "local", "input": str(paths[0]) if len(paths) == 1 else [str(p) for p in paths],
            "output": str(out), "records": n_rows, "valid": totals.valid, "quarantined": quarantine.count,
            "duplicates": quarantine.duplicates, "quarantine_file": str(qpath) if quarantine.count else None,
            "embedded": totals.embedded, "context_stored": totals.context_stored, "scopes": totals.scopes, "kept": totals.kept, "archived": totals.archived,
            "deleted": totals.deleted, "rejected": quarantine.count, "failed_scopes": failed, "validated_columnwise": n_fast,
            "spilled": groups.spilled_rows, "readers": workers, "deciders": deciders,
            "seconds": {"read": round(t_read, 3), "decide": round(total_s - t_read, 3), "total": round(total_s, 3)},
            "records_per_s": round(n_rows / total_s, 1) if total_s > 0 else None}
