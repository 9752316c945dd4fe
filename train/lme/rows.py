"""LongMemEval questions as labelled training rows (MIT: the rows may ship).

A question's haystack is a labelled conversation: its ``has_answer`` turns are the evidence and
its question the later query (:func:`train.conversation_rows.conversation_rows`).
"""

from __future__ import annotations

import numpy as np

from runtime.encoders import Embedder

from ..conversation_rows import ConversationRows, RowConfig, conversation_rows
from .protocol import lme_turns
from .reader import LmeQuestion

__all__ = ["question_rows"]


def question_rows(q: LmeQuestion, emb: Embedder, cfg: RowConfig = RowConfig(), *,
                  vectors: np.ndarray | None = None) -> ConversationRows:
    """The training rows of one question (see :mod:`train.conversation_rows`)."""
    return conversation_rows(q.question_id, lme_turns(q), set(q.evidence), [q.question], emb, cfg, vectors=vectors)
