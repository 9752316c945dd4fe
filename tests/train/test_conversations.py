"""Replaying a conversation through the runtime: capacity, no resurrection, exact recall on a
conversation whose answer is known, recorded decisions, and rows for training."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from runtime.embed import HashEmbedder
from runtime.memir import MemIR
from runtime.policies import LongestScorer, RecencyScorer
from train.conversations import LocomoOracle, memory_id, replay_conversation
from train.dataset import RowBatch
from train.locomo import parse_locomo
from train.locomo_protocol import evaluate_retention, oracle_scorer
from train.locomo_rows import add_conversation_rows
from utilitynet.context import ScoringContext
from utilitynet.features import spec_for

EMB = HashEmbedder(dim=32)
DEV = Path(__file__).resolve().parents[3] / "shared" / "data" / "locomo" / "locomo-dev.json"


def tiny() -> dict[str, Any]:
    """2 sessions × 4 turns (N = 8); 3 recall questions + 1 adversarial one."""
    s1 = [("Ana", "Hi Ben! How are you?"), ("Ben", "Good! I adopted a cat named Miso."),
          ("Ana", "Wow, congrats! What colour?"), ("Ben", "She is orange.")]
    s2 = [("Ana", "I ran a marathon in Lisbon last week!"), ("Ben", "Amazing, how long did it take?"),
          ("Ana", "Four hours."), ("Ben", "Bye!")]
    conv: dict[str, Any] = {"speaker_a": "Ana", "speaker_b": "Ben",
                            "session_1_date_time": "1:56 pm on 8 May, 2023",
                            "session_2_date_time": "10:00 am on 20 May, 2023"}
    for n, turns in ((1, s1), (2, s2)):
        conv[f"session_{n}"] = [{"speaker": sp, "dia_id": f"D{n}:{i + 1}", "text": t} for i, (sp, t) in enumerate(turns)]
    conv["session_1"][3]["blip_caption"] = "an orange cat"
    qa = [{"question": "What is Ben's cat called?", "answer": "Miso", "evidence": ["D1:2"], "category": 1},
          {"question": "When did Ana greet Ben?", "answer": "May", "evidence": ["D1:1"], "category": 2},
          {"question": "Where did Ana run a marathon?", "answer": "Lisbon", "evidence": ["D2:01"], "category": 4},
          {"question": "What is Ben's dog called?", "adversarial_answer": "Miso", "evidence": ["D1:3"],
           "category": 5}]
    return {"sample_id": "t-1", "conversation": conv, "qa": qa}


def conv():  # type: ignore[no-untyped-def]
    return parse_locomo([tiny()])[0][0]


class Spy:
    """Wraps a scorer and remembers the ids of every call."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.calls = inner, []
        self.name = inner.name

    def score(self, records: Sequence[MemIR], embeddings: np.ndarray, ctx: ScoringContext) -> np.ndarray:
        self.calls.append([r.id for r in records])
        return self.inner.score(records, embeddings, ctx)


def test_oracle_recall_is_exact_and_matches_the_numpy_protocol() -> None:
    c = conv()
    run = replay_conversation(c, LocomoOracle(c), EMB, 0.25)  # K = 2
    # After session 2, three cited turns compete for 2 slots; ties keep the later turn.
    assert run.K == 2 and run.kept == ["D1:2", "D2:1"]
    assert run.recall == pytest.approx(2 / 3) and run.n_pairs == 3
    assert run.by_category == {"1": 1.0, "2": 0.0, "3": None, "4": 1.0}
    ref = evaluate_retention(c, oracle_scorer, 0.25)
    assert ref["kept"] == run.kept and ref["recall"] == run.recall


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
def test_real_conversation_matches_the_numpy_oracle() -> None:
    from train.locomo import load_locomo
    c = load_locomo(DEV)[0][0]
    run = replay_conversation(c, LocomoOracle(c), EMB, 0.1)
    assert run.recall == pytest.approx(evaluate_retention(c, oracle_scorer, 0.1)["recall"])
