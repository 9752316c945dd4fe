"""The store: exact round-trips, all-or-nothing batches, bad input refused by name, snapshots,
encoder mismatch + reembed, and two store objects on one WAL file."""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import EMBED_DIM, memir_records, unit_vectors
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime import AssemblerConfig, MemIR, MemoryStore, RecordConfig, Sensitivity, StoreConfig
from runtime.encoders import HashEmbedder
from runtime.errors import (
    ContentTooLargeError,
    EncoderMismatchError,
    FilterError,
    NotFoundError,
    ValidationError,
    VectorError,
)
from tests.pg import is_url
from tests.pg import table_counts as pg_table_counts

TABLES = ("memories", "vectors", "memory_tags", "memory_parents", "recall_log")


def table_counts(path: str | Path) -> dict[str, int]:
    """Row counts read through a separate connection (what is really committed in the store)."""
    if is_url(path):
        return pg_table_counts(str(path), TABLES)
    con = sqlite3.connect(path)
    try:
        return {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES}
    finally:
        con.close()


# ---------------------------------------------------------------- round trip
@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(recs=st.lists(memir_records(user_id="u1", agent_id="a1", with_parents=False), min_size=1, max_size=5,
                     unique_by=lambda r: r.id),
       parent_links=st.lists(st.tuples(st.integers(0, 4), st.integers(0, 4)), max_size=4))
def test_store_round_trips_records_exactly(store_target: Callable[[str], Any], recs: list[MemIR],
                                           parent_links: list[tuple[int, int]]) -> None:
    # derived_from may only point at memories that exist: link each record to earlier ones
    recs = list(recs)
    for child, parent in parent_links:
        if parent < child < len(recs):
            p = recs[child].provenance.model_copy(
                update={"derived_from": sorted({*recs[child].provenance.derived_from, recs[parent].id})})
            recs[child] = recs[child].model_copy(update={"provenance": p})
    path = store_target(f"rt-{uuid.uuid4().hex}.sqlite")  # a fresh store per example
    with MemoryStore.open(path, embedder=HashEmbedder(dim=EMBED_DIM), config=StoreConfig(annotate=AssemblerConfig(record=RecordConfig(redact=False)))) as st_:
        scope = st_.scope(user_id="u1", agent_id="a1")
        for r in recs:
            assert scope.write(r) == r
        for r in recs:
            got = scope.get(r.id)
            assert got == r
            assert got.model_dump_json() == r.model_dump_json()
        listed = scope.list(tier="any", include_expired=True)
        assert [x.id for x in listed] == [r.id for r in recs]  # oldest first = write order
        assert listed == recs
    with MemoryStore.open(path, embedder=HashEmbedder(dim=EMBED_DIM)) as again:  # survives reopen
        assert again.scope(user_id="u1", agent_id="a1").list(tier="any", include_expired=True) == recs


def test_round_trip_with_redaction_changes_only_content_and_sensitivity(store: MemoryStore) -> None:
    me = store.scope(user_id="alice")
    rec = MemIR.model_validate({
        "content": "Write to alice.smith@example.com about the refund",
        "provenance": {"user_id": "alice", "session_id": "s1", "source_entity": "alice"},
        "role_context": {"active_role": "support", "sub_role": "refunds"},
        "metadata": {"confidence": 0.8, "tags": ["refund"], "freshness_half_life": "P7D"}})
    out = me.write(rec)
    assert "alice.smith@example.com" not in out.content and "[EMAIL]" in out.content
    assert out.metadata.sensitivity == Sensitivity.pii
    expected = rec.model_copy(update={
        "content": out.content, "metadata": rec.metadata.model_copy(update={"sensitivity": Sensitivity.pii})})
    assert out == expected
    assert me.get(rec.id) == expected


