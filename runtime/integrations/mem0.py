"""A mem0-style facade: ``add / search / get_all / get / update / delete / delete_all / history``.

Code written against mem0's ``Memory`` (or ``AsyncMemory``) switches its import and keeps
working — and every memory it writes is a typed MemIR record: provenance apart from role, a
retention policy deciding what stays under a capacity, and ``explain`` for why.

Example:
    >>> from runtime.integrations.mem0 import Memory          # was: from mem0 import Memory
    >>> m = Memory("agent.sqlite")                                          # doctest: +SKIP
    >>> m.add([{"role": "user", "content": "I'm vegetarian and allergic to nuts"}],
    ...       user_id="alice", metadata={"category": "food"})              # doctest: +SKIP
    >>> m.search("what can alice eat?", user_id="alice", limit=3)["results"][0]["memory"]  # doctest: +SKIP

How mem0's fields map onto memir (the migration note in docs/integrations.md repeats this table):

==================  ==========================================================================
mem0                memir
==================  ==========================================================================
``user_id``         the scope's ``user_id``: every call is confined to it. A call with only an
                    ``agent_id`` works in the agent's own scope, user ``agent:<agent_id>``.
``agent_id``        the scope's ``agent_id`` (``"default"`` when not given).
``run_id``          ``provenance.session_id`` (``search``/``get_all``/``delete_all`` filter on it).
``metadata``        ``metadata.attributes`` (JSON scalars); the keys ``tags``, ``sub_role``,
                    ``source_type``, ``confidence``, ``expires_at``, ``sensitivity`` and ``flags``
                    set those typed fields instead. ``search(filters=...)`` takes memir's typed
                    filters (``tags``, ``source_types``, ``since``...) and matches other keys
                    against ``metadata`` exactly.
``infer=True``      no LLM is needed: the user's and the assistant's turns are stored as spoken
                    (``dialog_role`` user / agent; system turns skipped). Pass
                    ``extractor=callable(messages) -> [facts]`` (an LLM, say) to store extracted
                    facts instead, as ``derived_inference`` memories.
``infer=False``     every message stored as given, system turns too.
``id``              the memir id. ``update`` writes a new version (the old one is archived, and
                    ``history`` lists both); every id of a version chain resolves to its newest
                    version, so an id kept from before an update still works.
``get(id)`` etc.    memir never looks an id up across users: bind the facade to a user
                    (``Memory(path, user_id="alice")``) or pass ``user_id=`` to the call.
``reset()``         not provided: ``MemoryStore.forget_user`` deletes one user completely.
==================  ==========================================================================

What memir adds in each result: ``source_type``, ``session_id``, ``role``, ``confidence``,
``sensitivity``, and for ``search`` the score breakdown (similarity × confidence × freshness ×
role match). ``explain(id)`` says why a memory is still here.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import NotFoundError, ValidationError
from ..record.memir import DialogRole, MemIR, SourceType
from ..retention.decision import MemoryExplanation
from ..retention.policy import RetentionPolicy
from ..store.filters import FilterFields
from ..store.ranking import Hit
from ..store.scope import Scope, Version
from ..store.store import MemoryStore

__all__ = ["AsyncMemory", "Memory"]

Messages = str | Mapping[str, Any] | Sequence[Mapping[str, Any]]
Extractor = Callable[[list[dict[str, str]]], Sequence[str]]

# metadata keys that set typed MemIR fields rather than attributes
_DELETE_ALL = "delete_all through the mem0 facade"
_TYPED_KEYS = ("tags", "sub_role", "source_type", "confidence", "expires_at", "sensitivity", "flags")
_FILTER_KEYS = frozenset(FilterFields.__annotations__)
_ROLES = {"user": DialogRole.user, "assistant": DialogRole.agent, "system": DialogRole.system,
          "tool": DialogRole.tool}


def _messages(messages: Messages) -> list[dict[str, str]]:
    """mem0 accepts a string, one message dict, or a list of them; always ``[{role, content}]``."""
    if isinstance(messages, str):
        return [{"role": "user", "content": messages}]
    if isinstance(messages, Mapping):
        items: list[Any] = [messages]
    elif isinstance(messages, Iterable) and not isinstance(messages, (bytes, bytearray)):
        items = list(messages)
    else:
        raise ValidationError(f"messages must be a string, a message dict or a list of them, got "
                              f"{type(messages).__name__}", field="messages")
    out = []
    for i, m in enumerate(items):
        if not isinstance(m, Mapping) or not isinstance(m.get("content"), str):
            raise ValidationError(f"messages[{i}] must be a dict with a 'content' string (and a 'role')",
                                  field=f"messages[{i}].content")
        role = m.get("role", "user")
        if not isinstance(role, str) or role not in _ROLES:
            raise ValidationError(f"messages[{i}].role must be one of {sorted(_ROLES)}, got {role!r}",
                                  field=f"messages[{i}].role")
        out.append({"role": str(role), "content": m["content"]})
    return out


def _write_fields(metadata: Mapping[str, Any] | None, run_id: str | None) -> dict[str, Any]:
    if metadata is not None and not isinstance(metadata, Mapping):
        raise ValidationError("metadata must be a dict of JSON scalars", field="metadata")
    meta = dict(metadata or {})
    fields: dict[str, Any] = {k: meta.pop(k) for k in _TYPED_KEYS if k in meta}
    for k, v in meta.items():
        if not (v is None or isinstance(v, (str, int, float, bool))):
            raise ValidationError(f"metadata[{k!r}] must be a JSON scalar (str, number, bool, null); memir keeps "
                                  "metadata as typed attributes — flatten nested values", field=f"metadata.{k}")
    if meta:
        fields["attributes"] = meta
    if run_id is not None:
        fields["session_id"] = run_id
    return fields


def _query(filters: Mapping[str, Any] | None, run_id: str | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """(memir typed filters, with the run as a session filter; metadata equalities)."""
    if filters is not None and not isinstance(filters, Mapping):
        raise ValidationError("filters must be a dict", field="filters")
    typed = {k: v for k, v in (filters or {}).items() if k in _FILTER_KEYS}
    meta = {k: v for k, v in (filters or {}).items() if k not in _FILTER_KEYS}
    typed.update(_sessions(run_id))
    return typed, meta


def _limit(limit: Any, minimum: int) -> int:
    """``limit`` if it is an int in [minimum, 2**62], else a ValidationError naming it."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not minimum <= limit <= 2**62:
        raise ValidationError(f"limit must be an int >= {minimum}, got {limit!r}", field="limit")
    return limit


