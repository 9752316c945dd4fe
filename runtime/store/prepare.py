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

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
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

__all__ = ["Prepared", "prepare", "prepare_many", "vector_of"]


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
    staged = _stage(core, item, embedding, fields, track, where, batch)
    if isinstance(staged, Prepared):
        return staged
    by_model = dialog_role.classify(core, staged.vec, staged.current) if staged.wants_model else None
    return _built(core, staged, by_model, batch)


def prepare_many(core: ScopeCore, items: Iterable[str | MemIR | dict[str, Any]]) -> list[Prepared]:
    """:func:`prepare` for the items of one ``write_many`` — content text, a ``MemIR``, or a dict of
    ``content``, an optional ``embedding`` and fields — in order, the session order as given, with
    the role model run once for all of them. Each item is corroborated against the stored memories
    and the batch's earlier items.

    Raises:
        ValidationError: naming the first bad item (``item 3: ...``, field ``[3]. ...``).
    """
    unpacked: list[tuple[Any, Any, dict[str, Any]]] = []
    staged: list[_Staged | None] = []  # None: a MemIR or an Assembly, prepared whole in the second pass
    for i, raw in enumerate(items):                                             # stages 1–4 of text items
        with _naming_item(i):
            item, emb, fields = _unpacked(raw)
            unpacked.append((item, emb, fields))
            staged.append(_stage_text(core, item, emb, fields, False, f"item {i}: ") if isinstance(item, str)
                          else None)
    todo = [(k, st) for k, st in enumerate(staged) if st is not None and st.wants_model]
    decisions = dialog_role.classify_many(core, [st.vec for _, st in todo], [st.current for _, st in todo])
    by_model = {k: d for (k, _), d in zip(todo, decisions)}
    batch = BatchNeighbours()
    out: list[Prepared] = []
    for i, ((item, emb, fields), st) in enumerate(zip(unpacked, staged)):       # stages 4–6, in order
        with _naming_item(i):
            p = (prepare(core, item, emb, fields, track=False, where=f"item {i}: ", batch=batch) if st is None
                 else _built(core, st, by_model.get(i), batch))
        out.append(p)
        batch.add(p.record, p.vector)
    return out


def _unpacked(item: Any) -> tuple[Any, Any, dict[str, Any]]:
    """``(item, embedding, fields)`` of one ``write_many`` item (a dict is content + embedding + fields)."""
    if not isinstance(item, dict):
        return item, None, {}
    fields = dict(item)
    emb = fields.pop("embedding", None)
    content = fields.pop("content", None)
    if not isinstance(content, str):
        raise ValidationError("each item needs a 'content' string", field="content")
    return content, emb, fields


@contextmanager
def _naming_item(i: int) -> Iterator[None]:
    """A ValidationError raised inside names batch item ``i`` (message and field)."""
    where = f"item {i}: "
    try:
        yield
    except ValidationError as e:
        raise type(e)(str(e) if str(e).startswith(where) else f"{where}{e}",
                      field=f"[{i}].{e.field}" if e.field else f"[{i}]", problems=e.problems) from e


@dataclass
class _Staged:
    """An item through stages 1–4, waiting for the role model's decision (when it needs one)."""

    draft: Any
    vec: np.ndarray
    decided: dict[str, Any]
    pending: Any
    acting: Any
    current: str
    role: Any
    wants_model: bool
    where: str


def _stage(core: ScopeCore, item: Any, embedding: Any, fields: dict[str, Any], track: bool, where: str,
           batch: BatchNeighbours | None) -> _Staged | Prepared:
    """Stages 1–4 up to the role model (an ``Assembly`` or a ``MemIR`` is prepared outright)."""
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
    return _stage_text(core, item, embedding, fields, track, where)


def _stage_text(core: ScopeCore, item: str, embedding: Any, fields: dict[str, Any], track: bool,
                where: str) -> _Staged:
    """Stages 1–4 of content text, up to the role model."""
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
    wants_model = ((role is None or role.method == "context") and "sub_role" not in draft.fields
                   and "active_role" not in draft.fields and (acting is None or acting.sub_role is None))
    return _Staged(draft, vec, decided, pending, acting, current, role, wants_model, where)


def _built(core: ScopeCore, st: _Staged, by_model: Any, batch: BatchNeighbours | None) -> Prepared:
    """Stages 4–6 once the role model (where it ran: ``by_model``) has decided."""
    store, decided, role, acting = core.store, st.decided, st.role, st.acting
    if by_model is not None and by_model.sub_role is not None:                  # the role model, on the dialog
        role = by_model
    if role is not None:
        decided.update(active_role=role.active_role, sub_role=role.sub_role)
    elif acting is not None and "active_role" not in st.draft.fields:
        decided["active_role"] = acting.active_role
        if "sub_role" not in st.draft.fields:
            decided["sub_role"] = acting.sub_role
    vec = st.vec
    decided.update(store.assembler.enrich(st.draft, lambda: vec, store.embedder))
    rec = store.builder.finish(st.draft, user_id=core.user_id, agent_id=core.agent_id, where=st.where,  # 5. build
                               **decided)
    return _corroborated(core, rec, vec, st.pending, batch)                     # 6. corroborate


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
    rec, judgement = corroborate(core.tenant, cfg, rec, vec, utcnow(), batch)
    return Prepared(rec, vec, pending, judgement)
