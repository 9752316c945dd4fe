"""LongMemEval questions as labelled training rows (MIT: the rows may ship).

A question's haystack is a labelled conversation: its ``has_answer`` turns are the evidence and
its question the later query (:func:`train.conversation_rows.conversation_rows`). In a
knowledge-update question the evidence of earlier answer sessions holds the old value: once the
update is held too, it is labelled ``superseded`` (half useful: the question may ask for both).

A haystack's filler is of two kinds. Sessions from ShareGPT and UltraChat are chat nobody asks about:
their turns are negatives. The other sessions are simulated user chats built, like the evidence, around
facts that *other* questions ask about — with their ``has_answer`` marks stripped. Their turns are
left **unlabeled** (out of every group): calling a fact that another question asks about "useless"
would teach a question-agnostic retention model the opposite of what it needs. Session ids only shape
the labels; no feature reads them.
"""

from __future__ import annotations

import numpy as np

from runtime.encoders import Embedder

from ..conversation_rows import ConversationRows, RowConfig, conversation_rows
from .protocol import lme_turns
from .reader import LmeQuestion

__all__ = ["question_rows", "superseded_values", "unlabeled_turns"]


def question_rows(q: LmeQuestion, emb: Embedder, cfg: RowConfig = RowConfig(), *,
                  vectors: np.ndarray | None = None) -> ConversationRows:
    """The training rows of one question (see :mod:`train.conversation_rows`)."""
    return conversation_rows(q.question_id, lme_turns(q), set(q.evidence), emb, cfg, vectors=vectors,
                             superseded=superseded_values(q), unlabeled=unlabeled_turns(q))


_FILLER = ("sharegpt", "ultrachat")


def unlabeled_turns(q: LmeQuestion) -> set[str]:
    """Turns of the haystack's simulated-user sessions that are not this question's evidence sessions
    (copies of other questions' evidence, labels stripped): their usefulness is unknown. A session that
    holds one of this question's evidence turns is labelled, whatever its id says."""
    ev = set(q.evidence)
    return {t.turn_id for s in q.sessions
            if s.session_id not in q.answer_session_ids and not s.session_id.startswith(_FILLER)
            and not any(t.turn_id in ev for t in s.turns) for t in s.turns}


def superseded_values(q: LmeQuestion) -> dict[str, set[str]]:
    """Knowledge updates: evidence id of an earlier answer session → the evidence of the last one."""
    if q.question_type != "knowledge-update":
        return {}
    ev = set(q.evidence)
    by_session = [[t.turn_id for t in s.turns if t.turn_id in ev] for s in q.sessions]
    by_session = [ids for ids in by_session if ids]
    if len(by_session) < 2:
        return {}
    latest = set(by_session[-1])
    return {i: latest for ids in by_session[:-1] for i in ids}