def _threshold(threshold: Any) -> float | None:
    if threshold is None:
        return None
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not math.isfinite(threshold):
        raise ValidationError(f"threshold must be a finite number or None, got {threshold!r}", field="threshold")
    return float(threshold)


def _pool(limit: int, meta: Mapping[str, Any]) -> int:
    """Raw candidates for a search: more when metadata equalities will drop some afterwards."""
    return max(limit, 50) * (4 if meta else 1)


def _sessions(run_id: str | None) -> dict[str, Any]:
    return {"sessions": [run_id]} if run_id is not None else {}


def _matches(rec: MemIR, meta: Mapping[str, Any]) -> bool:
    attrs = rec.metadata.attributes
    return all(attrs.get(k) == v for k, v in meta.items())


def _item(rec: MemIR, scope: Scope, *, updated_at: str | None = None) -> dict[str, Any]:
    """One memory in mem0's result shape, plus memir's typed fields."""
    p, rc, md = rec.provenance, rec.role_context, rec.metadata
    out: dict[str, Any] = {
        "id": rec.id, "memory": rec.content, "hash": hashlib.md5(rec.content.encode()).hexdigest(),
        "metadata": dict(md.attributes) or None, "created_at": rec.created_at.isoformat(),
        "updated_at": updated_at, "user_id": scope.user_id, "agent_id": scope.agent_id,
        "run_id": p.session_id,
        # what memir adds
        "source_type": p.type.value, "session_id": p.session_id,
        "role": rc.active_role + (f"/{rc.sub_role}" if rc.sub_role else ""),
        "confidence": md.confidence, "sensitivity": md.sensitivity.value, "tags": list(md.tags),
    }
    return out


def _hit(h: Hit, scope: Scope) -> dict[str, Any]:
    out = _item(h.record, scope)
    out["score"] = h.score.total
    out["score_breakdown"] = h.score.as_dict()
    return out


def _added(recs: list[MemIR]) -> dict[str, Any]:
    return {"results": [{"id": r.id, "memory": r.content, "event": "ADD"} for r in recs]}


