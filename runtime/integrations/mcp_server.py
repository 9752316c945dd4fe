"""An MCP server for memir: the six tools of :mod:`runtime.integrations.tools` over stdio or
streamable HTTP (``memir mcp serve``).

The tools, their schemas and their results come from :data:`~runtime.integrations.tools.TOOLS` and
:func:`~runtime.integrations.tools.acall_tool` — the same source as the OpenAI and Anthropic
definitions — through the SDK's low-level server with explicit input schemas (nothing is re-derived
from Python signatures).

Whose memories a call touches is never a tool argument. It is fixed by the server's configuration
(one ``user_id``/``agent_id``), or, over HTTP with a tokens file, by the bearer token of the
request: ``{"<token>": {"user_id": "alice", "agent_id": "default"}, ...}``. A request without a
valid token is refused with 401 before it reaches a tool; an MCP session stays bound to the
credential that opened it.

A failing call is an MCP tool error (``isError``) carrying memir's one-line message (for example
``no memory 'mem_…' in scope user='bob' agent='default'``), never a traceback.

Over HTTP, a request whose body is larger than ``max_body_bytes`` (default
:data:`DEFAULT_MAX_BODY_BYTES`, 1 MiB; or ``$MEMIR_MCP_MAX_BODY_BYTES``) is answered ``413`` with a
short JSON body before anything else — authentication included — reads it; a request carrying more
than one ``Authorization`` header is answered ``401`` (which credential counts would be ambiguous).

Example:
    .. code-block:: bash

        memir mcp serve agent.sqlite --user alice                       # stdio, for a desktop client
        memir mcp serve agent.sqlite --transport http --tokens tokens.json --port 8765

    .. code-block:: python

        from runtime import MemoryStore
        from runtime.integrations.mcp_server import MemirMCPServer

        with MemoryStore.open("agent.sqlite") as store:
            MemirMCPServer(store, user_id="alice").run_stdio()

This module needs the ``mcp`` package (``pip install 'memir-runtime[integrations]'``).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..distribution import DIST, pip_extra
from ..errors import MemirError, MissingDependencyError, ValidationError

try:
    import anyio
    import mcp.types as types
    from mcp.server.auth.middleware.auth_context import get_access_token
    from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
    from mcp.server.auth.provider import AccessToken
    from mcp.server.auth.settings import AuthSettings
    from mcp.server.context import ServerRequestContext
    from mcp.server.lowlevel import Server
    from mcp.server.stdio import stdio_server
    from mcp.shared.exceptions import MCPError
except ModuleNotFoundError as _missing:  # the SDK lives in the `integrations` extra
    raise MissingDependencyError(f"the memir MCP server needs the MCP SDK ({_missing.name} is missing): "
                                 f"{pip_extra('integrations')}") from None

from ..record.memir import is_id
from ..sockets import bind
from .tools import TOOLS, TOOLS_BY_NAME, acall_tool

if TYPE_CHECKING:
    from starlette.applications import Starlette

    from ..store.scope import Scope
    from ..store.store import MemoryStore

__all__ = ["DEFAULT_MAX_BODY_BYTES", "MIN_TOKEN_CHARS", "MemirMCPServer", "Tenant", "TokenTable", "bind",
           "load_tokens"]

log = logging.getLogger(__name__)

MIN_TOKEN_CHARS = 16
"""A bearer token shorter than this is refused when the tokens file is loaded."""

DEFAULT_MAX_BODY_BYTES = 1 << 20
"""The largest HTTP request body served (1 MiB) unless ``max_body_bytes`` or
``$MEMIR_MCP_MAX_BODY_BYTES`` says otherwise: a tool call is a few kilobytes (``remember`` keeps
at most 16,000 characters), and a larger body only costs the server time."""

_MAX_BODY_ENV = "MEMIR_MCP_MAX_BODY_BYTES"


@dataclass(frozen=True)
class Tenant:
    """The scope a server (or a bearer token) is bound to.

    Raises:
        ValidationError: an id that is not letters, digits and ``_ . : @ -`` (1–128 characters).
    """

    user_id: str
    agent_id: str = "default"

    def __post_init__(self) -> None:
        for name in ("user_id", "agent_id"):
            value = getattr(self, name)
            if not is_id(value):
                raise ValidationError(f"{name} must be an id (letters, digits and _ . : @ -, 1–128 characters), "
                                      f"got {str(value)[:40]!r}", field=name)


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def load_tokens(path: str | Path) -> dict[str, Tenant]:
    """Read a tokens file: a JSON object ``{"<bearer token>": {"user_id": ..., "agent_id": ...}}``.

    ``agent_id`` defaults to ``"default"``. Error messages name entries by position, never by
    token.

    Raises:
        ValidationError: not a JSON object, a token shorter than :data:`MIN_TOKEN_CHARS`, or an
            entry without a valid ``user_id`` (``field`` names the entry, e.g. ``"tokens[2].user_id"``).
        OSError: the file cannot be read.
    """
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except ValueError as e:
        raise ValidationError(f"tokens file {path} is not valid JSON ({e.__class__.__name__}) — write "
                              '{"<token>": {"user_id": "alice"}}', field="tokens") from None
    if not isinstance(data, dict) or not data:
        raise ValidationError(f"tokens file {path} must be a non-empty JSON object "
                              '{"<token>": {"user_id": "alice", "agent_id": "default"}}', field="tokens")
    out: dict[str, Tenant] = {}
    for i, (token, entry) in enumerate(data.items()):
        where = f"tokens[{i}]"
        if len(token) < MIN_TOKEN_CHARS or token != token.strip():
            raise ValidationError(f"{where}: a bearer token must be at least {MIN_TOKEN_CHARS} characters without "
                                  "surrounding spaces (make one with: python -c 'import secrets; "
                                  "print(secrets.token_urlsafe(32))')", field=where)
        if not isinstance(entry, dict) or set(entry) - {"user_id", "agent_id"}:
            raise ValidationError(f'{where}: each token maps to {{"user_id": ..., "agent_id": ...}} '
                                  "(agent_id optional)", field=where)
        try:
            out[token] = Tenant(entry.get("user_id", ""), entry.get("agent_id", "default"))
        except ValidationError as e:
            raise ValidationError(f"{where}.{e}", field=f"{where}.{e.field}") from None
    return out


class TokenTable:
    """The MCP SDK's ``TokenVerifier`` over a tokens table: a known bearer token becomes an
    ``AccessToken`` whose claims carry its tenant.

    Only SHA-256 digests of the tokens are held. A presented token's digest is compared with
    *every* entry by :func:`hmac.compare_digest`, with no early exit, so the time a check takes says
    nothing about how much of any token (or digest) matched, nor which entry it was."""

    def __init__(self, tokens: Mapping[str, Tenant]) -> None:
        self._entries = [(_digest(t).encode(), tenant) for t, tenant in tokens.items()]

    def __len__(self) -> int:
        return len(self._entries)

    async def verify_token(self, token: str) -> AccessToken | None:
        """The access token for a known bearer token, else ``None`` (the request gets 401)."""
        presented = _digest(token).encode()
        tenant: Tenant | None = None
        for digest, who in self._entries:  # all of them, every time
            if hmac.compare_digest(presented, digest):
                tenant = who
        if tenant is None:
            return None
        return AccessToken(token=token, client_id=f"{tenant.user_id}/{tenant.agent_id}", scopes=[],
                           subject=tenant.user_id,
                           claims={"memir_user_id": tenant.user_id, "memir_agent_id": tenant.agent_id})


def _max_body_bytes(value: int | None) -> int:
    """``value``, else ``$MEMIR_MCP_MAX_BODY_BYTES``, else :data:`DEFAULT_MAX_BODY_BYTES`.

    Raises:
        ValidationError: not a whole number of bytes of at least 1 (``field`` names where it came from).
    """
    if value is None:
        field, text = _MAX_BODY_ENV, os.environ.get(_MAX_BODY_ENV, "").strip()
        if not text:
            return DEFAULT_MAX_BODY_BYTES
        n = int(text) if text.isascii() and text.isdigit() else 0
    else:
        field, text = "max_body_bytes", str(value)
        n = value if isinstance(value, int) and not isinstance(value, bool) else 0
    if n < 1:
        raise ValidationError(f"{field} must be a whole number of bytes >= 1 (e.g. 1048576), got {text[:40]!r}",
                              field=field)
    return n


class _RequestGuard:
    """Pure ASGI middleware at the root of the HTTP app: a body larger than ``max_body_bytes`` gets
    413 (a declared ``Content-Length`` is refused unread; a chunked body is counted as it arrives and
    never buffered past the limit), more than one ``Authorization`` header gets 401. What passes is
    replayed to the app unchanged."""

    def __init__(self, app: Any, max_body_bytes: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    @staticmethod
    async def _refuse(send: Any, status: int, error: str, message: str) -> None:
        body = json.dumps({"error": error, "message": message}).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        if status == 401:
            headers.append((b"www-authenticate", b'Bearer error="invalid_request"'))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = scope.get("headers") or []
        if sum(1 for k, _ in headers if k.lower() == b"authorization") > 1:
            await self._refuse(send, 401, "invalid_request", "send one Authorization: Bearer <token> header")
            return
        too_large = ("request_too_large", f"the request body is larger than {self.max_body_bytes} bytes")
        declared = [v for k, v in headers if k.lower() == b"content-length"]
        if declared:
            try:
                size = int(declared[0])
            except ValueError:
                size = -1
            if size > self.max_body_bytes:
                await self._refuse(send, 413, *too_large)
                return
        chunks: list[Any] = []
        seen = 0
        while True:
            message = await receive()
            chunks.append(message)
            if message["type"] != "http.request":
                break  # the client went away: the app sees that
            seen += len(message.get("body", b""))
            if seen > self.max_body_bytes:
                await self._refuse(send, 413, *too_large)
                return
            if not message.get("more_body", False):
                break

        async def replay() -> Any:
            return chunks.pop(0) if chunks else await receive()

        await self.app(scope, replay, send)


def _error(e: BaseException) -> types.CallToolResult:
    """A tool error the model can read: one line, no traceback."""
    if isinstance(e, MemirError):
        message = " ".join(str(e).split())
    else:  # a bug, not the caller's mistake: keep the traceback in the server's log only
        log.exception("memir MCP tool failed")
        message = f"internal error ({type(e).__name__}) — the server log has the details"
    body: dict[str, Any] = {"error": type(e).__name__, "message": message}
    if isinstance(e, ValidationError) and e.field:
        body["field"] = e.field
    return types.CallToolResult(content=[types.TextContent(text=message)], structured_content=body, is_error=True)


class MemirMCPServer:
    """The memir tools as an MCP server bound to one store.

    Args:
        store: the store the tools read and write.
        user_id, agent_id: the one scope every call works on (stdio, or HTTP without tokens).
        tokens: bearer token → :class:`Tenant` (HTTP only): each request's token selects its
            scope; ``user_id`` must then be ``None``.
        capacity: the scopes' retention capacity (``retain_now`` without ``capacity`` uses it).
        max_body_bytes: over HTTP, larger request bodies get 413 (default ``$MEMIR_MCP_MAX_BODY_BYTES``,
            else :data:`DEFAULT_MAX_BODY_BYTES`).

    Raises:
        ValidationError: neither or both of ``user_id`` and ``tokens``, an invalid id, or a
            ``max_body_bytes`` (argument or environment variable) that is not a byte count >= 1.
    """

    def __init__(self, store: MemoryStore, *, user_id: str | None = None, agent_id: str = "default",
                 tokens: Mapping[str, Tenant] | None = None, capacity: int | None = None,
                 max_body_bytes: int | None = None) -> None:
        if (user_id is None) == (tokens is None):
            raise ValidationError("give the server one scope (user_id) or a tokens table (tokens), not "
                                  f"{'both' if user_id is not None else 'neither'}", field="user_id")
        self.max_body_bytes = _max_body_bytes(max_body_bytes)
        self.store = store
        self._policy = store.config.policy.with_(capacity=capacity)
        self._scopes: dict[Tenant, Scope] = {}
        self._fixed = Tenant(user_id, agent_id) if user_id is not None else None
        self.tokens = TokenTable(tokens) if tokens is not None else None
        for tenant in ([self._fixed] if self._fixed else list(dict.fromkeys((tokens or {}).values()))):
            self._scope(tenant)  # invalid ids fail here, at startup, not on the first call
        self.server: Server[Any] = Server(
            "memir", version=_version(),
            instructions="Long-term memory for this user: remember facts, recall them before answering, "
                         "forget on request.",
            on_list_tools=self._list_tools, on_call_tool=self._call_tool,
            get_tool_input_schema=lambda name: TOOLS_BY_NAME[name].parameters if name in TOOLS_BY_NAME else None)

    # ------------------------------------------------------------------ scopes
    def _scope(self, tenant: Tenant) -> Scope:
        scope = self._scopes.get(tenant)
        if scope is None:
            scope = self._scopes[tenant] = self.store.scope(user_id=tenant.user_id, agent_id=tenant.agent_id,
                                                            policy=self._policy)
        return scope

    def scope_for(self, ctx: ServerRequestContext[Any, Any]) -> Scope:
        """The scope of one request: the configured one, or the one its bearer token selects.

        Raises:
            ValidationError: a tokens server got a request without a known token (the HTTP layer
                refuses those first; this is the second lock).
        """
        if self._fixed is not None:
            return self._scope(self._fixed)
        request = ctx.request
        user = request.scope.get("user") if request is not None and hasattr(request, "scope") else None
        token = user.access_token if isinstance(user, AuthenticatedUser) else get_access_token()
        claims = (token.claims or {}) if token is not None else {}
        if "memir_user_id" not in claims:
            raise ValidationError("not authenticated — send Authorization: Bearer <token>", field="authorization")
        return self._scope(Tenant(claims["memir_user_id"], claims["memir_agent_id"]))

    # ------------------------------------------------------------------ handlers
    async def _list_tools(self, ctx: ServerRequestContext[Any, Any],
                          params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[
            types.Tool(name=t.name, description=t.description, input_schema=dict(t.parameters),
                       annotations=types.ToolAnnotations(read_only_hint=t.read_only, destructive_hint=t.destructive,
                                                         idempotent_hint=t.read_only, open_world_hint=False))
            for t in TOOLS])

    async def _call_tool(self, ctx: ServerRequestContext[Any, Any],
                         params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name not in TOOLS_BY_NAME:
            raise MCPError(types.INVALID_PARAMS, f"unknown tool {params.name[:64]!r} — the tools are "
                                                 f"{', '.join(TOOLS_BY_NAME)}")
        try:
            result = await acall_tool(self.scope_for(ctx), params.name, params.arguments or {})
        except Exception as e:  # every failure is a tool result the model can read
            return _error(e)
        return types.CallToolResult(content=[types.TextContent(text=json.dumps(result, ensure_ascii=False))],
                                    structured_content=result)

    # ------------------------------------------------------------------ transports
    async def serve_stdio(self) -> None:
        """Serve one client over this process's stdin/stdout until it closes them."""
        async with stdio_server() as (read_stream, write_stream):
            await self.server.run(read_stream, write_stream, self.server.create_initialization_options())

    def run_stdio(self) -> None:
        """Blocking :meth:`serve_stdio`."""
        anyio.run(self.serve_stdio)

    def http_app(self, *, host: str = "127.0.0.1", port: int = 8765, path: str = "/mcp") -> Starlette:
        """The streamable HTTP app (Starlette). With tokens, every request needs a known bearer token.

        ``host`` and ``port`` are where it will be reachable: a loopback host turns on the SDK's
        DNS-rebinding protection; they also name the issuer in the auth settings. Every request
        passes the root guard first (body size, one ``Authorization`` header: see the module doc).
        """
        limit = self.max_body_bytes
        if self.tokens is None:
            app = self.server.streamable_http_app(streamable_http_path=path, host=host, max_request_body_size=limit)
        else:
            where = f"[{host}]" if ":" in host else host
            auth = AuthSettings(issuer_url=f"http://{where}:{port}", resource_server_url=None)  # type: ignore[arg-type]
            app = self.server.streamable_http_app(streamable_http_path=path, host=host, auth=auth,
                                                  token_verifier=self.tokens, max_request_body_size=limit)
        app.add_middleware(_RequestGuard, max_body_bytes=limit)  # outermost: before auth reads anything
        return app

    def run_http(self, sock: socket.socket, *, path: str = "/mcp") -> None:
        """Serve streamable HTTP on a bound socket (see :func:`bind`) until interrupted."""
        import uvicorn

        host, port = sock.getsockname()[:2]
        config = uvicorn.Config(self.http_app(host=host, port=port, path=path), log_level="warning",
                                lifespan="on")
        uvicorn.Server(config).run(sockets=[sock])


def _version() -> str:
    try:
        from importlib.metadata import version
        return version(DIST)
    except Exception:  # a source tree that was never installed
        return "source"
