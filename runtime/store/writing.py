"""The write pipeline: from an item to a stored memory, one pass through each stage.

For one ``write`` (and for each item of a ``write_many``, all-or-nothing):

1. **prepare** (:func:`.prepare.prepare`): draft and redact, embed, place in a session, annotate,
   build the record, corroborate — nothing stored yet;
2. **close a session it leaves**: a write naming a new session closes the open one first
   (:func:`.session_close.close_session`);
3. **insert**: the record, its vector, the session row and the corroboration back-links, in one
   transaction (``write_many``: every item in one);
4. **supersede**: a correction (``supersedes=``) archives, keeps or forgets the older version;
5. **triggers**: the policy's ``every_n_writes`` / ``watermark`` triggers may run retention
   (:func:`.retaining.auto_retain`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import datetime
from typing import Any, Literal

from ..errors import ValidationError
from ..record.builder import flatten
from ..record.memir import Flag, MemIR
from . import dialog_role
from .corroboration import back_links
from .forgetting import forget
from .live import LiveContext
from .prepare import prepare, prepare_many
from .retaining import auto_retain
from .scope_core import ScopeCore
from .session_close import close_session

__all__ = ["History", "check_history", "update", "write_many", "write_one"]

History = Literal["archive", "keep", "delete"]


def write_one(core: ScopeCore, content: Any, embedding: Any, fields: dict[str, Any], history: History) -> MemIR:
    """Stops 1–5 for one item."""
    live = core.live()
    with live.lock:
        p = prepare(core, content, embedding, fields, track=True)                                  # 1
        now = p.record.event_time
        old, new = live.open_session, p.record.provenance.session_id                                # 2
        if old is not None and new is not None and new != old:
            live.open_session = None
            close_session(core, old, now)
        _, since = core.tenant.insert([p.record], [p.vector], session=_session_row(p.record, live),  # 3
                                      links=back_links(p.judgement, p.record.id))
        core.store.assembler.sessions.commit(p.pending)
        dialog_role.remember(core, [p.vector])
        if p.record.provenance.session_id is not None:
            live.open_session = p.record.provenance.session_id
        if live.working is not None:
            live.working += 1
    _supersede(core, p.record, history)                                                             # 4
    _triggers(core, since, now)                                                                     # 5
    return p.record


def write_many(core: ScopeCore, items: Iterable[str | MemIR | dict[str, Any]]) -> list[MemIR]:
    """Stops 1–5 for a batch: every item prepared first (an invalid one raises, naming its index,
    and nothing is written), one insert, then the sessions the batch closed, then one trigger."""
    live = core.live()
    with live.lock:
        prepared = prepare_many(core, items)                                                       # 1
        if not prepared:
            return []
        recs = [p.record for p in prepared]
        closed: list[str] = []                                                                       # 2
        sid = live.open_session
        for r in recs:
            s = r.provenance.session_id
            if s is not None and sid is not None and s != sid and sid not in closed:
                closed.append(sid)
            sid = s if s is not None else sid
        _, since = core.tenant.insert(recs, [p.vector for p in prepared], batch=True,                # 3
                                      session=_session_row(recs[-1], live, sid),
                                      links=[x for p in prepared for x in back_links(p.judgement, p.record.id)])
        live.open_session = sid
        dialog_role.remember(core, [p.vector for p in prepared])
        if live.working is not None:
            live.working += len(recs)
    for r in recs:
        _supersede(core, r, "archive")                                                               # 4
    now = max(r.event_time for r in recs)
    for s in closed:  # annotated after the batch is written; the trigger runs once, for the last
        close_session(core, s, now, trigger=False)
    if closed and core.policy.triggers.on_session_end:
        auto_retain(core, f"session_end:{closed[-1]}", now)
    _triggers(core, since, now)                                                                      # 5
    return recs


def update(core: ScopeCore, old: MemIR, content: str, embedding: Any, fields: dict[str, Any],
           history: History) -> MemIR:
    """A correction of ``old``: the new version inherits its roles, task, tags, source type, speaker
    and flags unless given, and supersedes it."""
    check_history(history)
    _, base = flatten(old)
    inherit = {k: base[k] for k in ("source_type", "active_role", "sub_role", "dialog_role", "task_id", "tags",
                                    "source_entity", "freshness_half_life")}
    inherit["flags"] = [f for f in old.metadata.flags if f not in (Flag.superseded, Flag.placeholder, Flag.used)]
    return write_one(core, content, embedding, {**inherit, **fields, "supersedes": old.id}, history)


def check_history(history: object) -> None:
    """``history`` of a correction: ``archive``, ``keep`` or ``delete`` (a typed error otherwise)."""
    if history not in ("archive", "keep", "delete"):
        raise ValidationError(f"history must be 'archive', 'keep' or 'delete', got {history!r}", field="history")


def _session_row(rec: MemIR, live: LiveContext, sid: str | None = None) -> tuple[str | None, float | None]:
    s = sid if sid is not None else (rec.provenance.session_id or live.open_session)
    return s, rec.event_time.timestamp()


def _supersede(core: ScopeCore, rec: MemIR, history: History) -> None:
    old = rec.metadata.attributes.get("supersedes")
    if not isinstance(old, str):
        return
    core.live().working = None  # the old version may leave working memory
    if history == "delete":
        forget(core, old, reason=f"superseded by {rec.id}", include_versions=False)
    else:
        core.tenant.mark_superseded(old, rec.id, archive=history == "archive")


def _triggers(core: ScopeCore, writes_since_decision: int, now: datetime) -> None:
    trig, policy = core.policy.triggers, core.policy
    if not trig.enabled:
        return
    why = None
    if trig.every_n_writes and writes_since_decision >= trig.every_n_writes:
        why = "every_n_writes"
    elif trig.watermark is not None and isinstance(policy.capacity, int):
        live = core.live()
        with live.lock:
            if live.working is None:
                live.working = core.tenant.working_count()
            working = live.working
        if working >= math.ceil(trig.watermark * policy.capacity):
            why = "watermark"
    if why is not None:
        auto_retain(core, why, now)

