"""RecordBuilder details that are about speed: they must never change what a record says."""

from __future__ import annotations

import re

from runtime.record import Flag, RecordBuilder
from runtime.record.builder import DEFAULT_URGENCY_PATTERNS, _required_literal


def test_urgency_gates_never_change_what_is_flagged() -> None:
    assert _required_literal(r"\b(?:do not|never) forget\b") == " forget"
    assert _required_literal(r"!{2,}") == "" and _required_literal("a|b") == "" and _required_literal("(?x) a b") == ""
    texts = ["URGENT: call", "please don't forget", "Do Not Forget the keys", "by tonight!", "by the way", "ok!!",
             "mustard", "you must go", "必须", "right now", "Right away", "deadline's near", "as soon as possible",
             "critical-path", "forget it", "never  forget", "by end of the day", "by end of day"]
    alternation = re.compile("|".join(f"(?:{p})" for p in DEFAULT_URGENCY_PATTERNS))
    b = RecordBuilder()
    for t in texts:
        assert (Flag.urgent in b.draft(t, {}).fields.get("flags", [])) == bool(alternation.search(t.lower())), t
