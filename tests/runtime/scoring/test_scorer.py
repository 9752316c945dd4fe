"""The ONNX UtilityScorer (real onnxruntime, randomly initialised model) and the FakeScorer double."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch

from runtime.errors import EncoderMismatchError, ModelNotFoundError, SchemaMismatchError, VectorError
from runtime.record import Flag, MemIR
from runtime.scoring import MODEL_ENV, FakeScorer, Scorer, UtilityScorer, default_model_path
from tests.conftest import word_records  # noqa: E402
from utilitynet.context import ScoringContext
from utilitynet.export import export_onnx
from utilitynet.features import featurize, spec_for
from utilitynet.model import UtilityNet, UtilityNetConfig, normalization_stats
from utilitynet.session import log_utility, session_codes

REPO = Path(__file__).resolve().parents[3]
D = 16
NOW = datetime(2025, 3, 1, tzinfo=UTC)
SPEC = spec_for(D, "hash-16-s0")


def records(n: int, seed: int = 0) -> tuple[list[MemIR], np.ndarray, ScoringContext]:
    rng = np.random.default_rng(seed)
    recs = word_records(rng, n, NOW, flag=Flag.urgent, flag_every=3)
    # two sessions and some memories without one: the session share is part of what is compared
    recs = [r.model_copy(update={"provenance": r.provenance.model_copy(
        update={"session_id": (None, "s-a", "s-b")[i % 3]})}) for i, r in enumerate(recs)]
    E = rng.standard_normal((n, D)).astype(np.float32)
    return recs, E, ScoringContext(now=NOW, step=n, record_steps=np.arange(n), recent_embedding=E[-1])


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> tuple[UtilityNet, Path]:
    torch.manual_seed(0)
    net = UtilityNet(UtilityNetConfig.for_spec(SPEC, hidden=(32, 16)))
    recs, E, ctx = records(40, seed=1)
    net.set_normalization(*normalization_stats(featurize(recs, E, ctx), D))
    net.eval()
    return net, export_onnx(
        net, SPEC, tmp_path_factory.mktemp("m") / "utilitynet.onnx", metadata={"round": 0}
    )


def doctor(src: Path, dst: Path, **changes: str) -> Path:
    proto = onnx.load(str(src))
    for p in proto.metadata_props:
        if p.key in changes:
            p.value = changes[p.key]
    onnx.save(proto, str(dst))
    return dst


@pytest.mark.parametrize("n", [1, 7])
def test_scores_match_torch(model: tuple[UtilityNet, Path], n: int) -> None:
    net, path = model
    scorer = UtilityScorer(path)
    recs, E, ctx = records(n, seed=n)
    got = scorer.score(recs, E, ctx)
    with torch.no_grad():
        c, b = (t.double().numpy() for t in net(torch.from_numpy(featurize(recs, E, ctx))))
    codes = session_codes([r.provenance.session_id for r in recs])
    want = np.exp(log_utility(c, b, codes, float(net.session_weight.detach())))
    assert got.dtype == np.float64 and got.shape == (n,)
    np.testing.assert_allclose(got, want, atol=1e-5)
    assert scorer.session_weight == pytest.approx(float(net.session_weight.detach()), abs=1e-6)


def test_a_memory_shares_its_session_with_the_others_of_that_session(model: tuple[UtilityNet, Path]) -> None:
    _, path = model
    scorer = UtilityScorer(path)
    recs, E, ctx = records(9, seed=3)
    X = featurize(recs, E, ctx)
    alone = scorer.score_features(X)  # no session codes: every memory stands alone
    shared = scorer.score_features(X, np.zeros(9, np.int64))  # all nine in one session
    assert (shared <= alone + 1e-9).all() and (shared < alone - 1e-6).any()
    np.testing.assert_allclose(scorer.score(recs, E, ctx),
                               scorer.score_features(X, session_codes([r.provenance.session_id for r in recs])),
                               atol=1e-9)


def test_batching_does_not_change_scores(model: tuple[UtilityNet, Path]) -> None:
    _, path = model
    recs, E, ctx = records(23, seed=4)
    whole = UtilityScorer(path).score(recs, E, ctx)
    np.testing.assert_allclose(UtilityScorer(path, batch_size=5).score(recs, E, ctx), whole, atol=1e-6)
    X = featurize(recs, E, ctx)
    codes = session_codes([r.provenance.session_id for r in recs])
    np.testing.assert_allclose(UtilityScorer(path).score_features(X, codes), whole, atol=1e-6)
    assert UtilityScorer(path).score([], np.zeros((0, D), np.float32), ScoringContext(now=NOW)).shape == (0,)


def test_scorer_identity_and_protocol(model: tuple[UtilityNet, Path]) -> None:
    scorer = UtilityScorer(model[1])
    assert isinstance(scorer, Scorer) and isinstance(FakeScorer(), Scorer)
    assert scorer.name == "utilitynet"
    assert scorer.spec == SPEC and scorer.info.metadata["round"] == "0"


def test_schema_version_mismatch_is_refused_with_remedy(
    model: tuple[UtilityNet, Path], tmp_path: Path
) -> None:
    bad = doctor(model[1], tmp_path / "old.onnx", feature_schema_version="0")
    with pytest.raises(SchemaMismatchError, match="MEMIR_MODEL") as e:
        UtilityScorer(bad)
    assert "v0" in str(e.value)


def test_feature_names_mismatch_is_refused(model: tuple[UtilityNet, Path], tmp_path: Path) -> None:
    names = list(SPEC.names)
    names[0], names[1] = names[1], names[0]
    bad = doctor(model[1], tmp_path / "reordered.onnx", feature_names=json.dumps(names))
    with pytest.raises(SchemaMismatchError, match="MEMIR_MODEL"):
        UtilityScorer(bad)


def test_foreign_or_corrupt_model_is_refused(model: tuple[UtilityNet, Path], tmp_path: Path) -> None:
    proto = onnx.load(str(model[1]))
    del proto.metadata_props[:]
    onnx.save(proto, str(tmp_path / "bare.onnx"))
    with pytest.raises(SchemaMismatchError, match="not a memir utility model"):
        UtilityScorer(tmp_path / "bare.onnx")
    (tmp_path / "junk.onnx").write_bytes(b"not a model")
    with pytest.raises(SchemaMismatchError, match="cannot be loaded"):
        UtilityScorer(tmp_path / "junk.onnx")


def test_missing_model_file_says_what_to_do(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ModelNotFoundError, match="MEMIR_MODEL") as e:
        UtilityScorer(tmp_path / "nope.onnx")
    assert isinstance(e.value, FileNotFoundError) and "nope.onnx" in str(e.value)
    monkeypatch.setenv(MODEL_ENV, str(tmp_path / "env.onnx"))
    with pytest.raises(ModelNotFoundError, match="env.onnx"):
        UtilityScorer()


def test_default_path_is_checkpoints_beside_runtime(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(MODEL_ENV, raising=False)
    assert default_model_path() == REPO / "checkpoints" / "utilitynet.onnx"


def test_encoder_mismatch(model: tuple[UtilityNet, Path]) -> None:
    with pytest.raises(EncoderMismatchError, match="hash-16-s0"):
        UtilityScorer(model[1], encoder_id="all-MiniLM-L6-v2")
    recs, E, ctx = records(3)
    with pytest.raises(EncoderMismatchError, match="16"):
        UtilityScorer(model[1]).score(recs, np.ones((3, 8), np.float32), ctx)
    with pytest.raises(VectorError):
        UtilityScorer(model[1]).score(recs, E[:2], ctx)


def test_runtime_scoring_never_imports_torch(model: tuple[UtilityNet, Path]) -> None:
    code = textwrap.dedent(f"""
        import sys
        from datetime import datetime, timezone
        import numpy as np
        import runtime.scoring
        from runtime.record import MemIR, Provenance
        from runtime.scoring import ScoringContext
        s = runtime.scoring.UtilityScorer({str(model[1])!r})
        recs = [MemIR(content="Always book aisle seats", provenance=Provenance(user_id="u"))] * 3
        u = s.score(recs, np.eye(3, {D}, dtype=np.float32), ScoringContext(now=datetime.now(timezone.utc)))
        assert u.shape == (3,), u
        heavy = sorted(m for m in ("torch", "lightning", "pytorch_lightning", "datasets", "train")
                       if m in sys.modules)
        print("HEAVY=" + ",".join(heavy))
    """)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert "HEAVY=\n" in out.stdout, out.stdout


# --- FakeScorer ----------------------------------------------------------------------------------


def test_fake_scorer_is_deterministic_and_configurable() -> None:
    recs, E, ctx = records(4)
    a, b = FakeScorer(), FakeScorer()
    ua = a.score(recs, E, ctx)
    assert np.array_equal(ua, b.score(recs, E, ctx)) and ((ua >= 0) & (ua < 1)).all()
    assert len(set(ua.tolist())) > 1 and a.calls == [4]
    by_id = FakeScorer({recs[0].id: 5.0}, default=0.0)
    assert by_id.score(recs, E, ctx).tolist() == [5.0, 0.0, 0.0, 0.0]
    by_fn = FakeScorer(lambda r: len(r.content), name="len")
    assert by_fn.name == "len" and by_fn.score(recs, E, ctx).tolist() == [len(r.content) for r in recs]
    with pytest.raises(VectorError):
        FakeScorer().score(recs, E[:1], ctx)
