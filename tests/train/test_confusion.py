"""The confusion evaluation: a deterministic, really confusable generator; isolation on the typed path;
the metrics on a hand-made case; the CLI subcommand's files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runtime.encoders import HashEmbedder
from runtime.errors import MemirError
from train.eval.cli import main
from train.eval.confusion import Item, Probe, evaluate_confusion, generate, metrics, near_duplicate_share


def test_generator_is_deterministic_and_shaped() -> None:
    a, b, c = generate(12, 3, seed=4), generate(12, 3, seed=4), generate(12, 3, seed=5)
    assert a.memories == b.memories and a.probes == b.probes and a.sessions == b.sessions
    assert a.memories != c.memories
    assert len(a.probes) == 12 * 3 * 2 and len(a.memories) == 12 * (2 + 3 * 4)
    ids = {m.id: m for m in a.memories}
    assert len(ids) == len(a.memories)
    for p in a.probes:
        t = ids[p.target]
        assert t.user_id == p.user_id and t.topic == p.topic
        assert t.kind == ("case" if p.kind == "case" else "spec")
        assert (t.fields["active_role"], t.fields["sub_role"]) == (p.role, p.sub_role)
        assert t.fields["session_id"] in a.sessions[p.user_id]
        # the look-alikes exist: another user's case on the topic, the asker's note under another role, a rumour
        assert any(m.kind == "case" and m.topic == p.topic and m.user_id != p.user_id for m in a.memories)
        note = ids[p.target.rsplit(".", 1)[0] + ".note"]
        assert (note.fields["active_role"], note.fields["sub_role"]) != (p.role, p.sub_role)
        rumour = ids[p.target.rsplit(".", 1)[0] + ".rumour"]
        assert rumour.fields["confidence"] < 0.5 < t.fields.get("confidence", 0.95)


def test_generator_is_confusable_on_the_real_encoder() -> None:
    try:
        from runtime.encoders import load_default_embedder
        emb = load_default_embedder()
    except (MemirError, OSError) as e:
        pytest.skip(f"the ONNX encoder is not exported: {e}")
    share = near_duplicate_share(generate(30, 3, seed=0), emb)
    # another user's near-duplicate is at least as close to the query as the asker's own case for most probes
    assert share["other_user_case_at_least_as_similar"] >= 0.5
    assert share["own_rumour_at_least_as_similar_as_spec"] >= 0.3


def test_typed_path_never_crosses_users() -> None:
    data = generate(10, 3, seed=1)
    pl = evaluate_confusion(data, HashEmbedder(dim=64), k=5)
    for path in ("typed", "typed_rank_only"):
        s = pl["summary"][path]
        assert s["cross_user_confusion"] == 0.0 and s["cross_user_above_target"] == 0.0
        assert s["citation_accuracy"] == 1.0 and s["citation_all_correct"] == 1.0
    assert pl["summary"]["typed"]["role_consistency"] == 1.0  # the role filter
    assert pl["summary"]["typed"]["cross_role_confusion"] == 0.0
    u = pl["summary"]["untyped"]
    assert u["cross_user_confusion"] > 0.5 and u["citation_accuracy"] < 1.0
    assert pl["probes"]["total"] == 60 and pl["summary"]["typed"]["probes"] == 60
    assert 0 < pl["pooled_index_entries"] <= pl["memories"] == len(data.memories)
    assert pl["example"]["blocks"]["typed"].startswith("Relevant memories:")


def _it(i: str, user: str, sess: str, role: str = "support", sub: str | None = "billing", kind: str = "case",
        topic: str | None = "t", labelled: bool = True) -> Item:
    return Item(i, user, sess, role, sub, kind, topic, labelled)


def test_metrics_on_a_hand_made_case() -> None:
    sessions = {"a": frozenset({"a1", "a2"}), "b": frozenset({"b1"})}
    pc = Probe("q1", "case", "a", "support", "billing", "t", "q", "a.case")
    pp = Probe("q2", "policy", "a", "support", "billing", "t", "q", "a.spec")
    results = [
        # case: b's look-alike above a's case; a neutral memory; the target
        (pc, [_it("b.case", "b", "b1"), _it("a.n", "a", "a1", "general", None, "neutral", None),
              _it("a.case", "a", "a1")]),
        # policy: a's own rumour above a's spec, a sales note (wrong role), an unlabelled own memory
        (pp, [_it("a.rumour", "a", "a2", kind="rumour"), _it("a.spec", "a", "a2", kind="spec"),
              _it("a.note", "a", "a2", "sales", "accounts", "note"), _it("a.x", "a", "a1", labelled=False)]),
    ]
    m = metrics(results, sessions, typed=True)
    assert m["probes"] == 2 and m["recalled"] == 7 and m["policy_probes"] == 1
    assert m["cross_user_confusion"] == 0.5 and m["cross_user_above_target"] == 0.5
    assert m["cross_role_confusion"] == 0.5 and m["cross_role_above_target"] == 0.0  # the note is below the spec
    assert m["role_consistency"] == pytest.approx(6 / 7)
    assert m["citation_accuracy"] == pytest.approx(5 / 7)  # b's memory and the unlabelled one are wrong
    assert m["citation_all_correct"] == 0.0
    assert m["target_recall_at_k"] == 1.0 and m["rumour_over_spec"] == 1.0
    u = metrics(results, sessions, typed=False)  # no labels needed: only the true provenance counts
    assert u["citation_accuracy"] == pytest.approx(6 / 7) and u["citation_all_correct"] == 0.5
    missing = metrics([(pp, [_it("b.rumour", "b", "b1", kind="rumour"), _it("z", "a", "a1", topic="other")])],
                      sessions, typed=False)
    assert missing["rumour_over_spec"] == 1.0 and missing["target_recall_at_k"] == 0.0
    assert missing["cross_user_above_target"] == 1.0


def test_cli_writes_json_markdown_and_plot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "conf" / "confusion.json"
    assert main(["confusion", "--users", "6", "--topics-per-user", "2", "--k", "3", "--encoder", "hash",
                 "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert set(data["summary"]) == {"typed", "typed_rank_only", "untyped"} and data["k"] == 3
    assert data["confusability"] and data["args"]["users"] == 6
    assert "| cross-user confusion" in out.with_suffix(".md").read_text()
    assert out.with_suffix(".png").stat().st_size > 10_000
    assert "untyped pooled" in capsys.readouterr().out
    assert main(["confusion", "--users", "1", "--encoder", "hash", "--out", str(out)]) == 2
