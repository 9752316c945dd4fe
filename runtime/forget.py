"""Forgetting one memory: delete it (and its descendants) or leave a redacted placeholder.

Seed 001 pitfall 4: forgetting a memory others were derived from must not leave a dangling chain,
so by default it becomes ``[forgotten memory: <reason>]`` with its provenance kept, its content,
tags, attributes and vector gone (``secure_delete`` zeroes the freed cells; the WAL is
checkpointed so the old page images leave it too).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from .errors import ValidationError
from .memir import Flag, Sensitivity

if TYPE_CHECKING:
    from .scope import ForgetReport, Scope

__all__ = ["forget"]


def descendants(scope: "Scope", memory_id: str) -> list[str]:
    t, tp = scope._tenant(check_only=True)
    seen: list[str] = []
    frontier = [memory_id]
    while frontier:
        marks = ",".join("?" * len(frontier))
        rows = scope._conn.execute(
            f"SELECT DISTINCT m.id FROM memory_parents p JOIN memories m ON m.rowid = p.mem_rowid "
            f"WHERE {t} AND p.parent_id IN ({marks})", tp + frontier).fetchall()
        frontier = [r[0] for r in rows if r[0] not in seen and r[0] != memory_id]
        seen.extend(frontier)
    return seen

def forget(scope: "Scope", memory_id: str, *, cascade: Literal["redact", "delete"] = "redact",
           reason: str = "forgotten", scrub: bool = True) -> ForgetReport:
    """Forget one memory.

    ``cascade="redact"``: if other memories were derived from it, it is replaced by a redacted
    placeholder (content gone, vector gone, provenance kept, flag ``placeholder``) so their chain
    still explains itself (seed 001 pitfall 4); otherwise it is deleted.
    ``cascade="delete"``: it and everything derived from it (transitively) are deleted.
    With ``scrub`` the WAL is checkpointed so the old content leaves the WAL too.

    Returns:
        ``{"deleted": [ids], "redacted": [ids]}``.
    """
    if cascade not in ("redact", "delete"):
        raise ValidationError(f"cascade must be 'redact' or 'delete', got {cascade!r}", field="cascade")
    scope.get(memory_id)  # NotFoundError if not in this scope
    store = scope._store
    from .scope import ForgetReport
    report = ForgetReport(deleted=[], redacted=[])
    with store._lock:
        with store._tx() as conn:
            kids = descendants(scope, memory_id)
            t, tp = scope._tenant("memories", check_only=True)
            if cascade == "delete" or not kids:
                ids = [memory_id] + (kids if cascade == "delete" else [])
                marks = ",".join("?" * len(ids))
                conn.execute(f"DELETE FROM memories WHERE {t} AND id IN ({marks})", tp + ids)
                report["deleted"] = ids
            else:
                make_placeholder(scope, conn, memory_id, reason)
                report["redacted"] = [memory_id]
            store._bump_vector_epoch()
        if scrub and store.path != ":memory:":
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return report

def make_placeholder(scope: "Scope", conn: Any, memory_id: str, reason: str) -> None:
    rec = scope.get(memory_id)
    flags = sorted(set(rec.metadata.flags) | {Flag.placeholder}, key=lambda f: f.value)
    ph = rec.model_copy(update={
        "content": f"[forgotten memory: {reason}]",
        "metadata": rec.metadata.model_copy(update={"flags": flags, "sensitivity": Sensitivity.none,
                                                    "tags": [], "attributes": {}})})
    body = ph.model_dump(mode="json", exclude={"usage"})
    t, tp = scope._tenant("memories")
    conn.execute(f"UPDATE memories SET record = ?, sensitivity = 'none', retention_reason = ? "
                 f"WHERE {t} AND id = ?", [json.dumps(body, separators=(",", ":")), reason] + tp + [memory_id])
    rowid = conn.execute(f"SELECT rowid FROM memories WHERE {t} AND id = ?", tp + [memory_id]).fetchone()[0]
    conn.execute("DELETE FROM vectors WHERE mem_rowid = ?", (rowid,))
    conn.execute("DELETE FROM memory_tags WHERE mem_rowid = ?", (rowid,))
    # the placeholder keeps a vector of its placeholder text so recall over the scope stays consistent
    v = scope._store.embedder.encode([ph.content])[0]
    conn.execute("INSERT INTO vectors(mem_rowid, encoder_id, dim, vec) VALUES (?,?,?,?)",
                 (rowid, scope._store.embedder.encoder_id, scope._store.embedder.dim,
                  np.asarray(v, np.float32).tobytes()))

