"""Session consolidation: annotate a finished session's memories with their dialogue context.

Whether a turn is worth keeping depends on its neighbours (it answers a question, the partner
reacts to it, it is central to the session: :mod:`utilitynet.dialog`). Those neighbours may be
forgotten later, so the context is computed **once, when the session is complete**, over all of
its records (every tier, write order, stored vectors) and stored on each record as
``metadata.attributes["ctx.<name>"]`` floats, which the utility model reads at every later
retention decision. Measured on LoCoMo: recomputing the context over what is still held instead
loses ~4–5 points of evidence recall.

When to call it: at the end of each session — the context assembler's session-boundary detection
(a new ``session_id``, or a long idle gap) is the natural trigger; a batch importer calls it after
writing each session. Calling it again on the same session recomputes and overwrites the values
(idempotent for unchanged sessions).

Example:
    >>> scope = store.scope(user_id="alice")                          # doctest: +SKIP
    >>> for turn in turns: scope.write(turn, session_id="s1", source_entity="Alice")
    >>> annotate_session(scope, "s1")                                  # -> number of records
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import TYPE_CHECKING, cast

import numpy as np

from utilitynet.dialog import CONTEXT_NAMES, attribute_key, session_context

from .errors import ValidationError
from .memir import ID_PATTERN, Flag, MemIR

if TYPE_CHECKING:
    from .scope import Scope

__all__ = ["annotate_session", "context_attributes"]

_DIGITS = 6  # stored precision: enough for the model, and stable JSON across platforms


def context_attributes(records: list[MemIR], vectors: np.ndarray) -> list[dict[str, float]]:
    """The ``ctx.*`` attributes of each record of one complete session (records in write order)."""
    X = session_context([r.content for r in records], vectors)
    return [{attribute_key(n): round(float(v), _DIGITS) for n, v in zip(CONTEXT_NAMES, row)} for row in X]


def annotate_session(scope: Scope, session_id: str, *, now: datetime | None = None) -> int:
    """Compute and store the dialogue context of every record of one session.

    Args:
        scope: the tenant scope (only its records are read and rewritten).
        session_id: the finished session (``provenance.session_id``).
        now: reference time for the read (expired records are included anyway).

    Returns:
        The number of records annotated (0 for an unknown or empty session).

    Raises:
        ValidationError: if ``session_id`` is not a valid id.
    """
    if not isinstance(session_id, str) or not re.match(ID_PATTERN, session_id):
        raise ValidationError(f"session_id {session_id!r} is not a valid id (letters, digits, _ . : @ -)",
                              field="session_id")
    got = scope.list_with_vectors(tier="any", include_expired=True, sessions=[session_id], now=now)
    recs, vecs = cast("list[MemIR]", list(got[0])), got[1]
    # Redacted placeholders have lost their content: they are not turns of the conversation.
    live = [i for i, r in enumerate(recs) if Flag.placeholder not in r.metadata.flags]
    if not live:
        return 0
    recs = [recs[i] for i in live]
    attrs = context_attributes(recs, np.asarray(vecs, dtype=np.float32)[live])
    updates = []
    for r, a in zip(recs, attrs):
        new = r.model_copy(update={"metadata": r.metadata.model_copy(
            update={"attributes": {**r.metadata.attributes, **a}})})
        body = new.model_dump(mode="json", exclude={"usage"})
        updates.append((json.dumps(body, separators=(",", ":"), ensure_ascii=False), r.id))
    store = scope._store
    t, tp = scope._tenant("memories", check_only=True)
    with store._lock, store._tx() as conn:
        conn.executemany(f"UPDATE memories SET record = ? WHERE {t} AND id = ?",
                         [(body, tp[0], tp[1], mid) for body, mid in updates])
    return len(updates)
