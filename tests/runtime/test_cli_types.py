"""`memir types discover` / `memir types apply` on both backends: summaries and --json, dry runs,
one-line failures with their exit codes, help with examples."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import runtime.cli as cli
from runtime.cli import EXIT, build_parser, main
from runtime.encoders import HashEmbedder
from runtime.store import MemoryStore
from tests.runtime.store.test_discovery import seed_scopes


@pytest.fixture
def db(store_target, monkeypatch: pytest.MonkeyPatch) -> str:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(cli, "_open_store", lambda path, create, config=None: MemoryStore.open(path, embedder=HashEmbedder(64),
                                                                                   create=create))
    path = str(store_target("agent.sqlite"))
    with MemoryStore.open(path, embedder=HashEmbedder(64)) as store:
        seed_scopes(store)
    return path


def _records(db: str, user: str) -> list[str]:
    with MemoryStore.open(db, embedder=HashEmbedder(64)) as store:
        return [r.model_dump_json() for r in store.scope(user_id=user).list(tier="any")]


@pytest.mark.parametrize("action", ["discover", "apply"])
def test_help_has_an_example_and_every_flag_is_explained(action: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["types", action, "--help"])
    assert e.value.code == 0
    assert "example:" in capsys.readouterr().out
    types = next(a for a in build_parser()._subparsers._group_actions if a.dest == "cmd").choices["types"]  # type: ignore[union-attr]
    sub = next(a for a in types._subparsers._group_actions if a.dest == "types_cmd").choices[action]  # type: ignore[union-attr]
    for act in sub._actions:
        assert act.help, f"memir types {action}: {act.option_strings or act.dest} has no help text"


def test_discover_then_apply(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["types", "discover", db, "--user", "alice"]) == 0
    out = capsys.readouterr().out
    assert "alice/default: 40 memories, 3 clusters" in out and "1 not described" in out and "UNDESCRIBED" in out
    assert "Warranty claim" in out and "Invoice" not in out  # only undescribed clusters without --verbose
    assert "bob" not in out  # bob's warranty claims sit on the same centre: never shown to alice
    assert main(["types", "discover", db, "--user", "alice", "--verbose"]) == 0
    assert "tag=billing" in capsys.readouterr().out
    assert main(["types", "discover", db, "--user", "alice", "--json"]) == 0
    raw = capsys.readouterr().out
    assert "bob" not in raw
    report = json.loads(raw)
    cid = next(c["id"] for c in report["clusters"] if not c["described"])
    size = next(c["size"] for c in report["clusters"] if c["id"] == cid)
    before, bob_before = _records(db, "alice"), _records(db, "bob")

    assert main(["types", "apply", db, "--user", "alice", "--cluster", cid, "--name", "warranty_claim",
                 "--dry-run"]) == 0
    assert f"DRY RUN (nothing changed) — would tag {size} of the {size} memories" in capsys.readouterr().out
    assert _records(db, "alice") == before

    assert main(["types", "apply", db, "--user", "alice", "--cluster", cid, "--name", "warranty_claim", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["tagged"] == size and res["cluster"] == cid and not res["dry_run"]
    with MemoryStore.open(db, embedder=HashEmbedder(64)) as store:
        assert {r.id for r in store.scope(user_id="alice").list(tags=["warranty_claim"])} == set(res["member_ids"])
    assert _records(db, "bob") == bob_before
    # the tagged cluster is described now: its id still resolves, and a second apply tags nothing
    assert main(["types", "apply", db, "--user", "alice", "--cluster", cid, "--name", "warranty_claim"]) == 0
    assert f"tagged 0 of the {size} memories" in capsys.readouterr().out


@pytest.mark.parametrize("argv, code, text", [
    (["--user", "alice", "--cluster", "t_000000000000", "--name", "x"], "unknown", "no cluster 't_000000000000'"),
    (["--user", "nobody", "--cluster", "t_000000000000", "--name", "x"], "unknown", "no user 'nobody'"),
    (["--user", "alice", "--cluster", "CLUSTER", "--name", "x'; DROP"], "invalid", "tags"),
    (["--user", "alice", "--cluster", "CLUSTER", "--name", "x'; DROP", "--dry-run"], "invalid", "tags"),
    (["--user", "alice", "--cluster", "CLUSTER", "--name", "x", "--min-cluster-size", "1"], "invalid",
     "min_cluster_size"),
])
def test_failures_are_one_line_with_their_exit_code(db: str, capsys: pytest.CaptureFixture[str], argv: list[str],
                                                    code: str, text: str) -> None:
    assert main(["types", "discover", db, "--user", "alice", "--json"]) == 0
    cid = next(c["id"] for c in json.loads(capsys.readouterr().out)["clusters"] if not c["described"])
    before = _records(db, "alice")
    argv = [cid if a == "CLUSTER" else a for a in argv]
    rc = main(["types", "apply", db, *argv])
    err = capsys.readouterr().err
    assert rc == EXIT[code], err
    assert text in err
    assert err.startswith("memir: ") and err.count("\n") == 1 and " — " in err
    assert _records(db, "alice") == before


def test_missing_scikit_learn_exits_6(db: str, capsys: pytest.CaptureFixture[str],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "sklearn.cluster", None)
    assert main(["types", "discover", db, "--user", "alice"]) == EXIT["environment"]
    assert "pip install 'memir-runtime[discovery]'" in capsys.readouterr().err


def test_missing_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["types", "discover", str(tmp_path / "nope.sqlite"), "--user", "u"]) == EXIT["missing"]
    assert not (tmp_path / "nope.sqlite").exists()
