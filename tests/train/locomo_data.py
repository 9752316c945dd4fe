"""Shared data of the training-side tests."""

from __future__ import annotations

from typing import Any


def tiny_locomo() -> dict[str, Any]:
    """2 sessions × 4 turns (N = 8); 3 recall questions + 1 adversarial one."""
    s1 = [("Ana", "Hi Ben! How are you?"), ("Ben", "Good! I adopted a cat named Miso."),
          ("Ana", "Wow, congrats! What colour?"), ("Ben", "She is orange.")]
    s2 = [("Ana", "I ran a marathon in Lisbon last week!"), ("Ben", "Amazing, how long did it take?"),
          ("Ana", "Four hours."), ("Ben", "Bye!")]
    conv: dict[str, Any] = {"speaker_a": "Ana", "speaker_b": "Ben",
                            "session_1_date_time": "1:56 pm on 8 May, 2023",
                            "session_2_date_time": "10:00 am on 20 May, 2023"}
    for n, turns in ((1, s1), (2, s2)):
        conv[f"session_{n}"] = [{"speaker": sp, "dia_id": f"D{n}:{i + 1}", "text": t} for i, (sp, t) in enumerate(turns)]
    conv["session_1"][3]["blip_caption"] = "an orange cat"
    qa = [{"question": "What is Ben's cat called?", "answer": "Miso", "evidence": ["D1:2"], "category": 1},
          {"question": "When did Ana greet Ben?", "answer": "May", "evidence": ["D1:1"], "category": 2},
          {"question": "Where did Ana run a marathon?", "answer": "Lisbon", "evidence": ["D2:01"], "category": 4},
          {"question": "What is Ben's dog called?", "adversarial_answer": "Miso", "evidence": ["D1:3"],
           "category": 5}]
    return {"sample_id": "t-1", "conversation": conv, "qa": qa}