def _found(scope: Scope, hits: list[Hit], meta: Mapping[str, Any], threshold: float | None,
           limit: int) -> dict[str, Any]:
    keep = [h for h in hits if _matches(h.record, meta) and (threshold is None or h.score.total >= threshold)]
    return {"results": [_hit(h, scope) for h in keep[:limit]]}


def _listed(scope: Scope, recs: list[MemIR], meta: Mapping[str, Any], limit: int) -> dict[str, Any]:
    return {"results": [_item(r, scope) for r in recs if _matches(r, meta)][:limit]}


def _newest(scope: Scope, versions: list[Version]) -> dict[str, Any]:
    """The newest version of a chain, ``updated_at`` set when there was a correction."""
    newest = versions[-1].record
    return _item(newest, scope, updated_at=newest.created_at.isoformat() if len(versions) > 1 else None)


def _history(versions: list[Version]) -> list[dict[str, Any]]:
    """mem0's history rows: ADD for the first version, UPDATE for each correction."""
    rows = []
    prev: MemIR | None = None
    for v in versions:
        rec = v.record
        rows.append({"id": rec.id, "memory_id": versions[-1].record.id,
                     "old_memory": prev.content if prev else None, "new_memory": rec.content,
                     "event": "UPDATE" if prev else "ADD", "created_at": rec.created_at.isoformat(),
                     "is_deleted": False, "tier": v.tier})
        prev = rec
    return rows


