"""Hostile-input fuzz of the adapters (hypothesis): the LangGraph store (sync, async, ``batch`` and
``abatch``), the mem0 facade (sync and async), the agent tools (``call_tool`` / ``acall_tool``) and
the ``memir`` CLI (``score`` on mutated dumps; hostile arguments to a few subcommands).

Every call, whatever it is given, must hold three invariants:

1. it succeeds or raises a :class:`~runtime.errors.MemirError` subclass (a ``ValidationError``
   names its field) — nothing untyped escapes; the CLI exits with a one-line error and no traceback;
2. nothing of user ``mallory`` ever shows up in a result of user ``alice``, and no call of alice's
   changes mallory's memories;
3. a call that fails writes nothing (the store's memory count per tier is unchanged).

Stores are real SQLite files in ``tmp_path`` with the fast ``HashEmbedder(64)``; each test opens its
store once and runs its examples against it (so state accumulates, as in a long-running agent).
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import math
import os
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.store.base import (
    NOT_PROVIDED,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    SearchOp,
)

import runtime.cli as cli
from runtime import MemoryStore
from runtime.encoders import HashEmbedder
from runtime.errors import MemirError, ValidationError
from runtime.integrations.langgraph_store import MemirStore
from runtime.integrations.mem0 import AsyncMemory, Memory
from runtime.integrations.tools import TOOLS, TOOLS_BY_NAME, acall_tool, call_tool
from runtime.retention import RetentionPolicy
from runtime.scoring import FakeScorer

MARK = "zebraquokka"  # only mallory's memories contain this word
MALLORY_TEXT = f"mallory {MARK} launch code is purple-{MARK}"
_BASE = settings(deadline=None, suppress_health_check=list(HealthCheck), database=None)


def fuzz(n: int) -> settings:
    """``n`` examples (times ``$MEMIR_FUZZ_SCALE`` for a deeper run), no deadline (calls touch
    SQLite), no example database left behind."""
    return settings(_BASE, max_examples=n * int(os.environ.get("MEMIR_FUZZ_SCALE", "1")))


CALLS: dict[str, int] = {}
SUCCEEDED: dict[str, int] = {}


@pytest.fixture(scope="module", autouse=True)
def _report_calls() -> Iterator[None]:
    yield
    total = sum(CALLS.values())
    print(f"\nfuzz calls: {total} ({', '.join(f'{k} {v} ({SUCCEEDED.get(k, 0)} ok)' for k, v in CALLS.items())})")


# ---------------------------------------------------------------------------------- hostile values
NASTY = ["", " ", "*", ".", "a.b", "\x00", "x\x00y", "\ud800", "a\udfffb", "langgraph", "alice", "ALICE",
         "mallory ", "🙂🙂", "\n", "\t\r", "../../etc/passwd", "%s%n", "{}", "[EMAIL]", "bob@example.com",
         "4111111111111111", "'; DROP TABLE memories;--", "x" * 129, "y" * 5000, "\u202e", "\ufeff", "NaN",
         "mem_", "default", "agent:alice", "$eq", "ns:/", "item#00", "my password is hunter2"]
surrogates = st.text(alphabet=st.characters(categories=["Cs"]), min_size=1, max_size=2)
hostile_text = st.one_of(
    st.sampled_from(NASTY),
    st.text(max_size=12),
    st.lists(st.one_of(st.text(max_size=4), surrogates), min_size=1, max_size=3).map("".join),
).filter(lambda s: s != "mallory")
non_str = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(), st.binary(max_size=4),
                    st.just(object()), st.just(()), st.lists(st.integers(), max_size=2), st.just({"a": 1}),
                    st.just(datetime(2025, 1, 1)), st.just(b"\xff"))
anything = st.one_of(hostile_text, non_str)
json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(), hostile_text)
json_vals = st.recursive(json_leaf, lambda ch: st.lists(ch, max_size=3) | st.dictionaries(hostile_text, ch, max_size=3),
                         max_leaves=8)
non_json = st.one_of(st.sets(st.integers(), max_size=2), st.binary(max_size=4), st.just(datetime(2025, 1, 1)),
                     st.complex_numbers(), st.just(object()), st.tuples(st.integers()))


def _deep(depth: int) -> dict[str, Any]:
    v: Any = "bottom"
    for _ in range(depth):
        v = {"a": v}
    return v


def _deep_list(depth: int) -> list[Any]:
    v: Any = []
    for _ in range(depth):
        v = [v]
    return v


# ---------------------------------------------------------------------------------- invariants
def _state(store: MemoryStore) -> tuple[Any, ...]:
    """What a failed call must leave unchanged: memories per tier, and mallory's memories."""
    stats = store.admin_stats()
    mal = store.scope(user_id="mallory").list(tier="any", include_expired=True)
    return stats["memories"], tuple(sorted(stats["by_tier"].items())), tuple((r.id, r.content) for r in mal)


def _mallory_only(store: MemoryStore) -> tuple[Any, ...]:
    mal = store.scope(user_id="mallory").list(tier="any", include_expired=True)
    return tuple((r.id, r.content) for r in mal)


def _no_leak(result: Any, mallory_ids: set[str]) -> None:
    text = repr(result)
    assert MARK not in text, f"mallory's memory leaked into alice's result: {text[:300]}"
    for mid in mallory_ids:
        assert mid not in text, f"mallory's id {mid} leaked into alice's result"
    items = result if isinstance(result, list) else [result]
    for it in items:
        if isinstance(it, Item):
            assert it.namespace[0] != "mallory", it
        if isinstance(it, tuple) and it and isinstance(it[0], str):
            assert it[0] != "mallory", it


