"""Hot and cold tiers (issue 15): archived memories keep low-precision vectors (int8 / float16), a
recall over the archive still finds them, an access promotes them back (logged, explained, never
a superseded version), formats follow tiers through every path that moves or copies a vector, and
the codec itself is exact enough. Every store test runs on SQLite and PostgreSQL."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import unit_vectors

from runtime import FakeScorer, MemoryStore, StoreConfig
from runtime.errors import ValidationError
from runtime.record import utcnow
from runtime.store import tiers
from runtime.store.migrate import copy_store
from runtime.store.sqlite.schema import STORE_FORMAT as SQLITE_FORMAT

TOPICS = ["invoice refund for order", "router firmware crash", "hiking trip to the alps", "sourdough starter recipe",
          "quarterly tax filing", "guitar string gauge", "kubernetes pod eviction", "cat vaccination schedule"]


def _fill(me: Any, n: int = 24) -> list[Any]:
    return [me.write(f"{TOPICS[i % len(TOPICS)]} note {i}", session_id=f"s{i // 6}") for i in range(n)]


def _archive_all_but(me: Any, keep: int) -> Any:
    """Retain ``keep`` (the newest, by a scorer that prefers higher note numbers); the rest are archived."""
    scorer = FakeScorer(lambda r: float(r.content.rsplit(" ", 1)[-1]) / 100.0)
    return me.retain(capacity=keep, scorer=scorer, method="exact")


def _tiers(st: MemoryStore) -> dict[str, Any]:
    return st.backend.stats()["tiers"]


# --------------------------------------------------------------------------- codec
@pytest.mark.parametrize("fmt", ["float32", "float16", "int8"])
def test_codec_round_trip_is_close_and_unit(fmt: str, rng: np.random.Generator) -> None:
    v = unit_vectors(rng, 50, 384)
    blobs = [tiers.encode(x, fmt) for x in v]
    assert {len(b) for b in blobs} == {tiers.nbytes(fmt, 384)}
    back = tiers.decode_many(blobs, fmt, 384)
    assert back.dtype == np.float32
    assert np.allclose(np.linalg.norm(back, axis=1), 1.0, atol=1e-5)
    cos = (back * v).sum(axis=1)
    assert cos.min() > {"float32": 0.99999, "float16": 0.99999, "int8": 0.9995}[fmt]
    assert np.array_equal(tiers.decode(blobs[3], fmt, 384), back[3])
    # re-encoding a decoded vector gives the same vector bit for bit (copies verify by checksum)
    again = tiers.decode_many([tiers.encode(x, fmt) for x in back], fmt, 384)
    assert np.array_equal(again, back)
    mixed = tiers.decode_rows([(tiers.encode(v[0], "int8"), "int8"), (tiers.encode(v[1], fmt), fmt)], 384)
    assert np.allclose(mixed[1], back[1])


def test_codec_sizes_and_bad_formats() -> None:
    assert (tiers.nbytes("float32", 384), tiers.nbytes("float16", 384), tiers.nbytes("int8", 384)) == (1536, 768, 388)
    with pytest.raises(ValidationError, match="cold_vectors: must be one of"):
        StoreConfig(cold_vectors="int4")
    with pytest.raises(ValidationError, match="promote_on_access"):
        StoreConfig(promote_on_access="yes")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="fmt must be one of"):
        tiers.encode(np.ones(4, np.float32), "bf16")
    zero = tiers.decode(tiers.encode(np.zeros(8, np.float32), "int8"), "int8", 8)
    assert np.array_equal(zero, np.zeros(8, np.float32))  # no division by zero


# --------------------------------------------------------------------------- archive = cold format
@pytest.mark.parametrize("fmt", ["int8", "float16", "float32"])
def test_archived_vectors_are_stored_in_the_cold_format(make_store: Callable[..., MemoryStore], fmt: str) -> None:
    st = make_store(config=StoreConfig(cold_vectors=fmt))
    me = st.scope(user_id="alice")
    _fill(me)
    d = _archive_all_but(me, 8)
    assert len(d.archived) == 16
    t = _tiers(st)
    dim = st.embedder.dim
    assert t["working"] == {"memories": 8, "vector_bytes": 8 * 4 * dim, "formats": {"float32": 8}}
    assert t["archive"] == {"memories": 16, "vector_bytes": 16 * tiers.nbytes(fmt, dim), "formats": {fmt: 16}}
    assert st.backend.stats()["cold_format"] == fmt


def test_a_recall_over_the_archive_ranks_cold_vectors_like_float32(make_store: Callable[..., MemoryStore]) -> None:
    hot = make_store("hot.sqlite", config=StoreConfig(cold_vectors="float32", promote_on_access=False))
    cold = make_store("cold.sqlite", config=StoreConfig(cold_vectors="int8", promote_on_access=False))
    got = {}
    for name, st in (("hot", hot), ("cold", cold)):
        me = st.scope(user_id="alice")
        _fill(me, 40)
        _archive_all_but(me, 4)
        got[name] = {t: me.recall(t, k=10, tier="archive") for t in TOPICS}
    for t in TOPICS:
        a, b = got["hot"][t], got["cold"][t]
        assert all(h.record.content.startswith(t) for h in a[:3] + b[:3])  # the topic's notes lead both
        sims_a = {h.record.content: h.score.similarity for h in a}
        common = [h for h in b if h.record.content in sims_a]
        assert len(common) >= 8
        for h in common:
            assert abs(h.score.similarity - sims_a[h.record.content]) < 0.01
    # default recall (working tier) never sees the archive
    me = cold.scope(user_id="alice")
    working = {r.id for r in me.list()}
    assert all(h.record.id in working for h in me.recall(TOPICS[0], k=10))


@pytest.mark.parametrize("fmt", ["int8", "float16"])
def test_real_sentence_vectors_keep_their_top_10_in_the_cold_tier(make_store: Callable[..., MemoryStore],
                                                                  fmt: str) -> None:
    """Real all-MiniLM-L6-v2 vectors of LongMemEval turns (data/vectors, MIT): 800 archived, 40 held
    out as queries; the archive recall's top-10 in ``fmt`` against float32 and exact search."""
    import pyarrow.parquet as pq

    from runtime.encoders import HashEmbedder

    path = Path(__file__).resolve().parents[3] / "data" / "vectors" / "lme_turns.parquet"
    vecs = np.asarray(pq.read_table(path).column("vector").slice(0, 840).to_pylist(), dtype=np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    docs, queries = vecs[:800], vecs[800:]
    emb = HashEmbedder(dim=384)
    got = {}
    for f in ("float32", fmt):
        st = make_store(f"{f}.sqlite", config=StoreConfig(cold_vectors=f, promote_on_access=False), embedder=emb)
        me = st.scope(user_id="alice")
        recs = me.write_many([{"content": f"turn {i}", "embedding": v} for i, v in enumerate(docs)])
        me.retain(capacity=0, scorer=FakeScorer(lambda r: 0.5), method="greedy")
        assert _tiers(st)["archive"]["formats"] == {f: 800}
        pos = {r.id: i for i, r in enumerate(recs)}
        got[f] = [[pos[h.record.id] for h in me.recall(q, k=10, tier="archive", update_usage=False,
                                                        candidates=10)] for q in queries]
    exact = [list(np.argsort(-(docs @ q), kind="stable")[:10]) for q in queries]
    overlap = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(got[fmt], got["float32"])])
    recall = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(got[fmt], exact)])
    assert np.mean([set(a) == set(b) for a, b in zip(got["float32"], exact)]) == 1.0
    assert overlap >= 0.97 and recall >= 0.97, (overlap, recall)


