"""scope.retain: rules over MemIR, applying decisions to the store, explain, time travel, triggers."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from runtime import MemoryStore
from runtime.encoders import HashEmbedder
from runtime.errors import InfeasibleError, NotFoundError, ValidationError
from runtime.record import utcnow
from runtime.retention import RetentionPolicy, TaskCapacity, Triggers, approx_tokens
from runtime.retention.rules import RuleSet, load_rules
from runtime.scoring import FakeScorer


@pytest.fixture
def scope(store_target):  # type: ignore[no-untyped-def]
    with MemoryStore.open(store_target("r.sqlite"), embedder=HashEmbedder(64)) as store:
        yield store.scope(user_id="alice")


def _ids(recs):  # type: ignore[no-untyped-def]
    return {r.id for r in recs}


def test_default_rules_keep_core_forget_expired_and_drop_superseded(scope) -> None:  # type: ignore[no-untyped-def]
    now = utcnow()
    core = scope.write("Always answer in French", flags=["core_instruction"])
    old = scope.write("Hotel is the Ritz", attributes={"fact_key": "hotel"})
    new = scope.write("Hotel changed to the Hilton", attributes={"fact_key": "hotel", "supersedes": old.id})
    ttl = scope.write("temporary token value", expires_at=now - timedelta(minutes=1))
    filler = [scope.write(f"chit chat number {i}") for i in range(6)]
    util = {core.id: 0.01, old.id: 0.9, new.id: 0.8, ttl.id: 0.99}
    d = scope.retain(capacity=3, scorer=FakeScorer(util, default=0.05), now=now)
    kept = _ids(scope.list(now=now, include_expired=True))
    assert core.id in kept                      # must-keep despite the lowest utility
    assert ttl.id not in kept and ttl.id in d.deleted
    assert new.id in kept and old.id not in kept  # the correction wins, whatever the utilities say
    assert scope.explain(old.id).superseded_by == new.id and scope.explain(old.id).state == "archive"
    assert len(kept) == 3
    assert {f.id for f in filler} & set(d.archived)
    assert d.items[ttl.id].reason == "must_forget" and d.items[ttl.id].rule == "expired TTL"
    assert d.items[core.id].reason == "must_keep"
    # must-forget items are hard-deleted, archived ones stay in the cold tier
    assert ttl.id not in _ids(scope.list(tier="any", include_expired=True))
    assert set(d.archived) <= _ids(scope.list(tier="archive"))


def test_explain_and_time_travel(scope) -> None:  # type: ignore[no-untyped-def]
    recs = [scope.write(f"fact {i} about the launch") for i in range(6)]
    util = {r.id: 0.1 * (i + 1) for i, r in enumerate(recs)}
    d1 = scope.retain(capacity=4, scorer=FakeScorer(util))
    d2 = scope.retain(capacity=2, scorer=FakeScorer(util))
    e = scope.explain(recs[2].id)
    assert [h.item.kept for h in e.history] == [True, False]
    assert e.state == "archive" and "dropped" in e.summary
    assert e.history[1].item.reason == "below_cut" and e.history[1].item.action == "archive"
    assert scope.state_at(d1.decision_id).kept == d1.kept
    assert set(scope.state_at(d2.decision_id).kept) == {recs[4].id, recs[5].id}
    assert scope.decisions()[0].decision_id == d2.decision_id
    assert scope.decision(d2.decision_id) == d2  # stored and read back, typed, items included
    cons = {c.kind: c for c in scope.state_at(d2.decision_id).constraints}
    assert cons["capacity"].tight is True


def test_cascade_leaves_placeholder_for_derived_chain(scope) -> None:  # type: ignore[no-untyped-def]
    parent = scope.write("Used API key sk-live-abcdefghijklmnopqrstuvwx to fetch report 7",
                         sensitivity="secret", flags=["used"])
    child = scope.write("Report 7 says revenue grew 12%", derived_from=[parent.id],
                        source_type="derived_inference")
    d = scope.retain(capacity=5, scorer=FakeScorer(default=0.5))
    assert parent.id in d.redacted                     # must-forget, but a child cites it
    ph = scope.get(parent.id)
    assert ph.content.startswith("[forgotten memory") and "placeholder" in [f.value for f in ph.metadata.flags]
    assert scope.get(child.id).provenance.derived_from == [parent.id]


def test_delete_mode_and_dry_run(scope) -> None:  # type: ignore[no-untyped-def]
    recs = [scope.write(f"note {i}") for i in range(5)]
    before = _ids(scope.list())
    d = scope.retain(capacity=2, scorer=FakeScorer(default=0.3), dry_run=True)
    assert _ids(scope.list()) == before and len(d.kept) == 2 and len(d.archived) == 3 and d.dry_run
    assert scope.decisions() == []
    d = scope.retain(capacity=2, scorer=FakeScorer({r.id: i + 1.0 for i, r in enumerate(recs)}), forgotten="delete")
    assert len(d.deleted) == 3 and _ids(scope.list(tier="any")) == {recs[3].id, recs[4].id}


def test_candidates_are_written_only_if_kept(scope) -> None:  # type: ignore[no-untyped-def]
    scope.write("existing memory")
    d = scope.retain(capacity=2, scorer=FakeScorer(lambda r: 0.9 if "keep me" in r.content else 0.1),
                     candidates=["keep me please", "drop me", {"content": "keep me too", "tags": ["x"]}])
    contents = {r.content for r in scope.list(tier="any")}
    assert {"keep me please", "keep me too"} <= contents and "drop me" not in contents
    assert len(d.kept) == 2


def test_yaml_rules_implies_quota_and_bonus(scope, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    rules_yaml = tmp_path / "rules.yaml"
    rules_yaml.write_text("""
