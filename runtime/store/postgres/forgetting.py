"""Forgetting memories in a PostgreSQL scope: the two queries a plan needs, and applying it.

The plan and the placeholder are backend-independent (:mod:`runtime.store.forget_plan`).
:func:`execute` applies a plan inside the caller's scoped transaction (so a retention decision
forgets as part of its own all-or-nothing write); :func:`run` applies it on its own and, with
``scrub``, rewrites the tables so the deleted bytes leave the table files (``PgDB.scrub``).
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..forget_plan import Cascade, ForgetPlan, decide, placeholder, placeholder_text
from ..row_codec import body_json
from .tenant import PgTenant, lock_rows

__all__ = ["descendants", "execute", "plan", "run", "tombstone_logs"]


def descendants(tenant: PgTenant, memory_ids: Sequence[str]) -> list[str]:
    """Every memory of the scope derived (transitively) from ``memory_ids``, excluding them."""
    t, tp = tenant.clause()
    roots = list(dict.fromkeys(memory_ids))
    with tenant.tx() as conn:
        rows = conn.execute(
            f"WITH RECURSIVE d(id) AS (SELECT unnest(%s::text[]) UNION "
            f"SELECT m.id FROM memory_parents p JOIN memories m ON m.rowid = p.mem_rowid JOIN d ON p.parent_id = d.id "
            f"WHERE {t}) SELECT id FROM d", [roots, *tp]).fetchall()
    return [r[0] for r in rows if r[0] not in set(roots)]


def plan(tenant: PgTenant, memory_ids: Sequence[str], cascade: Cascade) -> ForgetPlan:
    """Decide, without writing, what forgetting ``memory_ids`` does under ``cascade``."""
    ids = list(dict.fromkeys(memory_ids))
    kids = descendants(tenant, ids)
    cited: set[str] = set()
    if kids and cascade == "redact":  # redact the ones something still derives from; delete the rest
        t, tp = tenant.clause()
        with tenant.tx() as conn:
            cited = {r[0] for r in conn.execute(
                f"SELECT DISTINCT p.parent_id FROM memory_parents p JOIN memories m ON m.rowid = p.mem_rowid "
                f"WHERE {t} AND p.parent_id = ANY(%s) AND NOT (m.id = ANY(%s))", [*tp, ids, ids])}
    return decide(ids, kids, cited, cascade)


def execute(tenant: PgTenant, conn: Any, p: ForgetPlan, *, reason: str, placeholder_vector: np.ndarray | None) -> None:
    """Apply ``p`` inside the caller's open scoped transaction."""
    t, tp = tenant.clause()
    lock_rows(tenant, conn, p.deleted + p.redacted)
    if p.deleted:
        conn.execute(f"DELETE FROM memories m WHERE {t} AND m.id = ANY(%s)", [*tp, list(p.deleted)])
    if p.redacted:
        emb = tenant.db.embedder
        text = placeholder_text(reason)
        vec = (np.asarray(placeholder_vector, np.float32) if placeholder_vector is not None
               else np.asarray(emb.encode([text])[0], np.float32))
        rowids: list[int] = []
        for memory_id in p.redacted:
            rec = tenant.get(memory_id)
            if rec is None:  # deleted concurrently: nothing left to redact
                continue
            row = conn.execute(
                f"UPDATE memories m SET record = %s, sensitivity = 'none', expires_at = NULL, retention_reason = %s "
                f"WHERE {t} AND m.id = %s RETURNING m.rowid", [body_json(placeholder(rec, reason)), reason, *tp,
                                                              memory_id]).fetchone()
            if row is None:
                continue
            conn.execute("DELETE FROM memory_tags WHERE mem_rowid = %s", (row[0],))
            # the placeholder keeps a vector of its own text so recall over the scope stays consistent
            conn.execute("INSERT INTO vectors(mem_rowid, encoder_id, dim, vec) VALUES (%s,%s,%s,%b) "
                         "ON CONFLICT (mem_rowid) DO UPDATE SET encoder_id = excluded.encoder_id, "
                         "dim = excluded.dim, vec = excluded.vec, cold = NULL, fmt = 'float32'",
                         (row[0], emb.encoder_id, emb.dim, vec))
            rowids.append(int(row[0]))
        tenant.conform(conn, rowids)  # an archived placeholder's vector in the cold format


def tombstone_logs(tenant: PgTenant, conn: Any, memory_ids: Sequence[str]) -> None:
    """Replace every mention of the deleted ``memory_ids`` in the scope's recall and decision logs
    by an unlinkable tombstone (``forgotten_<random>``, one per id)."""
    t, tp = tenant.clause("x")
    for memory_id in memory_ids:
        quoted, tomb = f'"{memory_id}"', f'"forgotten_{secrets.token_hex(8)}"'
        for table in ("recall_log", "decisions"):
            conn.execute(f"UPDATE {table} x SET payload = replace(payload, %s, %s) WHERE {t} "
                         f"AND strpos(payload, %s) > 0", [quoted, tomb, *tp, quoted])
        conn.execute(f"UPDATE decision_items x SET memory_id = %s, payload = replace(payload, %s, %s) "
                     f"WHERE {t} AND memory_id = %s", [tomb.strip('"'), quoted, tomb, *tp, memory_id])


def run(tenant: PgTenant, p: ForgetPlan, *, reason: str, scrub: bool = True, wait_s: float = 30.0) -> None:
    """Apply ``p`` in its own transaction; with ``scrub`` rewrite the tables afterwards
    (``VACUUM (FULL)`` + ``CHECKPOINT``) so the deleted bytes leave the table files.

    Raises:
        DeletionPendingError: ``scrub`` could not run (a lock held past ``wait_s``, or no privilege).
    """
    with tenant.tx() as conn:
        execute(tenant, conn, p, reason=reason, placeholder_vector=None)
        tombstone_logs(tenant, conn, p.deleted)
    if scrub and (p.deleted or p.redacted):
        tenant.db.scrub(wait_s)
