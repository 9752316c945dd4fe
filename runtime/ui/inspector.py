"""What the inspector shows, read through the public API only: :class:`Inspector` answers each page's
question (memories, one memory, decisions, one decision, explain, time travel, recall, health) for
one scope, as plain data the templates render and the tests compare with the API's own answers.

Isolation is the API's: every read goes through ``MemoryStore.scope(user_id, agent_id)``, and the
inspector is bound to one scope unless it was opened as an admin. A scope it is not bound to is an
unknown scope (``NotFoundError``), exactly like a memory id of another user.

Read-only: recalls run with ``update_usage=False`` and never log; nothing here writes.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import NotFoundError, ValidationError
from ..record import MemIR
from ..record.redaction import redact
from ..store import MemoryStore, Scope, format_context

__all__ = ["MASK", "Inspector", "MemoryFilters", "ScopeKey", "masked"]

MASK = "•••••• (secret: masked)"
"""What the inspector shows instead of a secret memory's content."""

TIERS = ("working", "archive")
FACETS_TTL_S = 30.0


def is_secret(rec: MemIR) -> bool:
    return rec.metadata.sensitivity.value == "secret"


def masked(rec: MemIR) -> str:
    """A memory's content as the inspector shows it: a secret never appears, even redacted."""
    return MASK if is_secret(rec) else rec.content


@dataclass(frozen=True)
class ScopeKey:
    """One ``(user_id, agent_id)``: the unit everything the inspector shows belongs to."""

    user_id: str
    agent_id: str = "default"

    @property
    def label(self) -> str:
        return f"{self.user_id}/{self.agent_id}"


@dataclass(frozen=True)
class MemoryFilters:
    """The memories page's filters (each optional; empty strings mean "no constraint")."""

    tier: str = "working"
    role: str = ""
    sub_role: str = ""
    dialog_role: str = ""
    source: str = ""
    session: str = ""
    tag: str = ""
    sensitivity: str = ""
    since: str = ""
    until: str = ""

    def api(self) -> dict[str, Any]:
        """The filters as ``Scope.list`` keyword arguments (``ValidationError`` names a bad one)."""
        if self.tier not in ("working", "archive", "any"):
            raise ValidationError(f"tier must be working, archive or any, got {self.tier!r}", field="tier")
        out: dict[str, Any] = {"tier": self.tier, "include_expired": True}
        for key, api in (("role", "roles"), ("sub_role", "sub_roles"), ("dialog_role", "dialog_roles"),
                         ("source", "source_types"), ("session", "sessions"), ("tag", "tags")):
            value = getattr(self, key).strip()
            if value:
                out[api] = [value]
        if self.sensitivity.strip():
            out["sensitivity"] = [self.sensitivity.strip()]
        for key in ("since", "until"):
            value = getattr(self, key).strip()
            if value:
                out[key] = _instant(value, key)
        return out


def _instant(text: str, name: str) -> datetime:
    try:
        when = datetime.fromisoformat(text if "T" in text or len(text) > 10 else f"{text}T00:00:00+00:00")
    except ValueError:
        raise ValidationError(f"{name}={text!r} is not a date (YYYY-MM-DD or ISO 8601)", field=name) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when


@dataclass
class Health:
    """The health page: tier sizes now and after each decision, store-wide figures (admin), errors."""

    tiers: dict[str, int]
    history: list[dict[str, Any]]
    store: dict[str, Any] | None
    quarantine: dict[str, Any] | None
    backend: str


@dataclass
class TimeTravel:
    """The working set as a past decision left it, and what a query would have recalled from it."""

    decisions: list[dict[str, Any]]
    index: int
    at: Any
    working: list[dict[str, Any]]
    query: str = ""
    ranked: list[dict[str, Any]] = field(default_factory=list)


