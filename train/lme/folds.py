"""Splits of LongMemEval questions that never let one question's evidence sit in another split.

Filler sessions repeat across questions, and a question's evidence session can be another
question's filler. Questions linked that way form one group, and a group goes to one fold
whole. Groups are dealt to folds in the order of a hash of their ids, so the split is stable
(the same questions land in the same fold on every machine) and the folds are balanced.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterable, Sequence

from .reader import LmeQuestion

__all__ = ["fold_of", "groups"]


def groups(questions: Iterable[LmeQuestion]) -> dict[str, str]:
    """question id -> group id (the smallest question id of its group). Streams: only ids are kept."""
    qs = [(q.question_id, [s.session_id for s in q.sessions], list(q.answer_session_ids)) for q in questions]
    parent = {qid: qid for qid, _, _ in qs}

    def find(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    holders: dict[str, set[str]] = defaultdict(set)
    for qid, sessions, _ in qs:
        for sid in sessions:
            holders[sid].add(qid)
    for qid, _, answers in qs:
        for sid in answers:
            for other in holders.get(sid, ()):
                a, b = find(qid), find(other)
                if a != b:
                    parent[max(a, b)] = min(a, b)
    return {qid: find(qid) for qid, _, _ in qs}


def fold_of(question_groups: dict[str, str], k: int) -> dict[str, int]:
    """question id -> fold in ``range(k)``: groups dealt round-robin in hash order."""
    if k < 2:
        raise ValueError(f"need at least 2 folds, got {k}")
    roots = sorted(set(question_groups.values()), key=lambda g: hashlib.sha256(g.encode()).hexdigest())
    fold = {g: i % k for i, g in enumerate(roots)}
    return {q: fold[g] for q, g in question_groups.items()}


def split(ids: Sequence[str], folds: dict[str, int], k: int) -> tuple[list[str], list[str]]:
    """``(train ids, test ids)`` for fold ``k``."""
    return [i for i in ids if folds[i] != k], [i for i in ids if folds[i] == k]