def attempt(kind: str, store: MemoryStore, fn: Callable[[], Any], mallory_ids: set[str]) -> tuple[bool, Any]:
    """Run one adapter call and check the invariants; returns (succeeded, result or error).
    Anything but a MemirError propagates (and fails the example, which hypothesis then shrinks)."""
    CALLS[kind] = CALLS.get(kind, 0) + 1
    before = _state(store)
    try:
        out = fn()
    except MemirError as e:
        if isinstance(e, ValidationError):
            assert e.field is not None, f"{type(e).__name__} names no field: {e}"
        assert "Traceback" not in str(e)
        after = _state(store)
        assert after == before, f"a failed call wrote something: {e!r}\nbefore {before[:2]}\nafter  {after[:2]}"
        return False, e
    _no_leak(out, mallory_ids)
    assert _mallory_only(store) == before[2], "a call of alice's changed mallory's memories"
    SUCCEEDED[kind] = SUCCEEDED.get(kind, 0) + 1
    return True, out


def _arun(make: Callable[[], Any]) -> Callable[[], Any]:
    """A sync call of the coroutine ``make()`` makes (made inside the call, so it is always awaited)."""
    return lambda: asyncio.run(make())


# ================================================================================== 1. LangGraph
ALICE_NS = ("alice", "assistant", "memories")


def mostly(valid: st.SearchStrategy[Any], hostile: st.SearchStrategy[Any], n: int = 4) -> st.SearchStrategy[Any]:
    """``valid`` about n times in n + 1: each call gets its other arguments right often enough for the
    hostile one to reach the code behind the argument checks."""
    return st.integers(0, n).flatmap(lambda i: hostile if i == n else valid)


free_label = hostile_text.filter(lambda x: x and "." not in x and "\x00" not in x)  # LangGraph allows these
label = st.one_of(st.sampled_from(["alice", "assistant", "memories", "prefs", "*"]), hostile_text, non_str)
ok_rest = st.lists(st.one_of(st.sampled_from(["memories", "prefs", "deep"]), free_label), max_size=3)
alice_ns = st.one_of(st.just(ALICE_NS), st.just(("alice",)), st.just(("alice", "assistant")),
                     ok_rest.map(lambda r: ("alice", "assistant", *r)))
hostile_ns = st.one_of(
    st.lists(st.one_of(st.sampled_from(["assistant", "memories"]), hostile_text), max_size=4).map(lambda r: ("alice", *r)),
    st.lists(label, max_size=4).map(tuple),
    st.lists(label, max_size=3),               # a list instead of a tuple
    st.sampled_from([(), ("",), ("*",), ("a.b",), ("langgraph", "x"), ("alice", ""), ("alice", "\x00"),
                     ("\ud800",), ("alice", "\ud800"), ("alice", "a" * 129), ("alice", "x" * 10_000),
                     ("alice",) + ("n",) * 300, ("alice", "assistant", "\ud800\udc00"), ("alice", "assistant", "\ud800"),
                     ("alice", "assistant", "bob@example.com"), ("alice", "assistant", "a b/c?"),
                     ("alice", "assistant", "x" * 200), "alice", ("alice", None)]),
    non_str,
).filter(lambda ns: not (isinstance(ns, (tuple, list)) and ns and ns[0] == "mallory"))
namespaces = mostly(alice_ns, hostile_ns, 3)
keys = mostly(st.one_of(st.sampled_from(["k", "seat", "tea", "", "*", "a b/ç?"]), hostile_text),
              st.one_of(non_str, st.sampled_from(["x\x00", "\ud800", "bob@example.com", "sk-" + "a" * 40])), 5)
ok_values = st.one_of(
    st.fixed_dictionaries({"content": hostile_text}, optional={"n": json_vals, "kind": json_vals}),
    st.dictionaries(hostile_text, json_vals, max_size=4),
)
hostile_values = st.one_of(
    st.dictionaries(hostile_text, st.one_of(json_vals, non_json), min_size=1, max_size=3),
    st.dictionaries(st.one_of(st.integers(), st.none(), st.tuples()), json_vals, min_size=1, max_size=2),
    st.sampled_from([{"content": "z" * 20_000}, {"content": "x" * 16_001}, {"blob": "q " * 30_000},
                     {"content": float("nan")}, {"n": float("inf")}, {"content": "\ud800"}, {"\ud800": 1},
                     {"content": "ok", "k": "\ud800"}, {}, {"content": ""}, {"content": "   "},
                     {"content": "email bob@example.com"}, {"langgraph.key": "forged", "content": "x"},
                     {"content": "x", "langgraph.value": "{"}, {"deep": _deep(60)}, {"deep": _deep(99)},
                     {"deep": _deep(100)}, {"deep": _deep(3000)}, {"deep": _deep_list(3000)},
                     {"card": 4111111111111111}, {"n": 2**80}, {"n": 10**400}, {"n": 10**5000},
                     {"password": "hunter2"}, {"a": {"b": "c\x00d"}}]),
    json_vals,  # not a dict
    non_json,
)
values = mostly(ok_values, hostile_values, 3)
indexes = mostly(st.one_of(st.none(), st.just(False), st.lists(st.sampled_from(["content", "$", "n", "kind",
                                                                                "x[*].y", "n[0]"]), max_size=2)),
                 st.one_of(st.just(True), st.sampled_from(["content", ["\ud800"], [5], [""], ["["], ["a..b"]]), non_str))
ttls = mostly(st.one_of(st.just(NOT_PROVIDED), st.none(), st.floats(0.001, 10**6)),
              st.one_of(st.floats(), st.integers(-5, 10**15), st.booleans(),
                        st.sampled_from([0, 1e-300, 5e9, 1e12, 1e300, "5", "1"])))
op_filter_keys = st.one_of(st.sampled_from(["kind", "n", "content", "meta", "$eq", "$regex", "$gt"]), hostile_text)
filter_vals = st.recursive(json_leaf, lambda ch: st.lists(ch, max_size=2)
                           | st.dictionaries(st.one_of(st.sampled_from(["$eq", "$ne", "$gt", "$gte", "$lt", "$lte",
                                                                        "$in", "$regex", "lang"]), hostile_text),
                                             ch, max_size=2), max_leaves=5)