class Inspector:
    """The read side of a store, for one scope (or, as an admin, for any).

    Args:
        store: an open store.
        scope: the scope every page is about; ``None`` only with ``admin=True``.
        admin: any scope may be shown (``scopes()`` lists them all).
        quarantine: a ``memir score`` quarantine file whose errors the health page lists.
    """

    def __init__(self, store: MemoryStore, scope: ScopeKey | None = None, *, admin: bool = False,
                 quarantine: str | Path | None = None) -> None:
        if scope is None and not admin:
            raise ValidationError("the inspector needs a user (one scope) unless it runs as an admin", field="user")
        self.store, self.bound, self.admin = store, scope, admin
        self.quarantine = Path(quarantine) if quarantine else None
        self._scopes: dict[ScopeKey, Scope] = {}
        self._facets: dict[ScopeKey, tuple[float, dict[str, list[str]]]] = {}

    # ------------------------------------------------------------------ scopes
    def scopes(self) -> list[tuple[ScopeKey, int]]:
        """The scopes this inspector may show, with their working-set sizes."""
        if not self.admin:
            assert self.bound is not None
            return [(self.bound, self.scope(self.bound).count())]
        return [(ScopeKey(u, a), n) for u, a, n in sorted(self.store.admin_users())]

    def key(self, user_id: str | None, agent_id: str | None) -> ScopeKey:
        """The scope a request names (or the bound one); ``NotFoundError`` for any other."""
        if not self.admin:
            assert self.bound is not None
            if (user_id and user_id != self.bound.user_id) or (agent_id and agent_id != self.bound.agent_id):
                raise NotFoundError("no such user in this inspector (it shows one user)")
            return self.bound
        if not user_id:
            raise NotFoundError("pick a user: /users lists them")
        key = ScopeKey(user_id, agent_id or "default")
        if not self.scope(key).count(tier="any", include_expired=True):  # one indexed count, not a scan of users
            self._scopes.pop(key, None)
            raise NotFoundError(f"no user {key.label} in this store")
        return key

    def scope(self, key: ScopeKey) -> Scope:
        if not self.admin and key != self.bound:
            raise NotFoundError("no such user in this inspector (it shows one user)")
        if key not in self._scopes:
            self._scopes[key] = self.store.scope(user_id=key.user_id, agent_id=key.agent_id)
        return self._scopes[key]

    # ------------------------------------------------------------------ memories
    def memories(self, key: ScopeKey, filters: MemoryFilters, limit: int = 500) -> list[dict[str, Any]]:
        """The memories passing ``filters``, newest first, each with its tier."""
        scope = self.scope(key)
        args = filters.api()
        tiers = TIERS if args["tier"] == "any" else (args["tier"],)
        rows = []
        for tier in tiers:
            for rec in scope.list(**{**args, "tier": tier}):
                rows.append(self._row(rec, tier))
        rows.sort(key=lambda r: r["created_at"], reverse=True)
        return rows[:limit]

    def _row(self, rec: MemIR, tier: str) -> dict[str, Any]:
        rc, p, m = rec.role_context, rec.provenance, rec.metadata
        return {"id": rec.id, "tier": tier, "content": masked(rec), "created_at": rec.created_at,
                "role": rc.active_role + (f"/{rc.sub_role}" if rc.sub_role else ""),
                "dialog_role": rc.dialog_role.value, "source": p.type.value, "session": p.session_id or "",
                "tags": list(m.tags), "sensitivity": m.sensitivity.value, "confidence": m.confidence,
                "recalls": rec.usage.access_count, "utility": rec.usage.utility}

    def facets(self, key: ScopeKey) -> dict[str, list[str]]:
        """The values each filter can take in this scope (for the filter menus). One pass over the
        scope, remembered for ``FACETS_TTL_S`` seconds: a menu a few seconds behind the agent's
        writes is fine, a second pass over 10⁴ memories on every page is not."""
        now = time.monotonic()
        hit = self._facets.get(key)
        if hit is not None and now - hit[0] < FACETS_TTL_S:
            return hit[1]
        out: dict[str, set[str]] = {k: set() for k in ("role", "sub_role", "dialog_role", "source", "session",
                                                        "tag", "sensitivity")}
        scope = self.scope(key)
        for rec in scope.list(tier="any", include_expired=True):
            rc = rec.role_context
            out["role"].add(rc.active_role)
            if rc.sub_role:
                out["sub_role"].add(rc.sub_role)
            out["dialog_role"].add(rc.dialog_role.value)
            out["source"].add(rec.provenance.type.value)
            if rec.provenance.session_id:
                out["session"].add(rec.provenance.session_id)
            out["tag"].update(rec.metadata.tags)
            out["sensitivity"].add(rec.metadata.sensitivity.value)
        facets = {k: sorted(v) for k, v in out.items()}
        self._facets[key] = (now, facets)
        return facets

    def memory(self, key: ScopeKey, memory_id: str) -> dict[str, Any]:
        """One memory: record, tier, lineage, corrections, explanation. ``NotFoundError`` if not in the scope."""
        scope = self.scope(key)
        rec = scope.get(memory_id)
        explanation = scope.explain(memory_id)
        history = scope.history(memory_id)
        return {"row": self._row(rec, explanation.state if explanation.state != "deleted" else "working"),
                "record": rec, "explanation": explanation,
                "parents": [self._row(r, "") for r in scope.parents(memory_id)],
                "children": [self._row(r, "") for r in _children(scope, memory_id)],
                "versions": [{"id": v.record.id, "content": masked(v.record), "tier": v.tier, "current": v.current,
                              "created_at": v.record.created_at} for v in history],
                "provenance": rec.provenance.model_dump(mode="json"),
                "role_context": rec.role_context.model_dump(mode="json"),
                "metadata": _metadata(rec)}

    def explain(self, key: ScopeKey, memory_id: str) -> Any:
        """``Scope.explain``: also for a memory that is gone (its state says ``deleted``)."""
        return self.scope(key).explain(memory_id)

    # ------------------------------------------------------------------ decisions
    def decisions(self, key: ScopeKey, limit: int = 200) -> list[Any]:
        """The scope's decisions, newest first (``Scope.decisions``)."""
        return self.scope(key).decisions(limit)

    def decision(self, key: ScopeKey, decision_id: str) -> dict[str, Any]:
        """One decision with every item, best utility first, and its utility histogram."""
        scope = self.scope(key)
        d = scope.decision(decision_id)
        items = sorted(d.items.values(), key=lambda it: (-it.utility, it.memory_id))
        cut = d.cut.worst_kept.utility if d.cut.worst_kept is not None else None
        then = {m.memory_id: _content_then(m) for m in scope.memories_at(decision_id).items}
        return {"decision": d, "items": items, "content": then, "tight": [c for c in d.constraints if c.tight],
                "histogram": histogram([it.utility for it in items], [it.kept for it in items], cut)}

    # ------------------------------------------------------------------ time travel
    def time_travel(self, key: ScopeKey, index: int | None, query: str = "", k: int = 5) -> TimeTravel:
        """The working set after the ``index``-th decision (oldest = 0; default the newest), and, for a
        query, that set ranked by cosine similarity as the store's encoder embeds its contents then."""
        scope = self.scope(key)
        ds = list(reversed(scope.decisions(1000)))
        timeline = [{"index": i, "decision_id": d.decision_id, "at": d.at, "trigger": d.trigger} for i, d in enumerate(ds)]
        if not ds:
            return TimeTravel(timeline, -1, None, [], query)
        i = len(ds) - 1 if index is None else index
        if not 0 <= i < len(ds):
            raise ValidationError(f"decision index {i} is out of range 0..{len(ds) - 1}", field="i")
        past = scope.memories_at(ds[i].decision_id)
        working = [{"id": m.memory_id, "content": _content_then(m), "now": m.now, "tier_now": m.tier_now or "gone",
                    "utility": m.utility, "reason": m.reason.value} for m in past.working]
        out = TimeTravel(timeline, i, ds[i].at, working, query)
        if query.strip() and working:
            texts = [str(w["content"]) for w in working]
            vecs = np.asarray(self.store.embedder.encode(texts + [query]), dtype=np.float32)
            vecs /= np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
            sims = vecs[:-1] @ vecs[-1]
            for j in np.argsort(-sims, kind="stable")[:k]:
                out.ranked.append({**working[int(j)], "similarity": float(sims[j])})
        return out

    # ------------------------------------------------------------------ recall
    def recall(self, key: ScopeKey, query: str, k: int = 5, filters: MemoryFilters | None = None
               ) -> tuple[list[Any], str]:
        """``Scope.recall`` without touching usage or the recall log, and the prompt block
        ``format_context`` makes of the hits. A secret hit (only there when the filters ask for the
        ``secret`` level) comes back with its content masked, in the hits and in the block."""
        args = {k_: v for k_, v in (filters or MemoryFilters()).api().items() if k_ != "include_expired"}
        hits = [replace(h, record=h.record.model_copy(update={"content": MASK})) if is_secret(h.record) else h
                for h in self.scope(key).recall(query, k, update_usage=False, explain=False, **args)]
        return hits, format_context(hits)

    # ------------------------------------------------------------------ health
    def health(self, key: ScopeKey) -> Health:
        """Tier sizes now and after each decision, the store's own figures (admin only: they count
        every user), and the last errors of a ``memir score`` quarantine file."""
        scope = self.scope(key)
        tiers = {t: scope.count(tier=t, include_expired=True) for t in TIERS}  # type: ignore[arg-type]
        history = []
        archived = 0
        for d in reversed(scope.decisions(1000)):
            archived += len(d.archived)
            history.append({"at": d.at, "decision_id": d.decision_id, "working": len(d.kept), "archived": archived,
                            "deleted": len(d.deleted)})
        store = None
        if self.admin:
            stats = self.store.admin_stats()
            store = {"tiers": stats.get("tiers", {}), "cold_format": stats.get("cold_format"),
                     "encoders": stats.get("encoders", {}), "memories": stats.get("memories"),
                     "scrub_pending": bool(stats.get("scrub_pending")), "dead_rows": stats.get("dead_rows")}
        backend = "postgresql" if self.store.path.startswith("postgres") else "sqlite"
        return Health(tiers, history, store, read_quarantine(self.quarantine) if self.quarantine else None, backend)


