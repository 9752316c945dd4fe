"""The seed features' table and figure are read from the measured reports: every row comes from
its report, a missing report is named with the command that makes it."""

from __future__ import annotations

import json
from pathlib import Path

from train.eval.seeds import REPORTS, load_reports, plot_seeds, seeds_table

SUMMARIES = {"questions": 3, "evidence_turns": 5, "summary": {
    "utility": {"coverage": 0.81, "coverage_demoted": 0.9}, "lead": {"coverage": 0.52},
    "longest": {"coverage": 0.11}}}
TIERS = {"questions": 3, "turns": 70, "k": 10, "summary": {
    f: {"recall@10": r, "loss": 0.6 - r, "questions_changed": n, "bytes_per_vector": b}
    for f, r, n, b in (("float32", 0.6, 0, 256.0), ("float16", 0.6, 0, 128.0), ("int8", 0.55, 1, 68.0))}}
CONFUSION = {"users": 4, "k": 5, "probes": {"total": 24}, "summary": {
    side: {"cross_user_confusion": a, "rumour_over_spec": a, "role_consistency": 1 - a, "citation_accuracy": 1 - a}
    for side, a in (("typed", 0.0), ("untyped", 0.75))}}


def test_table_rows_come_from_the_reports_and_missing_ones_are_named(tmp_path: Path) -> None:
    for name, payload in (("summaries", SUMMARIES), ("tiers", TIERS), ("confusion", CONFUSION)):
        (tmp_path / f"{name}.json").write_text(json.dumps(payload))
    reports = load_reports(tmp_path)
    assert reports["discovery"] is None
    table = seeds_table(reports)
    assert "| session summaries | coverage" in table and "0.810 (archived turns 0.900)" in table
    assert "first sentences 0.520, longest turns 0.110" in table
    assert "int8 0.050 (1 questions changed, 68 B/vector)" in table and "float32 recall@10 0.600 at 256" in table
    assert "typed 0.000 | untyped pooled 0.750 | generated, 4 users, 24 probes, k = 5" in table
    assert f"- discovery: not measured yet — `{REPORTS['discovery']}`" in table
    png = plot_seeds(reports, tmp_path / "seeds.png")
    assert png.stat().st_size > 10_000
