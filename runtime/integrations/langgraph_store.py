"""A LangGraph long-term memory store on memir: :class:`MemirStore`, a real ``BaseStore``.

Compile a graph with ``store=MemirStore(...)`` and every ``store.put / get / search / delete /
list_namespaces`` a node makes (sync or async) is a typed, redacted, scoped memir memory — with
correction history, TTLs and the store's retention policy — instead of a row in a dict.

Example:
    >>> from runtime import MemoryStore                                      # doctest: +SKIP
    >>> from runtime.integrations.langgraph_store import MemirStore
    >>> store = MemirStore(MemoryStore.open("agent.sqlite"))
    >>> ns = ("alice", "assistant", "prefs")
    >>> store.put(ns, "seat", {"content": "Alice prefers aisle seats"})
    >>> store.put(ns, "seat", {"content": "Alice now prefers window seats"})  # a correction
    >>> [i.value["content"] for i in store.search(("alice",), query="where does Alice sit?", limit=1)]
    ['Alice now prefers window seats']
    >>> [v.tier for v in store.scope(ns).history(store.record(ns, "seat").id)]
    ['archive', 'working']
    >>> graph = builder.compile(checkpointer=InMemorySaver(), store=store)   # nodes: runtime.store

The mapping (nothing is cut: every namespace, key and value comes back as put — the value after
redaction, see below):

=========================  ==================================================================
LangGraph                  memir
=========================  ==================================================================
``namespace[0]``           ``user_id`` of the scope (``MemoryStore.scope(user_id=...)``): must be
                           a memir id (letters, digits, ``_ . : @ -``; 1–128 characters).
``namespace[1]``           ``agent_id`` of the scope (same rule). A one-level namespace
                           ``(user,)`` lives in agent ``agent_id_default`` ("default").
``namespace[2:]``          deeper levels, any LangGraph label: kept exactly in the attributes
                           ``langgraph.ns.2``, ``langgraph.ns.3``…, plus one tag per prefix level
                           — ``ns:/`` for the agent level, ``ns:/memories``, ``ns:/memories/prefs``
                           — so a prefix search is a memir ``tags`` filter. A level that is not a
                           plain tag word (spaces, ``/``, ``?``…; or a tag over 128 characters)
                           gets ``ns#<blake2b of the path>`` instead. Every item is also tagged
                           ``langgraph`` and carries ``langgraph.depth``.
``key``                    any string: kept in the attribute ``langgraph.key``, found through the
                           tag ``item#<blake2b of namespace + key>``; memir makes the memory id.
``value``                  the JSON dict, kept in the attribute ``langgraph.value`` (what ``get``
                           returns; tuples come back as lists). ``content`` — the embedded, recalled
                           text — is the text at the ``index`` paths when there are any (the put's,
                           else ``IndexConfig["fields"]``; ``"$"`` is the whole value), otherwise
                           ``value["content"]``, ``["text"]`` or ``["memory"]`` (the first
                           non-empty string), otherwise the value's compact JSON.
``put`` (new key)          ``Scope.write``; ``put`` on an existing key: ``Scope.update`` — the old
                           version is archived and ``Scope.history`` lists every version.
``put(value=None)``,       ``Scope.forget`` of the key's whole chain (scrubbed from the WAL).
``delete``
``get``                    the key's current version (working tier, not expired); ``created_at`` is
                           the first version's time (``langgraph.created_at``), ``updated_at`` the
                           current version's.
``search(query=...)``      ``Scope.recall`` with the prefix tag filter; ``SearchItem.score`` is the
                           recall's total score (similarity × confidence × freshness × role).
``search()``, no query     ``Scope.list`` with the prefix tag filter, oldest update first.
``search(filter=...)``     applied to the values: equality, nested dicts, ``$eq $ne $gt $gte $lt
                           $lte`` (as ``InMemoryStore``; a comparison of a missing field or of a
                           number with a string is false rather than an error).
prefix ``(user,)``         every agent of that user. Prefix ``()`` (or a ``list_namespaces`` whose
                           prefix does not fix the user) would read every user: refused with a
                           :class:`~runtime.errors.ValidationError` unless the store was made with
                           ``cross_user=True`` (an operator's switch; the scopes then come from
                           ``MemoryStore.admin_users``, and each result's ``namespace[0]`` says
                           whose it is). A prefix that names a user never reaches another.
``list_namespaces``        the namespaces of the items, with prefix/suffix (``*`` wildcards),
                           ``max_depth``, ``limit``, ``offset`` as ``InMemoryStore`` (read from the
                           records under the prefix's tag: it costs one pass over them).
``index=[paths]``          the texts at those paths become ``content``.
``index=False``            stored and embedded like any memory (retention scores it with its
                           vector), but not ranked by ``search(query=...)``: it comes after the
                           ranked hits, with ``score=None``, when a page has room (as
                           ``InMemoryStore`` does for unindexed items).
``ttl`` (minutes)          ``expires_at = now + ttl`` (``TTLConfig.default_ttl`` when not given):
                           expired items are never returned (``omit_expired`` is always on) and
                           retention — or :meth:`MemirStore.sweep_ttl` — deletes them.
=========================  ==================================================================

Redaction: memir redacts secrets and personal data before anything is stored, so a value's string
leaves are redacted too (``{"email": "bob@example.com"}`` comes back as ``{"email": "[EMAIL]"}``),
each with its dict key as context. That is intended. A key or a namespace label that redaction
would change cannot be stored faithfully and is refused with a :class:`~runtime.errors.ValidationError`
naming it (use an opaque key, e.g. a uuid).

TTL refresh: memir's ``expires_at`` is a hard deadline fixed when a version is written, and memir
has no call that moves it in place, so reads do not extend a TTL: an item expires ``ttl`` minutes
after its last ``put``. ``TTLConfig(refresh_on_read=True)`` is therefore refused (set it False; put
the item again to extend it), and a per-call ``refresh_ttl`` is ignored (``GetOp`` and ``SearchOp``
default it to True).

Retention: every scope is opened with the :class:`MemirStore`'s ``policy`` (default: the store's
``StoreConfig.policy``), so its triggers run on puts. An item retention archives leaves working
memory: ``get``/``search`` stop returning it (it stays in memir's archive tier, recallable with
``tier="archive"``); a later ``put`` of its key continues its history.

Errors: every refusal is a :class:`~runtime.errors.ValidationError` naming the field; a namespace
LangGraph's own rules refuse (empty, a label that is empty, not a string, or holds ``.`` or NUL,
root ``"langgraph"``) is an :class:`InvalidNamespace`, which is also LangGraph's
``InvalidNamespaceError`` — the same from the public methods and from ops passed to ``batch``.

Batches: ``batch`` validates every op first (a bad op — a bad label, key, value, ttl, filter, limit,
query text, or a read that names no user — fails the batch before anything is written), then runs
them in order. ``abatch`` runs on the scopes' async methods (``awrite``,
``aupdate``, ``arecall``, ``alist``, ``aforget``): consecutive ops that cannot see each other's
effects (reads; puts of different keys) run concurrently, so their encodes are batched together.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import operator
import re
import threading
from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar, cast

from ..distribution import pip_extra
from ..errors import MissingDependencyError, ValidationError, check_text

try:
    from langgraph.store.base import (
        NOT_PROVIDED,
        BaseStore,
        GetOp,
        IndexConfig,
        InvalidNamespaceError,
        Item,
        ListNamespacesOp,
        MatchCondition,
        NamespacePath,
        NotProvided,
        Op,
        PutOp,
        Result,
        SearchItem,
        SearchOp,
        TTLConfig,
        get_text_at_path,
        tokenize_path,
        validate_op_namespace,
    )
except ModuleNotFoundError as _missing:  # the framework lives in the `integrations` extra
    raise MissingDependencyError(f"runtime.integrations.langgraph_store needs LangGraph ({_missing.name} is "
                                 f"missing): {pip_extra('integrations')}") from None

from ..encoders.embedder import Embedder
from ..record.fields import WriteFields, check_field_names
from ..record.memir import Flag, MemIR, Sensitivity, is_id, utcnow
from ..retention.policy import RetentionPolicy
from ..store.config import StoreConfig
from ..store.scope import Scope
from ..store.store import MemoryStore

__all__ = ["InvalidNamespace", "MemirStore"]

T = TypeVar("T")

TAG_ALL = "langgraph"
"""The tag every item of a :class:`MemirStore` carries."""
A_DEPTH, A_NS, A_KEY, A_VALUE, A_CREATED, A_INDEXED = (
    "langgraph.depth", "langgraph.ns.", "langgraph.key", "langgraph.value", "langgraph.created_at",
    "langgraph.indexed")
"""The attribute names of an item (``langgraph.ns.<i>`` for each level i >= 2). The dots keep
the builder from reading them as a label in front of the value when it redacts."""

_TEXT_FIELDS = ("content", "text", "memory")
_OWNED_FIELDS = ("id", "tags", "attributes", "expires_at", "supersedes", "created_at")
_OPERATORS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte")
_PLAIN_LABEL = re.compile(r"[\w:@+#&\-]+")  # a namespace level readable inside an ``ns:/a/b`` tag
_LABEL_KEY = re.compile(r"[A-Za-z][A-Za-z _\-]{0,40}")  # a dict key read as context ("password: x")
_MIN_REDACTED_INT = 100_000  # integers this long may be a card or phone number: redacted like text
_TAG_MAX = 128
_MAX_COUNT = 2**62  # largest limit/offset (the store's own bound on a limit)
_MAX_NESTING = 100  # deepest dict/list nesting of a value or a filter (the mapping walks them recursively)
_CACHE_MAX = 4096


class InvalidNamespace(ValidationError, InvalidNamespaceError):
    """A namespace LangGraph's rules refuse (empty, not a tuple of strings, a label that is empty or
    holds ``.`` or NUL, root ``"langgraph"``): memir's :class:`~runtime.errors.ValidationError`
    naming the field (``namespace``, ``namespace[2]``, ``prefix``…) and LangGraph's
    ``InvalidNamespaceError`` at once, so code written against either contract catches it."""


# ---------------------------------------------------------------------------------- effects
@dataclass(frozen=True)
class _Call:
    """One call a plan needs made: ``target.name(*args, **kwargs)`` — or, in ``abatch``,
    ``await target.a<name>(...)`` (``has_async``) or the sync call on a worker thread."""

    target: Any
    name: str
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] | None = None
    has_async: bool = True


_Step = _Call | tuple[_Call, ...]
"""What a plan yields: one call, or several independent calls (run concurrently by ``abatch``)."""
_Plan = Generator[_Step, Any, T]


def _call(target: Any, name: str, *args: Any, **kwargs: Any) -> _Call:
    return _Call(target, name, args, kwargs)


# ---------------------------------------------------------------------------------- prepared ops
@dataclass(frozen=True)
class _Where:
    """Where a namespace lives in memir."""

    namespace: tuple[str, ...]
    user_id: str
    agent_id: str

    @property
    def rel(self) -> tuple[str, ...]:
        """The levels below the agent (``namespace[2:]``)."""
        return self.namespace[2:]


@dataclass(frozen=True)
class _Put:
    where: _Where
    key: str
    key_tag: str
    content: str
    tags: list[str]
    attributes: dict[str, Any]
    expires_at: datetime | None
    now: datetime
    sensitivity: Sensitivity


class MemirStore(BaseStore):
    """LangGraph ``BaseStore`` over a memir :class:`~runtime.MemoryStore` (see the module docstring
    for the mapping).

    Args:
        store: the memir store (this object does not close it; :meth:`open` makes one it owns).
        policy: the retention policy of every scope it opens (default: ``StoreConfig.policy``).
        ttl: LangGraph ``TTLConfig``: ``default_ttl`` (minutes) applies to puts without a ``ttl``;
            ``refresh_on_read`` must be False or absent (memir TTLs are not extended by reads);
            ``sweep_interval_minutes`` is used by :meth:`start_ttl_sweeper`.
        index: LangGraph ``IndexConfig``: only ``fields`` is used (the paths whose text becomes a
            memory's content); memir embeds with the store's encoder, so ``embed`` is refused.
        agent_id_default: the agent a one-level namespace ``(user,)`` lives in.
        fields: memir write fields for every put (``source_type``, ``active_role``,
            ``confidence``…; not the ones the mapping owns: id, tags, attributes, expires_at,
            supersedes, created_at).
        clock: the current time (UTC-aware); tests pass a fixed one.
        cross_user: allow reads that are not scoped to one user (``search(())``, ``list_namespaces()``
            without a user prefix). Off by default: memir's isolation invariant holds through this
            adapter unless an operator turns it off explicitly; each result's ``namespace[0]`` names
            the user it belongs to.

    Raises:
        ValidationError: a bad argument, naming it.
    """

    supports_ttl: bool = True

    def __init__(self, store: MemoryStore, *, policy: RetentionPolicy | None = None, ttl: TTLConfig | None = None,
                 index: IndexConfig | None = None, agent_id_default: str = "default",
                 fields: WriteFields | None = None, clock: Callable[[], datetime] | None = None,
                 cross_user: bool = False) -> None:
        if not isinstance(store, MemoryStore):
            raise ValidationError("store must be a MemoryStore (MemoryStore.open(path))", field="store")
        if policy is not None and not isinstance(policy, RetentionPolicy):
            raise ValidationError("policy must be a RetentionPolicy(...)", field="policy")
        if not is_id(agent_id_default):
            raise ValidationError(f"agent_id_default={agent_id_default!r} is not a memir id (letters, digits and "
                                  "_ . : @ -, 1–128 characters)", field="agent_id_default")
        if not isinstance(cross_user, bool):
            raise ValidationError(f"cross_user must be True or False, got {cross_user!r}", field="cross_user")
        self._store = store
        self._owns = False
        self.cross_user = cross_user
        self.policy = policy
        self.agent_id_default = agent_id_default
        self.ttl_config = _check_ttl(ttl)
        self.index_fields = _check_index(index)
        self._fields = _check_fields(fields)
        self._clock = clock or utcnow
        self._scopes: dict[tuple[str, str], Scope] = {}
        self._cache: dict[str, bool] = {}
        self._lock = threading.Lock()
        self._sweeper: threading.Thread | None = None
        self._sweep_stop = threading.Event()

    # ------------------------------------------------------------------ lifecycle
    @classmethod
    def open(cls, path: str | Path, *, embedder: Embedder | None = None, config: StoreConfig | None = None,
             **kwargs: Any) -> MemirStore:
        """Open (or create) a memir store at ``path`` (an SQLite file, ``":memory:"`` or a
        PostgreSQL URL) and wrap it; :meth:`close` closes it. ``kwargs`` go to :class:`MemirStore`."""
        store = MemoryStore.open(path, embedder=embedder, config=config)
        try:
            self = cls(store, **kwargs)
        except BaseException:
            store.close()
            raise
        self._owns = True
        return self

    def close(self) -> None:
        """Stop the TTL sweeper, and close the memir store if :meth:`open` made it. Idempotent."""
        self.stop_ttl_sweeper()
        if self._owns:
            self._store.close()

    def __enter__(self) -> MemirStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def memory_store(self) -> MemoryStore:
        """The memir store underneath."""
        return self._store

    # ------------------------------------------------------------------ memir views
    def scope(self, namespace: tuple[str, ...]) -> Scope:
        """The memir :class:`~runtime.Scope` a namespace's items live in (``namespace[:2]``).

        Raises:
            ValidationError: a level that is not a memir id, naming it (``namespace[1]``).
        """
        where = self._where(_check_namespace(namespace, allow_empty=False))
        return self._scope(where.user_id, where.agent_id)

    def record(self, namespace: tuple[str, ...], key: str) -> MemIR | None:
        """The memir record of an item's current version (for ``Scope.history``, ``explain``…)."""
        where = self._where(_check_namespace(namespace, allow_empty=False))
        key = _check_key(key)
        return self._drive(self._current(self._scope(where.user_id, where.agent_id),
                                         self._key_tag(where.namespace, key), self._clock()))

    # ------------------------------------------------------------------ BaseStore
    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run the ops in order (each validated before any runs); results in the same order.

        Raises:
            ValidationError: a bad op (label, key, value, ttl, index, filter, limit), naming the field;
                an empty namespace, or a label LangGraph forbids, is an :class:`InvalidNamespace`
                (also LangGraph's ``InvalidNamespaceError``).
        """
        plans = [self._plan(op) for op in ops]
        return [self._drive(p) for p in plans]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """:meth:`batch` on the scopes' async methods: consecutive ops that cannot observe each
        other (reads, and puts of different keys) run concurrently; the rest in order."""
        ops = list(ops)
        plans = [self._plan(op) for op in ops]
        results: list[Result] = [None] * len(ops)
        i = 0
        while i < len(ops):
            j = i + 1
            while j < len(ops) and not any(_conflict(ops[k], ops[j]) for k in range(i, j)):
                j += 1
            outs = await asyncio.gather(*(self._adrive(plans[k]) for k in range(i, j)), return_exceptions=True)
            for k, out in zip(range(i, j), outs):
                if isinstance(out, BaseException):
                    for rest in plans[j:]:
                        rest.close()
                    raise out
                results[k] = cast(Result, out)
            i = j
        return results

    # ------------------------------------------------------------------ BaseStore's convenience methods
    # BaseStore checks a namespace with LangGraph's rules before it batches: a bare
    # InvalidNamespaceError, or a TypeError for one that is not a sequence. memir checks it first, so
    # every refusal is an InvalidNamespace (a ValidationError naming the label, and an
    # InvalidNamespaceError); then BaseStore's method runs as it is.
    def get(self, namespace: tuple[str, ...], key: str, *, refresh_ttl: bool | None = None) -> Item | None:
        _check_namespace(namespace, allow_empty=True)
        return super().get(namespace, key, refresh_ttl=refresh_ttl)

    async def aget(self, namespace: tuple[str, ...], key: str, *, refresh_ttl: bool | None = None) -> Item | None:
        _check_namespace(namespace, allow_empty=True)
        return await super().aget(namespace, key, refresh_ttl=refresh_ttl)

    def search(self, namespace_prefix: tuple[str, ...], /, *, query: str | None = None,
               filter: dict[str, Any] | None = None, limit: int = 10, offset: int = 0,
               refresh_ttl: bool | None = None) -> list[SearchItem]:
        _check_namespace(namespace_prefix, allow_empty=True, field="namespace_prefix")
        return super().search(namespace_prefix, query=query, filter=filter, limit=limit, offset=offset,
                              refresh_ttl=refresh_ttl)

    async def asearch(self, namespace_prefix: tuple[str, ...], /, *, query: str | None = None,
                      filter: dict[str, Any] | None = None, limit: int = 10, offset: int = 0,
                      refresh_ttl: bool | None = None) -> list[SearchItem]:
        _check_namespace(namespace_prefix, allow_empty=True, field="namespace_prefix")
        return await super().asearch(namespace_prefix, query=query, filter=filter, limit=limit, offset=offset,
                                     refresh_ttl=refresh_ttl)

    def put(self, namespace: tuple[str, ...], key: str, value: Mapping[str, Any], index: Any = None, *,
            ttl: float | None | NotProvided = NOT_PROVIDED) -> None:
        _check_put_namespace(namespace)
        super().put(namespace, key, value, index, ttl=ttl)

    async def aput(self, namespace: tuple[str, ...], key: str, value: Mapping[str, Any], index: Any = None, *,
                   ttl: float | None | NotProvided = NOT_PROVIDED) -> None:
        _check_put_namespace(namespace)
        await super().aput(namespace, key, value, index, ttl=ttl)

    def delete(self, namespace: tuple[str, ...], key: str) -> None:
        _check_namespace(namespace, allow_empty=True)
        super().delete(namespace, key)

    async def adelete(self, namespace: tuple[str, ...], key: str) -> None:
        _check_namespace(namespace, allow_empty=True)
        await super().adelete(namespace, key)

    def list_namespaces(self, *, prefix: NamespacePath | None = None, suffix: NamespacePath | None = None,
                        max_depth: int | None = None, limit: int = 100, offset: int = 0) -> list[tuple[str, ...]]:
        _check_paths(prefix, suffix)
        return super().list_namespaces(prefix=prefix, suffix=suffix, max_depth=max_depth, limit=limit, offset=offset)

    async def alist_namespaces(self, *, prefix: NamespacePath | None = None, suffix: NamespacePath | None = None,
                               max_depth: int | None = None, limit: int = 100, offset: int = 0
                               ) -> list[tuple[str, ...]]:
        _check_paths(prefix, suffix)
        return await super().alist_namespaces(prefix=prefix, suffix=suffix, max_depth=max_depth, limit=limit,
                                              offset=offset)

    # ------------------------------------------------------------------ TTL sweeping
    def sweep_ttl(self) -> int:
        """Forget, in every scope, each item whose TTL has passed (with all its versions) and each
        expired old version of a live item; returns how many items. Reads never return expired
        items anyway: this frees their space and scrubs them from the file."""
        return self._drive(self._sweep(self._clock()))

    async def asweep_ttl(self) -> int:
        """:meth:`sweep_ttl`, awaitable."""
        return cast(int, await self._adrive(self._sweep(self._clock())))

    def start_ttl_sweeper(self, sweep_interval_minutes: float | None = None) -> None:
        """Run :meth:`sweep_ttl` every ``sweep_interval_minutes`` (default: the TTLConfig's
        ``sweep_interval_minutes``, else 5) on a daemon thread until :meth:`stop_ttl_sweeper`."""
        minutes = sweep_interval_minutes or (self.ttl_config or {}).get("sweep_interval_minutes") or 5
        if isinstance(minutes, bool) or not isinstance(minutes, (int, float)) or not minutes > 0:
            raise ValidationError(f"sweep_interval_minutes must be > 0, got {minutes!r}", field="sweep_interval_minutes")
        with self._lock:
            if self._sweeper is not None:
                return
            self._sweep_stop.clear()
            self._sweeper = threading.Thread(target=self._sweep_loop, args=(float(minutes) * 60,),
                                             name="memir-ttl-sweeper", daemon=True)
            self._sweeper.start()

    def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the sweeper thread; True when it has stopped (or never ran)."""
        with self._lock:
            thread, self._sweeper = self._sweeper, None
        if thread is None:
            return True
        self._sweep_stop.set()
        thread.join(timeout)
        return not thread.is_alive()

    def _sweep_loop(self, every_s: float) -> None:
        while not self._sweep_stop.wait(every_s):
            try:
                self.sweep_ttl()
            except Exception:  # noqa: BLE001 — a failed sweep is retried at the next tick
                continue

    # ------------------------------------------------------------------ drivers
    @staticmethod
    def _drive(plan: _Plan[T]) -> T:
        """Run a plan with the sync scope calls."""
        sent: Any = None
        try:
            while True:
                step = plan.send(sent)
                if isinstance(step, _Call):
                    sent = getattr(step.target, step.name)(*step.args, **(step.kwargs or {}))
                else:
                    sent = [getattr(c.target, c.name)(*c.args, **(c.kwargs or {})) for c in step]
        except StopIteration as stop:
            return cast(T, stop.value)
        finally:
            plan.close()

    @staticmethod
    async def _acall(c: _Call) -> Any:
        if c.has_async:
            return await getattr(c.target, "a" + c.name)(*c.args, **(c.kwargs or {}))
        # a short call memir has no async twin for (the admin list of scopes): one worker thread
        return await asyncio.to_thread(getattr(c.target, c.name), *c.args, **(c.kwargs or {}))

    async def _adrive(self, plan: _Plan[T]) -> T:
        """Run a plan with the async scope calls (several independent calls at once)."""
        sent: Any = None
        try:
            while True:
                step = plan.send(sent)
                if isinstance(step, _Call):
                    sent = await self._acall(step)
                else:
                    sent = list(await asyncio.gather(*(self._acall(c) for c in step)))
        except StopIteration as stop:
            return cast(T, stop.value)
        finally:
            plan.close()

    # ------------------------------------------------------------------ planning (validation, no I/O)
    def _plan(self, op: Op) -> _Plan[Result]:
        if isinstance(op, GetOp):
            ns = _check_namespace(op.namespace, allow_empty=True)
            key = _check_key(op.key)
            if not ns:
                return _done(None)
            where = self._where(ns)
            return self._get(where, self._key_tag(ns, key), self._clock())
        if isinstance(op, PutOp):
            if op.value is None:
                ns = _check_namespace(op.namespace, allow_empty=True)
                key = _check_key(op.key)
                if not ns:
                    return _done(None)
                where = self._where(ns)
                return self._delete(where, self._key_tag(ns, key))
            return self._put(self._prepare_put(op))
        if isinstance(op, SearchOp):
            prefix = _check_namespace(op.namespace_prefix, allow_empty=True, field="namespace_prefix")
            limit, offset = _check_count(op.limit, "limit"), _check_count(op.offset, "offset")
            flt = _check_filter(op.filter)
            if op.query is not None and not isinstance(op.query, str):
                raise ValidationError(f"query must be a string, got {type(op.query).__name__}", field="query")
            if op.query is not None:
                check_text(op.query, "query")  # here, not at the recall: a bad op fails its batch before any op runs
            if prefix:
                self._where(prefix)  # the levels that name a scope must be memir ids
            self._check_reach(prefix, "search")  # now, so a refused read fails its batch before any op runs
            return self._search(prefix, op.query if op.query and op.query.strip() else None, flt, limit, offset,
                                self._clock())
        if isinstance(op, ListNamespacesOp):
            conds = _check_conditions(op.match_conditions)
            if op.max_depth is not None:
                _check_count(op.max_depth, "max_depth")
            self._check_reach(_lead(conds), "list_namespaces")
            return self._list_namespaces(conds, op.max_depth, _check_count(op.limit, "limit"),
                                         _check_count(op.offset, "offset"), self._clock())
        raise ValidationError(f"unknown operation {type(op).__name__}: pass a GetOp, PutOp, SearchOp or "
                              "ListNamespacesOp", field="ops")

    def _check_reach(self, prefix: Sequence[str], op: str) -> None:
        """Refuse a read whose prefix names no user unless the store is ``cross_user``."""
        if not prefix and not self.cross_user:
            raise ValidationError(
                f"{op} without a user in the namespace prefix would read every user's memories: name the user "
                f"(namespace_prefix=('alice',) or ('alice', 'agent', ...)); an operator who needs every user makes "
                f"the store with MemirStore(..., cross_user=True)", field="namespace_prefix")

    def _where(self, ns: tuple[str, ...]) -> _Where:
        for i, label in enumerate(ns[:2]):
            if not is_id(label):
                what = ("user_id", "user") if i == 0 else ("agent_id", "agent")
                raise ValidationError(
                    f"namespace[{i}]={label!r} cannot be a memir {what[0]}: the first two levels of a namespace "
                    f"are the {what[1]} of a memir scope and must be ids (letters, digits and _ . : @ -, 1–128 "
                    f"characters); put free text in the deeper levels, e.g. ('alice', 'assistant', {label!r})",
                    field=f"namespace[{i}]")
        return _Where(ns, ns[0], ns[1] if len(ns) > 1 else self.agent_id_default)

    def _scope(self, user_id: str, agent_id: str) -> Scope:
        with self._lock:
            sc = self._scopes.get((user_id, agent_id))
            if sc is None:
                sc = self._scopes[(user_id, agent_id)] = self._store.scope(user_id=user_id, agent_id=agent_id,
                                                                          policy=self.policy)
            return sc

    def _unchanged_by_redaction(self, text: str) -> bool:
        """Whether the store's builder stores ``text`` exactly as given (cached)."""
        with self._lock:
            hit = self._cache.get(text)
        if hit is None:
            hit = self._store.builder.draft(text, {}).text == text
            with self._lock:
                if len(self._cache) >= _CACHE_MAX:
                    self._cache.clear()
                self._cache[text] = hit
        return hit

    def _ns_tag(self, rel: Sequence[str]) -> str:
        """The tag of the levels below the agent: ``ns:/a/b`` when readable, else ``ns#<hash>``."""
        readable = "ns:/" + "/".join(rel)
        if (len(readable) <= _TAG_MAX and all(_PLAIN_LABEL.fullmatch(x) for x in rel)
                and self._unchanged_by_redaction(readable)):
            return readable
        return "ns#" + _digest(list(rel))

    def _prefix_tag(self, prefix: tuple[str, ...]) -> str:
        """The tag every item under ``prefix`` carries, within the prefix's scope(s)."""
        return TAG_ALL if len(prefix) < 2 else self._ns_tag(prefix[2:])

    @staticmethod
    def _key_tag(ns: tuple[str, ...], key: str) -> str:
        return "item#" + _digest([list(ns), key])

    def _prepare_put(self, op: PutOp) -> _Put:
        ns = _check_put_namespace(op.namespace)
        key = _check_key(op.key)
        where = self._where(ns)
        value = _check_value(op.value)
        index = op.index
        if index is not None and index is not False and (
                not isinstance(index, list) or not all(isinstance(p, str) and p for p in index)):
            raise ValidationError(f"index must be None, False or a list of field paths, got {index!r}", field="index")
        ttl = _check_minutes(op.ttl, "ttl", "ttl")
        now = self._clock()
        content = self._content(value, index if isinstance(index, list) else self.index_fields)
        found: list[Sensitivity] = []
        redacted = self._redact_value(value, None, found)
        sensitivity = Sensitivity.highest(self._fields.get("sensitivity", Sensitivity.none), *found)
        attrs: dict[str, Any] = {A_DEPTH: len(ns), A_KEY: key, A_CREATED: now.isoformat(),
                                 A_VALUE: json.dumps(redacted, ensure_ascii=False, separators=(",", ":"))}
        attrs.update({f"{A_NS}{i}": label for i, label in enumerate(ns) if i >= 2})
        if index is False:
            attrs[A_INDEXED] = False
        tags = [TAG_ALL, self._key_tag(ns, key)]
        if len(ns) >= 2:
            tags += [self._ns_tag(where.rel[:d]) for d in range(len(where.rel) + 1)]
        # What the builder will store, checked before anything is written: the mapping must survive
        draft = self._store.builder.draft(content, {**self._fields, "attributes": attrs, "tags": tags,
                                                    "sensitivity": sensitivity})
        stored = draft.fields.get("attributes") or {}
        if stored.get(A_KEY) != key:
            raise ValidationError(f"key {key[:40]!r} looks like personal data or a secret, which memir redacts "
                                  "before storing, so it could not be found again: use an opaque key (e.g. a "
                                  "uuid) and keep the data in the value", field="key")
        for i in range(2, len(ns)):
            if stored.get(f"{A_NS}{i}") != ns[i]:
                raise ValidationError(f"namespace[{i}]={ns[i][:40]!r} looks like personal data or a secret, which "
                                      "memir redacts before storing: use an opaque label", field=f"namespace[{i}]")
        if list(draft.fields.get("tags") or []) != tags:
            raise ValidationError(f"namespace {ns!r} would be changed by redaction: use opaque labels",
                                  field="namespace")
        try:
            json.loads(stored[A_VALUE])
        except (KeyError, TypeError, ValueError):
            raise ValidationError("redacting the value's text would break its JSON: store the sensitive text in "
                                  "a field of its own", field="value") from None
        attrs[A_VALUE] = stored[A_VALUE]
        try:
            expires = now + timedelta(minutes=float(ttl)) if ttl is not None else None
        except OverflowError:
            raise ValidationError(f"ttl={ttl!r} minutes from now is past the last date a timestamp can hold "
                                  "(year 9999): pass a smaller ttl, or None for no expiry", field="ttl") from None
        return _Put(where, key, tags[1], content, tags, attrs, expires, now, sensitivity)

    def _content(self, value: Mapping[str, Any], paths: list[str] | None) -> str:
        """The text memir embeds and recalls for a value (see the mapping)."""
        if paths:
            texts: list[str] = []
            for p in paths:
                if p == "$":
                    texts.append(_compact(value))
                else:
                    texts += [t for t in get_text_at_path(value, tokenize_path(p)) if t.strip()]
            text = "\n".join(texts)
            if text.strip():
                return text
        else:
            for name in _TEXT_FIELDS:
                v = value.get(name)
                if isinstance(v, str) and v.strip():
                    return v
        return _compact(value)

    def _redact_text(self, text: str, label: str | None, found: list[Sensitivity]) -> str:
        """``text`` as the store's builder redacts it (with ``label: `` in front as context when the
        label is a plain name); what it found goes into ``found``."""
        if not text.strip():
            return text
        if "\x00" in text:
            return "\x00".join(self._redact_text(part, label, found) for part in text.split("\x00"))
        builder = self._store.builder
        if label is not None and _LABEL_KEY.fullmatch(label):
            head = f"{label}: "
            draft = builder.draft(head + text, {})
            if draft.text.startswith(head):
                found.append(draft.sensitivity)
                return draft.text[len(head):]
        draft = builder.draft(text, {})
        found.append(draft.sensitivity)
        return draft.text

    def _redact_value(self, v: Any, label: str | None, found: list[Sensitivity]) -> Any:
        """The value with every string leaf (and long integer) redacted, its dict key as context."""
        if isinstance(v, str):
            return self._redact_text(v, label, found)
        if isinstance(v, bool) or v is None or isinstance(v, float):
            return v
        if isinstance(v, int):
            if abs(v) < _MIN_REDACTED_INT:
                return v
            out = self._redact_text(str(v), label, found)
            return v if out == str(v) else out
        if isinstance(v, Mapping):
            return {self._redact_text(k, None, found): self._redact_value(x, k, found) for k, x in v.items()}
        return [self._redact_value(x, label, found) for x in v]

    # ------------------------------------------------------------------ plans (I/O through scope calls)
    def _current(self, scope: Scope, key_tag: str, now: datetime, *, any_tier: bool = False) -> _Plan[MemIR | None]:
        """The newest live version carrying ``key_tag`` (working tier; any tier for a put)."""
        recs: list[MemIR] = yield _call(scope, "list", tags=[key_tag], now=now, tier="any" if any_tier else "working")
        live = [r for r in recs if not r.has_flag(Flag.superseded) and not r.has_flag(Flag.placeholder)]
        return live[-1] if live else None

    def _get(self, where: _Where, key_tag: str, now: datetime) -> _Plan[Result]:
        rec = yield from self._current(self._scope(where.user_id, where.agent_id), key_tag, now)
        return None if rec is None else self._item(rec)

    def _put(self, p: _Put) -> _Plan[Result]:
        scope = self._scope(p.where.user_id, p.where.agent_id)
        old = yield from self._current(scope, p.key_tag, p.now, any_tier=True)
        attrs = dict(p.attributes)
        fields: dict[str, Any] = {**self._fields, "tags": p.tags, "expires_at": p.expires_at, "created_at": p.now,
                                  "sensitivity": p.sensitivity}
        if old is None:
            yield _call(scope, "write", p.content, attributes=attrs, **fields)
        else:
            first = old.metadata.attributes.get(A_CREATED)
            if isinstance(first, str):
                attrs[A_CREATED] = first
            yield _call(scope, "update", old.id, p.content, history="archive", attributes=attrs, **fields)
        return None

    def _delete(self, where: _Where, key_tag: str) -> _Plan[Result]:
        scope = self._scope(where.user_id, where.agent_id)
        recs: list[MemIR] = yield _call(scope, "list", tags=[key_tag], tier="any", include_expired=True)
        gone: set[str] = set()
        for r in recs:
            if r.id not in gone:
                report = yield _call(scope, "forget", r.id, reason="deleted by the LangGraph store")
                gone.update(report.deleted, report.redacted)
        return None

    def _scopes_under(self, prefix: Sequence[str], *, op: str = "search", every_user: bool = False
                      ) -> _Plan[list[Scope]]:
        """The scopes a prefix reaches (from the admin list when it names no agent). A prefix that names
        no user is refused unless ``cross_user`` (or ``every_user``: the store's own TTL sweep)."""
        if len(prefix) >= 2:
            return [self._scope(prefix[0], prefix[1])]
        if not every_user:
            self._check_reach(prefix, op)
        users: list[tuple[str, str, int]] = yield _Call(self._store, "admin_users", has_async=False)
        return [self._scope(u, a) for u, a, _ in users if not prefix or u == prefix[0]]

    def _search(self, prefix: tuple[str, ...], query: str | None, flt: dict[str, Any] | None, limit: int,
                offset: int, now: datetime) -> _Plan[Result]:
        if limit == 0:
            return []
        scopes = yield from self._scopes_under(prefix)
        tag = self._prefix_tag(prefix)
        want = min(offset + limit, _MAX_COUNT)  # a page past 2**62 items is empty either way
        if query is None:
            pushed = want if flt is None and len(scopes) == 1 else None
            lists: list[list[MemIR]] = yield tuple(_call(s, "list", tags=[tag], now=now, limit=pushed) for s in scopes)
            recs = sorted((r for rs in lists for r in rs), key=lambda r: r.created_at)
            items = [it for r in recs if isinstance(it := self._item(r, prefix=prefix, flt=flt, search=True), SearchItem)]
            return _unique(items[::-1])[::-1][offset:want]  # a key's newest version only (see _unique)
        k = max(want, 10)
        while True:
            # every level, as the no-query listing above: a BaseStore finds what the graph put (its
            # values are redacted at put); Scope.recall alone leaves secrets out of prompts by default
            hits_per = yield tuple(_call(s, "recall", query, k, tags=[tag], now=now, sensitivity="secret")
                                   for s in scopes)
            ranked: list[tuple[float, SearchItem]] = []
            unranked: list[SearchItem] = []
            for hits in hits_per:
                for h in hits:
                    it = self._item(h.record, prefix=prefix, flt=flt, search=True)
                    if not isinstance(it, SearchItem):
                        continue
                    if h.record.metadata.attributes.get(A_INDEXED) is False:
                        unranked.append(it)
                    else:
                        it.score = float(h.score.total)
                        ranked.append((it.score, it))
            exhausted = all(len(hits) < k for hits in hits_per)
            if len(ranked) >= want or exhausted:
                break
            k *= 4
        ranked.sort(key=lambda x: -x[0])
        page = _unique([it for _, it in ranked])[offset:want]
        if len(page) < limit:
            if not exhausted:  # unranked items recall did not reach
                lists = yield tuple(_call(s, "list", tags=[tag], now=now) for s in scopes)
                unranked = [it for rs in lists for r in rs
                            if r.metadata.attributes.get(A_INDEXED) is False
                            and isinstance(it := self._item(r, prefix=prefix, flt=flt, search=True), SearchItem)]
            page += _unique(unranked)[:limit - len(page)]
        return page

    def _list_namespaces(self, conds: tuple[MatchCondition, ...], max_depth: int | None, limit: int, offset: int,
                         now: datetime) -> _Plan[Result]:
        lead = _lead(conds)
        if any(not is_id(x) for x in lead[:2]):
            return []
        scopes = yield from self._scopes_under(lead, op="list_namespaces")
        tag = self._prefix_tag(lead)
        lists: list[list[MemIR]] = yield tuple(_call(s, "list", tags=[tag], now=now) for s in scopes)
        found = {ns for rs in lists for r in rs if (ns := self._namespace_of(r)) is not None}
        nss = [ns for ns in found if all(_matches_condition(c, ns) for c in conds)]
        out = sorted({ns[:max_depth] for ns in nss}) if max_depth is not None else sorted(nss)
        return out[offset:offset + limit]

    def _sweep(self, now: datetime) -> _Plan[int]:
        scopes = yield from self._scopes_under((), every_user=True)
        n = 0
        for s in scopes:
            recs: list[MemIR] = yield _call(s, "list", tags=[TAG_ALL], tier="any", include_expired=True, now=now)
            gone: set[str] = set()
            for r in recs:
                if r.is_expired(now) and r.id not in gone:
                    current = not r.has_flag(Flag.superseded)  # an item's TTL ends it; an old version's, only it
                    report = yield _call(s, "forget", r.id, reason="TTL expired", include_versions=current)
                    gone.update(report.deleted, report.redacted)
                    n += current
        return n

    # ------------------------------------------------------------------ records -> items
    def _namespace_of(self, rec: MemIR) -> tuple[str, ...] | None:
        a = rec.metadata.attributes
        depth = a.get(A_DEPTH)
        if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
            return None
        head = (rec.provenance.user_id, rec.provenance.agent_id)[:min(depth, 2)]
        rest = tuple(a.get(f"{A_NS}{i}") for i in range(2, depth))
        if not all(isinstance(x, str) for x in rest):
            return None
        if depth == 1 and rec.provenance.agent_id != self.agent_id_default:
            return None
        return head + cast(tuple[str, ...], rest)

    def _item(self, rec: MemIR, *, prefix: tuple[str, ...] = (), flt: dict[str, Any] | None = None,
              search: bool = False) -> Item | None:
        ns = self._namespace_of(rec)
        a = rec.metadata.attributes
        key, raw, created = a.get(A_KEY), a.get(A_VALUE), a.get(A_CREATED)
        if ns is None or ns[:len(prefix)] != prefix or not isinstance(key, str) or not isinstance(raw, str):
            return None
        value = json.loads(raw)
        if flt is not None and not all(_compare(value.get(k), v) for k, v in flt.items()):
            return None
        try:
            first = datetime.fromisoformat(created) if isinstance(created, str) else rec.created_at
        except ValueError:
            first = rec.created_at
        if search:
            return SearchItem(ns, key, value, first, rec.created_at)
        return Item(value=value, key=key, namespace=ns, created_at=first, updated_at=rec.created_at)


# ---------------------------------------------------------------------------------- helpers
def _done(value: T) -> _Plan[T]:
    """A plan that needs no call."""
    return value
    yield  # pragma: no cover — makes this a generator


def _unique(items: list[SearchItem]) -> list[SearchItem]:
    """The first item of each (namespace, key). Two versions of one key are live only after two
    writers put the same *new* key at the same instant (memir has no unique constraint on a tag);
    reads show one, and the next put continues the newest."""
    seen: set[tuple[tuple[str, ...], str]] = set()
    out = []
    for it in items:
        if (it.namespace, it.key) not in seen:
            seen.add((it.namespace, it.key))
            out.append(it)
    return out


def _digest(obj: Any) -> str:
    return hashlib.blake2b(json.dumps(obj, ensure_ascii=False).encode(), digest_size=16).hexdigest()


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def _check_namespace(ns: Any, *, allow_empty: bool, field: str = "namespace") -> tuple[str, ...]:
    """LangGraph's label rules (as ``BaseStore``, but an :class:`InvalidNamespace` naming the label),
    then a tuple."""
    if not isinstance(ns, (tuple, list)):
        raise InvalidNamespace(f"{field} must be a tuple of strings, got {type(ns).__name__}", field=field)
    ns = tuple(ns)
    if not ns and not allow_empty:
        raise InvalidNamespace("Namespace cannot be empty.", field=field)
    for i, label in enumerate(ns):
        if not isinstance(label, str):
            raise InvalidNamespace(f"{field}[{i}] must be a string, got {type(label).__name__}", field=f"{field}[{i}]")
        try:
            validate_op_namespace(GetOp((label,), ""))
            check_text(label, f"{field}[{i}]")
        except (InvalidNamespaceError, ValidationError) as e:
            raise InvalidNamespace(f"{field}[{i}]: {e}", field=f"{field}[{i}]") from None
    return ns


def _check_put_namespace(ns: Any) -> tuple[str, ...]:
    """A namespace an item can be put in: LangGraph's rules, not empty, not rooted at ``langgraph``."""
    ns = _check_namespace(ns, allow_empty=False)
    if ns[0] == "langgraph":
        raise InvalidNamespace(f'Root label for namespace cannot be "langgraph". Got: {ns}', field="namespace[0]")
    return ns


def _check_paths(prefix: Any, suffix: Any) -> None:
    """``list_namespaces``' prefix and suffix paths (``*`` is a wildcard label)."""
    for name, path in (("prefix", prefix), ("suffix", suffix)):
        if path is not None:
            _check_namespace(path, allow_empty=True, field=name)


def _check_key(key: Any) -> str:
    if not isinstance(key, str):
        raise ValidationError(f"key must be a string, got {type(key).__name__}", field="key")
    if "\x00" in key:
        raise ValidationError("key must not contain NUL characters", field="key")
    return check_text(key, "key")


def _check_value(value: Any) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise ValidationError(f"value must be a dict (or None to delete), got {type(value).__name__}", field="value")
    bad = [k for k in value if not isinstance(k, str)]
    if bad:
        raise ValidationError(f"value keys must be strings, got {bad[0]!r}", field="value")
    _check_nesting(value, "value")
    try:
        text = json.dumps(value, allow_nan=False, ensure_ascii=False)
    except (TypeError, ValueError) as e:
        raise ValidationError(f"value must be JSON-serialisable (no NaN/inf): {e}", field="value") from None
    check_text(text, "value")
    return cast(dict[str, Any], json.loads(text))


def _check_nesting(obj: Any, field: str) -> None:
    """Refuse dicts/lists nested deeper than ``_MAX_NESTING`` (checked without recursion, so a hostile
    value fails here, typed, rather than as a RecursionError in the recursive walks after it)."""
    stack: list[tuple[Any, int]] = [(obj, 0)]
    while stack:
        x, depth = stack.pop()
        if isinstance(x, Mapping):
            children: Iterable[Any] = x.values()
        elif isinstance(x, (list, tuple)):
            children = x
        else:
            continue
        if depth >= _MAX_NESTING:
            raise ValidationError(f"{field} is nested more than {_MAX_NESTING} levels deep", field=field)
        stack.extend((c, depth + 1) for c in children)


def _check_count(n: Any, name: str) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= _MAX_COUNT:
        raise ValidationError(f"{name} must be an int from 0 to 2**62, got {n!r}", field=name)
    return n


def _check_filter(flt: Any) -> dict[str, Any] | None:
    if flt is None or flt == {}:
        return None
    if not isinstance(flt, Mapping):
        raise ValidationError(f"filter must be a dict of field -> value, got {type(flt).__name__}", field="filter")
    _check_nesting(flt, "filter")

    def walk(path: str, v: Any) -> None:
        if isinstance(v, Mapping):
            for k, x in v.items():
                if not isinstance(k, str):
                    raise ValidationError(f"filter keys must be strings, got {k!r}", field=path)
                if k.startswith("$") and k not in _OPERATORS:
                    raise ValidationError(f"unsupported filter operator {k!r} at {path}; supported: "
                                          f"{', '.join(_OPERATORS)}", field=f"{path}.{k}")
                walk(f"{path}.{k}", x)
            ops = [k for k in v if k.startswith("$")]
            if ops and len(ops) != len(v):
                plain = next(k for k in v if not k.startswith("$"))
                raise ValidationError(f"filter at {path} mixes operators ({ops[0]!r}) with a field ({plain!r}): "
                                      "put the operators in a dict of their own, e.g. {'n': {'$gt': 1}}",
                                      field=f"{path}.{plain}")

    for key, v in flt.items():
        if not isinstance(key, str):
            raise ValidationError(f"filter keys must be strings, got {key!r}", field="filter")
        walk(f"filter.{key}", v)
    return dict(flt)


def _check_conditions(conds: Any) -> tuple[MatchCondition, ...]:
    if conds is not None and not isinstance(conds, (tuple, list)):
        raise ValidationError(f"match_conditions must be a tuple of MatchCondition, got {type(conds).__name__}",
                              field="match_conditions")
    out = []
    for c in conds or ():
        if not isinstance(c, MatchCondition) or c.match_type not in ("prefix", "suffix"):
            raise ValidationError(f"match conditions must be MatchCondition(match_type='prefix'|'suffix', path=...), "
                                  f"got {c!r}", field="match_conditions")
        out.append(MatchCondition(c.match_type, _check_namespace(c.path, allow_empty=True, field=f"{c.match_type}")))
    return tuple(out)


def _check_ttl(ttl: Any) -> TTLConfig:
    cfg: dict[str, Any] = dict(ttl or {})
    unknown = sorted(set(cfg) - {"refresh_on_read", "omit_expired", "default_ttl", "sweep_interval_minutes"})
    if unknown:
        raise ValidationError(f"unknown TTLConfig key(s) {unknown}", field=f"ttl.{unknown[0]}")
    if cfg.get("refresh_on_read"):
        raise ValidationError("refresh_on_read=True is not supported: a memir TTL is a hard deadline fixed when an "
                              "item is put, and reads cannot move it; set refresh_on_read=False (put the item "
                              "again to extend its TTL)", field="ttl.refresh_on_read")
    if cfg.get("omit_expired") is False:
        raise ValidationError("omit_expired=False is not supported: memir never returns an expired memory; "
                              "leave it out or set it True", field="ttl.omit_expired")
    for name in ("default_ttl", "sweep_interval_minutes"):
        _check_minutes(cfg.get(name), name, f"ttl.{name}")
    cfg["refresh_on_read"] = False
    cfg["omit_expired"] = True
    return cast(TTLConfig, cfg)


def _check_index(index: Any) -> list[str] | None:
    if index is None:
        return None
    if not isinstance(index, Mapping):
        raise ValidationError("index must be an IndexConfig dict, e.g. {'fields': ['text']}", field="index")
    if index.get("embed") is not None:
        raise ValidationError("memir embeds with the store's own encoder: pass it to MemoryStore.open(path, "
                              "embedder=...) and leave index['embed'] out", field="index.embed")
    fields = index.get("fields")
    if fields is None:
        return None
    if not isinstance(fields, list) or not all(isinstance(p, str) and p for p in fields):
        raise ValidationError(f"index['fields'] must be a list of field paths, got {fields!r}", field="index.fields")
    return list(fields)


def _check_fields(fields: Any) -> dict[str, Any]:
    f = dict(fields or {})
    check_field_names(f, where="fields: ")
    owned = [k for k in f if k in _OWNED_FIELDS]
    if owned:
        raise ValidationError(f"fields: {owned[0]!r} is set by the store for every item (see the mapping); "
                              "leave it out", field=f"fields.{owned[0]}")
    return f


def _conflict(a: Op, b: Op) -> bool:
    """Whether two ops of a batch may observe each other's effects (so must run in order)."""
    if not isinstance(a, PutOp):
        if not isinstance(b, PutOp):
            return False
        a, b = b, a
    put = cast(PutOp, a)
    if isinstance(b, PutOp | GetOp):
        return (tuple(b.namespace), b.key) == (tuple(put.namespace), put.key)
    if isinstance(b, SearchOp):
        return tuple(put.namespace[:len(b.namespace_prefix)]) == tuple(b.namespace_prefix)
    return True


def _lead(conds: Sequence[MatchCondition]) -> tuple[str, ...]:
    """The longest wildcard-free start of the prefix conditions (what fixes the user and agent)."""
    lead: tuple[str, ...] = ()
    for c in conds:
        if c.match_type == "prefix":
            fixed = tuple(_takewhile_fixed(c.path))
            lead = fixed if len(fixed) > len(lead) else lead
    return lead


def _takewhile_fixed(path: Sequence[str]) -> Iterable[str]:
    for x in path:
        if x == "*":
            return
        yield x


def _matches_condition(c: MatchCondition, ns: tuple[str, ...]) -> bool:
    path = c.path
    if len(ns) < len(path):
        return False
    pairs = zip(ns, path) if c.match_type == "prefix" else zip(reversed(ns), reversed(path))
    return all(p == "*" or k == p for k, p in pairs)


def _compare(have: Any, want: Any) -> bool:
    """LangGraph's filter semantics (InMemoryStore): equality, nested dicts, lists, operators."""
    if isinstance(want, Mapping):
        if any(k.startswith("$") for k in want):
            return all(_operator(have, op, x) for op, x in want.items())
        return isinstance(have, Mapping) and all(_compare(have.get(k), v) for k, v in want.items())
    if isinstance(want, (list, tuple)):
        return (isinstance(have, list) and len(have) == len(want)
                and all(_compare(h, w) for h, w in zip(have, want)))
    return bool(have == want)


def _operator(have: Any, op: str, want: Any) -> bool:
    if op == "$eq":
        return bool(have == want)
    if op == "$ne":
        return bool(have != want)
    num = (int, float)
    if isinstance(have, num) and isinstance(want, num) and not isinstance(have, bool) and not isinstance(want, bool):
        return _ordered(have, want, op)  # int and float compare exactly (no float() of a huge int)
    if isinstance(have, str) and isinstance(want, str):
        return _ordered(have, want, op)
    return False


_ORDER: dict[str, Callable[[Any, Any], Any]] = {"$gt": operator.gt, "$gte": operator.ge, "$lt": operator.lt,
                                                 "$lte": operator.le}


def _ordered(a: Any, b: Any, op: str) -> bool:
    return bool(_ORDER[op](a, b))


def _check_minutes(v: Any, name: str, field: str) -> Any:
    """A TTL in minutes: a positive finite number or ``None`` (a typed error naming ``field`` otherwise)."""
    if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0):
        raise ValidationError(f"{name} must be a positive number of minutes or None, got {v!r}", field=field)
    return v