implies:
  - {name: budget needs deadline, if: {tags: [budget]}, then: {tags: [deadline]}, same_tag_prefix: "project:"}
quotas:
  - {name: at most one tool result, when: {dialog_roles: [tool]}, max: 1}
bonuses:
  - {name: urgent, when: {flags: [urgent]}, add: 1.0}
""")
    budget = scope.write("Orion budget is 40k", tags=["budget", "project:orion"])
    deadline = scope.write("Orion is due on May 3", tags=["deadline", "project:orion"])
    other = scope.write("Vega is due on June 9", tags=["deadline", "project:vega"])
    t1 = scope.write("tool output one", dialog_role="tool")
    t2 = scope.write("tool output two", dialog_role="tool")
    urgent = scope.write("call the client back", flags=["urgent"])
    util = {budget.id: 0.9, deadline.id: 0.05, other.id: 0.3, t1.id: 0.8, t2.id: 0.7, urgent.id: 0.01}
    d = scope.retain(capacity=4, scorer=FakeScorer(util), rules=str(rules_yaml))
    kept = set(d.kept)
    assert budget.id in kept and deadline.id in kept     # keep(budget) ⇒ keep(its deadline)
    assert len(kept & {t1.id, t2.id}) == 1               # quota
    assert urgent.id in kept                              # bonus lifted it over the cut
    assert [(b.rule, b.add) for b in d.items[urgent.id].bonuses] == [("urgent", 1.0)]
    assert d.items[urgent.id].utility == pytest.approx(d.items[urgent.id].model_utility + 1.0)


def test_bad_rules_name_the_field() -> None:
    with pytest.raises(ValidationError) as e:
        load_rules({"must_keep": [{"name": "x", "when": {"flags": ["not_a_flag"]}}]})
    assert e.value.field is not None and e.value.field.startswith("must_keep.0.when.flags")
    with pytest.raises(ValidationError, match="valid YAML"):
        load_rules("must_keep: [unclosed")


def test_infeasible_rules_raise_naming_them_and_overflow_reports(scope) -> None:  # type: ignore[no-untyped-def]
    for i in range(3):
        scope.write(f"core rule {i}", flags=["core_instruction"])
    with pytest.raises(InfeasibleError) as e:
        scope.retain(capacity=2, scorer=FakeScorer(default=0.5))
    assert any("core instruction" in c for c in e.value.conflicts)
    d = scope.retain(capacity=2, scorer=FakeScorer(default=0.5), on_infeasible="overflow")
    assert len(d.kept) == 3 and d.overflow["capacity"] == 1


def test_soft_capacity_and_task_capacity(scope) -> None:  # type: ignore[no-untyped-def]
    recs = [scope.write(f"item {i}") for i in range(6)]
    util = {r.id: u for r, u in zip(recs, [0.9, 0.8, 0.7, 0.6, 0.2, 0.1])}
    d = scope.retain(capacity=2, scorer=FakeScorer(util), overflow_penalty=0.5, dry_run=True)
    assert len(d.kept) == 4  # items worth more than the 0.5 penalty are kept past K
    cap = TaskCapacity(base=1, per_entity=0, per_1k_chars=0, per_utility=1.0, minimum=1, maximum=10)
    d = scope.retain(capacity=lambda recs, u: cap.resolve(utility=u), scorer=FakeScorer(util), dry_run=True)
    assert d.capacity == cap.resolve(utility=[0.9, 0.8, 0.7, 0.6, 0.2, 0.1]) == 4


def test_token_budget(scope) -> None:  # type: ignore[no-untyped-def]
    long = scope.write("x " * 200)
    short = [scope.write(f"short {i}") for i in range(3)]
    util = {long.id: 0.9, **{s.id: 0.5 for s in short}}
    budget = sum(approx_tokens(s.content) for s in short)
    d = scope.retain(capacity=None, budget_tokens=budget, scorer=FakeScorer(util), dry_run=True)
    assert set(d.kept) == {s.id for s in short}


def test_triggers_run_retention_by_themselves(store_target) -> None:  # type: ignore[no-untyped-def]
    with MemoryStore.open(store_target("t.sqlite"), embedder=HashEmbedder(64)) as store:
        every = store.scope(user_id="a", policy=RetentionPolicy(
            capacity=2, scorer=FakeScorer(default=0.5), triggers=Triggers(every_n_writes=3)))
        for i in range(7):
            every.write(f"note {i}")
        assert [d.trigger for d in every.decisions()] == ["every_n_writes", "every_n_writes"]
        assert every.count() == 3  # 2 kept at the 6th write, then one more
        mark = store.scope(user_id="b", policy=RetentionPolicy(
            capacity=4, scorer=FakeScorer(default=0.5), triggers=Triggers(watermark=0.5)))
        mark.write("one")
        assert mark.decisions() == []
        mark.write("two")  # 2 >= 0.5 × 4
        assert [d.trigger for d in mark.decisions()] == ["watermark"]
        ev = store.scope(user_id="c", policy=RetentionPolicy(
            capacity=1, scorer=FakeScorer(default=0.5), triggers=Triggers(events=frozenset({"new_instruction"}))))
        ev.write("x")
        ev.write("y")
        assert ev.event("chit_chat") is None and ev.decisions() == []
        d = ev.event("new_instruction")
        assert d is not None and d.trigger == "event:new_instruction" and ev.count() == 1
        sess = store.scope(user_id="d", policy=RetentionPolicy(
            capacity=1, scorer=FakeScorer(default=0.5), triggers=Triggers(on_session_end=True)))
        sess.write("first", session_id="s1")
        sess.write("second", session_id="s1")
        assert sess.decisions() == []
        sess.write("third", session_id="s2")  # s1 closes before s2's first turn is written
        assert [d.trigger for d in sess.decisions()] == ["session_end:s1"]
        assert sess.decisions()[0].n_items == 2 and sess.count() == 2
        d = sess.end_session()
        assert d is not None and d.trigger == "session_end:s2"
        # triggered decisions overflow instead of failing the write
        strict = store.scope(user_id="e", policy=RetentionPolicy(
            capacity=1, scorer=FakeScorer(default=0.5), triggers=Triggers(every_n_writes=2)))
        strict.write("core 1", flags=["core_instruction"])
        strict.write("core 2", flags=["core_instruction"])
        assert strict.decisions()[0].overflow == {"capacity": 1.0}
    with pytest.raises(ValidationError) as e:
        Triggers(watermark=1.5, every_n_writes=-1)
    assert {f for f, _ in e.value.problems} == {"watermark", "every_n_writes"}
    with pytest.raises(ValidationError, match="integer capacity"):
        RetentionPolicy(triggers=Triggers(watermark=0.9))


@pytest.mark.parametrize("history", ["archive", "keep", "delete"])
@pytest.mark.parametrize("capacity", [1, 2, 3, 5])
def test_a_correction_is_kept_over_the_original_at_every_capacity(scope, history: str,  # type: ignore[no-untyped-def]
                                                                  capacity: int) -> None:
    old = scope.write("Budget for project Orion is 40k EUR", tags=["project:orion"], sub_role="pm")
    others = [scope.write(f"unrelated note {i}") for i in range(3)]
    new = scope.update(old.id, "Budget for project Orion is now 55k EUR", history=history)
    assert new.metadata.tags == ["project:orion"] and new.role_context.sub_role == "pm"  # inherited
    # the scorer prefers the stale version: the correction must win anyway
    util = {old.id: 0.99, new.id: 0.01, **{o.id: 0.5 for o in others}}
    d = scope.retain(capacity=capacity, scorer=FakeScorer(util))
    kept = set(d.kept)
    assert old.id not in kept
    assert (new.id in kept) == (capacity >= 4)  # it competes fairly with the others, never with the original
    solo = scope.retain(capacity=capacity, scorer=FakeScorer(util), candidates=[])
    assert old.id not in solo.kept
    versions = scope.history(new.id)
    if history == "delete":
        assert [v.record.id for v in versions] == [new.id]
    else:
        assert [v.record.id for v in versions] == [old.id, new.id] and versions[-1].current
        assert versions[0].tier == "archive" and scope.get(old.id).has_flag("superseded")
    scope.forget(new.id)  # forgetting removes the whole chain
    assert scope.count(tier="any", include_expired=True) == 3


def test_a_correction_alone_wins_at_capacity_one(scope) -> None:  # type: ignore[no-untyped-def]
    old = scope.write("Meeting is at 3pm")
    new = scope.write("Meeting moved to 4pm", supersedes=old.id)
    d = scope.retain(capacity=1, scorer=FakeScorer({old.id: 0.9, new.id: 0.1}))
    assert d.kept == [new.id]
    raw = scope.write("Meeting moved to 5pm", attributes={"supersedes": new.id})  # the raw attribute works too
    assert scope.retain(capacity=1, scorer=FakeScorer({new.id: 0.9, raw.id: 0.1})).kept == [raw.id]
    assert [v.record.id for v in scope.history(old.id)] == [old.id, new.id, raw.id]
    with pytest.raises(ValidationError, match="supersedes"):
        scope.write("x", supersedes="mem_nope")


def test_empty_ruleset_and_isolation_of_decisions(store_target) -> None:  # type: ignore[no-untyped-def]
    with MemoryStore.open(store_target("x.sqlite"), embedder=HashEmbedder(64)) as store:
        a, b = store.scope(user_id="a"), store.scope(user_id="b")
        ra = [a.write(f"a {i}") for i in range(4)]
        b.write("b only")
        d = a.retain(capacity=1, scorer=FakeScorer(default=0.5), rules=RuleSet())
        assert set(d.items) == {r.id for r in ra}        # b's memory was never even scored
        assert b.decisions() == [] and len(b.list()) == 1


def test_a_failing_decision_applies_nothing(scope, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Candidates, archiving and the decision record are one transaction."""
    import runtime.store.sql.decisions as sql_decisions

    for i in range(5):
        scope.write(f"note {i}")
    before = {(r.id, r.content) for r in scope.list(tier="any")}

    def boom(*a, **k):  # type: ignore[no-untyped-def]
        raise RuntimeError("disk full while recording the decision")

    monkeypatch.setattr(sql_decisions, "record", boom)  # both backends apply decisions through it
    with pytest.raises(RuntimeError):
        scope.retain(capacity=2, scorer=FakeScorer(default=0.5), candidates=["a new candidate"])
    assert {(r.id, r.content) for r in scope.list(tier="any")} == before  # nothing archived, nothing added
    assert len(scope.list()) == 5 and scope.decisions() == []


