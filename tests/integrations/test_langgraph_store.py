"""``MemirStore``: a LangGraph ``BaseStore`` over memir.

1. A contract: the same operations against ``InMemoryStore`` and ``MemirStore`` side by side, with
   the same observable results (values, keys, namespaces; query rankings compared as sets except
   the exact-text hit, since memir's score adds confidence and freshness to the cosine).
2. What only memir does: history on update, TTLs, typed errors, redaction, retention.
3. A real LangGraph graph (checkpointer + store) over two threads of one user and another user.
4. Isolation between users.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypedDict

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    SearchOp,
)
from langgraph.store.memory import InMemoryStore

from runtime import MemoryStore
from runtime.encoders import HashEmbedder
from runtime.errors import ValidationError
from runtime.integrations.langgraph_store import MemirStore
from runtime.record import Flag
from runtime.retention import RetentionPolicy, Triggers
from runtime.scoring.baselines import RecencyScorer
from runtime.store.scope import Scope

NS = ("alice", "assistant", "memories")
ODD_KEYS = ["a b/ç?", "ünï:cödé #1", "", "key with \"quotes\" and {braces}"]


# ---------------------------------------------------------------------------------- helpers
def _pair(store: MemoryStore, embedder: HashEmbedder) -> tuple[InMemoryStore, MemirStore]:
    """The two stores, indexing the same text (``value["content"]``) with the same encoder. The contract
    includes reads across users (``list_namespaces()``), which memir allows only behind its admin switch."""
    ref = InMemoryStore(index={"dims": embedder.dim, "embed": lambda texts: embedder.encode(list(texts)).tolist(),
                               "fields": ["content"]})
    return ref, MemirStore(store, cross_user=True)


def _obs(result: Any, *, as_set: bool = False) -> Any:
    """The observable part of a result: (namespace, key, value) of items; namespaces as they are."""
    if isinstance(result, Item):
        return (result.namespace, result.key, result.value)
    if isinstance(result, list):
        out = [_obs(r) for r in result]
        return sorted(out, key=repr) if as_set else out
    return result


def same(stores: tuple[BaseStore, BaseStore], fn: Callable[[BaseStore], Any], *, as_set: bool = False) -> Any:
    """Run ``fn`` on both stores; the observable results must be equal. Returns them."""
    a, b = (_obs(fn(s), as_set=as_set) for s in stores)
    assert a == b, f"InMemoryStore: {a!r}\nMemirStore:    {b!r}"
    return a


def _seed(s: BaseStore) -> None:
    s.put(NS, "tea", {"content": "Alice likes green tea", "kind": "pref", "n": 1, "meta": {"lang": "en"}})
    s.put(NS, "flight", {"content": "Alice flies to Lisbon on Friday", "kind": "trip", "n": 5})
    s.put(NS, "seat", {"content": "Alice prefers aisle seats", "kind": "pref", "n": 3, "meta": {"lang": "fr"}})
    s.put(NS + ("deep", "er"), "x", {"content": "a deeper memory", "kind": "pref", "n": 10})
    s.put(("alice", "assistant"), "agent-level", {"content": "agent level note", "n": 2})
    s.put(("alice",), "root", {"content": "user level note"})
    s.put(("alice", "coach", "memories"), "goal", {"content": "run 10k", "kind": "goal"})
    s.put(("bob", "assistant", "memories"), "tea", {"content": "Bob likes black tea", "kind": "pref", "n": 1})


# ---------------------------------------------------------------------------------- 1. the contract
def test_contract_core(store: MemoryStore, embedder: HashEmbedder) -> None:
    """put / get / update / delete / search / list_namespaces — on both backends."""
    pair = _pair(store, embedder)
    for s in pair:
        _seed(s)
    same(pair, lambda s: s.get(NS, "tea"))
    same(pair, lambda s: s.get(("alice",), "root"))
    same(pair, lambda s: s.get(("alice", "assistant"), "agent-level"))
    same(pair, lambda s: s.search(NS), as_set=True)
    same(pair, lambda s: s.search(NS, filter={"kind": "pref"}), as_set=True)
    same(pair, lambda s: s.search(("alice",), limit=100), as_set=True)
    same(pair, lambda s: s.list_namespaces())
    for s in pair:
        s.put(NS, "tea", {"content": "Alice now prefers coffee", "kind": "pref", "n": 2})
    same(pair, lambda s: s.get(NS, "tea"))
    for s in pair:
        s.delete(NS, "flight")
    same(pair, lambda s: s.get(NS, "flight"))
    same(pair, lambda s: s.search(NS, limit=100), as_set=True)


@pytest.mark.sqlite_only
@pytest.mark.parametrize("key", ODD_KEYS)
def test_contract_odd_keys(store: MemoryStore, embedder: HashEmbedder, key: str) -> None:
    pair = _pair(store, embedder)
    for s in pair:
        s.put(NS, key, {"content": f"value of {key!r}"})
        s.put(NS, "other", {"content": "another"})
    same(pair, lambda s: s.get(NS, key))
    same(pair, lambda s: sorted(i.key for i in s.search(NS)))
    for s in pair:
        s.put(NS, key, {"content": "changed"})
    same(pair, lambda s: s.get(NS, key))
    for s in pair:
        s.delete(NS, key)
    same(pair, lambda s: s.get(NS, key))
    same(pair, lambda s: [i.key for i in s.search(NS)])


@pytest.mark.sqlite_only
@pytest.mark.parametrize("flt", [
    {"kind": "pref"}, {"n": 3}, {"n": {"$gt": 1}}, {"n": {"$gte": 3, "$lt": 10}}, {"n": {"$lte": 3}},
    {"kind": {"$ne": "pref"}}, {"kind": {"$eq": "trip"}}, {"meta": {"lang": "en"}}, {"kind": "pref", "n": 1},
    {"missing": "x"},
])
def test_contract_search_filters(store: MemoryStore, embedder: HashEmbedder, flt: dict[str, Any]) -> None:
    pair = _pair(store, embedder)
    for s in pair:
        s.put(NS, "tea", {"content": "green tea", "kind": "pref", "n": 1, "meta": {"lang": "en"}})
        s.put(NS, "flight", {"content": "Lisbon on Friday", "kind": "trip", "n": 5})
        s.put(NS, "seat", {"content": "aisle seats", "kind": "pref", "n": 3, "meta": {"lang": "fr"}})
    same(pair, lambda s: s.search(NS, filter=flt), as_set=True)
    same(pair, lambda s: s.search(("alice",), filter=flt, query="aisle seats"), as_set=True)


@pytest.mark.sqlite_only
def test_contract_pagination_and_query(store: MemoryStore, embedder: HashEmbedder) -> None:
    pair = _pair(store, embedder)
    texts = [f"note number {i} about topic {i % 3}" for i in range(7)]
    for s in pair:
        for i, t in enumerate(texts):
            s.put(NS, f"k{i}", {"content": t, "i": i})
    # one namespace, no updates: both list in write order
    for limit, offset in [(3, 0), (3, 3), (3, 6), (10, 2), (0, 0)]:
        same(pair, lambda s, limit=limit, offset=offset: s.search(NS, limit=limit, offset=offset))
    # the item whose text is the query ranks first in both (cosine 1); the rest as sets
    for s in pair:
        assert s.search(NS, query=texts[4], limit=1)[0].key == "k4"
    same(pair, lambda s: s.search(NS, query=texts[4], limit=100), as_set=True)
    same(pair, lambda s: s.search(NS, query=texts[2], filter={"i": {"$gt": 3}}, limit=100), as_set=True)
    hits = pair[1].search(NS, query=texts[4], limit=3)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert hits[0].score == pytest.approx(0.95)  # similarity 1 x confidence 0.95 (what a user says)
    # paging a ranked search: the pages partition the ranking
    pages = [i.key for off in (0, 2, 4) for i in pair[1].search(NS, query=texts[0], limit=2, offset=off)]
    assert pages == [i.key for i in pair[1].search(NS, query=texts[0], limit=6)]


@pytest.mark.sqlite_only
def test_contract_list_namespaces(store: MemoryStore, embedder: HashEmbedder) -> None:
    pair = _pair(store, embedder)
    for s in pair:
        _seed(s)
    cases: list[dict[str, Any]] = [
        {}, {"prefix": ("alice",)}, {"prefix": ("alice", "assistant")}, {"prefix": ("bob",)},
        {"suffix": ("memories",)}, {"prefix": ("alice", "*", "memories")}, {"suffix": ("*", "er")},
        {"max_depth": 1}, {"max_depth": 2}, {"prefix": ("alice",), "max_depth": 3}, {"limit": 2},
        {"limit": 2, "offset": 2}, {"offset": 100}, {"prefix": ("carol",)}, {"prefix": ("alice", "nobody")},
        {"prefix": ("alice",), "suffix": ("memories",)},
    ]
    for kw in cases:
        same(pair, lambda s, kw=kw: s.list_namespaces(**kw))


@pytest.mark.sqlite_only
def test_contract_batch_and_abatch(store: MemoryStore, embedder: HashEmbedder) -> None:
    pair = _pair(store, embedder)
    for s in pair:
        _seed(s)
    ops = [
        GetOp(NS, "tea"), SearchOp(NS, filter={"kind": "pref"}, limit=100),
        ListNamespacesOp(match_conditions=(MatchCondition("prefix", ("alice",)),), max_depth=2),
        PutOp(NS, "new", {"content": "from a batch"}), PutOp(("alice", "coach", "memories"), "goal", None),
    ]
    a, b = (s.batch(ops) for s in pair)
    assert _obs(a[0]) == _obs(b[0])
    assert _obs(a[1], as_set=True) == _obs(b[1], as_set=True)
    assert a[2] == b[2] and a[3:] == b[3:] == [None, None]
    same(pair, lambda s: s.get(NS, "new"))
    same(pair, lambda s: s.get(("alice", "coach", "memories"), "goal"))

    async def run(s: BaseStore) -> list[Any]:
        return await s.abatch([GetOp(NS, "new"), PutOp(NS, "async", {"content": "from abatch", "n": 7}),
                               SearchOp(("bob",), limit=100)])

    a, b = (asyncio.run(run(s)) for s in pair)
    assert [_obs(x) for x in a] == [_obs(x) for x in b]

    async def aops(s: BaseStore) -> list[Any]:
        await s.aput(NS, "async", {"content": "updated async", "n": 8})
        await s.adelete(NS, "new")
        return [await s.aget(NS, "async"), await s.aget(NS, "new"), await s.asearch(NS, filter={"n": 8}),
                await s.alist_namespaces(prefix=("alice", "assistant"))]

    a, b = (asyncio.run(aops(s)) for s in pair)
    assert [_obs(x) for x in a] == [_obs(x) for x in b]
    # one difference, on purpose: InMemoryStore keeps listing a namespace whose last item was deleted
    # (its dict entry stays); memir lists the namespaces items are in, as LangGraph's PostgresStore does
    assert ("alice", "coach", "memories") in pair[0].list_namespaces()
    assert ("alice", "coach", "memories") not in pair[1].list_namespaces()


# ---------------------------------------------------------------------------------- abatch is async
@pytest.mark.sqlite_only
def test_abatch_runs_on_the_async_scope_methods(store: MemoryStore, monkeypatch: pytest.MonkeyPatch) -> None:
    called: dict[str, int] = {}
    for name in ("awrite", "aupdate", "alist", "arecall", "aforget"):
        orig = getattr(Scope, name)

        def wrap(orig: Any = orig, name: str = name) -> Any:
            async def spy(self: Scope, *a: Any, **kw: Any) -> Any:
                called[name] = called.get(name, 0) + 1
                return await orig(self, *a, **kw)
            return spy
        monkeypatch.setattr(Scope, name, wrap())
    for name in ("write", "update", "recall", "forget"):  # the sync calls themselves may only run on pool threads
        orig_sync = getattr(Scope, name)

        def guard(orig: Any = orig_sync) -> Any:
            def check(self: Scope, *a: Any, **kw: Any) -> Any:
                with pytest.raises(RuntimeError):
                    asyncio.get_running_loop()  # no event loop in this thread: not called on the loop
                return orig(self, *a, **kw)
            return check
        monkeypatch.setattr(Scope, name, guard())
    ms = MemirStore(store)

    async def main() -> list[Any]:
        await ms.abatch([PutOp(NS, f"k{i}", {"content": f"memory {i}"}) for i in range(6)])
        await ms.aput(NS, "k0", {"content": "memory zero, corrected"})
        await ms.adelete(NS, "k5")
        return await ms.abatch([GetOp(NS, "k0"), SearchOp(NS, query="memory 3", limit=1), GetOp(NS, "k5")])

    got, hit, gone = asyncio.run(main())
    assert got.value == {"content": "memory zero, corrected"} and hit[0].key == "k3" and gone is None
    assert called["awrite"] == 6 and called["aupdate"] == 1 and called["aforget"] == 1 and called["arecall"] == 1


@pytest.mark.sqlite_only
def test_batch_runs_in_order_and_validates_first(store: MemoryStore) -> None:
    ms = MemirStore(store)
    out = ms.batch([PutOp(NS, "a", {"content": "one"}), GetOp(NS, "a"), PutOp(NS, "a", {"content": "two"}),
                    GetOp(NS, "a"), PutOp(NS, "a", None), GetOp(NS, "a")])
    assert [o.value if isinstance(o, Item) else o for o in out] == [
        None, {"content": "one"}, None, {"content": "two"}, None, None]
    # nothing half-written: the bad op fails the batch before the good one runs
    with pytest.raises(ValidationError) as e:
        ms.batch([PutOp(NS, "good", {"content": "ok"}), PutOp(NS, "bad", ["not", "a", "dict"])])  # type: ignore[arg-type]
    assert e.value.field == "value"
    assert ms.get(NS, "good") is None

    async def abad() -> None:
        await ms.abatch([PutOp(NS, "good", {"content": "ok"}), PutOp(("bad user",), "k", {"content": "x"})])
    with pytest.raises(ValidationError) as e:
        asyncio.run(abad())
    assert e.value.field == "namespace[0]"
    assert ms.get(NS, "good") is None


# ---------------------------------------------------------------------------------- 2. memir behaviour
def test_update_keeps_history(store: MemoryStore) -> None:
    ms = MemirStore(store)
    ms.put(NS, "budget", {"content": "Budget for Orion is 40k EUR"})
    first = ms.get(NS, "budget")
    ms.put(NS, "budget", {"content": "Budget for Orion is now 55k EUR"})
    item = ms.get(NS, "budget")
    assert first is not None and item is not None
    assert item.value == {"content": "Budget for Orion is now 55k EUR"}
    assert item.created_at == first.created_at < item.updated_at
    rec = ms.record(NS, "budget")
    assert rec is not None
    versions = ms.scope(NS).history(rec.id)
    assert [(v.record.content, v.tier, v.current) for v in versions] == [
        ("Budget for Orion is 40k EUR", "archive", False), ("Budget for Orion is now 55k EUR", "working", True)]
    assert versions[0].record.has_flag(Flag.superseded)
    # the old version is never returned, by get or by search
    assert [i.value["content"] for i in ms.search(NS, query="Budget for Orion is 40k EUR")] == [
        "Budget for Orion is now 55k EUR"]
    ms.delete(NS, "budget")  # forget takes the whole chain
    assert ms.get(NS, "budget") is None
    assert ms.scope(NS).list(tier="any", tags=["langgraph"]) == []


@dataclass
class Clock:
    now: datetime

    def __call__(self) -> datetime:
        return self.now


@pytest.mark.sqlite_only
def test_ttl(store: MemoryStore, now: datetime) -> None:
    clock = Clock(now)
    ms = MemirStore(store, ttl={"default_ttl": 10}, clock=clock)
    assert ms.supports_ttl and ms.ttl_config == {"default_ttl": 10, "refresh_on_read": False, "omit_expired": True}
    ms.put(NS, "short", {"content": "expires in 10 minutes"})
    ms.put(NS, "long", {"content": "expires in an hour"}, ttl=60)
    ms.put(NS, "forever", {"content": "never expires"}, ttl=None)
    ms.batch([PutOp(NS, "op", {"content": "a raw PutOp has no TTL"})])
    exp = {k: (r.metadata.expires_at if (r := ms.record(NS, k)) else "gone") for k in ("short", "long", "forever", "op")}
    assert exp == {"short": now + timedelta(minutes=10), "long": now + timedelta(minutes=60), "forever": None, "op": None}
    clock.now = now + timedelta(minutes=11)
    assert ms.get(NS, "short") is None
    assert sorted(i.key for i in ms.search(NS)) == ["forever", "long", "op"]
    assert sorted(i.key for i in ms.search(NS, query="expires in 10 minutes")) == ["forever", "long", "op"]
    # a put counts the TTL again from now, as a new version
    ms.put(NS, "long", {"content": "expires in an hour, again"}, ttl=60)
    assert ms.record(NS, "long").metadata.expires_at == clock.now + timedelta(minutes=60)  # type: ignore[union-attr]
    clock.now = now + timedelta(minutes=65)
    assert ms.get(NS, "long") is not None  # re-put at +11: alive until +71
    # the sweep forgets the expired item (every version), and the expired old version of a live one
    assert ms.sweep_ttl() == 1
    assert [r.metadata.attributes["langgraph.key"] for r in ms.scope(NS).list(tier="any", include_expired=True)] == [
        "forever", "op", "long"]
    assert ms.get(NS, "long").value == {"content": "expires in an hour, again"}  # type: ignore[union-attr]


@pytest.mark.sqlite_only
def test_ttl_config_is_checked(store: MemoryStore) -> None:
    with pytest.raises(ValidationError) as e:
        MemirStore(store, ttl={"refresh_on_read": True})
    assert e.value.field == "ttl.refresh_on_read"
    for bad, field in [({"default_ttl": -1}, "ttl.default_ttl"), ({"omit_expired": False}, "ttl.omit_expired"),
                       ({"sweep_interval_minutes": 0}, "ttl.sweep_interval_minutes")]:
        with pytest.raises(ValidationError) as e:
            MemirStore(store, ttl=bad)  # type: ignore[arg-type]
        assert e.value.field == field
    ms = MemirStore(store)
    with pytest.raises(ValidationError) as e:
        ms.put(NS, "k", {"content": "x"}, ttl=0)
    assert e.value.field == "ttl"
    with pytest.raises(ValidationError) as e:
        MemirStore(store, index={"dims": 3, "embed": lambda t: [[0.0] * 3 for _ in t]})
    assert e.value.field == "index.embed"


@pytest.mark.sqlite_only
@pytest.mark.parametrize("call, field", [
    (lambda s: s.put(("alice smith", "x"), "k", {"content": "x"}), "namespace[0]"),
    (lambda s: s.put(("alice", "my agent", "x"), "k", {"content": "x"}), "namespace[1]"),
    (lambda s: s.get(("alice", "a/b"), "k"), "namespace[1]"),
    (lambda s: s.search(("bob?",)), "namespace[0]"),
    (lambda s: s.put(NS, "k", "not a dict"), "value"),
    (lambda s: s.put(NS, "k", {"content": float("nan")}), "value"),
    (lambda s: s.put(NS, "k", {"when": datetime(2025, 1, 1)}), "value"),
    (lambda s: s.put(NS, "bob@example.com", {"content": "x"}), "key"),
    (lambda s: s.put(NS + ("call +44 20 7946 0958",), "k", {"content": "x"}), "namespace[3]"),
    (lambda s: s.put(NS, "k", {"content": "x"}, index="content"), "index"),
    (lambda s: s.search(NS, filter={"n": {"$regex": "x"}}), "filter.n.$regex"),
    (lambda s: s.search(NS, limit=-1), "limit"),
    (lambda s: s.batch([GetOp(NS, 7)]), "key"),  # type: ignore[arg-type]
])
def test_bad_input_is_a_typed_error_naming_the_field(store: MemoryStore, call: Callable[[BaseStore], Any],
                                                       field: str) -> None:
    ms = MemirStore(store, cross_user=True)
    with pytest.raises(ValidationError) as e:
        call(ms)
    assert e.value.field == field
    assert "pydantic" not in type(e.value.__cause__).__module__ if e.value.__cause__ else True
    assert ms.list_namespaces() == []  # nothing written


@pytest.mark.sqlite_only
def test_langgraph_namespace_rules_hold(store: MemoryStore) -> None:
    ref, ms = InMemoryStore(), MemirStore(store)
    for s in (ref, ms):
        for bad in [(), ("langgraph", "x"), ("a.b",), ("a", "")]:
            with pytest.raises(InvalidNamespaceError):
                s.put(bad, "k", {"content": "x"})
        with pytest.raises(InvalidNamespaceError):
            s.get(("a.b",), "k")
    with pytest.raises(InvalidNamespaceError):
        ms.batch([PutOp((), "k", {"content": "x"})])  # also for ops passed to batch directly
    with pytest.raises(InvalidNamespaceError):
        ms.batch([GetOp(("x.y",), "k")])
    assert ms.batch([GetOp((), "k")]) == [None]


@pytest.mark.sqlite_only
def test_values_are_redacted_and_stay_json(store: MemoryStore) -> None:
    ms = MemirStore(store)
    ms.put(NS, "contact", {"content": "Bob's contact", "email": "bob@example.com", "note": "my password is hunter2",
                           "x": 1, "nested": [{"password": "hunter2"}], "card": 4111111111111111})
    item = ms.get(NS, "contact")
    assert item is not None
    assert item.value == {"content": "Bob's contact", "email": "[EMAIL]", "note": "my password is [PASSWORD]", "x": 1,
                          "nested": [{"password": "[PASSWORD]"}], "card": "[CARD]"}
    rec = ms.record(NS, "contact")
    assert rec is not None and rec.metadata.sensitivity.value == "secret"


@pytest.mark.sqlite_only
def test_index_paths_and_index_false(store: MemoryStore) -> None:
    ms = MemirStore(store, index={"fields": ["title", "body.text"]})
    ms.put(NS, "doc", {"title": "Orion budget", "body": {"text": "is 55k EUR"}, "content": "ignored: index wins"})
    ms.put(NS, "raw", {"content": "not ranked"}, index=False)
    ms.put(NS, "sel", {"a": "first", "b": "second"}, index=["b"])
    ms.put(NS, "json", {"n": 1})
    contents = {r.metadata.attributes["langgraph.key"]: r.content for r in ms.scope(NS).list()}
    assert contents == {"doc": "Orion budget\nis 55k EUR", "raw": '{"content":"not ranked"}', "sel": "second",
                        "json": '{"n":1}'}
    assert ms.get(NS, "raw") is not None
    hits = ms.search(NS, query='{"content":"not ranked"}')
    assert hits[-1].key == "raw" and hits[-1].score is None and all(h.score is not None for h in hits[:-1])
    assert [h.key for h in ms.search(NS, query="second", limit=1)] == ["sel"]


@pytest.mark.sqlite_only
def test_retention_runs_under_the_policy(store: MemoryStore) -> None:
    policy = RetentionPolicy(capacity=2, scorer=RecencyScorer(), triggers=Triggers(every_n_writes=3))
    ms = MemirStore(store, policy=policy, fields={"source_type": "derived_inference"})
    for i in range(3):
        ms.put(NS, f"k{i}", {"content": f"memory number {i}"})
    scope = ms.scope(NS)
    assert scope.policy is policy and [d.trigger for d in scope.decisions()] == ["every_n_writes"]
    assert len(ms.search(NS)) == 2
    kept = {i.key for i in ms.search(NS)}
    archived = [r.metadata.attributes["langgraph.key"] for r in scope.list(tier="archive")]
    assert len(archived) == 1 and archived[0] not in kept
    assert ms.get(NS, archived[0]) is None  # retention took it out of working memory
    ms.put(NS, archived[0], {"content": "back again"})  # ... and a put continues its history
    rec = ms.record(NS, archived[0])
    assert rec is not None and len(scope.history(rec.id)) == 2
    assert rec.provenance.type.value == "derived_inference"


# ---------------------------------------------------------------------------------- 3. a real graph
class State(TypedDict):
    said: str
    recalled: list[str]


@dataclass
class Ctx:
    user_id: str


def _graph(store: BaseStore) -> Any:
    def remember(state: State, runtime: Runtime[Ctx]) -> dict[str, Any]:
        assert runtime.store is not None
        ns = (runtime.context.user_id, "assistant", "memories")
        if state["said"].startswith("remember: "):
            fact = state["said"].removeprefix("remember: ")
            runtime.store.put(ns, f"fact-{len(runtime.store.search(ns, limit=100))}", {"content": fact})
        return {}

    def recall(state: State, runtime: Runtime[Ctx]) -> dict[str, Any]:
        assert runtime.store is not None
        hits = runtime.store.search((runtime.context.user_id,), query=state["said"], limit=5)
        return {"recalled": [h.value["content"] for h in hits]}

    g = StateGraph(State, context_schema=Ctx)
    g.add_node("remember", remember)
    g.add_node("recall", recall)
    g.add_edge(START, "remember")
    g.add_edge("remember", "recall")
    g.add_edge("recall", END)
    return g.compile(checkpointer=InMemorySaver(), store=store)


def test_graph_two_threads_of_one_user_and_another_user(store: MemoryStore) -> None:
    graph = _graph(MemirStore(store))

    def turn(thread: str, user: str, said: str) -> list[str]:
        out = graph.invoke({"said": said, "recalled": []}, {"configurable": {"thread_id": thread}},
                           context=Ctx(user_id=user))
        return list(out["recalled"])

    turn("t1", "alice", "remember: Alice is allergic to peanuts")
    turn("t1", "alice", "remember: Alice's flight is on 3 May")
    # a new thread: nothing in its checkpoint, but the store remembers across threads
    assert graph.get_state({"configurable": {"thread_id": "t2"}}).values == {}
    recalled = turn("t2", "alice", "Alice is allergic to peanuts")
    assert recalled[0] == "Alice is allergic to peanuts"
    assert set(recalled) == {"Alice is allergic to peanuts", "Alice's flight is on 3 May"}
    # another user, even on alice's thread id, sees none of it
    assert turn("t3", "bob", "Alice is allergic to peanuts") == []
    assert turn("t1", "bob", "what does Alice eat?") == []

    async def aturn() -> list[str]:
        out = await graph.ainvoke({"said": "flight", "recalled": []}, {"configurable": {"thread_id": "t4"}},
                                  context=Ctx(user_id="alice"))
        return list(out["recalled"])

    assert len(asyncio.run(aturn())) == 2


# ---------------------------------------------------------------------------------- 4. isolation
def test_reads_that_name_no_user_are_refused_unless_the_admin_switch_is_on(store: MemoryStore) -> None:
    ms = MemirStore(store)
    _seed(ms)
    for call in (lambda: ms.search((), query="aisle seats"), lambda: ms.search(()), lambda: ms.list_namespaces(),
                 lambda: ms.list_namespaces(suffix=("memories",)), lambda: ms.list_namespaces(prefix=("*", "assistant")),
                 lambda: ms.batch([SearchOp((), query="tea")]),
                 lambda: asyncio.run(ms.asearch((), query="tea")), lambda: asyncio.run(ms.alist_namespaces()),
                 lambda: asyncio.run(ms.abatch([ListNamespacesOp(match_conditions=None)]))):
        with pytest.raises(ValidationError, match="cross_user=True") as e:
            call()
        assert e.value.field == "namespace_prefix"
    admin = MemirStore(store, cross_user=True)
    hits = admin.search((), query="aisle seats", limit=100)
    assert {i.namespace[0] for i in hits} == {"alice", "bob"}  # each result says whose it is
    assert {ns[0] for ns in admin.list_namespaces()} == {"alice", "bob"}
    with pytest.raises(ValidationError, match="cross_user"):
        MemirStore(store, cross_user="yes")  # type: ignore[arg-type]


def test_users_are_isolated(store: MemoryStore) -> None:
    ms = MemirStore(store)
    _seed(ms)
    ms.put(("alice", "bob"), "k", {"content": "an agent called bob, of alice"})
    bob_items = ms.search(("bob",), limit=100)
    assert {i.namespace[0] for i in bob_items} == {"bob"} and len(bob_items) == 1
    assert {i.namespace[0] for i in ms.search(("bob",), query="Alice likes green tea", limit=100)} == {"bob"}
    assert ms.search(("bob", "assistant"), filter={"content": "Alice likes green tea"}) == []
    assert ms.list_namespaces(prefix=("bob",)) == [("bob", "assistant", "memories")]
    assert ms.get(("bob", "assistant", "memories"), "tea").value["content"] == "Bob likes black tea"  # type: ignore[union-attr]
    assert ms.get(("bob",) + NS[1:], "seat") is None
    assert all(n[0] == "alice" for n in ms.list_namespaces(prefix=("alice",)))
    assert ("alice", "bob") in ms.list_namespaces(prefix=("alice",))
    # memories written through memir directly, in the same scope, are not LangGraph items
    before = ms.list_namespaces(prefix=("alice",))
    ms.scope(NS).write("a plain memir memory about green tea", tags=["ns:/memories"])
    assert ms.list_namespaces(prefix=("alice",)) == before
    for prefix in (("alice",), NS):
        assert "a plain memir memory about green tea" not in [
            i.value.get("content") for i in ms.search(prefix, query="a plain memir memory about green tea")]
    assert sorted(i.key for i in ms.search(NS, limit=100)) == ["flight", "seat", "tea", "x"]


@pytest.fixture
def opened(tmp_path: Any, embedder: HashEmbedder) -> Iterator[MemirStore]:
    with MemirStore.open(tmp_path / "lg.sqlite", embedder=embedder) as ms:
        yield ms


def test_open_owns_the_store(opened: MemirStore) -> None:
    opened.put(NS, "k", {"content": "x"})
    assert opened.get(NS, "k") is not None
    opened.close()
    for ns in (NS, ("carol",)):  # a scope it used, and a new one
        with pytest.raises(ValidationError) as e:
            opened.get(ns, "k")
        assert e.value.field == "store"
