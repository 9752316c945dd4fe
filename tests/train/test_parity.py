"""Parity: what the model is trained on is what it sees in production.

A conversation is streamed through the public API exactly as an agent would — ``scope.write`` per
turn (the store embeds it, redaction on), ``end_session()`` when a session is over, a retention
policy that triggers on session end — written here, independently of the evaluator (which writes
each session with ``write_many``, from cached embeddings) and of the training collector. The feature matrix the scorer sees at each decision must
equal, to within 1e-6, the rows the training set holds for the same decision (written to Parquet
and read back), and the evaluator's recall figure must equal this replay's.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from runtime import MemoryStore, RetentionPolicy, Triggers
from runtime.encoders import Embedder, HashEmbedder
from runtime.record import MemIR
from runtime.scoring import Scorer, ScoringContext
from runtime.scoring.baselines import LongestScorer
from tests.train.locomo_data import tiny_locomo  # type: ignore[import-not-found]
from train.dataset import RowBatch, load_rounds, to_numpy, write_round
from train.eval.locomo import evaluate_locomo
from train.locomo.protocol import capacity_for
from train.locomo.reader import RECALL_CATEGORIES, Conversation, load_locomo, parse_locomo
from train.locomo.replay import memory_id, stream_turns
from train.locomo.rows import add_conversation_rows
from utilitynet.features import featurize, spec_for

DEV = Path(__file__).resolve().parents[3] / "shared" / "data" / "locomo" / "locomo-dev.json"


class Seen:
    """A scorer wrapper that keeps the matrix the scorer is given to score: ``featurize`` of its
    inputs (what the ONNX utility model runs on)."""

    def __init__(self, inner: Scorer) -> None:
        self.inner, self.name = inner, inner.name
        self.calls: list[tuple[list[str], np.ndarray]] = []

    def score(self, records: Sequence[MemIR], embeddings: np.ndarray, ctx: ScoringContext) -> np.ndarray:
        self.calls.append(([r.id for r in records], featurize(records, embeddings, ctx)))
        return self.inner.score(records, embeddings, ctx)


def agent_replay(conv: Conversation, scorer: Scorer, emb: Embedder, capacity: int) -> tuple[Seen, set[str]]:
    """The conversation as an agent writes it, with nothing but the public API."""
    seen = Seen(scorer)
    policy = RetentionPolicy(capacity=capacity, scorer=seen, triggers=Triggers(on_session_end=True))
    turns = stream_turns(conv)
    with MemoryStore.open(":memory:", embedder=emb) as store:
        me = store.scope(user_id="agent", policy=policy)
        for i, t in enumerate(turns):
            me.write(t.text, id=t.memory_id, created_at=t.at, session_id=t.session_id, source_entity=t.speaker)
            if i + 1 == len(turns) or turns[i + 1].session_id != t.session_id:
                me.end_session(now=t.at + timedelta(seconds=1))  # the session is over
        kept = {r.id for r in me.list(include_expired=True)}
    return seen, kept


def training_rows(conv: Conversation, emb: Embedder, p: float, tmp: Path) -> tuple[np.ndarray, list[str], list[int]]:
    """The rows the training set holds for ``conv`` under keep-longest at ``p`` (via Parquet)."""
    rows = RowBatch(spec_for(emb.dim, emb.encoder_id))
    add_conversation_rows(rows, conv, emb, policies=("longest",), capacities=(p,))
    write_round(rows, tmp / "round_000", manifest={"what": "parity"})
    ds = load_rounds([tmp / "round_000"])
    X, _, _, _ = to_numpy(ds)
    return X, [str(x) for x in ds["item_id"]], [int(d) for d in ds["decision"]]


def recall(conv: Conversation, kept_memory_ids: set[str]) -> float:
    pairs = [(q, e) for q in conv.qa if q.category in RECALL_CATEGORIES for e in q.evidence]
    return sum(memory_id(e) in kept_memory_ids for _, e in pairs) / len(pairs)


def check_parity(conv: Conversation, emb: Embedder, p: float, tmp: Path, model_scorer: Any) -> None:
    K = capacity_for(conv, p)
    # 1. features: the agent's decisions vs the training rows, decision by decision
    seen, _ = agent_replay(conv, LongestScorer(), emb, K)
    decisions = seen.calls  # the rows keep every decision the scorer was called for, in order
    X_rows, item_ids, dec = training_rows(conv, emb, p, tmp)
    assert decisions and len(decisions) == len(set(dec))
    for d, (ids, X) in enumerate(decisions):
        sel = [i for i, x in enumerate(dec) if x == d]
        assert [memory_id(item_ids[i]) for i in sel] == ids
        np.testing.assert_allclose(X_rows[sel], X, atol=1e-6, rtol=0)
    # 2. the evaluator's figure equals the agent's, for the model too
    for scorer in (LongestScorer(), model_scorer):
        _, kept = agent_replay(conv, scorer, emb, K)
        run = evaluate_locomo([conv], ["policy"], [p], emb, progress=False, scorer_for=lambda name, c, s=scorer: s)[0]
        assert run.recall == recall(conv, kept)
        assert sorted(memory_id(x) for x in run.kept) == sorted(kept)


def test_parity_on_a_small_conversation(tmp_path: Path) -> None:
    from runtime.scoring import FakeScorer
    conv = parse_locomo([tiny_locomo()])[0][0]
    check_parity(conv, HashEmbedder(dim=32), 0.25, tmp_path, FakeScorer())


@pytest.mark.slow
@pytest.mark.skipif(not DEV.is_file(), reason="LoCoMo dev split not present")
def test_parity_on_a_locomo_dev_conversation_with_the_real_encoder_and_model(tmp_path: Path) -> None:
    from runtime.encoders import load_default_embedder
    from runtime.errors import EncoderUnavailableError
    from runtime.scoring import UtilityScorer
    try:
        emb = load_default_embedder()
    except EncoderUnavailableError:
        pytest.skip("the ONNX encoder is not exported here (make encoder)")
    conv = load_locomo(DEV)[0][0]
    check_parity(conv, emb, 0.1, tmp_path, UtilityScorer())
