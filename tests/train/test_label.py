"""The label pipeline on small hand-made trajectories whose right labels are known: hindsight
labels and their discount, stale and look-alike negatives, mined hard negatives, the retrievability
gate, and the counterfactual check."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from runtime.record import DialogRole, SourceType
from runtime.scoring import FakeScorer
from train.agent import AgentConfig, Decision, run_episode
from train.label import LabelConfig, OracleScorer, counterfactual_agreement, label_decisions
from train.simulate.events import Episode, Event, Kind, Question, Truth

T0 = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)
DIM = 8


class TableEmbedder:
    """Each text maps to a chosen direction, so cosine ranks are exactly what the test says."""

    encoder_id = "table-8"
    dim = DIM

    def __init__(self, table: dict[str, Sequence[float]]) -> None:
        self.table = {k: np.asarray(v, np.float32) / np.linalg.norm(v) for k, v in table.items()}

    def encode(self, texts: Sequence[str], *, batch_size: int = 64) -> np.ndarray:
        out = np.zeros((len(texts), DIM), np.float32)
        for i, t in enumerate(texts):
            v = self.table.get(t)
            if v is None:  # anything else (redacted copies, goals): a fixed unrelated direction
                v = np.eye(DIM, dtype=np.float32)[7]
            out[i] = v
        return out


def _event(i: int, text: str, truth: Truth, user: str = "u1") -> Event:
    return Event(event_id=f"e{i}", task_id="t", step=i, content=text, source_type=SourceType.direct_interaction,
                 dialog_role=DialogRole.user, active_role="planner", sub_role=None, phase="plan",
                 session_id="s1", user_id=user, timestamp=T0 + timedelta(minutes=i), expires_at=None, flags=(),
                 tags=(), source_entity=user, trigger="user_message", derived_from=(), confidence=0.95, truth=truth)


def episode(n_chitchat: int = 0) -> Episode:
    events = [
        _event(0, "The hotel is the Ritz", Truth(Kind.key_fact, "trip.hotel", 1, superseded_by="e1", value="Ritz")),
        _event(1, "Change: the hotel is now the Hilton", Truth(Kind.update, "trip.hotel", 2, supersedes="e0",
                                                               value="Hilton")),
        _event(2, "The Ritz has a lovely gym", Truth(Kind.distractor, lookalike_of="trip.hotel")),
        _event(3, "Nice weather today", Truth(Kind.chitchat)),
    ] + [_event(4 + j, f"small talk number {j}", Truth(Kind.chitchat)) for j in range(n_chitchat)]
    q = Question("q1", step=len(events), timestamp=T0 + timedelta(minutes=len(events), seconds=30), user_id="u1",
                 session_id="s1", text="Which hotel are we staying at?", fact_key="trip.hotel", answer_value="Hilton",
                 answer_event_ids=("e1",), stale_event_ids=("e0",), lookalike_event_ids=("e2",))
    return Episode("test.train.0", "travel", "train", 0, "Plan the trip", "planner", ("u1",), tuple(events), (q,))


# Directions: the question is closest to the weather chit-chat (a mined near-miss), then the answer.
EMB = TableEmbedder({
    "Which hotel are we staying at?": [1, 1, 0, 0, 0, 0, 0, 0],
    "The hotel is the Ritz": [1, 0, 1, 0, 0, 0, 0, 0],
    "Change: the hotel is now the Hilton": [1, 0.6, 0, 1, 0, 0, 0, 0],
    "The Ritz has a lovely gym": [0.2, 0, 1, 0, 1, 0, 0, 0],
    "Nice weather today": [1, 1, 0, 0, 0, 0.1, 0, 0],
})


def _decision(step: int, ids: list[str]) -> Decision:
    return Decision("u1", step, ids, np.zeros((len(ids), 1), np.float32), np.ones(len(ids), bool), "test")


def test_hindsight_labels_discounts_and_negatives_are_the_known_ones() -> None:
    ep = episode()
    cfg = LabelConfig(half_life_steps=2.0, retrievable_rank=10, stale_weight=3.0, lookalike_weight=2.0, mined_weight=5.0)
    lab = label_decisions(ep, [_decision(2, ["e0", "e1"]), _decision(4, ["e0", "e1", "e2", "e3"])], EMB, cfg)
    rows = dict(enumerate(zip(lab.y.tolist(), lab.w.tolist(), lab.tag)))
    # decision at step 2: the answer is useful, discounted by 2 steps (one half-life); the old version is stale
    assert rows[1] == (pytest.approx(0.5), 1.0, "useful")
    assert rows[0] == (0.0, 3.0, "stale")
    # decision at step 4, right before the question: no discount
    assert rows[3] == (1.0, 1.0, "useful")
    assert rows[2] == (0.0, 3.0, "stale")
    assert rows[4] == (0.0, 2.0, "lookalike")
    # the chit-chat ranks above the true answer for this question: a mined hard negative
    assert rows[5] == (0.0, 5.0, "mined")
    assert lab.y.sum() == pytest.approx(1.5)  # a pipeline that labels everything 0 fails here


def test_an_answer_the_question_would_not_retrieve_is_not_labelled_useful() -> None:
    ep = episode()
    lab = label_decisions(ep, [_decision(4, ["e0", "e1", "e2", "e3"])], EMB, LabelConfig(retrievable_rank=1))
    assert lab.y.tolist() == [0.0, 0.0, 0.0, 0.0]  # the answer ranks second, behind the chit-chat
    assert lab.tag == ["stale", "other", "lookalike", "mined"]


def test_no_later_question_means_no_positive() -> None:
    ep = episode()
    lab = label_decisions(ep, [_decision(5, ["e0", "e1"])], EMB, LabelConfig())  # after the question
    assert lab.y.tolist() == [0.0, 0.0] and lab.tag == ["other", "other"]


def test_the_oracle_scores_by_the_same_hindsight() -> None:
    from runtime.record import MemIR, Provenance
    from utilitynet.context import ScoringContext
    ep = episode()
    recs = [MemIR(id=f"e{i}", content="x", provenance=Provenance(user_id="u1")) for i in range(4)]
    u = OracleScorer(ep, EMB, LabelConfig(half_life_steps=2.0)).score(
        recs, np.zeros((4, DIM)), ScoringContext(now=T0 + timedelta(minutes=1, seconds=30), record_steps=np.arange(4)))
    assert u[1] == pytest.approx(1.0 + 0.5) and max(u[0], u[2], u[3]) < 0.01  # 2 events written: step 2


def test_the_counterfactual_check_agrees_on_a_trajectory_with_a_known_answer() -> None:
    ep = episode(n_chitchat=6)
    cfg = AgentConfig(capacity_frac=0.2, min_capacity=1, every_n_writes=2, recall_k=1)
    scorer = FakeScorer(lambda r: 0.9 if "small talk" in r.content else 0.1)  # a policy that drops the answer
    run = run_episode(ep, scorer, EMB, cfg, record=True)
    assert not run.questions[0].success
    lab = label_decisions(ep, run.decisions, EMB, LabelConfig(retrievable_rank=10))
    assert lab.y.max() > 0.2  # the answer was a candidate at some decision and is labelled useful
    forced = run_episode(ep, scorer, EMB, cfg, force_keep={"e1": 0})
    assert forced.questions[0].success  # keeping it answers the question: labels and reality agree
    res = counterfactual_agreement([ep], [run], [lab], scorer, EMB, cfg, n_samples=4, seed=0)
    assert res.n >= 2 and res.agreement == 1.0 and res.corrections == []


def test_disagreements_are_relabelled_with_the_counterfactual() -> None:
    from train.label import Labels, apply_corrections
    lab = Labels(np.array([0.0, 0.9], np.float32), np.ones(2, np.float32), ["other", "useful"])
    assert apply_corrections([lab], [(0, 0, 1.0), (0, 1, 0.0)], weight=3.0) == 2
    assert lab.y.tolist() == [1.0, 0.0] and lab.w.tolist() == [3.0, 3.0] and lab.tag == ["counterfactual"] * 2


def test_superseded_values_in_knowledge_updates_are_half_useful_once_the_update_is_held() -> None:
    from runtime.encoders import HashEmbedder
    from tests.train.lme.test_lme import item
    from train.conversation_rows import RowConfig
    from train.lme.reader import parse_question
    from train.lme.rows import question_rows, superseded_values

    sessions = [
        [{"role": "user", "content": "I lead a team of 4 engineers now.", "has_answer": True},
         {"role": "assistant", "content": "Great!"}] + [{"role": "user", "content": f"filler {i}"} for i in range(8)],
        [{"role": "user", "content": f"chat {i} about cooking pasta"} for i in range(10)],
        [{"role": "user", "content": "Update: I lead 5 engineers since last week.", "has_answer": True},
         {"role": "assistant", "content": "Congrats!"}] + [{"role": "user", "content": f"more {i}"} for i in range(8)],
    ]
    q = parse_question(item("ku1", "knowledge-update", sessions=sessions, ids=["answer_a", "x", "answer_b"]))
    assert superseded_values(q) == {"D1:1": {"D3:1"}}
    r = question_rows(q, HashEmbedder(32), RowConfig(capacities=(0.2,), policies=("oracle",)))
    sup = [i for i, t in enumerate(r.tag) if t == "superseded"]
    assert sup and all(r.item_ids[i] == "D1:1" and r.y[i] == 0.5 for i in sup)
    assert any(r.item_ids[i] == "D1:1" and r.y[i] == 1.0 for i in range(len(r.y)))  # before the update: evidence
    assert all(r.y[i] == 1.0 for i in range(len(r.y)) if r.item_ids[i] == "D3:1")


def test_copies_of_other_questions_evidence_are_never_negatives() -> None:
    from runtime.encoders import HashEmbedder
    from tests.train.lme.test_lme import item
    from train.conversation_rows import RowConfig
    from train.lme.reader import parse_question
    from train.lme.rows import question_rows, unlabeled_turns

    sessions = [
        [{"role": "user", "content": "By the way, I moved to Lyon.", "has_answer": True}]
        + [{"role": "user", "content": f"chat {i}"} for i in range(9)],
        [{"role": "user", "content": f"By the way, I adopted cat {i}."} for i in range(10)],       # another's evidence
        [{"role": "user", "content": f"write code {i}"} for i in range(10)],                       # ShareGPT filler
    ]
    q = parse_question(item("u1", sessions=sessions, ids=["answer_1", "abc123_1", "sharegpt_x"]))
    assert unlabeled_turns(q) == {f"D2:{i}" for i in range(1, 11)}
    r = question_rows(q, HashEmbedder(32), RowConfig(capacities=(0.2,), policies=("oracle", "longest_user")))
    assert not any(i.startswith("D2:") for i in r.item_ids)
    assert any(i.startswith("D3:") for i in r.item_ids) and r.y[[i == "D1:1" for i in r.item_ids]].min() == 1.0


def test_uniform_held_decisions_do_not_depend_on_where_the_evidence_is() -> None:
    from runtime.encoders import HashEmbedder
    from tests.train.lme.test_lme import item
    from train.conversation_rows import FIRST_JUDGEMENT, RowConfig
    from train.lme.reader import parse_question
    from train.lme.rows import question_rows

    def question(evidence_session: int) -> object:
        sessions = [[{"role": "user", "content": f"session {s} turn {i}: I like topic {s * 10 + i}",
                      **({"has_answer": True} if s == evidence_session and i == 0 else {})} for i in range(4)]
                    for s in range(10)]
        ids = [f"answer_{s}" if s == evidence_session else f"sharegpt_{s}" for s in range(10)]
        raw = item("u1", sessions=sessions, ids=ids, answer=f"answer_{evidence_session}")
        raw["haystack_dates"] = [f"2023/05/{d + 1:02d} (Mon) 09:00" for d in range(10)]
        return parse_question(raw)

    def held_steps(q: object, cfg: RowConfig) -> set[int]:
        r = question_rows(q, HashEmbedder(32), cfg)  # type: ignore[arg-type]
        return {int(s) for s, d in zip(r.step, r.decision) if d != FIRST_JUDGEMENT}

    by_evidence = RowConfig(capacities=(0.2,), policies=("longest_user",))
    assert held_steps(question(2), by_evidence) == {12, 40}  # after the evidence session, and the last
    assert held_steps(question(6), by_evidence) == {28, 40}
    uniform = RowConfig(capacities=(0.2,), policies=("longest_user",), held="uniform", held_decisions=3)
    steps = held_steps(question(2), uniform)
    assert len(steps) == 4 and 40 in steps  # three drawn, and the last
    assert held_steps(question(6), uniform) == steps == held_steps(question(2), uniform)  # reproducible, blind
    with pytest.raises(ValueError, match="held"):
        RowConfig(held="sometimes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="held_decisions"):
        RowConfig(held_decisions=-1)
