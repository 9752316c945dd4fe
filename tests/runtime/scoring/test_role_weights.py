"""The role-weight model (seed 000 §5.2.3): loads without torch, outputs a distribution over its
card's labels, reads technical vs billing contexts apart (real encoder), refuses a tampered file;
and recall with dynamic roles on (both backends): the breakdown shows the weight, ranking moves
toward the context's role, and with it off nothing changes."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from runtime import MemoryStore, StoreConfig
from runtime.errors import DataIntegrityError, EncoderMismatchError, ModelNotFoundError, SchemaMismatchError
from runtime.record import RoleContext
from runtime.scoring.role_weights import RoleWeigher, context_vector, default_role_model_path
from runtime.store.ranking import RankWeights, ScoreBreakdown, format_context, score
from train.fit.role_weights import export_onnx

ROOT = Path(__file__).resolve().parents[3]
SHIPPED = ROOT / "checkpoints" / "role_weights.onnx"
shipped = pytest.mark.skipif(not SHIPPED.is_file(), reason="no role model exported (python -m train.fit.role_weights)")
LABELS = ["billing", "technical", "complaints"]


def _e(i: int, dim: int = 64) -> np.ndarray:
    v = np.zeros(dim, np.float32)
    v[i] = 1.0
    return v


def _unit(v: np.ndarray) -> np.ndarray:
    return (v / np.linalg.norm(v)).astype(np.float32)


def toy_model(tmp_path: Path, encoder_id: str, dim: int = 64) -> Path:
    """billing <- axis 1, technical <- axis 2, complaints <- axis 5 (logit scale 20)."""
    coef = 20.0 * np.stack([_e(1, dim), _e(2, dim), _e(5, dim)])
    return export_onnx(coef, np.zeros(3, np.float32), LABELS, encoder_id=encoder_id, out=tmp_path / "rw.onnx")


# ---------------------------------------------------------------- the model file
@shipped
def test_the_shipped_model_loads_without_torch() -> None:
    code = ("import json, sys, numpy as np\n"
            "from runtime.scoring.role_weights import RoleWeigher\n"
            "w = RoleWeigher()\n"
            "x = w.weights(np.ones(w.card.embedding_dim, np.float32) / w.card.embedding_dim ** 0.5)\n"
            "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'sklearn', 'train'))\n"
            "print(json.dumps({'heavy': heavy, 'n': len(x)}))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         check=False)
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert res["heavy"] == [] and res["n"] >= 2


@shipped
def test_weights_are_a_distribution_over_the_cards_labels() -> None:
    w = RoleWeigher(SHIPPED)
    card = json.loads(SHIPPED.with_suffix(".json").read_text())
    assert w.labels == tuple(card["labels"]) and {"billing", "technical"} <= set(w.labels)
    rng = np.random.default_rng(0)
    P = w.predict(rng.normal(size=(5, w.card.embedding_dim)).astype(np.float32))
    assert P.shape == (5, len(w.labels)) and np.all(P >= 0) and np.allclose(P.sum(axis=1), 1.0)
    rel = w.relative(np.ones(w.card.embedding_dim, np.float32))
    assert max(rel.values()) == 1.0 and min(rel.values()) >= 0.0
    with pytest.raises(EncoderMismatchError):
        w.predict(np.ones((1, 7), np.float32))


@shipped
def test_a_technical_context_raises_the_technical_weight(onnx_encoder: Any) -> None:
    w = RoleWeigher(SHIPPED, encoder_id=onnx_encoder.encoder_id)
    tech, bill = onnx_encoder.encode(["the app crashes with error 0x80070005 after the firmware update",
                                      "I was charged twice, please refund the invoice"])
    wt, wb = w.weights(context_vector(tech, None)), w.weights(context_vector(bill, None))
    assert wt["technical"] > wb["technical"] and wb["billing"] > wt["billing"]
    assert max(wt, key=wt.__getitem__) == "technical" and max(wb, key=wb.__getitem__) == "billing"
    # a billing session drifting to technical terms: the technical weight rises with the context
    drift = w.weights(context_vector(tech, bill))["technical"]
    assert wb["technical"] < drift


def test_the_integrity_check_refuses_a_tampered_file(tmp_path: Path) -> None:
    path = toy_model(tmp_path, "hash")
    RoleWeigher(path)  # intact: loads
    raw = bytearray(path.read_bytes())
    raw[-5] ^= 0xFF
    path.write_bytes(bytes(raw))
    with pytest.raises(DataIntegrityError, match="sha256"):
        RoleWeigher(path)
    with pytest.raises(ModelNotFoundError):
        RoleWeigher(tmp_path / "none.onnx")
    other = tmp_path / "other"
    other.mkdir()
    shutil.copy(toy_model(other, "hash"), tmp_path / "x.onnx")
    (tmp_path / "x.json").write_text("{}")
    with pytest.raises(SchemaMismatchError):
        RoleWeigher(tmp_path / "x.onnx")
    with pytest.raises(EncoderMismatchError):
        RoleWeigher(other / "rw.onnx", encoder_id="another-encoder")


def test_the_default_path_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("MEMIR_ROLE_MODEL", str(tmp_path / "m.onnx"))
    assert default_role_model_path() == tmp_path / "m.onnx"


# ---------------------------------------------------------------- ranking
def test_role_match_formula_is_bounded_and_monotone() -> None:
    w = RankWeights()
    base = score(0.8, 1.0, None, 0.0, "support", "billing", 0.0, None, w)
    assert base.role_weight is None and base.role_match == 1.0 and "role_weight" not in base.as_dict()
    prev = 1.0
    for rw in (0.0, 0.2, 0.5, 1.0):
        sb = score(0.8, 1.0, None, 0.0, "support", "billing", 0.0, None, RankWeights(role_weights={"billing": rw}))
        assert sb.role_weight == rw and prev <= sb.role_match <= 1.0 + w.full_role_bonus
        prev = sb.role_match
    assert prev == 1.0 + w.full_role_bonus
    # never below the static factor: a full static match stays at the maximum at weight 0
    ctx = RoleContext(active_role="support", sub_role="billing")
    sb = score(0.8, 1.0, None, 0.0, "support", "billing", 0.0, ctx, RankWeights(role_weights={"technical": 1.0}))
    assert sb.role_match == 1.0 + w.full_role_bonus and sb.role_weight == 0.0
    assert ScoreBreakdown(1, 1, 1, 1, 1).as_dict() == {"similarity": 1, "confidence": 1, "freshness": 1,
                                                       "role_match": 1, "total": 1}


# ---------------------------------------------------------------- recall (both backends)
def _seed(store: MemoryStore, now: datetime) -> tuple[Any, str, str, np.ndarray]:
    me = store.scope(user_id="u1", agent_id="desk")
    a = me.write("refund of the duplicate charge", embedding=_unit(_e(0) + 0.2 * _e(1)), active_role="support",
                 sub_role="billing", timestamp=now)
    b = me.write("clear the cache, then reinstall the driver", embedding=_unit(_e(0) + 0.3 * _e(4)),
                 active_role="support", sub_role="technical", timestamp=now)
    q = _unit(_e(0) + 0.5 * _e(2))  # closer to the billing memory, but a technical context
    return me, a.id, b.id, q


def test_recall_with_dynamic_roles_moves_toward_the_contexts_role(store: MemoryStore, tmp_path: Path,
                                                                   now: datetime) -> None:
    me, a, b, q = _seed(store, now)
    off = me.recall(q, k=2, now=now, update_usage=False)
    assert [h.record.id for h in off] == [a, b]
    assert all(h.score.role_weight is None for h in off)
    me.role_weigher = RoleWeigher(toy_model(tmp_path, store.embedder.encoder_id))
    on = me.recall(q, k=2, now=now, update_usage=False, dynamic_roles=True, explain=True)
    assert [h.record.id for h in on] == [b, a]
    tech, bill = on[0].score, on[1].score
    assert tech.role_weight == 1.0 and tech.role_match == 1.25
    assert 0.0 < bill.role_weight < 0.1 and 1.0 < bill.role_match < tech.role_match  # type: ignore[operator]
    assert "role weight: 1.00" in format_context(on, now=now)
    log = me.recall_log(1)[0]
    assert log["final"][0]["score"]["role_weight"] == 1.0 and set(log["role_weights"]) == set(LABELS)
    # off again (explicitly, and by default): identical to before, breakdowns included
    again = me.recall(q, k=2, now=now, update_usage=False, dynamic_roles=False)
    assert [(h.record.id, h.score) for h in again] == [(h.record.id, h.score) for h in off]
    assert [h.score for h in me.recall(q, k=2, now=now, update_usage=False)] == [h.score for h in off]
    assert "role weight" not in format_context(off, now=now)


def test_the_store_config_turns_dynamic_roles_on(make_store: Callable[..., MemoryStore], tmp_path: Path,
                                                 now: datetime) -> None:
    st = make_store("dyn.sqlite", config=StoreConfig(dynamic_roles=True))
    me, a, b, q = _seed(st, now)
    me.role_weigher = RoleWeigher(toy_model(tmp_path, st.embedder.encoder_id))
    assert [h.record.id for h in me.recall(q, k=2, now=now)] == [b, a]
    assert [h.record.id for h in me.recall(q, k=2, now=now, dynamic_roles=False)] == [a, b]


def test_the_shipped_model_refuses_a_store_of_another_encoder(store: MemoryStore, now: datetime) -> None:
    if not default_role_model_path().is_file():
        pytest.skip("no role model exported")
    me, _, _, q = _seed(store, now)
    with pytest.raises(EncoderMismatchError):
        me.recall(q, k=2, now=now, dynamic_roles=True)


def test_dynamic_roles_must_be_a_bool(store: MemoryStore) -> None:
    from runtime.errors import ValidationError
    with pytest.raises(ValidationError):
        StoreConfig(dynamic_roles="yes")  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        store.scope(user_id="u1").recall("x", dynamic_roles=1)  # type: ignore[arg-type]
