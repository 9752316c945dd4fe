"""Write-time enrichment through ``Scope.write`` on both backends, with the real encoder: tone,
entity tags (filterable), corroboration links and confidence, contradictions flagged on both
sides, a source repeating itself, corrections, batches — and no look at another user's memories."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from conftest import file_bytes

from runtime import AssemblerConfig, MemoryStore, StoreConfig
from runtime.annotate.claims import corroborated_confidence
from runtime.annotate.enrich import EnrichConfig
from runtime.record import Flag

ON = StoreConfig(annotate=AssemblerConfig(enrich=EnrichConfig(tone=True, entities=True, corroborate=True)))


@pytest.fixture(scope="module")
def encoder(onnx_encoder: Any) -> Any:
    return onnx_encoder


@pytest.fixture
def st(make_store: Callable[..., MemoryStore], encoder: Any) -> MemoryStore:
    return make_store(config=ON, embedder=encoder)


def ids(value: Any) -> set[str]:
    return set(str(value or "").split(",")) - {""}


def test_tone_intent_urgency_and_entity_tags_are_stored(st: MemoryStore) -> None:
    me = st.scope(user_id="u1")
    rec = me.write("I'm so angry, you charged me twice for order #8812 and nobody answers my emails")
    got = me.get(rec.id)
    assert got.role_context.tone == "frustrated" and got.metadata.attributes["intent"] == "statement"
    assert got.metadata.tags == ["order:8812"]
    assert [r.id for r in me.list(tags=["order:8812"])] == [rec.id]  # the tag table has them too
    urgent = me.write("Our payment system is down and the shop opens in ten minutes.")
    assert urgent.role_context.tone == "anxious" and Flag.urgent in urgent.metadata.flags
    # the tone the agent must adopt, inferred from the user's emotion (and kept in the store)
    assert got.metadata.attributes["required_tone"] == "empathetic"
    assert me.get(urgent.id).metadata.attributes["required_tone"] == "reassuring"
    assert me.write("I feel calm", tone="patient").role_context.tone == "patient"  # a declared tone wins
    with me.acting_as("support", required_tone="formal"):  # the agent's own choice wins over the inference
        assert me.write("This is unacceptable, I want my money back").metadata.attributes["required_tone"] == "formal"


def test_independent_sources_agree_then_a_third_contradicts(st: MemoryStore) -> None:
    me = st.scope(user_id="u1")
    a = me.write("Budget for project Orion is 40k EUR", sub_role="pm")                     # the user, 0.95
    b = me.write("The Orion project budget is 40,000 EUR", source_type="external_ingest",
                 source_entity="finance-wiki", confidence=0.8)
    assert ids(b.metadata.attributes["corroborated_by"]) == {a.id} and a.id in b.metadata.related
    assert b.metadata.confidence == corroborated_confidence(0.8, [0.95], ON.annotate.enrich) > 0.8
    a_now = me.get(a.id)
    assert ids(a_now.metadata.attributes["corroborated_by"]) == {b.id} and b.id in a_now.metadata.related
    assert a_now.metadata.confidence == a.metadata.confidence  # stored memories keep theirs

    c = me.write("Budget for project Orion is 55k EUR", source_type="external_ingest", source_entity="slack")
    assert ids(c.metadata.attributes["contradicts"]) == {a.id, b.id}
    assert "corroborated_by" not in c.metadata.attributes and c.metadata.confidence == 0.9
    for old in (a, b):
        got = me.get(old.id)
        assert ids(got.metadata.attributes["contradicts"]) == {c.id} and c.id in got.metadata.related


def test_a_source_repeating_itself_links_but_does_not_corroborate(st: MemoryStore) -> None:
    me = st.scope(user_id="u1")
    a = me.write("The customer prefers email over phone calls", source_type="external_ingest",
                 source_entity="crm", confidence=0.8)
    b = me.write("The customer prefers email to phone calls", source_type="external_ingest",
                 source_entity="crm", confidence=0.8)
    assert ids(b.metadata.attributes["corroborated_by"]) == {a.id} and b.metadata.confidence == 0.8
    c = me.write("The customer does not prefer email over phone calls", source_type="external_ingest",
                 source_entity="crm", confidence=0.8)
    assert a.id in ids(c.metadata.attributes.get("contradicts"))


def test_corrections_and_batches(st: MemoryStore) -> None:
    me = st.scope(user_id="u1")
    a = me.write("Delivery is scheduled for March 3")
    new = me.update(a.id, "Delivery is scheduled for March 5")  # a correction does not contradict its old version
    assert "contradicts" not in new.metadata.attributes
    recs = me.write_many([{"content": "The delivery is scheduled for March 5", "source_type": "external_ingest",
                           "source_entity": "carrier"}, "unrelated: the office plant needs water"])
    assert ids(recs[0].metadata.attributes["corroborated_by"]) == {new.id}
    assert recs[0].metadata.confidence > 0.9 and "corroborated_by" not in recs[1].metadata.attributes
    assert ids(me.get(new.id).metadata.attributes["corroborated_by"]) == {recs[0].id}


def test_items_of_one_batch_corroborate_and_contradict_each_other(st: MemoryStore) -> None:
    me = st.scope(user_id="u1")
    recs = me.write_many([
        {"content": "Budget for project Orion is 40k EUR", "source_type": "external_ingest", "source_entity": "wiki"},
        {"content": "The Orion project budget is 40,000 EUR", "source_type": "external_ingest",
         "source_entity": "finance"},
        "unrelated: the office plant needs water",
        {"content": "Budget for project Orion is 55k EUR", "source_type": "external_ingest", "source_entity": "slack"}])
    a, b, plant, c = recs
    assert ids(b.metadata.attributes["corroborated_by"]) == {a.id} and b.metadata.confidence > a.metadata.confidence
    assert ids(c.metadata.attributes["contradicts"]) == {a.id, b.id}
    assert "corroborated_by" not in plant.metadata.attributes and plant.metadata.related == []
    # the earlier items got their back-links in the batch's transaction
    got_a = me.get(a.id)
    assert ids(got_a.metadata.attributes["corroborated_by"]) == {b.id}
    assert ids(got_a.metadata.attributes["contradicts"]) == {c.id} and set(got_a.metadata.related) == {b.id, c.id}


def test_corroboration_never_looks_at_another_user(st: MemoryStore) -> None:
    alice, bob = st.scope(user_id="alice"), st.scope(user_id="bob")
    a = alice.write("Budget for project Orion is 40k EUR")
    b1 = bob.write("Budget for project Orion is 40k EUR", source_type="external_ingest", source_entity="wiki")
    assert b1.metadata.related == [] and b1.metadata.confidence == 0.9  # alice's identical memory is invisible
    b2 = bob.write("Budget for project Orion is 55k EUR", source_type="external_ingest", source_entity="wiki")
    assert b2.metadata.related == [b1.id] and ids(b2.metadata.attributes["contradicts"]) == {b1.id}
    got = alice.get(a.id)
    assert got.metadata.related == [] and set(got.metadata.attributes) == {"intent", "required_tone"}
    assert got.model_dump() == a.model_dump() | {"usage": got.usage.model_dump()}


def test_off_by_default(make_store: Callable[..., MemoryStore], encoder: Any) -> None:
    me = make_store(embedder=encoder).scope(user_id="u1")
    a = me.write("Budget for project Orion is 40k EUR, order #8812, I'm so angry")
    b = me.write("Budget for project Orion is 40k EUR, order #8812, I'm so angry", source_type="external_ingest")
    for r in (a, b):
        assert r.role_context.tone is None and r.metadata.tags == [] and r.metadata.related == []
        assert r.metadata.attributes == {}


def test_forgetting_a_linked_memory_leaves_no_id_behind(st: MemoryStore) -> None:
    me = st.scope(user_id="u1")
    a = me.write("Budget for project Orion is 40k EUR")
    b = me.write("The Orion project budget is 40,000 EUR", source_type="external_ingest", source_entity="wiki")
    c = me.write("Budget for project Orion is 55k EUR", source_type="external_ingest", source_entity="slack")
    assert any(a.id.encode() in blob for blob in file_bytes(st.path).values())  # the scan sees ids
    me.forget(a.id)
    for blob in file_bytes(st.path).values():
        assert a.id.encode() not in blob
    got_b, got_c = me.get(b.id), me.get(c.id)
    assert got_b.metadata.related == [c.id] and "corroborated_by" not in got_b.metadata.attributes
    assert ids(got_c.metadata.attributes["contradicts"]) == {b.id} and got_c.metadata.related == [b.id]


def test_retention_deleting_a_linked_memory_leaves_no_id_behind(st: MemoryStore) -> None:
    from runtime import FakeScorer
    me = st.scope(user_id="u1")
    a = me.write("Budget for project Orion is 40k EUR")
    b = me.write("The Orion project budget is 40,000 EUR", source_type="external_ingest", source_entity="wiki")
    assert a.id in me.get(b.id).metadata.related
    d = me.retain(capacity=1, scorer=FakeScorer({a.id: 0.1, b.id: 0.9}), forgotten="delete")
    assert d.deleted == [a.id]
    got_b = me.get(b.id)
    assert got_b.metadata.related == [] and "corroborated_by" not in got_b.metadata.attributes
    assert me.explain(a.id).state == "deleted"  # the decision log keeps why (retention, not forget)


def test_the_async_scope_enriches_too(st: MemoryStore) -> None:
    import asyncio

    async def main() -> tuple[Any, Any]:
        me = st.scope(user_id="u1")
        a = await me.awrite("Budget for project Orion is 40k EUR")
        b = await me.awrite("Budget for project Orion is 40k EUR", source_type="external_ingest", source_entity="wiki")
        return a, b

    a, b = asyncio.run(main())
    assert b.metadata.related == [a.id] and b.metadata.confidence > 0.9 and b.metadata.tags == ["project:orion"]


def test_an_assembly_is_corroborated_by_the_store(st: MemoryStore, encoder: Any) -> None:
    from runtime.annotate import AgentContext, ContextAssembler

    me = st.scope(user_id="u1")
    a = me.write("Budget for project Orion is 40k EUR")
    asm = ContextAssembler(ON.annotate, embedder=encoder)
    got = asm.assemble_traced("Budget for project Orion is 55k EUR", AgentContext(user_id="u1"),
                              source_type="external_ingest", source_entity="slack")
    assert got.record.metadata.tags == ["project:orion"]                    # the assembler's enrichment
    rec = me.write(got)
    assert ids(rec.metadata.attributes["contradicts"]) == {a.id}           # the store's corroboration
    assert ids(me.get(a.id).metadata.attributes["contradicts"]) == {rec.id}