filters = mostly(st.one_of(st.none(), st.just({}), st.dictionaries(op_filter_keys, filter_vals, max_size=3),
                           st.sampled_from([{"n": {"$gt": "5"}}, {"n": {"$gt": float("nan")}}, {"meta": {"lang": "en"}},
                                            {"n": {"$gt": 2**80}}, {"n": {"$lt": 1e308}}, {"n": [1, {"$eq": 2}]},
                                            {"kind": "pref"}, {"n": {"$gte": 1, "$lte": 5}}, {"n": {"$gt": 10**400}},
                                            {"n": {"$lt": -(10**400)}}])),
                 st.one_of(st.dictionaries(st.integers(), st.integers(), min_size=1, max_size=1), non_str,
                           st.sampled_from([{"n": _deep(3000)}, {"n": {"$regex": "x"}}, {"n": {5: 1}},
                                            {"n": {"$eq": 1, "lang": "en"}}])))
queries = mostly(st.one_of(st.none(), st.sampled_from(["tea", "Alice", MARK, "purple launch code", "x" * 40_000, ""]),
                           hostile_text), non_str)
ok_counts = st.integers(0, 20)
counts_ = mostly(ok_counts, st.one_of(st.integers(-3, -1), st.integers(10**9, 10**20), st.booleans(), st.floats(),
                                      st.none(), st.sampled_from(["5", "", "-1", 2**62, 2**62 + 1, 2**63])))
conditions = mostly(
    st.builds(MatchCondition, match_type=st.sampled_from(["prefix", "suffix"]),
              path=st.one_of(st.just(("alice",)), st.just(("alice", "*")), st.just(("*", "memories")),
                             st.just(("alice", "assistant", "*")), namespaces)),
    st.one_of(st.builds(MatchCondition, match_type=st.one_of(st.sampled_from(["exact", ""]), non_str), path=namespaces),
              non_str))
cond_lists = mostly(st.one_of(st.lists(conditions, max_size=2).map(tuple), st.none()), st.one_of(non_str, hostile_text))

get_ops = st.builds(GetOp, namespaces, keys, st.booleans())
put_ops = st.builds(PutOp, namespaces, keys, st.one_of(values, st.none()), index=indexes, ttl=ttls)
good_puts = st.builds(PutOp, st.just(ALICE_NS), st.sampled_from(["seat", "tea", "k1", "k2"]),
                      st.fixed_dictionaries({"content": st.sampled_from(["Alice likes tea", "aisle seat", "hi"])}))
search_ops = st.builds(SearchOp, namespaces, filters, counts_, counts_, queries)
list_ops = st.builds(ListNamespacesOp, cond_lists, mostly(st.none(), counts_, 2), counts_, counts_)
ops = mostly(st.one_of(get_ops, put_ops, good_puts, search_ops, list_ops),
             st.sampled_from([None, "GetOp", {"namespace": ALICE_NS}, 5]), 15)


def _public_call(ms: MemirStore, data: st.DataObject, asynchronous: bool) -> Callable[[], Any]:
    which = data.draw(st.sampled_from(["put", "get", "search", "delete", "list_namespaces"]))
    ns = data.draw(namespaces, label="namespace")
    if which == "put":
        args = (ns, data.draw(keys, label="key"), data.draw(values, label="value"))
        kw: dict[str, Any] = {"index": data.draw(indexes, label="index")}
        ttl = data.draw(ttls, label="ttl")
        if ttl is not NOT_PROVIDED:
            kw["ttl"] = ttl
    elif which in ("get", "delete"):
        args, kw = (ns, data.draw(keys, label="key")), {}
    elif which == "search":
        args = (ns,)
        kw = {"query": data.draw(queries, label="query"), "filter": data.draw(filters, label="filter"),
              "limit": data.draw(counts_, label="limit"), "offset": data.draw(counts_, label="offset")}
    else:
        args = ()
        kw = {"prefix": data.draw(st.one_of(alice_ns, hostile_ns, st.none()), label="prefix"),
              "suffix": data.draw(st.one_of(st.none(), namespaces), label="suffix"),
              "max_depth": data.draw(st.one_of(st.none(), counts_), label="max_depth"),
              "limit": data.draw(counts_, label="limit"), "offset": data.draw(counts_, label="offset")}
    if asynchronous:
        return _arun(lambda: getattr(ms, "a" + which)(*args, **kw))
    return lambda: getattr(ms, which)(*args, **kw)


def _seed_langgraph(tmp_path: Path) -> tuple[MemoryStore, MemirStore, set[str]]:
    store = MemoryStore.open(tmp_path / "lg.sqlite", embedder=HashEmbedder(64))
    ms = MemirStore(store)
    ms.put(("mallory", "assistant", "memories"), "secret", {"content": MALLORY_TEXT, "kind": "pref", "n": 1})
    ms.put(("mallory",), "root", {"content": f"{MARK} at the root"})
    ms.put(ALICE_NS, "tea", {"content": "Alice likes green tea", "kind": "pref", "n": 1, "meta": {"lang": "en"}})
    ms.put(ALICE_NS + ("deep",), "x", {"content": "a deeper memory", "n": 10})
    ms.put(("alice",), "root", {"content": "user level note"})
    mallory_ids = {r.id for r in store.scope(user_id="mallory", agent_id="assistant").list(tier="any")}
    mallory_ids |= {r.id for r in store.scope(user_id="mallory").list(tier="any")}
    return store, ms, mallory_ids


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_langgraph_public_methods_fuzz(tmp_path: Path, asynchronous: bool) -> None:
    store, ms, mallory_ids = _seed_langgraph(tmp_path)

    @fuzz(350 if not asynchronous else 200)
    @given(st.data())
    def run(data: st.DataObject) -> None:
        for _ in range(data.draw(st.integers(1, 3))):
            attempt("langgraph" + ("_async" if asynchronous else ""), store, _public_call(ms, data, asynchronous),
                    mallory_ids)

    try:
        run()
    finally:
        store.close()


