"""`memir mcp serve` with the MCP SDK's own client: over stdio (the server is spawned as a
subprocess, as a desktop client would) list the tools, call each one, and confirm that a second
server for another user on the same file cannot reach the first user's memories; over streamable
HTTP, the bearer token chooses the user and a request without a known one is refused.

The servers use the real default encoder (the CLI has no test encoder); it loads in about a second.

The recall round trip is measured by bench/bench_integrations.py's :func:`recall_round_trips` (tested here).
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp")
httpx2 = pytest.importorskip("httpx2")  # the MCP SDK's HTTP client

from mcp import Client  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402

from runtime.cli import EXIT, main  # noqa: E402
from runtime.integrations.tools import TOOLS  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
from bench_integrations import recall_round_trips, server_params  # noqa: E402  (the benchmark's own client code)

ALICE_TOKEN = "alice-0123456789abcdef-token"
BOB_TOKEN = "bob-0123456789abcdef-token00"


@pytest.fixture(autouse=True)
def _needs_encoder() -> None:
    from runtime.encoders import load_default_embedder
    from runtime.errors import EncoderUnavailableError

    try:
        load_default_embedder()
    except EncoderUnavailableError:
        pytest.skip("the ONNX encoder is not exported here (make encoder)")


def _ok(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    assert json.loads(result.content[0].text) == result.structured_content  # text and structured agree
    out: dict[str, Any] = result.structured_content
    return out


def _err(result: Any) -> str:
    assert result.is_error
    text: str = result.content[0].text
    assert "\n" not in text and "Traceback" not in text
    return text


def test_stdio_lists_calls_every_tool_and_keeps_users_apart(tmp_path: Path) -> None:
    db = tmp_path / "agent.sqlite"

    async def go() -> None:
        async with Client(stdio_client(server_params(db, "--user", "alice", "--create", "--capacity", "3"))) as alice:
            listed = (await alice.list_tools()).tools
            assert [t.name for t in listed] == [t.name for t in TOOLS]
            for got, spec in zip(listed, TOOLS, strict=True):
                assert got.input_schema == spec.parameters and got.description == spec.description
                assert got.annotations is not None and got.annotations.read_only_hint == spec.read_only
                assert "user_id" not in got.input_schema["properties"]

            first = _ok(await alice.call_tool("remember", {
                "content": "Alice's flight to Oslo is on 3 May; reach her at alice@example.com",
                "tags": ["travel"], "source_type": "direct_interaction"}))
            assert "alice@example.com" not in first["content"] and first["sensitivity"] == "pii"
            ids = [first["id"]] + [_ok(await alice.call_tool("remember", {"content": c}))["id"] for c in (
                "The Orion budget is 40k EUR", "Alice prefers aisle seats", "Standup moved to 9:30")]

            hits = _ok(await alice.call_tool("recall", {"query": "When does Alice fly to Oslo?", "k": 2}))
            assert hits["hits"][0]["id"] == first["id"] and "Content: Alice's flight" in hits["context"]
            assert [m["id"] for m in _ok(await alice.call_tool("list_memories", {}))["memories"]] == ids

            decision = _ok(await alice.call_tool("retain_now", {}))  # the server's --capacity 3
            assert (decision["kept"], decision["archived"]) == (3, 1) and "capacity 3" in decision["summary"]
            explained = _ok(await alice.call_tool("explain_memory", {"memory_id": first["id"]}))
            assert explained["decisions"][-1]["decision_id"] == decision["decision_id"]

            # mistakes come back as one-line tool errors the model can read
            assert "never by a tool argument" in _err(await alice.call_tool("recall", {"query": "x",
                                                                                       "user_id": "bob"}))
            assert "k" in _err(await alice.call_tool("recall", {"query": "x", "k": 99}))
            with pytest.raises(MCPError, match="unknown tool"):
                await alice.call_tool("drop_table", {})

            # a second server, for bob, on the same file: alice's ids do not exist for him
            async with Client(stdio_client(server_params(db, "--user", "bob"))) as bob:
                assert _ok(await bob.call_tool("recall", {"query": "When does Alice fly to Oslo?"}))["hits"] == []
                assert _ok(await bob.call_tool("list_memories", {"tier": "archive"}))["memories"] == []
                for tool in ("explain_memory", "forget"):
                    assert "no memory" in _err(await bob.call_tool(tool, {"memory_id": first["id"]}))
                assert "never by a tool argument" in _err(await bob.call_tool(
                    "list_memories", {"user_id": "alice"}))
                _ok(await bob.call_tool("remember", {"content": "Bob's flight to Oslo is on 9 June"}))

            gone = _ok(await alice.call_tool("forget", {"memory_id": first["id"], "reason": "user request"}))
            assert gone["deleted"] == [first["id"]]
            after = _ok(await alice.call_tool("recall", {"query": "When does Alice fly to Oslo?", "k": 5}))
            assert first["id"] not in [h["id"] for h in after["hits"]]
            assert not any("Bob" in h["content"] for h in after["hits"])  # bob's memory is his

    anyio.run(go)


def _start_http(tmp_path: Path) -> tuple[subprocess.Popen[bytes], str, Path]:
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({ALICE_TOKEN: {"user_id": "alice"},
                                  BOB_TOKEN: {"user_id": "bob", "agent_id": "default"}}))
    err = tmp_path / "server.err"
    cmd = [sys.executable, "-m", "runtime.cli", "mcp", "serve", str(tmp_path / "agent.sqlite"), "--create",
           "--transport", "http", "--tokens", str(tokens), "--port", "0"]
    with err.open("wb") as f:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=f)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        m = re.search(r"on (http://\S+/mcp)", err.read_text())
        if m:
            return proc, m.group(1), err
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    proc.kill()
    raise AssertionError(f"the server did not start: {err.read_text()}")


async def _as(url: str, token: str | None, calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
        async with Client(streamable_http_client(url, http_client=http)) as client:
            return [await client.call_tool(name, args) for name, args in calls]


def _status(url: str, token: str | None) -> int:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}).encode()
    req = urllib.request.Request(url, data=body, method="POST", headers={
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
        **({"Authorization": f"Bearer {token}"} if token else {})})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return int(r.status)
    except urllib.error.HTTPError as e:
        return e.code


def test_http_bearer_token_chooses_the_user_and_no_token_is_refused(tmp_path: Path) -> None:
    proc, url, err = _start_http(tmp_path)
    try:
        [mine] = anyio.run(_as, url, ALICE_TOKEN, [("remember", {"content": "Alice's locker code is 2231"})])
        mid = _ok(mine)["id"]
        seen = anyio.run(_as, url, ALICE_TOKEN, [("recall", {"query": "locker code"})])
        assert [h["id"] for h in _ok(seen[0])["hits"]] == [mid]

        recall, explain, listed = anyio.run(_as, url, BOB_TOKEN, [
            ("recall", {"query": "locker code"}), ("explain_memory", {"memory_id": mid}),
            ("list_memories", {})])
        assert _ok(recall)["hits"] == [] and _ok(listed)["memories"] == []
        assert "no memory" in _err(explain)

        for token in (None, "not-a-known-token-0123456789"):
            assert _status(url, token) == 401
            with pytest.raises(BaseException):  # noqa: B017 - the SDK wraps the 401 in task-group errors
                anyio.run(_as, url, token, [("list_memories", {})])
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    assert "Traceback" not in err.read_text()


def test_recall_round_trips_measures_one_connection(tmp_path: Path) -> None:
    from runtime import MemoryStore

    db = tmp_path / "agent.sqlite"
    with MemoryStore.open(db) as store:
        store.scope(user_id="alice").write_many([f"note {i} about the Oslo trip" for i in range(20)])
    times = anyio.run(recall_round_trips, db, ["Oslo trip", "note 3", "budget"])
    print(f"\nMCP recall over stdio: {[round(t * 1000, 2) for t in times]} ms")
    assert len(times) == 3 and all(0 < t < 10 for t in times)


def test_cli_refuses_a_bad_serve_command_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "agent.sqlite"
    cases = [
        (["mcp", "serve", str(db), "--user", "alice"], EXIT["missing"], "no store at"),
        (["mcp", "serve", str(db), "--create"], EXIT["usage"], "no user to serve"),
        (["mcp", "serve", str(db), "--user", "a", "--tokens", "t.json"], EXIT["usage"], "--transport http"),
        (["mcp", "serve", str(db), "--transport", "http", "--tokens", str(tmp_path / "t.json")], EXIT["missing"],
         "no tokens file"),
        (["mcp", "serve", str(db), "--user", "alice bob", "--create"], EXIT["invalid"], "user_id must be an id"),
    ]
    for argv, code, words in cases:
        assert main(argv) == code, argv
        err = capsys.readouterr().err
        assert err.startswith("memir: ") and words in err and err.count("\n") == 1, err
    assert not db.exists()  # nothing was created by a refused command
    short = tmp_path / "short.json"
    short.write_text(json.dumps({"s3cr3t": {"user_id": "alice"}}))
    assert main(["mcp", "serve", str(db), "--transport", "http", "--tokens", str(short)]) == EXIT["invalid"]
    err = capsys.readouterr().err
    assert "tokens[0]" in err and "at least 16 characters" in err and "s3cr3t" not in err  # never echoed


def test_missing_mcp_package_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "mcp", None)  # what `import mcp` sees when it is not installed
    monkeypatch.delitem(sys.modules, "runtime.integrations.mcp_server", raising=False)
    assert main(["mcp", "serve", str(tmp_path / "agent.sqlite"), "--user", "alice", "--create"]) == EXIT["environment"]
    assert "pip install 'memir-runtime[integrations]'" in capsys.readouterr().err
