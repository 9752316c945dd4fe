"""Three recall-side seeds (issue 15), on both backends: secrets stay out of recall unless asked for;
semantic refresh (session mix at recall, re-encoding old memories with their session's context);
time travel to the memories a decision saw (content, tier, utility), never resurrecting a forgotten one."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import runtime.cli as cli
from runtime import MemoryStore, StoreConfig, format_context
from runtime.cli import EXIT, main
from runtime.encoders import HashEmbedder
from runtime.errors import NotFoundError, ValidationError
from runtime.scoring import FakeScorer
from runtime.store.filters import RECALL_SENSITIVITY
from runtime.store.refresh import refresh_marker

DIM = 64


def _unit(v: np.ndarray) -> np.ndarray:
    return (v / np.linalg.norm(v)).astype(np.float32)


def _basis(i: int) -> np.ndarray:
    v = np.zeros(DIM, np.float32)
    v[i] = 1.0
    return v


def _vectors(scope: Any, now: datetime, **flt: Any) -> dict[str, np.ndarray]:
    recs, vecs, _ = scope.list_with_vectors(now=now, tier="any", include_expired=True, **flt)
    return {r.id: v for r, v in zip(recs, vecs)}


# ------------------------------------------------------------------------------------------ sensitivity
def test_recall_leaves_secrets_out_unless_asked_and_labels_sensitive_hits(store: MemoryStore, now: datetime) -> None:
    me = store.scope(user_id="alice")
    plain = me.write("vpn setup for the office laptop", timestamp=now)
    pii = me.write("vpn setup: ask bob@example.com for the office laptop", timestamp=now)
    secret = me.write("vpn setup for the office laptop: password is hunter2", timestamp=now)
    assert (plain.metadata.sensitivity.value, pii.metadata.sensitivity.value,
            secret.metadata.sensitivity.value) == ("none", "pii", "secret")
    assert RECALL_SENSITIVITY.value == "pii"

    def ids(**kw: Any) -> set[str]:
        return {h.record.id for h in me.recall("vpn setup office laptop", k=10, now=now, **kw)}

    assert ids() == {plain.id, pii.id}                              # the default: at most pii
    assert ids(sensitivity="secret") == {plain.id, pii.id, secret.id}  # asked for by level
    assert ids(sensitivity=["secret"]) == {secret.id}
    assert ids(sensitivity="none") == {plain.id}
    assert ids(explain=True) == {plain.id, pii.id}
    assert me.recall_log(1)[0]["filters"]["sensitivity"] == ["none", "pii"]  # the log says what was applied
    asked = asyncio.run(me.arecall("vpn setup office laptop", k=10, now=now))
    assert {h.record.id for h in asked} == {plain.id, pii.id}
    # list and count are inventories, not prompt paths: every level unless filtered
    assert me.count(now=now) == 3 and {r.id for r in me.list(now=now)} == {plain.id, pii.id, secret.id}
    # the prompt block says which memories are sensitive (their text is redacted)
    text = format_context(me.recall("vpn setup office laptop", k=10, now=now, sensitivity="secret"), now=now)
    heads = [ln for ln in text.splitlines() if ln.startswith("[Memory")]
    assert sum("| sensitive: secret]" in h for h in heads) == 1 and sum("| sensitive: pii]" in h for h in heads) == 1
    assert sum("sensitive" not in h for h in heads) == 1
    assert "hunter2" not in text and "bob@example.com" not in text


# ------------------------------------------------------------------------------------------ session mix
def _mix_scope(store: MemoryStore, now: datetime) -> tuple[Any, str, str, np.ndarray]:
    """Two facts the query likes equally but for a small edge to A; B leans toward what the
    conversation has been about lately (direction e4, the 5 latest memories)."""
    me = store.scope(user_id="mix")
    a = me.write("fact A", tags=["fact"], timestamp=now, embedding=_basis(1))
    b = me.write("fact B", tags=["fact"], timestamp=now, embedding=_unit(_basis(2) + 0.3 * _basis(4)))
    for i in range(5):
        me.write(f"chat {i}", tags=["chat"], timestamp=now, embedding=_unit(_basis(4) + 0.05 * _basis(10 + i)))
    return me, a.id, b.id, _unit(_basis(1) + _basis(2))


def test_session_mix_moves_recall_toward_the_recent_context(store: MemoryStore, now: datetime) -> None:
    me, a, b, q = _mix_scope(store, now)

    def order(**kw: Any) -> list[str]:
        return [h.record.id for h in me.recall(q, k=2, now=now, tags=["fact"], update_usage=False, **kw)]

    assert order() == [a, b] and order(session_mix=0.0) == [a, b]   # off by default: the query alone
    assert order(session_mix=0.3) == [b, a]                          # the conversation breaks the near-tie
    hits = me.recall(q, k=2, now=now, tags=["fact"], session_mix=0.3, update_usage=False)
    recent = _unit(np.mean([_unit(_basis(4) + 0.05 * _basis(10 + i)) for i in range(5)], axis=0))
    mixed = _unit(0.7 * q + 0.3 * recent)
    assert hits[0].score.similarity == pytest.approx(float(mixed @ _unit(_basis(2) + 0.3 * _basis(4))), abs=1e-5)
    me.recall(q, k=2, tags=["fact"], session_mix=0.3, explain=True, update_usage=False)
    assert me.recall_log(1)[0]["session_mix"] == 0.3 and me.recall_log(1)[0]["final"][0]["id"] == b
    for bad in (1.0, -0.1, "0.2", True, float("nan")):
        with pytest.raises(ValidationError) as e:
            me.recall(q, k=2, session_mix=bad)  # type: ignore[arg-type]
        assert e.value.field == "session_mix"


def test_session_mix_default_comes_from_the_store_config(make_store: Callable[..., MemoryStore],
                                                         now: datetime) -> None:
    store = make_store("mixcfg.sqlite", config=StoreConfig(recall_session_mix=0.3))
    me, a, b, q = _mix_scope(store, now)
    assert [h.record.id for h in me.recall(q, k=2, now=now, tags=["fact"])] == [b, a]
    assert [h.record.id for h in me.recall(q, k=2, now=now, tags=["fact"], session_mix=0)] == [a, b]
    with pytest.raises(ValidationError):
        StoreConfig(recall_session_mix=1.5)


# ------------------------------------------------------------------------------------------ refresh
def _sessions(store: MemoryStore, now: datetime) -> tuple[Any, list[Any], list[Any]]:
    me = store.scope(user_id="alice")
    old_t = now - timedelta(days=60)
    old = [me.write(text, session_id="s1", timestamp=old_t + timedelta(minutes=i)) for i, text in enumerate(
        ["we are planning the Lisbon offsite", "yes, book it", "the venue holds 40 people"])]
    new = [me.write(text, session_id="s2", timestamp=now - timedelta(days=2, minutes=-i)) for i, text in enumerate(
        ["the invoice for March is late", "ok"])]
    me.end_session(now=now - timedelta(days=1))
    return me, old, new


def test_refresh_reencodes_old_memories_with_their_session_once(store: MemoryStore, now: datetime) -> None:
    me, old, new = _sessions(store, now)
    bob = store.scope(user_id="bob")
    theirs = bob.write("bob's old note", session_id="b1", timestamp=now - timedelta(days=90))
    before, bob_before = _vectors(me, now), _vectors(bob, now)
    emb = store.embedder

    dry = me.refresh(older_than_days=30, weight=0.3, now=now, dry_run=True)
    assert dry.dry_run and set(dry.refreshed) == {r.id for r in old} and dry.already == 0
    assert all(np.array_equal(v, before[k]) for k, v in _vectors(me, now).items())  # nothing written

    rep = me.refresh(older_than_days=30, weight=0.3, now=now)
    assert set(rep.refreshed) == {r.id for r in old} and rep.marker == refresh_marker(emb.encoder_id, 0.3)
    after = _vectors(me, now)
    own = np.asarray(emb.encode([r.content for r in old]), np.float32)
    centroid = _unit(np.mean([_unit(v) for v in own], axis=0))
    for r, e in zip(old, own):
        assert np.allclose(after[r.id], _unit(_unit(e) + 0.3 * centroid), atol=1e-6)
        assert float(after[r.id] @ centroid) > float(before[r.id] @ centroid)  # closer to its session's topic
    for r in new:  # younger than the policy: untouched
        assert np.array_equal(after[r.id], before[r.id])
    assert all(np.array_equal(v, bob_before[k]) for k, v in _vectors(bob, now).items())  # other users untouched
    assert theirs.id not in after
    # recall searches the refreshed vectors at once (no stale cache)
    hit = me.recall(after[old[1].id], k=1, now=now, update_usage=False)[0]
    assert hit.record.id == old[1].id and hit.score.similarity == pytest.approx(1.0, abs=1e-5)

    again = me.refresh(older_than_days=30, weight=0.3, now=now)  # the marker: never twice
    assert again.refreshed == [] and again.already == 3
    assert all(np.array_equal(v, after[k]) for k, v in _vectors(me, now).items())
    other_w = me.refresh(older_than_days=30, weight=0.5, now=now)  # a new weight is a new refresh (from content)
    assert set(other_w.refreshed) == {r.id for r in old}
    for r, e in zip(old, own):
        assert np.allclose(_vectors(me, now)[r.id], _unit(_unit(e) + 0.5 * centroid), atol=1e-6)


def test_refresh_validates_its_policy(store: MemoryStore) -> None:
    me = store.scope(user_id="alice")
    for kw, field in (({"older_than_days": -1}, "older_than_days"), ({"older_than_days": "30"}, "older_than_days"),
                      ({"weight": -0.1}, "weight"), ({"weight": float("inf")}, "weight"),
                      ({"batch_size": 0}, "batch_size")):
        with pytest.raises(ValidationError) as e:
            me.refresh(**kw)
        assert e.value.field == field


# ------------------------------------------------------------------------------------------ time travel
def test_memories_at_returns_content_tier_and_utility_and_never_resurrects(store: MemoryStore) -> None:
    me = store.scope(user_id="alice")
    recs = [me.write(f"fact {i} about the launch") for i in range(5)]
    util = {r.id: 0.1 * (i + 1) for i, r in enumerate(recs)}
    d = me.retain(capacity=3, scorer=FakeScorer(util))
    forgotten = recs[4]  # kept by the decision, forgotten afterwards
    me.forget(forgotten.id)
    view = me.memories_at(d.decision_id)
    assert view.decision_id == d.decision_id and len(view.items) == 5
    by_content = {m.content: m for m in view.items if m.content is not None}
    for r in recs[2:4]:
        m = by_content[r.content]
        assert (m.memory_id, m.tier_after, m.tier_now, m.now, m.kept) == (r.id, "working", "working", "present", True)
        assert m.utility == pytest.approx(d.items[r.id].utility) and m.record is not None
    for r in recs[:2]:
        m = by_content[r.content]
        assert (m.tier_after, m.tier_now, m.kept, m.action) == ("archive", "archive", False, "archive")
    gone = [m for m in view.items if m.now == "deleted"]
    assert len(gone) == 1 and gone[0].content is None and gone[0].record is None and gone[0].tier_now is None
    assert gone[0].tier_after == "working" and gone[0].memory_id != forgotten.id  # a tombstone, not the id
    assert forgotten.content not in view.model_dump_json() and forgotten.id not in view.model_dump_json()
    assert {m.memory_id for m in view.working} == {recs[2].id, recs[3].id, gone[0].memory_id}
    assert view.summary()["tier_after"] == {"working": 3, "archive": 2}
    assert me.state_at(d.decision_id).kept == me.decision(d.decision_id).kept  # the old call is unchanged
    with pytest.raises(NotFoundError):
        me.memories_at("dec_doesnotexist")
    with pytest.raises(NotFoundError):
        store.scope(user_id="bob").memories_at(d.decision_id)
    with pytest.raises(ValidationError):
        me.memories_at("not an id!")


def test_memories_at_a_redacted_placeholder_and_a_dropped_candidate(store: MemoryStore) -> None:
    me = store.scope(user_id="alice")
    base = me.write("the base fact")
    child = me.write("derived from the base", derived_from=[base.id])
    d = me.retain(capacity=2, scorer=FakeScorer({base.id: 0.5, child.id: 0.9}, default=0.01),
                  candidates=["an unsaved candidate"])
    me.forget(base.id)  # others derive from it: a redacted placeholder remains
    view = me.memories_at(d.decision_id)
    m = next(m for m in view.items if m.memory_id == base.id)
    assert (m.now, m.content, m.record, m.tier_after, m.tier_now) == ("redacted", None, None, "working", "working")
    assert "the base fact" not in view.model_dump_json()
    cand = next(m for m in view.items if m.action == "skip")
    assert (cand.tier_after, cand.now, cand.content) == ("not_written", "deleted", None)


# ------------------------------------------------------------------------------------------ CLI
@pytest.fixture
def cli_db(store_target: Callable[[str], Any], monkeypatch: pytest.MonkeyPatch, now: datetime) -> Any:
    monkeypatch.setattr(cli, "_open_store", lambda path, create, config=None: MemoryStore.open(path, embedder=HashEmbedder(DIM),
                                                                                   create=create))
    path = store_target("agent.sqlite")
    with MemoryStore.open(path, embedder=HashEmbedder(DIM)) as store:
        _sessions(store, datetime.now(now.tzinfo))
        store.scope(user_id="other").write("someone else's old memory", session_id="o1",
                                           timestamp=datetime.now(now.tzinfo) - timedelta(days=90))
    return path


def _all_vectors(path: Any) -> dict[str, np.ndarray]:
    with MemoryStore.open(path, embedder=HashEmbedder(DIM)) as store:
        out: dict[str, np.ndarray] = {}
        for u in ("alice", "other"):
            out.update(_vectors(store.scope(user_id=u), datetime.now().astimezone()))
        return out


def _listing(path: Any) -> dict[str, bytes]:
    if not isinstance(path, Path):
        return {}
    return {p.name: p.read_bytes() for p in sorted(path.parent.iterdir()) if p.is_file()}


def test_cli_refresh(cli_db: Any, capsys: pytest.CaptureFixture[str]) -> None:
    before = _all_vectors(cli_db)
    assert main(["refresh", str(cli_db), "--user", "alice", "--older-than", "30", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("DRY RUN") and "refreshed 3 memories of alice/default older than 30 days" in out
    assert all(np.array_equal(v, before[k]) for k, v in _all_vectors(cli_db).items())

    assert main(["refresh", str(cli_db), "--user", "alice", "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["refreshed"] == 3 and rep["dry_run"] is False and rep["marker"].endswith("|w=0.3")
    after = _all_vectors(cli_db)
    assert sum(not np.array_equal(after[k], before[k]) for k in before) == 3
    other = [k for k in before if k not in {*rep["ids"]}]
    assert all(np.array_equal(after[k], before[k]) for k in other)  # incl. the other user's old memory

    assert main(["refresh", str(cli_db), "--user", "alice"]) == 0  # a re-run does nothing
    out = capsys.readouterr().out
    assert "refreshed 0 memories" in out and "3 already refreshed" in out


@pytest.mark.parametrize(("argv", "code", "text"), [
    (["--user", "nobody"], "unknown", "no user 'nobody'"),
    (["--user", "alice", "--weight", "-1"], "invalid", "weight must be a number"),
    (["--user", "alice", "--older-than", "-5"], "invalid", "older_than_days must be"),
])
def test_cli_refresh_failures_are_one_line_and_write_nothing(cli_db: Any, capsys: pytest.CaptureFixture[str],
                                                             argv: list[str], code: str, text: str) -> None:
    files, before = _listing(cli_db), _all_vectors(cli_db)
    assert main(["refresh", str(cli_db), *argv]) == EXIT[code]
    err = capsys.readouterr().err
    assert err.startswith("memir: ") and err.count("\n") == 1 and text in err
    assert all(np.array_equal(v, before[k]) for k, v in _all_vectors(cli_db).items())
    if files:
        assert _listing(cli_db).keys() == files.keys()


def test_cli_refresh_missing_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["refresh", str(tmp_path / "nope.sqlite"), "--user", "u"]) == EXIT["missing"]
    assert capsys.readouterr().err.startswith("memir: no store at") and not (tmp_path / "nope.sqlite").exists()