@pytest.mark.parametrize("asynchronous", [False, True], ids=["batch", "abatch"])
def test_langgraph_batch_fuzz(tmp_path: Path, asynchronous: bool) -> None:
    """A batch is all-or-nothing about validation: a bad op anywhere writes nothing of the others."""
    store, ms, mallory_ids = _seed_langgraph(tmp_path)

    @fuzz(240 if not asynchronous else 160)
    @given(st.one_of(st.lists(ops, min_size=1, max_size=4),
                     # writes first, then one op that may be bad: a bad op anywhere must write nothing
                     st.tuples(st.lists(good_puts, min_size=1, max_size=2), st.lists(ops, min_size=1, max_size=2))
                     .map(lambda t: [*t[0], *t[1]])))
    def run(batch: list[Any]) -> None:
        call = _arun(lambda: ms.abatch(batch)) if asynchronous else (lambda: ms.batch(batch))
        ok, out = attempt("langgraph_" + ("abatch" if asynchronous else "batch"), store, call, mallory_ids)
        if ok:
            assert isinstance(out, list) and len(out) == len(batch)
            for op, res in zip(batch, out):
                if isinstance(op, SearchOp) and res:
                    assert all(it.namespace[:len(op.namespace_prefix)] == tuple(op.namespace_prefix) for it in res)
                if isinstance(op, GetOp) and res is not None:
                    assert res.namespace == tuple(op.namespace) and res.key == op.key

    try:
        run()
    finally:
        store.close()


BAD_NAMESPACES = [(), ("",), ("a.b",), ("alice", "x\x00"), ("alice", 5), ("langgraph", "x"), None, 5, "alice",
                  ("alice", "\ud800")]


def _namespace_calls(ms: MemirStore, ns: Any) -> list[Callable[[], Any]]:
    """Every way a namespace reaches the store: the public methods (sync and async) and ops in a batch."""
    value = {"content": "x"}
    calls = [lambda: ms.put(ns, "k", value), lambda: ms.batch([PutOp(ns, "k", value)]),
             _arun(lambda: ms.aput(ns, "k", value)), _arun(lambda: ms.abatch([PutOp(ns, "k", value)]))]
    if ns not in ((), ("langgraph", "x")):  # a read of () is allowed (it finds nothing, or is refused)
        calls += [lambda: ms.get(ns, "k"), lambda: ms.delete(ns, "k"), lambda: ms.search(ns),
                  _arun(lambda: ms.aget(ns, "k")), _arun(lambda: ms.asearch(ns)),
                  _arun(lambda: ms.adelete(ns, "k")), lambda: ms.batch([GetOp(ns, "k")])]
    if ns not in ((), ("langgraph", "x"), None):  # prefix=None is "no prefix"
        calls += [lambda: ms.list_namespaces(prefix=ns), _arun(lambda: ms.alist_namespaces(suffix=ns))]
    return calls


def test_langgraph_namespace_errors_keep_both_contracts(tmp_path: Path) -> None:
    """A namespace LangGraph's rules refuse raises one error that is LangGraph's InvalidNamespaceError
    (what BaseStore documents) and memir's ValidationError naming the field — through every public
    method, sync and async, and through batch/abatch, where BaseStore's own check is bypassed."""
    store, ms, mallory_ids = _seed_langgraph(tmp_path)
    try:
        for ns in BAD_NAMESPACES:
            for call in _namespace_calls(ms, ns):
                ok, err = attempt("langgraph", store, call, mallory_ids)
                assert not ok and isinstance(err, InvalidNamespaceError) and err.field, (ns, err)
    finally:
        store.close()


def test_langgraph_reads_without_a_user_are_refused(tmp_path: Path) -> None:
    store, ms, mallory_ids = _seed_langgraph(tmp_path)
    try:
        for call in (lambda: ms.search(()), lambda: ms.search((), query=MARK), lambda: ms.list_namespaces(),
                     lambda: ms.list_namespaces(prefix=("*",)), lambda: ms.list_namespaces(suffix=("memories",)),
                     lambda: ms.batch([SearchOp((), None, 10, 0, MARK)])):
            ok, err = attempt("langgraph", store, call, mallory_ids)
            assert not ok and isinstance(err, ValidationError) and err.field == "namespace_prefix", err
    finally:
        store.close()


# ================================================================================== 2. mem0 facade
users = mostly(st.just("alice"), st.one_of(hostile_text, non_str, st.sampled_from(["Alice", "alice ", "agent:mallory"])), 6)
agents = mostly(st.sampled_from([None, "default", "planner"]), st.one_of(st.just("mallory"), hostile_text, non_str), 2)
roles = mostly(st.sampled_from(["user", "assistant", "system", "tool"]), anything)
message = mostly(
    st.fixed_dictionaries({"role": roles, "content": mostly(hostile_text, non_str)}),
    st.one_of(st.fixed_dictionaries({"content": hostile_text}), st.dictionaries(hostile_text, anything, max_size=2),
              anything), 3)
messages = mostly(st.one_of(hostile_text, st.lists(message, max_size=3), message),
                  st.one_of(st.sampled_from(["x" * 20_000, "\ud800", "bob@example.com", "my password is hunter2"]),
                            st.tuples(message), non_str, st.builds(lambda: iter([{"role": "user", "content": "from an iterator"}])),
                            st.lists(message, min_size=200, max_size=200)), 3)
meta_vals = st.one_of(json_leaf, non_json, json_vals)
metadata = mostly(
    st.one_of(st.none(), st.dictionaries(hostile_text, json_leaf, max_size=3)),
    st.one_of(
        st.dictionaries(st.one_of(hostile_text, st.sampled_from(["category", "tags", "confidence", "sensitivity",
                                                                 "expires_at", "flags", "sub_role", "source_type"])),
                        meta_vals, max_size=3),
        st.dictionaries(st.integers(), st.integers(), min_size=1, max_size=1),
        st.sampled_from([{"confidence": float("nan")}, {"confidence": 2}, {"tags": "travel"}, {"tags": [5]},
                         {"expires_at": "yesterday"}, {"expires_at": "2020-01-01T00:00:00"}, {"sensitivity": "bogus"},
                         {"flags": ["nope"]}, {"source_type": "evil"}, {"sub_role": "\ud800"}, {"category": "\ud800"},
                         {"user_id": "mallory"}, {"category": float("inf")}, {"category": 2**80},
                         {"expires_at": "9999-12-31T23:59:59"}, {"confidence": True}, {"tags": ["a"] * 500}]),
        non_str), 2)
