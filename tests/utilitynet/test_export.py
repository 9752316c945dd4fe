"""The model config, the MLP, and ONNX export: metadata, dynamic batch, parity with torch."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

from runtime.record import Flag
from tests.conftest import word_records  # noqa: E402
from utilitynet.context import ScoringContext
from utilitynet.export import ParityError, check_parity, export_onnx, read_metadata
from utilitynet.features import (
    FEATURE_SCHEMA_VERSION,
    MODEL_INPUT,
    MODEL_OUTPUT,
    MODEL_SESSION_OUTPUT,
    featurize,
    spec_for,
)
from utilitynet.model import UtilityNet, UtilityNetConfig, normalization_stats

D = 24
NOW = datetime(2025, 3, 1, tzinfo=UTC)
SPEC = spec_for(D, "hash-24-s0")


def random_features(n: int, seed: int = 0) -> np.ndarray:
    """featurize() rows of n random-ish records (realistic inputs, not Gaussian noise)."""
    rng = np.random.default_rng(seed)
    recs = word_records(rng, n, NOW, flag=Flag.core_instruction, flag_every=4, random_confidence=True)
    E = rng.standard_normal((n, D)).astype(np.float32)
    return featurize(recs, E, ScoringContext(now=NOW, step=n, record_steps=np.arange(n), goal_embedding=E[0]))


def make_net(seed: int = 0, **kw: object) -> UtilityNet:
    torch.manual_seed(seed)
    net = UtilityNet(UtilityNetConfig.for_spec(SPEC, **kw))  # type: ignore[arg-type]
    net.set_normalization(*normalization_stats(random_features(64, seed=seed + 100), D))
    return net


# --- config and model ----------------------------------------------------------------------------


def test_config_validation_names_every_bad_field() -> None:
    with pytest.raises(ValueError) as e:
        UtilityNetConfig(
            in_features=10, embedding_dim=12, embedding_proj=-1, hidden=(), dropout=1.5, activation="tanh"
        )  # type: ignore[arg-type]
    msg = str(e.value)
    for fld in ("in_features", "embedding_proj", "hidden", "dropout", "activation"):
        assert fld in msg


def test_a_model_without_the_embedding_ignores_it() -> None:
    import torch
    net = UtilityNet(UtilityNetConfig.for_spec(SPEC, embedding_proj=0, hidden=(8,))).eval()
    x = torch.randn(4, SPEC.n_features)
    y = x.clone()
    y[:, -D:] = torch.randn(4, D)  # other embeddings, same named features
    assert all(m.embed_proj is None for m in net.members)
    assert all(torch.equal(a, b) for a, b in zip(net(x), net(y), strict=True))


def test_ignored_features_do_not_change_the_outputs() -> None:
    names = SPEC.names[:SPEC.n_features - D]
    net = UtilityNet(UtilityNetConfig.for_spec(SPEC, hidden=(8,), ignore=(names[0], names[3]))).eval()
    x = torch.from_numpy(random_features(6))
    y = x.clone()
    y[:, 0] += 5.0
    y[:, 3] -= 2.0
    assert all(torch.equal(a, b) for a, b in zip(net(x), net(y), strict=True))
    y[:, 1] += 5.0
    assert not torch.equal(net(x)[0], net(y)[0])


def test_an_ensemble_averages_its_members() -> None:
    net = make_net(hidden=(8,), members=3).eval()
    x = torch.from_numpy(random_features(5))
    x_n = (x - net.feature_mean) / net.feature_std
    with torch.no_grad():
        want = sum(m(x_n) for m in net.members) / 3
        logit, session_logit = net(x)
    torch.testing.assert_close(logit, want[:, 0])
    torch.testing.assert_close(session_logit, want[:, 1])


def test_config_round_trips_through_a_dict() -> None:
    cfg = UtilityNetConfig.for_spec(SPEC, hidden=[64, 32, 16])  # type: ignore[arg-type]
    assert cfg.hidden == (64, 32, 16) and cfg.n_meta == SPEC.n_features - D
    assert UtilityNetConfig(**cfg.to_dict()) == cfg
    json.dumps(cfg.to_dict())


@pytest.mark.parametrize("hidden", [(16,), (32, 16), (32, 16, 8)])
def test_forward_gives_two_logits_per_row(hidden: tuple[int, ...]) -> None:
    net = make_net(hidden=hidden).eval()
    for out in net(torch.from_numpy(random_features(5))):
        assert out.shape == (5,) and torch.isfinite(out).all()
    assert float(net.session_weight.detach()) == pytest.approx(0.5, abs=1e-6)


def test_normalization_leaves_embedding_and_constant_columns_alone() -> None:
    X = random_features(50)
    mean, std = normalization_stats(X, D)
    assert (mean[-D:] == 0).all() and (std[-D:] == 1).all()
    const = int(np.flatnonzero(X[:, :-D].std(0) == 0)[0])
    assert std[const] == 1.0
    net = make_net()
    net.set_normalization(mean, std)
    assert torch.equal(net.feature_std, torch.from_numpy(std))
    with pytest.raises(ValueError, match="shape"):
        net.set_normalization(mean[:3], std[:3])


# --- export --------------------------------------------------------------------------------------


def test_export_writes_spec_and_extra_metadata(tmp_path: Path) -> None:
    net = make_net()
    path = export_onnx(net, SPEC, tmp_path / "sub" / "m.onnx", metadata={"train": {"rows": 64}, "note": "hi"})
    md = read_metadata(path)
    assert md["feature_schema_version"] == FEATURE_SCHEMA_VERSION
    assert tuple(json.loads(md["feature_names"])) == SPEC.names
    assert md["embedding_dim"] == str(D) and md["encoder_id"] == "hash-24-s0"
    assert json.loads(md["model_config"]) == net.config.to_dict()
    assert json.loads(md["train"]) == {"rows": 64} and md["note"] == "hi"
    proto = onnx.load(str(path))
    assert max(o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")) >= 17
    (inp,) = proto.graph.input
    assert inp.name == MODEL_INPUT and inp.type.tensor_type.elem_type == onnx.TensorProto.FLOAT
    assert not (tmp_path / "sub" / "m.onnx.tmp").exists()


def test_export_refuses_mismatch_and_reserved_keys(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="for_spec"):
        export_onnx(make_net(), spec_for(D + 1, "x"), tmp_path / "m.onnx")
    with pytest.raises(ValueError, match="reserved"):
        export_onnx(make_net(), SPEC, tmp_path / "m.onnx", metadata={"encoder_id": "evil"})
    with pytest.raises(ValueError, match="opset"):
        export_onnx(make_net(), SPEC, tmp_path / "m.onnx", opset=13)


def test_parity_torch_vs_onnxruntime_batches_1_and_7(tmp_path: Path) -> None:
    net = make_net(dropout=0.3).train()  # export/parity must use eval semantics and not touch the caller
    path = export_onnx(net, SPEC, tmp_path / "m.onnx")
    assert net.training
    diffs = check_parity(net, path, batch_sizes=(1, 7), atol=1e-5, features=random_features(7, seed=5))
    assert set(diffs) == {1, 7} and max(diffs.values()) <= 1e-5


def test_dynamic_batch_axis(tmp_path: Path) -> None:
    net = make_net().eval()
    path = export_onnx(net, SPEC, tmp_path / "m.onnx")
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    X = random_features(300, seed=2)
    got = sess.run([MODEL_OUTPUT, MODEL_SESSION_OUTPUT], {MODEL_INPUT: X})
    with torch.no_grad():
        want = net(torch.from_numpy(X))
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w.numpy(), atol=1e-5)
    assert float(read_metadata(path)["session_weight"]) == pytest.approx(float(net.session_weight), abs=1e-6)


def test_check_parity_detects_a_diverged_model(tmp_path: Path) -> None:
    net = make_net()
    path = export_onnx(net, SPEC, tmp_path / "m.onnx")
    with torch.no_grad():
        net.members[0].head.bias += 0.01
    with pytest.raises(ParityError, match="atol"):
        check_parity(net, path, features=random_features(7))
