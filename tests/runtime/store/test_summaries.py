"""Session summaries (issue 15): an extractive ``derived_inference`` summary at session end, its
sources archived and explained, the derived_from implication rules, the summariser hook redacted,
off by default, never across users; and the coverage metric of the evaluation."""

from __future__ import annotations

from typing import Any

import pytest

from runtime import FakeScorer, MemIR, MemoryStore, RetentionPolicy, SummaryPolicy
from runtime.errors import ValidationError
from runtime.record.memir import Flag, SourceType
from runtime.retention import extract_summary, key_facts, load_rules
from runtime.retention.rules import RuleSet
from train.eval.summaries import fact_recall, lead_summary

TURNS = [
    "The budget for project Orion is 40k EUR. It was approved on 2024-03-05 by Dana Kim.",
    "ok thanks, sounds good to me",
    "Orion ships on 12 June from Oslo. The tracking id is ORX-7781.",
    "what a lovely day it is",
]


def _scorer() -> FakeScorer:
    return FakeScorer(lambda r: 0.9 if "Orion" in r.content else 0.1)


def _policy(**kw: Any) -> RetentionPolicy:
    extra = {k: kw.pop(k) for k in ("capacity", "triggers") if k in kw}
    kw.setdefault("max_turns", 2)
    kw.setdefault("min_turns", 2)
    return RetentionPolicy(scorer=_scorer(), summaries=SummaryPolicy(enabled=True, **kw), **extra)


def _session(me: Any, sid: str = "s1", turns: list[str] = TURNS) -> list[MemIR]:
    return [me.write(t, session_id=sid) for t in turns]


def _summaries(me: Any) -> list[MemIR]:
    return [r for r in me.list(tier="any") if "summary" in r.metadata.tags]


def test_summary_at_session_end_keeps_facts_verbatim_and_demotes_explained_sources(store: MemoryStore) -> None:
    me = store.scope(user_id="alice", policy=_policy())
    recs = _session(me)
    assert _summaries(me) == []  # the session is still open
    me.write("a new day", session_id="s2")  # closes s1
    [s] = _summaries(me)
    assert s.provenance.type == SourceType.derived_inference and s.provenance.session_id == "s1"
    assert s.provenance.source_entity == "memir:summary"
    assert s.provenance.derived_from == [recs[0].id, recs[2].id]  # the high-utility turns, time order
    for fact in ("40k EUR", "2024-03-05", "Dana Kim", "12 June", "Oslo", "ORX-7781"):
        assert fact in s.content
    assert "lovely" not in s.content
    tiers = {r.id: me.explain(r.id).state for r in recs}
    assert tiers[recs[0].id] == tiers[recs[2].id] == "archive"
    assert tiers[recs[1].id] == tiers[recs[3].id] == "working"  # not summarised: left to retention
    why = me.explain(recs[0].id)
    assert why.history[-1].trigger == "summary:s1" and why.history[-1].item.rule == f"summarised into {s.id}"
    assert "summary:s1" in why.summary
    assert me.explain(s.id).state == "working"
    assert [h.record.id for h in me.recall("Orion budget", k=1)] == [s.id]
    assert recs[0].id in {h.record.id for h in me.recall("Orion budget", k=5, tier="archive")}
    assert recs[0].id in {h.record.id for h in me.recall("Orion budget", k=10, tier="any")}


def test_end_session_summarises_and_pinned_sources_stay(store: MemoryStore) -> None:
    me = store.scope(user_id="alice", policy=_policy())
    recs = [me.write(TURNS[0], session_id="s1", flags=[Flag.pinned]), *_session(me, "s1", TURNS[1:])]
    me.end_session()
    [s] = _summaries(me)
    assert recs[0].id in s.provenance.derived_from
    assert me.explain(recs[0].id).state == "working"  # must-keep (pinned) is never demoted
    assert me.explain(recs[2].id).state == "archive"


