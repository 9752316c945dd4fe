"""Copying a store between backends (``memir migrate SRC DST``): SQLite -> PostgreSQL and back.

Every scope is copied exactly as stored — ids, write steps, tiers, usage counters, vectors (no
re-embedding: no encoder is needed), session context, the decision log and the recall log — in
batches of one transaction each, then verified: the memory count and a checksum over every
stored byte of the scope must match on both sides. A copy is resumable and idempotent: rows
already in the destination are skipped, and a scope's logs are written once, in one transaction,
after its memories.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field
from typing import Any

from ..errors import ValidationError
from .backend import StoreBackend, StoredRow, TenantBackend

__all__ = ["CopyReport", "ScopeCopy", "copy_store", "scope_checksum"]


@dataclass(frozen=True)
class ScopeCopy:
    """One scope's copy: counts on both sides, checksums, and whether they match."""

    user_id: str
    agent_id: str
    source_memories: int
    copied_memories: int
    dest_memories: int
    decisions: int
    recalls: int
    logs_written: bool
    source_checksum: str
    dest_checksum: str

    @property
    def ok(self) -> bool:
        return self.source_memories == self.dest_memories and self.source_checksum == self.dest_checksum


@dataclass
class CopyReport:
    """What ``copy_store`` did, per scope."""

    source: str
    dest: str
    scopes: list[ScopeCopy] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(s.ok for s in self.scopes)

    def summary(self) -> dict[str, Any]:
        return {"source": self.source, "dest": self.dest, "ok": self.ok, "scopes": len(self.scopes),
                "memories": sum(s.source_memories for s in self.scopes),
                "copied": sum(s.copied_memories for s in self.scopes),
                "mismatched": [f"{s.user_id}/{s.agent_id}" for s in self.scopes if not s.ok],
                "per_scope": [asdict(s) | {"ok": s.ok} for s in self.scopes]}


def _rows(t: TenantBackend, batch: int) -> Any:
    after = 0
    while True:
        rows = t.stored_rows(after, batch)
        if not rows:
            return
        yield rows
        after = rows[-1].seq


def scope_checksum(t: TenantBackend, batch: int = 1000) -> tuple[int, str]:
    """(memory count, sha256) over every stored field of every memory of the scope, in id order,
    plus its decision and recall logs."""
    per_id: dict[str, str] = {}
    for rows in _rows(t, batch):
        for r in rows:
            per_id[r.record.id] = _row_digest(r)
    h = hashlib.sha256()
    for mid in sorted(per_id):
        h.update(per_id[mid].encode())
    logs = t.logs()
    for d in logs.decisions:
        h.update(repr((d.decision_id, d.at, d.head, sorted(d.items))).encode())
    for at, p in logs.recalls:
        h.update(repr((at, p)).encode())
    return len(per_id), h.hexdigest()


def _row_digest(r: StoredRow) -> str:
    h = hashlib.sha256(r.record.model_dump_json().encode())
    h.update(f"|{r.tier}|{r.seq}|{r.encoder_id}|".encode())
    if r.vector is not None:
        h.update(r.vector.astype("<f4").tobytes())
    if r.context is not None:
        h.update(r.context)
    return h.hexdigest()


def check_batch_size(batch_size: object) -> int:
    """``batch_size`` if it is an int from 1 to 2**62 (a batch is a SQL ``LIMIT`` and a ``range`` step),
    else a :class:`ValidationError` naming it — before anything is read or written."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or not 1 <= batch_size <= 2**62:
        raise ValidationError(f"batch_size must be an int from 1 to 2**62, got {batch_size!r}", field="batch_size")
    return batch_size


def copy_store(src: StoreBackend, dst: StoreBackend, *, batch_size: int = 500, progress: bool = False) -> CopyReport:
    """Copy every scope of ``src`` into ``dst`` (skipping what is already there), then verify each.

    Scopes are those with at least one memory (``src.users()``).
    """
    check_batch_size(batch_size)
    scopes = src.users()
    report = CopyReport(src.path, dst.path)
    bar = None
    if progress:
        from tqdm import tqdm
        bar = tqdm(total=sum(n for _, _, n in scopes), desc="migrate", unit="mem", mininterval=0.5)
    try:
        for user_id, agent_id, _ in scopes:
            s, d = src.tenant(user_id, agent_id), dst.tenant(user_id, agent_id)
            copied = 0
            for rows in _rows(s, batch_size):
                copied += d.restore_rows(rows)  # skips what the destination already has
                if bar is not None:
                    bar.update(len(rows))
            logs = s.logs()
            wrote = d.restore_logs(logs)
            n_src, c_src = scope_checksum(s)
            n_dst, c_dst = scope_checksum(d)
            report.scopes.append(ScopeCopy(user_id, agent_id, n_src, copied, n_dst, len(logs.decisions),
                                           len(logs.recalls), wrote, c_src, c_dst))
    finally:
        if bar is not None:
            bar.close()
    return report
