"""Re-ranking and prompt formatting for recall (seed 000 §3.3).

score = max(similarity, 0) × confidence × freshness_decay(age) × role_match

- similarity: cosine between the query and the memory (unit vectors);
- confidence: ``metadata.confidence`` (source authority);
- freshness: ``0.5 ** (age / half-life)``: the memory's own ``freshness_half_life``, or when it
  declares none the store's default for its source type and dialog role
  (:class:`~runtime.store.freshness.FreshnessConfig`); 1 when it does not decay;
- role_match: ``1 + full_bonus`` when active role *and* sub-role match the caller's current role,
  ``1 + partial_bonus`` when only the active role matches, 1 otherwise. With dynamic role weights
  (``RankWeights.role_weights``, from :class:`runtime.scoring.role_weights.RoleWeigher`): a memory of
  sub-role ``r`` gets ``max(static, 1 + full_bonus · w[r] / max(w))`` — bounded by the static
  maximum, monotone in its weight — and the breakdown's ``role_weight`` shows ``w[r] / max(w)``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime

from ..record.memir import MemIR, RoleContext, utcnow
from .freshness import FreshnessConfig, never_decays

__all__ = ["Candidate", "Hit", "RankWeights", "ScoreBreakdown", "SearchResult", "format_context", "score", "top_k"]


@dataclass(frozen=True)
class RankWeights:
    """Re-ranking constants.

    Attributes:
        full_role_bonus: multiplier bonus when active role and sub-role both match (0.25 → ×1.25).
        partial_role_bonus: bonus when only the active role matches.
        role_weights: dynamic role weights ``{sub_role: w / max(w)}`` of this recall's context
            (``None``: static role match only). Set by ``Scope.recall(dynamic_roles=True)``.
        freshness: the default half-lives of memories that declare none (a scope starts with
            ``StoreConfig.freshness``); ``None``: only declared half-lives decay.
        rerank: False = untyped retrieval: hits in cosine order, every other factor 1 (the
            baseline arm of an experiment comparing typed retrieval against plain semantic search).
    """

    full_role_bonus: float = 0.25
    partial_role_bonus: float = 0.10
    role_weights: Mapping[str, float] | None = None
    freshness: FreshnessConfig | None = field(default_factory=FreshnessConfig)
    rerank: bool = True


@dataclass(frozen=True)
class ScoreBreakdown:
    """Every factor of a hit's score, so a caller (or a log) can see why it ranked where it did."""

    similarity: float
    confidence: float
    freshness: float
    role_match: float
    total: float
    role_weight: float | None = None  # w[sub_role] / max(w) when dynamic role weights were used

    def as_dict(self) -> dict[str, float]:
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass(frozen=True)
class Hit:
    """One recalled memory: the record, its score breakdown, and its rank before re-ranking."""

    record: MemIR
    score: ScoreBreakdown
    raw_rank: int


@dataclass(frozen=True)
class SearchResult:
    """What a backend's filtered vector search returns: hits plus what an explained recall logs.

    Attributes:
        hits: the re-ranked hits, best first.
        rowids: the hits' row keys in the backend (for the usage update).
        raw_top: ``(id, cosine)`` of every verified candidate, in raw similarity order — or a function
            that reads them when asked (:attr:`raw`): only an explained recall needs them.
    """

    hits: list[Hit]
    rowids: list[int]
    raw_top: list[tuple[str, float]] | Callable[[], list[tuple[str, float]]]

    @property
    def raw(self) -> list[tuple[str, float]]:
        """``(id, cosine)`` of every verified candidate, in raw similarity order."""
        return self.raw_top() if callable(self.raw_top) else self.raw_top


Candidate = tuple[float, float, "float | None", float, str, "str | None", "str | None", "str | None"]
"""What re-ranking reads of a candidate, from the store's columns: ``(cosine, confidence, half-life in
seconds, event time in epoch seconds, active role, sub-role, source type, dialog role)``."""


def _factors(candidates: Sequence[Candidate], now_ts: float, current: RoleContext | None,
             w: RankWeights) -> list[tuple[float, float, float | None, float]]:
    """``(freshness, role match, role weight, total)`` of each candidate under ``w.rerank``: the one
    place the score is computed, so a hit's breakdown and the order re-ranking found agree to the bit.
    Epoch seconds on both sides (the store's columns hold exactly these floats). What is the same for
    every candidate (the role bonuses, a kind's default half-life) is looked up once."""
    fr, weights = w.freshness, w.role_weights
    defaults: dict[tuple[str, str], float | None] = {}
    active_now = current.active_role if current is not None else None
    sub_now = current.sub_role if current is not None else None
    full, partial = 1.0 + w.full_role_bonus, 1.0 + w.partial_role_bonus
    out = []
    for similarity, confidence, half_life_s, event_ts, active_role, sub_role, source_type, dialog_role in candidates:
        if half_life_s is None and fr is not None and source_type is not None and dialog_role is not None:
            kind = (source_type, dialog_role)
            if kind not in defaults:
                defaults[kind] = fr.seconds(source_type, dialog_role)
            half_life_s = defaults[kind]
        if never_decays(half_life_s):
            fresh = 1.0
        else:
            assert half_life_s is not None
            fresh = float(0.5 ** (max(now_ts - event_ts, 0.0) / half_life_s))
        if current is None or active_role != active_now:
            rm = 1.0
        elif sub_now is not None and sub_role == sub_now:
            rm = full
        else:
            rm = partial
        rw = None
        if weights is not None:
            rw = float(weights.get(sub_role, 0.0)) if sub_role is not None else 0.0
            rm = max(rm, 1.0 + w.full_role_bonus * min(max(rw, 0.0), 1.0))
        out.append((fresh, rm, rw, max(similarity, 0.0) * confidence * fresh * rm))
    return out