def test_flat_keyword_write_fills_the_typed_record(store: MemoryStore, now: Any) -> None:
    me = store.scope(user_id="bob", agent_id="planner")
    r = me.write("Trip to Lisbon in May", source_type="external_ingest", session_id="s9", sub_role="travel",
                 dialog_role="tool", confidence=0.7, expires_at=now + timedelta(days=3), tags=["trip"],
                 flags=["pinned"], freshness_half_life=timedelta(days=2), attributes={"city": "Lisbon"})
    assert (r.provenance.user_id, r.provenance.agent_id) == ("bob", "planner")
    assert r.provenance.type.value == "external_ingest" and r.provenance.session_id == "s9"
    assert r.role_context.sub_role == "travel" and r.role_context.dialog_role.value == "tool"
    assert r.metadata.freshness_half_life == timedelta(days=2) and r.metadata.attributes == {"city": "Lisbon"}
    assert me.get(r.id) == r


def test_returned_records_are_independent_copies(store: MemoryStore) -> None:
    me = store.scope(user_id="alice")
    r = me.write("hello", tags=["x"], attributes={"k": 1})
    got = me.get(r.id)
    got.metadata.tags.append("MUTATED")
    got.metadata.confidence = 0.1
    got.provenance.derived_from.append("zzz")
    assert me.get(r.id) == r and me.list() == [r]  # later reads are not affected


def test_a_scope_cannot_write_into_another_scope(store: MemoryStore) -> None:
    with pytest.raises(ValidationError) as ei:
        store.scope(user_id="alice").write(MemIR(content="x", provenance={"user_id": "mallory"}))
    assert ei.value.field == "provenance.user_id"
    with pytest.raises(ValidationError, match="valid fields"):
        store.scope(user_id="alice").write("x", user_id="mallory")  # type: ignore[call-arg]
    assert store.admin_users() == []


@pytest.mark.parametrize("field", ["user_id", "agent_id"])
@pytest.mark.parametrize("value", ["", "a b", "u1\n", "x" * 129, "é", 7, None])
def test_a_scope_of_a_bad_id_is_refused_by_name(store: MemoryStore, field: str, value: Any) -> None:
    """The ids a scope confines everything to are checked before any SQL: a typed error naming the
    argument (a trailing newline too, which a bare ``$`` in the pattern would let through)."""
    with pytest.raises(ValidationError) as e:
        store.scope(**{"user_id": "u1", field: value})
    assert e.value.field == field
    assert store.scope(user_id="u.1:a@b-c_d", agent_id="x" * 128).user_id == "u.1:a@b-c_d"


# ---------------------------------------------------------------- bad input
@pytest.mark.parametrize(("kwargs", "error", "field", "words"), [
    ({"confidence": 1.5}, ValidationError, "metadata.confidence", ["metadata.confidence"]),
    ({"source_type": "gossip"}, ValidationError, "provenance.type", ["provenance.type"]),
    ({"session_id": "s1; DROP TABLE memories"}, ValidationError, "provenance.session_id", ["session_id"]),
    ({"embedding": [float("nan")] * EMBED_DIM}, VectorError, "embedding", ["NaN"]),
    ({"embedding": [1.0] * (EMBED_DIM + 3)}, VectorError, "embedding", [str(EMBED_DIM + 3), str(EMBED_DIM)]),
    ({"embedding": [0.0] * EMBED_DIM}, VectorError, "embedding", ["zeros"]),
    ({"colour": "blue"}, ValidationError, "colour", ["colour", "valid fields", "confidence", "session_id"]),
])
def test_bad_write_is_refused_by_name_and_writes_nothing(store: MemoryStore, kwargs: dict[str, Any],
                                                         error: type[Exception], field: str,
                                                         words: list[str]) -> None:
    me = store.scope(user_id="alice")
    me.write("a good memory")
    before = table_counts(store.path)
    with pytest.raises(error) as ei:
        me.write("a bad memory", **kwargs)
    assert ei.value.field == field
    for w in words:
        assert w in str(ei.value)
    assert table_counts(store.path) == before