mem0_filters = mostly(
    st.one_of(st.none(), st.just({}), st.sampled_from([{"category": "food"}, {"tags": ["seat"]}, {"tier": "any"},
                                                       {"source_types": ["direct_interaction"]}])),
    st.one_of(
        st.dictionaries(st.one_of(hostile_text, st.sampled_from(["tags", "source_types", "since", "until", "tier",
                                                                 "min_confidence", "sessions", "user_id", "category",
                                                                 "include_expired", "sensitivity", "agent_id",
                                                                 "roles"])),
                        meta_vals, max_size=3),
        st.sampled_from([{"user_id": "mallory"}, {"since": "yesterday"}, {"min_confidence": "x"},
                         {"sessions": ["\ud800"]}, {"tags": [MARK]}, {"category": {"$ne": "x"}}, {"tier": "evil"},
                         {"since": "2020-01-01T00:00:00"}, {"min_confidence": float("nan")}]),
        non_str), 2)
thresholds = mostly(st.one_of(st.none(), st.floats(0, 1)),
                    st.one_of(st.floats(), st.integers(-5, 5), st.sampled_from(["0.5"]), st.booleans()), 2)
infers = mostly(st.booleans(), st.one_of(non_str, hostile_text))
run_ids = mostly(st.sampled_from(["run-1", "run-2"]), anything, 2)
limits = mostly(st.integers(1, 50), st.one_of(st.integers(-3, 0), st.integers(10**9, 10**20), st.floats(),
                                               st.booleans(), st.none(), st.sampled_from(["5"])), 3)


def _mem0_call(m: Any, data: st.DataObject, ids: list[str], mallory_id: str, asynchronous: bool) -> Callable[[], Any]:
    which = data.draw(st.sampled_from(["add", "add", "search", "search", "get_all", "get", "update", "delete",
                                       "history", "explain", "delete_all"]))
    kw: dict[str, Any] = {}
    if data.draw(st.integers(0, 9)):
        kw["user_id"] = data.draw(users, label="user_id")
    if data.draw(st.integers(0, 3)) == 0:
        kw["agent_id"] = data.draw(agents, label="agent_id")
    pick = data.draw(st.integers(0, 5), label="memory_id pick")
    memory_id = (ids[data.draw(st.integers(0, 19), label="which id") % len(ids)] if pick < 3 and ids else
                 mallory_id if pick == 3 else data.draw(anything, label="memory_id"))
    if which == "add":
        args: tuple[Any, ...] = (data.draw(messages, label="messages"),)
        kw.update(metadata=data.draw(metadata, label="metadata"), infer=data.draw(infers, label="infer"))
        if data.draw(st.booleans()):
            kw["run_id"] = data.draw(run_ids, label="run_id")
    elif which == "search":
        args = (data.draw(mostly(st.sampled_from(["tea", MARK, "launch code", "green"]), anything, 2), label="query"),)
        kw.update(limit=data.draw(limits, label="limit"), filters=data.draw(mem0_filters, label="filters"),
                  threshold=data.draw(thresholds, label="threshold"))
        if data.draw(st.booleans()):
            kw["run_id"] = data.draw(run_ids, label="run_id")
    elif which == "get_all":
        args = ()
        kw.update(limit=data.draw(limits, label="limit"), filters=data.draw(mem0_filters, label="filters"))
        if data.draw(st.booleans()):
            kw["run_id"] = data.draw(run_ids, label="run_id")
    elif which == "update":
        args = (memory_id, data.draw(mostly(st.just("corrected text"), anything, 2), label="data"))
    elif which == "delete_all":
        args = ()
        if data.draw(st.integers(0, 3)):
            kw["run_id"] = data.draw(run_ids, label="run_id")  # mostly one run: alice keeps some memories
    else:
        args = (memory_id,)
    fn = getattr(m, which)
    if asynchronous:
        return _arun(lambda: fn(*args, **kw))
    return lambda: fn(*args, **kw)


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_mem0_facade_fuzz(tmp_path: Path, asynchronous: bool) -> None:
    store = MemoryStore.open(tmp_path / "mem0.sqlite", embedder=HashEmbedder(64))
    cls = AsyncMemory if asynchronous else Memory
    unbound, bound = cls(store), cls(store, user_id="alice")
    mallory = Memory(store).add(MALLORY_TEXT, user_id="mallory", metadata={"category": "food"})
    mallory_id = mallory["results"][0]["id"]
    mallory_ids = {mallory_id}
    seeded = Memory(store).add([{"role": "user", "content": "Alice likes green tea"},
                                {"role": "assistant", "content": "Noted: green tea"}], user_id="alice",
                               run_id="run-1", metadata={"category": "food"})
    ids = [r["id"] for r in seeded["results"]]

    @fuzz(400 if not asynchronous else 220)
    @given(st.data())
    def run(data: st.DataObject) -> None:
        for _ in range(data.draw(st.integers(1, 3))):
            m = data.draw(st.sampled_from([unbound, bound]))
            ok, out = attempt("mem0" + ("_async" if asynchronous else ""), store,
                              _mem0_call(m, data, ids, mallory_id, asynchronous), mallory_ids)
            if ok and isinstance(out, dict):
                ids.extend(r["id"] for r in out.get("results", []) if isinstance(r, dict) and "id" in r)
                for r in out.get("results", []):
                    if isinstance(r, dict) and "user_id" in r:
                        assert r["user_id"] != "mallory", r
            del ids[:-20]

    try:
        run()
        assert any(r.id == mallory_id for r in store.scope(user_id="mallory").list())
    finally:
        store.close()


# ================================================================================== 3. agent tools
NAMES = [t.name for t in TOOLS]
tag_text = mostly(st.from_regex(r"[a-z][a-z_:-]{0,12}", fullmatch=True), hostile_text, 8)


