"""Semantic refresh (seed 001, pitfall 3: semantic drift): query mixing and re-encoding with context.

Two ways to let the conversation's context shape what a memory means:

- **at recall** (:func:`mix_query`): the query vector becomes ``normalize((1 - w)·q + w·s)``, with
  ``s`` the scope's live recent-context vector (unit mean of its last ``policy.recent_window``
  memories, the same vector retention scores with). ``w`` = ``Scope.recall(session_mix=...)``,
  default ``StoreConfig.recall_session_mix`` (0: off). 0.2 lets the current conversation break
  near-ties without overriding the question;
- **at rest** (``Scope.refresh``, ``memir refresh``): an old memory's vector becomes
  ``normalize(embed(content) + w·s_session)``, with ``s_session`` the unit mean of the content
  embeddings of every memory of *its* session — a terse "yes, book it" then sits near the topic it
  answered. Behind a policy: only memories whose event time is older than N days, that belong to a
  session, are not redacted placeholders, and do not already carry the marker of this encoder and
  weight (:func:`refresh_marker`, stored beside the vector). Re-running is a no-op; a new encoder
  (``memir reembed``) or a new weight makes them eligible again. All-or-nothing per batch.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np

from ..encoders.embedder import l2_normalize as unit
from ..errors import ValidationError
from ..record.memir import Flag, utcnow
from .filters import MemoryFilter
from .scope_core import ScopeCore

__all__ = ["DEFAULT_REFRESH_WEIGHT", "RefreshReport", "check_weight", "mix_query", "refresh_marker",
           "refresh_scope", "refreshed_vectors"]

DEFAULT_REFRESH_WEIGHT = 0.3
"""``w`` of ``Scope.refresh``: the session centroid counts 0.3 against the memory's own text, so the
memory still matches its own words first (cosine to its plain vector stays ≥ 0.95 at w = 0.3)."""


@dataclass(frozen=True)
class RefreshReport:
    """What :meth:`Scope.refresh` did (or, with ``dry_run``, would do).

    Attributes:
        refreshed: ids whose vectors were re-encoded with their session context.
        already: old memories already refreshed with this encoder and weight (skipped).
        no_session: old memories without a session (nothing to mix in; skipped).
        marker: the marker written beside each refreshed vector (encoder id and weight).
        dry_run: nothing was written; ``refreshed`` lists what a real run would re-encode.
    """

    refreshed: list[str]
    already: int
    no_session: int
    marker: str
    dry_run: bool

    def summary(self) -> dict[str, object]:
        return {"refreshed": len(self.refreshed), "already": self.already, "no_session": self.no_session,
                "marker": self.marker, "dry_run": self.dry_run}


def check_weight(w: object, field: str, *, upper: float) -> float:
    """``w`` as a float in ``[0, upper)``; a typed error naming ``field`` otherwise."""
    if isinstance(w, bool) or not isinstance(w, (int, float)) or not 0.0 <= float(w) < upper:
        raise ValidationError(f"{field} must be a number in [0, {upper:g}), got {w!r}", field=field)
    return float(w)


def mix_query(q: np.ndarray, recent: np.ndarray | None, w: float) -> np.ndarray:
    """``normalize((1 - w)·q + w·recent)``; ``q`` unchanged when ``w`` is 0 or there is no context."""
    if w == 0.0 or recent is None:
        return q
    return unit((1.0 - w) * unit(q) + w * unit(recent))


def refresh_marker(encoder_id: str, weight: float) -> str:
    """The marker of a vector refreshed with ``encoder_id`` at ``weight`` (``<encoder>|w=0.3``)."""
    return f"{encoder_id}|w={round(weight, 6):g}"


def refreshed_vectors(own: np.ndarray, sessions: list[str], members: dict[str, np.ndarray],
                      weight: float) -> np.ndarray:
    """``normalize(own_i + weight·centroid(session_i))`` per row.

    Args:
        own: unit content embeddings of the memories to refresh (one row each).
        sessions: each row's session id.
        members: per session, the unit content embeddings of all its memories.
    """
    cent = {s: unit(m.mean(axis=0)) for s, m in members.items()}
    mix = np.stack([cent[s] for s in sessions]) if sessions else np.zeros_like(own)
    return unit(unit(own) + weight * mix)


def refresh_scope(core: ScopeCore, *, older_than_days: float, weight: float, now: datetime | None, batch_size: int,
                  dry_run: bool) -> RefreshReport:
    """Re-encode a scope's old memories with their session context (see :meth:`runtime.store.scope.Scope.refresh`)."""
    if isinstance(older_than_days, bool) or not isinstance(older_than_days, (int, float)) \
            or not 0 <= float(older_than_days) < 1e6:
        raise ValidationError(f"older_than_days must be a number of days >= 0, got {older_than_days!r}",
                              field="older_than_days")
    w = check_weight(weight, "weight", upper=10.0)
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValidationError(f"batch_size must be a positive int, got {batch_size!r}", field="batch_size")
    now = now or utcnow()
    tenant, emb = core.tenant, core.store.embedder
    marker = refresh_marker(emb.encoder_id, w)
    old = [r for r in tenant.select(MemoryFilter(tier="any", include_expired=True,
                                                 until=now - timedelta(days=float(older_than_days))), now)
           if Flag.placeholder not in r.metadata.flags]
    in_session = [r for r in old if r.provenance.session_id is not None]
    marks = tenant.refresh_marks([r.id for r in in_session])
    todo = [r for r in in_session if marks.get(r.id) != marker]
    already = len(in_session) - len(todo)
    sessions = sorted({str(r.provenance.session_id) for r in todo})
    members: dict[str, np.ndarray] = {}
    own: dict[str, np.ndarray] = {}
    if todo and not dry_run:
        every = [r for r in tenant.select(MemoryFilter(tier="any", include_expired=True, sessions=sessions), now)
                 if Flag.placeholder not in r.metadata.flags]
        texts = [r.content for r in every]
        vecs = np.vstack([np.asarray(emb.encode(texts[i:i + batch_size]), dtype=np.float32)
                          for i in range(0, len(texts), batch_size)])
        own = {r.id: vecs[i] for i, r in enumerate(every)}
        rows: dict[str, list[int]] = {}
        for i, r in enumerate(every):
            rows.setdefault(str(r.provenance.session_id), []).append(i)
        members = {sid: vecs[rows[sid]] for sid in sessions if sid in rows}
        todo = [r for r in todo if r.id in own]  # placeholders made meanwhile are left alone
    done: list[str] = [r.id for r in todo] if dry_run else []
    if not dry_run:
        for i in range(0, len(todo), batch_size):
            chunk = todo[i:i + batch_size]
            new = refreshed_vectors(np.stack([own[r.id] for r in chunk]),
                                    [str(r.provenance.session_id) for r in chunk], members, w)
            done += tenant.put_refreshed([(r.id, v) for r, v in zip(chunk, new)], marker)
    return RefreshReport(refreshed=done, already=already, no_session=len(old) - len(in_session),
                         marker=marker, dry_run=dry_run)