def test_oversized_content_names_the_configurable_limit(make_store: Callable[..., MemoryStore]) -> None:
    st_ = make_store(config=StoreConfig(annotate=AssemblerConfig(record=RecordConfig(max_content_chars=100,
                                                                                      long_content="reject"))))
    me = st_.scope(user_id="alice")
    me.write("x" * 100)  # exactly at the limit is fine
    before = table_counts(st_.path)
    with pytest.raises(ContentTooLargeError) as ei:
        me.write("x" * 101)
    assert ei.value.field == "content"
    assert "101" in str(ei.value) and "100" in str(ei.value) and "max_content_chars" in str(ei.value)
    assert table_counts(st_.path) == before


def test_long_content_is_kept_as_an_excerpt_by_default(store: MemoryStore) -> None:
    me = store.scope(user_id="alice")
    text = "HEADWORD " + "lorem ipsum " * 2000 + " TAILWORD"  # 24k characters
    rec = me.write(text)
    assert len(rec.content) <= 16_000 and rec.content.startswith("HEADWORD") and rec.content.endswith("TAILWORD")
    assert "characters omitted" in rec.content and rec.metadata.attributes["content_chars"] == len(text)
    assert me.get(rec.id) == rec


def test_store_config_validates_every_field_at_once() -> None:
    with pytest.raises(ValidationError) as ei:
        StoreConfig(busy_timeout_ms=-1, candidate_pool=0)
    assert {f for f, _ in ei.value.problems} == {"busy_timeout_ms", "candidate_pool"}
    with pytest.raises(ValidationError) as ei:
        RecordConfig(max_content_chars=0, long_content="truncate")  # type: ignore[arg-type]
    assert {f for f, _ in ei.value.problems} == {"max_content_chars", "long_content"}


SQL_LIKE = ["x' OR 1=1 --", "; DROP TABLE memories", "s1') OR ('1'='1"]


@pytest.mark.parametrize("value", SQL_LIKE)
@pytest.mark.parametrize("name", ["sessions", "exclude_sessions", "task_ids", "roles", "sub_roles", "tags",
                                  "source_types", "dialog_roles", "sensitivity", "since", "until",
                                  "min_confidence", "tier"])
def test_sql_looking_filter_values_raise_filter_error_naming_the_field(store: MemoryStore, name: str,
                                                                        value: str) -> None:
    me = store.scope(user_id="alice")
    me.write("a memory", session_id="s1", tags=["t"])
    arg: Any = value if name in ("sensitivity", "since", "until", "min_confidence", "tier") else [value]
    for call in (lambda: me.list(**{name: arg}), lambda: me.count(**{name: arg}),
                 lambda: me.recall("memory", k=3, **{name: arg})):
        with pytest.raises(FilterError) as ei:
            call()
        assert ei.value.field is not None and ei.value.field.split(".")[0] == name
        assert name in str(ei.value)
    assert me.count() == 1  # the table is still there and untouched


def test_unknown_filter_lists_the_valid_ones(store: MemoryStore) -> None:
    with pytest.raises(FilterError) as ei:
        store.scope(user_id="alice").list(user_id="bob")
    assert ei.value.field == "user_id"
    assert "valid filters" in str(ei.value) and "sessions" in str(ei.value)


def test_scope_ids_are_validated(store: MemoryStore) -> None:
    with pytest.raises(ValidationError) as ei:
        store.scope(user_id="alice' OR 1=1 --")
    assert ei.value.field == "user_id"
    with pytest.raises(ValidationError) as ei:
        store.scope(user_id="alice", agent_id="")
    assert ei.value.field == "agent_id"


