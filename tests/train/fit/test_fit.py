"""train.fit: config validation, group split, batching, losses/metrics, and a real (small) Lightning fit."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from runtime.errors import ValidationError
from train.dataset import FitData
from train.fit.data import IndexBatches, UtilityDataModule, average_precision, group_recall, roc_auc
from train.fit.lightning import (
    FitConfig,
    FitResult,
    UtilityLitModule,
    listwise_loss,
    log_utility,
    pairwise_rank_loss,
    run,
)
from utilitynet import session as numpy_session
from utilitynet.features import spec_for
from utilitynet.model import UtilityNet, normalization_stats

SPEC = spec_for(8, "test-encoder")
F = SPEC.n_features


def _synthetic(seed: int, episodes: int = 40, decisions: int = 4, items: int = 20) -> FitData:
    """A separable problem: the soft label is a steep sigmoid of a fixed linear score; each decision
    holds four sessions of ``items / 4`` rows, and the collecting policy kept a quarter of them."""
    rng = np.random.default_rng(seed)
    n = episodes * decisions * items
    X = rng.standard_normal((n, F)).astype(np.float32)
    beta = rng.standard_normal(F).astype(np.float32)
    y = (1 / (1 + np.exp(-6 * (X @ beta) / np.sqrt(F)))).astype(np.float32)
    w = rng.uniform(0.5, 2.0, n).astype(np.float32)
    groups = np.repeat(np.arange(episodes), decisions * items)
    decision = np.repeat(np.arange(episodes * decisions), items)
    sessions = np.repeat(np.arange(n // max(items // 4, 1) + 1), max(items // 4, 1))[:n]
    kept = np.tile(np.arange(items) < items // 4, episodes * decisions)
    return FitData(X, y, w, groups, decision, sessions, kept)


def _bce(p: float, y: np.ndarray, w: np.ndarray) -> float:
    return float(np.sum(-w * (y * np.log(p) + (1 - y) * np.log(1 - p))) / np.sum(w))


# ------------------------------------------------------------------------------------------ config
def test_config_validation_names_every_bad_field() -> None:
    with pytest.raises(ValidationError) as ei:
        FitConfig(lr=0.0, val_frac=1.5, hidden=(), precision="fp8", devices=0)
    assert ei.value.field == "lr"
    assert [f for f, _ in ei.value.problems] == ["lr", "val_frac", "hidden", "devices", "precision"]
    assert "val_frac must be in (0, 1), got 1.5" in str(ei.value)
    with pytest.raises(ValidationError, match="unknown FitConfig keys \\['batchsize'\\]") as ei:
        FitConfig.from_dict({"batchsize": 8})
    assert ei.value.field == "batchsize"
    cfg = FitConfig.from_dict({"hidden": [32, 16], "devices": [0, 1], "rank_weight": 0.5})
    assert cfg.hidden == (32, 16) and cfg.devices == (0, 1)
    assert FitConfig.from_dict(cfg.to_dict()) == cfg


# ----------------------------------------------------------------------------------------- metrics
def test_roc_auc_matches_pair_counting_with_ties(rng: np.random.Generator) -> None:
    s = rng.integers(0, 5, 60).astype(float)  # many ties
    pos = rng.random(60) < 0.4
    pairs = [(a > b) + 0.5 * (a == b) for a in s[pos] for b in s[~pos]]
    assert roc_auc(s, pos) == pytest.approx(np.mean(pairs))
    assert math.isnan(roc_auc(s, np.ones(60, bool)))
    assert average_precision(np.array([0.9, 0.8, 0.7, 0.1]), np.array([True, False, True, False])) == \
        pytest.approx((1 / 1 + 2 / 3) / 2)


def test_pairwise_rank_loss_matches_brute_force(rng: np.random.Generator) -> None:
    g = torch.tensor([0, 0, 0, 1, 1, 2, 2, 2, 2])
    y = torch.tensor(rng.random(9), dtype=torch.float32)
    w = torch.tensor(rng.uniform(0.5, 2, 9), dtype=torch.float32)
    s = torch.tensor(rng.standard_normal(9), dtype=torch.float32)
    num = den = 0.0
    for i in range(9):
        for j in range(9):
            if g[i] == g[j] and y[i] - y[j] > 0.05:
                pw = float(y[i] - y[j]) * 0.5 * float(w[i] + w[j])
                num += pw * math.log1p(math.exp(float(s[j] - s[i])))
                den += pw
    assert float(pairwise_rank_loss(s, y, w, g)) == pytest.approx(num / den, rel=1e-5)
    # a perfectly ordered decision costs less than the reversed order
    assert float(pairwise_rank_loss(y * 10, y, w, g)) < float(pairwise_rank_loss(-y * 10, y, w, g))


# -------------------------------------------------------------------------------------------- data
def test_group_split_is_disjoint_and_stats_come_from_train_only() -> None:
    data = _synthetic(1, episodes=30)
    X, y, groups = data.X, data.y, data.groups
    X[groups % 3 == 0] += 5.0  # shift some episodes so train-only and all-row statistics differ
    dm = UtilityDataModule(data, val_frac=0.3, seed=4, embedding_dim=SPEC.embedding_dim)
    dm.setup("fit")
    tr, va = dm.train_idx, dm.val_idx
    assert tr is not None and va is not None and dm.norm_stats is not None
    assert set(groups[tr]).isdisjoint(groups[va])
    assert len(tr) + len(va) == len(y) and len(set(groups[va])) == 9
    mean, _std = dm.norm_stats
    np.testing.assert_allclose(mean, normalization_stats(X[tr], SPEC.embedding_dim)[0])
    assert not np.allclose(mean, normalization_stats(X, SPEC.embedding_dim)[0])
    other = UtilityDataModule(data, val_frac=0.3, seed=5, embedding_dim=8)
    other.setup()
    assert set(groups[other.val_idx]) != set(groups[va])  # the seed drives the split
    one = FitData(X, y, data.w, np.zeros_like(groups), data.decisions, data.sessions, data.kept)
    with pytest.raises(ValidationError, match="at least 2 episode groups"):
        UtilityDataModule(one).setup()
    with pytest.raises(ValidationError) as ei:
        FitData(X, y[:-1], data.w, groups, data.decisions, data.sessions, data.kept)
    assert ei.value.field == "y"
    with pytest.raises(ValidationError, match="FitData"):
        UtilityDataModule(X)  # type: ignore[arg-type]


def test_concat_keeps_sources_apart_and_take_slices() -> None:
    a, b = _synthetic(1, episodes=3), _synthetic(2, episodes=2)
    c = FitData.concat([a, b])
    assert len(c) == len(a) + len(b)
    for codes in ("groups", "decisions", "sessions"):
        head, tail = getattr(c, codes)[:len(a)], getattr(c, codes)[len(a):]
        assert set(head).isdisjoint(tail), codes
    part = c.take(np.arange(5, 9))
    np.testing.assert_array_equal(part.X, c.X[5:9])


def test_group_recall_counts_positive_mass_inside_the_kept_count() -> None:
    dec = np.array([0, 0, 0, 0, 1, 1, 1])
    y = np.array([1.0, 0, 0, 0, 0, 1, 0])
    kept = np.array([True, False, False, False, True, True, False])
    good = np.array([3.0, 2, 1, 0, 0, 5, 1])
    bad = np.array([0.0, 2, 1, 3, 9, 0, 1])
    assert group_recall(good, y, dec, kept) == 1.0
    assert group_recall(bad, y, dec, kept) == 0.0
    assert group_recall(np.array([0.0, 2, 1, 3, 0, 5, 1]), y, dec, kept) == 0.5
    assert np.isnan(group_recall(good, np.zeros(7), dec, kept))


def test_session_share_matches_the_runtime_numpy_twin(rng: np.random.Generator) -> None:
    c, b = rng.standard_normal(12), rng.standard_normal(12) * 3
    ids = ["s1", "s1", "s2", None, "s2", "s2", "s3", None, "s1", "s3", "s4", "s4"]
    codes = numpy_session.session_codes(ids)
    want = numpy_session.log_utility(c, b, codes, 0.7)
    got = log_utility(torch.tensor(c), torch.tensor(b), torch.from_numpy(codes), torch.tensor(0.7))
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-6, atol=1e-7)
    # a session's shares sum to one; a memory without a session has the whole share of its own
    share = np.exp(numpy_session.session_log_share(b, codes))
    for code in np.unique(codes):
        assert share[codes == code].sum() == pytest.approx(1.0)
    assert share[3] == share[7] == 1.0


def test_listwise_loss_prefers_the_labelled_order(rng: np.random.Generator) -> None:
    g = torch.tensor([0, 0, 0, 1, 1, 1, 1])
    y = torch.tensor([1.0, 0, 0, 0, 0, 1, 0])
    w = torch.ones(7)
    good = torch.tensor([4.0, 0, 0, 0, 0, 4, 0])
    assert float(listwise_loss(good, y, w, g)) < float(listwise_loss(-good, y, w, g))
    # a group without positives adds nothing; group weight = its rows' mean weight
    assert float(listwise_loss(good, torch.zeros(7), w, g)) == 0.0
    half = torch.tensor([1.0, 1, 1, 0.25, 0.25, 0.25, 0.25])
    s = torch.tensor(rng.standard_normal(7), dtype=torch.float32)
    l0 = float(listwise_loss(s[:3], y[:3], w[:3], g[:3]))
    l1 = float(listwise_loss(s[3:], y[3:], w[3:], g[3:]))
    assert float(listwise_loss(s, y, half, g)) == pytest.approx((1.0 * l0 + 0.25 * l1) / 1.25, rel=1e-5)


def test_index_batches_cover_each_row_once_keep_groups_whole_and_shard() -> None:
    idx = np.arange(3, 503)
    rg = np.repeat(np.arange(60), np.tile([5, 9, 13], 20))[:506]  # ragged decision groups
    s = IndexBatches(idx, 64, shuffle=True, seed=0, rank_groups=rg)
    batches = [b.numpy() for b in s]
    assert len(batches) == len(s)
    assert np.array_equal(np.sort(np.concatenate(batches)), idx)
    for b in batches:  # every group present in a batch is there completely
        for g in np.unique(rg[b]):
            assert set(idx[rg[idx] == g]) <= set(b)
    s.set_epoch(1)
    assert not np.array_equal(np.concatenate([b.numpy() for b in s]), np.concatenate(batches))

    plain = [IndexBatches(idx, 64, shuffle=True, seed=0, rank=r, world=2) for r in (0, 1)]
    a, b = ([t.numpy() for t in p] for p in plain)
    assert len(a) == len(b) == len(plain[0]) == 4  # 8 batches of 64 over 500 rows, split across 2 ranks
    assert set(np.concatenate(a)).isdisjoint(np.concatenate(b))
    val = [t.numpy() for t in IndexBatches(idx, 64, shuffle=False, seed=0)]
    assert np.array_equal(np.concatenate(val), idx)


def test_index_batches_yield_their_length_every_epoch_when_groups_swallow_a_cut() -> None:
    """Lightning validates when an epoch's batch count reaches the sampler's length; one batch short
    and validation never runs. Five groups of 100 rows at batch size 64: the last nominal cut (448)
    snaps past the last group start, so packing alone gives 5 batches where the length said 8."""
    idx = np.arange(500)
    rg = np.repeat(np.arange(5), 100)
    for shuffle in (True, False):
        s = IndexBatches(idx, 64, shuffle=shuffle, seed=0, rank_groups=rg)
        assert len(s) == 5
        for epoch in range(3):
            s.set_epoch(epoch)
            assert len(list(s)) == 5
    rng = np.random.default_rng(0)
    for trial in range(200):  # ragged groups, any batch size, sharded or not: the count is the length
        sizes = rng.integers(1, rng.integers(2, 300), size=400)
        rg = np.repeat(np.arange(len(sizes)), sizes)
        idx = np.flatnonzero(rng.random(len(rg)) < 0.8)
        bs, world = int(rng.integers(8, 700)), int(rng.integers(1, 3))
        shards = [IndexBatches(idx, bs, shuffle=bool(trial % 2), seed=trial, rank_groups=rg, rank=r, world=world)
                  for r in range(world)]
        for sh in shards:
            sh.set_epoch(trial)
        got = [[b.numpy() for b in sh] for sh in shards]
        assert all(len(g) == len(shards[0]) for g in got), trial
        assert set(np.concatenate([np.concatenate(g) for g in got])) == set(idx)


def test_fit_validates_every_epoch_when_decision_groups_are_larger_than_a_batch(tmp_path: Path) -> None:
    data = _synthetic(2, episodes=12, decisions=1, items=100)  # decisions of 100 rows, batches of 64
    res = run(FitConfig(batch_size=64, max_epochs=3, patience=5, seed=1, hidden=(16,)), data, spec=SPEC,
              out_dir=tmp_path)
    assert res.epochs_run == 3 and len(res.history) == 3


# --------------------------------------------------------------------------------------------- fit
@pytest.fixture(scope="module")
def fitted(tmp_path_factory: pytest.TempPathFactory) -> tuple[FitResult, FitData, Path]:
    data = _synthetic(0)
    out = tmp_path_factory.mktemp("fit")
    # Pointwise and without the session share: the validation loss is then a plain weighted BCE.
    cfg = FitConfig(batch_size=256, lr=3e-3, max_epochs=6, patience=3, seed=7, hidden=(32, 16),
                    log_every_n_steps=5, objective="pointwise", bce_weight=1.0, session_share=False)
    return run(cfg, data, spec=SPEC, out_dir=out), data, out


def test_fit_learns_a_separable_problem(fitted) -> None:  # type: ignore[no-untyped-def]
    res, data, _ = fitted
    y, w = data.y, data.w
    hist = [h["val_loss"] for h in res.history]
    assert res.best_val_loss == min(hist) < hist[0]
    # far below the best constant predictor on the same rows
    assert res.best_val_loss < 0.6 * _bce(float(np.average(y, weights=w)), y, w)
    assert res.metrics["val_auc"] > 0.9 and res.metrics["val_ap"] > 0.8
    assert res.metrics["train_rows_per_s"] > 0


def test_fit_result_artifacts_and_best_weights(fitted) -> None:  # type: ignore[no-untyped-def]
    res, data, out = fitted
    X, y = data.X, data.y
    assert isinstance(res.model, UtilityNet) and not res.model.training
    assert next(res.model.parameters()).device.type == "cpu"
    assert 1 <= res.epochs_run <= 6 and len(res.history) == res.epochs_run
    assert res.n_train + res.n_val == len(y) and res.n_train_groups + res.n_val_groups == 40
    assert res.n_val_groups == 8 and res.model_config.hidden == (32, 16)
    assert res.checkpoint_path == out / "checkpoints" / "best.ckpt" and res.checkpoint_path.is_file()
    assert res.log_dir == out / "logs"
    with (res.log_dir / "metrics.csv").open() as f:
        rows = list(csv.DictReader(f))
    logged = [float(r["val_loss"]) for r in rows if r.get("val_loss")]
    assert logged == pytest.approx([h["val_loss"] for h in res.history])
    assert any(r.get("train_loss_step") for r in rows)
    # the returned model is the checkpoint's (not the last epoch's), and the checkpoint rebuilds alone
    re = UtilityLitModule.load_from_checkpoint(res.checkpoint_path, map_location="cpu").net.eval()
    xb = torch.from_numpy(X[:7])
    with torch.no_grad():
        for a, b in zip(re(xb), res.model(xb), strict=True):
            torch.testing.assert_close(a, b)
    assert not torch.are_deterministic_algorithms_enabled()  # the global flag was given back
    assert set(res.summary()) >= {"best_val_loss", "metrics", "epochs_run", "checkpoint_path", "history"}


@pytest.mark.parametrize("objective", ["listwise", "pairwise"])
def test_fit_with_ranking_objectives_and_the_session_share(tmp_path: Path, objective: str) -> None:
    data = _synthetic(3, episodes=20)
    cfg = FitConfig(batch_size=200, lr=3e-3, max_epochs=4, seed=1, hidden=(32,), objective=objective, members=2)
    res = run(cfg, data, spec=SPEC, out_dir=tmp_path)
    assert res.metrics["val_auc"] > 0.85 and res.metrics["val_recall"] > 0.6
    assert len(res.model.members) == 2 and float(res.model.session_weight.detach()) >= 0
    with (res.log_dir / "metrics.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert any(r.get("train_rank") for r in rows) and any(r.get("session_weight") for r in rows)


def test_run_rejects_features_of_another_spec(tmp_path: Path) -> None:
    data = _synthetic(0, episodes=4)
    narrow = FitData(data.X[:, :-1], data.y, data.w, data.groups, data.decisions, data.sessions, data.kept)
    with pytest.raises(ValidationError) as ei:
        run(FitConfig(), narrow, spec=SPEC, out_dir=tmp_path)
    assert ei.value.field == "X"
    with pytest.raises(ValidationError) as ei:
        run(FitConfig(), (data.X, data.y), spec=SPEC, out_dir=tmp_path)  # type: ignore[arg-type]
    assert ei.value.field == "data"


def test_same_seed_same_model(tmp_path: Path) -> None:
    data = _synthetic(5, episodes=10, decisions=2, items=20)
    cfg = FitConfig(batch_size=64, max_epochs=2, seed=3, hidden=(16,))
    a, b = (run(cfg, data, spec=SPEC, out_dir=tmp_path / name) for name in ("a", "b"))
    for (k, va), vb in zip(a.model.state_dict().items(), b.model.state_dict().values(), strict=True):
        torch.testing.assert_close(va, vb, rtol=0, atol=0, msg=k)
    assert a.best_val_loss == b.best_val_loss
    c = run(FitConfig(batch_size=64, max_epochs=2, seed=4, hidden=(16,)), data, spec=SPEC, out_dir=tmp_path / "c")
    assert c.best_val_loss != a.best_val_loss


@pytest.mark.parametrize("inputs", ["events", "static", "portable"])
def test_inputs_leave_out_the_features_that_drift(tmp_path: Path, inputs: str) -> None:
    """A model fit with ``inputs="events"`` does not move when only the clock or the other memories
    held change (age, position, redundancy, recent context: AMBIENT_FEATURES), and still reads what
    happens to a memory (a recall); ``"static"`` reads neither; ``"portable"`` reads all of them but
    not what tells the kind of conversation apart (KIND_FEATURES)."""
    from utilitynet.features import AMBIENT_FEATURES, DYNAMIC_FEATURES, FEATURE_NAMES, KIND_FEATURES

    data = _synthetic(2, episodes=10, decisions=2, items=20)
    res = run(FitConfig(batch_size=100, max_epochs=2, seed=0, hidden=(16,), inputs=inputs), data, spec=SPEC,
              out_dir=tmp_path)
    x = torch.from_numpy(data.X[:16].copy())
    with torch.no_grad():
        base = res.model(x)

        def moved(names: tuple[str, ...]) -> bool:
            z = x.clone()
            for name in names:
                z[:, FEATURE_NAMES.index(name)] += 3.0
            return any(not torch.allclose(a, b) for a, b in zip(res.model(z), base, strict=True))

        assert moved(AMBIENT_FEATURES) == (inputs == "portable")
        assert moved(("access_count_log", "accessed")) == (inputs != "static")
        assert not moved(DYNAMIC_FEATURES) if inputs == "static" else moved(DYNAMIC_FEATURES)
        assert moved(KIND_FEATURES) == (inputs != "portable")
        assert moved(("chars_log", "ctx_prev_q"))
    ignored = {"events": AMBIENT_FEATURES, "static": DYNAMIC_FEATURES, "portable": KIND_FEATURES}[inputs]
    assert res.model.config.ignore == ignored
