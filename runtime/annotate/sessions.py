"""Session-boundary detection for new memories (seed 000 §3.1 "会话边界检测").

A memory's ``session_id`` must say which independent interaction it belongs to. The
:class:`SessionTracker` keeps, per (user, agent) scope, the current session, the time of its last
event and a running *context vector* (an exponential average of the unit-norm embeddings of its
contents), and opens a new session when

- the gap since the last event exceeds ``max_gap`` (default 30 min), or
- the new content's cosine to the context vector falls below ``topic_shift_threshold`` (after the
  session has ``topic_min_events`` events).

Events that arrive out of order (earlier than the last one) stay in the current session. Session
ids are ``{prefix}_{YYYYmmdd_HHMMSS}_{n}`` — the first event's UTC time and the count of sessions
opened for the scope — so replaying the same events yields the same ids.

The tracker decides and commits in two steps so a caller can validate a record between them:
hold :attr:`SessionTracker.lock` across ``decide`` and ``commit``; if the record is rejected,
do not commit and nothing changes.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

import numpy as np

from ..encoders.embedder import l2_normalize
from ..errors import ValidationError

__all__ = ["SessionConfig", "SessionDecision", "SessionState", "SessionTracker", "as_unit_vector"]

Reason = Literal["first", "declared", "time_gap", "topic_shift", "continued", "disabled"]


@dataclass(frozen=True)
class SessionConfig:
    """Session-boundary detection.

    Attributes:
        enabled: when False the caller's ``session_id`` is used as is (may be None).
        max_gap: a gap longer than this since the scope's last event starts a new session.
        topic_shift_threshold: cosine in [-1, 1] between the content's embedding and the session's
            context vector below which a new session starts; None disables topic splits. Encoder
            specific: 0.2 suits all-MiniLM-L6-v2, where unrelated sentences score about 0–0.15.
        topic_min_events: events a session needs before a topic shift may split it (a single
            message is a noisy estimate of a topic).
        context_decay: weight in [0, 1) of the old context vector in the running average.
        id_prefix: prefix of generated session ids (letters, digits, ``_ . : @ -``).
        max_tracked_scopes: (user, agent) scopes whose state is kept; least recently used go first.
    """

    enabled: bool = True
    max_gap: timedelta = timedelta(minutes=30)
    topic_shift_threshold: float | None = 0.2
    topic_min_events: int = 2
    context_decay: float = 0.7
    id_prefix: str = "sess"
    max_tracked_scopes: int = 10_000

    def __post_init__(self) -> None:
        p: list[tuple[str, str]] = []
        if not isinstance(self.max_gap, timedelta) or self.max_gap <= timedelta(0):
            p.append(("max_gap", f"must be a positive timedelta, got {self.max_gap!r}"))
        t = self.topic_shift_threshold
        if t is not None and not -1.0 <= t <= 1.0:
            p.append(("topic_shift_threshold", f"must be a cosine in [-1, 1] or None, got {t}"))
        if self.topic_min_events < 1:
            p.append(("topic_min_events", f"must be >= 1, got {self.topic_min_events}"))
        if not 0.0 <= self.context_decay < 1.0:
            p.append(("context_decay", f"must be in [0, 1), got {self.context_decay}"))
        if not isinstance(self.id_prefix, str) or not re.fullmatch(r"[A-Za-z0-9_.:@\-]{1,64}", self.id_prefix):
            p.append(("id_prefix", "use 1–64 of letters, digits and _ . : @ -"))
        if self.max_tracked_scopes < 1:
            p.append(("max_tracked_scopes", f"must be >= 1, got {self.max_tracked_scopes}"))
        if p:
            text = "; ".join(f"{f}: {m}" for f, m in p)
            raise ValidationError(f"invalid SessionConfig — {text}", field=p[0][0], problems=p)


@dataclass(frozen=True)
class SessionDecision:
    """Which session a memory belongs to and why.

    Attributes:
        reason: ``first`` (scope had no state), ``declared`` (the caller named an unseen session),
            ``time_gap``, ``topic_shift``, ``continued`` or ``disabled``.
        new: whether this event opened (or switched to) a session.
        gap: time since the scope's previous event, if known.
        similarity: cosine to the session's context vector, if one was compared.
    """

    session_id: str | None
    new: bool
    reason: Reason
    gap: timedelta | None = None
    similarity: float | None = None


@dataclass(frozen=True)
class SessionState:
    """A read-only snapshot of one scope's tracked session (e.g. to persist across restarts)."""

    session_id: str
    index: int  # sessions opened for this scope so far (the n in the id)
    started_at: datetime
    last_event_at: datetime | None
    events: int
    context: np.ndarray | None  # unit-norm running context vector (read-only float32)
    closed: bool = False  # ended explicitly: the next event without an id opens a new session


