"""`memir mcp serve` under attack, over stdio and over streamable HTTP, with the MCP SDK's own
client and with raw bytes on the wire.

- No credential, a wrong one, malformed ``Authorization`` headers (raw sockets, so nothing is
  cleaned up by a client library) and two of them: 401, with nothing of any user in the body.
- Bob's valid token (or bob's own stdio server) with alice's memory ids: ``explain_memory`` and
  ``forget`` answer "no memory" and alice's memory is untouched; bob's token on alice's MCP session
  is refused like a session that does not exist.
- Malformed JSON-RPC (not JSON, not an object, wrong ``jsonrpc``, unknown method, params of the
  wrong type, invalid UTF-8, a lone surrogate, deep nesting...): a JSON-RPC error or silence, never
  a 5xx; the server keeps serving.
- Oversized bodies (5 and 20 MB, declared or chunked): 413 with a short JSON body at the root of
  the HTTP app, before authentication; the limit is configurable. Over stdio (no HTTP layer) a
  5 MB line is a normal call.
- Hostile tool arguments drawn by hypothesis: every answer is a result or an MCP tool error with
  memir's one-line message (never "internal error"), and nothing of bob's ever comes back.

Everywhere: no ``Traceback`` in any HTTP response body, nor in any server's stdout or stderr.

The servers use the real default encoder (the CLI has no test encoder); each loads in about a second.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import anyio.from_thread
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

pytest.importorskip("mcp")
httpx2 = pytest.importorskip("httpx2")  # the MCP SDK's HTTP client
import httpx  # noqa: E402  (raw requests; starlette's test client uses it too)
from mcp import Client  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

import runtime.errors as memir_errors  # noqa: E402
from runtime.integrations.tools import TOOLS, TOOLS_BY_NAME  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
from bench_integrations import server_params  # noqa: E402  (how a client spawns the stdio server)

ALICE = "alice-hostile-0123456789abcdef"
BOB = "bob-hostile-0123456789abcdef00"
ALICE_PLANNER = "alice-planner-0123456789abcdef"
MB = 1 << 20
ACCEPT = "application/json, text/event-stream"
PROTOCOL = "2025-06-18"

SQL_META = ["'; DROP TABLE memories; --", "' OR '1'='1", ") OR 1=1 --", "%", "_", "%_%", "\\", "\\\\'", "$$",
            "$tag$ x $tag$", '"; DELETE FROM vectors; --', "*/ SELECT 1 /*", "ünïcødé ☃ 𝔘𝔫𝔦", "\u202e\u200b",
            "a\x00b", "\x00", "null", "NaN", "-1", "9" * 400, " ", "", "\n\r\t", "{{7*7}}", "${jndi:x}"]

MEMIR_ERRORS = {name for name in dir(memir_errors)
                if isinstance(getattr(memir_errors, name), type)
                and issubclass(getattr(memir_errors, name), memir_errors.MemirError)}


@pytest.fixture(scope="module", autouse=True)
def _needs_encoder() -> None:
    from runtime.encoders import load_default_embedder
    from runtime.errors import EncoderUnavailableError

    try:
        load_default_embedder()
    except EncoderUnavailableError:
        pytest.skip("the ONNX encoder is not exported here (make encoder)")


def no_traceback(*texts: str | bytes) -> None:
    for t in texts:
        text = t.decode("utf-8", "replace") if isinstance(t, bytes) else t
        assert "Traceback" not in text, text[-3000:]


def tool_error(result: Any) -> str:
    """An MCP tool error carrying memir's one-line message; returns the message."""
    assert result.is_error, result
    text: str = result.content[0].text
    body = result.structured_content
    assert isinstance(body, dict) and body["message"] == text, body
    assert body["error"] in MEMIR_ERRORS, body  # a typed memir error, not a bug's "internal error"
    assert "\n" not in text and "Traceback" not in text and not text.startswith("internal error"), text
    return text