# ---------------------------------------------------------------- all-or-nothing batches
def _bad_items(rng: np.random.Generator) -> dict[str, tuple[Any, type[Exception], str]]:
    nan = unit_vectors(rng, 1)[0].tolist()
    nan[3] = float("nan")
    return {
        "invalid field": ({"content": "ok", "confidence": 7}, ValidationError, "[2].metadata.confidence"),
        "unknown field": ({"content": "ok", "colour": "red"}, ValidationError, "[2].colour"),
        "oversized": ({"content": "y" * 201}, ContentTooLargeError, "[2].content"),
        "nan vector": ({"content": "ok", "embedding": nan}, VectorError, "[2].embedding"),
        "wrong dim": ({"content": "ok", "embedding": [0.5] * 10}, VectorError, "[2].embedding"),
        "dup in batch": ({"content": "ok", "id": "dup_1"}, ValidationError, "[2].id"),
        "id taken": ({"content": "ok", "id": "existing_1"}, ValidationError, "[2].id"),
        "id of other user": ({"content": "ok", "id": "bobs_1"}, ValidationError, "[2].id"),
        "missing parent": ({"content": "ok", "derived_from": ["nope_1"]}, ValidationError,
                           "[2].provenance.derived_from"),
        "other user's parent": ({"content": "ok", "derived_from": ["bobs_1"]}, ValidationError,
                                "[2].provenance.derived_from"),
        "not a record": (42, ValidationError, "[2].content"),
    }


@pytest.mark.parametrize("case", list(_bad_items(np.random.default_rng(0))))
def test_write_many_is_all_or_nothing(make_store: Callable[..., MemoryStore], rng: np.random.Generator,
                                      case: str) -> None:
    st_ = make_store(config=StoreConfig(annotate=AssemblerConfig(record=RecordConfig(max_content_chars=200,
                                                                                      long_content="reject"))))
    st_.scope(user_id="bob").write("bob's memory", id="bobs_1")
    me = st_.scope(user_id="alice")
    me.write("an existing memory", id="existing_1")
    bad, error, field = _bad_items(rng)[case]
    items = [{"content": "first", "id": "dup_1"}, {"content": "second", "derived_from": ["existing_1"]},
             bad, {"content": "fourth"}]
    before = table_counts(st_.path)
    with pytest.raises(error) as ei:
        me.write_many(items)
    assert ei.value.field == field
    assert "item 2" in str(ei.value)
    assert table_counts(st_.path) == before
    assert me.count() == 1 and [r.id for r in me.list()] == ["existing_1"]


def test_write_many_accepts_parents_inside_the_batch(store: MemoryStore, rng: np.random.Generator) -> None:
    me = store.scope(user_id="alice")
    vecs = unit_vectors(rng, 3)
    out = me.write_many([{"content": "root", "id": "r1", "embedding": vecs[0]},
                         {"content": "child", "derived_from": ["r1"], "embedding": vecs[1]},
                         MemIR.model_validate({"content": "as a record", "provenance": {"user_id": "alice"}})])
    assert [r.content for r in me.list()] == ["root", "child", "as a record"]
    assert out[1].provenance.derived_from == ["r1"]
    # precomputed vectors are stored normalised, exactly
    _, mat, _ = me.list_with_vectors()
    np.testing.assert_array_equal(mat[:2], vecs[:2])


# ---------------------------------------------------------------- snapshot
def test_snapshot_is_one_parseable_record_per_line(store: MemoryStore, tmp_path: Path, now: Any) -> None:
    me = store.scope(user_id="alice")
    written = [me.write(f"memory {i} about topic {i % 3}", session_id=f"s{i % 2}", tags=[f"t{i}"],
                        expires_at=(now - timedelta(days=1)) if i == 4 else None) for i in range(6)]
    store.scope(user_id="bob").write("bob's memory is not in alice's snapshot")
    path = tmp_path / "alice.jsonl"
    assert me.snapshot(path) == 6
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 6
    emb = store.embedder
    for line, rec in zip(lines, written):
        body = json.loads(line)
        vec = np.asarray(body.pop("embedding"), dtype=np.float32)
        assert body.pop("encoder_id") == emb.encoder_id
        assert vec.shape == (emb.dim,)
        np.testing.assert_allclose(vec, emb.encode([rec.content])[0], rtol=0, atol=1e-7)
        assert MemIR.model_validate(body) == rec  # expired ones too: the snapshot is the whole state


