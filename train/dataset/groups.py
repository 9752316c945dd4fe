"""What a fit reads: rows with their labels and the three ways they are grouped (numpy only).

- **split group** (an episode, a question, a conversation): the validation split never cuts one;
- **decision group**: the memories one retention decision scored together — the listwise loss ranks
  within it;
- **session segment**: the memories of one session inside one decision group — they compete for
  their session's share (:mod:`utilitynet.session`), as they do in production.

Every source of rows (simulated rounds, the shipped LongMemEval rows, your logs) becomes one
:class:`FitData`; :meth:`FitData.concat` joins them without letting two sources share a group.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from runtime.errors import ValidationError

__all__ = ["FitData", "session_segments"]


def session_segments(decisions: np.ndarray, sessions: Sequence[str | None] | np.ndarray) -> np.ndarray:
    """A dense code per (decision group, session id); a row without a session id is a segment alone."""
    dec = np.asarray(decisions, dtype=np.int64)
    sess = np.asarray([s if s else f"\0row{i}" for i, s in enumerate(sessions)], dtype=object)
    if sess.shape != dec.shape:
        raise ValidationError(f"sessions has {sess.shape[0]} rows, decisions {dec.shape[0]}", field="sessions")
    if not len(dec):
        return np.zeros(0, dtype=np.int64)
    _, s_codes = np.unique(sess.astype(str), return_inverse=True)
    pair = dec * (int(s_codes.max()) + 1) + s_codes.reshape(-1)
    return np.unique(pair, return_inverse=True)[1].reshape(-1).astype(np.int64)


@dataclass
class FitData:
    """Row-aligned training arrays.

    Attributes:
        X: float32 ``(n, F)`` features. y: labels in [0, 1]. w: weights > 0.
        groups: split group per row. decisions: decision group per row. sessions: session segment per
            row (codes unique across decision groups). kept: what the collecting policy kept (the
            validation ranking metric reads how many it kept).
    """

    X: np.ndarray
    y: np.ndarray
    w: np.ndarray
    groups: np.ndarray
    decisions: np.ndarray
    sessions: np.ndarray
    kept: np.ndarray

    def __post_init__(self) -> None:
        self.X = np.asarray(self.X, dtype=np.float32)
        n = self.X.shape[0] if self.X.ndim == 2 else -1
        for name in ("y", "w", "groups", "decisions", "sessions", "kept"):
            a = np.asarray(getattr(self, name))
            if a.shape != (n,):
                raise ValidationError(f"FitData.{name} must have shape ({n},) to match X {self.X.shape}, got "
                                      f"{a.shape}", field=name)
        self.y, self.w = np.asarray(self.y, np.float32), np.asarray(self.w, np.float32)
        self.groups, self.decisions = np.asarray(self.groups, np.int64), np.asarray(self.decisions, np.int64)
        self.sessions, self.kept = np.asarray(self.sessions, np.int64), np.asarray(self.kept, bool)

    def __len__(self) -> int:
        return int(self.X.shape[0])

    def take(self, idx: np.ndarray) -> FitData:
        """The rows ``idx`` (codes kept as they are)."""
        return FitData(self.X[idx], self.y[idx], self.w[idx], self.groups[idx], self.decisions[idx],
                       self.sessions[idx], self.kept[idx])

    @staticmethod
    def concat(parts: Sequence[FitData]) -> FitData:
        """The rows of every part; each part's group, decision and session codes are offset past the
        previous parts', so no two sources share one."""
        parts = [p for p in parts if len(p)]
        if not parts:
            raise ValidationError("no rows to fit on", field="rows")
        offs = {k: 0 for k in ("groups", "decisions", "sessions")}
        cols: dict[str, list[np.ndarray]] = {k: [] for k in offs}
        for p in parts:
            for k in offs:
                a = getattr(p, k)
                cols[k].append(a + offs[k])
                offs[k] += int(a.max()) + 1
        return FitData(np.vstack([p.X for p in parts]), np.concatenate([p.y for p in parts]),
                       np.concatenate([p.w for p in parts]), groups=np.concatenate(cols["groups"]),
                       decisions=np.concatenate(cols["decisions"]), sessions=np.concatenate(cols["sessions"]),
                       kept=np.concatenate([p.kept for p in parts]))
