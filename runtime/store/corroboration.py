"""Corroboration in the store: a new memory judged against its scope's nearest memories, the links
both ways, and the links removed when a memory is deleted.

The rule itself (claims, agreement, contradiction, the confidence formula) is
:mod:`runtime.annotate.claims`; this module feeds it the neighbours — the scope's stored memories
(one filtered search, never another scope's) and, in a ``write_many``, the batch's earlier items —
and turns its :class:`~runtime.annotate.claims.Judgement` into record fields and link rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from ..record.links import LinkKind, link_attributes, linked_ids
from ..record.memir import Flag, MemIR
from .backend import TenantBackend

if TYPE_CHECKING:
    from ..annotate.claims import Judgement, Neighbour
    from ..annotate.enrich import EnrichConfig

__all__ = ["BatchNeighbours", "back_links", "corroborate", "unlink"]


class BatchNeighbours:
    """The records of one batch written so far, with their vectors in one growing matrix (each new
    item is compared with the earlier ones in one mat-vec, no restacking)."""

    def __init__(self) -> None:
        self._records: list[MemIR] = []
        self._mat: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self._records)

    def add(self, record: MemIR, vector: np.ndarray) -> None:
        n = len(self._records)
        if self._mat is None or n == len(self._mat):
            grown = np.zeros((max(64, 2 * n), len(vector)), np.float32)
            if self._mat is not None:
                grown[:n] = self._mat
            self._mat = grown
        self._mat[n] = vector
        self._records.append(record)

    def nearest(self, vec: np.ndarray, k: int) -> list[tuple[MemIR, float]]:
        """The ``k`` most similar records so far, as ``(record, cosine)`` (vectors are unit)."""
        if self._mat is None or not self._records:
            return []
        sims = self._mat[: len(self._records)] @ vec
        top = np.argsort(-sims, kind="stable")[:k]
        return [(self._records[i], float(sims[i])) for i in top]


def corroborate(tenant: TenantBackend, cfg: EnrichConfig, rec: MemIR, vec: np.ndarray, now: datetime,
                batch: BatchNeighbours | None = None) -> tuple[MemIR, Judgement]:
    """Judge ``rec`` (vector ``vec``) against its ``cfg.neighbours`` nearest memories of the scope —
    stored ones and the batch's earlier items; superseded versions and the version it corrects are
    skipped. Returns the record with its links in ``related`` and ``attributes`` (and its confidence
    raised by independent agreeing sources), and the judgement (for :func:`back_links`)."""
    from ..annotate.claims import judge, least_similarity  # the claim rules load with the first corroborated write

    # Neighbours too far to be judged are not read at all; the closest k above the floor are the
    # closest k's that pass.
    floor = least_similarity(cfg)
    near = [(_stored(body), sim) for _, body, sim in tenant.nearest(vec, cfg.neighbours, now, at_least=floor)]
    if batch:  # not stored yet: compared with their vectors here
        near = sorted(near + [(_of_record(r), sim) for r, sim in batch.nearest(vec, cfg.neighbours) if sim >= floor],
                      key=lambda x: -x[1])[:cfg.neighbours]
    old = rec.metadata.attributes.get("supersedes")
    j = judge(rec, [(nb, sim) for (nb, superseded), sim in near if nb.id != old and not superseded], cfg)
    if not (j.agrees or j.contradicts):
        return rec, j
    attrs = dict(rec.metadata.attributes)
    if j.agrees:
        attrs = link_attributes(attrs, "corroborated_by", j.agrees)
    if j.contradicts:
        attrs = link_attributes(attrs, "contradicts", j.contradicts)
    update: dict[str, Any] = {"related": list(dict.fromkeys([*rec.metadata.related, *j.agrees, *j.contradicts])),
                              "attributes": attrs}
    if j.confidence is not None:
        update["confidence"] = j.confidence
    return rec.model_copy(update={"metadata": rec.metadata.model_copy(update=update)}), j


def _stored(body: str) -> tuple[Neighbour, bool]:
    """A stored memory as judging reads it, from its JSON body (``row_codec.body_json``: the record's
    own JSON layout) without validating the whole record, and whether it is superseded."""
    import orjson

    from ..annotate.claims import Neighbour

    doc = orjson.loads(body)
    prov, md = doc["provenance"], doc["metadata"]
    return (Neighbour(doc["id"], doc["content"], (prov["type"], prov.get("source_entity")), float(md["confidence"])),
            Flag.superseded.value in md["flags"])


def _of_record(rec: MemIR) -> tuple[Neighbour, bool]:
    from ..annotate.claims import Neighbour

    return Neighbour.of(rec), Flag.superseded in rec.metadata.flags


def back_links(judgement: Judgement | None, new_id: str) -> list[tuple[str, str, LinkKind]]:
    """``(stored id, new id, kind)`` for the memories the new one agrees with or contradicts: the
    links they get in the insert's transaction."""
    if judgement is None:
        return []
    return ([(i, new_id, "corroborated_by") for i in judgement.agrees]
            + [(i, new_id, "contradicts") for i in judgement.contradicts])


def unlink(tenant: TenantBackend, deleted: Sequence[str], known: dict[str, MemIR] | None = None) -> None:
    """Before deleting memories: their corroboration partners drop the links to them (before the
    delete and its scrub, so no copy of the id outlives it). ``known``: records already read."""
    partners: list[str] = []
    for mid in deleted:
        rec = known[mid] if known is not None and mid in known else tenant.get(mid)
        if rec is not None:
            partners += linked_ids(rec)
    gone = set(deleted)
    partners = [i for i in dict.fromkeys(partners) if i not in gone]
    if partners:
        tenant.drop_links(partners, list(deleted))
