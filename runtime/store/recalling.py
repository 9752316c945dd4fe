"""Recall: typed filter → exact vector top-K over the rows that pass → re-rank, every hit checked in SQL.

1. the arguments checked (``k``, the query text or vector, the weights); without a
   ``sensitivity`` filter, secrets stay out (:data:`~runtime.store.filters.RECALL_SENSITIVITY`);
2. the query embedded, and — with ``session_mix`` or dynamic roles — mixed with the scope's recent
   context, the role weights read from the live context by the role-weight model;
3. the tenant's search: typed filters in SQL, an exact top-``pool`` by similarity, re-ranked by
   similarity × confidence × freshness × role match (:mod:`.ranking`);
4. archived hits promoted back to working memory by a logged decision (``promote_on_access``);
5. with ``explain``, the redacted query, the filters, the raw top-K and the final list are logged.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Any

import numpy as np

from ..encoders.embedder import check_vector
from ..errors import ValidationError, check_text
from ..record.memir import RoleContext, utcnow
from ..retention.plan import recent_context
from ..scoring.role_weights import context_vector, default_role_weigher
from . import tiers
from .filters import RECALL_SENSITIVITY, build_filter, recall_filter
from .ranking import Hit
from .refresh import check_weight, mix_query
from .scope_core import ScopeCore

__all__ = ["MAX_POOL", "recall"]

MAX_POOL = 2**31 - 1
"""The most candidates a search takes, whatever ``k`` or ``candidates`` ask: more than any scope holds,
and within every engine's row limit (PostgreSQL's ``LIMIT`` is a bigint: ``k = 2**63`` failed there)."""


def recall(core: ScopeCore, query: str | np.ndarray, k: int, *, context: RoleContext | None, now: datetime | None,
           explain: bool, update_usage: bool, candidates: int | None, session_mix: float | None,
           dynamic_roles: bool | None, filters: dict[str, Any]) -> list[Hit]:
    """Stops 1–5 (see :meth:`runtime.store.scope.Scope.recall` for the arguments)."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:                                       # 1
        raise ValidationError(f"k must be a positive integer, got {k!r}", field="k")
    if not filters:
        flt = recall_filter()  # secrets stay out of prompts unless asked for by level
    else:
        flt = build_filter(**({"sensitivity": RECALL_SENSITIVITY} | filters))
    now = now or utcnow()
    store, tenant = core.store, core.tenant
    arm = core.recall_defaults  # an experiment arm's settings, where the call passes none
    session_mix = arm.get("session_mix") if session_mix is None else session_mix
    dynamic_roles = arm.get("dynamic_roles") if dynamic_roles is None else dynamic_roles
    candidates = arm.get("candidates") if candidates is None else candidates
    w = check_weight(store.config.recall_session_mix if session_mix is None else session_mix,
                     "session_mix", upper=1.0)
    if isinstance(query, str):                                                                       # 2
        if not query.strip():
            raise ValidationError("query must be non-empty text or a vector", field="query")
        check_text(query, "query")
        q = np.asarray(store.embedder.encode([query])[0], dtype=np.float32)
    else:
        q = check_vector(query, store.embedder)
    dyn = store.config.dynamic_roles if dynamic_roles is None else dynamic_roles
    if not isinstance(dyn, bool):
        raise ValidationError("dynamic_roles must be a bool", field="dynamic_roles")
    weights, role_weights = core.weights, None
    if arm.get("rerank") is False:
        weights = replace(weights, rerank=False)
    if dyn or w > 0.0:
        recent = recent_context(tenant.recent_vectors(core.policy.recent_window))
        if dyn:
            weigher = core.role_weigher or default_role_weigher(store.embedder.encoder_id)
            role_weights = weigher.relative(context_vector(q, recent))
            weights = replace(core.weights, role_weights=role_weights)
        q = mix_query(q, recent, w)
    if context is None and (acting := core.live(session=False).acting) is not None:  # the role the agent acts in
        context = RoleContext(active_role=acting.active_role, sub_role=acting.sub_role)
    pool = min(max(k, candidates or store.candidate_pool), MAX_POOL)                                 # 3
    res = tenant.search(flt, now, q, k=k, pool=pool, context=context, weights=weights, touch=update_usage)
    if update_usage and flt.tier != "working" and res.hits and store.config.promote_on_access:       # 4
        _promote(core, [h.record.id for h in res.hits], now)
    if explain and store.log_recalls:                                                                # 5
        # the logged query is redacted: PII never reaches a log
        qtext = store.builder.draft(query, {}).text if isinstance(query, str) else "<vector>"
        tenant.log_recall({
            "query": qtext, "filters": flt.model_dump(mode="json", exclude_defaults=True), "at": now.isoformat(),
            **({"session_mix": w} if w > 0.0 else {}),
            **({"role_weights": {r: round(x, 6) for r, x in role_weights.items()}} if role_weights else {}),
            "raw_top_k": [{"id": i, "similarity": round(s, 6)} for i, s in res.raw],
            "final": [{"id": h.record.id, "raw_rank": h.raw_rank,
                       "score": {kk: round(vv, 6) for kk, vv in h.score.as_dict().items()}} for h in res.hits],
        }, now)
    return res.hits


def _promote(core: ScopeCore, memory_ids: list[str], now: datetime) -> None:
    """Move the archived memories among a recall's hits back to the working tier, by a logged decision."""
    promotable = core.tenant.promotable(memory_ids, now)
    if promotable:
        core.tenant.apply_decision(tiers.promotion_decision(promotable, at=now, user_id=core.user_id,
                                                            agent_id=core.agent_id))
        core.live(session=False).working = None
