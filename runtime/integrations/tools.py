"""Six small agent tools over one :class:`~runtime.store.scope.Scope` — one source for OpenAI and
Anthropic function calling and for the MCP server (:mod:`runtime.integrations.mcp_server`).

``remember``, ``recall``, ``forget``, ``explain_memory``, ``retain_now`` and ``list_memories`` are
each a :class:`ToolSpec`: a name, a description for the model, and a compact JSON Schema of only
what the model should set. :func:`openai_tools` and :func:`anthropic_tools` render :data:`TOOLS` in
each vendor's format; :func:`call_tool` checks a model's arguments against the same schema and runs
the tool on a scope, returning a small JSON-able dict.

The scope is the caller's: no tool takes ``user_id`` or ``agent_id`` (an argument of that name is
refused like any unknown one), so a model cannot read or write another user's memories.

Example:
    >>> from runtime import MemoryStore
    >>> from runtime.integrations.tools import anthropic_tools, call_tool, openai_tools
    >>> store = MemoryStore.open("agent.sqlite")                                  # doctest: +SKIP
    >>> alice = store.scope(user_id="alice")                                      # doctest: +SKIP
    >>> tools = openai_tools()        # client.chat.completions.create(..., tools=tools)
    >>> [t["name"] for t in anthropic_tools()][:2]
    ['remember', 'recall']
    >>> call_tool(alice, "remember", {"content": "Alice's flight is on 3 May"})  # doctest: +SKIP
    {'id': 'mem_…', 'content': "Alice's flight is on 3 May", 'sensitivity': 'none'}
    >>> call_tool(alice, "recall", {"query": "when does Alice fly?", "k": 3})    # doctest: +SKIP

Nothing here imports a third-party package beyond what the runtime already uses.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal

from ..errors import ValidationError
from ..record.memir import SourceType
from ..store.ranking import format_context

if TYPE_CHECKING:
    from ..record.memir import MemIR
    from ..retention.decision import MemoryExplanation, RetentionDecision
    from ..store.ranking import Hit
    from ..store.scope import ForgetReport, Scope

__all__ = ["TOOLS", "TOOLS_BY_NAME", "ToolSpec", "acall_tool", "anthropic_tools", "call_tool", "check_arguments", "openai_tools",
           "tool_spec"]


@dataclass(frozen=True)
class ToolSpec:
    """One agent tool: what the model sees.

    Attributes:
        name: the tool name (``^[a-z_]{1,64}$``, valid for OpenAI, Anthropic and MCP).
        description: when and how to use it, for the model.
        parameters: a JSON Schema object (``additionalProperties: false``) of the arguments. Treat it
            as read-only; :func:`openai_tools` and :func:`anthropic_tools` hand out copies.
        read_only: the tool changes nothing (MCP ``readOnlyHint``).
        destructive: the tool may remove data (MCP ``destructiveHint``).
    """

    name: str
    description: str
    parameters: Mapping[str, Any]
    read_only: bool = False
    destructive: bool = False

    def schema_bytes(self) -> int:
        """Size in bytes of the compact JSON of ``parameters`` (what a model pays for in its prompt)."""
        return len(json.dumps(self.parameters, separators=(",", ":")).encode())


def _obj(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = list(required)
    return schema


_SOURCE_TYPES = [s.value for s in SourceType]
_STR_LIST = {"type": "array", "items": {"type": "string"}, "maxItems": 16}

TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "remember",
        "Store one self-contained fact worth keeping about the user or the task. Personal data is "
        "redacted before it is stored. Returns the new memory's id.",
        _obj({
            "content": {"type": "string", "description": "The fact, e.g. \"Alice's flight to Oslo is on 3 May\"."},
            "tags": {**_STR_LIST, "description": "Labels to filter by later, e.g. [\"travel\"]."},
            "sub_role": {"type": "string", "description": "Topic, e.g. \"billing\"."},
            "source_type": {"enum": _SOURCE_TYPES, "description": "direct_interaction (the user said it; "
                            "default), derived_inference (your conclusion), external_ingest (a document or "
                            "tool), system_feedback."},
            "confidence": {"type": "number", "minimum": 0, "maximum": 1},
            "session_id": {"type": "string"},
            "expires_at": {"type": "string", "format": "date-time", "description": "Forget it after this time."},
        }, ("content",))),
    ToolSpec(
        "recall",
        "Find the memories most relevant to a query. Each hit has its source, role, session, time and "
        "confidence; 'context' is the same as a block to quote.",
        _obj({
            "query": {"type": "string", "description": "What you need to know, in words."},
            "k": {"type": "integer", "minimum": 1, "maximum": 20, "description": "Hits to return (default 5)."},
            "tags": {**_STR_LIST, "description": "Only memories with one of these tags."},
            "sub_roles": {**_STR_LIST, "description": "Only these topics."},
            "source_types": {"type": "array", "items": {"enum": _SOURCE_TYPES}, "maxItems": 4},
            "min_confidence": {"type": "number", "minimum": 0, "maximum": 1},
        }, ("query",)),
        read_only=True),
    ToolSpec(
        "forget",
        "Forget a memory (and its earlier versions) for good, e.g. when the user asks you to or it is "
        "wrong. Use an id from recall or list_memories.",
        _obj({
            "memory_id": {"type": "string"},
            "reason": {"type": "string", "maxLength": 100, "description": "One line, e.g. \"user request\"."},
        }, ("memory_id",)),
        destructive=True),
    ToolSpec(
        "explain_memory",
        "Why a memory is kept, archived or gone: its state, every retention decision about it, what it "
        "was derived from and what was derived from it.",
        _obj({"memory_id": {"type": "string"}}, ("memory_id",)),
        read_only=True),
    ToolSpec(
        "retain_now",
        "Decide now which memories to keep: the most useful stay within the capacity, the rest are "
        "archived. dry_run previews the decision without changing anything.",
        _obj({
            "capacity": {"type": "integer", "minimum": 1, "maximum": 100000,
                         "description": "Keep at most this many (default: the configured capacity)."},
            "dry_run": {"type": "boolean"},
        }),
        destructive=True),
    ToolSpec(
        "list_memories",
        "List stored memories, oldest first.",
        _obj({
            "limit": {"type": "integer", "minimum": 1, "maximum": 100, "description": "Default 20."},
            "tags": {**_STR_LIST, "description": "Only memories with one of these tags."},
            "tier": {"enum": ["working", "archive"], "description": "working (default) or archive."},
        }),
        read_only=True),
)
"""The tool set, in the order a model sees it."""

TOOLS_BY_NAME: Mapping[str, ToolSpec] = MappingProxyType({t.name: t for t in TOOLS})
"""The tools by name (read-only)."""
_TENANT_FIELDS = frozenset({"user_id", "agent_id"})


def tool_spec(name: str) -> ToolSpec:
    """The :class:`ToolSpec` called ``name``.

    Raises:
        ValidationError: no such tool (``field="name"``), listing the tools.
    """
    spec = TOOLS_BY_NAME.get(name) if isinstance(name, str) else None
    if spec is None:
        raise ValidationError(f"unknown tool {str(name)[:64]!r} — the tools are {', '.join(TOOLS_BY_NAME)}", field="name")
    return spec


# ---------------------------------------------------------------------------------------------- vendor formats

_STRICT_KEYWORDS = frozenset({"type", "properties", "required", "additionalProperties", "description", "enum",
                              "items", "pattern", "format", "minimum", "maximum", "minItems", "maxItems"})


def _strict_ok(schema: Mapping[str, Any]) -> bool:
    """Whether a schema qualifies for OpenAI strict mode as it is (nothing is rewritten to make it so):
    every object closed with every property required, and only keywords strict mode supports."""
    if any(k not in _STRICT_KEYWORDS for k in schema):
        return False
    if schema.get("type") == "object" or "properties" in schema:
        props = schema.get("properties", {})
        if schema.get("additionalProperties") is not False or set(schema.get("required", ())) != set(props):
            return False
        return all(_strict_ok(p) for p in props.values())
    items = schema.get("items")
    return items is None or _strict_ok(items)


def _plain(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A deep, mutable copy (callers may edit what they get without touching :data:`TOOLS`)."""
    out: dict[str, Any] = json.loads(json.dumps(schema))
    return out


