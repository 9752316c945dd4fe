"""No read path crosses users — every public read of a scope, and every CLI command given
``--user``: generated two-user stores, with each user's content, tags, ids, session ids and
decision ids carrying a marker; nothing that alice's scope (or ``--user alice``) returns may
contain bob's marker or any of bob's ids, and every call naming bob's ids fails typed, changing
nothing of bob's."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import runtime.cli as cli
from runtime import MemoryStore
from runtime.encoders import HashEmbedder
from runtime.errors import MemirError, NotFoundError
from runtime.scoring import make_baseline
from tests.runtime.test_cli import _tiny_model

WORDS = ["budget", "hotel", "flight", "refund", "password", "meeting", "invoice", "doctor", "order", "visa"]


def _text(x: Any) -> str:
    return json.dumps(x, default=lambda o: o.model_dump(mode="json") if hasattr(o, "model_dump") else repr(o))


def _populate(store: MemoryStore, user: str, marker: str, words: list[str], n: int) -> dict[str, Any]:
    s = store.scope(user_id=user, agent_id="a")
    ids = []
    for i in range(n):
        w = words[i % len(words)]
        r = s.write(f"{marker} note {i} about the {w}", tags=[f"{marker}-tag", w], session_id=f"{marker}-s{i % 3}",
                    attributes={"fact_key": w, "owner": marker})
        ids.append(r.id)
    s.recall(f"the {words[0]}", k=3, explain=True)
    upd = s.update(ids[0], f"{marker} corrected note about the {words[0]}")
    d = s.retain(max(1, n // 2), scorer=make_baseline("recency"))
    return {"scope": s, "ids": ids + [upd.id], "decision": d.decision_id}


def _reads(s: Any, words: list[str]) -> list[Any]:
    """Every public read of a scope, with a spread of filters."""
    out: list[Any] = []
    for tier in ("working", "archive", "any"):
        out += [s.list(tier=tier, include_expired=True), s.count(tier=tier)]
        recs, vecs, steps = s.list_with_vectors(tier=tier)
        out += [recs, steps.tolist()]
    for w in words[:4]:
        out += [s.recall(w, k=20, tier="any", update_usage=False), s.recall(w, k=5, tags=[w], explain=True),
                s.list(tags=[w]), s.list(sessions=[f"{w}-s0"])]
    out += [s.recall(np.ones(64, np.float32), k=50, tier="any")]
    out += [s.recall_log(50), s.decisions(50), [(r, None if v is None else v.shape, e) for r, v, e in s.export_rows()]]
    for r in s.list(tier="any"):
        out += [s.get(r.id), s.explain(r.id), s.history(r.id)]
    for d in s.decisions(50):
        out += [s.decision(d.decision_id), s.state_at(d.decision_id), s.memories_at(d.decision_id)]
    out += [s.refresh(older_than_days=0, dry_run=True), s.recall(words[0], k=5, session_mix=0.3)]
    return out


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n_a=st.integers(1, 12), n_b=st.integers(1, 12), words=st.permutations(WORDS))
def test_no_public_read_returns_another_users_memory(store_target: Any, n_a: int, n_b: int,
                                                     words: list[str]) -> None:
    path = store_target(f"iso-{uuid.uuid4().hex}.sqlite")  # a fresh store per example
    store = MemoryStore.open(path, embedder=HashEmbedder(dim=64, seed=0))
    a = _populate(store, "alice", "ALPHAMARK", list(words), n_a)
    b = _populate(store, "bob", "BRAVOMARK", list(words), n_b)
    s = a["scope"]
    seen = _text(_reads(s, list(words)))
    assert "BRAVOMARK" not in seen
    assert not any(i in seen for i in b["ids"]) and b["decision"] not in seen
    # naming bob's ids from alice's scope: typed NotFound, nothing of bob's changes
    before = store.scope(user_id="bob", agent_id="a").count(tier="any")
    assert s.exists(b["ids"]) == set()
    assert np.isnan(s.session_context(b["ids"])).all()
    for bad in b["ids"][:3] + [b["decision"]]:
        for call in (s.get, s.explain, s.history, s.decision, s.state_at, s.memories_at,
                     lambda i: s.forget(i, cascade="delete"), lambda i: s.update(i, "hijack")):
            with pytest.raises(NotFoundError):
                call(bad)
    with pytest.raises(MemirError):
        s.write("derived from bob", source_type="derived_inference", derived_from=[b["ids"][0]])
    assert store.scope(user_id="bob", agent_id="a").count(tier="any") == before
    store.close()


@pytest.fixture
def cli_store(store_target: Any, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, dict[str, Any], dict[str, Any]]:
    monkeypatch.setattr(cli, "_open_store", lambda path, create, config=None: MemoryStore.open(
        path, embedder=HashEmbedder(dim=64, seed=0), create=create))
    path = store_target("m.sqlite")
    store = MemoryStore.open(path, embedder=HashEmbedder(dim=64, seed=0))
    a = _populate(store, "alice", "ALPHAMARK", WORDS, 8)
    b = _populate(store, "bob", "BRAVOMARK", WORDS, 8)
    store.close()
    return path, a, b


def test_no_cli_command_given_a_user_shows_another_users_data(cli_store: Any, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    path, a, b = cli_store
    db = str(path)
    out_file = tmp_path / "alice.jsonl"
    runs = [
        ["snapshot", db, "--user", "alice", "--agent", "a", "-o", str(out_file)],
        ["retain", db, "--user", "alice", "--agent", "a", "--capacity", "2", "--dry-run", "--json", "--verbose",
         "--model", str(_tiny_model(tmp_path))],
        ["explain", db, a["ids"][1], "--user", "alice", "--agent", "a", "--json", "--verbose"],
        ["explain", db, a["decision"], "--user", "alice", "--agent", "a", "--json"],
        ["refresh", db, "--user", "alice", "--agent", "a", "--older-than", "0", "--json", "--verbose"],
        ["types", "discover", db, "--user", "alice", "--agent", "a", "--min-cluster-size", "2", "--json"],
        ["types", "discover", db, "--user", "alice", "--agent", "a", "--min-cluster-size", "2", "--verbose"],
    ]
    for argv in runs:
        code = cli.main(argv)
        out = capsys.readouterr()
        assert code == 0, (argv, out.err)
        text = out.out + out.err + (out_file.read_text() if out_file.exists() else "")
        assert "BRAVOMARK" not in text and not any(i in text for i in b["ids"]) and b["decision"] not in text, argv
    # bob's ids through --user alice, and users that are not exactly a known one: an error, no output
    for argv in (["explain", db, b["ids"][1], "--user", "alice", "--agent", "a"],
                 ["explain", db, b["decision"], "--user", "alice", "--agent", "a"],
                 ["snapshot", db, "--user", "", "--agent", "a", "-o", str(tmp_path / "x.jsonl")],
                 ["snapshot", db, "--user", " ", "--agent", "a", "-o", str(tmp_path / "x.jsonl")],
                 ["snapshot", db, "--user", "%", "--agent", "a", "-o", str(tmp_path / "x.jsonl")],
                 ["snapshot", db, "-o", str(tmp_path / "x.jsonl")],
                 ["retain", db, "--user", "", "--agent", "a", "--capacity", "1", "--dry-run"]):
        code = cli.main(argv)
        out = capsys.readouterr()
        assert code != 0 and "BRAVOMARK" not in out.out + out.err and not (tmp_path / "x.jsonl").exists(), argv


def test_admin_export_is_explicit_and_needs_no_encoder(cli_store: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    path, a, b = cli_store
    # the operator's machine has another encoder: an export copies stored vectors, it never re-embeds
    monkeypatch.setattr(cli, "_open_store", lambda p, create, config=None: MemoryStore.open(p, embedder=HashEmbedder(dim=8, seed=3)))
    out = tmp_path / "all.jsonl"
    assert cli.main(["snapshot", str(path), "--all-users", "-o", str(out)]) == 0, capsys.readouterr().err
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert {r["provenance"]["user_id"] for r in rows} == {"alice", "bob"}
    assert all(len(r["embedding"]) == 64 and r["encoder_id"] == HashEmbedder(dim=64, seed=0).encoder_id for r in rows)
