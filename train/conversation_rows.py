"""Labelled conversations as training rows: LongMemEval questions, your own chat logs.

A conversation with known evidence turns (what was asked about later: LongMemEval's ``has_answer``
turns, the turn ids a log labels) is replayed on the production path
(:func:`train.stream.stream_conversation`, ``record=True``) and cut into **decision groups**: sets of
memories that one retention decision scores together, each row with the features the scorer saw,
its session id and its label (1 evidence, 0 otherwise). The fit ranks within a group (a listwise
loss) and lets the memories of one session compete for that session's share
(:mod:`utilitynet.session`), exactly as a decision does, so every group keeps all of its rows.

Two kinds of group per conversation:

- **first judgement** (one group): every turn as the decision right after its session first scored it
  (a brand-new memory, its session complete), over the whole conversation. Retention by a score that
  does not change with time keeps the top K of this group, so ranking it is the task itself;
- **held decisions**, per collection policy and capacity, with everything the policy still held then
  (memories of every age: what a model learns here about age and position holds in production).
  Which decisions (``RowConfig.held``): ``"evidence"``, the decision right after each session that
  holds evidence, and the last of the stream; or ``"uniform"``, ``held_decisions`` decisions drawn at
  random (seeded by the conversation id) whatever their sessions hold, and the last. Choosing the
  moments by where the evidence is biases the groups: their newest session always holds evidence
  (in the LongMemEval dev rows, 7.0% of the newest session's rows are evidence, against 0.8% of all
  turns at first judgement and 4.2% of the older held rows), which can teach a model that new
  memories beat old ones. Uniform moments (1.7% of the newest session's rows) remove that bias; the
  production cross-validation of both is in ``docs/training.md`` (no measurable difference, so
  ``"evidence"`` stays the default the shipped rows are built with).

Turns whose usefulness is unknown (``unlabeled``: another conversation's evidence whose labels were
stripped) are left out of every group: neither positives nor negatives.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from runtime.encoders import Embedder
from runtime.scoring import Scorer
from runtime.scoring.baselines import LongestUserScorer, RecencyScorer

from .oracle import HindsightOracle
from .stream import StreamDecision, StreamTurn, stored_texts, stream_conversation

__all__ = ["COLLECT_POLICIES", "FIRST_JUDGEMENT", "ConversationRows", "RowConfig", "conversation_rows", "stack"]

COLLECT_POLICIES = ("longest_user", "oracle", "recency")
FIRST_JUDGEMENT = 0
"""The decision index of the first-judgement group (held decisions are numbered from 1)."""


@dataclass(frozen=True)
class RowConfig:
    """How training rows are drawn from one conversation.

    Attributes:
        policies: collection policies of the held-decision groups (``longest_user``: a plausible, imperfect
            policy; ``oracle``: the state a perfect one reaches; ``recency``: the newest turns). The first
            judgement is taken from the first policy's replay (it is the same under every policy).
        capacities: capacity fractions replayed.
        first_judgement: include the first-judgement group.
        superseded_label: the label of an evidence turn in a group that also holds the value that
            superseded it (a knowledge update): worth less than current evidence, but not worthless — a
            question may still ask what the value used to be.
        held: which held decisions become groups: ``"evidence"`` (after each evidence session, and
            the last) or ``"uniform"`` (``held_decisions`` drawn at random per policy and capacity,
            seeded by the conversation id, and the last).
        held_decisions: decisions drawn per policy and capacity with ``held="uniform"``.
    """

    policies: tuple[str, ...] = ("longest_user",)
    capacities: tuple[float, ...] = (0.05, 0.1)
    first_judgement: bool = True
    superseded_label: float = 0.5
    held: Literal["evidence", "uniform"] = "evidence"
    held_decisions: int = 4

    def __post_init__(self) -> None:
        if self.held not in ("evidence", "uniform"):
            raise ValueError(f"held must be 'evidence' or 'uniform', got {self.held!r}")
        if self.held_decisions < 0:
            raise ValueError(f"held_decisions must be >= 0, got {self.held_decisions}")


@dataclass
class ConversationRows:
    """The decision groups of one conversation (row-aligned arrays).

    Attributes:
        conversation_id: the conversation (question) the rows come from: their validation-split group.
        X: features (float32, ``(n, F)``); y: labels; w: weights;
        tag: evidence | superseded | other.
        item_ids: turn ids; decision: the group (``FIRST_JUDGEMENT`` or a held decision); step: turns
            written; session: each row's session id (``""`` = none); kept: what the collecting
            policy kept (all False in the first-judgement group).
    """

    conversation_id: str
    X: np.ndarray
    y: np.ndarray
    w: np.ndarray
    tag: list[str]
    item_ids: list[str]
    decision: np.ndarray
    step: np.ndarray
    session: list[str]
    kept: np.ndarray


def _policy(name: str, evidence: set[str]) -> Scorer:
    if name == "oracle":
        return HindsightOracle({e: 1.0 for e in evidence})
    if name == "longest_user":
        return LongestUserScorer()
    if name == "recency":
        return RecencyScorer()
    raise ValueError(f"unknown collection policy {name!r}; valid: {list(COLLECT_POLICIES)}")


def conversation_rows(conversation_id: str, turns: Sequence[StreamTurn], evidence: set[str], emb: Embedder,
                      cfg: RowConfig = RowConfig(), *, vectors: np.ndarray | None = None,
                      superseded: dict[str, set[str]] | None = None, unlabeled: set[str] | None = None
                      ) -> ConversationRows:
    """Replay one labelled conversation under each collection policy and capacity; cut its groups.

    Args:
        conversation_id: its id (the rows' split group).
        turns: the conversation as the agent writes it, in order.
        evidence: the memory ids of its evidence turns.
        emb: the encoder (a cache, ideally).
        cfg: which groups.
        vectors: embeddings of :func:`~train.stream.stored_texts` of ``turns``, if precomputed.
        superseded: evidence id → the evidence ids that update it (tag ``superseded``, label
            ``cfg.superseded_label``, in the groups that hold one of those too).
        unlabeled: turns whose usefulness is unknown: left out of every group.
    """
    unknown = [p for p in cfg.policies if p not in COLLECT_POLICIES]
    if unknown or not cfg.policies:
        raise ValueError(f"unknown collection policies {unknown or cfg.policies}; valid: {list(COLLECT_POLICIES)}")
    vecs = vectors if vectors is not None else np.asarray(emb.encode(stored_texts(turns)), dtype=np.float32)
    n = len(turns)
    skip = unlabeled or set()
    ev_sessions = {t.session_id for t in turns if t.memory_id in evidence}
    groups: list[tuple[int, StreamDecision, np.ndarray, bool]] = []  # (group, decision, row mask, first?)
    n_dec = 1
    for pi, name in enumerate(cfg.policies):
        for ci, p in enumerate(cfg.capacities):
            capacity = int(np.floor(p * n + 0.5))
            ds = stream_conversation(turns, vecs, _policy(name, evidence), emb, capacity, user_id="rows",
                                     record=True).decisions
            seen: set[str] = set()
            drawn = _drawn(conversation_id, name, p, len(ds), cfg.held_decisions) if cfg.held == "uniform" else set()
            for i, d in enumerate(ds):
                new = np.array([m not in seen for m in d.ids])
                seen.update(d.ids)
                if cfg.first_judgement and pi == 0 and ci == 0:
                    groups.append((FIRST_JUDGEMENT, d, new, True))
                if cfg.held == "evidence":
                    chosen = d.trigger.removeprefix("session_end:") in ev_sessions
                else:
                    chosen = i in drawn
                if chosen or i == len(ds) - 1:
                    groups.append((n_dec, d, np.ones(len(d.ids), dtype=bool), False))
                    n_dec += 1
    Xs, ys, ws, tags, ids, decs, steps, sess, kept = [], [], [], [], [], [], [], [], []
    for g, d, mask, first in groups:
        held = set(d.ids)
        for j in np.flatnonzero(mask):
            m = d.ids[j]
            if m in skip:
                continue
            tag = "evidence" if m in evidence else "other"
            if tag == "evidence" and not first and superseded and superseded.get(m, set()) & held:
                tag = "superseded"
            Xs.append(d.X[j])
            ys.append({"evidence": 1.0, "superseded": cfg.superseded_label}.get(tag, 0.0))
            ws.append(1.0)
            tags.append(tag)
            ids.append(m)
            decs.append(g)
            steps.append(d.step)
            sess.append(d.sessions[j] or "" if d.sessions else "")
            kept.append(False if first else bool(d.kept[j]))
    X = np.asarray(Xs, dtype=np.float32) if Xs else np.zeros((0, 0), np.float32)
    return ConversationRows(conversation_id, X, np.asarray(ys, np.float32), np.asarray(ws, np.float32), tags, ids,
                            np.asarray(decs, np.int32), np.asarray(steps, np.int32), sess, np.asarray(kept, bool))


def _drawn(conversation_id: str, policy: str, p: float, n: int, k: int) -> set[int]:
    """``k`` of the ``n - 1`` decisions before the last, drawn at random, reproducibly per conversation,
    policy and capacity."""
    seed = zlib.crc32(f"{conversation_id}|{policy}|{p!r}".encode())
    return {int(i) for i in np.random.default_rng(seed).permutation(max(n - 1, 0))[:k]}


def stack(rows: Sequence[ConversationRows]) -> ConversationRows:
    """Many conversations' rows as one block (``conversation_id`` = ``"*"``; decisions renumbered)."""
    off, decs = 0, []
    for r in rows:
        decs.append(r.decision + off)
        off += int(r.decision.max()) + 1 if len(r.decision) else 0
    return ConversationRows("*", np.vstack([r.X for r in rows]), np.concatenate([r.y for r in rows]),
                            np.concatenate([r.w for r in rows]), [t for r in rows for t in r.tag],
                            [i for r in rows for i in r.item_ids], np.concatenate(decs),
                            np.concatenate([r.step for r in rows]), [s for r in rows for s in r.session],
                            np.concatenate([r.kept for r in rows]))
