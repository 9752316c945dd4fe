"""Retrieval: filter first, exact top-K, re-rank by similarity × confidence × freshness × role match,
score breakdowns, the explain log (redacted), usage updates, expiry and prompt formatting."""

from __future__ import annotations

import json
import math
from datetime import datetime, timedelta

import numpy as np
import pytest
from conftest import EMBED_DIM, file_bytes, unit_vectors

from runtime import MemoryStore, RoleContext, format_context
from runtime.errors import ValidationError
from runtime.store.ranking import RankWeights, score, top_k


def at_similarity(sim: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(query, memory vector) with cosine exactly ``sim`` (up to float32) in a random plane."""
    q, o = unit_vectors(rng, 2)
    o = o - (o @ q) * q
    o /= np.linalg.norm(o)
    return q, (sim * q + math.sqrt(1 - sim * sim) * o).astype(np.float32)


def two_memories(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A query and two memory vectors with similarity 0.9 (A) and 0.8 (B)."""
    q, o1, o2 = unit_vectors(rng, 3)
    basis = np.linalg.qr(np.stack([q, o1, o2]).T)[0].T  # orthonormal q', e1, e2
    q = basis[0]
    a = 0.9 * q + math.sqrt(1 - 0.81) * basis[1]
    b = 0.8 * q + math.sqrt(1 - 0.64) * basis[2]
    return q.astype(np.float32), a.astype(np.float32), b.astype(np.float32)


def order(hits: list) -> list[str]:
    return [h.record.content for h in hits]


def test_filter_first_a_better_match_outside_the_filter_never_appears(store: MemoryStore,
                                                                      rng: np.random.Generator) -> None:
    me = store.scope(user_id="alice")
    q, best = at_similarity(0.99, rng)
    me.write("perfect match in session s2", embedding=best, session_id="s2", sub_role="travel")
    others = unit_vectors(rng, 30)
    me.write_many([{"content": f"weak {i}", "embedding": v, "session_id": "s1"} for i, v in enumerate(others)])
    for kw in ({"sessions": ["s1"]}, {"exclude_sessions": ["s2"]}, {"sub_roles": ["billing"]}):
        hits = me.recall(q, k=50, candidates=50, **kw)
        assert "perfect match in session s2" not in order(hits)
    # with a small candidate pool the best in-filter rows still come back (filter, *then* top-K)
    hits = me.recall(q, k=3, candidates=3, sessions=["s1"])
    expected = np.argsort(-(others @ q))[:3]
    assert order(hits) == [f"weak {i}" for i in expected]
    assert order(me.recall(q, k=1))[0] == "perfect match in session s2"


def test_confidence_reorders(store: MemoryStore, rng: np.random.Generator) -> None:
    q, a, b = two_memories(rng)
    me = store.scope(user_id="alice")
    me.write("A", embedding=a, confidence=1.0)
    me.write("B", embedding=b, confidence=1.0)
    assert order(me.recall(q, k=2)) == ["A", "B"]
    other = store.scope(user_id="bob")
    other.write("A", embedding=a, confidence=0.5)   # 0.9 * 0.5 = 0.45 < 0.8
    other.write("B", embedding=b, confidence=1.0)
    hits = other.recall(q, k=2)
    assert order(hits) == ["B", "A"]
    assert [h.raw_rank for h in hits] == [1, 0]  # raw (similarity) order was A, B


def test_freshness_half_life_reorders(store: MemoryStore, rng: np.random.Generator, now: datetime) -> None:
    q, a, b = two_memories(rng)
    old = now - timedelta(days=3)
    me = store.scope(user_id="alice")
    me.write("A", embedding=a, timestamp=old, freshness_half_life=timedelta(days=1))  # × 0.125
    me.write("B", embedding=b, timestamp=old)                    # what users say does not decay by default
    hits = me.recall(q, k=2, now=now)
    assert order(hits) == ["B", "A"]
    assert hits[1].score.freshness == pytest.approx(0.125, rel=1e-12)
    assert hits[0].score.freshness == 1.0
    # one half-life earlier it is 0.5: 0.9 * 0.5 = 0.45 still loses; at age 0 it wins
    assert order(me.recall(q, k=2, now=old)) == ["A", "B"]


def test_role_match_bonus_reorders(store: MemoryStore, rng: np.random.Generator) -> None:
    q, a, b = two_memories(rng)
    me = store.scope(user_id="alice")
    me.write("A", embedding=a, active_role="support")
    me.write("B", embedding=b, active_role="billing", sub_role="refunds")
    assert order(me.recall(q, k=2)) == ["A", "B"]
    full = me.recall(q, k=2, context=RoleContext(active_role="billing", sub_role="refunds"))
    assert order(full) == ["B", "A"]                    # 0.8 × 1.25 = 1.0 > 0.9
    assert full[0].score.role_match == 1.25 and full[1].score.role_match == 1.0
    partial = me.recall(q, k=2, context=RoleContext(active_role="billing", sub_role="disputes"))
    assert order(partial) == ["A", "B"]                 # 0.8 × 1.10 = 0.88 < 0.9
    assert partial[1].score.role_match == pytest.approx(1.10)
    me.weights = RankWeights(full_role_bonus=0.25, partial_role_bonus=0.2)  # 0.8 × 1.2 = 0.96 > 0.9
    assert order(me.recall(q, k=2, context=RoleContext(active_role="billing"))) == ["B", "A"]


def test_breakdown_multiplies_to_total_and_matches_the_record_path(store: MemoryStore, rng: np.random.Generator,
                                                                   now: datetime) -> None:
    me = store.scope(user_id="alice")
    vecs = unit_vectors(rng, 40)
    me.write_many([{"content": f"m{i}", "embedding": v, "confidence": float(rng.uniform(0.1, 1)),
                    "timestamp": now - timedelta(hours=float(rng.uniform(0, 200))),
                    "freshness_half_life": timedelta(hours=float(rng.uniform(1, 100))) if i % 3 else None,
                    "active_role": ["support", "billing"][i % 2], "sub_role": ["a", "b", None][i % 3]}
                   for i, v in enumerate(vecs)])
    q = unit_vectors(rng, 1)[0]
    ctx = RoleContext(active_role="billing", sub_role="a")
    hits = me.recall(q, k=10, now=now, context=ctx, candidates=40, update_usage=False)
    assert len(hits) == 10
    for h in hits:
        s = h.score
        assert s.total == pytest.approx(max(s.similarity, 0) * s.confidence * s.freshness * s.role_match, rel=1e-12)
        assert s.confidence == h.record.metadata.confidence
    totals = [h.score.total for h in hits]
    assert totals == sorted(totals, reverse=True)
    # the column-based fast path ranks like scoring every full record (ties: higher cosine, newer)
    recs = me.list()
    full = []
    for r in recs:
        hl = r.metadata.freshness_half_life
        sb = score(float(np.float32(vecs[int(r.content[1:])] @ q)), r.metadata.confidence,
                   None if hl is None else hl.total_seconds(), r.event_time.timestamp(), r.role_context.active_role,
                   r.role_context.sub_role, now.timestamp(), ctx, me.weights, r.provenance.type.value,
                   r.role_context.dialog_role.value)
        full.append((-sb.total, -sb.similarity, -r.event_time.timestamp(), r.id, sb.total))
    ref = sorted(full)[:10]
    assert [x[3] for x in ref] == [h.record.id for h in hits]
    for x, y in zip(ref, hits):
        assert x[4] == pytest.approx(y.score.total, rel=1e-6)



@pytest.mark.parametrize("weights", [RankWeights(), RankWeights(role_weights={"a": 1.0, "b": 0.3}),
                                     RankWeights(rerank=False), RankWeights(freshness=None)],
                         ids=["default", "role-weights", "no-rerank", "no-default-half-lives"])
def test_top_k_is_scoring_every_candidate_and_sorting(weights: RankWeights, rng: np.random.Generator) -> None:
    """Re-ranking builds breakdowns for the k it returns only; its order and its breakdowns must be
    those of scoring every candidate with ``score`` and sorting (ties: cosine, then newer, then raw order)."""
    now_ts = 1.8e9
    sims = rng.choice([0.9, 0.5, 0.5, -0.2, 0.31], 60)  # repeated cosines and totals: the tie rules decide
    cands = [(float(s), float(rng.choice([1.0, 0.6])), [None, 3600.0, 1e12][i % 3], now_ts - float(rng.choice([0, 7200])),
              ["billing", "support"][i % 2], ["a", "b", None][i % 4 % 3], ["direct_interaction", "external_ingest"][i % 2],
              ["user", "assistant", "tool"][i % 3]) for i, s in enumerate(sims)]
    ctx = RoleContext(active_role="billing", sub_role="a")
    every = [score(*c[:6], now_ts, ctx, weights, *c[6:]) for c in cands]
    want = sorted(range(len(cands)), key=lambda i: (-every[i].total, -every[i].similarity, -cands[i][3]))[:10]
    got = top_k(cands, now_ts, ctx, weights, 10)
    assert [i for _, i in got] == want
    assert [sb for sb, _ in got] == [every[i] for i in want]
    assert top_k(cands[:3], now_ts, None, weights, 10) == sorted(
        [(score(*c[:6], now_ts, None, weights, *c[6:]), i) for i, c in enumerate(cands[:3])],
        key=lambda x: (-x[0].total, -x[0].similarity, -cands[x[1]][3]))

def test_explain_logs_query_filters_raw_and_final_with_the_query_redacted(store: MemoryStore) -> None:
    me = store.scope(user_id="alice")
    me.write_many([f"note {i} about the invoice" for i in range(8)])
    hits = me.recall("invoice for carol.jones@example.org please", k=3, explain=True, sessions=None,
                     min_confidence=0.5)
    log = me.recall_log()
    assert len(log) == 1
    entry = log[0]
    assert set(entry) >= {"query", "filters", "raw_top_k", "final"}
    assert "carol.jones@example.org" not in json.dumps(entry) and "[EMAIL]" in entry["query"]
    assert entry["filters"] == {"min_confidence": 0.5, "sensitivity": ["none", "pii"]}  # the default applied
    assert len(entry["raw_top_k"]) == 8 and all({"id", "similarity"} <= set(x) for x in entry["raw_top_k"])
    assert [x["id"] for x in entry["final"]] == [h.record.id for h in hits]
    assert all(set(x["score"]) == {"similarity", "confidence", "freshness", "role_match", "total"}
               for x in entry["final"])
    me.recall("invoice", k=1)  # without explain: nothing logged
    assert len(me.recall_log()) == 1
    assert store.scope(user_id="bob").recall_log() == []
    store.checkpoint()
    assert all(b"carol.jones@example.org" not in blob for blob in file_bytes(store.path).values())


def test_recall_updates_access_count_and_last_access(store: MemoryStore, now: datetime) -> None:
    me = store.scope(user_id="alice")
    r = me.write("the wifi password hint is the dog's name")
    other = me.write("an unrelated memory about gardening")
    assert me.get(r.id).usage.access_count == 0 and me.get(r.id).usage.last_accessed_at is None
    me.recall("wifi password hint", k=1, now=now)
    me.recall("wifi password hint", k=1, now=now + timedelta(minutes=5))
    u = me.get(r.id).usage
    assert u.access_count == 2 and u.last_accessed_at == now + timedelta(minutes=5)
    assert me.get(other.id).usage.access_count == 0            # not returned, not touched
    me.recall("wifi password hint", k=1, now=now, update_usage=False)
    assert me.get(r.id).usage.access_count == 2


def test_expired_memories_are_excluded_unless_asked_for(store: MemoryStore, now: datetime) -> None:
    me = store.scope(user_id="alice")
    me.write("door code 1234 (expired)", expires_at=now - timedelta(minutes=1))
    me.write("door code 5678 (expires exactly now)", expires_at=now)
    me.write("door code 9999 (valid)", expires_at=now + timedelta(minutes=1))
    assert order(me.recall("door code", k=5, now=now)) == ["door code 9999 (valid)"]
    assert len(me.recall("door code", k=5, now=now, include_expired=True)) == 3
    assert me.count(now=now) == 1 and me.count(now=now - timedelta(hours=1)) == 3


def test_bad_recall_arguments(store: MemoryStore, rng: np.random.Generator) -> None:
    me = store.scope(user_id="alice")
    me.write("x")
    for k in (0, -1, 2.5):
        with pytest.raises(ValidationError) as ei:
            me.recall("x", k=k)  # type: ignore[arg-type]
        assert ei.value.field == "k"
    with pytest.raises(ValidationError) as ei:
        me.recall(np.full(EMBED_DIM, np.nan), k=1)
    assert ei.value.field == "embedding"
    assert me.recall(unit_vectors(rng, 1)[0], k=1, sessions=[]) == []


def test_a_k_beyond_any_engine_limit_returns_every_hit(store: MemoryStore) -> None:
    """``k`` or ``candidates`` past a bigint (PostgreSQL's ``LIMIT``) is just "all of them"."""
    me = store.scope(user_id="alice")
    me.write_many(["the invoice is due", "the hotel is booked", "the flight moved"])
    assert len(me.recall("invoice", k=2**63)) == 3
    assert len(me.recall("invoice", k=2, candidates=2**70)) == 2


def test_format_context_labels_source_role_session_and_time(store: MemoryStore, now: datetime) -> None:
    me = store.scope(user_id="alice")
    me.write("Customer reported a double charge on order 5512", session_id="s1", active_role="support",
             sub_role="complaints", source_entity="alice", dialog_role="user",
             timestamp=now - timedelta(hours=3), confidence=0.9)
    me.write("Refund policy: 30 days with receipt", source_type="external_ingest", session_id="s0",
             active_role="support", source_uri="kb://policies/refunds", source_version="4",
             timestamp=now - timedelta(days=10))
    hits = me.recall("double charge refund", k=2, now=now)
    text = format_context(hits, now=now, current_session="s1")
    lines = text.splitlines()
    assert lines[0] == "Relevant memories:"
    assert "[Memory 1 - conversation | role: support/complaints | session: current]" in text
    assert "[Memory 2 - document | role: support | session: s0]" in text
    assert "Content: Customer reported a double charge on order 5512" in text
    assert "from alice (user)" in text and "kb://policies/refunds v4" in text
    assert "(3 h ago)" in text and "(10 days ago)" in text and "confidence: 0.90" in text
    assert (now - timedelta(hours=3)).isoformat(timespec="minutes") in text
    assert format_context([], now=now) == "Relevant memories: (none)"


def test_nearest_is_the_scopes_working_unexpired_memories_by_cosine(store: MemoryStore, rng: np.random.Generator,
                                                                     now: datetime) -> None:
    """What corroboration judges against (``TenantBackend.nearest``): the k most similar working,
    unexpired memories of the scope, best first, with their stored bodies, re-checked in SQL — never
    another user's, never the archive, never an expired one."""
    q = unit_vectors(rng, 1)[0]
    me, other = store.scope(user_id="u1"), store.scope(user_id="u2")
    other.write("the other user's memory, closest of all", embedding=q)
    vecs = unit_vectors(rng, 8)
    vecs[:4] = 0.6 * q + 0.4 * vecs[:4]
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    recs = [me.write(f"memory {i}", embedding=vecs[i], timestamp=now) for i in range(8)]
    me.write("about to expire", embedding=q, expires_at=now + timedelta(seconds=1), timestamp=now)
    me.update(recs[0].id, "memory 0, corrected", embedding=-q)  # memory 0 goes to the archive
    later = now + timedelta(minutes=1)
    got = store.backend.tenant("u1", "default").nearest(q, 3, later)
    sims = {r.id: float(vecs[i] @ q) for i, r in enumerate(recs) if i}
    want = sorted(sims, key=lambda m: -sims[m])[:3]
    assert [m for m, _, _ in got] == want
    for mid, body, cos in got:
        assert cos == pytest.approx(sims[mid], abs=1e-5)
        stored = me.get(mid)
        assert stored is not None and json.loads(body)["content"] == stored.content
    every = store.backend.tenant("u1", "default").nearest(q, 50, later)
    assert recs[0].id not in {m for m, _, _ in every} and len(every) == 8  # archived out; its correction (-q) last
    assert every[-1][2] == pytest.approx(-1.0, abs=1e-5)
    assert len(store.backend.tenant("u3", "default").nearest(q, 3, later)) == 0
    # ``at_least``: only those that close (what corroboration can judge), the closest first, as before
    cut = (every[3][2] + every[4][2]) / 2
    close = store.backend.tenant("u1", "default").nearest(q, 50, later, at_least=cut)
    assert close == every[:4] and store.backend.tenant("u1", "default").nearest(q, 2, later, at_least=cut) == every[:2]
    assert store.backend.tenant("u1", "default").nearest(q, 50, later, at_least=1.01) == []
