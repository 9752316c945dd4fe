"""`memir migrate SRC DST`: a store copied SQLite -> PostgreSQL -> SQLite is the same store —
records, tiers, usage, vectors, session context, decisions, recall log — verified per scope by
count and checksum; a second run copies nothing; an interrupted run resumes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import runtime.cli as cli
from runtime import MemoryStore
from runtime.cli import main
from runtime.encoders import HashEmbedder
from runtime.scoring import FakeScorer
from runtime.store.sqlite.tenant import SqliteTenant

pytestmark = pytest.mark.postgres_only


def _open(target: Any, create: bool = True) -> MemoryStore:
    return MemoryStore.open(target, embedder=HashEmbedder(dim=32), create=create)


def _populate(path: Path) -> None:
    with _open(path) as store:
        a = store.scope(user_id="alice")
        recs = a.write_many([{"content": f"alice fact {i} about the trip", "tags": [f"t{i % 3}"],
                              "session_id": "s1"} for i in range(12)])
        a.write("a summary of the trip", source_type="derived_inference", derived_from=[recs[0].id, recs[1].id])
        a.update(recs[2].id, "alice fact 2, corrected")
        a.end_session()
        a.recall("trip", k=3, explain=True)
        a.retain(capacity=6, scorer=FakeScorer(default=0.5), forgotten="archive")
        a.forget(recs[0].id, cascade="redact")
        store.scope(user_id="bob", agent_id="helper").write_many([f"bob note {i}" for i in range(5)])


def _state(store: MemoryStore) -> dict[str, Any]:
    out = {}
    for user, agent, _ in store.admin_users():
        s = store.scope(user_id=user, agent_id=agent)
        out[(user, agent)] = {
            "rows": [(r.model_dump_json(), None if v is None else v.tobytes(), e) for r, v, e in s.export_rows()],
            "archive": sorted(r.id for r in s.list(tier="archive", include_expired=True)),
            "decisions": [d.model_dump_json() for d in s.decisions(100)],
            "recalls": s.recall_log(100),
            "recall": [h.record.id for h in s.recall("trip fact", k=5)],
        }
    return out


def test_copy_there_and_back_is_the_same_store(tmp_path: Path, store_target: Any,
                                               monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(cli, "_open_store", lambda p, create, config=None: _open(p, create))
    src = tmp_path / "agent.sqlite"
    _populate(src)
    url = store_target("pg")
    assert main(["migrate", str(src), url, "--json", "--quiet"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["ok"] and first["scopes"] == 2 and first["copied"] == first["memories"] == 19
    assert main(["migrate", str(src), url, "--json", "--quiet"]) == 0  # idempotent: nothing new
    again = json.loads(capsys.readouterr().out)
    assert again["ok"] and again["copied"] == 0
    back = tmp_path / "back.sqlite"
    assert main(["migrate", url, str(back), "--create", "--quiet"]) == 0
    assert "all match" in capsys.readouterr().out
    with _open(src, False) as a, _open(url, False) as b, _open(back, False) as c:
        sa, sb, sc = _state(a), _state(b), _state(c)
        assert sa == sb == sc
        assert sa[("alice", "default")]["archive"] and sa[("alice", "default")]["decisions"]
        mid = sa[("alice", "default")]["recall"][0]
        assert (a.scope(user_id="alice").explain(mid).model_dump() == b.scope(user_id="alice").explain(mid).model_dump())


def test_an_interrupted_copy_resumes(tmp_path: Path, store_target: Any, monkeypatch: pytest.MonkeyPatch,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(cli, "_open_store", lambda p, create, config=None: _open(p, create))
    src = store_target("src")  # PostgreSQL -> SQLite this time
    with _open(src) as store:
        store.scope(user_id="carol").write_many([f"carol memory {i}" for i in range(9)])
    dst = tmp_path / "dst.sqlite"
    calls = {"n": 0}
    real = SqliteTenant.restore_rows

    def dies_after_two_batches(self: SqliteTenant, rows: Any) -> int:
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt  # the operator's Ctrl-C, mid-copy
        return real(self, rows)

    monkeypatch.setattr(SqliteTenant, "restore_rows", dies_after_two_batches)
    assert main(["migrate", src, str(dst), "--create", "--batch-size", "2", "--quiet"]) == cli.EXIT["interrupted"]
    with _open(dst, False) as partial:
        assert partial.scope(user_id="carol").count(tier="any") == 4
    monkeypatch.setattr(SqliteTenant, "restore_rows", real)
    capsys.readouterr()
    assert main(["migrate", src, str(dst), "--batch-size", "2", "--quiet", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["ok"] and out["copied"] == 5 and out["memories"] == 9
