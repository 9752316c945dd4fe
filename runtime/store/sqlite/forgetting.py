"""Forgetting memories in an SQLite store: the two queries a plan needs, and applying it.

The plan and the placeholder are backend-independent (:mod:`runtime.store.forget_plan`). A
redacted placeholder's freed cells are zeroed (``secure_delete``) and the WAL is checkpointed so
the old page images leave it too. :func:`plan` decides (read-only: what a dry run reports);
:func:`execute` applies a plan inside the caller's transaction, so a retention decision can forget
items as part of its own all-or-nothing write.
"""

from __future__ import annotations

import secrets
import sqlite3
from collections.abc import Sequence

import numpy as np

from ..forget_plan import Cascade, ForgetPlan, decide, placeholder, placeholder_text
from ..row_codec import body_json
from .tenant import SqliteTenant

__all__ = ["descendants", "execute", "plan", "run", "tombstone_logs"]


def descendants(tenant: SqliteTenant, memory_ids: Sequence[str]) -> list[str]:
    """Every memory of the scope derived (transitively) from ``memory_ids``, excluding them."""
    t, tp = tenant.clause(check_only=True)
    roots = set(memory_ids)
    seen: list[str] = []
    frontier = list(memory_ids)
    with tenant.db.read() as conn:
        while frontier:
            marks = ",".join("?" * len(frontier))
            rows = conn.execute(
                f"SELECT DISTINCT m.id FROM memory_parents p JOIN memories m ON m.rowid = p.mem_rowid "
                f"WHERE {t} AND p.parent_id IN ({marks})", tp + frontier).fetchall()
            frontier = [r[0] for r in rows if r[0] not in seen and r[0] not in roots]
            seen.extend(frontier)
    return seen


def plan(tenant: SqliteTenant, memory_ids: Sequence[str], cascade: Cascade) -> ForgetPlan:
    """Decide, without writing, what forgetting ``memory_ids`` does under ``cascade``."""
    ids = list(dict.fromkeys(memory_ids))
    kids = descendants(tenant, ids)
    cited: set[str] = set()
    if kids and cascade == "redact":  # redact the ones something still derives from; delete the rest
        t, tp = tenant.clause(check_only=True)
        with tenant.db.read() as conn:
            marks = ",".join("?" * len(ids))
            cited = {r[0] for r in conn.execute(
                f"SELECT DISTINCT p.parent_id FROM memory_parents p JOIN memories m ON m.rowid = p.mem_rowid "
                f"WHERE {t} AND p.parent_id IN ({marks}) AND m.id NOT IN ({marks})", tp + ids + ids)}
    return decide(ids, kids, cited, cascade)


def execute(tenant: SqliteTenant, conn: sqlite3.Connection, p: ForgetPlan, *, reason: str,
            placeholder_vector: np.ndarray | None) -> None:
    """Apply ``p`` inside the caller's open transaction (``conn`` from ``db.transaction()``)."""
    t, tp = tenant.clause("memories", check_only=True)
    if p.deleted:
        for i in range(0, len(p.deleted), 500):
            chunk = p.deleted[i:i + 500]
            conn.execute(f"DELETE FROM memories WHERE {t} AND id IN ({','.join('?' * len(chunk))})", tp + chunk)
    if p.redacted:
        emb = tenant.db.embedder
        text = placeholder_text(reason)
        vec = (np.asarray(placeholder_vector, np.float32) if placeholder_vector is not None
               else np.asarray(emb.encode([text])[0], np.float32))
        for memory_id in p.redacted:
            rec = tenant.get(memory_id)
            if rec is None:  # deleted concurrently: nothing left to redact
                continue
            body = body_json(placeholder(rec, reason))
            row = conn.execute(f"SELECT rowid FROM memories WHERE {t} AND id = ?", tp + [memory_id]).fetchone()
            conn.execute(f"UPDATE memories SET record = ?, sensitivity = 'none', expires_at = NULL, retention_reason = ? "
                         f"WHERE {t} AND id = ?", [body, reason, *tp, memory_id])
            conn.execute("DELETE FROM vectors WHERE mem_rowid = ?", (row[0],))
            conn.execute("DELETE FROM memory_tags WHERE mem_rowid = ?", (row[0],))
            # the placeholder keeps a vector of its own text so recall over the scope stays consistent
            conn.execute("INSERT INTO vectors(mem_rowid, encoder_id, dim, vec) VALUES (?,?,?,?)",
                         (row[0], emb.encoder_id, emb.dim, vec.tobytes()))
        tenant.conform_vectors(conn, p.redacted)  # an archived placeholder's vector in the cold format
    if p.deleted or p.redacted:
        tenant.db.bump_vector_epoch(conn)


def tombstone_logs(tenant: SqliteTenant, conn: sqlite3.Connection, memory_ids: Sequence[str]) -> None:
    """Replace every mention of the deleted ``memory_ids`` in the scope's recall log and decision log
    by an unlinkable tombstone (``forgotten_<random>``, one per id): a deleted memory leaves no id
    behind, while the logs stay well-formed (ids are whole JSON strings there, and cannot contain
    a quote or a backslash)."""
    for memory_id in memory_ids:
        quoted, tomb = f'"{memory_id}"', f'"forgotten_{secrets.token_hex(8)}"'
        for table in ("recall_log", "decisions"):
            conn.execute(f"UPDATE {table} SET payload = replace(payload, ?, ?) "
                         f"WHERE user_id = ? AND agent_id = ? AND instr(payload, ?) > 0",
                         (quoted, tomb, tenant.user_id, tenant.agent_id, quoted))
        conn.execute("UPDATE decision_items SET memory_id = ?, payload = replace(payload, ?, ?) WHERE memory_id = ? "
                     "AND decision_rowid IN (SELECT id FROM decisions WHERE user_id = ? AND agent_id = ?)",
                     (tomb.strip('"'), quoted, tomb, memory_id, tenant.user_id, tenant.agent_id))


def run(tenant: SqliteTenant, p: ForgetPlan, *, reason: str, checkpoint: bool = True,
        wait_s: float = 30.0) -> None:
    """Apply ``p`` in its own transaction; with ``checkpoint`` the WAL is truncated afterwards so
    the old page images leave it too, waiting up to ``wait_s`` for readers still using it.

    Raises:
        DeletionPendingError: ``checkpoint`` and a reader kept the WAL busy past ``wait_s`` (the rows
            are deleted; their bytes leave once that reader ends and the store checkpoints again).
    """
    with tenant.db.transaction() as conn:
        execute(tenant, conn, p, reason=reason, placeholder_vector=None)
        tombstone_logs(tenant, conn, p.deleted)
    if checkpoint:
        tenant.db.checkpoint(wait_s, required=True)
