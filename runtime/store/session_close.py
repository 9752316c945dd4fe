"""Closing a session: what happens when an agent's conversation ends or moves on.

A session closes when the agent says so (``end_session``) or when a write names a new session. Then,
in this order:

1. **annotate**: every record of the session gets its session-context features, stored beside it
   (what the utility model was trained with; :mod:`runtime.annotate.consolidate`);
2. **summarise** (when ``policy.summaries.enabled``): a summary memory of the session's
   highest-utility turns, and optionally its sources archived by a logged decision;
3. **trigger**: an ``on_session_end`` retention decision, when the policy asks for one.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from ..annotate.consolidate import session_features, session_turns
from ..annotate.summary import SUMMARY_SOURCE, SUMMARY_TAG, extract_summary
from ..errors import ValidationError
from ..record.memir import Flag, MemIR, utcnow
from ..retention.decision import RetentionDecision
from ..retention.plan import RetentionPlan, scoring_context
from ..retention.policy import Triggers
from ..retention.rules import ItemRule, Match, RuleSet
from .corroboration import back_links
from .filters import MemoryFilter
from .prepare import prepare
from .retaining import auto_retain
from .scope_core import ScopeCore

if TYPE_CHECKING:
    from ..scoring.scorer import Scorer

__all__ = ["annotate_session", "close_session", "end_session", "summarize_session"]

_log = logging.getLogger(__name__)


def end_session(core: ScopeCore, now: datetime | None) -> RetentionDecision | None:
    """Close the open session (if any); the next write opens a new one."""
    live = core.live()
    now = now or utcnow()
    with live.lock:
        sid = live.open_session
        core.store.assembler.sessions.end(core.user_id, core.agent_id)
        if sid is None:
            return None
        live.open_session = None
        core.tenant.set_session(None, None)
    return close_session(core, sid, now)


def close_session(core: ScopeCore, session_id: str, now: datetime, *, trigger: bool = True) -> RetentionDecision | None:
    """Stops 1–3 of the module docstring; ``trigger=False`` leaves the decision to the caller (a batch
    that closes several sessions triggers once, after the last)."""
    annotate_session(core, session_id, now)
    if core.policy.summaries.enabled:
        _summarize_closed(core, session_id, now)
    if trigger and core.policy.triggers.on_session_end:
        return auto_retain(core, f"session_end:{session_id}", now)
    return None


def annotate_session(core: ScopeCore, session_id: str, now: datetime | None) -> int:
    """Store the session-context features of every record of one session; returns how many."""
    recs, vecs, _ = core.tenant.with_vectors(
        MemoryFilter(tier="any", include_expired=True, sessions=[session_id]), now or utcnow())
    live = session_turns(recs)
    if not live:
        return 0
    feats = session_features([recs[i] for i in live], vecs[live])
    return core.tenant.set_session_context([(recs[i].id, row) for i, row in zip(live, feats)])


def summarize_session(core: ScopeCore, session_id: str, now: datetime | None) -> MemIR | None:
    """Summarise one session (see :meth:`runtime.store.scope.Scope.summarize_session`)."""
    policy, sp = core.policy, core.policy.summaries
    now = now or utcnow()
    recs, vecs, steps = core.tenant.with_vectors(MemoryFilter(tier="working", sessions=[session_id]), now)
    idx = [i for i, r in enumerate(recs) if Flag.placeholder not in r.metadata.flags
           and SUMMARY_TAG not in r.metadata.tags and r.provenance.source_entity != SUMMARY_SOURCE]
    if len(idx) < sp.min_turns:
        return None
    turns, tvecs, tsteps = [recs[i] for i in idx], vecs[idx], steps[idx]
    scorer = policy.scorer or core.store.default_scorer()
    ctx = core.scoring_context(now, tsteps, turns, policy.recent_window)
    scoring = RetentionPlan(replace(policy, capacity=None, budget_tokens=None, triggers=Triggers()), scorer)
    built = scoring.build(turns, tvecs, ctx)
    utility = np.asarray(built.problem.utility, dtype=np.float64)
    if sp.summarizer is not None:
        top = sorted(sorted(range(len(turns)), key=lambda i: (-utility[i], i))[:sp.max_turns])
        text = sp.summarizer([turns[i] for i in top])
        if not isinstance(text, str):
            raise ValidationError(f"the summarizer must return text, got {type(text).__name__}",
                                  field="summaries.summarizer")
        sources = [turns[i].id for i in top]
    else:
        text, sources = extract_summary(turns, utility, sp)
    if not text.strip() or not sources:
        return None
    fields: dict[str, Any] = {"source_type": "derived_inference", "derived_from": sources,
                              "tags": [SUMMARY_TAG], "source_entity": SUMMARY_SOURCE, "session_id": session_id,
                              "timestamp": max(r.event_time for r in turns)}
    p = prepare(core, text, None, fields, track=False, where="session summary: ")
    core.tenant.insert([p.record], [p.vector], links=back_links(p.judgement, p.record.id))
    last = core.session_context([turns[-1].id])
    if len(last) and not np.isnan(last[0]).any():  # the summary sits at the end of its closed session
        core.tenant.set_session_context([(p.record.id, last[0])])
    core.live().working = None
    if sp.demote_sources:
        _demote_sources(core, scorer, turns, tvecs, tsteps, sources, built.model_utility, p.record.id, session_id,
                        now)
    return p.record


def _demote_sources(core: ScopeCore, scorer: Scorer, turns: list[MemIR], tvecs: np.ndarray, tsteps: np.ndarray,
                    sources: list[str], model_utility: Any, summary_id: str, session_id: str, now: datetime) -> None:
    """Archive a summary's sources (must-keep ones stay) by a logged decision that names the summary."""
    pos = {r.id: i for i, r in enumerate(turns)}
    keep = core.policy.ruleset.compile(turns, now).must_keep
    src = [pos[m] for m in sources if pos[m] not in keep]
    if not src:
        return
    demote = RetentionPlan(replace(core.policy, capacity=None, budget_tokens=None, triggers=Triggers(),
                                   rules=RuleSet(must_forget=[ItemRule(name=f"summarised into {summary_id}",
                                                                       when=Match(), action="archive")])), scorer)
    sub = demote.build([turns[i] for i in src], tvecs[src], scoring_context(now=now, steps=tsteps[src]),
                       model_utility=np.asarray(model_utility)[src])
    decision = demote.to_decision(sub, demote.solve(sub), at=now, user_id=core.user_id, agent_id=core.agent_id,
                                  trigger=f"summary:{session_id}")
    core.tenant.apply_decision(decision)


def _summarize_closed(core: ScopeCore, session_id: str, now: datetime) -> None:
    """The automatic summary of a closing session must never fail the write that closed it (a
    summariser hook may call a remote LLM): a failure is logged, and the turns stay as they are."""
    try:
        summarize_session(core, session_id, now)
    except Exception:  # noqa: BLE001 - logged with its traceback; the caller's write goes on
        _log.warning("summary of session %s failed; its turns are left as they are", session_id, exc_info=True)
