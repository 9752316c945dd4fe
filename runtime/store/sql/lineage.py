"""Causality both ways in an SQL scope: what a memory was derived from, and what was derived from it.

``derived_from`` is stored as rows of ``memory_parents`` (child row, parent id), indexed both ways,
so a memory's parents and its children are each one query, and its descendants one query per
generation. Every query carries the tenant clause: a lineage never leaves its scope.
"""

from __future__ import annotations

from collections.abc import Sequence

from .tenant import SqlTenant

__all__ = ["generations", "parents"]


def generations(tenant: SqlTenant, memory_ids: Sequence[str], depth: int | None = None) -> list[list[str]]:
    """The memories of the scope derived from ``memory_ids``, generation by generation: children
    first, then grandchildren, up to ``depth`` generations (``None``: all). Each memory appears once,
    in the nearest generation that reaches it, never one of ``memory_ids``; ids sorted within a
    generation."""
    t, tp = tenant.clause(check_only=True)
    roots = set(memory_ids)
    seen: set[str] = set()
    out: list[list[str]] = []
    frontier = list(dict.fromkeys(memory_ids))
    with tenant.reading() as conn:
        while frontier and (depth is None or len(out) < depth):
            among, ap = tenant.dialect.in_set("p.parent_id", frontier)
            rows = conn.execute(
                f"SELECT DISTINCT m.id FROM memory_parents p JOIN memories m ON m.rowid = p.mem_rowid "
                f"WHERE {t} AND {among} ORDER BY m.id", tp + ap).fetchall()
            frontier = [str(r[0]) for r in rows if r[0] not in seen and r[0] not in roots]
            seen.update(frontier)
            if frontier:
                out.append(frontier)
    return out


def parents(tenant: SqlTenant, memory_id: str) -> list[str]:
    """The ids ``memory_id`` was derived from (its ``derived_from``, in id order; a parent forgotten
    since is still named)."""
    t, tp = tenant.clause(check_only=True)
    ph = tenant.dialect.ph
    with tenant.reading() as conn:
        rows = conn.execute(
            f"SELECT DISTINCT p.parent_id FROM memory_parents p JOIN memories m ON m.rowid = p.mem_rowid "
            f"WHERE {t} AND m.id = {ph} ORDER BY p.parent_id", [*tp, memory_id]).fetchall()
    return [str(r[0]) for r in rows]