def _children(scope: Scope, memory_id: str) -> list[MemIR]:
    try:
        return scope.children(memory_id)
    except NotFoundError:
        return []


def _content_then(m: Any) -> str:
    if m.record is not None and is_secret(m.record):
        return MASK
    return m.content if m.content is not None else f"({m.now})"


def _metadata(rec: MemIR) -> dict[str, Any]:
    md = rec.metadata.model_dump(mode="json")
    md.pop("attributes", None)  # caller data, often large; the content page shows what is typed
    return md


def histogram(values: Sequence[float], kept: Sequence[bool], cut: float | None, bins: int = 20) -> dict[str, Any]:
    """Counts of kept and dropped items per utility bin, and where the cut falls (for the SVG)."""
    vals = [v for v in values if math.isfinite(v)]
    if not vals:
        return {"bins": [], "lo": 0.0, "hi": 1.0, "cut": cut}
    lo, hi = min(vals), max(vals)
    if hi - lo < 1e-12:
        lo, hi = lo - 0.5, hi + 0.5
    width = (hi - lo) / bins
    out = [{"lo": lo + i * width, "hi": lo + (i + 1) * width, "kept": 0, "dropped": 0} for i in range(bins)]
    for v, k in zip(values, kept, strict=True):
        if not math.isfinite(v):
            continue
        b = min(int((v - lo) / width), bins - 1)
        out[b]["kept" if k else "dropped"] += 1
    return {"bins": out, "lo": lo, "hi": hi, "cut": cut}


def read_quarantine(path: Path, last: int = 50) -> dict[str, Any]:
    """The last ``last`` entries of a quarantine file: line, file and reason — never the rejected
    record itself (it was refused before redaction, so it may hold secrets), and the reason redacted
    too (a validation message can quote the value it refused)."""
    if not path.is_file():
        return {"path": str(path), "error": "no such file", "count": 0, "entries": []}
    entries: list[dict[str, Any]] = []
    count = 0
    with open(path, encoding="utf-8", errors="replace") as fh:
        for text in fh:
            count += 1
            try:
                row = json.loads(text)
            except json.JSONDecodeError:
                row = {"error": "(an unreadable line)"}
            entries.append({"line": row.get("line"), "file": row.get("file", ""),
                            "error": redact(str(row.get("error", ""))[:300]).text})
            entries = entries[-last:]
    return {"path": str(path), "error": None, "count": count, "entries": entries}
