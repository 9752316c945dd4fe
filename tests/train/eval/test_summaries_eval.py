"""The summary-coverage evaluation (issue 15) end to end on a tiny LongMemEval-layout file."""

from __future__ import annotations

import json
from pathlib import Path

from runtime import FakeScorer, SummaryPolicy
from runtime.encoders import HashEmbedder
from train.eval.summaries import evaluate_summaries, plot_summaries


def _item(qid: str) -> dict[str, object]:
    turns = [{"role": "user", "content": "Hello there, hope you are well today."},
             {"role": "assistant", "content": "Sure, happy to help with anything you need."},
             {"role": "user", "content": "I adopted a cat named Biscuit on 3 May in Porto.", "has_answer": True},
             {"role": "assistant", "content": "Congratulations on the new cat!"}]
    return {"question_id": qid, "question_type": "single-session-user", "question": "Cat's name?",
            "question_date": "2023/05/20 (Sat) 02:21", "answer": "Biscuit", "answer_session_ids": ["a1"],
            "haystack_dates": ["2023/05/04 (Thu) 10:00"], "haystack_session_ids": ["a1"],
            "haystack_sessions": [turns]}


def test_coverage_of_a_utility_summary_beats_the_lead_baseline(tmp_path: Path) -> None:
    f = tmp_path / "lme.json"
    f.write_text(json.dumps([_item("q1"), _item("q2")]))
    scorer = FakeScorer(lambda r: 0.9 if "Biscuit" in r.content else 0.1)
    out = evaluate_summaries(f, emb=HashEmbedder(dim=32), scorer=scorer, progress=False,
                             summaries=SummaryPolicy(enabled=True, max_turns=1, max_sentences=1))
    assert out["questions"] == 2 and out["evidence_turns"] == 2
    s = out["summary"]
    assert s["utility"]["coverage"] == 1.0 and s["utility"]["coverage_demoted"] == 1.0
    assert s["utility"]["demoted"] == 1.0
    assert s["lead"]["coverage"] == 0.0  # the first sentence holds none of the evidence's facts
    assert plot_summaries(out, tmp_path / "s.png").is_file()