# --------------------------------------------------------------------------- promotion on access
def test_recall_promotes_an_archived_hit_and_logs_it(store: MemoryStore) -> None:
    me = store.scope(user_id="alice")
    _fill(me)
    _archive_all_but(me, 8)
    before = store.backend.tenant("alice", "default").state().decision_seq
    hits = me.recall("router firmware crash", k=3, tier="archive")
    ids = [h.record.id for h in hits]
    assert ids and all(me.history(i)[-1].tier == "working" for i in ids)
    t = _tiers(store)
    assert t["working"]["memories"] == 8 + len(ids) and t["working"]["formats"] == {"float32": 8 + len(ids)}
    assert t["archive"]["formats"] == {"int8": 16 - len(ids)}
    why = me.explain(ids[0])
    assert why.state == "working"
    last = why.history[-1]
    assert (last.trigger, last.item.action, last.item.reason.value) == ("access:recall", "promote", "accessed")
    d = me.decisions(limit=1)[0]
    assert sorted(d.promoted) == sorted(ids) and d.method == "promotion"
    # a promotion does not reset the write counter every_n_writes triggers count from
    assert store.backend.tenant("alice", "default").state().decision_seq == before
    # time travel sees it like any tier change
    at = me.memories_at(d.decision_id)
    assert {m.memory_id: m.tier_after for m in at.items} == {i: "working" for i in ids}
    # promoted memories are working memories again: the default recall finds them
    assert ids[0] in [h.record.id for h in me.recall("router firmware crash", k=10)]
    # and a second access changes nothing
    n = len(me.decisions(limit=50))
    me.recall("router firmware crash", k=3, tier="any")
    assert len(me.decisions(limit=50)) == n