def openai_tools(*, api: Literal["chat", "responses"] = "chat") -> list[dict[str, Any]]:
    """:data:`TOOLS` as OpenAI function tools.

    ``strict: true`` is set only on tools whose schema already satisfies strict mode (every
    property required, every object closed); the others say ``strict: false``, so optional
    arguments stay optional.

    Args:
        api: ``chat`` — Chat Completions (``{"type": "function", "function": {...}}``);
            ``responses`` — the Responses API's flat form (``{"type": "function", "name": ...}``).

    Returns:
        One dict per tool, ready for ``tools=``.
    """
    out = []
    for t in TOOLS:
        fn = {"name": t.name, "description": t.description, "parameters": _plain(t.parameters),
              "strict": _strict_ok(t.parameters)}
        out.append({"type": "function", "function": fn} if api == "chat" else {"type": "function", **fn})
    return out


def anthropic_tools() -> list[dict[str, Any]]:
    """:data:`TOOLS` as Anthropic Messages API tools: ``[{"name", "description", "input_schema"}]``."""
    return [{"name": t.name, "description": t.description, "input_schema": _plain(t.parameters)} for t in TOOLS]


# ---------------------------------------------------------------------------------------------- argument checks

_TYPES: Mapping[str, Callable[[Any], bool]] = MappingProxyType({
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v),
    "boolean": lambda v: isinstance(v, bool),
    "array": lambda v: isinstance(v, list),
})