def _valid_args(name: str) -> st.SearchStrategy[dict[str, Any]]:
    """Arguments for tool ``name``: each mostly right (including the edges the schema allows), now and
    then hostile — so a bad value usually meets good ones and gets past the checks before it."""
    required = {
        "remember": {"content": mostly(st.one_of(st.sampled_from(["Alice flies Friday", "bob@example.com",
                                                                  "my password is hunter2"]), hostile_text),
                                       st.sampled_from(["x" * 20_000, "\ud800", "", "  "]))},
        "recall": {"query": mostly(st.one_of(st.sampled_from(["flight", MARK, "launch code"]), hostile_text),
                                   st.sampled_from(["\ud800", "", "x" * 40_000]))},
        "forget": {"memory_id": st.just("mem_nope")},
        "explain_memory": {"memory_id": st.just("mem_nope")},
        "retain_now": {},
        "list_memories": {},
    }[name]
    valid = {
        "tags": st.lists(tag_text, max_size=16), "sub_role": tag_text, "sub_roles": st.lists(tag_text, max_size=4),
        "source_type": st.sampled_from(["direct_interaction", "derived_inference", "external_ingest"]),
        "source_types": st.lists(st.sampled_from(["derived_inference", "direct_interaction"]), max_size=4),
        "confidence": st.floats(0, 1), "min_confidence": st.floats(0, 1), "session_id": hostile_text,
        "expires_at": st.sampled_from(["2030-01-01T00:00:00Z", "2000-01-01", "9999-12-31T23:59:59",
                                       "0001-01-01T00:00:00+14:00", "2030-01-01T00:00:00-23:59", "2030-01-01"]),
        "k": st.integers(1, 20), "limit": st.integers(1, 100), "capacity": st.integers(1, 100_000),
        "tier": st.sampled_from(["working", "archive"]), "dry_run": st.booleans(),
        "reason": st.text(max_size=100), "memory_id": st.just("mem_nope"),
    }
    hostile = {"k": st.integers(-2, 30), "limit": st.integers(-2, 200), "capacity": st.integers(-2, 10**6),
               "tier": st.sampled_from(["any", "evil"]), "confidence": st.floats(), "min_confidence": st.floats(),
               "source_type": st.just("evil"), "expires_at": st.sampled_from(["nope", "2030-13-01", "\ud800"]),
               "tags": st.lists(hostile_text, min_size=17, max_size=20), "reason": st.text(min_size=101, max_size=120)}
    props = TOOLS_BY_NAME[name].parameters["properties"]
    optional = {k: mostly(valid[k], st.one_of(hostile.get(k, anything), anything, json_vals), 6)
                for k in props if k not in required}
    return st.fixed_dictionaries(required, optional=optional)


def _tool_args(data: st.DataObject, name: Any, ids: list[str], mallory_id: str) -> Any:
    known = isinstance(name, str) and name in TOOLS_BY_NAME
    base = data.draw(_valid_args(name) if known else st.just({}), label="args")
    if "memory_id" in base:
        pick = data.draw(st.integers(0, 4), label="memory_id pick")
        base["memory_id"] = (ids[data.draw(st.integers(0, 19), label="which id") % len(ids)] if pick < 2 and ids else
                             mallory_id if pick == 2 else data.draw(anything, label="memory_id"))
    if data.draw(st.integers(0, 4)) == 0:
        base[data.draw(st.one_of(hostile_text, st.sampled_from(["extra", "agent_id"])), label="extra key")] = \
            data.draw(anything)
    form = data.draw(st.sampled_from(["dict", "dict", "json", "json", "malformed", "other"]), label="form")
    if form == "dict":
        return base
    if form == "json":
        try:
            return json.dumps(base)
        except (TypeError, ValueError):
            return json.dumps({k: str(v) for k, v in base.items()})  # the same keys, as strings
    if form == "malformed":
        try:
            text = json.dumps(base)
        except (TypeError, ValueError):
            text = "{}"
        return data.draw(st.sampled_from([text[: max(0, len(text) - 1)], text + "}", "{", "", "null", "[1, 2]", '"x"',
                                          "1e999", '{"content": NaN}', "{'content': 'x'}", "\ud800",
                                          "[" * 5000 + "]" * 5000, '{"k": ' + "1" * 5000 + "}",
                                          '{"query": "a", "k": 1e400}', '{"a": 1, "a": 2}']), label="malformed")
    return data.draw(non_str, label="arguments")


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_tools_fuzz(tmp_path: Path, asynchronous: bool) -> None:
    store = MemoryStore.open(tmp_path / "tools.sqlite", embedder=HashEmbedder(64))
    alice = store.scope(user_id="alice", policy=RetentionPolicy(scorer=FakeScorer()))
    mallory = store.scope(user_id="mallory")
    mallory_id = mallory.write(MALLORY_TEXT).id
    ids = [call_tool(alice, "remember", {"content": "Alice flies to Oslo on Friday", "tags": ["travel"]})["id"]]

    def run_tool(name: Any, args: Any) -> Callable[[], Any]:
        return _arun(lambda: acall_tool(alice, name, args)) if asynchronous else (lambda: call_tool(alice, name, args))

    @fuzz(400 if not asynchronous else 200)
    @given(st.data())
    def run(data: st.DataObject) -> None:
        for _ in range(data.draw(st.integers(1, 3))):
            name = data.draw(mostly(st.sampled_from(NAMES), st.one_of(anything, st.sampled_from(["Remember", "recall "])), 5),
                             label="name")
            args = _tool_args(data, name, ids, mallory_id)
            ok, out = attempt("tools" + ("_async" if asynchronous else ""), store, run_tool(name, args), {mallory_id})
            if ok:
                json.dumps(out)  # a tool result is JSON-able
                if name == "remember":
                    ids.append(out["id"])
                    del ids[:-20]
        # a tenant argument is refused, whatever the tool and the form
        name = data.draw(st.sampled_from(NAMES))
        args = dict(data.draw(_valid_args(name)))
        args["user_id"] = data.draw(st.sampled_from(["mallory", "alice", ""]))
        for form in (args, json.dumps(args, default=str)):
            ok, err = attempt("tools" + ("_async" if asynchronous else ""), store, run_tool(name, form), {mallory_id})
            assert not ok and isinstance(err, ValidationError) and err.field == "user_id", err

    try:
        run()
        assert [r.id for r in mallory.list()] == [mallory_id]
    finally:
        store.close()


