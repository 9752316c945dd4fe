"""A conversation streamed through the public runtime API, the way an agent would write it.

Every conversation benchmark (LoCoMo, LongMemEval, your own chat logs) and every conversation
training row goes through :func:`stream_conversation`: one in-memory ``MemoryStore`` with the
production defaults (redaction on, long turns kept as excerpts), one scope with a
:class:`~runtime.retention.RetentionPolicy` (capacity K, the policy under test as scorer, retention
on session end), each session written with its session id, times and speakers, and
``scope.end_session()`` one second after its last turn — the protocol's "after each session the
policy keeps at most K". Closing a session computes its context features and fires the decision;
forgotten turns go to the archive and never come back. Nothing here computes a feature or a decision of its own: a figure measured
through this function is a figure of the product.

Embeddings may be precomputed (encoding dominates a replay), but of :func:`stored_texts` — the
text as the store keeps it, redacted — exactly what the store would embed itself.

With ``record=True`` each decision's feature matrix (the scorer's own ``featurize``), ids and kept
set are returned for training rows.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

import numpy as np

from runtime.encoders import Embedder
from runtime.record import RecordBuilder
from runtime.retention import DEFAULT_RULES, RetentionPolicy, Triggers, approx_tokens, audit
from runtime.scoring import Scorer
from runtime.store import MemoryStore, Scope, StoreConfig

from .agent import RecordingScorer

__all__ = ["StreamDecision", "StreamResult", "StreamTurn", "session_end", "session_spans", "stored_texts",
           "stream_conversation", "token_budget_for", "budget_label", "budget_key", "budget_order", "budget_text"]

_BUILDER = RecordBuilder()  # the store's default record configuration


@dataclass(frozen=True)
class StreamTurn:
    """One turn as the agent writes it.

    Attributes:
        memory_id: the record id (a valid MemIR id).
        text: the content.
        session_id: the session it belongs to (a valid id).
        at: when it was said (timezone-aware).
        speaker: who said it (``source_entity``).
        dialog_role: ``user`` or ``agent``.
    """

    memory_id: str
    text: str
    session_id: str
    at: datetime
    speaker: str | None = None
    dialog_role: Literal["user", "agent"] = "user"


@dataclass
class StreamDecision:
    """One retention decision as the policy saw it (``record=True``).

    Attributes:
        trigger: what fired it (``session_end:<id>``).
        step: turns written so far.
        ids: the candidates' memory ids, in the order the scorer saw them.
        X: the feature matrix the scorer saw (row-aligned with ``ids``).
        kept: what the decision kept.
        sessions: each candidate's session id (``None`` = none): its share of its session is computed
            among the candidates of the same session (:mod:`utilitynet.session`).
    """

    trigger: str
    step: int
    ids: list[str]
    X: np.ndarray
    kept: np.ndarray
    sessions: list[str | None] = field(default_factory=list)


@dataclass
class StreamResult:
    """What the stream left behind.

    Attributes:
        kept: memory ids still in working memory at the end, in write order.
        decisions: the recorded decisions (empty unless ``record=True``): every decision the
            scorer was called for, in order.
        n_decisions: decisions taken (recorded or not).
        violations: hard-rule violations over every decision, recomputed from each kept set and
            the rules (:func:`runtime.retention.audit`), independent of the solver's reason codes.
        end: the time of the final ``end_session``.
    """

    kept: list[str]
    decisions: list[StreamDecision] = field(default_factory=list)
    n_decisions: int = 0
    violations: int = 0
    end: datetime | None = None


def session_spans(turns: Sequence[StreamTurn]) -> list[tuple[int, int]]:
    """``(start, stop)`` index ranges of the contiguous sessions of ``turns``."""
    spans, lo = [], 0
    for i in range(1, len(turns) + 1):
        if i == len(turns) or turns[i].session_id != turns[lo].session_id:
            spans.append((lo, i))
            lo = i
    return spans


def session_end(last: StreamTurn) -> datetime:
    """When the agent ends a session: one second after its last turn."""
    return last.at + timedelta(seconds=1)


def stored_texts(turns: Sequence[StreamTurn]) -> list[str]:
    """Each turn's content as the store keeps it (redacted; a long turn as its excerpt). Blank turns
    are not memories (the store refuses them): their entry is ``""`` and the stream skips them."""
    return [_BUILDER.draft(t.text, {}).text if t.text.strip() else "" for t in turns]


def stream_conversation(turns: Sequence[StreamTurn], vectors: np.ndarray, scorer: Scorer, embedder: Embedder,
                        capacity: int | None, *, user_id: str, record: bool = False, budget_tokens: int | None = None,
                        after: Callable[[Scope, datetime], Any] | None = None) -> StreamResult:
    """Write ``turns`` through the public API under a session-end retention policy of ``capacity``.

    Args:
        turns: in stream order (sessions contiguous).
        vectors: ``(len(turns), d)`` embeddings of :func:`stored_texts` from ``embedder``.
        scorer: the policy under test.
        embedder: the store's encoder.
        capacity: K, the turns kept after each session (``None``: no count limit; give ``budget_tokens``).
        user_id: the scope's user.
        budget_tokens: B, the tokens kept after each session (≈ 4 characters a token, as the solver
            counts them), instead of or besides ``capacity``.
        record: return each decision's features (training rows).
        after: called with the scope and the end time before the store closes (retrieval checks).

    Returns:
        A :class:`StreamResult`.
    """
    if len(vectors) != len(turns):
        raise ValueError(f"vectors has {len(vectors)} rows for {len(turns)} turns")
    if capacity is None and budget_tokens is None:
        raise ValueError("stream_conversation needs a capacity or a budget_tokens")
    rec = RecordingScorer(scorer, record)
    policy = RetentionPolicy(capacity=capacity, budget_tokens=budget_tokens, scorer=rec,
                             triggers=Triggers(on_session_end=True))
    cfg = StoreConfig(log_recalls=False)  # production defaults otherwise
    out = StreamResult(kept=[])
    with MemoryStore.open(":memory:", embedder=embedder, config=cfg) as store:
        scope = store.scope(user_id=user_id, agent_id="replay", policy=policy)

        def book(step: int, before: int) -> None:
            n = len(rec.calls) - before
            if not n:
                return
            made = [d for d in scope.decisions(limit=2 * n + 2) if d.n_items][:n][::-1]
            out.n_decisions += len(made)
            for (recs, X), d in zip(rec.calls[before:], made):
                out.violations += len(audit(recs, d.kept, DEFAULT_RULES, now=d.at, capacity=capacity,
                                            budget_tokens=budget_tokens))
                if record and X is not None:
                    kept = set(d.kept)
                    ids = [r.id for r in recs]
                    out.decisions.append(StreamDecision(d.trigger, step, ids, X, np.array([i in kept for i in ids]),
                                                        [r.provenance.session_id for r in recs]))

        end = turns[-1].at if turns else datetime.now().astimezone()
        for lo, hi in session_spans(turns):
            # One session as the agent writes it, then its end: the policy decides right there.
            scope.write_many([{"content": t.text, "id": t.memory_id, "created_at": t.at, "session_id": t.session_id,
                               "source_entity": t.speaker, "dialog_role": t.dialog_role,
                               "source_type": "direct_interaction", "embedding": vectors[i]}
                              for i, t in zip(range(lo, hi), turns[lo:hi]) if t.text.strip()])
            before = len(rec.calls)
            end = session_end(turns[hi - 1])
            scope.end_session(now=end)
            book(hi, before)
        out.kept = [r.id for r in scope.list(now=end, include_expired=True)]
        out.end = end
        if after is not None:
            after(scope, end)
    return out


def token_budget_for(turns: Sequence[StreamTurn], p: float) -> int:
    """``round(p × the stream's tokens)`` (halves up), tokens counted as the solver counts them
    (:func:`runtime.retention.approx_tokens` of each stored turn)."""
    if not 0.0 < p <= 1.0:
        raise ValueError(f"budget fraction p={p} must be in (0, 1]")
    total = sum(approx_tokens(t) for t in stored_texts(turns) if t)
    return int(math.floor(p * total + 0.5))


def budget_label(p: float, unit: str) -> str:
    """How a budget is keyed in reports: ``"0.05"`` (a share of the turns) or ``"0.05 tokens"``."""
    return str(p) if unit == "turns" else f"{p} {unit}"


def budget_key(label: str) -> tuple[str, float]:
    """A report key (:func:`budget_label`) back as ``(unit, share)``."""
    p, _, unit = str(label).partition(" ")
    return unit or "turns", float(p)


def budget_order(label: str) -> tuple[bool, float]:
    """How tables list the budgets: shares of the turns first, then shares of the tokens, each ascending."""
    unit, p = budget_key(label)
    return unit != "turns", p


def budget_text(label: str) -> str:
    """``"0.10"`` or ``"0.10 (tokens)"``: a report key as a table shows it."""
    unit, p = budget_key(label)
    return f"{p:.2f}" if unit == "turns" else f"{p:.2f} ({unit})"
