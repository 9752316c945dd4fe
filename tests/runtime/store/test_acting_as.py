"""The agent's live role context reaches every write and recall (seed 000 §3.1, §4.4): inside
``scope.acting_as(...)`` a write takes the role, sub-role, task and required tone the caller did not
give, and a recall re-ranks by the role; on both backends."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from runtime import MemoryStore, StoreConfig
from runtime.annotate import AssemblerConfig, RoleConfig
from runtime.errors import ValidationError


def test_writes_inside_the_block_carry_the_agents_role_task_and_required_tone(store: MemoryStore) -> None:
    me = store.scope(user_id="alice")
    before = me.write("The user asked about opening hours")
    with me.acting_as("support", "billing", task_id="T-7", required_tone="calm") as s:
        assert s is me
        r = me.write("The invoice for March was charged twice")
        own = me.write("The user wants a refund", sub_role="refunds")             # its own sub-role wins
        other = me.write("The user may upgrade to the team plan", active_role="sales")  # its own role wins
        told = me.write("Noted", attributes={"channel": "chat"})
    after = me.write("The user said goodbye")
    rc = r.role_context
    assert (rc.active_role, rc.sub_role, rc.task_id) == ("support", "billing", "T-7")
    assert r.metadata.attributes["required_tone"] == "calm"
    assert (own.role_context.active_role, own.role_context.sub_role) == ("support", "refunds")
    assert (other.role_context.active_role, other.role_context.sub_role) == ("sales", None)
    assert told.metadata.attributes == {"channel": "chat", "required_tone": "calm"}
    for rec in (before, after):                                                       # only inside the block
        assert (rec.role_context.active_role, rec.role_context.sub_role, rec.role_context.task_id) == (
            "general", None, None)
        assert "required_tone" not in rec.metadata.attributes
    assert me.get(r.id) == r                                                          # stored as returned


def test_blocks_nest_restore_and_refuse_bad_labels(store: MemoryStore) -> None:
    me = store.scope(user_id="alice")
    with me.acting_as("support", "billing"):
        with me.acting_as("sales", "leads"):
            inner = me.write("inner")
        outer = me.write("outer")
        with pytest.raises(ValidationError):
            with me.acting_as("", "x"):
                pass
        still = me.write("still billing")
    assert (inner.role_context.active_role, inner.role_context.sub_role) == ("sales", "leads")
    assert outer.role_context.sub_role == still.role_context.sub_role == "billing"
    with pytest.raises(ValidationError):
        with me.acting_as("support", task_id="not an id!"):
            pass


def test_recall_inside_the_block_reranks_by_the_role(store: MemoryStore) -> None:
    me = store.scope(user_id="alice")
    text = "The customer prefers email over phone calls"  # the same text: equal similarity, only roles differ
    billing = me.write(text, active_role="support", sub_role="billing")
    leads = me.write(text, active_role="sales", sub_role="leads")
    with me.acting_as("support", "billing"):
        hits = me.recall(text, k=2)
        assert [h.record.id for h in hits] == [billing.id, leads.id] and hits[0].score.role_match > 1.0
    with me.acting_as("sales", "leads"):
        assert [h.record.id for h in me.recall(text, k=2)] == [leads.id, billing.id]


def test_with_role_rules_a_memory_no_rule_matches_keeps_the_acting_role(
        make_store: Callable[..., MemoryStore]) -> None:
    roles = RoleConfig(rules={"billing": [r"\binvoice"]}, parents={"billing": "support"})
    store = make_store(config=StoreConfig(annotate=AssemblerConfig(roles=roles)))
    me = store.scope(user_id="alice")
    with me.acting_as("sales", "leads"):
        ruled = me.write("Please resend the invoice")
        plain = me.write("The user likes the blue theme")
    assert (ruled.role_context.active_role, ruled.role_context.sub_role) == ("support", "billing")
    assert (plain.role_context.active_role, plain.role_context.sub_role) == ("sales", "leads")


# ---------------------------------------------------------------- the sub-role nobody named (the role model)
def _roles(scope, texts: list[str]) -> list[str | None]:  # type: ignore[no-untyped-def]
    return [scope.write(t).role_context.sub_role for t in texts]


def test_the_shipped_role_model_files_sub_roles_from_the_recent_dialog(
        make_store: Callable[..., MemoryStore], onnx_encoder) -> None:  # type: ignore[no-untyped-def]
    me = make_store(embedder=onnx_encoder).scope(user_id="alice")
    assert _roles(me, ["My invoice for March was charged twice", "Can you refund the second charge?",
                       "Yes please",                                        # vague alone: the dialog decides
                       "I want to book a flight to Lisbon on Friday",       # clear alone: the topic changed
                       "Find papers on retrieval augmented generation",
                       "The weather is nice today"]) == [                   # nothing clear: no sub-role
        "billing", "billing", "billing", "booking", "literature", None]
    assert me.write("Yes please").role_context.active_role == "general"
    with me.acting_as("support", "refunds"):                                # the agent's sub-role wins
        assert me.write("My invoice was charged twice").role_context.sub_role == "refunds"
    assert me.write("My invoice was charged twice", sub_role="complaints").role_context.sub_role == "complaints"


def test_a_batch_is_classified_in_one_model_call_as_its_items_would_be_one_by_one(
        make_store: Callable[..., MemoryStore], onnx_encoder, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """write_many runs the role model once for the whole batch, against the dialog before it (its
    items join the dialog once written): each item gets the sub-role it gets alone in that dialog."""
    from runtime.scoring.role_weights import RoleWeigher

    texts = ["Can you refund the second charge?", "Yes please", "I want to book a flight to Lisbon on Friday",
             "Find papers on retrieval augmented generation", "The weather is nice today"]
    store = make_store(embedder=onnx_encoder)
    alone = []
    for k, t in enumerate(texts):                  # each in a scope whose dialog is the one opening line
        s = store.scope(user_id=f"alone{k}")
        s.write("My invoice for March was charged twice")
        alone.append(s.write(t).role_context)
    batched = store.scope(user_id="batch")
    batched.write("My invoice for March was charged twice")
    calls = []
    real = RoleWeigher.predict
    monkeypatch.setattr(RoleWeigher, "predict", lambda self, x: calls.append(len(x)) or real(self, x))
    got = [r.role_context for r in batched.write_many([*texts, {"content": "Yes please", "sub_role": "complaints"}])]
    assert calls == [2 * len(texts)]               # one call: each named-less item alone and in its context
    assert [(g.active_role, g.sub_role) for g in got[:-1]] == [(a.active_role, a.sub_role) for a in alone]
    assert [g.sub_role for g in got[:4]] == ["billing", "billing", "booking", "literature"]
    assert got[-1].sub_role == "complaints"        # a named sub-role is not asked of the model


def test_the_recent_dialog_forgets_what_was_forgotten(make_store: Callable[..., MemoryStore],
                                                     onnx_encoder) -> None:  # type: ignore[no-untyped-def]
    me = make_store(embedder=onnx_encoder).scope(user_id="alice")
    said = [me.write(t) for t in ("My invoice for March was charged twice", "Can you refund the second charge?")]
    for r in said:
        me.forget(r.id)
    assert me.write("Yes please").role_context.sub_role is None            # no deleted turn steers it


def test_the_role_model_can_be_turned_off_and_skips_other_encoders(
        make_store: Callable[..., MemoryStore], onnx_encoder) -> None:  # type: ignore[no-untyped-def]
    off = make_store(embedder=onnx_encoder, config=StoreConfig(annotate=AssemblerConfig(roles=RoleConfig(model=False))))
    assert off.scope(user_id="a").write("My invoice for March was charged twice").role_context.sub_role is None
    hashed = make_store("hash.sqlite")                                      # the model reads MiniLM vectors only
    assert hashed.scope(user_id="a").write("My invoice for March was charged twice").role_context.sub_role is None
    with pytest.raises(ValidationError) as ei:
        RoleConfig(model_min_weight=0)
    assert ei.value.field == "model_min_weight"