# ---------------------------------------------------------------- encoder change
def test_encoder_mismatch_is_detected_and_reembed_fixes_it(store_target: Callable[[str], Any]) -> None:
    path = store_target("mem.sqlite")
    with MemoryStore.open(path, embedder=HashEmbedder(dim=EMBED_DIM, seed=0)) as st0:
        st0.scope(user_id="alice").write_many([f"fact number {i} about tea" for i in range(5)])
    with MemoryStore.open(path, embedder=HashEmbedder(dim=EMBED_DIM, seed=1)) as st1:
        me = st1.scope(user_id="alice")
        with pytest.raises(EncoderMismatchError) as ei:
            me.recall("tea", k=2)
        msg = str(ei.value)
        assert "hash-64-s0" in msg and "hash-64-s1" in msg and "reembed" in msg
        with pytest.raises(EncoderMismatchError):
            me.list_with_vectors()
        assert st1.reembed() == 5
        assert st1.reembed() == 0  # idempotent
        hits = me.recall("fact number 3 about tea", k=1)
        assert hits[0].record.content == "fact number 3 about tea"
        assert st1.admin_stats()["encoders"] == {"hash-64-s1": 5}


# ---------------------------------------------------------------- concurrency and lifecycle
def test_two_store_objects_on_one_file_see_each_other(tmp_path: Path, embedder: HashEmbedder) -> None:
    path = tmp_path / "shared.sqlite"
    with MemoryStore.open(path, embedder=embedder) as a, MemoryStore.open(path, embedder=embedder) as b:
        with sqlite3.connect(path) as raw:
            assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        sa, sb = a.scope(user_id="alice"), b.scope(user_id="alice")
        sa.write("the boiler code is 4471")
        assert [h.record.content for h in sb.recall("boiler code", k=3)] == ["the boiler code is 4471"]
        r2 = sb.write("the garage code is 9902")  # b's own write, then a's view
        assert {h.record.content for h in sa.recall("code", k=3)} == {"the boiler code is 4471",
                                                                     "the garage code is 9902"}
        assert {h.record.content for h in sb.recall("code", k=3)} == {"the boiler code is 4471",
                                                                     "the garage code is 9902"}
        sa.forget(r2.id, cascade="delete")  # a deletes; b's cache must not resurrect it
        assert [h.record.content for h in sb.recall("code", k=3)] == ["the boiler code is 4471"]
        with pytest.raises(NotFoundError):
            sb.get(r2.id)


def test_own_writes_are_visible_to_the_next_recall(store: MemoryStore) -> None:
    me = store.scope(user_id="alice")
    for i in range(5):  # recall between writes: the vector cache must pick up this connection's commits
        me.write(f"note {i} about the garden")
        assert len(me.recall("garden", k=10)) == i + 1


def test_close_is_idempotent_and_a_closed_store_refuses_work(store_target: Callable[[str], Any],
                                                            embedder: HashEmbedder) -> None:
    with MemoryStore.open(store_target("m.sqlite"), embedder=embedder) as st_:
        me = st_.scope(user_id="alice")
        me.write("hello")
    st_.close()
    with pytest.raises(ValidationError) as ei:
        me.list()
    assert ei.value.field == "store"
    with pytest.raises(ValidationError):
        st_.scope(user_id="alice")


def test_in_memory_store_works(embedder: HashEmbedder) -> None:
    with MemoryStore.open(":memory:", embedder=embedder) as st_:
        me = st_.scope(user_id="alice")
        me.write("Alice's flight is on 3 May", sub_role="travel")
        assert me.recall("flight", k=1)[0].record.content == "Alice's flight is on 3 May"
        assert st_.forget_user("alice") == 1 and me.count() == 0