class _Base:
    """What both facades share: the store, the bound user, and the mapping onto scopes."""

    def __init__(self, path: str | Path | MemoryStore = "memir.sqlite", *, user_id: str | None = None,
                 agent_id: str | None = None, policy: RetentionPolicy | None = None,
                 extractor: Extractor | None = None, **open_kwargs: Any) -> None:
        self._owns = not isinstance(path, MemoryStore)
        self.store = path if isinstance(path, MemoryStore) else MemoryStore.open(path, **open_kwargs)
        self.user_id, self.agent_id = user_id, agent_id
        self.policy = policy
        if extractor is not None and not callable(extractor):
            raise ValidationError("extractor must be a callable(messages) -> list of fact strings", field="extractor")
        self.extractor = extractor

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> Any:
        """mem0's constructor from a dict: ``path``, ``user_id``, ``agent_id``, ``capacity``.

        mem0's ``llm``/``embedder``/``vector_store`` sections have no meaning here (memir embeds
        with its own encoder into its own store) and are refused by name, so nothing is silently
        ignored."""
        cfg = dict(config)
        unknown = sorted(set(cfg) - {"path", "user_id", "agent_id", "capacity"})
        if unknown:
            raise ValidationError(f"memir's Memory does not take {unknown}: it stores into one memir store "
                                  "(path=) with its own encoder; see the mem0 migration note in docs/integrations.md",
                                  field=unknown[0])
        capacity = cfg.pop("capacity", None)
        policy = RetentionPolicy(capacity=capacity) if capacity is not None else None
        return cls(cfg.pop("path", "memir.sqlite"), policy=policy, **cfg)

    def close(self) -> None:
        """Close the store if this facade opened it."""
        if self._owns:
            self.store.close()

    def scope(self, user_id: str | None = None, agent_id: str | None = None) -> Scope:
        """The memir scope a call works in (see the mapping in the module docstring)."""
        # None means "not given"; anything else (an empty string too) is this call's id, checked by the
        # store — never silently replaced by the bound user
        user = self.user_id if user_id is None else user_id
        agent = self.agent_id if agent_id is None else agent_id
        if user is None and agent is None:
            raise ValidationError("one of user_id or agent_id is required (memir never reads across users): pass "
                                  "user_id= to the call or bind the facade with Memory(..., user_id=...)",
                                  field="user_id")
        return self.store.scope(user_id=f"agent:{agent}" if user is None else user,
                                agent_id="default" if agent is None else agent, policy=self.policy)

    def _to_write(self, messages: Messages, metadata: Mapping[str, Any] | None, infer: bool,
                  run_id: str | None) -> list[tuple[str, dict[str, Any]]]:
        msgs = _messages(messages)
        base = _write_fields(metadata, run_id)
        if infer and self.extractor is not None:
            facts = list(self.extractor(msgs))
            bad = [i for i, f in enumerate(facts) if not isinstance(f, str)]
            if bad:
                raise ValidationError(f"the extractor returned a non-string fact at {bad[0]}", field="extractor")
            return [(f, {"source_type": SourceType.derived_inference, "source_entity": "extractor",
                         "dialog_role": DialogRole.agent, **base}) for f in facts if f.strip()]
        keep = [m for m in msgs if not (infer and m["role"] == "system")]
        return [(m["content"], {"dialog_role": _ROLES[m["role"]], **base}) for m in keep]

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Memory(_Base):
    """mem0's ``Memory`` API over a memir store (see the module docstring for the field mapping).

    Args:
        path: a store path or URL, or an open :class:`~runtime.MemoryStore`.
        user_id: bind the facade to one user (calls may still pass their own).
        agent_id: the agent of that scope (calls may still pass their own).
        policy: the retention policy of the scopes it opens (capacity, triggers).
        extractor: an optional fact extractor for ``infer=True`` (an LLM call, say).
        **open_kwargs: passed to ``MemoryStore.open`` (``embedder``, ``config``).
    """

    def add(self, messages: Messages, *, user_id: str | None = None, agent_id: str | None = None,
            run_id: str | None = None, metadata: Mapping[str, Any] | None = None, infer: bool = True
            ) -> dict[str, Any]:
        """Store the messages (or the facts the extractor finds in them) all-or-nothing."""
        scope = self.scope(user_id, agent_id)
        items = [{"content": c, **f} for c, f in self._to_write(messages, metadata, infer, run_id)]
        return _added(scope.write_many(items))

    def search(self, query: str, *, user_id: str | None = None, agent_id: str | None = None,
               run_id: str | None = None, limit: int = 100, filters: Mapping[str, Any] | None = None,
               threshold: float | None = None) -> dict[str, Any]:
        """Recall inside the scope, with typed filters and metadata equalities (see module docstring)."""
        scope = self.scope(user_id, agent_id)
        limit, threshold = _limit(limit, 1), _threshold(threshold)
        typed, meta = _query(filters, run_id)
        hits = scope.recall(query, k=limit, candidates=_pool(limit, meta), **typed)
        return _found(scope, hits, meta, threshold, limit)

    def get_all(self, *, user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None,
                filters: Mapping[str, Any] | None = None, limit: int = 100) -> dict[str, Any]:
        """The scope's working memories (oldest first), filtered like :meth:`search`."""
        scope = self.scope(user_id, agent_id)
        limit = _limit(limit, 0)
        typed, meta = _query(filters, run_id)
        return _listed(scope, scope.list(limit=None if meta else limit, **typed), meta, limit)

    def get(self, memory_id: str, *, user_id: str | None = None, agent_id: str | None = None) -> dict[str, Any]:
        """The newest version of the memory ``memory_id`` belongs to (``NotFoundError`` otherwise)."""
        scope = self.scope(user_id, agent_id)
        return _newest(scope, scope.history(memory_id))

    def update(self, memory_id: str, data: str, *, user_id: str | None = None, agent_id: str | None = None
               ) -> dict[str, Any]:
        """Correct a memory: a new version wins, the old one is archived and stays in ``history``."""
        scope = self.scope(user_id, agent_id)
        new = scope.update(scope.history(memory_id)[-1].record.id, data)
        return {"message": "Memory updated successfully!", "id": new.id}

    def delete(self, memory_id: str, *, user_id: str | None = None, agent_id: str | None = None) -> dict[str, Any]:
        """Forget the memory and every version of it."""
        self.scope(user_id, agent_id).forget(memory_id, reason="deleted through the mem0 facade")
        return {"message": "Memory deleted successfully!"}

    def delete_all(self, *, user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None
                   ) -> dict[str, Any]:
        """Forget every memory of the scope (of one run, with ``run_id``), archive included."""
        scope = self.scope(user_id, agent_id)
        gone = 0
        for rec in scope.list(tier="any", include_expired=True, **_sessions(run_id)):
            try:  # an earlier chain took this version with it
                rep = scope.forget(rec.id, cascade="delete", reason=_DELETE_ALL, scrub=False)
            except NotFoundError:
                continue
            gone += len(rep.deleted) + len(rep.redacted)
        if gone:
            self.store.scrub()  # once for the lot: the WAL and free pages lose the deleted bytes
        return {"message": "Memories deleted successfully!", "deleted": gone}

    def history(self, memory_id: str, *, user_id: str | None = None, agent_id: str | None = None
                ) -> list[dict[str, Any]]:
        """Every version of the memory, oldest first, as mem0's ADD/UPDATE rows."""
        return _history(self.scope(user_id, agent_id).history(memory_id))

    def explain(self, memory_id: str, *, user_id: str | None = None, agent_id: str | None = None
                ) -> MemoryExplanation:
        """What memir adds: why this memory is here, or when and why it was dropped."""
        return self.scope(user_id, agent_id).explain(memory_id)