def test_disabled_by_default_and_small_sessions_left_alone(store: MemoryStore) -> None:
    me = store.scope(user_id="bob", policy=RetentionPolicy(scorer=_scorer()))
    _session(me)
    me.end_session()
    assert _summaries(me) == [] and me.count(tier="archive") == 0
    small = store.scope(user_id="carol", policy=_policy(min_turns=5))
    _session(small)
    small.end_session()
    assert _summaries(small) == []


def test_no_demotion_when_configured(store: MemoryStore) -> None:
    me = store.scope(user_id="alice", policy=_policy(demote_sources=False))
    _session(me)
    me.end_session()
    assert len(_summaries(me)) == 1 and me.count(tier="archive") == 0


def test_summary_needs_sources_rule_in_retain(store: MemoryStore) -> None:
    me = store.scope(user_id="alice", policy=_policy(demote_sources=False, keep_rule="summary_needs_sources"))
    recs = _session(me)
    me.end_session()
    [s] = _summaries(me)
    # utilities: the summary (has "Orion") 0.9, its sources 0.9, the rest 0.1; capacity 2 cannot hold
    # the summary with both sources, so it is dropped rather than kept without its citations
    d = me.retain(capacity=2, dry_run=True)
    assert s.id not in d.kept and set(d.kept) == {recs[0].id, recs[2].id}
    d3 = me.retain(capacity=3)
    assert set(d3.kept) == {s.id, recs[0].id, recs[2].id}
    assert any(c.kind == "implies" for c in d3.constraints)


def test_sources_need_summary_rule_in_retain(store: MemoryStore) -> None:
    me = store.scope(user_id="alice", policy=RetentionPolicy(
        scorer=FakeScorer(lambda r: 0.05 if "summary" in r.metadata.tags else (0.9 if "Orion" in r.content else 0.1)),
        summaries=SummaryPolicy(enabled=True, min_turns=2, demote_sources=False, keep_rule="sources_need_summary")))
    recs = _session(me)
    me.end_session()
    [s] = _summaries(me)
    d = me.retain(capacity=2)  # a source kept forces its (low-utility) summary in
    assert s.id in d.kept and len(d.kept) == 2 and (recs[0].id in d.kept or recs[2].id in d.kept)
    assert any(c.kind == "implies" and c.tight for c in d.constraints)


def test_hook_output_is_redacted_and_cites_the_turns(store: MemoryStore) -> None:
    seen: list[list[str]] = []

    def llm(turns: list[MemIR]) -> str:
        seen.append([t.content for t in turns])
        return "User paid with card 4111 1111 1111 1111 for Orion."

    me = store.scope(user_id="alice", policy=_policy(summarizer=llm, max_turns=2))
    recs = _session(me)
    me.end_session()
    [s] = _summaries(me)
    assert seen == [[TURNS[0], TURNS[2]]]
    assert "4111" not in s.content and "Orion" in s.content
    assert s.provenance.derived_from == [recs[0].id, recs[2].id]


