"""The whole offline loop on the tiny preset: simulate → label → fit → export → load in runtime → score → solve."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from runtime import MemoryStore
from runtime.encoders import HashEmbedder
from runtime.errors import ValidationError
from runtime.scoring import UtilityScorer
from train.config import PRESET_DIR, load_preset
from train.loop import CHECKPOINT_FILES, run


@pytest.mark.parametrize("preset", sorted(p.stem for p in PRESET_DIR.glob("*.yaml")))
def test_every_preset_validates(preset: str) -> None:
    cfg = load_preset(preset)
    assert cfg.rounds >= 1 and cfg.to_dict()["sim"]["split"] == "train"


def test_bad_preset_field_is_named() -> None:
    with pytest.raises(ValidationError) as e:
        load_preset("tiny", rounds=0)
    assert e.value.field == "rounds"
    with pytest.raises(ValidationError, match="available"):
        load_preset("no-such-preset")


@pytest.mark.slow
def test_tiny_loop_end_to_end(tmp_path: Path) -> None:
    cfg = load_preset("tiny", checkpoints_dir=str(tmp_path / "ck"), data_dir=str(tmp_path / "data"))
    res = run(cfg, progress=False)
    assert len(res.rounds) == cfg.rounds
    for r, m in enumerate(res.rounds):
        rd = tmp_path / "ck" / "rounds" / f"round_{r:03d}"
        assert sorted(p.name for p in rd.iterdir()) == sorted(CHECKPOINT_FILES)
        assert math.isfinite(m["val_loss"]) and m["val_loss"] > 0
        assert all(row["constraint_violations"] == 0 for row in m["eval"])
        assert (tmp_path / "data" / f"round_{r:03d}" / "rows.parquet").exists()
        assert max(m["parity_max_abs_diff"].values()) < 1e-5
    assert m["collect_policy"] == "utilitynet"  # round ≥ 1 collects with the previous model
    card = json.loads((tmp_path / "ck" / "model_card.json").read_text())
    assert card["feature_schema_version"] and card["round"] == res.best_round
    assert (tmp_path / "ck" / "rounds.png").stat().st_size > 1000  # promoted: the plot beside the card
    assert (tmp_path / "ck" / "rounds" / "rounds.png").is_file()  # every run's plot, in the working folder
    assert sorted(p.name for p in (tmp_path / "ck").iterdir()) == ["model_card.json", "rounds", "rounds.png",
                                                                   "utilitynet.onnx"]

    # the promoted model loads in the runtime (no torch) and drives a real retention decision
    scorer = UtilityScorer(res.promoted)
    with MemoryStore.open(tmp_path / "m.sqlite", embedder=HashEmbedder(64)) as store:
        s = store.scope(user_id="u1")
        s.write("Always reply in French", flags=["core_instruction"])
        for i in range(30):
            s.write(f"note {i}: the hotel for trip {i} is Hotel {i}")
        d = s.retain(capacity=10, scorer=scorer)
        kept = {r.id for r in s.list()}
        assert len(kept) == 10 and set(d.kept) == kept
        assert any(r.content.startswith("Always") for r in s.list())  # must-keep held
        u = [it.model_utility for it in d.items.values()]
        assert np.all(np.isfinite(u)) and min(u) >= 0.0 and max(u) <= 1.0
