"""The checks every backend makes before it inserts a batch: ids unique within the batch, and
``derived_from`` / ``supersedes`` naming memories of this scope (or of the batch itself). Errors
name the item (``[3].id``) when the write is a batch."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

from ..errors import ValidationError
from ..record.memir import MemIR

__all__ = ["BatchNames", "check_references", "references", "unique_ids"]


class BatchNames:
    """How errors name an item and a field: ``item 3: …`` / ``[3].id`` in a batch, plain otherwise."""

    def __init__(self, batch: bool) -> None:
        self.batch = batch

    def field(self, i: int, f: str) -> str:
        return f"[{i}].{f}" if self.batch else f

    def item(self, i: int) -> str:
        return f"item {i}: " if self.batch else ""


def unique_ids(records: Sequence[MemIR], names: BatchNames) -> dict[str, int]:
    """id -> position; raises on an id repeated within the batch."""
    ids: dict[str, int] = {}
    for i, r in enumerate(records):
        if r.id in ids:
            raise ValidationError(f"{names.item(i)}id {r.id!r} repeats item {ids[r.id]} of this batch; ids must be "
                                  "unique (omit id to get a fresh one)", field=names.field(i, "id"))
        ids[r.id] = i
    return ids


def references(records: Sequence[MemIR], ids: Collection[str]) -> list[str]:
    """Ids the batch points at (``derived_from``, ``supersedes``) outside itself, sorted."""
    refs = {p for r in records for p in r.provenance.derived_from}
    refs |= {s for r in records if isinstance(s := r.metadata.attributes.get("supersedes"), str)}
    return sorted(refs - set(ids))


def check_references(records: Sequence[MemIR], ids: Collection[str], existing: Callable[[list[str]], set[str]],
                     names: BatchNames) -> None:
    """Raise unless every reference names a memory of the batch or, per ``existing``, of this scope
    (another user's id is indistinguishable from a missing one)."""
    refs = references(records, ids)
    found = existing(refs) if refs else set()
    for i, r in enumerate(records):
        lost = [p for p in r.provenance.derived_from if p not in found and p not in ids]
        if lost:
            raise ValidationError(f"{names.item(i)}provenance.derived_from points at ids that do not exist in "
                                  f"this scope: {lost}", field=names.field(i, "provenance.derived_from"))
        sup = r.metadata.attributes.get("supersedes")
        if isinstance(sup, str) and sup not in found and sup not in ids:
            raise ValidationError(f"{names.item(i)}supersedes {sup!r}, which is not a memory of this scope",
                                  field=names.field(i, "supersedes"))