def ok(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    out: dict[str, Any] = result.structured_content
    assert json.loads(result.content[0].text) == out
    return out


# ---------------------------------------------------------------------------------------------- servers

class HttpServer:
    """``memir mcp serve --transport http --tokens`` in a subprocess; stderr goes to a file."""

    def __init__(self, tmp: Path, env: dict[str, str] | None = None) -> None:
        tokens = tmp / "tokens.json"
        tokens.write_text(json.dumps({ALICE: {"user_id": "alice"}, BOB: {"user_id": "bob"},
                                      ALICE_PLANNER: {"user_id": "alice", "agent_id": "planner"}}))
        self.err = tmp / "server.err"
        cmd = [sys.executable, "-m", "runtime.cli", "mcp", "serve", str(tmp / "agent.sqlite"), "--create",
               "--transport", "http", "--tokens", str(tokens), "--port", "0"]
        with self.err.open("wb") as f:
            self.proc = subprocess.Popen(cmd, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=f, stderr=f,
                                         env={**os.environ, **(env or {})})
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            m = re.search(r"on (http://\S+/mcp)", self.err.read_text())
            if m:
                self.url = m.group(1)
                parts = urlsplit(self.url)
                self.host, self.port = parts.hostname or "127.0.0.1", int(parts.port or 80)
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        self.proc.kill()
        raise AssertionError(f"the server did not start: {self.err.read_text()}")

    def log(self) -> str:
        return self.err.read_text(errors="replace")

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture(scope="module")
def http_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    server = HttpServer(tmp_path_factory.mktemp("http"))
    try:
        yield server
    finally:
        server.stop()
    no_traceback(server.log())


class Sessions:
    """MCP SDK clients kept open in a blocking portal (so hypothesis can drive them synchronously)."""

    def __init__(self, stack: ExitStack) -> None:
        self.portal = stack.enter_context(anyio.from_thread.start_blocking_portal())
        self.stack = stack

    def open(self, transport: Any) -> Callable[..., Any]:
        client = self.stack.enter_context(self.portal.wrap_async_context_manager(Client(transport)))
        return lambda name, args: self.portal.call(client.call_tool, name, args)

    def http(self, url: str, token: str) -> Callable[..., Any]:
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
        self.stack.callback(lambda: self.portal.call(http.aclose))
        return self.open(streamable_http_client(url, http_client=http))


@pytest.fixture(scope="module")
def world(http_server: HttpServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """alice and bob over HTTP (one server, their tokens) and over stdio (two servers on one file),
    each with memories carrying a marker only they wrote."""
    tmp = tmp_path_factory.mktemp("stdio")
    db = tmp / "agent.sqlite"
    errs = {who: (tmp / f"{who}.err").open("w") for who in ("alice", "bob")}
    with ExitStack() as stack:
        s = Sessions(stack)
        calls = {
            "stdio": {"alice": s.open(stdio_client(server_params(db, "--user", "alice", "--create"), errlog=errs["alice"])),
                      "bob": s.open(stdio_client(server_params(db, "--user", "bob", "--create"), errlog=errs["bob"]))},
            "http": {"alice": s.http(http_server.url, ALICE), "bob": s.http(http_server.url, BOB),
                     "planner": s.http(http_server.url, ALICE_PLANNER)},
        }
        out: dict[str, Any] = {"calls": calls, "ids": {}, "markers": {}}
        for transport, who in (("stdio", "alice"), ("stdio", "bob"), ("http", "alice"), ("http", "bob")):
            marker = f"{who.upper()}-MARK-{uuid.uuid4().hex[:10]}"
            out["markers"][(transport, who)] = marker
            out["ids"][(transport, who)] = [ok(calls[transport][who]("remember", {
                "content": f"{who}'s note {i}: the vault code is {marker}-{i}", "tags": ["vault"]}))["id"]
                for i in range(3)]
        yield out
    for f in errs.values():
        f.close()
    no_traceback(*((tmp / f"{who}.err").read_text() for who in ("alice", "bob")))


# ---------------------------------------------------------------------------------------------- raw HTTP

def raw_http(server: HttpServer, head: bytes, body: bytes = b"", method: bytes = b"POST") -> tuple[int, bytes]:
    """One request written byte for byte (headers a client library would refuse to send)."""
    req = (method + b" /mcp HTTP/1.1\r\nHost: " + f"{server.host}:{server.port}".encode() + b"\r\n"
           b"Content-Type: application/json\r\nAccept: " + ACCEPT.encode() + b"\r\n" + head +
           b"Content-Length: " + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n" + body)
    with socket.create_connection((server.host, server.port), timeout=30) as sock:
        sock.sendall(req)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    status = int(data.split(b" ", 2)[1])
    return status, data.partition(b"\r\n\r\n")[2]


def rpc(method: str, params: Any = None, id_: Any = 1) -> bytes:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "id": id_, "method": method}
    if params is not None:
        msg["params"] = params
    return json.dumps(msg).encode()


class RawSession:
    """A streamable-HTTP MCP session driven with plain httpx: every status and byte is visible."""

    def __init__(self, server: HttpServer, token: str) -> None:
        self.server = server
        self.http = httpx.Client(timeout=60)
        self.headers = {"Content-Type": "application/json", "Accept": ACCEPT, "Authorization": f"Bearer {token}"}
        r = self.post(rpc("initialize", {"protocolVersion": PROTOCOL, "capabilities": {},
                                         "clientInfo": {"name": "hostile", "version": "1"}}))
        assert r.status_code == 200, r.text
        self.sid = r.headers["mcp-session-id"]
        self.headers |= {"mcp-session-id": self.sid, "mcp-protocol-version": PROTOCOL}
        assert self.post(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode()
                         ).status_code == 202

    def post(self, body: Any, headers: dict[str, str] | None = None) -> httpx.Response:
        r = self.http.post(self.server.url, content=body, headers={**self.headers, **(headers or {})})
        no_traceback(r.content)
        assert r.status_code < 500, (r.status_code, r.text[:300])
        return r

    @staticmethod
    def messages(r: httpx.Response) -> list[dict[str, Any]]:
        """The JSON-RPC messages of a response (a JSON body or an SSE stream)."""
        if r.headers.get("content-type", "").startswith("text/event-stream"):
            return [json.loads(line[5:]) for line in r.text.splitlines() if line.startswith("data:") and line[5:].strip()]
        return [r.json()] if r.content else []

    def call(self, name: str, args: Any) -> dict[str, Any]:
        [msg] = self.messages(self.post(rpc("tools/call", {"name": name, "arguments": args}, 7)))
        return msg


# ---------------------------------------------------------------------------------------------- A. credentials

def test_http_without_a_valid_credential_is_401_and_reveals_nothing(http_server: HttpServer,
                                                                    world: dict[str, Any]) -> None:
    alice_id = world["ids"][("http", "alice")][0]
    marker = world["markers"][("http", "alice")]
    token = ALICE.encode()
    headers = [
        b"",                                                   # no Authorization at all
        b"Authorization: Bearer not-a-known-token-0123456789\r\n",
        b"Authorization: Bearer " + BOB.encode()[:-1] + b"\r\n",  # one character short of bob's
        b"Authorization: Bearer " + token.upper() + b"\r\n",
        b"Authorization: Bearer\r\n",
        b"Authorization: Bearer \r\n",
        b"Authorization: \r\n",
        b"Authorization: Basic YWxpY2U6c2VjcmV0\r\n",
        b"Authorization: Token " + token + b"\r\n",
        b"Authorization: " + token + b"\r\n",                   # no scheme
        b"Authorization: Bearer  " + token + b"\r\n",           # two spaces
        b"Authorization: Bearer " + token + b" trailing\r\n",
        b"Authorization: Bearer \t" + token + b"\r\n",
        b"Authorization: Bearer " + token + b"," + token + b"\r\n",
        b"Authorization: Bearer \xff\xfe\xfd\r\n",            # not UTF-8
        "Authorization: Bearer ключ-доступа-0123456789\r\n".encode(),
        b"Authorization: Bearer " + b"A" * 60_000 + b"\r\n",  # a 60 kB token
        b"Authorization: Bearer ' OR '1'='1\r\n",
        b"Authorization: Bearer " + token + b"\r\nAuthorization: Bearer " + BOB.encode() + b"\r\n",  # two
        b"Authorization: Bearer " + BOB.encode() + b"\r\nAuthorization: Bearer " + token + b"\r\n",
        b"X-Forwarded-User: alice\r\nX-Memir-User: alice\r\n",  # identity headers mean nothing
    ]
    session = b"mcp-session-id: " + RawSession(http_server, ALICE).sid.encode() + b"\r\n"  # alice's, live
    bodies = [rpc("tools/call", {"name": "explain_memory", "arguments": {"memory_id": alice_id}}),
              rpc("tools/list"),
              rpc("initialize", {"protocolVersion": PROTOCOL, "capabilities": {},
                                 "clientInfo": {"name": "x", "version": "1"}})]
    n = 0
    for head in headers:
        for body, sid in zip(bodies, (session, b"", session)):  # with and without alice's session id
            status, got = raw_http(http_server, head + sid, body)
            assert status == 401, (head[:60], status, got[:200])
            no_traceback(got)
            assert alice_id.encode() not in got and marker.encode() not in got
            assert json.loads(got)["error"] in ("invalid_token", "invalid_request")
            n += 1
        for method in (b"GET", b"DELETE"):
            status, got = raw_http(http_server, head + session, b"", method)
            assert status == 401, (method, head[:60], status)
            n += 1
    # a header the HTTP parser itself refuses (a NUL byte) is a 400 from the server, not a crash
    status, got = raw_http(http_server, b"Authorization: Bearer " + token + b"\x00\r\n", bodies[0])
    assert status == 400 and marker.encode() not in got
    # the SDK's own client without a token, or with a wrong one, cannot even initialize
    for bad in (None, "not-a-known-token-0123456789"):
        async def attempt(bad: str | None = bad) -> None:
            headers = {"Authorization": f"Bearer {bad}"} if bad else {}
            async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
                async with Client(streamable_http_client(http_server.url, http_client=http)) as client:
                    await client.call_tool("list_memories", {})
        with pytest.raises(BaseException):  # noqa: B017 - the SDK wraps the 401 in task-group errors
            anyio.run(attempt)
    assert n == len(headers) * (len(bodies) + 2) == 105
    no_traceback(http_server.log())


def test_bobs_token_never_reads_or_deletes_alices_memories(http_server: HttpServer, world: dict[str, Any]) -> None:
    calls = world["calls"]
    for transport in ("http", "stdio"):
        alice, bob = calls[transport]["alice"], calls[transport]["bob"]
        alice_ids = world["ids"][(transport, "alice")]
        marker = world["markers"][(transport, "alice")]
        others = [bob] + ([calls["http"]["planner"]] if transport == "http" else [])  # alice's other agent too
        for intruder in others:
            for mid in alice_ids:
                for tool, args in (("explain_memory", {"memory_id": mid}),
                                   ("forget", {"memory_id": mid, "reason": "user request"}),
                                   ("forget", {"memory_id": mid, "user_id": "alice"}),
                                   ("explain_memory", {"memory_id": mid, "agent_id": "default"})):
                    msg = tool_error(intruder(tool, args))
                    assert "no memory" in msg or "never by a tool argument" in msg, msg
                    assert marker not in msg
            seen = json.dumps([ok(intruder("recall", {"query": f"vault code {marker}", "k": 20})),
                               ok(intruder("list_memories", {"limit": 100})),
                               ok(intruder("list_memories", {"tier": "archive", "limit": 100})),
                               ok(intruder("recall", {"query": "vault", "tags": ["vault"], "k": 20}))])
            assert marker not in seen and not any(mid in seen for mid in alice_ids)
        # alice's memories are all still there, unchanged
        mine = ok(alice("list_memories", {"limit": 100}))["memories"]
        assert {m["id"] for m in mine} >= set(alice_ids)
        for mid in alice_ids:
            assert ok(alice("explain_memory", {"memory_id": mid}))["memory_id"] == mid

    # bob's valid token on alice's MCP session: refused as if the session did not exist
    alice_raw = RawSession(http_server, ALICE)
    mid = world["ids"][("http", "alice")][0]
    for token in (BOB, ALICE_PLANNER):
        r = alice_raw.post(rpc("tools/call", {"name": "explain_memory", "arguments": {"memory_id": mid}}),
                           {"Authorization": f"Bearer {token}"})
        assert r.status_code == 404 and mid not in r.text, r.text
        r = alice_raw.http.get(http_server.url, headers={**alice_raw.headers, "Authorization": f"Bearer {token}"})
        assert r.status_code == 404
        r = alice_raw.http.delete(http_server.url, headers={**alice_raw.headers, "Authorization": f"Bearer {token}"})
        assert r.status_code == 404
    # ...and the session is still alice's, alive
    assert alice_raw.call("explain_memory", {"memory_id": mid})["result"]["isError"] is False
    no_traceback(http_server.log())


# ---------------------------------------------------------------------------------------------- B. malformed JSON-RPC

MALFORMED: list[tuple[str, bytes]] = [
    ("not json", b"{not json"),
    ("truncated", b'{"jsonrpc": "2.0", "id": 1, "method": "tools/li'),
    ("empty", b""),
    ("whitespace", b"  \n "),
    ("array", b"[1, 2, 3]"),
    ("empty array", b"[]"),
    ("batch of requests", b'[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]'),
    ("string", b'"tools/list"'),
    ("number", b"42"),
    ("null", b"null"),
    ("true", b"true"),
    ("jsonrpc 1.0", rpc("tools/list").replace(b'"2.0"', b'"1.0"')),
    ("jsonrpc number", rpc("tools/list").replace(b'"2.0"', b"2.0")),
    ("no jsonrpc", b'{"id": 1, "method": "tools/list"}'),
    ("no method", b'{"jsonrpc": "2.0", "id": 1}'),
    ("method number", b'{"jsonrpc": "2.0", "id": 1, "method": 5}'),
    ("unknown method", rpc("memories/dump_all")),
    ("sql method", rpc("'; DROP TABLE memories; --")),
    ("id object", b'{"jsonrpc": "2.0", "id": {"a": 1}, "method": "tools/list"}'),
    ("id float", b'{"jsonrpc": "2.0", "id": 1.5, "method": "tools/list"}'),
    ("params string", rpc("tools/call", "remember")),
    ("params list", rpc("tools/call", ["recall", {"query": "x"}])),
    ("params number", rpc("tools/call", 3)),
    ("name missing", rpc("tools/call", {"arguments": {"query": "x"}})),
    ("name number", rpc("tools/call", {"name": 5, "arguments": {}})),
    ("name null", rpc("tools/call", {"name": None})),
    ("arguments list", rpc("tools/call", {"name": "recall", "arguments": ["x"]})),
    ("arguments string", rpc("tools/call", {"name": "recall", "arguments": '{"query": "x"}'})),
    ("arguments number", rpc("tools/call", {"name": "recall", "arguments": 1})),
    ("unknown tool", rpc("tools/call", {"name": "drop_table", "arguments": {}})),
    ("list params string", rpc("tools/list", "all")),
    ("invalid utf-8", b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "x": "\xff\xfe"}'),
    ("lone surrogate", b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "recall", '
                       b'"arguments": {"query": "\\ud800"}}}'),
    ("nul in method", b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list\\u0000"}'),
    ("deep nesting", b"[" * 100_000 + b"]" * 100_000),
    ("deep params", b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "recall", '
                    b'"arguments": {"query": ' + b"[" * 5_000 + b"]" * 5_000 + b"}}}"),
    ("huge integer", b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "list_memories", '
                     b'"arguments": {"limit": ' + b"9" * 5_000 + b"}}}"),
    ("duplicate keys", b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "method": "tools/call"}'),
    ("response not request", b'{"jsonrpc": "2.0", "id": 99, "result": {}}'),
    ("error not request", b'{"jsonrpc": "2.0", "id": 99, "error": {"code": 1, "message": "x"}}'),
]


def _answer_is_an_error_or_nothing(messages: list[dict[str, Any]]) -> None:
    for m in messages:
        assert "result" not in m or m["result"].get("isError") in (True, None), m
        if "error" in m:
            assert isinstance(m["error"]["code"], int) and isinstance(m["error"]["message"], str)


def test_http_malformed_jsonrpc_is_a_clean_error(http_server: HttpServer, world: dict[str, Any]) -> None:
    session = RawSession(http_server, ALICE)
    marker = world["markers"][("http", "bob")]
    n = 0
    for name, body in MALFORMED:
        r = session.post(body)  # no 5xx, no traceback
        assert r.status_code in (200, 202, 400, 404, 406, 415, 422), (name, r.status_code, r.text[:200])
        if r.status_code == 200:
            msgs = session.messages(r)
            _answer_is_an_error_or_nothing(msgs)
            assert name in ("arguments list", "arguments string", "arguments number", "unknown tool", "unknown method",
                            "sql method", "name missing", "name number", "name null", "list params string",
                            "nul in method", "duplicate keys", "id float"), (name, msgs)
        assert marker not in r.text
        n += 1
        # the same bytes outside any session: refused before they reach a server
        r = session.http.post(http_server.url, content=body, headers={
            "Content-Type": "application/json", "Accept": ACCEPT, "Authorization": f"Bearer {ALICE}"})
        no_traceback(r.content)
        assert r.status_code < 500 and marker not in r.text, (name, r.status_code)
        n += 1
    # wrong media types and Accept headers
    for headers in ({"Content-Type": "text/plain"}, {"Content-Type": "application/x-www-form-urlencoded"},
                    {"Accept": "text/html"}, {"Accept": ""}, {"mcp-protocol-version": "1999-01-01"},
                    {"mcp-session-id": "' OR 1=1 --"}, {"mcp-session-id": "0" * 5000}):
        r = session.post(rpc("tools/list"), headers)
        assert 400 <= r.status_code < 500, (headers, r.status_code)
        n += 1
    # the session still works after all of it
    assert session.call("list_memories", {})["result"]["isError"] is False
    assert n == 2 * len(MALFORMED) + 7
    no_traceback(http_server.log())


def test_stdio_malformed_lines_and_a_5_mb_line_leave_the_server_serving(tmp_path: Path) -> None:
    """Raw lines on the server's stdin: every stdout line is a JSON-RPC message, nothing on stderr
    but the banner, and valid requests after the garbage are answered."""
    params = server_params(tmp_path / "agent.sqlite", "--user", "alice", "--create")
    proc = subprocess.Popen([params.command, *params.args], cwd=params.cwd, env=params.env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out: list[bytes] = []
    reader = threading.Thread(target=lambda: out.extend(iter(proc.stdout.readline, b"")), daemon=True)  # type: ignore[union-attr]
    reader.start()
    assert proc.stdin is not None

    def send(line: bytes) -> None:
        proc.stdin.write(line + b"\n")  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]

    def answer(id_: int, timeout: float = 60) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in list(out):
                msg = json.loads(line)
                if isinstance(msg, dict) and msg.get("id") == id_:
                    return msg
            time.sleep(0.02)
        raise AssertionError(f"no answer to request {id_}")

    try:
        send(rpc("initialize", {"protocolVersion": PROTOCOL, "capabilities": {},
                                "clientInfo": {"name": "hostile", "version": "1"}}, 0))
        assert "result" in answer(0)
        send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode())
        lines = [body.replace(b"\n", b" ") for _, body in MALFORMED]
        lines += [b"\x00\x01\x02", b"\xff" * 100, b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}' * 3]
        for i, line in enumerate(lines):
            send(line)
            send(rpc("tools/call", {"name": "list_memories", "arguments": {"limit": 1}}, 1000 + i))  # still alive?
        for i in range(len(lines)):
            assert answer(1000 + i)["result"]["isError"] is False
        # oversized lines: no HTTP layer here, so a 5 MB call is simply served (content excerpted)
        big = "the Oslo trip budget " * (5 * MB // 21)
        send(rpc("tools/call", {"name": "remember", "arguments": {"content": big}}, 2000))
        send(rpc("tools/call", {"name": "recall", "arguments": {"query": big[:MB], "k": 1}}, 2001))
        stored = json.loads(answer(2000, 120)["result"]["content"][0]["text"])
        assert "characters omitted" in stored["content"] and len(stored["content"]) <= 16_000
        assert answer(2001, 120)["result"]["isError"] is False
        for msg in map(json.loads, out):  # every line is a JSON-RPC answer
            assert isinstance(msg, dict) and msg.get("jsonrpc") == "2.0" and ("result" in msg or "error" in msg)
            if msg.get("id") == 1:  # the malformed lines that carried an id were answered with errors
                assert "error" in msg or msg["result"].get("isError") is not False, msg
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        reader.join(timeout=10)
    err = proc.stderr.read() if proc.stderr else b""  # type: ignore[union-attr]
    no_traceback(err, *out)
    assert all(line.startswith(b"{") for line in out)  # stdout carries JSON-RPC and nothing else
    assert len(lines) == len(MALFORMED) + 3


# ---------------------------------------------------------------------------------------------- C. body size

def test_http_bodies_over_the_limit_get_413_before_anything_reads_them(http_server: HttpServer,
                                                                      world: dict[str, Any]) -> None:
    session = RawSession(http_server, ALICE)
    n = 0
    for size in (MB + 1, 5 * MB, 20 * MB):
        body = b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "remember", ' \
               b'"arguments": {"content": "' + b"x" * size + b'"}}}'
        for token in (ALICE, None, "not-a-known-token-0123456789"):
            headers = {**session.headers, "Authorization": f"Bearer {token}"} if token else \
                {k: v for k, v in session.headers.items() if k != "Authorization"}
            r = session.http.post(http_server.url, content=body, headers=headers)
            assert r.status_code == 413, (size, token, r.status_code)
            assert r.headers["content-type"] == "application/json" and len(r.content) < 200
            assert r.json() == {"error": "request_too_large",
                                "message": "the request body is larger than 1048576 bytes"}
            n += 1

        def chunks(body: bytes = body) -> Iterator[bytes]:  # no Content-Length: counted as it arrives
            yield body[:100]
            for i in range(100, len(body), 256 * 1024):
                yield body[i:i + 256 * 1024]

        r = session.http.post(http_server.url, content=chunks(), headers=session.headers)
        assert r.status_code == 413 and r.json()["error"] == "request_too_large"
        n += 1
    # just under the limit: served (remember keeps an excerpt of long content)
    content = "a long note about the Oslo trip " * ((MB - 2000) // 32)
    msg = session.call("remember", {"content": content})
    assert msg["result"]["isError"] is False
    assert n == 12
    no_traceback(http_server.log())


def test_the_body_limit_is_configurable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from runtime import MemoryStore
    from runtime.encoders import HashEmbedder
    from runtime.errors import ValidationError
    from runtime.integrations.mcp_server import DEFAULT_MAX_BODY_BYTES, MemirMCPServer, Tenant

    assert DEFAULT_MAX_BODY_BYTES == MB
    tokens = {ALICE: Tenant("alice")}
    with MemoryStore.open(tmp_path / "agent.sqlite", embedder=HashEmbedder(dim=16)) as store:
        monkeypatch.delenv("MEMIR_MCP_MAX_BODY_BYTES", raising=False)
        assert MemirMCPServer(store, tokens=tokens).max_body_bytes == MB
        monkeypatch.setenv("MEMIR_MCP_MAX_BODY_BYTES", "4096")
        server = MemirMCPServer(store, tokens=tokens)
        assert server.max_body_bytes == 4096
        assert MemirMCPServer(store, tokens=tokens, max_body_bytes=2048).max_body_bytes == 2048  # argument wins
        for bad in ("0", "-5", "1e6", "lots", "²"):
            monkeypatch.setenv("MEMIR_MCP_MAX_BODY_BYTES", bad)
            with pytest.raises(ValidationError, match="MEMIR_MCP_MAX_BODY_BYTES"):
                MemirMCPServer(store, tokens=tokens)
        monkeypatch.delenv("MEMIR_MCP_MAX_BODY_BYTES")
        for bad_arg in (0, -1, True, 1.5, "100"):
            with pytest.raises(ValidationError, match="max_body_bytes"):
                MemirMCPServer(store, tokens=tokens, max_body_bytes=bad_arg)  # type: ignore[arg-type]

        async def go() -> None:
            # the guard answers before the SDK's app (its session manager is not even running)
            app = MemirMCPServer(store, tokens=tokens, max_body_bytes=4096).http_app()
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8765") as c:
                h = {"Content-Type": "application/json", "Accept": ACCEPT}
                r = await c.post("/mcp", content=b"x" * 4097, headers={**h, "Authorization": f"Bearer {ALICE}"})
                assert r.status_code == 413 and r.json()["message"].endswith("4096 bytes")
                r = await c.post("/mcp", content=b"x" * 4096, headers=h)  # at the limit: on to authentication
                assert r.status_code == 401
                r = await c.post("/mcp", content=b"{}", headers=[*h.items(), ("Authorization", f"Bearer {ALICE}"),
                                                                ("Authorization", f"Bearer {ALICE}")])
                assert r.status_code == 401 and r.json()["error"] == "invalid_request"

        anyio.run(go)


# ---------------------------------------------------------------------------------------------- D. hostile arguments

def _hostile_strings(world: dict[str, Any], transport: str) -> st.SearchStrategy[str]:
    theirs = world["ids"][(transport, "bob")] + [world["markers"][(transport, "bob")]]
    mine = world["ids"][(transport, "alice")]
    return st.one_of(st.sampled_from(SQL_META), st.sampled_from(theirs), st.sampled_from(mine),
                     st.text(max_size=40), st.text(alphabet="'\"%_\\;$-()*/ \x00", max_size=20),
                     st.builds(lambda a, b: a + b, st.sampled_from(mine + theirs), st.sampled_from(SQL_META)))


def _values(strings: st.SearchStrategy[str]) -> st.SearchStrategy[Any]:
    scalars = st.one_of(strings, st.none(), st.booleans(), st.integers(-2**70, 2**70),
                        st.floats(allow_nan=False, allow_infinity=False),
                        st.sampled_from([0, 1, 20, 21, 100, 101, 100000, 100001, -1, 0.5, 1.0000001, 1e308, -0.0]),
                        st.sampled_from(["2025-05-03T09:00:00Z", "0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-14:00",
                                         "2025-13-45", "yesterday", "2025-05-03", "direct_interaction", "archive",
                                         "working", "any"]))
    return st.recursive(scalars, lambda inner: st.lists(inner, max_size=20) | st.dictionaries(strings, inner, max_size=3),
                        max_leaves=25)


def _shaped(schema: dict[str, Any], strings: st.SearchStrategy[str]) -> st.SearchStrategy[Any]:
    """Values of the schema's type (so they get past argument checks), hostile in content."""
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    kind = schema.get("type")
    if kind == "integer":
        return st.integers(schema.get("minimum", -10), schema.get("maximum", 10))
    if kind == "number":
        return st.floats(schema.get("minimum", -1), schema.get("maximum", 1))
    if kind == "boolean":
        return st.booleans()
    if kind == "array":
        return st.lists(_shaped(schema["items"], strings), max_size=schema.get("maxItems", 4))
    if schema.get("format") == "date-time":
        return st.sampled_from(["2025-05-03T09:00:00Z", "0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-14:00",
                                "2025-05-03", "2025-05-03T09:00:00.123456+05:30"])
    return strings.filter(lambda x: len(x) <= schema.get("maxLength", 10**6))


@st.composite
def _calls(draw: st.DrawFn, world: dict[str, Any], transport: str) -> tuple[str, dict[str, Any]]:
    strings = _hostile_strings(world, transport)
    name = draw(st.sampled_from([t.name for t in TOOLS]))
    schema = TOOLS_BY_NAME[name].parameters
    props = schema["properties"]
    if draw(st.booleans()):  # shaped: the schema's keys and types, hostile text inside
        args = {k: draw(_shaped(props[k], strings)) for k in schema.get("required", ())}
        for key in draw(st.lists(st.sampled_from(list(props)), max_size=len(props), unique=True)):
            args[key] = draw(_shaped(props[key], strings))
    else:  # chaos: any keys, any JSON
        keys = st.one_of(st.sampled_from(list(props)), st.sampled_from(
            ["user_id", "agent_id", "__proto__", "", "query\x00", "memory_id ", "tenant"]), strings)
        args = draw(st.dictionaries(keys, _values(strings), max_size=5))
        for key in draw(st.lists(st.sampled_from(list(props)), max_size=len(props), unique=True)):
            args.setdefault(key, draw(_values(strings)))
    if name in ("forget", "explain_memory") and draw(st.booleans()):  # often aim straight at bob's ids
        args["memory_id"] = draw(st.sampled_from(world["ids"][(transport, "bob")]))
    return name, args


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_hostile_tool_arguments_are_typed_errors_and_never_cross_users(transport: str, world: dict[str, Any],
                                                                        http_server: HttpServer) -> None:
    alice = world["calls"][transport]["alice"]
    bob = world["calls"][transport]["bob"]
    bob_ids = world["ids"][(transport, "bob")]
    bob_marker = world["markers"][(transport, "bob")]
    seen = {"ok": 0, "error": 0}
    sent: list[str] = []  # every argument alice's client sent, as JSON

    @settings(max_examples=100, deadline=None, database=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(call=_calls(world, transport))
    # dates that overflow once converted to UTC, a NUL in a forget reason, SQL in every filter
    @example(call=("remember", {"content": "x", "expires_at": "0001-01-01T00:00:00+01:00"}))
    @example(call=("remember", {"content": "x", "expires_at": "9999-12-31T23:59:59-14:00"}))
    @example(call=("forget", {"memory_id": bob_ids[0], "reason": "a\x00b"}))
    @example(call=("forget", {"memory_id": world["ids"][(transport, "alice")][2], "reason": "gone\x00"}))
    @example(call=("recall", {"query": "vault", "tags": [") OR 1=1 --"], "sub_roles": ["'; DROP TABLE x; --"]}))
    @example(call=("list_memories", {"tags": ["%", "_", "\\"], "tier": "archive"}))
    @example(call=("remember", {"content": bob_ids[0], "session_id": "'; DROP TABLE memories; --"}))
    def check(call: tuple[str, dict[str, Any]]) -> None:
        name, args = call
        sent.append(json.dumps(args, ensure_ascii=False))
        result = alice(name, args)
        text = result.content[0].text
        # bob's content and ids never come back — unless alice sent them herself (now or earlier,
        # e.g. remembered a note holding one of his ids)
        for secret in [bob_marker, *bob_ids]:
            assert secret not in text or any(secret in x for x in sent), (secret, text[:300])
        if result.is_error:
            msg = tool_error(result)
            target = args.get("memory_id")
            if target in bob_ids and name in ("forget", "explain_memory"):
                # bob's id answers exactly as an id that exists nowhere: no oracle either way
                fake = f"mem_{uuid.uuid4().hex}"
                twin = tool_error(alice(name, {**args, "memory_id": fake}))
                assert msg.replace(target, "<id>") == twin.replace(fake, "<id>").replace(target, "<id>"), (msg, twin)
            seen["error"] += 1
        else:
            ok(result)
            seen["ok"] += 1

    check()
    assert seen["ok"] + seen["error"] >= 100 and seen["error"] > 0 and seen["ok"] > 0
    # every one of bob's memories is still there, untouched
    assert {m["id"] for m in ok(bob("list_memories", {"limit": 100}))["memories"]} >= set(bob_ids)
    for mid in bob_ids:
        assert ok(bob("explain_memory", {"memory_id": mid}))["state"] != "deleted"
    no_traceback(http_server.log())
