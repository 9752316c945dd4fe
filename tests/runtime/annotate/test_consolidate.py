"""Session context: computed when a session closes, over the whole session (all tiers, write order)
and stored on each record of that session only; featurize then reads it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from runtime import AssemblerConfig, MemoryStore, RecordConfig, StoreConfig
from runtime.encoders import HashEmbedder
from runtime.errors import ValidationError
from runtime.scoring import FakeScorer
from utilitynet.context import ScoringContext
from utilitynet.dialog import CONTEXT_NAMES, session_context
from utilitynet.features import FEATURE_NAMES, featurize

T0 = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)
PLAIN = StoreConfig(annotate=AssemblerConfig(record=RecordConfig(redact=False)))
TURNS = ["Hi! How was the trip?", "We went to Lisbon and I loved the trams.", "Wow, that's great!",
         "Next time I want to see Porto.", "Bye!"]


def _write(scope, texts, session, start=T0):  # type: ignore[no-untyped-def]
    return scope.write_many([{"content": t, "id": f"{session}_{i}", "session_id": session,
                              "created_at": start + timedelta(seconds=i), "source_entity": "Ana",
                              "tags": ["chat"]} for i, t in enumerate(texts)])


def test_annotates_only_that_session_and_leaves_records_unchanged() -> None:
    with MemoryStore.open(":memory:", embedder=HashEmbedder(dim=32), config=PLAIN) as store:
        a, b = store.scope(user_id="a"), store.scope(user_id="b")
        before = {r.id: r for r in _write(a, TURNS, "s1")}
        assert np.isnan(a.session_context(list(before))).all()  # s1 is still open
        _write(a, ["unrelated", "other session"], "s2")          # opening s2 closes s1
        _write(b, TURNS, "t1")
        recs, vecs, _ = a.list_with_vectors(tier="any", sessions=["s1"], include_expired=True)
        want = session_context([r.content for r in recs], vecs)
        got = a.session_context([r.id for r in recs])
        assert got == pytest.approx(want, abs=1e-5)
        assert recs == [before[r.id] for r in recs]  # the records themselves are exactly as written
        assert np.isnan(a.session_context([r.id for r in a.list(sessions=["s2"])])).all()
        assert np.isnan(b.session_context([r.id for r in b.list()])).all()  # other tenant untouched
        assert a.session_context(["s1_1"])[0, CONTEXT_NAMES.index("prev_q")] == 1.0
        # archived turns keep their features, and recomputing gives them back — to the cold tier's
        # int8 quantisation error, since the archived turn's vector is what it is recomputed from
        a.retain(capacity=4, scorer=FakeScorer({"s1_4": 0.01}), forgotten="archive", now=T0)
        assert a.session_context([r.id for r in recs]) == pytest.approx(want, abs=1e-5)
        assert a.annotate_session("s1", now=T0) == 5
        assert a.session_context([r.id for r in recs]) == pytest.approx(want, abs=2e-3)
        assert a.annotate_session("nope") == 0


def test_featurize_reads_the_stored_context() -> None:
    with MemoryStore.open(":memory:", embedder=HashEmbedder(dim=32), config=PLAIN) as store:
        s = store.scope(user_id="a")
        _write(s, TURNS, "s1")
        _write(s, ["plain note"], "s2")
        recs, vecs, steps = s.list_with_vectors()
        ctx = ScoringContext(now=T0, session_context=s.session_context([r.id for r in recs]))
        X = featurize(recs, vecs, ctx)
        col = {n: i for i, n in enumerate(FEATURE_NAMES)}
        assert X[:5, col["ctx_present"]].tolist() == [1] * 5 and X[5, col["ctx_present"]] == 0
        assert X[:5, col["ctx_prev_q"]].tolist() == [0, 1, 0, 0, 0]
        assert np.all(X[5, [col[f"ctx_{n}"] for n in CONTEXT_NAMES]] == 0)


def test_end_session_closes_the_open_session() -> None:
    with MemoryStore.open(":memory:", embedder=HashEmbedder(dim=32), config=PLAIN) as store:
        s = store.scope(user_id="a")
        ids = [r.id for r in _write(s, TURNS, "s1")]
        assert np.isnan(s.session_context(ids)).all()
        s.end_session(now=T0)
        assert not np.isnan(s.session_context(ids)).any()


def test_rejects_a_bad_session_id() -> None:
    with MemoryStore.open(":memory:", embedder=HashEmbedder(dim=32)) as store, \
            pytest.raises(ValidationError, match="session_id"):
            store.scope(user_id="a").annotate_session("bad id; drop")