def test_retain_survives_rows_another_client_deletes_mid_decision(make_store) -> None:  # type: ignore[no-untyped-def]
    """Another client forgets memories while this one is scoring: the decision still applies, the
    vanished items are ``gone`` (not an error, not a "re-embed" message), and nothing else is lost."""
    mine = make_store("shared.sqlite")
    theirs = make_store("shared.sqlite")  # a second client of the same store
    me = mine.scope(user_id="alice")
    recs = [me.write(f"note {i} about the trip") for i in range(8)]
    victims = [recs[1].id, recs[4].id]

    class DeletingScorer(FakeScorer):
        def score(self, records, embeddings, ctx):  # type: ignore[no-untyped-def]
            for v in victims:  # between reading the working set and applying the decision
                theirs.scope(user_id="alice").forget(v, cascade="delete", scrub=False)
            return super().score(records, embeddings, ctx)

    d = me.retain(capacity=3, scorer=DeletingScorer(default=0.5), forgotten="archive")
    assert {m: d.items[m].action for m in victims} == {v: "gone" for v in victims}
    survivors = {r.id for r in me.list(tier="any")}
    assert survivors == {r.id for r in recs} - set(victims)
    assert set(d.kept) | set(d.archived) == survivors


def test_extracted_candidates_go_straight_into_retain_as_the_agents_inferences(scope) -> None:  # type: ignore[no-untyped-def]
    """Seed 001 §5.3: what the model proposes (extract_candidates) is a retain candidate as it is,
    written only if kept, as derived_inference spoken by the agent, with the parents it names."""
    from runtime.annotate.extract import extract_candidates

    turn = scope.write("I always take the 9:40 train to work")
    out = (f'Noted. <mem tags="travel" derived_from="{turn.id}">The user commutes on the 9:40 train</mem> '
           '<mem>The user mentioned a train once</mem>')
    cands = extract_candidates(out)
    d = scope.retain(capacity=2, candidates=cands,
                     scorer=FakeScorer(lambda r: 0.1 if "mentioned" in r.content else 0.9))
    kept = [r for r in scope.list(tier="any") if r.id != turn.id]
    assert [r.content for r in kept] == ["The user commutes on the 9:40 train"]          # the other was not kept
    rec = kept[0]
    assert rec.provenance.type.value == "derived_inference" and rec.role_context.dialog_role.value == "agent"
    assert rec.provenance.source_entity == scope.agent_id and rec.provenance.derived_from == [turn.id]
    assert rec.metadata.tags == ["travel"] and rec.id in d.kept
    assert [r.id for r in scope.children(turn.id)] == [rec.id]                            # causality both ways
    with pytest.raises((ValidationError, NotFoundError), match="mem_nope"):               # parents must exist here
        scope.retain(capacity=5, scorer=FakeScorer(default=0.5),
                     candidates=extract_candidates('<mem derived_from="mem_nope">x</mem>'))
    assert "x" not in {r.content for r in scope.list(tier="any")}
