"""Property: random multi-user, multi-agent workloads with random typed fields and random filters —
``list``/``count``/``recall``/``get`` never return another scope's memory, every returned record
satisfies the filter, and nothing that satisfies it is missing (checked against a plain-Python
model of the filter semantics)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime import AssemblerConfig, MemIR, MemoryStore, RecordConfig, StoreConfig
from runtime.encoders import HashEmbedder
from runtime.errors import NotFoundError
from runtime.record import DialogRole, Sensitivity, SourceType
from runtime.store.filters import RECALL_SENSITIVITY

USERS = ["u0", "u1", "u2"]
AGENTS = ["default", "a1"]
SESSIONS = ["s0", "s1", "s2", "s3"]
ROLES = ["support", "travel", "billing"]
SUB_ROLES = [None, "refunds", "booking"]
TAGS = ["t0", "t1", "t2", "t3"]
T0 = datetime(2024, 1, 1, tzinfo=UTC)
NOW = T0 + timedelta(days=30)
# Microsecond-resolution times on a few days: many ties, and filter bounds drawn from the same pool,
# so `since` (>=) and `until` (<) are tested exactly at record times.
times = st.builds(lambda d, us: T0 + timedelta(days=d, microseconds=us), st.integers(0, 10),
                  st.sampled_from([0, 1, 999_999]))
CONFIDENCES = [0.0, 0.25, 0.5, 0.5000001, 0.9, 1.0]


@st.composite
def memory_specs(draw: st.DrawFn) -> dict[str, Any]:
    expiry = draw(st.sampled_from(["none", "past", "future", "now"]))
    return {
        "user": draw(st.sampled_from(USERS)),
        "agent": draw(st.sampled_from(AGENTS)),
        "fields": {
            "session_id": draw(st.none() | st.sampled_from(SESSIONS)),
            "active_role": draw(st.sampled_from(ROLES)),
            "sub_role": draw(st.sampled_from(SUB_ROLES)),
            "source_type": draw(st.sampled_from(SourceType)),
            "dialog_role": draw(st.sampled_from(DialogRole)),
            "timestamp": draw(st.none() | times),
            "confidence": draw(st.sampled_from(CONFIDENCES)),
            "sensitivity": draw(st.sampled_from(Sensitivity)),
            "tags": draw(st.lists(st.sampled_from(TAGS), max_size=2, unique=True)),
            "expires_at": {"none": None, "past": NOW - timedelta(hours=1), "future": NOW + timedelta(days=1),
                           "now": NOW}[expiry],
        },
    }


@st.composite
def filters(draw: st.DrawFn, bounds: st.SearchStrategy[datetime]) -> dict[str, Any]:
    f: dict[str, Any] = {}
    pick = draw(st.sets(st.sampled_from(["roles", "sub_roles", "source_types", "sessions", "exclude_sessions",
                                         "since", "until", "min_confidence", "sensitivity", "tags",
                                         "dialog_roles", "include_expired"]), max_size=4))
    for name in pick:
        if name == "roles":
            f[name] = draw(st.lists(st.sampled_from(ROLES), max_size=2))
        elif name == "sub_roles":
            f[name] = draw(st.lists(st.sampled_from(["refunds", "booking"]), max_size=2))
        elif name == "source_types":
            f[name] = draw(st.lists(st.sampled_from(SourceType), max_size=2))
        elif name == "dialog_roles":
            f[name] = draw(st.lists(st.sampled_from(DialogRole), min_size=1, max_size=2))
        elif name in ("sessions", "exclude_sessions"):
            f[name] = draw(st.lists(st.sampled_from(SESSIONS), max_size=2))
        elif name in ("since", "until"):
            f[name] = draw(bounds)
        elif name == "min_confidence":
            f[name] = draw(st.sampled_from(CONFIDENCES))
        elif name == "sensitivity":
            f[name] = draw(st.sampled_from(Sensitivity) | st.lists(st.sampled_from(Sensitivity), max_size=2))
        elif name == "tags":
            f[name] = draw(st.lists(st.sampled_from(TAGS), max_size=2))
        else:
            f[name] = draw(st.booleans())
    return f


_ORDER = [Sensitivity.none, Sensitivity.pii, Sensitivity.secret]


def passes(r: MemIR, f: dict[str, Any]) -> bool:
    """The filter semantics, written independently of the store (the reference model)."""
    p, rc, md = r.provenance, r.role_context, r.metadata
    checks = [
        "roles" not in f or rc.active_role in f["roles"],
        "sub_roles" not in f or (rc.sub_role is not None and rc.sub_role in f["sub_roles"]),
        "source_types" not in f or p.type in f["source_types"],
        "dialog_roles" not in f or rc.dialog_role in f["dialog_roles"],
        "sessions" not in f or (p.session_id is not None and p.session_id in f["sessions"]),
        "exclude_sessions" not in f or p.session_id is None or p.session_id not in f["exclude_sessions"],
        "since" not in f or r.event_time >= f["since"],
        "until" not in f or r.event_time < f["until"],
        "min_confidence" not in f or md.confidence >= f["min_confidence"],
        "tags" not in f or bool(set(md.tags) & set(f["tags"])),
        f.get("include_expired", False) or md.expires_at is None or md.expires_at > NOW,
    ]
    if "sensitivity" in f:
        s = f["sensitivity"]
        allowed = _ORDER[: _ORDER.index(Sensitivity(s)) + 1] if isinstance(s, (str, Sensitivity)) else s
        checks.append(md.sensitivity in allowed)
    return all(checks)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                 HealthCheck.data_too_large])
@given(specs=st.lists(memory_specs(), min_size=1, max_size=30),
       forget_some=st.lists(st.integers(0, 29), max_size=3), data=st.data())
def test_random_workloads_never_cross_scopes_and_always_honour_filters(
        store_target: Any, specs: list[dict[str, Any]], forget_some: list[int],
        data: st.DataObject) -> None:
    # since/until mostly *at* a record's event time: the >= / < boundaries are where bugs live
    used = sorted({s["fields"]["timestamp"] for s in specs if s["fields"]["timestamp"] is not None})
    bounds = (st.sampled_from(used) | times) if used else times
    flts = data.draw(st.lists(filters(bounds), min_size=1, max_size=4), label="filters")
    path = store_target(f"iso-{uuid.uuid4().hex}.sqlite")  # a fresh store per example
    emb = HashEmbedder(dim=32)
    # Two store objects on the same store: writes through one, reads through both (WAL + caches on SQLite).
    with MemoryStore.open(path, embedder=emb, config=StoreConfig(annotate=AssemblerConfig(record=RecordConfig(redact=False)))) as w, \
            MemoryStore.open(path, embedder=emb, config=StoreConfig(annotate=AssemblerConfig(record=RecordConfig(redact=False)))) as r2:
        truth: dict[tuple[str, str], dict[str, MemIR]] = {}
        for i, spec in enumerate(specs):
            scope = w.scope(user_id=spec["user"], agent_id=spec["agent"])
            words = " ".join(f"w{(i * 7 + j) % 11}" for j in range(3))
            rec = scope.write(f"memory {i} of {spec['user']} {words}", **spec["fields"])
            truth.setdefault((spec["user"], spec["agent"]), {})[rec.id] = rec
            if data.draw(st.booleans(), label="recall between writes"):  # exercise cache refresh
                assert all(h.record.provenance.user_id == spec["user"]
                           for h in r2.scope(user_id=spec["user"], agent_id=spec["agent"]).recall("memory", k=3))
        all_ids = [rid for recs in truth.values() for rid in recs]
        for j in forget_some:  # deletions bump the cache epoch; a stale cache must not resurrect them
            if j < len(all_ids) and any(all_ids[j] in recs for recs in truth.values()):
                key = next(k for k, recs in truth.items() if all_ids[j] in recs)
                w.scope(user_id=key[0], agent_id=key[1]).forget(all_ids[j], cascade="delete", scrub=False)
                del truth[key][all_ids[j]]

        for store in (w, r2):
            for user in USERS:
                for agent in AGENTS:
                    scope = store.scope(user_id=user, agent_id=agent)
                    mine = truth.get((user, agent), {})
                    for f in flts:
                        expected = {rid for rid, rec in mine.items() if passes(rec, f)}
                        listed = scope.list(now=NOW, **f)
                        assert {x.id for x in listed} == expected
                        assert scope.count(now=NOW, **f) == len(expected)
                        hits = scope.recall("memory w3 w5", k=max(1, len(mine) + 1), now=NOW,
                                            candidates=len(mine) + 1, update_usage=False, **f)
                        # recall leaves secrets out unless the filter names a sensitivity
                        rf = f if "sensitivity" in f else {**f, "sensitivity": RECALL_SENSITIVITY}
                        recalled = {rid for rid, rec in mine.items() if passes(rec, rf)}
                        assert {h.record.id for h in hits} == recalled  # the fast path agrees with SQL
                        for x in listed:
                            assert (x.provenance.user_id, x.provenance.agent_id) == (user, agent)
                            assert passes(x, f)
                        for x in (h.record for h in hits):
                            assert (x.provenance.user_id, x.provenance.agent_id) == (user, agent)
                            assert passes(x, rf)
                        small = scope.recall("memory", k=2, now=NOW, update_usage=False, **f)
                        assert {h.record.id for h in small} <= recalled
                    for key, recs in truth.items():
                        for rid in recs:
                            if key == (user, agent):
                                assert scope.get(rid).id == rid
                            else:
                                with pytest.raises(NotFoundError):
                                    scope.get(rid)
                                with pytest.raises(NotFoundError):
                                    scope.forget(rid)


def test_another_users_id_is_indistinguishable_from_a_missing_one(store: MemoryStore) -> None:
    bob = store.scope(user_id="bob").write("bob's secret plan")
    alice = store.scope(user_id="alice")
    with pytest.raises(NotFoundError) as e1:
        alice.get(bob.id)
    with pytest.raises(NotFoundError) as e2:
        alice.get("mem_does_not_exist")
    assert str(e1.value).replace(bob.id, "X") == str(e2.value).replace("mem_does_not_exist", "X")
    assert alice.recall("bob's secret plan", k=5) == [] and alice.list() == []
    # same user, other agent: also isolated
    assert store.scope(user_id="bob", agent_id="other").recall("secret plan", k=5) == []
