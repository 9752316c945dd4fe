"""Tags added to stored memories after the fact (``Scope.tag``): the only change a record takes.

A tag is checked like a tag filter (letters, digits, spaces and ``_ . : @ / + # & -``; at most 128
characters) and refused if it looks like PII or a secret: tags are stored as given, unredacted.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import ValidationError
from ..record.redaction import contains_sensitive
from .filters import build_filter
from .scope_core import ScopeCore, check_id

__all__ = ["check_tags", "tag"]


def tag(core: ScopeCore, ids: Sequence[str], tags: str | Sequence[str]) -> int:
    """Add ``tags`` to the scope's memories ``ids`` in one transaction; an unknown id (or another
    scope's) raises ``NotFoundError`` and nothing changes. Returns how many memories gained a tag."""
    if isinstance(ids, str) or not isinstance(ids, Sequence):
        raise ValidationError("ids must be a list of memory ids", field="ids")
    wanted = list(dict.fromkeys(check_id(i, f"ids[{n}]") for n, i in enumerate(ids)))
    clean = check_tags(tags)
    found = core.tenant.existing_ids(wanted)
    missing = [i for i in wanted if i not in found]
    if missing:
        raise core.not_found(missing[0])
    return core.tenant.add_tags(wanted, clean)


def check_tags(tags: str | Sequence[str]) -> list[str]:
    """The tags as :func:`tag` would add them (``ValidationError`` / ``FilterError`` naming a bad one)."""
    if isinstance(tags, str):
        tags = [tags]
    if not isinstance(tags, Sequence) or not tags:
        raise ValidationError("tags must be a tag or a non-empty list of tags", field="tags")
    clean = build_filter(tags=list(tags)).tags or []
    for n, t in enumerate(clean):
        if contains_sensitive(t):
            raise ValidationError(f"tags[{n}] looks like PII or a secret; tags are stored as given — "
                                  "choose a descriptive name", field=f"tags[{n}]")
    return clean