def score(similarity: float, confidence: float, half_life_s: float | None, event_ts: float,
          active_role: str, sub_role: str | None, now_ts: float, current: RoleContext | None,
          w: RankWeights, source_type: str | None = None, dialog_role: str | None = None) -> ScoreBreakdown:
    """One candidate's score from plain values (what recall reads from the store's columns).
    ``source_type`` and ``dialog_role`` pick the default half-life when ``half_life_s`` is None."""
    if not w.rerank:
        return ScoreBreakdown(similarity, 1.0, 1.0, 1.0, max(similarity, 0.0))
    [(fresh, rm, rw, total)] = _factors([(similarity, confidence, half_life_s, event_ts, active_role, sub_role,
                                          source_type, dialog_role)], now_ts, current, w)
    return ScoreBreakdown(similarity, confidence, fresh, rm, total, rw)


def top_k(candidates: Sequence[Candidate], now_ts: float, current: RoleContext | None, w: RankWeights,
          k: int) -> list[tuple[ScoreBreakdown, int]]:
    """Re-rank a search's candidates (in raw cosine order): the ``k`` best by :func:`score` as
    ``(breakdown, candidate index)``, best first. Ties go to the higher cosine, then the newer event,
    then the earlier candidate. Only the ``k`` returned get a breakdown built (a recall's candidate
    pool is several times ``k``), from the factors its total was ranked by."""
    if w.rerank:
        factors = _factors(candidates, now_ts, current, w)
    else:  # untyped retrieval: every factor 1, as score() gives it
        factors = [(1.0, 1.0, None, max(c[0], 0.0)) for c in candidates]
    order = sorted([(-f[3], -c[0], -c[3], i) for i, (f, c) in enumerate(zip(factors, candidates))])
    out = []
    for *_, i in order[:k]:
        fresh, rm, rw, total = factors[i]
        out.append((ScoreBreakdown(candidates[i][0], candidates[i][1] if w.rerank else 1.0, fresh, rm, total, rw), i))
    return out


_SOURCE_LABEL = {
    "direct_interaction": "conversation",
    "derived_inference": "agent inference",
    "external_ingest": "document",
    "system_feedback": "system",
}


def _ago(now: datetime, then: datetime) -> str:
    s = (now - then).total_seconds()
    if s < 120:
        return "just now"
    if s < 7200:
        return f"{int(s // 60)} min ago"
    if s < 172800:
        return f"{int(s // 3600)} h ago"
    return f"{int(s // 86400)} days ago"


def format_context(hits: Sequence[Hit], *, now: datetime | None = None,
                   current_session: str | None = None, header: str = "Relevant memories") -> str:
    """Render hits as a prompt block that labels each memory with source, role, session and time.

    Follows seed 000 §3.3: ``[Memory 2 - conversation | role: support/complaints | session: s1]``
    then the content, then where it came from and when — so the model does not mistake one user's
    case or a rumour for the current situation. A memory whose sensitivity is not ``none`` gets
    ``| sensitive: pii`` (or ``secret``) in its label: its text is redacted, and says so.

    Example:
        >>> print(format_context(scope.recall("refund policy", k=3)))  # doctest: +SKIP
    """
    now = now or utcnow()
    lines = [f"{header}:"] if hits else [f"{header}: (none)"]
    for i, h in enumerate(hits, 1):
        r = h.record
        p, rc = r.provenance, r.role_context
        role = rc.active_role + (f"/{rc.sub_role}" if rc.sub_role else "")
        sess = "current" if current_session and p.session_id == current_session else (p.session_id or "-")
        sens = r.metadata.sensitivity.value
        label = "" if sens == "none" else f" | sensitive: {sens}"  # redacted, but the model should know
        if h.score.role_weight is not None:
            label += f" | role weight: {h.score.role_weight:.2f}"
        lines.append(f"[Memory {i} - {_SOURCE_LABEL[p.type.value]} | role: {role} | session: {sess}{label}]")
        lines.append(f"Content: {r.content}")
        src = [f"{p.type.value}"]
        if p.source_entity:
            src.append(f"from {p.source_entity} ({rc.dialog_role.value})")
        if p.source_uri:
            src.append(p.source_uri + (f" v{p.source_version}" if p.source_version else ""))
        when = r.event_time
        lines.append(f"Source: {', '.join(src)}; time: {when.isoformat(timespec='minutes')} "
                     f"({_ago(now, when)}); confidence: {r.metadata.confidence:.2f}")
    return "\n".join(lines)