def test_promoted_vectors_score_as_before(store: MemoryStore) -> None:
    me = store.scope(user_id="alice")
    _fill(me)
    _archive_all_but(me, 8)
    q = "kubernetes pod eviction"
    cold = me.recall(q, k=3, tier="archive", update_usage=False)
    warm = me.recall(q, k=3, tier="archive")  # promotes
    again = me.recall(q, k=3, tier="working", update_usage=False)
    assert [h.record.id for h in cold] == [h.record.id for h in warm]
    s_cold = {h.record.id: h.score.similarity for h in cold}
    for h in again:
        if h.record.id in s_cold:
            assert abs(h.score.similarity - s_cold[h.record.id]) < 1e-5  # decoded values, now at float32


def test_no_promotion_without_usage_update_or_when_off(make_store: Callable[..., MemoryStore]) -> None:
    for st, kw in ((make_store("a.sqlite"), {"update_usage": False}),
                   (make_store("b.sqlite", config=StoreConfig(promote_on_access=False)), {})):
        me = st.scope(user_id="alice")
        _fill(me)
        _archive_all_but(me, 8)
        hits = me.recall("sourdough starter recipe", k=3, tier="archive", **kw)
        assert hits and all(me.history(h.record.id)[-1].tier == "archive" for h in hits)
        assert _tiers(st)["archive"]["memories"] == 16


def test_superseded_versions_are_never_promoted(store: MemoryStore) -> None:
    me = store.scope(user_id="alice")
    old = me.write("the wifi password rotation happens every 30 days")
    new = me.update(old.id, "the wifi password rotation happens every 90 days")
    assert me.history(old.id)[0].tier == "archive"
    hits = me.recall("wifi password rotation days", k=5, tier="any")
    assert old.id in [h.record.id for h in hits]
    assert [v.tier for v in me.history(new.id)] == ["archive", "working"]
    assert _tiers(store)["archive"]["formats"] == {"int8": 1}


def test_promotion_stays_inside_the_scope(store: MemoryStore) -> None:
    alice, bob = store.scope(user_id="alice"), store.scope(user_id="bob")
    _fill(alice)
    _archive_all_but(alice, 8)
    _fill(bob)
    _archive_all_but(bob, 8)
    a_ids = {r.id for r in alice.list(tier="archive")}
    # bob's recall promotes bob's memories only, and never names alice's
    hits = bob.recall("hiking trip to the alps", k=5, tier="archive")
    assert hits and not ({h.record.id for h in hits} & a_ids)
    assert {r.id for r in alice.list(tier="archive")} == a_ids
    # a backend asked to promote another scope's ids finds nothing to promote
    assert store.backend.tenant("bob", "default").promotable(sorted(a_ids), utcnow()) == []
    assert len(store.backend.tenant("alice", "default").promotable(sorted(a_ids), utcnow())) == len(a_ids)


