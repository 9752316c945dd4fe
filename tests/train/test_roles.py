"""``python -m train.fit.role_weights``: a tiny simulator + support-desk sample trains, exports, and the runtime
loader reads the result back (labels, card, checksum)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from runtime.encoders import HashEmbedder
from runtime.scoring.role_weights import RoleWeigher
from train.fit.role_weights import build_data, main, support_desk, train_and_export


def test_the_splits_share_labels_but_no_text() -> None:
    tr, ev = support_desk("train"), support_desk("eval")
    assert {lab for _, lab in tr} == {lab for _, lab in ev} == {"billing", "technical", "complaints", "account"}
    assert not {t for t, _ in tr} & {t for t, _ in ev}
    data = build_data("train", n_episodes=3, max_sim=50)
    assert len(data.texts) == len(data.labels) and len(set(data.labels)) > 4


def test_training_on_a_tiny_sample_runs_and_exports(tmp_path: Path) -> None:
    emb = HashEmbedder(dim=64, seed=0)
    out = tmp_path / "m" / "role_weights.onnx"
    summary = train_and_export(emb, out, n_episodes=3, eval_episodes=2, max_sim=120)
    card = json.loads(out.with_suffix(".json").read_text())
    assert card["encoder_id"] == emb.encoder_id and card["embedding_dim"] == 64
    assert card["training"]["train_rows"] == summary["train_rows"] > 0
    assert 0.0 <= summary["eval_accuracy"] <= summary["eval_top2"] <= 1.0
    assert len(summary["drift_technical_weight"]) == 5
    w = RoleWeigher(out, encoder_id=emb.encoder_id)
    assert w.labels == tuple(card["labels"]) and "technical" in w.labels
    assert np.isclose(sum(w.weights(emb.encode(["error code after the update"])[0]).values()), 1.0)


def test_the_command_line(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "rw.onnx"
    assert main(["--hash-encoder", "--out", str(out), "--episodes", "2", "--eval-episodes", "1",
                 "--max-sim", "60"]) == 0
    assert out.is_file() and '"eval_accuracy"' in capsys.readouterr().out
