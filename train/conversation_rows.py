"""Labelled conversations as training rows: LongMemEval questions, your own chat logs.

A conversation with known evidence turns (what was asked about later: LongMemEval's ``has_answer``
turns, the turn ids a log labels) is replayed on the production path
(:func:`train.stream.stream_conversation`, ``record=True``) under the collection policies, and
every decision that dropped something gives one row per candidate: the features the scorer saw,
label 1 for evidence turns, else 0. Negatives that matter get more weight:

- **look-alikes** — user turns of an evidence session that are not evidence (the same conversation,
  the wrong turn), weight :attr:`RowConfig.lookalike_weight`;
- **mined** — turns whose cosine to a later question beats the weakest evidence turn's (what a
  retriever would confuse with the answer), weight :attr:`RowConfig.mined_weight`;
- the rest, weight 1.

A conversation gives thousands of rows; training needs far fewer. Rows are chosen per decision:
every evidence row at a few decisions across the stream (its first, middle and last), plus
:attr:`RowConfig.negatives` negatives per decision, look-alikes and mined first, then sampled —
seeded, so the same conversation always gives the same rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from runtime.encoders import Embedder
from runtime.scoring import Scorer
from runtime.scoring.baselines import LongestUserScorer

from .eval.oracle import HindsightOracle
from .stream import StreamTurn, stored_texts, stream_conversation

__all__ = ["COLLECT_POLICIES", "ConversationRows", "RowConfig", "conversation_rows", "stack"]

COLLECT_POLICIES = ("oracle", "longest_user")


@dataclass(frozen=True)
class RowConfig:
    """How training rows are drawn from one conversation.

    Attributes:
        policies: collection policies (``oracle``: the state a good policy reaches; ``longest_user``:
            a plausible, imperfect one).
        capacities: capacity fractions replayed.
        evidence_decisions: decisions kept per evidence turn and replay (first, middle, last...).
        negatives: negative rows kept per chosen decision.
        lookalike_weight, mined_weight: sample weights of those negatives.
        superseded_label: the label of an evidence turn at a decision that also holds the value
            that superseded it (a knowledge update): worth less than current evidence, but not
            worthless — a question may still ask what the value used to be.
        seed: sampling seed (combined with the question id).
    """

    policies: tuple[str, ...] = COLLECT_POLICIES
    capacities: tuple[float, ...] = (0.05, 0.1)
    evidence_decisions: int = 3
    negatives: int = 10
    lookalike_weight: float = 2.0
    mined_weight: float = 2.0
    superseded_label: float = 0.5
    seed: int = 0


@dataclass
class ConversationRows:
    """The chosen rows of one conversation (row-aligned arrays).

    Attributes:
        conversation_id: the conversation (question) the rows come from: their validation-split group.
        X: features (float32, ``(n, F)``); y: labels; w: weights;
        tag: evidence | superseded | lookalike | mined | other.
        item_ids: turn ids; decision: index of the decision across its replays; step: turns written.
    """

    conversation_id: str
    X: np.ndarray
    y: np.ndarray
    w: np.ndarray
    tag: list[str]
    item_ids: list[str]
    decision: np.ndarray
    step: np.ndarray


def _policy(name: str, evidence: set[str]) -> Scorer:
    if name == "oracle":
        return HindsightOracle({e: 1.0 for e in evidence})
    if name == "longest_user":
        return LongestUserScorer()
    raise ValueError(f"unknown collection policy {name!r}; valid: {list(COLLECT_POLICIES)}")


def conversation_rows(conversation_id: str, turns: Sequence[StreamTurn], evidence: set[str], queries: Sequence[str],
                      emb: Embedder, cfg: RowConfig = RowConfig(), *, vectors: np.ndarray | None = None,
                      superseded: dict[str, set[str]] | None = None, unlabeled: set[str] | None = None
                      ) -> ConversationRows:
    """Replay one labelled conversation under each collection policy and capacity; choose its rows.

    Args:
        conversation_id: its id (the rows' split group).
        turns: the conversation as the agent writes it, in order.
        evidence: the memory ids of its evidence turns.
        queries: the later questions (for mined negatives; may be empty).
        emb: the encoder (a cache, ideally).
        cfg: sampling.
        vectors: embeddings of :func:`~train.stream.stored_texts` of ``turns``, if precomputed.
        superseded: evidence id → the evidence ids that update it (tag ``superseded``, label
            ``cfg.superseded_label``, at the decisions that hold one of those too).
        unlabeled: turns whose usefulness is unknown (never sampled as negatives, never positives):
            e.g. copies of *other* conversations' evidence whose labels were stripped.
    """
    vecs = vectors if vectors is not None else np.asarray(emb.encode(stored_texts(turns)), dtype=np.float32)
    n = len(turns)
    ev_sessions = {t.session_id for t in turns if t.memory_id in evidence}
    lookalike = {t.memory_id for t in turns
                 if t.session_id in ev_sessions and t.dialog_role == "user" and t.memory_id not in evidence}
    mined: set[str] = set()
    if queries and evidence:
        pos = {t.memory_id: i for i, t in enumerate(turns)}
        for qv in np.asarray(emb.encode(list(queries)), dtype=np.float32):
            sims = vecs @ qv
            floor = min(sims[pos[e]] for e in evidence if e in pos)
            mined |= {t.memory_id for t, s in zip(turns, sims) if t.memory_id not in evidence and s > floor}
    seed = int.from_bytes(conversation_id.encode()[:8].ljust(8, b"\0"), "little")
    rng = np.random.default_rng([cfg.seed, seed])
    Xs, ys, ws, tags, ids, decs, steps = [], [], [], [], [], [], []
    n_dec = 0
    for name in cfg.policies:
        for p in cfg.capacities:
            capacity = int(np.floor(p * n + 0.5))
            ds = stream_conversation(turns, vecs, _policy(name, evidence), emb, capacity, user_id="rows",
                                     record=True).decisions
            chosen: set[int] = set()
            for e in evidence:
                where = [i for i, d in enumerate(ds) if e in d.ids]
                if where:
                    picks = np.linspace(0, len(where) - 1, min(cfg.evidence_decisions, len(where)))
                    chosen.update(where[int(round(x))] for x in picks)
            if not chosen and ds:  # no evidence ever held under this policy: still learn the negatives
                chosen.update(rng.choice(len(ds), size=min(cfg.evidence_decisions, len(ds)), replace=False).tolist())
            for i in sorted(chosen):
                d = ds[i]
                positives = [j for j, m in enumerate(d.ids) if m in evidence]
                skip = evidence | (unlabeled or set())
                hard = [j for j, m in enumerate(d.ids) if m not in skip and (m in lookalike or m in mined)]
                hard_set = set(hard)
                rest = [j for j, m in enumerate(d.ids) if m not in skip and j not in hard_set]
                rng.shuffle(hard)
                rng.shuffle(rest)
                held = set(d.ids)
                for j in positives + (hard + rest)[:cfg.negatives]:
                    m = d.ids[j]
                    tag = ("evidence" if m in evidence else "lookalike" if m in lookalike
                           else "mined" if m in mined else "other")
                    if tag == "evidence" and superseded and superseded.get(m, set()) & held:
                        tag = "superseded"
                    Xs.append(d.X[j])
                    ys.append({"evidence": 1.0, "superseded": cfg.superseded_label}.get(tag, 0.0))
                    ws.append({"lookalike": cfg.lookalike_weight, "mined": cfg.mined_weight}.get(tag, 1.0))
                    tags.append(tag)
                    ids.append(m)
                    decs.append(n_dec)
                    steps.append(d.step)
                n_dec += 1
    X = np.asarray(Xs, dtype=np.float32) if Xs else np.zeros((0, 0), np.float32)
    return ConversationRows(conversation_id, X, np.asarray(ys, np.float32), np.asarray(ws, np.float32), tags, ids,
                            np.asarray(decs, np.int32), np.asarray(steps, np.int32))


def stack(rows: Sequence[ConversationRows]) -> ConversationRows:
    """Many conversations' rows as one block (``conversation_id`` = ``"*"``; decisions renumbered)."""
    off, decs = 0, []
    for r in rows:
        decs.append(r.decision + off)
        off += int(r.decision.max()) + 1 if len(r.decision) else 0
    return ConversationRows("*", np.vstack([r.X for r in rows]), np.concatenate([r.y for r in rows]),
                        np.concatenate([r.w for r in rows]), [t for r in rows for t in r.tag],
                        [i for r in rows for i in r.item_ids], np.concatenate(decs),
                        np.concatenate([r.step for r in rows]))
