"""annotate_session: the session context is computed over the whole session (all tiers, write order)
and stored on each record of that session only; featurize then reads it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from runtime import MemoryStore, StoreConfig
from runtime.consolidate import annotate_session
from runtime.embed import HashEmbedder
from runtime.errors import ValidationError
from runtime.scorer import FakeScorer
from utilitynet.context import ScoringContext
from utilitynet.dialog import CONTEXT_NAMES, session_context
from utilitynet.features import FEATURE_NAMES, featurize

T0 = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)
TURNS = ["Hi! How was the trip?", "We went to Lisbon and I loved the trams.", "Wow, that's great!",
         "Next time I want to see Porto.", "Bye!"]


def _write(scope, texts, session, start=T0):  # type: ignore[no-untyped-def]
    return scope.write_many([{"content": t, "id": f"{session}_{i}", "session_id": session,
                              "created_at": start + timedelta(seconds=i), "source_entity": "Ana",
                              "tags": ["chat"]} for i, t in enumerate(texts)])


def test_annotates_only_that_session_and_keeps_the_rest_identical() -> None:
    with MemoryStore.open(":memory:", embedder=HashEmbedder(dim=32), config=StoreConfig(redact=False)) as store:
        a, b = store.scope(user_id="a"), store.scope(user_id="b")
        before = {r.id: r for r in _write(a, TURNS, "s1")}
        _write(a, ["unrelated", "other session"], "s2")
        _write(b, TURNS, "t1")
        # archive one turn first: the context must still see it (computed over every tier)
        a.retain(capacity=4, scorer=FakeScorer({"s1_4": 0.01}), forgotten="archive", now=T0)
        assert annotate_session(a, "s1", now=T0) == 5
        recs, vecs, _ = a.list_with_vectors(tier="any", sessions=["s1"], include_expired=True)
        want = session_context([r.content for r in recs], vecs)
        for r, row in zip(recs, want):
            got = [r.metadata.attributes[f"ctx.{n}"] for n in CONTEXT_NAMES]
            assert got == pytest.approx(row.tolist(), abs=1e-5)
            stripped = r.model_copy(update={"metadata": r.metadata.model_copy(update={"attributes": {}}),
                                            "usage": before[r.id].usage})
            assert stripped == before[r.id]          # nothing else about the record changed
        assert all(not r.metadata.attributes for r in a.list(sessions=["s2"]))
        assert all(not r.metadata.attributes for r in b.list())  # other tenant untouched
        assert a.get("s1_1").metadata.attributes["ctx.prev_q"] == 1.0
        assert annotate_session(a, "nope") == 0


def test_featurize_reads_the_stored_context() -> None:
    with MemoryStore.open(":memory:", embedder=HashEmbedder(dim=32), config=StoreConfig(redact=False)) as store:
        s = store.scope(user_id="a")
        _write(s, TURNS, "s1")
        _write(s, ["plain note"], "s2")
        annotate_session(s, "s1")
        recs, vecs, _ = s.list_with_vectors()
        X = featurize(recs, vecs, ScoringContext(now=T0))
        col = {n: i for i, n in enumerate(FEATURE_NAMES)}
        assert X[:5, col["ctx_present"]].tolist() == [1] * 5 and X[5, col["ctx_present"]] == 0
        assert X[:5, col["ctx_prev_q"]].tolist() == [0, 1, 0, 0, 0]
        assert np.all(X[5, [col[f"ctx_{n}"] for n in CONTEXT_NAMES]] == 0)


def test_rejects_a_bad_session_id() -> None:
    with MemoryStore.open(":memory:", embedder=HashEmbedder(dim=32)) as store, \
            pytest.raises(ValidationError, match="session_id"):
            annotate_session(store.scope(user_id="a"), "bad id; drop")
