"""The write pipeline's first half: one item becomes a record and a vector, nothing stored yet.

Every write — ``write``, ``write_many``, ``update``, a retention candidate, a session summary —
passes through :func:`prepare` once, stage by stage:

1. **draft**: validate the fields and redact the text (:class:`~runtime.record.RecordBuilder`);
2. **vector**: embed the redacted text, or check the caller's vector;
3. **session**: the session detector places the write (an explicit ``session_id`` is authoritative);
4. **annotate**: role (rules and prototypes when configured, else the shipped role model on the
   recent dialog: :mod:`.dialog_role`) and enrichment (tone, entities, ...);
5. **build**: the record, validated once more as a whole;
6. **corroborate**: judge it against the nearest stored memories (and the batch's earlier items).

The second half — insert, supersede, session closing and triggers — is :mod:`.writing`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np

from ..annotate.assembler import Assembly
from ..annotate.claims import Judgement
from ..encoders.embedder import check_vector
from ..errors import ValidationError
from ..record.memir import MemIR, utcnow
from . import dialog_role
from .corroboration import BatchNeighbours, corroborate
from .scope_core import ScopeCore

__all__ = ["Prepared", "prepare", "vector_of"]


@dataclass
class Prepared:
    """A record ready to insert.

    Attributes:
        record: the built record. vector: its unit vector.
        pending: the session tracker's state, committed once the record is written.
        judgement: corroboration: the stored memories to link back to it.
    """

    record: MemIR
    vector: np.ndarray
    pending: Any = None
    judgement: Judgement | None = None


def vector_of(core: ScopeCore, text: str, embedding: Any) -> np.ndarray:
    """The caller's vector, checked against the store's encoder, or the text embedded by it."""
    emb = core.store.embedder
    if embedding is not None:
        return check_vector(embedding, emb)
    return np.asarray(emb.encode([text])[0], dtype=np.float32)


def prepare(core: ScopeCore, item: Any, embedding: Any, fields: dict[str, Any], *, track: bool,
            where: str = "", batch: BatchNeighbours | None = None) -> Prepared:
    """Run the stages above on one item (content text, a ``MemIR`` or an ``Assembly``).

    Args:
        track: let the session detector place the write (single writes; a batch keeps its own order).
        where: prefix of error messages (``"item 3: "``).
        batch: the items of the same ``write_many`` prepared before this one.
    """
    if isinstance(item, Assembly):
        return _assembled(core, item, embedding, fields, where, batch)
    if isinstance(item, MemIR):
        if fields:
            raise ValidationError(f"{where}pass either a MemIR record or content + fields, not both", field="fields")
        rec = core.store.builder.rebuild(item, user_id=core.user_id, agent_id=core.agent_id, where=where)
        return Prepared(rec, vector_of(core, rec.content, embedding))
    if not isinstance(item, str):
        raise ValidationError(f"{where}cannot write a {type(item).__name__}; pass content text, a MemIR or "
                              "a dict", field="content")
    store, asm = core.store, core.store.assembler
    acting = core.live().acting
    if acting is not None:  # the role the agent acts in (Scope.acting_as): what the caller did not say
        if acting.task_id is not None:
            fields = {"task_id": acting.task_id, **fields}
        if acting.required_tone is not None:
            fields = {**fields, "attributes": {"required_tone": acting.required_tone, **(fields.get("attributes") or {})}}
    draft = store.builder.draft(item, fields, where=where)                      # 1. draft
    vec = vector_of(core, draft.text, embedding)                                # 2. vector
    decided: dict[str, Any] = {}
    pending = None
    if track and asm.config.session.enabled:                                    # 3. session
        at = draft.fields.get("timestamp") or draft.fields.get("created_at") or utcnow()
        sid, pending = _place_in_session(core, draft.fields.get("session_id"), at, vec)
        if sid is not None:
            decided["session_id"] = sid
    current = acting.active_role if acting else "general"                       # 4. annotate
    role = None
    if asm.config.roles.rules or asm.config.roles.descriptions:
        role = asm.role_of(draft, current, acting.sub_role if acting else None, lambda: vec)
    if ((role is None or role.method == "context") and "sub_role" not in draft.fields
            and "active_role" not in draft.fields and (acting is None or acting.sub_role is None)):
        by_model = dialog_role.classify(core, vec, current)                     # the role model, on the dialog
        role = by_model if by_model is not None and by_model.sub_role is not None else role
    if role is not None:
        decided.update(active_role=role.active_role, sub_role=role.sub_role)
    elif acting is not None and "active_role" not in draft.fields:
        decided["active_role"] = acting.active_role
        if "sub_role" not in draft.fields:
            decided["sub_role"] = acting.sub_role
    decided.update(asm.enrich(draft, lambda: vec, store.embedder))
    rec = store.builder.finish(draft, user_id=core.user_id, agent_id=core.agent_id, where=where,  # 5. build
                               **decided)
    return _corroborated(core, rec, vec, pending, batch)                        # 6. corroborate


def _assembled(core: ScopeCore, item: Assembly, embedding: Any, fields: dict[str, Any], where: str,
               batch: BatchNeighbours | None) -> Prepared:
    """An ``Assembly`` is written as assembled; only its vector and corroboration are added."""
    if fields:
        raise ValidationError(f"{where}an Assembly is written as assembled: pass no fields", field="fields")
    rec = item.record
    if (rec.provenance.user_id, rec.provenance.agent_id) != (core.user_id, core.agent_id):
        raise ValidationError(f"{where}this Assembly was made for user={rec.provenance.user_id!r} "
                              f"agent={rec.provenance.agent_id!r}, not this scope", field="provenance.user_id")
    vec = vector_of(core, rec.content, item.embedding if embedding is None else embedding)
    return _corroborated(core, rec, vec, None, batch)


def _place_in_session(core: ScopeCore, declared: str | None, at: datetime, vec: np.ndarray) -> tuple[str | None, Any]:
    """(the session a detected write joins — ``None`` when declared —, the tracker state to commit)."""
    tracker = core.store.assembler.sessions
    with tracker.lock:
        if declared is not None:
            _, adopted = tracker.adopt(core.user_id, core.agent_id, declared, at, vec)
            return None, adopted
        seed = core.live().open_session if tracker.state(core.user_id, core.agent_id) is None else None
        state = core.tenant.state() if seed is not None else None
        last = (datetime.fromtimestamp(state.session_last_at, at.tzinfo)
                if state is not None and state.session_last_at is not None else None)
        dec, pending = tracker.decide(core.user_id, core.agent_id, at, vec, declared_id=seed,
                                      declared_last_event_at=last)
        return dec.session_id, pending


def _corroborated(core: ScopeCore, rec: MemIR, vec: np.ndarray, pending: Any,
                  batch: BatchNeighbours | None) -> Prepared:
    cfg = core.store.assembler.config.enrich
    if not cfg.corroborate:
        return Prepared(rec, vec, pending)
    rec, judgement = corroborate(core.tenant, core.weights, cfg, rec, vec, utcnow(), batch)
    return Prepared(rec, vec, pending, judgement)
