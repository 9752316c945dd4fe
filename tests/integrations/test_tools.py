"""The agent tool set: OpenAI and Anthropic definitions generated from one source (TOOLS), compact
schemas, and ``call_tool`` checking a model's arguments (naming the field) before it runs a tool on
the caller's scope — which no argument can change."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from runtime import MemoryStore
from runtime.errors import NotFoundError, ValidationError
from runtime.integrations.tools import (
    TOOLS,
    acall_tool,
    anthropic_tools,
    call_tool,
    check_arguments,
    openai_tools,
    tool_spec,
)
from runtime.retention import RetentionPolicy
from runtime.scoring import FakeScorer

ROOT = Path(__file__).resolve().parents[2]
NAMES = ["remember", "recall", "forget", "explain_memory", "retain_now", "list_memories"]
MAX_SCHEMA_BYTES = 1024


def test_vendor_definitions_are_generated_from_the_one_tool_list() -> None:
    assert [t.name for t in TOOLS] == NAMES
    oa, an, flat = openai_tools(), anthropic_tools(), openai_tools(api="responses")
    for t, o, a, f in zip(TOOLS, oa, an, flat, strict=True):
        assert o == {"type": "function", "function": {"name": t.name, "description": t.description,
                                                      "parameters": t.parameters, "strict": o["function"]["strict"]}}
        assert a == {"name": t.name, "description": t.description, "input_schema": t.parameters}
        assert f == {"type": "function", **o["function"]}
        assert re.fullmatch(r"[a-z_]{1,64}", t.name)
        p = t.parameters
        assert p["type"] == "object" and p["additionalProperties"] is False
        assert set(p.get("required", [])) <= set(p["properties"])
        assert not {"user_id", "agent_id"} & set(p["properties"]), "the scope must never be a tool argument"
    # what callers get is a copy: editing it leaves TOOLS alone
    oa[1]["function"]["parameters"]["properties"].clear()
    an[1]["input_schema"]["required"].append("x")
    assert "query" in tool_spec("recall").parameters["properties"]
    assert tool_spec("recall").parameters["required"] == ["query"]


def test_strict_only_where_the_schema_already_qualifies() -> None:
    """OpenAI strict mode needs every property required and every object closed: only tools whose
    schema is like that as written say strict=true (optional arguments are never forced)."""
    strict = {o["function"]["name"]: o["function"]["strict"] for o in openai_tools()}
    assert strict == {"remember": False, "recall": False, "forget": False, "explain_memory": True,
                      "retain_now": False, "list_memories": False}
    for t in TOOLS:
        all_required = set(t.parameters.get("required", [])) == set(t.parameters["properties"])
        assert strict[t.name] == all_required


def test_every_schema_is_compact() -> None:
    sizes = {t.name: t.schema_bytes() for t in TOOLS}
    whole = {t.name: len(json.dumps(o, separators=(",", ":")).encode()) for t, o in zip(TOOLS, openai_tools())}
    print("\nparameter schema bytes:", sizes)
    print("whole OpenAI definition bytes:", whole, "total", sum(whole.values()))
    assert all(n < MAX_SCHEMA_BYTES for n in sizes.values()), sizes
    assert sum(whole.values()) < 4 * 1024


@pytest.mark.parametrize(("name", "args", "field", "words"), [
    ("nope", {}, "name", "unknown tool"),
    ("recall", {}, "query", "missing required argument query"),
    ("recall", {"query": "x", "k": 50}, "k", "at most 20"),
    ("recall", {"query": "x", "k": 2.5}, "k", "must be an integer"),
    ("recall", {"query": "x", "k": True}, "k", "must be an integer"),
    ("recall", {"query": "x", "user_id": "bob"}, "user_id", "never by a tool argument"),
    ("recall", {"query": "x", "agent_id": "planner"}, "agent_id", "never by a tool argument"),
    ("recall", {"query": "x", "source_types": ["rumour"]}, "source_types[0]", "must be one of"),
    ("remember", {"content": "x", "tags": ["a", 3]}, "tags[1]", "must be a string"),
    ("remember", {"content": "x", "confidence": 1.5}, "confidence", "at most 1"),
    ("remember", {"content": "x", "expires_at": "soon"}, "expires_at", "ISO 8601"),
    ("remember", {"content": 42}, "content", "must be a string"),
    ("remember", {"content": "x", "colour": "red"}, "colour", "unknown argument"),
    ("forget", {"memory_id": "m", "reason": "x" * 101}, "reason", "at most 100 characters"),
    ("retain_now", {"capacity": 0}, "capacity", "at least 1"),
    ("retain_now", {"dry_run": "yes"}, "dry_run", "must be a boolean"),
    ("list_memories", {"tier": "any"}, "tier", "must be one of"),
    ("list_memories", ["limit", 3], "arguments", "JSON object"),
    ("list_memories", "{not json", "arguments", "not valid JSON"),
])
def test_bad_arguments_are_refused_naming_the_field(name: str, args: Any, field: str, words: str) -> None:
    with pytest.raises(ValidationError) as e:
        check_arguments(name, args)
    assert e.value.field == field and words in str(e.value), str(e.value)
    assert "\n" not in str(e.value)


def test_null_means_not_given_and_json_text_is_decoded() -> None:
    assert check_arguments("recall", {"query": "x", "k": None, "tags": None}) == {"query": "x"}
    assert check_arguments("recall", '{"query": "x", "k": 3}') == {"query": "x", "k": 3}
    assert check_arguments("retain_now", None) == {}
    got = check_arguments("remember", {"content": "x", "expires_at": "2030-01-02T03:04:05Z"})
    assert got["expires_at"].isoformat() == "2030-01-02T03:04:05+00:00"


def _scopes(make_store: Callable[..., MemoryStore]) -> tuple[Any, Any]:
    store = make_store()
    policy = RetentionPolicy(scorer=FakeScorer())
    return store.scope(user_id="alice", policy=policy), store.scope(user_id="bob", policy=policy)


def test_each_tool_runs_on_the_scope_and_returns_compact_json(make_store: Callable[..., MemoryStore]) -> None:
    alice, _ = _scopes(make_store)
    r = call_tool(alice, "remember", {"content": "Alice's flight to Oslo is on 3 May; mail alice@example.com",
                                      "tags": ["travel"], "sub_role": "trips", "confidence": 0.9,
                                      "expires_at": "2099-01-01T00:00:00Z"})
    assert set(r) == {"id", "content", "sensitivity"}
    assert "alice@example.com" not in r["content"] and r["sensitivity"] == "pii"  # stored redacted
    ids = [r["id"]] + [call_tool(alice, "remember", {"content": f"note {i} about the budget"})["id"]
                       for i in range(4)]
    got = call_tool(alice, "recall", {"query": "flight to Oslo", "k": 3, "tags": ["travel"]})
    assert [h["id"] for h in got["hits"]] == [r["id"]]
    hit = got["hits"][0]
    assert set(hit) == {"id", "content", "source_type", "role", "session", "time", "confidence", "score"}
    assert hit["role"] == "general/trips" and hit["confidence"] == 0.9
    assert got["context"].startswith("Relevant memories:") and "Content: Alice's flight" in got["context"]
    listed = call_tool(alice, "list_memories", {"limit": 10})["memories"]
    assert [m["id"] for m in listed] == ids and listed[0]["tags"] == ["travel"]
    dry = call_tool(alice, "retain_now", {"capacity": 2, "dry_run": True})
    assert dry["dry_run"] and (dry["kept"], dry["archived"]) == (2, 3) and dry["summary"].startswith("dry run")
    assert len(call_tool(alice, "list_memories", {})["memories"]) == 5  # a dry run changes nothing
    d = call_tool(alice, "retain_now", {"capacity": 4})
    assert set(d) == {"decision_id", "dry_run", "kept", "archived", "deleted", "summary"}
    assert (d["kept"], d["archived"]) == (4, 1) and "kept 4 of 5 (capacity 4)" in d["summary"]
    ex = call_tool(alice, "explain_memory", {"memory_id": ids[1]})
    assert ex["state"] in ("working", "archive") and ex["decisions"][-1]["decision_id"] == d["decision_id"]
    assert ex["summary"] and {"action", "reason", "utility", "at", "trigger"} <= set(ex["decisions"][0])
    archived = call_tool(alice, "list_memories", {"tier": "archive"})["memories"]
    assert len(archived) == 1
    f = call_tool(alice, "forget", {"memory_id": r["id"], "reason": "user request"})
    assert f == {"deleted": [r["id"]], "redacted": []}
    assert call_tool(alice, "recall", {"query": "flight to Oslo", "tags": ["travel"]})["hits"] == []
    json.dumps([r, got, listed, dry, d, ex, f])  # everything is JSON-able as returned


def test_no_argument_reaches_another_users_memories(make_store: Callable[..., MemoryStore]) -> None:
    alice, bob = _scopes(make_store)
    mid = call_tool(alice, "remember", {"content": "Alice's door code is 4711"})["id"]
    assert call_tool(bob, "recall", {"query": "door code"})["hits"] == []
    assert call_tool(bob, "list_memories", {})["memories"] == []
    for name in ("explain_memory", "forget"):
        with pytest.raises(NotFoundError, match="no memory"):
            call_tool(bob, name, {"memory_id": mid})
    with pytest.raises(ValidationError, match="never by a tool argument"):
        call_tool(bob, "recall", {"query": "door code", "user_id": "alice"})
    assert [h["id"] for h in call_tool(alice, "recall", {"query": "door code"})["hits"]] == [mid]


def test_acall_tool_matches_call_tool(make_store: Callable[..., MemoryStore]) -> None:
    alice, _ = _scopes(make_store)

    async def go() -> tuple[dict[str, Any], dict[str, Any]]:
        r = await acall_tool(alice, "remember", {"content": "The Orion budget is 40k EUR"})
        return r, await acall_tool(alice, "recall", {"query": "Orion budget", "k": 1})

    r, got = asyncio.run(go())
    assert got["hits"][0]["id"] == r["id"]
    with pytest.raises(ValidationError):
        asyncio.run(acall_tool(alice, "recall", {"query": "x", "user_id": "bob"}))


def test_acall_tool_awaits_the_scopes_async_methods_when_it_has_them() -> None:
    class AsyncOnly:
        """A scope stand-in with only the async surface (what ``await scope.arecall`` would be)."""

        def __init__(self) -> None:
            self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

        async def alist(self, *args: Any, **kwargs: Any) -> list[Any]:
            self.calls.append(("alist", args, kwargs))
            return []

    s = AsyncOnly()
    assert asyncio.run(acall_tool(s, "list_memories", {"limit": 3, "tier": "archive"})) == {"memories": []}  # type: ignore[arg-type]
    assert s.calls == [("alist", (), {"limit": 3, "tier": "archive"})]


def test_readme_tools_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    """The function-calling example (docs/integrations.md, the block tagged tools) runs as written."""
    from tests.docs.examples import block
    code = block("tools").code
    from runtime.encoders import load_default_embedder
    from runtime.errors import EncoderUnavailableError
    try:
        load_default_embedder()
    except EncoderUnavailableError:
        pytest.skip("the ONNX encoder is not exported here (make encoder)")
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "docs/integrations.md", "exec"), {"__name__": "readme"})
    out = capsys.readouterr().out
    assert "'content': 'Alice flies to Oslo on 3 May'" in out and "[Memory 1" in out and "Oslo" in out.split("[Memory 1")[1]
