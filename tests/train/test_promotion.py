"""Promotion: the candidate replaces the promoted model only if it ranks the same real validation
rows at least as well, the decision is said with both figures, and the card names every source."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import torch

from runtime.encoders import HashEmbedder
from runtime.scoring import UtilityScorer
from train.config import load_preset
from train.dataset import FitData
from train.loop import promote, validation_score
from train.sources import RealRows, Source
from utilitynet.export import export_onnx
from utilitynet.features import spec_for
from utilitynet.model import UtilityNet, UtilityNetConfig

EMB = HashEmbedder(16)
SPEC = spec_for(EMB.dim, EMB.encoder_id)


def model(path: Path, seed: int) -> Path:
    torch.manual_seed(seed)
    return export_onnx(UtilityNet(UtilityNetConfig.for_spec(SPEC)), SPEC, path)


def round_dir(ck: Path, r: int, seed: int) -> Path:
    d = ck / "rounds" / f"round_{r:03d}"
    d.mkdir(parents=True)
    model(d / "utilitynet.onnx", seed)
    (d / "data_manifest.json").write_text("{}")
    return d


def perfect_rows(model_path: Path) -> RealRows:
    """Validation rows the model at ``model_path`` ranks perfectly: in each decision of 20 rows its top 5
    are the evidence, and the collecting policy kept 5."""
    X = np.random.default_rng(0).standard_normal((400, SPEC.n_features)).astype(np.float32)
    u = UtilityScorer(model_path).score_features(X)
    dec = np.repeat(np.arange(20), 20)
    rank = np.argsort(np.argsort(-u.reshape(20, 20), axis=1), axis=1).reshape(-1)
    y = (rank < 5).astype(np.float32)
    kept = np.tile(np.arange(20) < 5, 20)
    val = FitData(X, y, np.ones(400), np.repeat(np.arange(4), 100), dec, np.arange(400), kept)
    return RealRows(val.take(np.arange(0)), val)


def metrics(r: int, real: RealRows, ck: Path) -> dict[str, object]:
    return {"round": r, "rows": 10, "positive_rate": 0.1, "eval": [], "val_loss": 0.5,
            "label_counterfactual_agreement": 0.9, "counterfactual_relabelled": 0,
            "validation": validation_score(ck / "rounds" / f"round_{r:03d}" / "utilitynet.onnx", real)}


def test_a_worse_candidate_never_replaces_a_better_model(tmp_path: Path) -> None:
    ck = tmp_path / "ck"
    good = round_dir(ck, 0, seed=1)
    round_dir(ck, 1, seed=2)
    real = perfect_rows(good / "utilitynet.onnx")
    cfg = load_preset("tiny", checkpoints_dir=str(ck))
    sources = [Source("simulator", True, "generated"), Source("longmemeval", True, "MIT"),
               Source("locomo", False, "CC BY-NC 4.0: research only", reason="not in this preset")]

    # first run: nothing promoted yet -> the best round is promoted
    best, dst, decision = promote(cfg, [metrics(0, real, ck), metrics(1, real, ck)], EMB, {}, sources, real)
    good_bytes = (good / "utilitynet.onnx").read_bytes()
    assert best == 0 and decision["promoted"] and dst.read_bytes() == good_bytes
    card = json.loads((ck / "model_card.json").read_text())
    assert [s["name"] for s in card["sources"]] == ["simulator", "longmemeval", "locomo"]
    assert card["sources"][2]["reason"] == "not in this preset" and "MIT" in card["license_note"]

    # a later run whose only round is worse on the same rows: kept, with both figures said
    shutil.rmtree(ck / "rounds" / "round_000")
    round_dir(ck, 0, seed=2)
    best, dst, decision = promote(cfg, [metrics(0, real, ck)], EMB, {}, sources, real)
    assert not decision["promoted"] and dst.read_bytes() == good_bytes
    assert decision["incumbent_validation_recall"] == 1.0 > decision["candidate_validation_recall"]
    assert "1.0000 >" in decision["why"]

    # promote: always overrides (an explicit choice, recorded)
    cfg_always = load_preset("tiny", checkpoints_dir=str(ck), promote="always")
    _, dst, decision = promote(cfg_always, [metrics(0, real, ck)], EMB, {}, sources, real)
    assert decision["promoted"] and dst.read_bytes() == (ck / "rounds" / "round_000" / "utilitynet.onnx").read_bytes()


def test_a_reproduced_model_changes_no_committed_file(tmp_path: Path) -> None:
    """A run whose best round only ties the promoted model (a clean clone's `make train` reproducing
    it) promotes nothing: the model, its card and the plot stay byte for byte as they were."""
    ck = tmp_path / "ck"
    good = round_dir(ck, 0, seed=1)
    (ck / "rounds" / "rounds.png").write_bytes(b"plot of the first run")
    real = perfect_rows(good / "utilitynet.onnx")
    cfg = load_preset("tiny", checkpoints_dir=str(ck))
    sources = [Source("simulator", True, "generated"), Source("longmemeval", True, "MIT")]
    _, dst, decision = promote(cfg, [metrics(0, real, ck)], EMB, {}, sources, real)
    assert decision["promoted"] and (ck / "rounds.png").read_bytes() == b"plot of the first run"
    before = {p.name: p.read_bytes() for p in ck.iterdir() if p.is_file()}
    (ck / "rounds" / "rounds.png").write_bytes(b"plot of the second run")
    _, _, decision = promote(cfg, [metrics(0, real, ck)], EMB, {}, sources, real)  # the same model again
    assert not decision["promoted"] and "as much" in decision["why"] and "1.0000 = 1.0000" in decision["why"]
    assert {p.name: p.read_bytes() for p in ck.iterdir() if p.is_file()} == before


def test_a_model_fit_on_locomo_never_stays_the_shipped_default(tmp_path: Path) -> None:
    ck = tmp_path / "ck"
    good = round_dir(ck, 0, seed=1)
    real = perfect_rows(good / "utilitynet.onnx")
    shutil.copy(good / "utilitynet.onnx", ck / "utilitynet.onnx")  # the incumbent ranks perfectly...
    (ck / "model_card.json").write_text(json.dumps({"config": {"locomo_files": ["locomo-dev.json"]}}))  # ...but NC
    shutil.rmtree(ck / "rounds" / "round_000")
    round_dir(ck, 0, seed=2)
    sources = [Source("simulator", True, "generated"), Source("longmemeval", True, "MIT")]
    _, dst, decision = promote(load_preset("tiny", checkpoints_dir=str(ck)), [metrics(0, real, ck)], EMB, {}, sources,
                               real)
    assert decision["promoted"] and "CC BY-NC" in decision["why"]
    assert dst.read_bytes() == (ck / "rounds" / "round_000" / "utilitynet.onnx").read_bytes()


def test_the_earliest_round_within_one_standard_error_of_the_best_is_chosen() -> None:
    from train.loop import select_round

    def m(r: int, recall: float, se: float) -> dict[str, object]:
        return {"round": r, "validation": {"recall": recall, "recall_se": se}, "eval": []}

    assert select_round([m(0, 0.895, 0.018), m(1, 0.899, 0.017), m(2, 0.903, 0.014)])[0] == 0
    assert select_round([m(0, 0.850, 0.018), m(1, 0.899, 0.017), m(2, 0.903, 0.014)])[0] == 1
    idx, why = select_round([m(0, 0.80, 0.01), m(1, 0.85, 0.01), m(2, 0.90, 0.01)])
    assert idx == 2 and "best validation recall" in why
    assert select_round([m(0, 0.90, float("nan")), m(1, 0.91, float("nan"))])[0] == 1  # no SE: the best
