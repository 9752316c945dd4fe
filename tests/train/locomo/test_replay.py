"""Replaying a conversation through the runtime: capacity, no resurrection, exact recall on a
conversation whose answer is known, recorded decisions, and rows for training."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from runtime.encoders import HashEmbedder
from runtime.record import MemIR
from runtime.scoring.baselines import LongestScorer, RecencyScorer
from tests.train.locomo_data import tiny_locomo  # type: ignore[import-not-found]
from train.dataset import RowBatch
from train.locomo.protocol import evidence_counts
from train.locomo.reader import load_locomo, parse_locomo
from train.locomo.replay import locomo_oracle, memory_id, replay_conversation
from train.locomo.rows import add_conversation_rows
from utilitynet.context import ScoringContext
from utilitynet.features import spec_for

EMB = HashEmbedder(dim=32)
DEV = Path(__file__).resolve().parents[4] / "shared" / "data" / "locomo" / "locomo-dev.json"




def conv():  # type: ignore[no-untyped-def]
    return parse_locomo([tiny_locomo()])[0][0]


class Spy:
    """Wraps a scorer and remembers the ids of every call."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.calls = inner, []
        self.name = inner.name

    def score(self, records: Sequence[MemIR], embeddings: np.ndarray, ctx: ScoringContext) -> np.ndarray:
        self.calls.append([r.id for r in records])
        return self.inner.score(records, embeddings, ctx)


def test_oracle_recall_is_exact() -> None:
    c = conv()
    assert evidence_counts(c) == {"D1:2": 1, "D1:1": 1, "D2:1": 1}
    run = replay_conversation(c, locomo_oracle(c), EMB, 0.25)  # K = 2
    # After session 2, three cited turns compete for 2 slots; ties keep the later turn.
    assert run.K == 2 and run.kept == ["D1:2", "D2:1"]
    assert run.recall == pytest.approx(2 / 3) and run.n_pairs == 3
    assert run.by_category == {"1": 1.0, "2": 0.0, "3": None, "4": 1.0}


def test_capacity_holds_and_forgotten_turns_never_return() -> None:
    c = conv()
    spy = Spy(RecencyScorer())
    run = replay_conversation(c, spy, EMB, 0.25)
    assert len(spy.calls) == 2 and len(run.kept) <= run.K
    assert run.kept == ["D2:3", "D2:4"] and run.recall == 0.0
    seen: set[str] = set()
    for ids in spy.calls:  # a turn absent from a later decision was forgotten: it must stay absent
        gone = seen - set(ids)
        seen |= set(ids)
        assert not gone & set(ids)
    assert set(spy.calls[1]) == {"D1:3", "D1:4"} | {f"D2:{i}" for i in range(1, 5)}


def test_retrieval_recall_and_records() -> None:
    c = conv()
    everything = replay_conversation(c, LongestScorer(), EMB, 1.0, k=8)  # nothing forgotten, k >= N
    assert everything.recall == 1.0 and everything.retrieval_recall_at_k == 1.0
    assert everything.decisions == [] and len(everything.kept) == 8
    run = replay_conversation(c, LongestScorer(), EMB, 0.25, k=1, record=True)
    assert 0.0 <= run.retrieval_recall_at_k <= 1.0
    assert sum(v[1] for v in run.retrieval_counts.values()) == 3
    spec = spec_for(EMB.dim, EMB.encoder_id)
    assert [d.X.shape[1] for d in run.decisions] == [spec.n_features] * 2
    assert all(d.kept.sum() == 2 for d in run.decisions)
    assert memory_id("D1:3") == "D1:3" and memory_id("D 1/3") == "D_1_3"


def test_conversation_rows_are_labelled_by_evidence() -> None:
    c = conv()
    rows = RowBatch(spec_for(EMB.dim, EMB.encoder_id))
    add_conversation_rows(rows, c, EMB, weight=2.0, capacities=(0.25,))
    t = rows.to_table().to_pydict()
    assert set(t["source"]) == {"locomo"} and set(t["episode_id"]) == {"t-1"}
    for item, y, w, tag in zip(t["item_id"], t["label"], t["weight"], t["tag"]):
        cited = item in {"D1:1", "D1:2", "D2:1"}       # D1:3 is only cited by the adversarial question
        assert (y, w, tag) == ((1.0, 4.0, "evidence") if cited else (0.0, 2.0, "other"))


@pytest.mark.slow
@pytest.mark.skipif(not DEV.is_file(), reason="LoCoMo dev split not present")
def test_dev_split_baselines_match_the_data_readme() -> None:
    """The production path reproduces the dataset README's reference figures (p = 0.10)."""
    convs, repairs = load_locomo(DEV)
    assert len(convs) == 5 and repairs

    def pooled(make: Any, p: float) -> float:
        runs = [replay_conversation(c, make(c), EMB, p, k=1) for c in convs]
        return sum(r.hits for r in runs) / sum(r.n_pairs for r in runs)

    assert pooled(lambda c: RecencyScorer(), 0.1) == pytest.approx(0.09, abs=0.01)
    assert pooled(locomo_oracle, 0.1) == pytest.approx(0.61, abs=0.01)
    assert pooled(lambda c: LongestScorer(), 0.1) == pytest.approx(0.26, abs=0.02)


def test_a_token_budget_holds_the_tokens_and_is_reported_beside_turn_counts() -> None:
    from runtime.retention import approx_tokens
    from train.eval.locomo import evaluate_locomo, locomo_table, summarize_locomo
    from train.locomo.replay import stream_turns
    from train.stream import stored_texts, token_budget_for

    c = conv()
    turns = stream_turns(c)
    texts = dict(zip((t.memory_id for t in turns), stored_texts(turns), strict=True))
    run = replay_conversation(c, LongestScorer(), EMB, 0.3, unit="tokens")
    assert run.unit == "tokens" and run.label == "0.3 tokens" and run.violations == 0
    assert run.K == token_budget_for(turns, 0.3) > 0
    assert sum(approx_tokens(texts[memory_id(d)]) for d in run.kept) <= run.K
    by_turns = replay_conversation(c, LongestScorer(), EMB, 0.3)
    assert by_turns.label == "0.3" and by_turns.K == 2  # round(0.3 × 8 turns)
    with pytest.raises(ValueError, match="unit"):
        replay_conversation(c, LongestScorer(), EMB, 0.3, unit="words")
    runs = evaluate_locomo([c], ["longest"], [0.3], EMB, progress=False, budgets=[0.3])
    summary = summarize_locomo(runs)
    assert set(summary["longest"]) == {"0.3", "0.3 tokens"}
    assert summary["longest"]["0.3 tokens"]["recall"] == run.recall
    assert "0.30 (tokens)" in locomo_table(summary)
