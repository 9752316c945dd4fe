"""The cold-tier evaluation (``python -m train.eval tiers``) end to end on a tiny LongMemEval-layout file."""

from __future__ import annotations

import json
import random
from pathlib import Path

from runtime.encoders import HashEmbedder
from train.eval.tiers import evaluate_tiers, load_questions, plot_tiers, tiers_table

_WORDS = ("garden trip budget laptop coffee marathon piano recipe invoice movie hiking tax birthday "
          "printer vacation bicycle guitar painting concert kitchen").split()


def _item(qid: str, seed: int) -> dict[str, object]:
    rng = random.Random(seed)
    sessions, dates, ids = [], [], []
    for s in range(3):
        turns: list[dict[str, object]] = []
        for t in range(8):
            words = " ".join(rng.choice(_WORDS) for _ in range(8))
            turns.append({"role": "user" if t % 2 == 0 else "assistant", "content": f"We talked about {words}."})
        sessions.append(turns)
        dates.append(f"2023/05/0{s + 1} (Mon) 10:00")
        ids.append(f"{qid}_s{s}")
    sessions[1][2] = {"role": "user", "content": "My sister Marta adopted a grey cat named Biscuit in Porto.",
                      "has_answer": True}
    sessions[2][4] = {"role": "user", "content": "The cat Biscuit from Porto likes my sister Marta best.",
                      "has_answer": True}
    return {"question_id": qid, "question_type": "multi-session", "question": "What is the name of Marta's cat?",
            "question_date": "2023/05/20 (Sat) 02:21", "answer": "Biscuit", "answer_session_ids": ids[1:],
            "haystack_dates": dates, "haystack_session_ids": ids, "haystack_sessions": sessions}


def test_tiers_eval_measures_each_format_against_float32(tmp_path: Path) -> None:
    f = tmp_path / "lme.json"
    f.write_text(json.dumps([_item(f"q{i}", i) for i in range(3)]))
    qs = load_questions(f)
    assert len(qs) == 3
    out = evaluate_tiers(qs, HashEmbedder(dim=64), repeats=2, boot=200, workdir=tmp_path, progress=False)
    assert out["questions"] == 3 and out["turns"] == 72 and out["evidence_turns"] == 6
    s = out["summary"]
    assert list(s) == ["float32", "float16", "int8"]
    # every turn went to the archive, stored in the configured format, at the documented size
    for fmt, size in (("float32", 256), ("float16", 128), ("int8", 68)):
        assert s[fmt]["archived_share"] == 1.0
        assert s[fmt]["archive_formats"] == {fmt: 72}
        assert s[fmt]["bytes_per_vector"] == size
        assert s[fmt]["recall_ms_p50"] > 0
    ref = s["float32"]
    assert ref["agreement"] == 1.0 and ref["loss"] == 0.0 and ref["mean_abs_dsim"] == 0.0
    assert ref["recall@10"] > 0.5 and ref["hit@10"] == 1.0  # the planted evidence is found at all
    for fmt in ("float16", "int8"):
        assert abs(s[fmt]["loss"]) <= 0.17, (fmt, s[fmt])
        assert s[fmt]["agreement"] >= 0.8, (fmt, s[fmt])
        assert 0.0 <= s[fmt]["mean_abs_dsim"] < 0.02
        lo, hi = s[fmt]["loss_ci95"]
        assert lo <= s[fmt]["loss"] <= hi
    assert s["float16"]["mean_abs_dsim"] <= s["int8"]["mean_abs_dsim"]
    assert [r["question_id"] for r in out["per_question"]] == ["q0", "q1", "q2"]
    assert "| int8 | 68.0 |" in tiers_table(out)
    png = plot_tiers(out, tmp_path / "tiers.png")
    assert png.stat().st_size > 0
