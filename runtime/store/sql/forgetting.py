"""Forgetting memories in an SQL scope: the two queries a plan needs, and applying it (both backends).

The plan and the placeholder are backend-independent (:mod:`runtime.store.forget_plan`).
:func:`plan` decides (read-only: what a dry run reports); :func:`execute` applies a plan inside the
caller's transaction, so a retention decision can forget items as part of its own all-or-nothing
write; :func:`run` applies one on its own and then has the backend push the freed bytes out of
its files (SQLite: zeroed cells and a truncated WAL; PostgreSQL: rewritten tables), through
:meth:`SqlTenant.release_freed <runtime.store.sql.tenant.SqlTenant.release_freed>`.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..forget_plan import Cascade, ForgetPlan, decide, placeholder, placeholder_text
from ..row_codec import body_json
from . import lineage
from .tenant import SqlTenant

__all__ = ["descendants", "execute", "plan", "run", "tombstone_logs"]


def descendants(tenant: SqlTenant, memory_ids: Sequence[str]) -> list[str]:
    """Every memory of the scope derived (transitively) from ``memory_ids``, excluding them."""
    return [i for generation in lineage.generations(tenant, memory_ids) for i in generation]


def plan(tenant: SqlTenant, memory_ids: Sequence[str], cascade: Cascade) -> ForgetPlan:
    """Decide, without writing, what forgetting ``memory_ids`` does under ``cascade``."""
    ids = list(dict.fromkeys(memory_ids))
    kids = descendants(tenant, ids)
    cited: set[str] = set()
    if kids and cascade == "redact":  # redact the ones something still derives from; delete the rest
        t, tp = tenant.clause(check_only=True)
        parents, pp = tenant.dialect.in_set("p.parent_id", ids)
        children, cp = tenant.dialect.in_set("m.id", ids)
        with tenant.reading() as conn:
            cited = {str(r[0]) for r in conn.execute(
                f"SELECT DISTINCT p.parent_id FROM memory_parents p JOIN memories m ON m.rowid = p.mem_rowid "
                f"WHERE {t} AND {parents} AND NOT ({children})", tp + pp + cp)}
    return decide(ids, kids, cited, cascade)


def execute(tenant: SqlTenant, conn: Any, p: ForgetPlan, *, reason: str, placeholder_vector: np.ndarray | None) -> None:
    """Apply ``p`` inside the caller's open write transaction (``conn`` from ``tenant.writing()``)."""
    ph = tenant.dialect.ph
    t, tp = tenant.clause(check_only=True)
    tenant.lock_rows(conn, p.deleted + p.redacted)
    if p.deleted:
        among, ap = tenant.dialect.in_set("m.id", p.deleted)
        conn.execute(f"DELETE FROM memories AS m WHERE {t} AND {among}", tp + ap)
    redacted: list[str] = []
    if p.redacted:
        emb = tenant.db.embedder
        text = placeholder_text(reason)
        vec = (np.asarray(placeholder_vector, np.float32) if placeholder_vector is not None
               else np.asarray(emb.encode([text])[0], np.float32))
        # the records in one read (a memory deleted concurrently is simply absent: nothing to redact)
        for rowid, rec in tenant.locked(conn, p.redacted):
            conn.execute(f"UPDATE memories AS m SET record = {ph}, sensitivity = 'none', expires_at = NULL, "
                         f"retention_reason = {ph} WHERE {t} AND m.rowid = {ph}",
                         [body_json(placeholder(rec, reason)), reason, *tp, rowid])
            conn.execute(f"DELETE FROM vectors WHERE mem_rowid = {ph}", (rowid,))
            conn.execute(f"DELETE FROM memory_tags WHERE mem_rowid = {ph}", (rowid,))
            # the placeholder keeps a vector of its own text so recall over the scope stays consistent
            tenant.insert_vectors(conn, [(rowid, emb.encoder_id, emb.dim, vec)])
            redacted.append(rec.id)
        tenant.conform_vectors(conn, redacted)  # an archived placeholder's vector in the cold format
    if p.deleted or redacted:
        tenant.vectors_changed(conn)


def tombstone_logs(tenant: SqlTenant, conn: Any, memory_ids: Sequence[str]) -> None:
    """Replace every mention of the deleted ``memory_ids`` in the scope's recall log, decision log and
    outcome events
    by an unlinkable tombstone (``forgotten_<random>``, one per id): a deleted memory leaves no id
    behind, while the logs stay well-formed (ids are whole JSON strings there, and cannot contain
    a quote or a backslash)."""
    ph, strpos = tenant.dialect.ph, tenant.dialect.strpos
    t, tp = tenant.clause("x")
    td, tdp = tenant.clause("d")
    for memory_id in memory_ids:
        quoted, tomb = f'"{memory_id}"', f'"forgotten_{secrets.token_hex(8)}"'
        for table in ("recall_log", "decisions"):
            conn.execute(f"UPDATE {table} AS x SET payload = replace(payload, {ph}, {ph}) WHERE {t} "
                         f"AND {strpos}(payload, {ph}) > 0", [quoted, tomb, *tp, quoted])
        conn.execute(f"UPDATE feedback AS x SET memory_id = {ph} WHERE {t} AND x.memory_id = {ph}",
                     [tomb.strip('"'), *tp, memory_id])
        conn.execute(f"UPDATE decision_items SET memory_id = {ph}, payload = replace(payload, {ph}, {ph}) "
                     f"WHERE memory_id = {ph} AND decision_rowid IN (SELECT d.id FROM decisions d WHERE {td})",
                     [tomb.strip('"'), quoted, tomb, memory_id, *tdp])


def run(tenant: SqlTenant, p: ForgetPlan, *, reason: str, scrub: bool = True, wait_s: float = 30.0) -> None:
    """Apply ``p`` in its own transaction; with ``scrub``, then push the freed bytes out of the store's
    files, waiting up to ``wait_s`` for readers or locks in the way.

    Raises:
        DeletionPendingError: ``scrub`` could not finish (the rows are deleted; their bytes leave
            once what held them ends and the store scrubs again).
    """
    with tenant.writing() as conn:
        execute(tenant, conn, p, reason=reason, placeholder_vector=None)
        tombstone_logs(tenant, conn, p.deleted)
    if scrub and (p.deleted or p.redacted):
        tenant.release_freed(wait_s, required=True)
