"""Online A/B experiments through the public API and the CLI (seed 000 §5.3.3; issue 27 item 5), on
both backends: arms change their users' recall and retention, outcomes are typed and scoped, a
deleted memory or user leaves nothing behind in them, and ``memir ab report`` finds the better arm
of a simulated population."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from runtime import MemoryStore, RetentionPolicy, StoreConfig
from runtime.cli import main
from runtime.errors import NotFoundError, ValidationError
from runtime.experiments import Arm, Experiment
from tests.conftest import unit_vectors

TYPED = Experiment("typed-vs-untyped", [Arm("typed"), Arm("untyped", recall={"rerank": False})])
SMALL = Experiment("capacity", [Arm("c1", policy=RetentionPolicy(capacity=1)),
                                Arm("c3", policy=RetentionPolicy(capacity=3))], metric="satisfaction")


def _user_in(e: Experiment, arm: str, start: int = 0) -> str:
    return next(u for i in range(start, start + 10_000) if e.assign(u := f"user{i}").name == arm)


def test_arms_set_their_users_recall_and_retention(make_store: Callable[..., MemoryStore], onnx_encoder: Any,
                                                   rng: np.random.Generator) -> None:
    store = make_store(embedder=onnx_encoder, config=StoreConfig(experiments=(TYPED, SMALL)))
    a, b = _user_in(TYPED, "typed"), _user_in(TYPED, "untyped")
    q, near, far = unit_vectors(rng, 3, onnx_encoder.dim)
    close = (0.9 * q + 0.1 * near) / np.linalg.norm(0.9 * q + 0.1 * near)
    for user in (a, b):
        me = store.scope(user_id=user)
        assert me.arms == {"typed-vs-untyped": TYPED.assign(user).name, "capacity": SMALL.assign(user).name}
        assert me.policy.capacity == {"c1": 1, "c3": 3}[me.arms["capacity"]]
        me.write("rumour", embedding=close, confidence=0.2)
        me.write("spec", embedding=(0.7 * q + 0.3 * far) / np.linalg.norm(0.7 * q + 0.3 * far), confidence=1.0)
    typed = store.scope(user_id=a).recall(q, k=2)
    untyped = store.scope(user_id=b).recall(q, k=2)
    assert [h.record.content for h in typed] == ["spec", "rumour"]                 # confidence re-ranks
    assert [h.record.content for h in untyped] == ["rumour", "spec"]               # cosine order only
    assert untyped[0].score.total == pytest.approx(untyped[0].score.similarity)
    assert untyped[0].score.confidence == 1.0
    plain = make_store("plain.sqlite")                                             # no experiment: no arms
    assert plain.scope(user_id=b).arms == {}
    for user in (a, b):                                                            # text, through the real encoder
        me = store.scope(user_id=user)
        me.write("Refunds are accepted within 30 days of delivery")
        assert me.recall("how long do I have to return an item?", k=1)[0].record.content.startswith("Refunds")


def test_outcomes_are_typed_scoped_and_carry_the_arms(store: MemoryStore) -> None:
    me = store.scope(user_id="alice")
    m = me.write("The user prefers email")
    me.feedback("resolved")
    me.feedback("resolved", False, task_id="T-1")
    me.feedback("satisfaction", 0.75, session_id="s1")
    me.feedback("useful", memory_id=m.id)
    log = me.feedback_log()
    assert [(f.kind, f.value, f.memory_id, f.task_id) for f in log] == [
        ("useful", None, m.id, None), ("satisfaction", 0.75, None, None), ("resolved", 0.0, None, "T-1"),
        ("resolved", 1.0, None, None)]
    assert all(f.user_id == "alice" and f.arms == {} for f in log)
    for kind, kw, field in (("clicked", {}, "kind"), ("satisfaction", {"value": 4}, "<root>"),
                            ("resolved", {"value": 0.5}, "<root>"), ("useful", {}, "<root>"),
                            ("wrong", {"memory_id": m.id, "value": 1}, "<root>"),
                            ("resolved", {"task_id": "not an id!"}, "task_id")):
        with pytest.raises(ValidationError) as ei:
            me.feedback(kind, **kw)
        assert ei.value.field == field, (kind, kw)
    bob = store.scope(user_id="bob")
    with pytest.raises(NotFoundError):
        bob.feedback("wrong", memory_id=m.id)                                       # not bob's memory
    assert bob.feedback_log() == []                                                 # nor his events
    assert len(me.feedback_log()) == 4                                              # nothing half-written


def test_forgetting_leaves_nothing_in_the_outcomes(store: MemoryStore) -> None:
    me = store.scope(user_id="alice")
    m = me.write("The user's card ends in 4242")
    me.feedback("wrong", memory_id=m.id)
    me.forget(m.id)
    (ev,) = me.feedback_log()
    assert ev.kind == "wrong" and ev.memory_id != m.id and ev.memory_id.startswith("forgotten_")
    store.scope(user_id="bob").feedback("resolved")
    store.forget_user("alice")
    assert store.scope(user_id="alice").feedback_log() == []
    assert len(store.scope(user_id="bob").feedback_log()) == 1


def _simulate(store: MemoryStore, exp: Experiment, rates: dict[str, float], users: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    for i in range(users):
        me = store.scope(user_id=f"sim{i}")
        p = rates[me.arms[exp.name]]
        for t in range(2):
            me.feedback("resolved", bool(rng.random() < p), task_id=f"t{t}")


@pytest.mark.parametrize("rates,finds", [({"typed": 0.65, "untyped": 0.5}, True),
                                         ({"typed": 0.5, "untyped": 0.5}, False)])
def test_memir_ab_report_finds_the_better_arm_of_a_simulated_population(
        make_store: Callable[..., MemoryStore], store_target: Callable[[str], Any], rates: dict[str, float],
        finds: bool, capsys: pytest.CaptureFixture[str]) -> None:
    exp = Experiment("typed-vs-untyped", TYPED.arms, min_effect=0.1)
    store = make_store(config=StoreConfig(experiments=(exp,)))
    _simulate(store, exp, rates, 500, seed=1)
    r = store.admin_experiment_report("typed-vs-untyped", n_boot=1000)
    assert r.control == "typed" and [a.name for a in r.arms] == ["typed", "untyped"]
    assert sum(a.users for a in r.arms) == 500 and sum(a.events for a in r.arms) == 1000
    assert r.comparisons[0].significant is finds
    store.close()
    assert main(["ab", "report", str(store_target("mem.sqlite")), "--boot", "1000", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["comparisons"][0]["significant"] is finds
    assert ("untyped is worse than typed" in out["verdict"]) is finds
    assert "sim" not in json.dumps(out)                                              # arms, never users
    assert main(["ab", "report", str(store_target("mem.sqlite")), "--experiment", "nope"]) != 0
    assert "no outcome recorded under experiment 'nope'; recorded: typed-vs-untyped" in capsys.readouterr().err


def test_two_experiments_may_not_set_the_same_thing() -> None:
    other = Experiment("mix", [Arm("a", recall={"rerank": True}), Arm("b")])
    with pytest.raises(ValidationError) as ei:
        StoreConfig(experiments=(TYPED, other))
    assert "both set rerank" in str(ei.value)
    with pytest.raises(ValidationError):
        StoreConfig(experiments=(TYPED, TYPED))


def test_an_explicit_recall_setting_wins_over_the_arm(make_store: Callable[..., MemoryStore],
                                                     rng: np.random.Generator) -> None:
    exp = Experiment("pool", [Arm("one", recall={"candidates": 1}), Arm("also-one", recall={"candidates": 1})])
    store = make_store(config=StoreConfig(experiments=(exp,)))
    me = store.scope(user_id="u")
    q, near, far = unit_vectors(rng, 3)
    me.write("rumour", embedding=(0.9 * q + 0.1 * near) / np.linalg.norm(0.9 * q + 0.1 * near), confidence=0.2)
    me.write("spec", embedding=(0.7 * q + 0.3 * far) / np.linalg.norm(0.7 * q + 0.3 * far), confidence=1.0)
    assert me.recall(q, k=1)[0].record.content == "rumour"                      # a pool of one: no re-ranking
    assert me.recall(q, k=1, candidates=5)[0].record.content == "spec"          # the call's own setting wins