@dataclass(frozen=True)
class _Pending:
    key: tuple[str, str]
    state: SessionState
    known: frozenset[str]  # session ids seen for the scope: a stale caller id is not a switch


def as_unit_vector(x: Any, name: str, dim: int | None = None) -> np.ndarray:
    """``x`` as a finite, unit-norm float32 1-D vector (of ``dim`` if given) or a ValidationError."""
    v = np.asarray(x, dtype=np.float32)
    if v.ndim != 1 or v.size == 0 or (dim is not None and v.shape[0] != dim) or not np.isfinite(v).all():
        want = f"dimension {dim}" if dim is not None else "any dimension"
        raise ValidationError(f"{name} must be a finite 1-D vector of {want}, got shape {v.shape}", field=name)
    return l2_normalize(v[None, :])[0]


def _frozen(v: np.ndarray | None) -> np.ndarray | None:
    if v is None:
        return None
    out = np.array(v, dtype=np.float32)  # a private copy nobody else can change
    out.setflags(write=False)
    return out


class SessionTracker:
    """Per-scope session state and the boundary rules above. Use under :attr:`lock`."""

    def __init__(self, config: SessionConfig) -> None:
        self.config = config
        self.lock = threading.RLock()
        self._scopes: OrderedDict[tuple[str, str], _Pending] = OrderedDict()

    def state(self, user_id: str, agent_id: str = "default") -> SessionState | None:
        """The tracked session of a scope, or None."""
        with self.lock:
            p = self._scopes.get((user_id, agent_id))
            return p.state if p else None

    def forget_user(self, user_id: str) -> int:
        """Drop every scope of ``user_id`` (context vectors derive from their content); returns how many."""
        with self.lock:
            keys = [k for k in self._scopes if k[0] == user_id]
            for k in keys:
                del self._scopes[k]
            return len(keys)

    def decide(self, user_id: str, agent_id: str, at: datetime, embedding: np.ndarray | None, *,
               declared_id: str | None = None, declared_last_event_at: datetime | None = None,
               declared_context: Any = None) -> tuple[SessionDecision, _Pending | None]:
        """Decide the session of an event at ``at`` with unit-norm ``embedding`` (or None).

        ``declared_*`` is the caller's view (its current session id, last event time and context
        vector). An id the tracker has not seen for the scope is adopted, seeded with the rest, and
        then checked by the same gap/topic rules, so detection survives a process restart. Nothing
        changes until :meth:`commit` is called with the returned pending state.
        """
        cfg = self.config
        if not cfg.enabled:
            return SessionDecision(declared_id, False, "disabled"), None
        key = (user_id, agent_id)
        cur = self._scopes.get(key)
        known = cur.known if cur else frozenset()
        reason: Reason = "continued"
        if cur is not None and cur.state.closed and declared_id is None:
            return self._open(key, known, cur.state.index, at, embedding, "first", None, None)
        if cur is None or (declared_id is not None and declared_id not in known):
            index = cur.state.index if cur else 0
            if declared_id is None:
                return self._open(key, known, index, at, embedding, "first", None, None)
            dim = embedding.shape[0] if embedding is not None else None
            seed = (as_unit_vector(declared_context, "ctx.last_embedding", dim)
                    if declared_context is not None else None)
            state = SessionState(declared_id, index, declared_last_event_at or at, declared_last_event_at,
                                 1 if declared_last_event_at or seed is not None else 0, _frozen(seed))
            cur, reason = _Pending(key, state, known | {declared_id}), "declared"
        s = cur.state
        gap = at - s.last_event_at if s.last_event_at is not None else None
        if gap is not None and gap > cfg.max_gap:  # out-of-order events (gap < 0) stay put
            return self._open(key, cur.known, s.index, at, embedding, "time_gap", gap, None)
        sim, ctxv = None, s.context
        if embedding is not None and ctxv is not None:
            if len(ctxv) != embedding.shape[0]:
                raise ValidationError(f"embedding has dimension {embedding.shape[0]} but the session's context "
                                      f"vector has {len(ctxv)}: use one encoder per scope", field="embedding")
            sim = float(np.dot(embedding, np.asarray(ctxv, dtype=np.float32)))
            t = cfg.topic_shift_threshold
            if t is not None and s.events >= cfg.topic_min_events and sim < t:
                return self._open(key, cur.known, s.index, at, embedding, "topic_shift", gap, sim)
        if embedding is not None:
            ctxv = self._mix(ctxv, embedding)
        last = at if s.last_event_at is None else max(s.last_event_at, at)
        state = SessionState(s.session_id, s.index, s.started_at, last, s.events + 1, ctxv)
        return SessionDecision(s.session_id, reason == "declared", reason, gap, sim), _Pending(key, state, cur.known)

    def end(self, user_id: str, agent_id: str) -> None:
        """Close the scope's tracked session: the next event without an id opens a new one."""
        with self.lock:
            cur = self._scopes.get((user_id, agent_id))
            if cur is not None:
                s = cur.state
                self._scopes[(user_id, agent_id)] = _Pending(cur.key, SessionState(
                    s.session_id, s.index, s.started_at, s.last_event_at, s.events, s.context, closed=True), cur.known)

    def adopt(self, user_id: str, agent_id: str, session_id: str, at: datetime,
              embedding: np.ndarray | None) -> tuple[SessionDecision, _Pending]:
        """An explicit session id is authoritative: the event belongs to ``session_id`` (no gap or
        topic checks); the tracked state moves to it, so detection continues from there when later
        events come without an id. Commit the returned state with :meth:`commit`."""
        key = (user_id, agent_id)
        cur = self._scopes.get(key)
        known = cur.known if cur else frozenset()
        if cur is not None and cur.state.session_id == session_id and not cur.state.closed:
            s = cur.state
            ctxv = s.context
            if embedding is not None:
                ctxv = self._mix(ctxv, embedding)
            last = at if s.last_event_at is None else max(s.last_event_at, at)
            state = SessionState(session_id, s.index, s.started_at, last, s.events + 1, ctxv)
            return SessionDecision(session_id, False, "continued"), _Pending(key, state, known)
        index = cur.state.index + 1 if cur else 1
        state = SessionState(session_id, index, at, at, 1, _frozen(embedding))
        return SessionDecision(session_id, True, "declared"), _Pending(key, state, known | {session_id})

    def _mix(self, ctxv: np.ndarray | None, embedding: np.ndarray) -> np.ndarray:
        """The running context vector after one more event: unit(decay·old + (1 − decay)·new)."""
        e = np.asarray(embedding, dtype=np.float32)
        if ctxv is None or ctxv.shape != e.shape:
            mixed = e.copy()
        else:
            d = np.float32(self.config.context_decay)
            mixed = d * ctxv + (np.float32(1) - d) * e
        n = np.sqrt(np.dot(mixed, mixed))
        if n > 0:
            mixed /= n
        mixed.setflags(write=False)
        return mixed

    def commit(self, pending: _Pending | None) -> None:
        """Make a decision's state current (evicting the least recently used scope past the bound)."""
        if pending is None:
            return
        with self.lock:
            self._scopes[pending.key] = pending
            self._scopes.move_to_end(pending.key)
            while len(self._scopes) > self.config.max_tracked_scopes:
                self._scopes.popitem(last=False)

    def _open(self, key: tuple[str, str], known: frozenset[str], index: int, at: datetime,
              embedding: np.ndarray | None, reason: Reason, gap: timedelta | None, sim: float | None
              ) -> tuple[SessionDecision, _Pending]:
        sid = f"{self.config.id_prefix}_{at:%Y%m%d_%H%M%S}_{index + 1}"
        state = SessionState(sid, index + 1, at, at, 1, _frozen(embedding))
        return SessionDecision(sid, True, reason, gap, sim), _Pending(key, state, known | {sid})
