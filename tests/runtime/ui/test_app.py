"""The inspector's pages over a store built through the public API, on both backends: what each page
shows is what the API answers; another user's memory never appears; nothing is written; the guards
(read-only, host, token) hold; bad input is a 400 naming the field."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from html import unescape
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from runtime import MemoryStore
from runtime.encoders import HashEmbedder
from runtime.store import format_context
from runtime.ui import COOKIE, MASK, Inspector, ScopeKey, UiSettings, create_app
from tests.runtime.ui.demo import OTHER_USER_TEXT, SECRET, build

EMB = HashEmbedder(dim=384)  # the shipped model reads 384-d vectors (meaningless here, but real)


@pytest.fixture
def demo(store_target: Any) -> Iterator[tuple[Any, MemoryStore]]:
    d = build(store_target("ui.sqlite"), EMB)
    with MemoryStore.open(d.target, embedder=EMB, create=False) as store:
        yield d, store


def client(store: MemoryStore, *, admin: bool = False, settings: UiSettings | None = None,
           quarantine: Path | None = None) -> TestClient:
    inspector = Inspector(store, None if admin else ScopeKey("alice"), admin=admin, quarantine=quarantine)
    return TestClient(create_app(inspector, settings), base_url="http://127.0.0.1:8765")


def text(html: str) -> str:
    return unescape(re.sub(r"<[^>]+>", " ", html))


def crawl(c: TestClient, start: str = "/memories", limit: int = 400) -> dict[str, str]:
    """Every page reachable by links from ``start`` (the way a person clicking around would see them)."""
    seen: dict[str, str] = {}
    todo = [start, "/decisions", "/time-travel", "/recall?q=peanut+allergy", "/health", "/time-travel?i=0&q=budget"]
    while todo and len(seen) < limit:
        url = todo.pop()
        if url in seen or url.startswith("/static"):
            continue
        r = c.get(url)
        assert r.status_code in (200, 303, 404), (url, r.status_code)
        seen[url] = r.text
        for href in re.findall(r'href="([^"#]+)"', r.text):
            href = unescape(href)
            if href.startswith("/") and href not in seen and not href.startswith(("/static", "/favicon")):
                todo.append(href)
    return seen


def state(store: MemoryStore, user: str = "alice") -> Any:
    scope = store.scope(user_id=user)
    return ([(r.id, r.usage.access_count, r.usage.last_accessed_at) for r in scope.list(tier="any")],
            [d.decision_id for d in scope.decisions(100)], scope.recall_log(100))


def test_every_page_renders_what_the_api_answers(demo: Any) -> None:
    d, store = demo
    c = client(store)
    scope = store.scope(user_id="alice")
    page = c.get("/memories?tier=any")
    assert page.status_code == 200
    for rec in scope.list(tier="any"):
        assert f'data-id="{rec.id}"' in page.text
    assert scope.count(tier="archive") > 0 and "tier-archive" in page.text
    # one decision: its items with the API's actions and utilities, and the cut in the histogram
    dec = scope.decisions(10)[-1]
    full = scope.decision(dec.decision_id)
    r = c.get(f"/decision/{dec.decision_id}")
    assert r.status_code == 200
    rows = re.findall(r'<tr class="item act-(\w+)" data-id="([^"]+)"', r.text)
    assert {mid: act for act, mid in rows} == {mid: it.action for mid, it in full.items.items()}
    assert 'id="cut-line"' in r.text and 'id="utility-histogram"' in r.text
    # explain: the same summary as scope.explain
    mid = next(iter(full.items))
    assert scope.explain(mid).summary in unescape(c.get(f"/explain/{mid}").text)
    # a memory: provenance, lineage and corrections
    m = c.get(f"/memory/{d.ids['derived']}").text
    assert d.turns[0] in m and "derived_inference" in m
    v = text(c.get(f"/memory/{d.ids['budget v2']}").text)
    assert "12k EUR" in v and "15k EUR" in v  # the correction chain
    # time travel: the working set after each decision is memories_at's
    decisions = list(reversed(scope.decisions(100)))
    for i, past in enumerate(decisions):
        tt = c.get(f"/time-travel?i={i}").text
        shown = re.findall(r'<tr data-id="([^"]+)"', tt)
        assert shown == [w.memory_id for w in scope.memories_at(past.decision_id).working]
    # recall: the API's hits, in order, and format_context's block
    hits = scope.recall("peanut allergy", k=3, update_usage=False)
    rr = c.get("/recall?q=peanut+allergy&k=3").text
    assert re.findall(r'<tr class="hit" data-id="([^"]+)"', rr) == [h.record.id for h in hits]
    block = re.search(r'<pre id="prompt-block">(.*?)</pre>', rr, re.S)
    assert block is not None and unescape(block.group(1)) == format_context(hits)
    # health: tier sizes are the scope's counts
    hh = text(c.get("/health").text)
    for tier in ("working", "archive"):
        assert re.search(rf"{tier}\s+{scope.count(tier=tier)}\b", hh)  # type: ignore[arg-type]


def test_another_users_memory_is_never_rendered_and_unreachable(demo: Any) -> None:
    d, store = demo
    c = client(store)
    pages = crawl(c)
    assert len(pages) > 15
    bob = store.scope(user_id="bob")
    bob_ids = [r.id for r in bob.list(tier="any")]
    bob_decisions = [x.decision_id for x in bob.decisions(10)]
    for url, html in pages.items():
        assert "BLUEHERON" not in html and OTHER_USER_TEXT not in unescape(html), url
        assert not any(i in html for i in bob_ids + bob_decisions), url
        assert SECRET not in html and "[API_KEY]" not in html, url  # secrets masked everywhere
    for path in [f"/memory/{bob_ids[0]}", f"/explain/{bob_ids[0]}", f"/decision/{bob_decisions[0]}",
                 "/memories?user=bob", "/recall?q=launch&user=bob", "/users"]:
        assert c.get(path).status_code == 404, path
    assert MASK in c.get("/memories?tier=any").text


def test_the_inspector_writes_nothing(demo: Any) -> None:
    _, store = demo
    before = state(store)
    c = client(store, admin=True)
    crawl(c, "/memories?user=alice&agent=default")
    assert c.get("/recall?user=alice&q=offsite&k=5").status_code == 200
    assert state(store) == before


def test_admin_mode_lists_every_user_and_shows_any(demo: Any) -> None:
    _, store = demo
    c = client(store, admin=True)
    assert c.get("/", follow_redirects=False).headers["location"] == "/users"
    users = c.get("/users").text
    assert "alice" in users and "bob" in users
    assert "BLUEHERON" in c.get("/memories?user=bob&agent=default").text
    assert c.get("/memories?user=carol").status_code == 404
    health = text(c.get("/health?user=alice").text)
    assert "vector formats" in health and "Pending scrubs:" in health
    stats = store.admin_stats()
    if "dead_rows" in stats:  # PostgreSQL: old row versions (updates, deletes) wait for VACUUM FULL
        assert stats["scrub_pending"] == (stats["dead_rows"] > 0)
    else:  # SQLite: nothing was forgotten with a reader holding the WAL
        assert stats["scrub_pending"] is False and "none" in health.split("Pending scrubs:")[1][:30]


def test_guards_read_only_host_token_and_headers(demo: Any) -> None:
    _, store = demo
    c = client(store)
    r = c.get("/memories")
    assert "script-src 'self'" in r.headers["content-security-policy"]
    assert r.headers["x-frame-options"] == "DENY" and r.headers["referrer-policy"] == "no-referrer"
    for method in ("post", "put", "delete", "patch"):
        assert getattr(c, method)("/memories").status_code == 405
    evil = TestClient(create_app(Inspector(store, ScopeKey("alice"))), base_url="http://evil.example:8765")
    assert evil.get("/memories").status_code == 403  # DNS rebinding: a foreign Host on a loopback bind
    with pytest.raises(Exception, match="token"):
        create_app(Inspector(store, ScopeKey("alice")), UiSettings(host="0.0.0.0"))
    t = TestClient(create_app(Inspector(store, ScopeKey("alice")), UiSettings(host="0.0.0.0", token="s3cret-token")),
                   base_url="http://inspector.internal:8765")
    assert t.get("/memories").status_code == 401
    assert t.get("/memories", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert t.get("/memories", headers={"Authorization": "Bearer s3cret-token"}).status_code == 200
    first = t.get("/memories?token=s3cret-token&tier=any", follow_redirects=False)
    assert first.status_code == 303 and first.headers["location"] == "/memories?tier=any"
    assert COOKIE in first.headers["set-cookie"] and "httponly" in first.headers["set-cookie"].lower()
    assert t.get("/memories").status_code == 200  # the cookie now
    t.cookies.clear()
    assert t.get("/memories?token=nope").status_code == 401


def test_bad_input_is_a_400_that_names_the_field(demo: Any) -> None:
    _, store = demo
    c = client(store)
    for url, field in (("/time-travel?i=abc", "i="), ("/time-travel?i=99", "decision index"),
                       ("/recall?q=x&k=0", "k must be"), ("/memories?since=yesterday", "since="),
                       ("/memories?tier=cold", "tier must be")):
        r = c.get(url)
        assert r.status_code == 400 and field in unescape(r.text), url
    assert c.get("/memory/not a valid id!").status_code in (400, 404)
    assert c.get("/nowhere").status_code == 404


def test_health_lists_quarantine_errors_but_never_the_rejected_records(demo: Any, tmp_path: Path) -> None:
    _, store = demo
    q = tmp_path / "scored.quarantine.jsonl"
    rows = [{"line": 3, "error": "content: must not be empty", "record": '{"content": ""}'},
            {"line": 9, "error": f"metadata.confidence: 7 is not in [0, 1] (key {SECRET})",
             "record": json.dumps({"content": f"token {SECRET}"})}]
    q.write_text("\n".join(json.dumps(r) for r in rows) + "\nnot json\n")
    html = client(store, quarantine=q).get("/health").text
    assert "3 records quarantined" in text(html) and "must not be empty" in html
    assert SECRET not in html and "[API_KEY]" in html  # the reason is redacted; the record is never shown


@pytest.mark.sqlite_only
def test_the_command_refuses_what_it_cannot_serve(demo: Any, capsys: pytest.CaptureFixture[str],
                                                   tmp_path: Path) -> None:
    from runtime.cli import main

    d, _ = demo
    db = str(d.target)
    for argv, code, said in ((["ui", db], 2, "no user to show"),
                             (["ui", db, "--user", "alice", "--admin"], 2, "--admin shows every user"),
                             (["ui", db, "--user", "carol"], 5, "no user 'carol'"),
                             (["ui", db, "--user", "alice", "--quarantine", str(tmp_path / "none.jsonl")], 3,
                              "no quarantine file"),
                             (["ui", str(tmp_path / "missing.sqlite"), "--user", "alice"], 3, "no store at")):
        assert main(argv) == code, argv
        err = capsys.readouterr().err
        assert said in err and "Traceback" not in err, err


@pytest.mark.sqlite_only
def test_bound_elsewhere_it_makes_a_token_keeps_it_private_and_requires_it(demo: Any, tmp_path: Path) -> None:
    import os
    import subprocess
    import sys
    import urllib.error
    import urllib.request

    d, _ = demo
    home = tmp_path / "home"
    env = {**os.environ, "HOME": str(home)}
    env.pop("MEMIR_UI_TOKEN", None)
    proc = subprocess.Popen([sys.executable, "-m", "runtime.cli", "ui", str(d.target), "--user", "alice",
                             "--host", "127.0.0.2", "--port", "0"], stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = proc.stderr.readline() if proc.stderr else ""
        token_file = home / ".config" / "memir" / "ui-token"
        token = token_file.read_text().strip()
        assert len(token) >= 40 and token not in line and "?token=" not in line  # stderr is not a terminal
        assert oct(token_file.stat().st_mode & 0o777) == "0o600" and str(token_file) in line
        m = re.search(r"on (http://\S+)/", line)
        assert m, line
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(m.group(1) + "/memories", timeout=10)
        assert refused.value.code == 401
        ok = urllib.request.urlopen(urllib.request.Request(m.group(1) + "/memories",
                                                           headers={"Authorization": f"Bearer {token}"}), timeout=10)
        assert ok.status == 200
    finally:
        proc.terminate()
        proc.wait(timeout=20)