def _check(tool: str, field: str, value: Any, schema: Mapping[str, Any]) -> Any:
    """Check one value against its (sub)schema; return it, with date-times parsed."""
    def bad(why: str) -> ValidationError:
        shown = json.dumps(value, default=str)
        return ValidationError(f"{tool}: argument {field} {why}, got {shown[:60]}", field=field)

    kind = schema.get("type")
    if kind is not None and not _TYPES[kind](value):
        raise bad(f"must be {'an' if kind[0] in 'aeiou' else 'a'} {kind}")
    if "enum" in schema and value not in schema["enum"]:
        raise bad(f"must be one of {', '.join(map(str, schema['enum']))}")
    if "minimum" in schema and value < schema["minimum"]:
        raise bad(f"must be at least {schema['minimum']}")
    if "maximum" in schema and value > schema["maximum"]:
        raise bad(f"must be at most {schema['maximum']}")
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        raise bad(f"must be at most {schema['maxLength']} characters")
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        raise bad(f"must have at most {schema['maxItems']} items")
    if "pattern" in schema and not re.search(schema["pattern"], value):
        raise bad(f"must match {schema['pattern']}")
    if schema.get("format") == "date-time":
        try:
            return datetime.fromisoformat(value)
        except ValueError:
            raise bad("must be an ISO 8601 date-time (e.g. 2025-05-03T09:00:00Z)") from None
    if "items" in schema:
        return [_check(tool, f"{field}[{i}]", v, schema["items"]) for i, v in enumerate(value)]
    return value


def check_arguments(name: str, arguments: Mapping[str, Any] | str | None) -> dict[str, Any]:
    """Check a model's arguments for tool ``name`` against its schema.

    ``null`` for an optional argument means "not given" (models often send it).

    Args:
        name: the tool.
        arguments: the decoded arguments (a JSON string is decoded first), or ``None`` for none.

    Returns:
        The arguments that were given, checked (date-times as ``datetime``).

    Raises:
        ValidationError: an unknown tool (``field="name"``), or an unknown, missing or mistyped
            argument (``field`` = the argument, e.g. ``"k"`` or ``"tags[1]"``).
    """
    spec = tool_spec(name)
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except (ValueError, RecursionError):  # RecursionError: nested deeper than the decoder goes
            raise ValidationError(f"{name}: arguments are not valid JSON", field="arguments") from None
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, Mapping):
        raise ValidationError(f"{name}: arguments must be a JSON object", field="arguments")
    props: Mapping[str, Any] = spec.parameters["properties"]
    for key in arguments:
        if key not in props:
            why = (" — the user and agent are set by the application, never by a tool argument"
                   if key in _TENANT_FIELDS else f"; valid: {', '.join(props)}")
            raise ValidationError(f"{name}: unknown argument {str(key)[:64]!r}{why}", field=str(key))
    out: dict[str, Any] = {}
    for key in spec.parameters.get("required", ()):
        if arguments.get(key) is None:
            raise ValidationError(f"{name}: missing required argument {key}", field=key)
    for key, value in arguments.items():
        if value is not None:
            out[key] = _check(name, key, value, props[key])
    return out


# ---------------------------------------------------------------------------------------------- results

def _when(t: datetime) -> str:
    return t.isoformat(timespec="seconds")


def _remembered(rec: MemIR) -> dict[str, Any]:
    return {"id": rec.id, "content": rec.content, "sensitivity": rec.metadata.sensitivity.value}


def _recalled(hits: list[Hit]) -> dict[str, Any]:
    out = []
    for h in hits:
        r = h.record
        role = r.role_context.active_role + (f"/{r.role_context.sub_role}" if r.role_context.sub_role else "")
        out.append({"id": r.id, "content": r.content, "source_type": r.provenance.type.value, "role": role,
                    "session": r.provenance.session_id, "time": _when(r.event_time),
                    "confidence": round(r.metadata.confidence, 3), "score": round(h.score.total, 4)})
    return {"hits": out, "context": format_context(hits)}


def _forgotten(report: ForgetReport) -> dict[str, Any]:
    return {"deleted": list(report.deleted), "redacted": list(report.redacted)}