def test_a_failing_hook_never_fails_the_write_that_closes_the_session(store: MemoryStore,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    def llm(turns: list[MemIR]) -> str:
        raise TimeoutError("the LLM is down")

    me = store.scope(user_id="alice", policy=_policy(summarizer=llm))
    _session(me)
    me.write("next session", session_id="s2")  # closes s1: the write still succeeds
    assert _summaries(me) == [] and me.count(tier="archive") == 0
    assert "summary of session s1 failed" in caplog.text
    with pytest.raises(TimeoutError):
        me.summarize_session("s1")  # called explicitly, the error is the caller's


def test_summaries_never_include_another_users_turns(store: MemoryStore) -> None:
    alice = store.scope(user_id="alice", policy=_policy())
    bob = store.scope(user_id="bob", policy=_policy())
    _session(bob, "s1", ["Bob's Orion plan is 99 boats. More Orion news from Bergen.", "Orion again."])
    _session(alice)
    alice.end_session()
    bob.end_session()
    [sa] = _summaries(alice)
    [sb] = _summaries(bob)
    assert "Bergen" not in sa.content and "99" not in sa.content and "Oslo" not in sb.content
    assert set(sa.provenance.derived_from) <= {r.id for r in alice.list(tier="any")}
    assert set(sb.provenance.derived_from) <= {r.id for r in bob.list(tier="any")}


def test_summary_policy_is_validated_by_field() -> None:
    with pytest.raises(ValidationError) as e:
        SummaryPolicy(min_turns=0)
    assert "min_turns" in str(e.value)
    with pytest.raises(ValidationError) as e:
        SummaryPolicy(keep_rule="both")  # type: ignore[arg-type]
    assert "keep_rule" in str(e.value)
    with pytest.raises(ValidationError):
        RetentionPolicy(summaries="yes")  # type: ignore[arg-type]


def test_derived_from_implies_rule_yaml_round_trip() -> None:
    text = """
implies:
  - {name: summary needs its sources, if: {tags: [summary]}, then: {}, relation: derived_from, direction: sources}
  - {name: sources need their summary, if: {}, then: {tags: [summary]}, relation: derived_from, direction: derived}
"""
    rules = load_rules(text)
    again = load_rules(rules.model_dump(mode="json", by_alias=True, exclude_none=True))
    assert again == rules and rules.implies[0].relation == "derived_from"
    assert SummaryPolicy(keep_rule="summary_needs_sources").implies_rule() == rules.implies[0]
    with pytest.raises(ValidationError, match="direction"):
        load_rules({"implies": [{"name": "x", "if": {}, "then": {}, "relation": "derived_from"}]})
    with pytest.raises(ValidationError):
        load_rules({"implies": [{"name": "x", "if": {}, "then": {}, "relation": "derived_from",
                                 "direction": "sources", "same_attribute": "k"}]})


def test_derived_from_rule_compiles_pairs_for_present_items(now: Any) -> None:
    a = MemIR.model_validate({"content": "turn a", "provenance": {"user_id": "u"}})
    b = MemIR.model_validate({"content": "turn b", "provenance": {"user_id": "u"}})
    s = MemIR.model_validate({"content": "sum", "provenance": {"user_id": "u", "derived_from": [a.id, b.id, "mem_gone"]},
                              "metadata": {"tags": ["summary"]}})
    up = RuleSet(implies=[SummaryPolicy(keep_rule="summary_needs_sources").implies_rule()])  # type: ignore[list-item]
    down = RuleSet(implies=[SummaryPolicy(keep_rule="sources_need_summary").implies_rule()])  # type: ignore[list-item]
    assert [(x, y) for x, y, _ in up.compile([a, b, s], now).implies] == [(2, 0), (2, 1)]
    assert [(x, y) for x, y, _ in down.compile([a, s], now).implies] == [(0, 1)]


def test_extractive_summary_and_coverage_metric() -> None:
    recs = [MemIR.model_validate({"content": t, "provenance": {"user_id": "u"}}) for t in TURNS]
    text, src = extract_summary(recs, [0.9, 0.1, 0.8, 0.1], SummaryPolicy(max_turns=2, max_sentences=3))
    assert src == [recs[0].id, recs[2].id] and text.count(".") >= 3
    assert {"40k", "2024-03-05", "Dana", "Kim", "Oslo", "ORX-7781", "EUR", "12"} <= key_facts(TURNS[0] + " " + TURNS[2])
    assert fact_recall(TURNS[0], text) == 1.0
    assert fact_recall(TURNS[0], "Dana Kim said nothing") == pytest.approx(2 / len(key_facts(TURNS[0])))
    assert fact_recall("short words only", "") == 0.0 and fact_recall("ok so it is", "ok") is None
    assert lead_summary(TURNS, SummaryPolicy(max_sentences=1)).startswith("The budget for project Orion")
