"""`python -m train.eval card` records a report's figures in a model card, with their data."""

from __future__ import annotations

import json
from pathlib import Path

from train.eval.cli import main


def test_card_records_recall_per_policy_and_capacity_with_its_data(tmp_path: Path) -> None:
    card = tmp_path / "model_card.json"
    card.write_text(json.dumps({"model": "utilitynet", "figures": {"validation": {"auc": 0.9}}}))
    report = tmp_path / "r.json"
    report.write_text(json.dumps({"args": {"cmd": "locomo"}, "summary": {
        "utilitynet": {"0.1": {"recall": 0.31104, "n_pairs": 10}}, "longest": {"0.1": {"recall": 0.25}}}}))
    assert main(["card", str(report), "--key", "locomo_dev", "--data", "LoCoMo dev", "--card", str(card)]) == 0
    c = json.loads(card.read_text())
    assert c["figures"]["validation"] == {"auc": 0.9}  # what was there stays
    fig = c["figures"]["locomo_dev"]
    assert fig["data"] == "LoCoMo dev" and fig["args"] == {"cmd": "locomo"}
    assert fig["recall"] == {"utilitynet": {"0.1": 0.311}, "longest": {"0.1": 0.25}}
