"""Corroboration links on a record: ``metadata.related`` plus the comma-separated id lists
``attributes["corroborated_by"]`` and ``attributes["contradicts"]`` (the contradiction mark is an
attribute: ``Flag`` is the utility model's closed feature vocabulary, so a new value would change
its feature spec). Both backends write them; forgetting a memory removes its id from its partners.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from .memir import MemIR

__all__ = ["LinkKind", "link_attributes", "link_body", "linked_ids", "with_link", "without_links"]

LinkKind = Literal["corroborated_by", "contradicts"]

_LINK_KINDS = ("corroborated_by", "contradicts")


def _link_ids(attributes: Mapping[str, Any], key: str) -> list[str]:
    """The ids of the comma-separated link list ``attributes[key]``."""
    return [i for i in str(attributes.get(key) or "").split(",") if i]


def link_attributes(attributes: Mapping[str, Any], key: str, ids: Sequence[str]) -> dict[str, Any]:
    """``attributes`` with ``ids`` added to the comma-separated id list under ``key``."""
    out = dict(attributes)
    out[key] = ",".join(dict.fromkeys(_link_ids(out, key) + list(ids)))
    return out


def with_link(record: MemIR, other_id: str, kind: LinkKind) -> MemIR:
    """``record`` linked to ``other_id``: added to ``metadata.related`` and to the comma-separated
    ``attributes[kind]`` (what a stored memory gets when a newer one agrees with or contradicts it)."""
    md = record.metadata
    related, attributes = _linked(md.related, md.attributes, other_id, kind)
    return record.model_copy(update={"metadata": md.model_copy(update={"related": related, "attributes": attributes})})


def link_body(body: str, links: Sequence[tuple[str, LinkKind]]) -> str:
    """A stored record's JSON body (``runtime.store.row_codec.body_json``) with :func:`with_link` applied
    for each ``(other id, kind)``, without building the record: the same record once parsed.

    The store links the neighbours of every corroborated write this way (4 µs a link on a 1 KB body,
    against 26 µs to parse, copy and serialise the model); only ids are added, so nothing the model
    validates can change."""
    import orjson  # a dependency of the lean install; loaded by the first corroborated write

    doc = orjson.loads(body)
    md = doc["metadata"]
    for other_id, kind in links:
        md["related"], md["attributes"] = _linked(md["related"], md["attributes"], other_id, kind)
    return orjson.dumps(doc).decode()


def _linked(related: Sequence[str], attributes: Mapping[str, Any], other_id: str,
            kind: LinkKind) -> tuple[list[str], dict[str, Any]]:
    """``(related, attributes)`` with ``other_id`` added to both (the one rule of a link)."""
    return list(dict.fromkeys([*related, other_id])), link_attributes(attributes, kind, [other_id])


def linked_ids(record: MemIR) -> list[str]:
    """The memories ``record`` is linked to by corroboration (its ``corroborated_by`` and ``contradicts``)."""
    attrs = record.metadata.attributes
    return list(dict.fromkeys(i for k in _LINK_KINDS for i in _link_ids(attrs, k)))


def without_links(record: MemIR, gone: Sequence[str]) -> MemIR | None:
    """``record`` with the ids ``gone`` removed from ``related`` and from its link attributes (an emptied
    list drops the attribute), or ``None`` when it mentions none of them (forgetting leaves no id behind)."""
    drop = set(gone)
    md = record.metadata
    attrs = dict(md.attributes)
    for k in _LINK_KINDS:
        if k in attrs:
            keep = [i for i in _link_ids(attrs, k) if i not in drop]
            if keep:
                attrs[k] = ",".join(keep)
            else:
                del attrs[k]
    related = [i for i in md.related if i not in drop]
    if related == md.related and attrs == md.attributes:
        return None
    return record.model_copy(update={"metadata": md.model_copy(update={"related": related, "attributes": attrs})})
