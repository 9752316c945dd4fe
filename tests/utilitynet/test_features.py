"""The feature contract: shape, determinism, finiteness on hostile input, and that every named
feature responds to the input it claims to read."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import utilitynet.redundancy as R
from runtime.record import Flag, MemIR, Metadata, Provenance, RoleContext, Usage
from utilitynet.context import ScoringContext
from utilitynet.dialog import CONTEXT_NAMES
from utilitynet.features import (
    FEATURE_NAMES,
    FEATURE_SCHEMA_VERSION,
    FeatureSpec,
    feature_names,
    featurize,
    spec_for,
)
from utilitynet.textstats import TEXT_STAT_NAMES, text_stats

NOW = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
D = 16
COL = {n: i for i, n in enumerate(FEATURE_NAMES)}

# Pinned (version, sha256 of the names). A change of FEATURE_NAMES must come with a version bump.
KNOWN_SCHEMAS = {"1": "c5da2ad06335ad5388da9eb907efaacdaa90dec986dfd0da2ce65e8e6a59c33c",
                 "2": "6634899e84b8549bc3dff434ed608191b517351203030cb7e9bfdc42b1775c9e",
                 "3": "2d2b48bf8e7afe81e468cb33a22813544154fb38b4a2f6c9b78617e5966ff14e"}


def rec(content: str = "The flight to Lisbon leaves on Friday", **kw: Any) -> MemIR:
    """A MemIR with nested overrides: md=dict(...), usage=dict(...), prov=dict(...), role=dict(...)."""
    return MemIR(
        content=content,
        created_at=kw.pop("created_at", NOW - timedelta(hours=2)),
        provenance=Provenance(user_id="u1", **kw.pop("prov", {})),
        role_context=RoleContext(**kw.pop("role", {})),
        metadata=Metadata(**kw.pop("md", {})),
        usage=Usage(**kw.pop("usage", {})),
        **kw,
    )


def emb(n: int, seed: int = 0, d: int = D) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, d)).astype(np.float32)


def ctx(**kw: Any) -> ScoringContext:
    return ScoringContext(now=kw.pop("now", NOW), **kw)


def col(X: np.ndarray, name: str) -> np.ndarray:
    return X[:, COL[name]]


# --- shape, names, spec --------------------------------------------------------------------------


def test_shape_matches_names_and_spec() -> None:
    X = featurize([rec(), rec("Hi!")], emb(2), ctx())
    assert X.dtype == np.float32
    assert X.shape == (2, len(feature_names(D)))
    assert len(set(feature_names(D))) == len(feature_names(D))
    assert feature_names(D)[-D:] == tuple(f"emb_{i}" for i in range(D))
    spec = spec_for(D, "hash-16")
    assert spec == FeatureSpec(FEATURE_SCHEMA_VERSION, feature_names(D), D, "hash-16")
    assert spec.n_features == X.shape[1]
    assert FeatureSpec.from_metadata(spec.to_metadata()) == spec


def test_feature_names_are_pinned_to_the_schema_version() -> None:
    digest = hashlib.sha256("\n".join(FEATURE_NAMES).encode()).hexdigest()
    assert KNOWN_SCHEMAS.get(FEATURE_SCHEMA_VERSION) == digest, (
        "FEATURE_NAMES changed: bump FEATURE_SCHEMA_VERSION and pin the new (version, digest) here"
    )


def test_spec_from_metadata_names_missing_keys() -> None:
    with pytest.raises(ValueError, match="encoder_id"):
        FeatureSpec.from_metadata(
            {"feature_schema_version": "1", "feature_names": "[]", "embedding_dim": "3"}
        )
    with pytest.raises(ValueError, match="malformed"):
        FeatureSpec.from_metadata(
            {"feature_schema_version": "1", "feature_names": "[", "embedding_dim": "3", "encoder_id": "x"}
        )


def test_embedding_block_is_the_unit_embedding() -> None:
    E = emb(3) * 7.0
    X = featurize([rec(), rec(), rec()], E, ctx())
    np.testing.assert_allclose(X[:, -D:], E / np.linalg.norm(E, axis=1, keepdims=True), atol=1e-6)


def test_deterministic_and_permutation_equivariant() -> None:
    recs = [
        rec(f"note {i}: must call Ana at {i}pm", created_at=NOW - timedelta(hours=i % 3)) for i in range(12)
    ]
    E = emb(12)
    E[5] = E[2] + 0.01  # a near-duplicate pair
    c = ctx(step=20, record_steps=np.arange(12) % 4, goal_embedding=E[0])
    X1, X2 = featurize(recs, E, c), featurize(recs, E, c)
    assert np.array_equal(X1, X2)
    perm = np.random.default_rng(1).permutation(12)
    Xp = featurize(
        [recs[i] for i in perm],
        E[perm],
        ctx(step=20, record_steps=(np.arange(12) % 4)[perm], goal_embedding=E[0]),
    )
    np.testing.assert_allclose(Xp, X1[perm], atol=1e-6)


# --- hostile input -------------------------------------------------------------------------------


def duck(**kw: Any) -> SimpleNamespace:
    """A duck-typed record with every optional field None (not a MemIR: features must not care)."""
    md = SimpleNamespace(
        confidence=None, flags=None, sensitivity=None, expires_at=None, freshness_half_life=None
    )
    for k in list(kw):
        if hasattr(md, k):
            setattr(md, k, kw.pop(k))
    return SimpleNamespace(
        content=kw.pop("content", None),
        created_at=kw.pop("created_at", None),
        provenance=SimpleNamespace(type=kw.pop("type", None), derived_from=None),
        role_context=SimpleNamespace(dialog_role=kw.pop("dialog_role", None)),
        metadata=md,
        usage=SimpleNamespace(access_count=kw.pop("access_count", None), last_accessed_at=None),
    )


@pytest.mark.parametrize("n", [0, 1, 2])
def test_small_batches(n: int) -> None:
    X = featurize([rec() for _ in range(n)], emb(n), ctx())
    assert X.shape == (n, len(FEATURE_NAMES) + D) and np.isfinite(X).all()
    if n == 1:
        assert col(X, "position")[0] == 1.0 and col(X, "max_sim_other")[0] == 0.0


def test_finite_on_adversarial_records() -> None:
    far = datetime(9999, 12, 31, tzinfo=UTC)
    ancient = datetime(1, 1, 2, tzinfo=UTC)
    recs: list[Any] = [
        duck(),
        duck(content="", type="martian", dialog_role="narrator", sensitivity="top-secret", flags=["nope"]),
        duck(
            content="x" * 200_000,
            created_at=ancient,
            expires_at=far,
            confidence=float("nan"),
            access_count=10**40,
        ),
        duck(
            content="a\x00b 😀 中文？", created_at=datetime(2025, 3, 1), freshness_half_life=timedelta(days=1)
        ),
        rec(
            created_at=far,
            md={"expires_at": ancient.replace(year=2), "confidence": 0.0},
            usage={"access_count": 10**18, "last_accessed_at": far},
        ),
        rec("!" * 5000 + "?" * 5000, md={"freshness_half_life": timedelta(microseconds=1)}),
    ]
    E = emb(len(recs))
    E[0] = np.nan
    E[1] = 0.0
    E[2] = np.inf
    c = ctx(
        step=2**62,
        record_steps=np.array([np.nan, -5, 1e300, np.inf, 0, 3]),
        goal_embedding=np.full(D, np.nan),
        recent_embedding=np.zeros(D),
        stage=float("inf"),
    )
    X = featurize(recs, E, c)
    assert np.isfinite(X).all()
    assert np.abs(X).max() <= 20.0


def test_misaligned_inputs_raise_clear_errors() -> None:
    with pytest.raises(ValueError, match="embeddings must be"):
        featurize([rec()], emb(2), ctx())
    with pytest.raises(ValueError, match="record_steps"):
        featurize([rec()], emb(1), ctx(record_steps=np.arange(3)))
    with pytest.raises(ValueError, match="same encoder"):
        featurize([rec()], emb(1), ctx(goal_embedding=np.ones(D + 1)))
    with pytest.raises(ValueError, match="redundancy"):
        featurize([rec()], emb(1), ctx(), redundancy="all")  # type: ignore[arg-type]


# --- every named feature responds to its input ---------------------------------------------------
# Each case: (features that must change, base record kwargs, changed record kwargs, base ctx, changed ctx).
# The row of interest is row 0 of a 3-record batch whose other rows are fixed.

Case = tuple[tuple[str, ...], dict[str, Any], dict[str, Any], dict[str, Any], dict[str, Any]]
_FLAG_CASES: list[Case] = [((f"flag_{f.value}",), {}, {"md": {"flags": [f]}}, {}, {}) for f in Flag]
CASES: list[Case] = _FLAG_CASES + [
    (("age_steps_log", "has_step"), {}, {}, {}, {"step": 50, "record_steps": np.array([0, 40, 45])}),
    (
        ("age_hours_log", "since_touch_hours_log", "freshness"),
        {"md": {"freshness_half_life": timedelta(days=1)}},
        {"created_at": NOW - timedelta(days=30), "md": {"freshness_half_life": timedelta(days=1)}},
        {},
        {},
    ),
    (
        ("access_count_log", "accessed", "since_touch_hours_log"),
        {},
        {"usage": {"access_count": 12, "last_accessed_at": NOW}},
        {},
        {},
    ),
    (("position",), {"created_at": NOW - timedelta(days=9)}, {"created_at": NOW}, {}, {}),
    (
        ("src_direct_interaction", "src_derived_inference"),
        {},
        {"prov": {"type": "derived_inference"}},
        {},
        {},
    ),
    (("src_direct_interaction", "src_external_ingest"), {}, {"prov": {"type": "external_ingest"}}, {}, {}),
    (("src_direct_interaction", "src_system_feedback"), {}, {"prov": {"type": "system_feedback"}}, {}, {}),
    (("role_user", "role_agent"), {}, {"role": {"dialog_role": "agent"}}, {}, {}),
    (("role_user", "role_system"), {}, {"role": {"dialog_role": "system"}}, {}, {}),
    (("role_user", "role_tool"), {}, {"role": {"dialog_role": "tool"}}, {}, {}),
    (("confidence",), {}, {"md": {"confidence": 0.25}}, {}, {}),
    (("sens_none", "sens_pii"), {}, {"md": {"sensitivity": "pii"}}, {}, {}),
    (("sens_none", "sens_secret"), {}, {"md": {"sensitivity": "secret"}}, {}, {}),
    (("has_expiry", "to_expiry_hours_log"), {}, {"md": {"expires_at": NOW + timedelta(hours=5)}}, {}, {}),
    (("has_expiry", "expired"), {}, {"md": {"expires_at": NOW - timedelta(hours=1)}}, {}, {}),
    (("has_half_life", "freshness"), {}, {"md": {"freshness_half_life": timedelta(hours=1)}}, {}, {}),
    (("parents_log",), {}, {"prov": {"derived_from": ["m1", "m2"]}}, {}, {}),
    (
        ("chars_log", "tokens_log"),
        {"content": "Lisbon trip"},
        {"content": "Lisbon trip, with a long description of every leg of the journey"},
        {},
        {},
    ),
    (("urgency_log",), {"content": "book the hotel"}, {"content": "you MUST book the hotel ASAP"}, {}, {}),
    (("exclaim",), {"content": "book the hotel"}, {"content": "book the hotel!"}, {}, {}),
    (("question",), {"content": "book the hotel"}, {"content": "book the hotel?"}, {}, {}),
    (("numbers_log",), {"content": "budget is fine"}, {"content": "budget is 400 or 450"}, {}, {}),
    (
        ("dates_log",),
        {"content": "the review is soon"},
        {"content": "the review is on May 3 at 10:30"},
        {},
        {},
    ),
    (
        ("names_log",),
        {"content": "lunch with a friend"},
        {"content": "lunch with Caroline and Melanie"},
        {},
        {},
    ),
    (("first_person_log",), {"content": "likes hiking"}, {"content": "I like hiking with my dog"}, {}, {}),
    (
        ("second_person_log",),
        {"content": "likes hiking"},
        {"content": "do you like hiking with your dog"},
        {},
        {},
    ),
    (
        ("update_markers_log",),
        {"content": "meeting at noon"},
        {"content": "actually the meeting moved, no longer at noon"},
        {},
        {},
    ),
    (
        ("greeting_only",),
        {"content": "the passport expires in June"},
        {"content": "Thanks, Caroline!! 😀"},
        {},
        {},
    ),
    (
        ("image_caption",),
        {"content": "look at this"},
        {"content": "look at this [image: a red bike]"},
        {},
        {},
    ),
    (("first_person_rate",), {"content": "likes hiking a lot"}, {"content": "I like my hike"}, {}, {}),
    (("past_events_log",), {"content": "a trip to Rome"}, {"content": "I went to Rome and we visited Pisa"}, {}, {}),
    (("my_noun_log",), {"content": "the dog is fine"}, {"content": "my dog is fine"}, {}, {}),
    (("questions_log", "ends_question"), {"content": "the hotel"}, {"content": "the hotel? which one?"}, {}, {}),
    (("time_words_log",), {"content": "we met Anna"}, {"content": "we met Anna last week, yesterday"}, {}, {}),
    (("caps_words_log",), {"content": "we met her and I waved"}, {"content": "we met Anna and I waved"}, {}, {}),
    (("greeting_any",), {"content": "the passport"}, {"content": "hey, the passport"}, {}, {}),
    (("reaction",), {"content": "the passport"}, {"content": "wow, the passport"}, {}, {}),
    (("exclaim_rate",), {"content": "the passport"}, {"content": "the passport!!"}, {}, {}),
    (("quantities_log",), {"content": "I ran a lot"}, {"content": "I ran 5 miles in forty minutes"}, {}, {}),
    (("requests_log",), {"content": "I like pasta"}, {"content": "can you recommend a pasta place please"}, {}, {}),
    (("digression",), {"content": "the hotel is fine"}, {"content": "by the way, the hotel is fine"}, {}, {}),
    (("list_items_log",), {"content": "options: a, b"}, {"content": "options:\n1. a\n2. b\n- c"}, {}, {}),
    (
        tuple(f"ctx_{n}" for n in CONTEXT_NAMES) + ("ctx_present",),
        {},
        {"md": {"attributes": {f"ctx.{n}": 0.5 for n in CONTEXT_NAMES}}},
        {},
        {},
    ),
    (("goal_sim", "has_goal"), {}, {}, {}, {"goal_embedding": "row0"}),
    (("recent_sim", "has_recent"), {}, {}, {}, {"recent_embedding": "row0"}),
    (("stage",), {}, {}, {}, {"stage": 0.8}),
]


def _run_case(rec_kw: dict[str, Any], ctx_kw: dict[str, Any]) -> np.ndarray:
    recs = [
        rec(**rec_kw),
        rec("Seat 14C is booked", created_at=NOW - timedelta(hours=3)),
        rec("Call the bank", created_at=NOW - timedelta(hours=1)),
    ]
    E = emb(3)
    kw = {k: (E[0] if isinstance(v, str) and v == "row0" else v) for k, v in ctx_kw.items()}
    return featurize(recs, E, ctx(**kw))[0]


@pytest.mark.parametrize("names,base,changed,base_ctx,changed_ctx", CASES, ids=lambda v: None)
def test_named_feature_responds(
    names: tuple[str, ...],
    base: dict[str, Any],
    changed: dict[str, Any],
    base_ctx: dict[str, Any],
    changed_ctx: dict[str, Any],
) -> None:
    x0, x1 = _run_case(base, base_ctx), _run_case(changed, changed_ctx)
    moved = {n for n in FEATURE_NAMES if x0[COL[n]] != x1[COL[n]]}
    assert set(names) <= moved, f"{set(names) - moved} did not respond"


def test_every_named_feature_has_a_response_case() -> None:
    covered = {n for case in CASES for n in case[0]} | {  # the batch-relative ones: see the redundancy test
        "has_redundancy",
        "max_sim_other",
        "near_dups_log",
        "max_sim_newer",
        "max_sim_older",
        "has_newer_near_dup",
        "newest_of_near_dups",
    }
    assert set(FEATURE_NAMES) <= covered, f"add a response case for {set(FEATURE_NAMES) - covered}"


def test_redundancy_features_see_near_duplicates_and_their_order() -> None:
    E = emb(4)
    E[2] = E[0] + 0.001 * emb(1, seed=9)[0]  # record 2 is a later near-duplicate of record 0
    recs = [
        rec("Hotel is the Ritz", created_at=NOW - timedelta(days=3)),
        rec("Seat 14C"),
        rec("Hotel is now the Hilton", created_at=NOW - timedelta(days=1)),
        rec("Call the bank"),
    ]
    X = featurize(recs, E, ctx())
    assert col(X, "has_redundancy").tolist() == [1, 1, 1, 1]
    assert col(X, "max_sim_other")[0] > 0.99 and col(X, "max_sim_other")[1] < 0.9
    assert col(X, "near_dups_log")[[0, 2]].tolist() == pytest.approx([np.log(2)] * 2)
    assert col(X, "has_newer_near_dup").tolist() == [1, 0, 0, 0]
    assert col(X, "newest_of_near_dups").tolist() == [0, 0, 1, 0]
    assert col(X, "max_sim_newer")[0] > 0.99 and col(X, "max_sim_older")[2] > 0.99
    Xn = featurize(recs, E, ctx(), redundancy="none")
    Xe = featurize(recs, E, ctx(extras={"skip_redundancy": 1.0}))
    red = [COL[n] for n in ("has_redundancy", "max_sim_other", "near_dups_log", "has_newer_near_dup")]
    assert not Xn[:, red].any() and np.array_equal(Xn, Xe)


def _reference_redundancy(E: np.ndarray, rank: np.ndarray) -> dict[str, np.ndarray]:
    En = E / np.linalg.norm(E, axis=1, keepdims=True)
    S = En @ En.T
    np.fill_diagonal(S, -np.inf)
    newer, older = rank[None, :] > rank[:, None], rank[None, :] < rank[:, None]

    def mx(M: np.ndarray) -> np.ndarray:
        v = np.where(M, S, -np.inf).max(axis=1)
        return np.where(np.isfinite(v), v, 0.0)

    return {
        "all": mx(np.ones_like(S, dtype=bool)),
        "newer": mx(newer),
        "older": mx(older),
        "ndup": (S > R.NEAR_DUP_COS).sum(1).astype(float),
    }


@pytest.mark.parametrize("ranks", ["ties", "distinct"])  # distinct: every diagonal block read above its diagonal
@pytest.mark.parametrize("block", [7, 1024])
def test_blocked_redundancy_matches_brute_force(monkeypatch: pytest.MonkeyPatch, ranks: str, block: int) -> None:
    monkeypatch.setattr(R, "BLOCK", block)  # 7: many blocks, ties that straddle block boundaries
    rng = np.random.default_rng(3)
    E = rng.standard_normal((40, 8)).astype(np.float32)
    E[20:30] = E[0:10] + 0.01 * rng.standard_normal((10, 8)).astype(np.float32)
    rank = rng.integers(0, 12, size=40) if ranks == "ties" else rng.permutation(40)
    got, want = (
        R.redundancy(E / np.linalg.norm(E, axis=1, keepdims=True), rank),
        _reference_redundancy(E, rank),
    )
    for k in want:
        np.testing.assert_allclose(got[k], want[k], atol=1e-5, err_msg=k)


# --- text markers --------------------------------------------------------------------------------


def test_text_stats_markers() -> None:
    texts = [
        "Hi Caroline!",
        "ok",
        "I must call Bob at 3pm on 2024-05-03",
        "see you next week, Jon",
        "我务必记住这个非常重要？",
        "ok great plan for the trip to Rome",
    ]
    s = text_stats(texts)
    assert list(s) == list(TEXT_STAT_NAMES)
    assert s["greeting_only"].tolist() == [1, 1, 0, 0, 0, 0]
    assert np.expm1(s["dates_log"]).round().tolist() == [0, 0, 2, 1, 0, 0]
    assert np.expm1(s["urgency_log"]).round().tolist() == [0, 0, 1, 0, 3, 0]
    assert s["question"].tolist() == [0, 0, 0, 0, 1, 0]
    assert np.expm1(s["names_log"]).round().tolist() == [1, 0, 1, 1, 0, 1]


# --- property test -------------------------------------------------------------------------------

_text = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), min_size=1, max_size=80
).filter(lambda t: t.strip() != "")
_dt = st.datetimes(min_value=datetime(1970, 1, 2), max_value=datetime(2200, 1, 1), timezones=st.just(UTC))


@st.composite
def _records(draw: Callable[..., Any]) -> list[MemIR]:
    n = draw(st.integers(0, 6))
    out = []
    for _ in range(n):
        out.append(
            rec(
                draw(_text),
                created_at=draw(_dt),
                md={
                    "confidence": draw(st.floats(0, 1)),
                    "flags": draw(st.lists(st.sampled_from(list(Flag)))),
                    "expires_at": draw(st.none() | _dt),
                    "freshness_half_life": draw(st.none() | st.timedeltas(min_value=timedelta(seconds=1))),
                },
                usage={
                    "access_count": draw(st.integers(0, 10**15)),
                    "last_accessed_at": draw(st.none() | _dt),
                },
                prov={
                    "type": draw(
                        st.sampled_from(["direct_interaction", "derived_inference", "external_ingest"])
                    )
                },
                role={"dialog_role": draw(st.sampled_from(["user", "agent", "system", "tool"]))},
            )
        )
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(recs=_records(), seed=st.integers(0, 2**16), step=st.integers(0, 10**9), stage=st.floats(-5, 5))
def test_featurize_is_deterministic_finite_and_bounded(
    recs: list[MemIR], seed: int, step: int, stage: float
) -> None:
    E = emb(len(recs), seed=seed)
    c = ctx(step=step, record_steps=np.arange(len(recs)), goal_embedding=emb(1, seed + 1)[0], stage=stage)
    X = featurize(recs, E, c)
    assert X.shape == (len(recs), len(FEATURE_NAMES) + D)
    assert np.isfinite(X).all() and np.abs(X).max(initial=0) <= 20.0
    assert np.array_equal(X, featurize(recs, E, c))


# --- columnar input and threads ------------------------------------------------------------------


def test_columns_give_the_same_features_as_records() -> None:
    from utilitynet.columns import RecordColumns

    recs = [rec(f"I must call Bob at {i}pm, ok? " * (i % 5 + 1), created_at=NOW - timedelta(hours=i),
                md={"flags": [Flag.pinned] if i % 3 == 0 else [], "confidence": 0.3 + i / 100,
                    "attributes": {"ctx.prev_q": 1.0} if i % 4 == 0 else {}},
                usage={"access_count": i % 7}) for i in range(50)]
    E = emb(50)
    c = ctx(step=60, record_steps=np.arange(50), goal_embedding=emb(1, 9)[0], stage=0.4)
    cols = RecordColumns.from_records(recs)
    assert np.array_equal(featurize(cols, E, c), featurize(recs, E, c))
    part = cols.slice(10, 20)
    assert len(part) == 10 and part.content == cols.content[10:20]
    with pytest.raises(ValueError, match="created_at"):
        RecordColumns(**{**{k: getattr(cols, k) for k in ("content", "source", "role", "confidence", "flags",
                                                            "sensitivity", "expires_at", "half_life_s",
                                                            "access_count", "last_accessed_at", "n_parents")},
                         "created_at": np.zeros(3)})


def test_threaded_text_stats_equal_single_threaded() -> None:
    rng = np.random.default_rng(0)
    words = "I went to Paris last week ! ok thanks ? must 2024 我 you're".split()
    texts = [" ".join(rng.choice(words, rng.integers(1, 30))) for _ in range(5000)]
    one, two = text_stats(texts), text_stats(texts, workers=3)
    for k in TEXT_STAT_NAMES:
        assert np.array_equal(one[k], two[k]), k


def test_ends_question_ignores_trailing_whitespace_of_any_length() -> None:
    s = text_stats(["is it?   \n\n   ", "ok", "  ", "what?" + " " * 500, "yes?\t\t\t", "", "no ? it is"])
    assert s["ends_question"].tolist() == [1, 0, 0, 1, 1, 0, 0]


def test_featurize_segments_equals_featurize_per_segment(now: datetime) -> None:
    """Scopes scored in one call (batch scoring) get exactly the features each gets alone,
    context-dependent groups included (steps, position, redundancy, recent vector, session context)."""
    from tests.conftest import word_records
    from utilitynet.columns import RecordColumns
    from utilitynet.features import featurize_segments

    rng = np.random.default_rng(3)
    recs = word_records(rng, 90, now, flag=Flag.pinned, flag_every=7, random_confidence=True)
    emb = rng.standard_normal((90, 16)).astype(np.float32)
    emb[5:8] = emb[4]  # near-duplicates inside the first segment
    segments = []
    for lo, hi in ((0, 30), (30, 31), (31, 90)):
        n = hi - lo
        session = rng.standard_normal((n, len(CONTEXT_NAMES)))
        session[-2:] = np.nan  # the open session
        recent = rng.standard_normal(16).astype(np.float32)
        segments.append((lo, hi, ScoringContext(now=now, step=n + 3, record_steps=rng.permutation(n) + 1,
                                                recent_embedding=recent, session_context=session, stage=0.3)))
    together = featurize_segments(RecordColumns.from_records(recs), emb, segments)
    alone = np.vstack([featurize(recs[lo:hi], emb[lo:hi], ctx) for lo, hi, ctx in segments])
    assert np.array_equal(together, alone)


def test_sessions_context_of_many_sessions_equals_each_alone() -> None:
    from utilitynet.dialog import session_context, sessions_context

    rng = np.random.default_rng(4)
    texts = ["Hi!", "What did you do?", "Wow, great!", "I moved to Lisbon [image: a street]", "ok", "thanks"] * 6
    emb = rng.standard_normal((len(texts), 8)).astype(np.float32)
    bounds = np.array([0, 1, 1, 5, 17, 36])  # one empty session, one of a single turn
    together = sessions_context(texts, emb, bounds)
    alone = np.vstack([session_context(texts[a:b], emb[a:b]) for a, b in zip(bounds[:-1], bounds[1:])])
    assert np.array_equal(together, alone)
    assert together[1, 0] == 0 and together[3, 0] == 1  # the caption cue


def test_sessions_context_reads_rows_in_place_and_in_bounded_blocks_with_the_same_values(monkeypatch) -> None:
    """``emb_rows`` (vectors read where they lie in a larger matrix) and the cap on how many turns'
    cosine matrices are computed at once change no value, to the bit: non-finite and zero vectors,
    sessions of many lengths, blocks of one session and of many."""
    import utilitynet.dialog as dialog

    rng = np.random.default_rng(11)
    sizes = rng.choice([1, 2, 3, 7, 20, 41], size=120)
    bounds = np.r_[0, np.cumsum(sizes)]
    n = int(bounds[-1])
    words = ["hi", "what", "about", "the", "hotel", "?", "I", "went", "lol", "[image: a cat]"]
    texts = [" ".join(rng.choice(words, rng.integers(1, 12))) for _ in range(n)]
    roles = [str(r) for r in rng.choice(["user", "agent"], n)]
    big = rng.standard_normal((3 * n, 16)).astype(np.float32)
    where = rng.permutation(3 * n)[:n]
    big[where[:4]] = 0.0
    big[where[4:7], 3] = np.nan
    emb = big[where].copy()
    whole = dialog.sessions_context(texts, emb, bounds, roles)
    assert np.array_equal(dialog.sessions_context(texts, big, bounds, roles, emb_rows=where), whole)
    for cap in (1, 25, 100):
        monkeypatch.setattr(dialog, "_BLOCK_ROWS", cap)
        assert np.array_equal(dialog.sessions_context(texts, emb, bounds, roles), whole)
        assert np.array_equal(dialog.sessions_context(texts, big, bounds, roles, emb_rows=where), whole)
    with pytest.raises(ValueError, match="emb_rows"):
        dialog.sessions_context(texts, big, bounds, roles, emb_rows=np.r_[where[:-1], 3 * n])