# --------------------------------------------------------------------------- formats follow every path
def test_compact_reencodes_after_the_cold_format_changes(make_store: Callable[..., MemoryStore]) -> None:
    st = make_store("x.sqlite", config=StoreConfig(cold_vectors="float32"))
    me = st.scope(user_id="alice")
    _fill(me)
    _archive_all_but(me, 8)
    assert _tiers(st)["archive"]["formats"] == {"float32": 16}
    st.close()
    st2 = make_store("x.sqlite", config=StoreConfig(cold_vectors="float16"))
    assert st2.backend.compact_vectors() == 16
    assert _tiers(st2)["archive"]["formats"] == {"float16": 16}
    assert st2.backend.compact_vectors() == 0
    me2 = st2.scope(user_id="alice")
    assert me2.recall("guitar string gauge", k=2, tier="archive", update_usage=False)


def test_copy_and_reembed_keep_archived_vectors_cold(make_store: Callable[..., MemoryStore], embedder: Any) -> None:
    src = make_store("src.sqlite")
    me = src.scope(user_id="alice")
    _fill(me)
    _archive_all_but(me, 8)
    dst = make_store("dst.sqlite")
    copy_store(src.backend, dst.backend)
    assert _tiers(dst)["archive"]["formats"] == {"int8": 16}
    a = me.recall("quarterly tax filing", k=3, tier="archive", update_usage=False)
    b = dst.scope(user_id="alice").recall("quarterly tax filing", k=3, tier="archive", update_usage=False)
    assert [h.record.id for h in a] == [h.record.id for h in b]
    assert all(abs(x.score.similarity - y.score.similarity) < 1e-5 for x, y in zip(a, b))
    # re-embedding with another encoder writes float32 vectors; archived ones are stored cold again
    from runtime.encoders import HashEmbedder
    other = HashEmbedder(dim=embedder.dim, seed=7)
    assert dst.reembed(other) == 24
    t = _tiers(dst)
    assert t["archive"]["formats"] == {"int8": 16} and t["working"]["formats"] == {"float32": 8}


def test_refresh_and_placeholders_keep_archived_vectors_cold(store: MemoryStore) -> None:
    me = store.scope(user_id="alice")
    recs = _fill(me)
    me.end_session()
    _archive_all_but(me, 8)
    archived = [r.id for r in me.list(tier="archive")]
    later = recs[-1].event_time + timedelta(days=30)
    rep = me.refresh(older_than_days=1, now=later)
    assert rep.refreshed
    assert _tiers(store)["archive"]["formats"] == {"int8": 16}
    # forgetting an archived memory others derive from leaves an archived placeholder, vector cold
    child = me.write("a follow-up about the archived note", derived_from=[archived[0]])
    me.forget(archived[0])
    assert me.history(child.id)[-1].tier == "working"
    assert _tiers(store)["archive"]["formats"] == {"int8": 16}


# --------------------------------------------------------------------------- SQLite: an older store upgrades
@pytest.mark.sqlite_only
def test_a_format_2_sqlite_store_upgrades_and_compacts(make_store: Callable[..., MemoryStore],
                                                       store_target: Callable[[str], Any]) -> None:
    st = make_store("old.sqlite", config=StoreConfig(cold_vectors="float32"))
    me = st.scope(user_id="alice")
    _fill(me)
    _archive_all_but(me, 8)
    st.close()
    path = str(store_target("old.sqlite"))
    conn = sqlite3.connect(path)
    conn.execute("ALTER TABLE vectors DROP COLUMN fmt")  # the format-2 layout
    conn.execute("UPDATE meta SET value = '2' WHERE key = 'format'")
    conn.commit()
    conn.close()
    st2 = make_store("old.sqlite")
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT value FROM meta WHERE key='format'").fetchone()[0] == str(SQLITE_FORMAT)
    conn.close()
    assert _tiers(st2)["archive"]["formats"] == {"float32": 16}
    assert st2.backend.compact_vectors() == 16
    assert _tiers(st2)["archive"]["formats"] == {"int8": 16}
    assert st2.scope(user_id="alice").recall("cat vaccination schedule", k=2, tier="archive")
