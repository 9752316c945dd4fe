"""The LongMemEval retention protocol, run on the production path.

Each question's history is one stream: sessions in order, each written as an agent writes it
(:func:`lme_turns`: the turn id as the memory id, the session's date plus one second per turn,
``user`` turns spoken by the user and ``assistant`` turns by the agent), and after each session
the policy keeps at most ``K = round(p × N)`` turns (``N`` = turns in the history, halves up);
forgotten turns never return. Evidence recall = the share of ``has_answer`` turns still kept, over
the answerable questions (``*_abs`` and questions without evidence are left out), overall and per
question type. The streaming itself is :func:`train.stream.stream_conversation`.
"""

from __future__ import annotations

import math
import re
from datetime import timedelta

from runtime.errors import ValidationError

from ..stream import StreamTurn
from .reader import LmeQuestion

__all__ = ["capacity_for", "lme_turns"]

_BAD = re.compile(r"[^A-Za-z0-9_.:@\-]")


def capacity_for(question: LmeQuestion, p: float) -> int:
    """``K = round(p × N)`` with halves rounded up."""
    if not 0.0 < p <= 1.0:
        raise ValidationError(f"capacity fraction p={p} must be in (0, 1]", field="p")
    return int(math.floor(p * question.n_turns + 0.5))


def lme_turns(question: LmeQuestion) -> list[StreamTurn]:
    """The question's haystack as the agent writes it, in stream order."""
    out = []
    for s in question.sessions:
        sid = _BAD.sub("_", f"s{s.number}_{s.session_id}")[:128]
        for t in s.turns:
            out.append(StreamTurn(t.turn_id, t.content, sid, s.date + timedelta(seconds=t.position), t.role,
                                  "user" if t.role == "user" else "agent"))
    return out
