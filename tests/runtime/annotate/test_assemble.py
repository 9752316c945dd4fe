"""The write-side assembler: roles, sessions, confidence, parents, urgency and redaction."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from runtime.annotate.assembler import (
    AgentContext,
    AssemblerConfig,
    ContextAssembler,
    RoleConfig,
    SessionConfig,
)
from runtime.annotate.extract import extract_candidates
from runtime.encoders import HashEmbedder
from runtime.errors import ValidationError
from runtime.record import DEFAULT_CONFIDENCE, DialogRole, Flag, MemIR, RecordConfig, Sensitivity, SourceType
from runtime.record.redaction import RedactionKind

T0 = datetime(2024, 1, 1, 9, 0, 0, tzinfo=UTC)
CTX = AgentContext(user_id="u1", agent_id="a1", active_role="support", sub_role="general_help", tone="patient",
                   task_id="t_42")
ROLES = RoleConfig(
    rules={"billing": [r"\binvoice", r"\brefund", r"\bcharged?\b"], "technical": [r"\berror\b", r"\bcrash"]},
    descriptions={"billing": "invoice refund payment charge billing card subscription",
                  "technical": "error crash bug login app install update driver"},
    parents={"billing": "support", "technical": "tech_support"},
    min_similarity=0.3,
)
FLIGHT = ["Book a flight to Paris on Friday morning", "The Paris flight on Friday should have a window seat",
          "Friday flight to Paris: add a checked bag"]
OFF_TOPIC = "My printer driver crashed while installing new firmware"


class SpyEmbedder(HashEmbedder):
    """A HashEmbedder that records what it was asked to encode."""

    def __init__(self) -> None:
        super().__init__(dim=256, seed=0)
        self.seen: list[str] = []

    def encode(self, texts: Sequence[str], *, batch_size: int = 64) -> np.ndarray:
        self.seen.extend(texts)
        return super().encode(texts, batch_size=batch_size)


class Clock:
    def __init__(self, t: datetime = T0) -> None:
        self.t = t

    def __call__(self) -> datetime:
        return self.t


def make(config: AssemblerConfig | None = None, **kw: object) -> ContextAssembler:
    kw.setdefault("embedder", SpyEmbedder())
    kw.setdefault("clock", Clock())
    return ContextAssembler(config or AssemblerConfig(roles=ROLES), **kw)  # type: ignore[arg-type]


# ------------------------------------------------------------------ roles
def test_role_by_rules_most_hits_wins_and_parent_sets_active_role() -> None:
    a = make(AssemblerConfig(roles=RoleConfig(rules=ROLES.rules, parents=ROLES.parents)), embedder=None)
    tr = a.assemble_traced("I was charged twice; please refund invoice 7 (there was an error)", CTX)
    assert (tr.role.method, tr.role.sub_role, tr.role.active_role) == ("rules", "billing", "support")
    assert tr.role.score == 3 and set(tr.role.matched) == set(ROLES.rules["billing"])
    rec = tr.record
    assert (rec.role_context.active_role, rec.role_context.sub_role) == ("support", "billing")
    tech = a.assemble("The app shows an error after the crash", CTX)
    assert (tech.role_context.active_role, tech.role_context.sub_role) == ("tech_support", "technical")


def test_role_rules_miss_keeps_context_role_without_embedder() -> None:
    a = make(AssemblerConfig(roles=RoleConfig(rules=ROLES.rules)), embedder=None)
    tr = a.assemble_traced("What a lovely day", CTX)
    assert (tr.role.method, tr.role.active_role, tr.role.sub_role) == ("context", "support", "general_help")


def test_role_by_prototype_when_no_rule_matches() -> None:
    spy = SpyEmbedder()
    a = make(embedder=spy)
    tr = a.assemble_traced("The app will not login after the update", CTX, at=T0)
    assert tr.role.method == "prototype" and tr.role.sub_role == "technical"
    assert tr.role.active_role == "tech_support" and tr.role.score is not None and tr.role.score >= 0.3
    low = a.assemble_traced("The weather is lovely in spring", CTX, at=T0)
    assert low.role.method == "context" and low.role.sub_role == "general_help"
    assert low.role.score is not None and low.role.score < 0.3  # nearest prototype too far: fallback


def test_prototypes_are_not_embedded_when_a_rule_decides() -> None:
    spy = SpyEmbedder()
    a = make(AssemblerConfig(roles=ROLES, session=SessionConfig(topic_shift_threshold=None)), embedder=spy)
    a.assemble("please refund my invoice", CTX)
    assert spy.seen == []  # neither prototypes nor the content were encoded


def test_explicit_role_wins_and_bare_sub_role_takes_its_parent() -> None:
    a = make()
    r = a.assemble("refund the invoice", CTX, sub_role="technical")
    assert (r.role_context.active_role, r.role_context.sub_role) == ("tech_support", "technical")
    r2 = a.assemble("refund the invoice", CTX, active_role="sales")
    assert (r2.role_context.active_role, r2.role_context.sub_role) == ("sales", None)


def test_role_descriptions_need_an_embedder() -> None:
    with pytest.raises(ValidationError) as ei:
        ContextAssembler(AssemblerConfig(roles=ROLES))
    assert ei.value.field == "embedder"


# ------------------------------------------------------------------ sessions
def test_session_splits_on_time_gap_with_deterministic_ids() -> None:
    a = make(AssemblerConfig(session=SessionConfig(topic_shift_threshold=None)))
    s1 = a.assemble_traced(FLIGHT[0], CTX, at=T0).session
    s2 = a.assemble_traced(FLIGHT[1], CTX, at=T0 + timedelta(minutes=29)).session
    s3 = a.assemble_traced(FLIGHT[2], CTX, at=T0 + timedelta(minutes=29 + 31)).session
    assert (s1.reason, s1.session_id, s1.new) == ("first", "sess_20240101_090000_1", True)
    assert (s2.reason, s2.session_id, s2.new) == ("continued", s1.session_id, False)
    assert s2.gap == timedelta(minutes=29)
    assert (s3.reason, s3.session_id) == ("time_gap", "sess_20240101_100000_2")
    st = a.session_state("u1", "a1")
    assert st is not None and st.session_id == s3.session_id and st.events == 1 and st.index == 2


def test_gap_threshold_is_configurable() -> None:
    a = make(AssemblerConfig(session=SessionConfig(max_gap=timedelta(minutes=5), topic_shift_threshold=None)))
    a.assemble(FLIGHT[0], CTX, at=T0)
    assert a.assemble_traced(FLIGHT[1], CTX, at=T0 + timedelta(minutes=6)).session.reason == "time_gap"


def test_session_splits_on_topic_shift_and_not_before_min_events() -> None:
    cfg = AssemblerConfig(session=SessionConfig(topic_shift_threshold=0.2, topic_min_events=2))
    a = make(cfg)
    d = [a.assemble_traced(t, CTX, at=T0 + timedelta(minutes=i)).session for i, t in enumerate(FLIGHT)]
    assert [x.reason for x in d] == ["first", "continued", "continued"]
    assert all(x.similarity is not None and x.similarity > 0.2 for x in d[1:])
    shift = a.assemble_traced(OFF_TOPIC, CTX, at=T0 + timedelta(minutes=4)).session
    assert shift.reason == "topic_shift" and shift.new and shift.similarity is not None and shift.similarity < 0.2
    assert shift.session_id == "sess_20240101_090400_2"
    # A fresh session with one event cannot be split by topic yet (min_events=2).
    again = a.assemble_traced(FLIGHT[0], CTX, at=T0 + timedelta(minutes=5)).session
    assert again.reason == "continued" and again.similarity is not None and again.similarity < 0.2


def test_topic_shift_uses_a_given_embedding_without_an_embedder() -> None:
    a = make(AssemblerConfig(session=SessionConfig(topic_min_events=1)), embedder=None)
    x, y = np.eye(8, dtype=np.float32)[0], np.eye(8, dtype=np.float32)[1]
    assert a.assemble_traced("first", CTX, at=T0, embedding=x).session.reason == "first"
    tr = a.assemble_traced("second", CTX, at=T0, embedding=y)
    assert tr.session.reason == "topic_shift" and tr.session.similarity == pytest.approx(0.0)
    np.testing.assert_allclose(tr.embedding, y)
    with pytest.raises(ValidationError, match="dimension") as ei:
        a.assemble("third", CTX, at=T0, embedding=np.ones(4))
    assert ei.value.field == "embedding"


def test_sessions_are_tracked_per_scope_and_forgotten_per_user() -> None:
    a = make(AssemblerConfig(session=SessionConfig(topic_shift_threshold=None)))
    u1 = a.assemble(FLIGHT[0], CTX, at=T0).provenance.session_id
    u2 = a.assemble(FLIGHT[0], {"user_id": "u2", "agent_id": "a1"}, at=T0 + timedelta(hours=2)).provenance.session_id
    assert a.assemble(FLIGHT[1], CTX, at=T0 + timedelta(minutes=10)).provenance.session_id == u1
    assert u2 == "sess_20240101_110000_1" and u1 != u2
    assert a.forget_user("u1") == 1
    assert a.session_state("u1", "a1") is None and a.session_state("u2", "a1") is not None


def test_declared_session_is_adopted_stale_ids_are_ignored_and_seeds_survive_restart() -> None:
    a = make(AssemblerConfig(session=SessionConfig(topic_shift_threshold=None)))
    d = a.assemble_traced(FLIGHT[0], CTX.model_copy(update={"session_id": "chat_9"}), at=T0).session
    assert (d.reason, d.session_id, d.new) == ("declared", "chat_9", True)
    split = a.assemble_traced(FLIGHT[1], CTX, at=T0 + timedelta(hours=1)).session
    assert split.reason == "time_gap"
    # The caller still names chat_9 (stale): the assembler's own session stays current.
    stale = a.assemble_traced(FLIGHT[2], CTX.model_copy(update={"session_id": "chat_9"}),
                              at=T0 + timedelta(hours=1, minutes=1)).session
    assert (stale.reason, stale.session_id) == ("continued", split.session_id)
    # A new process seeded with the caller's view still sees the gap.
    b = make(AssemblerConfig(session=SessionConfig(topic_shift_threshold=None)))
    seeded = CTX.model_copy(update={"session_id": "chat_9", "last_event_at": T0})
    assert b.assemble_traced(FLIGHT[0], seeded, at=T0 + timedelta(hours=3)).session.reason == "time_gap"


def test_out_of_order_event_stays_in_the_current_session() -> None:
    a = make(AssemblerConfig(session=SessionConfig(topic_shift_threshold=None)))
    first = a.assemble(FLIGHT[0], CTX, at=T0).provenance.session_id
    late = a.assemble_traced(FLIGHT[1], CTX, at=T0 - timedelta(hours=5)).session
    assert late.session_id == first and late.reason == "continued"


def test_rejected_record_does_not_move_session_state() -> None:
    a = make(AssemblerConfig(session=SessionConfig(topic_shift_threshold=None)))
    a.assemble(FLIGHT[0], CTX, at=T0)
    before = a.session_state("u1", "a1")
    with pytest.raises(ValidationError) as ei:
        a.assemble(FLIGHT[1], CTX, at=T0 + timedelta(hours=2), tags=["x" * 500])
    assert ei.value.field is not None and ei.value.field.startswith("metadata.tags")
    assert a.session_state("u1", "a1") == before


def test_session_detection_can_be_disabled() -> None:
    a = make(AssemblerConfig(session=SessionConfig(enabled=False)))
    assert a.assemble(FLIGHT[0], CTX, at=T0).provenance.session_id is None
    r = a.assemble(FLIGHT[0], CTX.model_copy(update={"session_id": "s9"}), at=T0 + timedelta(days=1))
    assert r.provenance.session_id == "s9"


# ------------------------------------------------------------------ confidence
@pytest.mark.parametrize(("stype", "want"), [(SourceType.external_ingest, 0.9), (SourceType.direct_interaction, 0.95),
                                             (SourceType.derived_inference, 0.7), (SourceType.system_feedback, 0.99)])
def test_default_confidence_per_source_type(stype: SourceType, want: float) -> None:
    tr = make().assemble_traced("a fact", CTX, source_type=stype)
    assert tr.record.metadata.confidence == want == DEFAULT_CONFIDENCE[stype]
    assert tr.record.provenance.type is stype and tr.confidence_source == "default"


def test_confidence_defaults_are_configurable_and_declared_wins() -> None:
    a = make(AssemblerConfig(roles=ROLES, record=RecordConfig(default_confidence={"external_ingest": 0.5})))
    assert a.assemble("doc", CTX, source_type="external_ingest").metadata.confidence == 0.5
    assert a.assemble("doc", CTX, source_type="system_feedback").metadata.confidence == 0.99  # kept default
    tr = a.assemble_traced("doc", CTX, source_type="external_ingest", confidence=0.8)
    assert tr.record.metadata.confidence == 0.8 and tr.confidence_source == "declared"
    with pytest.raises(ValidationError) as ei:
        a.assemble("doc", CTX, confidence=1.5)
    assert ei.value.field == "metadata.confidence"


def test_bad_configs_name_every_field() -> None:
    with pytest.raises(ValidationError) as ei:
        RecordConfig(default_confidence={"external_ingest": 1.2, "rumour": 0.1}, urgency_patterns=("(",))
    fields = [f for f, _ in ei.value.problems]
    assert fields == ["default_confidence['external_ingest']", "default_confidence['rumour']", "urgency_patterns[0]"]
    with pytest.raises(ValidationError) as ei:
        SessionConfig(max_gap=timedelta(0), topic_shift_threshold=2.0, context_decay=1.0)
    assert [f for f, _ in ei.value.problems] == ["max_gap", "topic_shift_threshold", "context_decay"]
    with pytest.raises(ValidationError) as ei:
        RoleConfig(rules={"billing": ["[unclosed"]}, parents={"sales": "x"}, min_similarity=3)
    assert [f for f, _ in ei.value.problems] == ["rules['billing'][0]", "parents['sales']", "min_similarity"]
    with pytest.raises(ValidationError) as ei:
        AgentContext(user_id="u1'; DROP TABLE memories;--")
    assert ei.value.field == "user_id"
    with pytest.raises(ValidationError, match="provenance.type"):
        make().assemble("x", CTX, source_type="rumour")


# ------------------------------------------------------------------ derived_from
def test_derived_from_must_point_at_existing_ids() -> None:
    existing = {"mem_a", "mem_b"}
    calls: list[list[str]] = []

    def exists(ids: Sequence[str]) -> set[str]:
        calls.append(list(ids))
        return existing & set(ids)

    a = make(exists=exists)
    r = a.assemble("Summary: user flies Friday", CTX, source_type="derived_inference",
                   derived_from=["mem_a", "mem_b", "mem_a"])
    assert r.provenance.derived_from == ["mem_a", "mem_b"] and calls == [["mem_a", "mem_b"]]
    with pytest.raises(ValidationError, match=r"mem_x") as ei:
        a.assemble("Summary", CTX, derived_from=["mem_a", "mem_x"])
    assert ei.value.field == "provenance.derived_from" and "mem_a'" not in str(ei.value).split("missing")[-1]
    # A per-call checker overrides the constructor's.
    assert a.assemble("ok", CTX, derived_from=["mem_z"], exists=lambda ids: set(ids)).provenance.derived_from == ["mem_z"]


def test_derived_from_without_a_checker_and_required_parents() -> None:
    with pytest.raises(ValidationError, match="exists=") as ei:
        make().assemble("x", CTX, derived_from=["mem_a"])
    assert ei.value.field == "provenance.derived_from"
    strict = make(AssemblerConfig(roles=ROLES, record=RecordConfig(inference_requires_parents=True)))
    with pytest.raises(ValidationError, match="derived_from"):
        strict.assemble("guess", CTX, source_type="derived_inference")
    assert strict.assemble("said", CTX).provenance.derived_from == []


# ------------------------------------------------------------------ urgency, defaults, redaction
@pytest.mark.parametrize(("text", "urgent"), [("Please fix the booking ASAP", True), ("这个问题很紧急", True),
                                              ("You must call the hotel by tomorrow", True), ("Payment failed!!", True),
                                              ("The hotel has a pool", False), ("I am in no hurry", False)])
def test_urgency_markers_set_the_urgent_flag(text: str, urgent: bool) -> None:
    assert make().assemble(text, CTX).has_flag(Flag.urgent) is urgent


def test_urgency_patterns_are_configurable_and_flags_merge() -> None:
    a = make(AssemblerConfig(roles=ROLES, record=RecordConfig(urgency_patterns=(r"\bpronto\b",))))
    r = a.assemble("Do it pronto", CTX, flags=["core_instruction"])
    assert r.metadata.flags == [Flag.core_instruction, Flag.urgent]
    assert not a.assemble("Do it ASAP", CTX).has_flag(Flag.urgent)


def test_provenance_and_role_context_are_filled_from_the_context() -> None:
    clock = Clock(T0 + timedelta(seconds=5))
    r = make(clock=clock).assemble("hello", CTX, at=T0)
    assert (r.provenance.user_id, r.provenance.agent_id, r.provenance.timestamp) == ("u1", "a1", T0)
    assert (r.provenance.source_entity, r.provenance.trigger) == ("u1", "user_message")
    assert (r.role_context.tone, r.role_context.task_id, r.role_context.dialog_role) == ("patient", "t_42",
                                                                                          DialogRole.user)
    assert r.created_at == clock.t
    tool = make().assemble("42 rows", CTX, dialog_role="tool", source_type="system_feedback", source_entity="sql")
    assert (tool.provenance.source_entity, tool.provenance.trigger) == ("sql", "tool_result")
    assert MemIR.model_validate_json(r.model_dump_json()) == r


def test_redaction_runs_first_and_raises_sensitivity() -> None:
    spy = SpyEmbedder()
    a = make(embedder=spy)
    raw_key, raw_mail = "sk-proj-abcDEF1234567890ghijKLMNop", "alice@example.com"
    tr = a.assemble_traced(f"Use {raw_key} and mail {raw_mail} about the login bug", CTX)
    rec = tr.record
    assert rec.content == "Use [API_KEY] and mail [EMAIL] about the login bug"
    assert rec.metadata.sensitivity is Sensitivity.secret
    assert {f.kind for f in tr.findings} == {RedactionKind.api_key, RedactionKind.email}
    assert all(raw_key not in s and raw_mail not in s for s in spy.seen)  # the encoder saw redacted text only
    assert raw_key not in repr(tr) and raw_mail not in repr(tr)
    # Declared sensitivity is kept when higher than what redaction found, and raised when lower.
    assert a.assemble("plain text", CTX, sensitivity="secret").metadata.sensitivity is Sensitivity.secret
    assert a.assemble("call +44 20 7946 0958", CTX, sensitivity="none").metadata.sensitivity is Sensitivity.pii


def test_assemble_candidate_from_llm_output() -> None:
    out = ('Booked. <mem tags="travel,seat" flags="core_instruction">Always book aisle seats</mem>\n'
           '```json\n{"new_memories": [{"content": "User card is 4111 1111 1111 1111", "confidence": 0.6}]}\n```')
    a = make()
    c1, c2 = extract_candidates(out)
    r1 = a.assemble_candidate(c1, CTX, at=T0)
    assert r1.provenance.type is SourceType.derived_inference and r1.role_context.dialog_role is DialogRole.agent
    assert r1.metadata.tags == ["travel", "seat"] and r1.metadata.flags == [Flag.core_instruction]
    assert r1.metadata.confidence == 0.7 and r1.provenance.source_entity == "a1"
    r2 = a.assemble_candidate(c2, CTX, at=T0, source_type="direct_interaction")
    assert r2.content == "User card is [CARD]" and r2.metadata.sensitivity is Sensitivity.pii
    assert r2.metadata.confidence == 0.6 and r2.provenance.type is SourceType.direct_interaction


def test_side_fields_are_redacted_too() -> None:
    tr = make().assemble_traced(
        "Imported the customer table", CTX, source_type="external_ingest",
        source_uri="postgres://admin:s3cr3tP4ss@db.example.com/crm", tags=["crm", "bob@example.com"],
        attributes={"contact": "+44 20 7946 0958", "rows": 120})
    rec = tr.record
    assert rec.provenance.source_uri == "postgres://admin:[PASSWORD]@db.example.com/crm"
    assert rec.metadata.tags == ["crm", "[EMAIL]"] and rec.metadata.attributes == {"contact": "[PHONE]", "rows": 120}
    assert rec.metadata.sensitivity is Sensitivity.secret  # found in a side field, not in the content
    assert [(f.kind, f.count) for f in tr.findings] == [(RedactionKind.password, 1), (RedactionKind.email, 1),
                                                        (RedactionKind.phone, 1)]
    assert "s3cr3tP4ss" not in rec.model_dump_json()