class AsyncMemory(_Base):
    """mem0's ``AsyncMemory``: the same calls as :class:`Memory`, awaitable, on the async scope
    (blocking work off the event loop; concurrent writes and searches share encoder calls)."""

    async def add(self, messages: Messages, *, user_id: str | None = None, agent_id: str | None = None,
                  run_id: str | None = None, metadata: Mapping[str, Any] | None = None, infer: bool = True
                  ) -> dict[str, Any]:
        """See :meth:`Memory.add`."""
        scope = self.scope(user_id, agent_id)
        items = [{"content": c, **f} for c, f in self._to_write(messages, metadata, infer, run_id)]
        return _added(await scope.awrite_many(items))

    async def search(self, query: str, *, user_id: str | None = None, agent_id: str | None = None,
                     run_id: str | None = None, limit: int = 100, filters: Mapping[str, Any] | None = None,
                     threshold: float | None = None) -> dict[str, Any]:
        """See :meth:`Memory.search`."""
        scope = self.scope(user_id, agent_id)
        limit, threshold = _limit(limit, 1), _threshold(threshold)
        typed, meta = _query(filters, run_id)
        hits = await scope.arecall(query, k=limit, candidates=_pool(limit, meta), **typed)
        return _found(scope, hits, meta, threshold, limit)

    async def get_all(self, *, user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None,
                      filters: Mapping[str, Any] | None = None, limit: int = 100) -> dict[str, Any]:
        """See :meth:`Memory.get_all`."""
        scope = self.scope(user_id, agent_id)
        limit = _limit(limit, 0)
        typed, meta = _query(filters, run_id)
        return _listed(scope, await scope.alist(limit=None if meta else limit, **typed), meta, limit)

    async def get(self, memory_id: str, *, user_id: str | None = None, agent_id: str | None = None
                  ) -> dict[str, Any]:
        """See :meth:`Memory.get`."""
        scope = self.scope(user_id, agent_id)
        return _newest(scope, await scope.ahistory(memory_id))

    async def update(self, memory_id: str, data: str, *, user_id: str | None = None, agent_id: str | None = None
                     ) -> dict[str, Any]:
        """See :meth:`Memory.update`."""
        scope = self.scope(user_id, agent_id)
        new = await scope.aupdate((await scope.ahistory(memory_id))[-1].record.id, data)
        return {"message": "Memory updated successfully!", "id": new.id}

    async def delete(self, memory_id: str, *, user_id: str | None = None, agent_id: str | None = None
                     ) -> dict[str, Any]:
        """See :meth:`Memory.delete`."""
        await self.scope(user_id, agent_id).aforget(memory_id, reason="deleted through the mem0 facade")
        return {"message": "Memory deleted successfully!"}

    async def delete_all(self, *, user_id: str | None = None, agent_id: str | None = None,
                         run_id: str | None = None) -> dict[str, Any]:
        """See :meth:`Memory.delete_all`."""
        scope = self.scope(user_id, agent_id)
        gone = 0
        for rec in await scope.alist(tier="any", include_expired=True, **_sessions(run_id)):
            try:
                rep = await scope.aforget(rec.id, cascade="delete", reason=_DELETE_ALL, scrub=False)
            except NotFoundError:
                continue
            gone += len(rep.deleted) + len(rep.redacted)
        if gone:
            await self.store.ascrub()
        return {"message": "Memories deleted successfully!", "deleted": gone}

    async def history(self, memory_id: str, *, user_id: str | None = None, agent_id: str | None = None
                      ) -> list[dict[str, Any]]:
        """See :meth:`Memory.history`."""
        return _history(await self.scope(user_id, agent_id).ahistory(memory_id))

    async def explain(self, memory_id: str, *, user_id: str | None = None, agent_id: str | None = None
                      ) -> MemoryExplanation:
        """See :meth:`Memory.explain`."""
        return await self.scope(user_id, agent_id).aexplain(memory_id)
