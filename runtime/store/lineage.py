"""A scope's derivation graph, both ways (seed 000 §2.1, §3.1): what a memory came from and what it
led to, as records (the ids come from the backend's ``parents`` / ``lineage``)."""

from __future__ import annotations

from collections.abc import Iterable

from ..errors import ValidationError
from ..record.memir import MemIR
from .scope_core import ScopeCore, check_id

__all__ = ["descendants", "parents"]


def parents(core: ScopeCore, memory_id: str) -> list[MemIR]:
    """See :meth:`runtime.store.scope.Scope.parents`."""
    tenant = core.tenant
    if tenant.tier_of(check_id(memory_id)) is None:
        raise core.not_found(memory_id)
    return _records(core, tenant.parents(memory_id))


def descendants(core: ScopeCore, memory_id: str, depth: int | None) -> list[MemIR]:
    """See :meth:`runtime.store.scope.Scope.descendants`."""
    if depth is not None and (isinstance(depth, bool) or not isinstance(depth, int) or depth < 1):
        raise ValidationError(f"depth must be a positive integer or None (all generations), got {depth!r}",
                              field="depth")
    tenant = core.tenant
    generations = tenant.lineage([check_id(memory_id)], depth)
    if not generations and tenant.tier_of(memory_id) is None:
        raise core.not_found(memory_id)
    return [r for g in generations for r in _records(core, g)]


def _records(core: ScopeCore, ids: Iterable[str]) -> list[MemIR]:
    """The records of ``ids`` still in this scope, oldest first (then by id)."""
    recs = [r for r in (core.tenant.get(i) for i in ids) if r is not None]
    return sorted(recs, key=lambda r: (r.event_time, r.id))