def _explained(ex: MemoryExplanation) -> dict[str, Any]:
    out: dict[str, Any] = {
        "memory_id": ex.memory_id, "state": ex.state, "summary": ex.summary,
        "decisions": [{"decision_id": d.decision_id, "at": _when(d.at), "trigger": d.trigger,
                       "action": d.item.action, "reason": str(getattr(d.item.reason, "value", d.item.reason)),
                       "utility": round(d.item.utility, 4)} for d in ex.history]}
    for key in ("supersedes", "superseded_by"):
        if getattr(ex, key) is not None:
            out[key] = getattr(ex, key)
    for key in ("derived_from", "children"):  # causality both ways: what it came from, what it led to
        if getattr(ex, key):
            out[key] = list(getattr(ex, key))
    return out


def _retained(d: RetentionDecision) -> dict[str, Any]:
    head = "dry run, nothing changed: " if d.dry_run else ""
    cap = f" (capacity {d.capacity})" if d.capacity is not None else ""
    summary = (f"{head}kept {len(d.kept)} of {d.n_items}{cap}; archived {len(d.archived)}, deleted "
               f"{len(d.deleted)}, redacted {len(d.redacted)}")
    return {"decision_id": d.decision_id, "dry_run": d.dry_run, "kept": len(d.kept), "archived": len(d.archived),
            "deleted": len(d.deleted), "summary": summary}


def _listed(recs: list[MemIR]) -> dict[str, Any]:
    return {"memories": [{"id": r.id, "content": r.content, "time": _when(r.event_time), "tags": list(r.metadata.tags)}
                         for r in recs]}


# ---------------------------------------------------------------------------------------------- running

@dataclass(frozen=True)
class _Call:
    """One scope call a tool makes: ``scope.<method>(*args, **kwargs)``, then ``shape`` on the result.
    The async path calls ``scope.a<method>`` with the same arguments."""

    method: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    shape: Callable[[Any], dict[str, Any]]


def _pick(a: Mapping[str, Any], *keys: str) -> dict[str, Any]:
    return {k: a[k] for k in keys if k in a}


def _plan(name: str, arguments: Mapping[str, Any] | str | None) -> _Call:
    a = check_arguments(name, arguments)
    if name == "remember":
        return _Call("write", (a["content"],), _pick(a, "tags", "sub_role", "source_type", "confidence",
                                                      "session_id", "expires_at"), _remembered)
    if name == "recall":
        return _Call("recall", (a["query"],), {"k": a.get("k", 5), **_pick(a, "tags", "sub_roles", "source_types",
                                                                             "min_confidence")}, _recalled)
    if name == "forget":
        return _Call("forget", (a["memory_id"],), _pick(a, "reason"), _forgotten)
    if name == "explain_memory":
        return _Call("explain", (a["memory_id"],), {}, _explained)
    if name == "retain_now":
        return _Call("retain", (), {"capacity": a.get("capacity"), "dry_run": a.get("dry_run", False)}, _retained)
    return _Call("list", (), {"limit": a.get("limit", 20), **_pick(a, "tags", "tier")}, _listed)


def call_tool(scope: Scope, name: str, arguments: Mapping[str, Any] | str | None) -> dict[str, Any]:
    """Run one tool call from a model on ``scope``.

    Args:
        scope: the caller's scope (``store.scope(user_id=...)``) — the only user the call can touch.
        name: the tool name (one of :data:`TOOLS`).
        arguments: the model's arguments: a dict, or the JSON string OpenAI returns.

    Returns:
        A small JSON-able dict: ``remember`` → ``id``, ``content`` (as stored, redacted),
        ``sensitivity``; ``recall`` → ``hits`` and ``context``; ``forget`` → ``deleted``,
        ``redacted``; ``explain_memory`` → ``state``, ``summary``, ``decisions`` (and ``derived_from``,
        ``children`` when it has a lineage); ``retain_now`` →
        ``decision_id``, counts and ``summary``; ``list_memories`` → ``memories``.

    Raises:
        ValidationError: an unknown tool or a bad argument, naming the field; or what the scope
            refuses (``ContentTooLargeError``...).
        NotFoundError: no memory with that id in this scope (another user's id included).
    """
    call = _plan(name, arguments)
    return call.shape(getattr(scope, call.method)(*call.args, **call.kwargs))


async def acall_tool(scope: Scope, name: str, arguments: Mapping[str, Any] | str | None) -> dict[str, Any]:
    """:func:`call_tool` for async code: awaits the scope's async twin (``scope.arecall``...), so
    the event loop never blocks on the encoder or the database, and concurrent calls share encoder
    calls. Same arguments, result and errors."""
    call = _plan(name, arguments)
    return call.shape(await getattr(scope, "a" + call.method)(*call.args, **call.kwargs))
