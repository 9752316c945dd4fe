"""Freshness by default (seed 000 §2.1, §3.3; issue 27 item 2): a memory that declares no half-life
decays in recall by the store's default for its source type and dialog role; a declared one wins;
``None`` (per kind, or the whole setting) and ``NEVER`` mean "never decays". Both backends."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import numpy as np
import pytest

from runtime import NEVER, FreshnessConfig, MemoryStore, StoreConfig
from runtime.errors import ValidationError
from tests.conftest import unit_vectors

DAY = timedelta(days=1)


def _freshness(store: MemoryStore, now: datetime, rng: np.random.Generator, **fields: Any) -> float:
    """The freshness factor recall gives one 30-day-old memory written with ``fields``."""
    me = store.scope(user_id="alice", agent_id="f")
    v = unit_vectors(rng, 1)[0]
    rec = me.write("a memory", embedding=v, timestamp=now - 30 * DAY, **fields)
    (hit,) = me.recall(v, k=1, now=now)
    assert hit.record.id == rec.id
    me.forget(rec.id)
    return hit.score.freshness


def test_an_old_policy_no_longer_outranks_todays_with_the_real_encoder(
        make_store: Callable[..., MemoryStore], onnx_encoder: Any, now: datetime) -> None:
    """The issue's case: a 60-day-old "rotate every 90 days" against today's "rotate every 30 days"."""
    store = make_store(embedder=onnx_encoder)
    me = store.scope(user_id="alice")
    doc = {"source_type": "external_ingest"}
    old = me.write("Rotate the API keys every 90 days.", timestamp=now - 60 * DAY, **doc)
    new = me.write("Rotate the API keys every 30 days.", timestamp=now, **doc)
    query = "How often should we rotate the API keys?"
    hits = me.recall(query, k=2, now=now)
    assert [h.record.id for h in hits] == [new.id, old.id]
    assert hits[1].score.freshness == pytest.approx(0.5 ** (60 / 90), rel=1e-9)
    assert hits[0].score.similarity < hits[1].score.similarity   # the old one is the closer text
    plain = make_store("plain.sqlite", embedder=onnx_encoder, config=StoreConfig(freshness=None))
    again = plain.scope(user_id="alice")
    again.write("Rotate the API keys every 90 days.", timestamp=now - 60 * DAY, **doc)
    again.write("Rotate the API keys every 30 days.", timestamp=now, **doc)
    assert again.recall(query, k=1, now=now)[0].record.content.endswith("90 days.")  # without: stale wins


@pytest.mark.parametrize("fields,half_life_days", [
    ({}, None),                                                             # what a user says: never
    ({"source_type": "external_ingest"}, 90),                               # a document
    ({"source_type": "derived_inference"}, 30),                             # the agent's inference
    ({"source_type": "system_feedback", "dialog_role": "system"}, 7),
    ({"dialog_role": "tool"}, 7),                                           # tool output, any source
    ({"source_type": "external_ingest", "dialog_role": "tool"}, 7),
    ({"freshness_half_life": timedelta(days=10)}, 10),                      # declared wins
    ({"source_type": "system_feedback", "freshness_half_life": timedelta(days=60)}, 60),
])
def test_default_half_life_by_source_type_and_dialog_role(store: MemoryStore, now: datetime,
                                                          rng: np.random.Generator, fields: dict[str, Any],
                                                          half_life_days: float | None) -> None:
    want = 1.0 if half_life_days is None else 0.5 ** (30 / half_life_days)
    assert _freshness(store, now, rng, **fields) == pytest.approx(want, rel=1e-9)


def test_never_exempts_one_memory_and_none_turns_defaults_off(make_store: Callable[..., MemoryStore], now: datetime,
                                                              rng: np.random.Generator) -> None:
    store = make_store()
    assert _freshness(store, now, rng, freshness_half_life=NEVER) == 1.0
    assert _freshness(store, now, rng, source_type="system_feedback", freshness_half_life=NEVER) == 1.0
    off = make_store("off.sqlite", config=StoreConfig(freshness=None))
    assert _freshness(off, now, rng) == _freshness(off, now, rng, dialog_role="tool") == 1.0
    assert _freshness(off, now, rng, freshness_half_life=timedelta(days=30)) == pytest.approx(0.5)
    docs = make_store("docs.sqlite", config=StoreConfig(
        freshness=FreshnessConfig({"external_ingest": None, "direct_interaction": timedelta(days=15)})))
    assert _freshness(docs, now, rng, source_type="external_ingest") == 1.0           # None: never decays
    assert _freshness(docs, now, rng) == pytest.approx(0.25)                         # overridden
    assert _freshness(docs, now, rng, source_type="derived_inference") == pytest.approx(0.5)  # inherited
    only = make_store("only.sqlite", config=StoreConfig(
        freshness=FreshnessConfig({"*/tool": timedelta(days=30)}, inherit=False)))
    assert _freshness(only, now, rng) == 1.0
    assert _freshness(only, now, rng, dialog_role="tool") == pytest.approx(0.5)


def test_the_stored_record_keeps_what_was_declared(store: MemoryStore, now: datetime) -> None:
    """The default is the store's policy, applied at recall: a record says only what its writer
    declared (so the utility model, which reads the record, sees what it was trained on)."""
    me = store.scope(user_id="alice")
    r = me.write("plain", timestamp=now - DAY)
    assert me.get(r.id).metadata.freshness_half_life is None
    n = me.write("exempt", freshness_half_life=NEVER)
    assert me.get(n.id).metadata.freshness_half_life == NEVER


@pytest.mark.parametrize("half_lives,field", [
    ({"forum_post": timedelta(days=1)}, "half_lives['forum_post']"),
    ({"external_ingest/narrator": timedelta(days=1)}, "half_lives['external_ingest/narrator']"),
    ({"*": timedelta(days=1)}, "half_lives['*']"),
    ({"external_ingest": timedelta(0)}, "half_lives['external_ingest']"),
    ({"external_ingest": 3600}, "half_lives['external_ingest']"),
])
def test_a_bad_setting_is_named(half_lives: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as ei:
        FreshnessConfig(half_lives)
    assert ei.value.field == field
    with pytest.raises(ValidationError) as ei:
        StoreConfig(freshness={"external_ingest": None})  # type: ignore[arg-type]
    assert ei.value.field == "freshness"