# ================================================================================== 4. the CLI
@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A randomly initialised utility model for the hash encoder (as tests/runtime/test_cli.py)."""
    torch = pytest.importorskip("torch")
    from utilitynet.export import export_onnx
    from utilitynet.features import spec_for
    from utilitynet.model import UtilityNet, UtilityNetConfig

    torch.manual_seed(0)
    spec = spec_for(64, HashEmbedder(64).encoder_id)
    net = UtilityNet(UtilityNetConfig.for_spec(spec, hidden=(8,), embedding_proj=4))
    return export_onnx(net, spec, tmp_path_factory.mktemp("model") / "model.onnx")


def _run_cli(argv: list[str]) -> tuple[int, str, str]:
    """``memir`` in-process: (exit code, stdout, stderr). argparse's own exit is code 2."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = cli.main(argv)
        except SystemExit as e:
            rc = e.code if isinstance(e.code, int) else 2
    return rc, out.getvalue(), err.getvalue()


def _check_cli_failure(argv: list[str], rc: int, err: str, *, usage_ok: bool = False) -> None:
    assert "Traceback" not in err, err
    assert rc != cli.EXIT["internal"], f"memir {argv[:1]} failed untyped: {err}"
    if rc == cli.EXIT["usage"] and usage_ok:  # argparse: a usage line and the error
        assert err.rstrip().splitlines()[-1].startswith("memir"), err
        return
    assert err.count("\n") == 1 and err.startswith("memir: "), f"not one line: {err!r}"


@pytest.fixture
def dump_lines(tmp_path: Path) -> list[str]:
    with MemoryStore.open(tmp_path / "src.sqlite", embedder=HashEmbedder(64)) as store:
        store.scope(user_id="alice").write_many([f"alice fact {i} about orion" for i in range(4)])
        store.scope(user_id="mallory").write(MALLORY_TEXT)
        store.admin_export(tmp_path / "dump.jsonl")
    return (tmp_path / "dump.jsonl").read_text().splitlines()


FIELDS = ["id", "content", "created_at", "schema_version", "provenance", "provenance.user_id", "provenance.agent_id",
          "provenance.type", "provenance.timestamp", "provenance.derived_from", "role_context",
          "role_context.active_role", "role_context.dialog_role", "metadata", "metadata.confidence", "metadata.tags",
          "metadata.flags", "metadata.attributes", "metadata.expires_at", "metadata.freshness_half_life",
          "metadata.sensitivity", "usage", "usage.access_count", "usage.utility", "embedding", "encoder_id"]
bad_vectors = st.one_of(
    st.lists(st.floats(), min_size=64, max_size=64),
    st.lists(st.floats(-1, 1), min_size=0, max_size=70),
    st.sampled_from([[], [[0.1] * 64], ["0.1"] * 64, [None] * 64, [True] * 64, [1e308] * 64, [0.0] * 64,
                     "0.1,0.2", {"v": 1}, 5, [2**70] * 64]),
    json_leaf)
json_any = st.one_of(json_vals, bad_vectors)


def _set(obj: dict[str, Any], path: str, value: Any, delete: bool) -> None:
    *head, last = path.split(".")
    for p in head:
        nxt = obj.get(p)
        if not isinstance(nxt, dict):
            return
        obj = nxt
    if delete:
        obj.pop(last, None)
    else:
        obj[last] = value


