"""The mem0-style facade: mem0's calls and result shapes, on typed, isolated memir scopes."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from runtime import MemoryStore
from runtime.errors import NotFoundError, ValidationError
from runtime.integrations.mem0 import AsyncMemory, Memory


def _chat_with_memories(memory: Any, message: str, user_id: str) -> str:
    """mem0's README quick-start loop, verbatim apart from the LLM call."""
    relevant = memory.search(query=message, user_id=user_id, limit=3)
    memories_str = "\n".join(f"- {entry['memory']}" for entry in relevant["results"])
    assistant_response = f"(answer using)\n{memories_str}"
    messages = [{"role": "system", "content": "You are a helpful AI."},
                {"role": "user", "content": message},
                {"role": "assistant", "content": assistant_response}]
    memory.add(messages, user_id=user_id)
    return assistant_response


def test_mem0_quickstart_runs_unchanged_and_users_stay_apart(store: MemoryStore) -> None:
    m = Memory(store)
    _chat_with_memories(m, "I am vegetarian and allergic to peanuts", "alice")
    _chat_with_memories(m, "My favourite team is the Lakers", "bob")
    answer = _chat_with_memories(m, "I am vegetarian and allergic to peanuts", "alice")
    assert "vegetarian" in answer
    alice = m.get_all(user_id="alice")["results"]
    # user and assistant turns kept with their dialog roles; the system prompt is not a memory
    assert {r["memory"] for r in alice} >= {"I am vegetarian and allergic to peanuts"}
    assert not any(r["memory"] == "You are a helpful AI." for r in alice)
    assert all(r["user_id"] == "alice" for r in alice)
    assert all("Lakers" not in r["memory"] for r in m.search("Lakers team", user_id="alice", limit=50)["results"])


def test_result_shapes_match_mem0_plus_typed_fields(store: MemoryStore) -> None:
    m = Memory(store)
    out = m.add("Prefers aisle seats", user_id="alice", run_id="trip-1",
                metadata={"category": "travel", "tags": ["seat"], "confidence": 0.9})
    (added,) = out["results"]
    assert added["event"] == "ADD" and added["memory"] == "Prefers aisle seats"
    hit = m.search("aisle seats", user_id="alice", limit=1)["results"][0]
    for key in ("id", "memory", "hash", "metadata", "score", "created_at", "updated_at", "user_id", "agent_id",
                "run_id"):
        assert key in hit
    assert hit["metadata"] == {"category": "travel"} and hit["tags"] == ["seat"] and hit["confidence"] == 0.9
    assert hit["run_id"] == hit["session_id"] == "trip-1" and hit["source_type"] == "direct_interaction"
    assert set(hit["score_breakdown"]) == {"similarity", "confidence", "freshness", "role_match", "total"}


def test_update_history_get_delete(store: MemoryStore) -> None:
    m = Memory(store, user_id="alice")  # bound: id-only calls need no user_id
    mid = m.add("Budget for Orion is 40k", infer=False)["results"][0]["id"]
    m.update(mid, "Budget for Orion is 55k")
    # the old id resolves to the newest version, as a mem0 id would
    got = m.get(mid)
    assert got["memory"] == "Budget for Orion is 55k" and got["updated_at"] is not None
    hist = m.history(mid)
    assert [(h["event"], h["old_memory"], h["new_memory"]) for h in hist] == [
        ("ADD", None, "Budget for Orion is 40k"), ("UPDATE", "Budget for Orion is 40k", "Budget for Orion is 55k")]
    assert m.explain(got["id"]).state == "working"
    m.delete(mid)
    with pytest.raises(NotFoundError):
        m.get(mid)
    with pytest.raises(NotFoundError):
        m.get(got["id"])


def test_filters_are_typed_or_metadata_and_run_scoped(store: MemoryStore) -> None:
    m = Memory(store)
    m.add("Flight LH123 on Friday", user_id="alice", run_id="r1", metadata={"kind": "travel", "tags": ["trip"]})
    m.add("Hotel booked in Lisbon", user_id="alice", run_id="r2", metadata={"kind": "travel"})
    m.add("Dentist on Monday", user_id="alice", run_id="r2", metadata={"kind": "health"})
    res = m.search("travel plans", user_id="alice", filters={"kind": "travel"})["results"]
    assert {r["memory"] for r in res} == {"Flight LH123 on Friday", "Hotel booked in Lisbon"}
    res = m.search("travel plans", user_id="alice", filters={"tags": ["trip"]})["results"]
    assert [r["memory"] for r in res] == ["Flight LH123 on Friday"]
    assert {r["memory"] for r in m.get_all(user_id="alice", run_id="r2")["results"]} == {
        "Hotel booked in Lisbon", "Dentist on Monday"}
    assert m.delete_all(user_id="alice", run_id="r2")["deleted"] == 2
    assert [r["memory"] for r in m.get_all(user_id="alice")["results"]] == ["Flight LH123 on Friday"]


def test_agent_only_memories_and_errors(store: MemoryStore) -> None:
    m = Memory(store)
    m.add("Escalate refunds above 500 EUR", agent_id="support")
    assert m.get_all(agent_id="support")["results"][0]["user_id"] == "agent:support"
    assert m.get_all(user_id="alice")["results"] == []
    with pytest.raises(ValidationError, match="user_id") as e:
        m.get("mem_x")
    assert e.value.field == "user_id"
    with pytest.raises(ValidationError) as e2:
        m.add("x", user_id="alice", metadata={"nested": {"a": 1}})
    assert e2.value.field == "metadata.nested"
    with pytest.raises(ValidationError) as e3:
        m.add([{"role": "robot", "content": "hi"}], user_id="alice")
    assert e3.value.field == "messages[0].role"
    with pytest.raises(ValidationError) as e4:
        Memory.from_config({"vector_store": {"provider": "qdrant"}})
    assert e4.value.field == "vector_store"
    # nothing was half-written by the refused calls
    assert m.get_all(user_id="alice")["results"] == []


def test_infer_with_an_extractor_stores_derived_facts(store: MemoryStore) -> None:
    m = Memory(store, extractor=lambda msgs: [f"User said: {x['content']}" for x in msgs if x["role"] == "user"])
    m.add([{"role": "user", "content": "I moved to Porto"}, {"role": "assistant", "content": "Noted!"}],
          user_id="alice")
    (r,) = m.get_all(user_id="alice")["results"]
    assert r["memory"] == "User said: I moved to Porto" and r["source_type"] == "derived_inference"


def test_async_memory_mirrors_memory(store: MemoryStore) -> None:
    am = AsyncMemory(store)

    async def go() -> None:
        await asyncio.gather(*(am.add(f"fact {i} about alice", user_id="alice") for i in range(20)),
                             *(am.add(f"fact {i} about bob", user_id="bob") for i in range(20)))
        res = await am.search("fact 3 about alice", user_id="alice", limit=5)
        assert res["results"] and all(r["user_id"] == "alice" for r in res["results"])
        mid = res["results"][0]["id"]
        await am.update(mid, "fact 3 about alice, corrected", user_id="alice")
        assert (await am.get(mid, user_id="alice"))["memory"] == "fact 3 about alice, corrected"
        assert len(await am.history(mid, user_id="alice")) == 2
        assert len((await am.get_all(user_id="alice", limit=100))["results"]) == 20
        await am.delete(mid, user_id="alice")
        assert (await am.delete_all(user_id="bob"))["deleted"] == 20
        assert (await am.get_all(user_id="bob"))["results"] == []

    asyncio.run(go())