def _mutate(data: st.DataObject, lines: list[str]) -> bytes:
    lines = list(lines)
    for _ in range(data.draw(st.integers(1, 4), label="mutations")):
        i = data.draw(st.integers(0, len(lines) - 1), label="line")
        kind = data.draw(st.sampled_from(["truncate", "set", "delete", "vector", "replace", "duplicate", "insert",
                                          "unknown_key", "bytes", "wipe"]), label="kind")
        if kind == "wipe":  # every line broken: nothing valid is left to score
            lines = [x[: len(x) // 2] for x in lines]
        elif kind == "truncate":
            lines[i] = lines[i][: data.draw(st.integers(0, max(0, len(lines[i]) - 1)))]
        elif kind in ("set", "delete", "vector", "unknown_key"):
            try:
                obj = json.loads(lines[i])
            except (ValueError, RecursionError):  # a line an earlier mutation broke
                continue
            if not isinstance(obj, dict):
                continue
            if kind == "vector":
                obj["embedding"] = data.draw(bad_vectors, label="embedding")
            elif kind == "unknown_key":
                obj[data.draw(hostile_text, label="key")] = data.draw(json_vals)
            else:
                _set(obj, data.draw(st.sampled_from(FIELDS), label="field"), data.draw(json_any, label="value"),
                     kind == "delete")
            try:
                lines[i] = json.dumps(obj)
            except ValueError:
                lines[i] = json.dumps(obj, allow_nan=True)
        elif kind == "replace":
            lines[i] = data.draw(st.one_of(st.sampled_from(["", "null", "[1]", "3", '"x"', "{", "}", "\ufeff{}",
                                                            '{"content": "x"}', "[" * 5000, '{"a": ' * 5000,
                                                            '{"content": "x", "provenance": {"user_id": "\\ud800"}}']),
                                           hostile_text), label="line text")
        elif kind == "duplicate":
            lines.insert(i, lines[i])
        elif kind == "insert":
            lines.insert(i, data.draw(st.sampled_from(["", "   ", "\t"])))
        else:
            lines[i] = "\x00\xff"  # written as invalid UTF-8 below
    body = "\n".join(lines).encode("utf-8", "surrogatepass").replace("\x00\xff".encode(), b"\x00\xff\xfe")
    return body + data.draw(st.sampled_from([b"\n", b"", b"\n\n", b"\xff"]), label="tail")


def test_cli_score_on_mutated_dumps(tmp_path: Path, tiny_model: Path, dump_lines: list[str]) -> None:
    work = tmp_path / "work"
    work.mkdir()

    @fuzz(60)
    @given(st.data())
    def run(data: st.DataObject) -> None:
        dump = work / "mut.jsonl"
        dump.write_bytes(_mutate(data, dump_lines))
        out = work / "scored.jsonl"
        for p in work.glob("scored*"):
            p.unlink()
        argv = ["score", str(dump), "-o", str(out), "--capacity", "2", "--model", str(tiny_model), "--encoder", "hash",
                "--quiet", "--json", "--workers", "1"]
        CALLS["cli_score"] = CALLS.get("cli_score", 0) + 1
        rc, stdout, err = _run_cli(argv)
        SUCCEEDED["cli_score"] = SUCCEEDED.get("cli_score", 0) + (rc == 0)
        if rc != 0:
            _check_cli_failure(argv, rc, err)
            return
        assert "Traceback" not in err, err
        report = json.loads(stdout)
        assert report["valid"] + report["quarantined"] == report["records"], report
        rows = [json.loads(x) for x in out.read_text().splitlines()]
        assert len(rows) == report["valid"]
        assert all(isinstance(r["utility"], float) and math.isfinite(r["utility"]) for r in rows)
        assert not [p for p in work.iterdir() if p.name.endswith(".tmp")]

    run()


cli_text = st.one_of(st.sampled_from(["alice", "mallory", "", " ", "-", "--", "--user", "-o", "\ud800", "a\udcffb",
                                      "x" * 5000, "../x", "nan", "inf", "-1", "0", "99999999999999999999", "1e3",
                                      "mem_nope", "postgresql://nobody@127.0.0.1:1/x", "/", "."]),
                     st.text(max_size=10).filter(lambda s: "\x00" not in s))


def test_cli_hostile_arguments(tmp_path: Path, tiny_model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")  # relative hostile paths land in tmp_path
    monkeypatch.setattr(cli, "_open_store", lambda path, create, config=None: MemoryStore.open(
        path, embedder=HashEmbedder(64), create=create, config=config))
    db = tmp_path / "agent.sqlite"
    with MemoryStore.open(db, embedder=HashEmbedder(64)) as store:
        store.scope(user_id="alice").write_many([f"alice fact {i}" for i in range(5)])
        ids = [store.scope(user_id="mallory").write(MALLORY_TEXT).id]
        ids.append(store.scope(user_id="alice").list()[0].id)
        dump = tmp_path / "dump.jsonl"
        store.admin_export(dump)
    out_dir = tmp_path / "out"
    out_dir.mkdir()

    def count() -> int:
        with MemoryStore.open(db, embedder=HashEmbedder(64)) as s:
            return int(s.admin_stats()["memories"])

    @fuzz(80)
    @given(st.data())
    def run(data: st.DataObject) -> None:
        cmd = data.draw(st.sampled_from(["inspect", "retain", "explain", "snapshot", "refresh", "score", "reembed",
                                         "migrate"]))
        for p in tmp_path.glob("copy.sqlite*"):  # what an earlier migrate made
            p.unlink()

        def arg(label: str, *valid: str) -> str:  # mostly one of the valid values, else hostile
            return str(data.draw(mostly(st.sampled_from(valid), cli_text, 3), label=label))

        target = arg("db", str(db))
        user = arg("user", "alice", "mallory", "nobody")
        if cmd == "inspect":
            argv = ["inspect", target, "--capacity", arg("capacity", "1", "200")]
        elif cmd == "retain":
            argv = ["retain", target, "--user", user, "--agent", arg("agent", "default"),
                    "--capacity", arg("capacity", "1", "3", "0"), "--model", str(tiny_model), "--dry-run",
                    "--budget-tokens", arg("budget", "100", "1")]
        elif cmd == "explain":
            argv = ["explain", target, arg("id", *ids), *data.draw(st.sampled_from([[], ["--user", user]]))]
        elif cmd == "snapshot":
            argv = ["snapshot", target, "--user", user, "-o", arg("out", str(out_dir / "s.jsonl"), "s.parquet")]
        elif cmd == "refresh":
            argv = ["refresh", target, "--user", user, "--older-than", arg("days", "0", "30", "1e-9"),
                    "--weight", arg("weight", "0.3", "0", "0.99"), "--batch-size", arg("batch", "1", "256"),
                    "--dry-run"]
        elif cmd == "reembed":
            argv = ["reembed", target, "--batch-size", arg("batch", "1", "256"), "--quiet"]
        elif cmd == "migrate":
            argv = ["migrate", target, arg("dst", str(tmp_path / "copy.sqlite")), "--create",
                    "--batch-size", arg("batch", "1", "500"), "--quiet"]
        else:
            argv = ["score", arg("dump", str(dump)), "-o", arg("out", str(out_dir / "scored.jsonl")),
                    "--capacity", arg("capacity", "2"), "--batch-size", arg("batch", "1", "64"),
                    "--memory-mb", arg("mb", "1", "256"), "--quiet", "--model", str(tiny_model), "--encoder", "hash"]
        argv.append("--json")
        CALLS["cli_args"] = CALLS.get("cli_args", 0) + 1
        before = count()
        rc, stdout, err = _run_cli(argv)
        SUCCEEDED["cli_args"] = SUCCEEDED.get("cli_args", 0) + (rc == 0)
        if rc != 0:
            _check_cli_failure(argv, rc, err, usage_ok=True)
            assert count() == before
            assert not (tmp_path / "copy.sqlite").exists(), "a failed migrate left a store behind"
        else:
            assert "Traceback" not in err
            if "--user" in argv and argv[argv.index("--user") + 1] != "mallory":
                assert MARK not in stdout  # one user's command never shows another's memory
                if cmd == "snapshot":
                    written = Path(argv[argv.index("-o") + 1])
                    assert MARK.encode() not in written.read_bytes()

    run()
