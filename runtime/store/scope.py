"""A user's view of the store: every read and write confined to one ``(user_id, agent_id)``.

The scope is a thin, typed facade. Each call walks *down* through the rooms once and comes back
with a value — the record builder and the assembler (:mod:`runtime.record`,
:mod:`runtime.annotate`), the encoder, the tenant's SQL (:mod:`runtime.store.sqlite`), the
retention plan (:mod:`runtime.retention`) — and no lower room ever calls back up. What an agent
using the store gets, without calling anything else:

- **sessions**: an explicit ``session_id`` is authoritative; without one the detector splits on
  time gaps and topic shifts. When a session closes, its records get their session-context
  features (what the utility model was trained with), and a ``on_session_end`` trigger runs;
- **the live context**: every decision sees the rolling recent-context vector (mean of the last
  ``recent_window`` memories) and the goal and stage set with :meth:`Scope.task`;
- **triggers**: the scope's :class:`~runtime.retention.RetentionPolicy` runs retention by itself
  every N writes, at a fill watermark, at session end or on named events (all off by default);
- **corrections**: :meth:`Scope.update` (or ``write(..., supersedes=id)``) makes the newer version
  win; :meth:`Scope.history` lists the chain; forgetting removes the whole chain.

Example:
    >>> alice = store.scope(user_id="alice")                      # doctest: +SKIP
    >>> rec = alice.write("Budget for project Orion is 40k EUR", tags=["orion"], sub_role="pm")
    >>> alice.update(rec.id, "Budget for project Orion is now 55k EUR")
    >>> hits = alice.recall("what is Orion's budget?", k=3, sub_roles=["pm"])
    >>> print(format_context(hits))
"""

from __future__ import annotations

import builtins
import logging
import math
import re
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Unpack

import numpy as np

from utilitynet.dialog import CONTEXT_NAMES

from ..annotate.assembler import Assembly
from ..annotate.consolidate import session_features, session_turns
from ..annotate.enrich import Judgement
from ..encoders.base import check_vector
from ..errors import NotFoundError, ValidationError, check_text
from ..record.builder import flatten
from ..record.fields import WriteFields
from ..record.memir import ID_PATTERN, Flag, MemIR, RoleContext, utcnow
from ..record.redaction import contains_sensitive
from ..retention.decision import MemoryExplanation, RetentionDecision
from ..retention.plan import RetentionPlan, recent_context, scoring_context
from ..retention.policy import CapacityFn, Forgotten, RetentionPolicy, Triggers
from ..retention.rules import ItemRule, Match, RuleSet
from ..retention.summary import SUMMARY_SOURCE, SUMMARY_TAG, extract_summary
from ..scoring.roles import RoleWeigher, context_vector, default_role_weigher
from . import dumps, tiers
from .backend import TenantBackend
from .corroboration import BatchNeighbours, back_links, corroborate, unlink
from .filters import RECALL_SENSITIVITY, FilterFields, MemoryFilter, build_filter
from .live import LiveContext
from .ranking import Hit, RankWeights
from .refresh import DEFAULT_REFRESH_WEIGHT, RefreshReport, check_weight, mix_query, refresh_marker, refreshed_vectors
from .services import StoreServices
from .time_travel import MemoriesAt, memories_at

if TYPE_CHECKING:
    from utilitynet.context import ScoringContext

    from ..scoring.protocol import Scorer

__all__ = ["ForgetReport", "Scope", "Version"]

History = Literal["archive", "keep", "delete"]
_REASON_MAX = 100


@dataclass(frozen=True)
class ForgetReport:
    """What :meth:`Scope.forget` did: ids deleted, and ids left as redacted placeholders."""

    deleted: list[str]
    redacted: list[str]


@dataclass(frozen=True)
class Version:
    """One version in a correction chain (:meth:`Scope.history`), oldest first.

    Attributes:
        record: the memory.
        tier: ``working`` or ``archive``.
        current: the newest version of the chain.
    """

    record: MemIR
    tier: str
    current: bool


@dataclass
class _Prepared:
    record: MemIR
    vector: np.ndarray
    pending: Any = None  # the session tracker state to commit once the record is written
    judgement: Judgement | None = None  # corroboration: the stored memories to link back to it


class Scope:
    """Reads and writes for one ``(user_id, agent_id)``. Get one from ``MemoryStore.scope``."""

    def __init__(self, store: StoreServices, tenant: TenantBackend, policy: RetentionPolicy) -> None:
        self._store = store
        self._tenant = tenant
        self.user_id = tenant.user_id
        self.agent_id = tenant.agent_id
        self.policy = policy
        self.weights = RankWeights()
        self.role_weigher: RoleWeigher | None = None  # dynamic roles: None = the shipped model

    def __repr__(self) -> str:
        return f"Scope(user_id={self.user_id!r}, agent_id={self.agent_id!r})"

    # ------------------------------------------------------------------ live context
    def _live(self) -> LiveContext:
        live = self._store.live(self.user_id, self.agent_id)
        if not live.loaded:
            with live.lock:
                if not live.loaded:
                    live.open_session = self._tenant.state().open_session
                    live.loaded = True
        return live

    def set_policy(self, policy: RetentionPolicy) -> None:
        """Replace this scope object's retention policy (capacity, rules, triggers...)."""
        if not isinstance(policy, RetentionPolicy):
            raise ValidationError("policy must be a RetentionPolicy(...)", field="policy")
        self.policy = policy

    def set_task(self, goal: str | None = None, *, stage: float | None = None) -> None:
        """Tell the scope what the agent is working on: the goal text (redacted, then embedded) and
        the task stage in [0, 1]. Retention decisions score with both. ``None`` clears a field."""
        if stage is not None and (not isinstance(stage, (int, float)) or not 0.0 <= float(stage) <= 1.0):
            raise ValidationError(f"stage must be a number in [0, 1], got {stage!r}", field="stage")
        live = self._live()
        vec = None
        text = None
        if goal is not None:
            draft = self._store.builder.draft(goal, {})
            text = draft.text
            vec = np.asarray(self._store.embedder.encode([text])[0], dtype=np.float32)
        with live.lock:
            live.goal, live.goal_vector = text, vec
            live.stage = None if stage is None else float(stage)

    @contextmanager
    def task(self, goal: str | None = None, *, stage: float | None = None) -> Iterator[Scope]:
        """``with scope.task(goal="Plan the Oslo trip"):`` — the goal and stage hold inside the block.

        Example:
            >>> with scope.task(goal="Book the team offsite in Lisbon", stage=0.2):  # doctest: +SKIP
            ...     scope.write("Venue must hold 40 people")
        """
        live = self._live()
        with live.lock:
            before = (live.goal, live.goal_vector, live.stage)
        self.set_task(goal, stage=stage)
        try:
            yield self
        finally:
            with live.lock:
                live.goal, live.goal_vector, live.stage = before

    # ------------------------------------------------------------------ write side
    def write(self, content: str | MemIR | Assembly, *, embedding: Any = None, **fields: Unpack[WriteFields]) -> MemIR:
        """Validate, redact, embed and store one memory; returns the stored record.

        A session change closes the previous session first (its session context is computed and
        an ``on_session_end`` trigger runs); afterwards the scope's triggers may run retention.

        Args:
            content: the memory text, a ready ``MemIR`` (its tenant fields must match this scope;
                it is revalidated and redacted), or an ``Assembly`` from a ``ContextAssembler``
                (written as assembled).
            embedding: a precomputed vector of the (redacted) content from the store's encoder.
            **fields: :class:`~runtime.record.WriteFields` — typed, flat fields (``source_type``,
                ``session_id``, ``sub_role``, ``confidence``, ``expires_at``, ``tags``, ``flags``,
                ``supersedes``…).

        Raises:
            ValidationError / ContentTooLargeError / VectorError: naming the field; nothing is written.
        """
        return self._write_one(content, embedding, dict(fields), "archive")

    def write_many(self, items: Iterable[str | MemIR | dict[str, Any]]) -> builtins.list[MemIR]:
        """Write a batch all-or-nothing: every item is validated and embedded first, then one
        transaction inserts them all. Any invalid item raises (naming its index) and nothing is
        written. Sessions the batch closes are annotated after it is written; triggers run once."""
        live = self._live()
        with live.lock:
            prepared: builtins.list[_Prepared] = []
            batch = BatchNeighbours()
            for i, item in enumerate(items):
                where = f"item {i}: "
                try:
                    if isinstance(item, dict):
                        d = dict(item)
                        emb = d.pop("embedding", None)
                        content = d.pop("content", None)
                        if not isinstance(content, str):
                            raise ValidationError("each item needs a 'content' string", field="content")
                        p = self._prepare(content, emb, d, track=False, where=where, batch=batch)
                    else:
                        p = self._prepare(item, None, {}, track=False, where=where, batch=batch)
                    prepared.append(p)
                    batch.add(p.record, p.vector)
                except ValidationError as e:
                    raise type(e)(str(e) if str(e).startswith(where) else f"{where}{e}",
                                  field=f"[{i}].{e.field}" if e.field else f"[{i}]", problems=e.problems) from e
            if not prepared:
                return []
            recs = [p.record for p in prepared]
            closed = []
            sid = live.open_session
            for r in recs:
                s = r.provenance.session_id
                if s is not None and sid is not None and s != sid and sid not in closed:
                    closed.append(sid)
                sid = s if s is not None else sid
            _, since = self._tenant.insert(recs, [p.vector for p in prepared], batch=True,
                                           session=self._session_row(recs[-1], live, sid),
                                           links=[x for p in prepared for x in back_links(p.judgement, p.record.id)])
            live.open_session = sid
            if live.working is not None:
                live.working += len(recs)
        for r in recs:
            self._supersede(r, "archive")
        now = max(r.event_time for r in recs)
        for s in closed:
            self.annotate_session(s, now=now)
            if self.policy.summaries.enabled:
                self._summarize_closed(s, now)
        if closed and self.policy.triggers.on_session_end:
            self._auto_retain(f"session_end:{closed[-1]}", now)
        self._after_write(since, now)
        return recs

    def update(self, memory_id: str, content: str, *, history: History = "archive", embedding: Any = None,
               **fields: Unpack[WriteFields]) -> MemIR:
        """Correct a memory: write the new version, which wins over the old one from now on.

        The new version inherits the old one's roles, task, tags, source type, speaker and flags
        unless given. The old version is handled by ``history``: ``archive`` (default) moves it to
        the archive tier with reason ``superseded_by:<new id>``; ``keep`` leaves it in working
        memory, flagged superseded (retention archives it, never the new one); ``delete`` forgets
        it. Either way :meth:`history` lists the chain and :meth:`forget` removes all of it.

        Raises:
            NotFoundError: no memory ``memory_id`` in this scope.
        """
        memory_id = self._check_id(memory_id, "memory_id")
        if history not in ("archive", "keep", "delete"):
            raise ValidationError(f"history must be 'archive', 'keep' or 'delete', got {history!r}", field="history")
        old = self._tenant.get(memory_id)
        if old is None:
            raise self._not_found(memory_id)
        _, base = flatten(old)
        inherit = {k: base[k] for k in ("source_type", "active_role", "sub_role", "dialog_role", "task_id", "tags",
                                        "source_entity", "freshness_half_life")}
        inherit["flags"] = [f for f in old.metadata.flags if f not in (Flag.superseded, Flag.placeholder, Flag.used)]
        merged: dict[str, Any] = {**inherit, **fields, "supersedes": memory_id}
        return self._write_one(content, embedding, merged, history)

    def history(self, memory_id: str) -> builtins.list[Version]:
        """Every version of the fact ``memory_id`` belongs to, oldest first (see :meth:`update`).

        Raises:
            NotFoundError: no memory ``memory_id`` in this scope.
        """
        memory_id = self._check_id(memory_id, "memory_id")
        if self._tenant.tier_of(memory_id) is None:
            raise self._not_found(memory_id)
        ids = self._tenant.versions(memory_id)
        out = []
        for i, mid in enumerate(ids):
            rec, tier = self._tenant.get(mid), self._tenant.tier_of(mid)
            if rec is not None and tier is not None:
                out.append(Version(rec, tier, i == len(ids) - 1))
        return out

    def event(self, name: str, *, now: datetime | None = None) -> RetentionDecision | None:
        """Tell the scope something happened (``"task_phase_change"``, ``"new_instruction"``...).
        Returns the decision if the policy's triggers list the event, else ``None``."""
        if not isinstance(name, str) or not name.strip():
            raise ValidationError("event name must be a non-empty string", field="name")
        if name in self.policy.triggers.events:
            return self._auto_retain(f"event:{name}", now or utcnow())
        return None

    def end_session(self, *, now: datetime | None = None) -> RetentionDecision | None:
        """Close the open session: store its session context, and run retention if the policy
        triggers on session end (returns that decision). The next write opens a new session."""
        live = self._live()
        now = now or utcnow()
        with live.lock:
            sid = live.open_session
            self._store.assembler.sessions.end(self.user_id, self.agent_id)
            if sid is None:
                return None
            live.open_session = None
            self._tenant.set_session(None, None)
        return self._close_session(sid, now)

    def annotate_session(self, session_id: str, *, now: datetime | None = None) -> int:
        """Compute and store the session-context features of every record of one session (all
        tiers, write order) beside the records; returns how many were annotated. Called when a
        session closes; call it yourself after importing a session in bulk. The records themselves
        are not changed."""
        if not isinstance(session_id, str) or not re.match(ID_PATTERN, session_id):
            raise ValidationError(f"session_id {session_id!r} is not a valid id (letters, digits, _ . : @ -)",
                                  field="session_id")
        recs, vecs, _ = self._tenant.with_vectors(
            MemoryFilter(tier="any", include_expired=True, sessions=[session_id]), now or utcnow())
        live = session_turns(recs)
        if not live:
            return 0
        feats = session_features([recs[i] for i in live], vecs[live])
        return self._tenant.set_session_context([(recs[i].id, row) for i, row in zip(live, feats)])

    def summarize_session(self, session_id: str, *, now: datetime | None = None) -> MemIR | None:
        """Summarise one session now (closing a session does it when ``policy.summaries.enabled``):
        returns the summary written, or ``None`` (fewer than ``min_turns`` working turns, or no text).

        The session's working turns (summaries and redacted placeholders left out) are scored with
        the scope's scorer and live context, exactly as a retention decision would, and
        :func:`~runtime.retention.summary.extract_summary` (or the policy's ``summarizer`` hook, fed
        the ``max_turns`` highest-utility turns in time order) makes the text. It is written like
        any memory (validated, redacted, embedded) as a ``derived_inference`` tagged ``summary``,
        ``source_entity="memir:summary"``, in the session, ``derived_from`` = the turns used. With
        ``demote_sources`` those turns (except must-keep ones: pinned, core, user-confirmed) are
        archived by a logged decision (trigger ``summary:<session>``, rule ``summarised into <id>``),
        so :meth:`explain` says why; they stay recallable with ``tier="archive"``.
        """
        session_id = self._check_id(session_id, "session_id")
        sp = self.policy.summaries
        now = now or utcnow()
        recs, vecs, steps = self._tenant.with_vectors(MemoryFilter(tier="working", sessions=[session_id]), now)
        idx = [i for i, r in enumerate(recs) if Flag.placeholder not in r.metadata.flags
               and SUMMARY_TAG not in r.metadata.tags and r.provenance.source_entity != SUMMARY_SOURCE]
        if len(idx) < sp.min_turns:
            return None
        turns, tvecs, tsteps = [recs[i] for i in idx], vecs[idx], steps[idx]
        scorer = self.policy.scorer or self._store.default_scorer()
        ctx = self._live_scoring_context(now, tsteps, turns, self.policy.recent_window)
        scoring = RetentionPlan(replace(self.policy, capacity=None, budget_tokens=None, triggers=Triggers()), scorer)
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
        p = self._prepare(text, None, fields, track=False, where="session summary: ")
        self._tenant.insert([p.record], [p.vector], links=back_links(p.judgement, p.record.id))
        last = self.session_context([turns[-1].id])
        if len(last) and not np.isnan(last[0]).any():  # the summary sits at the end of its closed session
            self._tenant.set_session_context([(p.record.id, last[0])])
        self._live().working = None
        if sp.demote_sources:
            pos = {r.id: i for i, r in enumerate(turns)}
            keep = self.policy.ruleset.compile(turns, now).must_keep
            src = [pos[m] for m in sources if pos[m] not in keep]
            if src:
                demote = RetentionPlan(replace(self.policy, capacity=None, budget_tokens=None, triggers=Triggers(),
                                               rules=RuleSet(must_forget=[ItemRule(
                                                   name=f"summarised into {p.record.id}", when=Match(),
                                                   action="archive")])), scorer)
                sub = demote.build([turns[i] for i in src], tvecs[src], scoring_context(now=now, steps=tsteps[src]),
                                   model_utility=np.asarray(built.model_utility)[src])
                decision = demote.to_decision(sub, demote.solve(sub), at=now, user_id=self.user_id,
                                              agent_id=self.agent_id, trigger=f"summary:{session_id}")
                self._tenant.apply_decision(decision)
        return p.record

    def _live_scoring_context(self, now: datetime, steps: np.ndarray, recs: Sequence[MemIR],
                              recent_window: int) -> ScoringContext:
        """What the utility model scores ``recs`` with: the recent-context vector, the task's goal
        and stage, and the records' stored session features (``retain`` and session summaries)."""
        live = self._live()
        with live.lock:
            goal, stage = live.goal_vector, live.stage
        recent = recent_context(self._tenant.recent_vectors(recent_window))
        return scoring_context(now=now, steps=steps, recent=recent, goal=goal, stage=stage,
                               session=self.session_context([r.id for r in recs]))

    def session_context(self, ids: Sequence[str]) -> np.ndarray:
        """The stored session-context features of ``ids`` (row-aligned; NaN rows: session still open)."""
        return self._tenant.session_context(list(ids), len(CONTEXT_NAMES))

    def exists(self, ids: Sequence[str]) -> set[str]:
        """The subset of ``ids`` that are memories of this scope (for ``derived_from`` checks)."""
        return self._tenant.existing_ids(list(ids))

    def tag(self, ids: Sequence[str], tags: str | Sequence[str]) -> int:
        """Add ``tags`` to existing memories of this scope, retroactively (e.g. a type named after
        :func:`runtime.annotate.discovery.discover_types`). Records are otherwise immutable: this
        changes only their tags, in one transaction, and ``list``/``recall(tags=...)`` see it at once.

        Tags are checked like tag filters (letters, digits, spaces and ``_ . : @ / + # & -``; at most
        128 characters) and must not contain PII or secrets (they are stored as given). Every id must
        be a memory of this scope (an unknown id, or another user's, raises ``NotFoundError`` and
        nothing changes). Returns how many memories gained a tag (already tagged ones are left as they are).
        """
        if isinstance(ids, str) or not isinstance(ids, Sequence):
            raise ValidationError("ids must be a list of memory ids", field="ids")
        wanted = builtins.list(dict.fromkeys(self._check_id(i, f"ids[{n}]") for n, i in enumerate(ids)))
        clean = self.check_tags(tags)
        found = self._tenant.existing_ids(wanted)
        missing = [i for i in wanted if i not in found]
        if missing:
            raise self._not_found(missing[0])
        return self._tenant.add_tags(wanted, clean)

    @staticmethod
    def check_tags(tags: str | Sequence[str]) -> builtins.list[str]:
        """The tags :meth:`tag` would add, checked like tag filters and refused if they look like PII or
        a secret (tags are stored as given). Raises ``ValidationError`` / ``FilterError`` naming the tag."""
        if isinstance(tags, str):
            tags = [tags]
        if not isinstance(tags, Sequence) or not tags:
            raise ValidationError("tags must be a tag or a non-empty list of tags", field="tags")
        clean = build_filter(tags=builtins.list(tags)).tags or []
        for n, t in enumerate(clean):
            if contains_sensitive(t):
                raise ValidationError(f"tags[{n}] looks like PII or a secret; tags are stored as given — "
                                      "choose a descriptive name", field=f"tags[{n}]")
        return clean

    # ------------------------------------------------------------------ write internals
    def _write_one(self, content: Any, embedding: Any, fields: dict[str, Any], history: History) -> MemIR:
        """One write: close a session it leaves, insert, then corrections and triggers."""
        live = self._live()
        with live.lock:
            p = self._prepare(content, embedding, fields, track=True)
            now = p.record.event_time
            self._close_if_switching(live, p.record.provenance.session_id, now)
            _, since = self._tenant.insert([p.record], [p.vector], session=self._session_row(p.record, live),
                                           links=back_links(p.judgement, p.record.id))
            self._store.assembler.sessions.commit(p.pending)
            if p.record.provenance.session_id is not None:
                live.open_session = p.record.provenance.session_id
            if live.working is not None:
                live.working += 1
        self._supersede(p.record, history)
        self._after_write(since, now)
        return p.record

    def _prepare(self, item: Any, embedding: Any, fields: dict[str, Any], *, track: bool,
                 where: str = "", batch: BatchNeighbours | None = None) -> _Prepared:
        """Build the record (one builder, one redaction), its vector, and its session. ``batch``: the
        items of the same ``write_many`` prepared before this one (corroboration judges against them
        too)."""
        store = self._store
        if isinstance(item, Assembly):
            if fields:
                raise ValidationError(f"{where}an Assembly is written as assembled: pass no fields", field="fields")
            rec = item.record
            if (rec.provenance.user_id, rec.provenance.agent_id) != (self.user_id, self.agent_id):
                raise ValidationError(f"{where}this Assembly was made for user={rec.provenance.user_id!r} "
                                      f"agent={rec.provenance.agent_id!r}, not this scope", field="provenance.user_id")
            vec = self._vector(rec.content, item.embedding if embedding is None else embedding)
            if store.assembler.config.enrich.corroborate:  # the store's corroboration, like any new memory
                rec, judgement = corroborate(self._tenant, self.weights, store.assembler.config.enrich, rec, vec,
                                             utcnow(), batch)
                return _Prepared(rec, vec, None, judgement)
            return _Prepared(rec, vec)
        if isinstance(item, MemIR):
            if fields:
                raise ValidationError(f"{where}pass either a MemIR record or content + fields, not both",
                                      field="fields")
            rec = store.builder.rebuild(item, user_id=self.user_id, agent_id=self.agent_id, where=where)
            return _Prepared(rec, self._vector(rec.content, embedding))
        if not isinstance(item, str):
            raise ValidationError(f"{where}cannot write a {type(item).__name__}; pass content text, a MemIR or "
                                  "a dict", field="content")
        draft = store.builder.draft(item, fields, where=where)
        vec = self._vector(draft.text, embedding)
        asm = store.assembler
        at = draft.fields.get("timestamp") or draft.fields.get("created_at") or utcnow()
        decided: dict[str, Any] = {}
        pending = None
        sid = draft.fields.get("session_id")
        if track and asm.config.session.enabled:
            tracker = asm.sessions
            with tracker.lock:
                if sid is not None:
                    _, pending = tracker.adopt(self.user_id, self.agent_id, sid, at, vec)
                else:
                    seed = self._live().open_session if tracker.state(self.user_id, self.agent_id) is None else None
                    state = self._tenant.state() if seed is not None else None
                    last = (datetime.fromtimestamp(state.session_last_at, at.tzinfo)
                            if state is not None and state.session_last_at is not None else None)
                    dec, pending = tracker.decide(self.user_id, self.agent_id, at, vec, declared_id=seed,
                                                  declared_last_event_at=last)
                    decided["session_id"] = dec.session_id
        if asm.config.roles.rules or asm.config.roles.descriptions:
            role = asm.role_of(draft, "general", None, lambda: vec)
            decided.update(active_role=role.active_role, sub_role=role.sub_role)
        decided.update(asm.enrich(draft, lambda: vec, store.embedder))
        rec = store.builder.finish(draft, user_id=self.user_id, agent_id=self.agent_id, where=where, **decided)
        if asm.config.enrich.corroborate:
            rec, judgement = corroborate(self._tenant, self.weights, asm.config.enrich, rec, vec, utcnow(), batch)
            return _Prepared(rec, vec, pending, judgement)
        return _Prepared(rec, vec, pending)

    def _vector(self, text: str, embedding: Any) -> np.ndarray:
        emb = self._store.embedder
        if embedding is not None:
            return check_vector(embedding, emb)
        return np.asarray(emb.encode([text])[0], dtype=np.float32)

    def _session_row(self, rec: MemIR, live: LiveContext, sid: str | None = None) -> tuple[str | None, float | None]:
        s = sid if sid is not None else (rec.provenance.session_id or live.open_session)
        return s, rec.event_time.timestamp()

    def _close_if_switching(self, live: LiveContext, new_session: str | None, now: datetime) -> None:
        old = live.open_session
        if old is not None and new_session is not None and new_session != old:
            live.open_session = None
            self._close_session(old, now)

    def _close_session(self, session_id: str, now: datetime) -> RetentionDecision | None:
        self.annotate_session(session_id, now=now)
        if self.policy.summaries.enabled:
            self._summarize_closed(session_id, now)
        if self.policy.triggers.on_session_end:
            return self._auto_retain(f"session_end:{session_id}", now)
        return None

    def _summarize_closed(self, session_id: str, now: datetime) -> None:
        """The automatic summary of a closing session must never fail the write that closed it (a
        summariser hook may call a remote LLM): a failure is logged, and the turns stay as they are
        (nothing is written or archived unless the summary itself was written)."""
        try:
            self.summarize_session(session_id, now=now)
        except Exception:  # noqa: BLE001 - logged with its traceback; the caller's write goes on
            logging.getLogger(__name__).warning("summary of session %s failed; its turns are left as they are",
                                                session_id, exc_info=True)

    def _supersede(self, rec: MemIR, history: History) -> None:
        old = rec.metadata.attributes.get("supersedes")
        if not isinstance(old, str):
            return
        self._live().working = None  # the old version may leave working memory
        if history == "delete":
            self.forget(old, reason=f"superseded by {rec.id}", include_versions=False)
        else:
            self._tenant.mark_superseded(old, rec.id, archive=history == "archive")

    def _after_write(self, writes_since_decision: int, now: datetime) -> None:
        trig = self.policy.triggers
        if not trig.enabled:
            return
        why = None
        if trig.every_n_writes and writes_since_decision >= trig.every_n_writes:
            why = "every_n_writes"
        elif trig.watermark is not None and isinstance(self.policy.capacity, int):
            live = self._live()
            with live.lock:
                if live.working is None:
                    live.working = self._tenant.working_count()
                working = live.working
            if working >= math.ceil(trig.watermark * self.policy.capacity):
                why = "watermark"
        if why is not None:
            self._auto_retain(why, now)

    def _auto_retain(self, trigger: str, now: datetime) -> RetentionDecision:
        # A triggered decision must never fail the write that fired it: overflow, not raise.
        return self.retain(trigger=trigger, now=now, on_infeasible="overflow")

    # ------------------------------------------------------------------ read side
    def get(self, memory_id: str) -> MemIR:
        """The record with this id in this scope; ``NotFoundError`` otherwise (also for other users' ids)."""
        memory_id = self._check_id(memory_id, "memory_id")
        rec = self._tenant.get(memory_id)
        if rec is None:
            raise self._not_found(memory_id)
        return rec

    def list(self, *, limit: int | None = None, now: datetime | None = None,
             **filters: Unpack[FilterFields]) -> builtins.list[MemIR]:
        """Records passing the typed filters (see :class:`~runtime.store.filters.MemoryFilter`), oldest first."""
        return self._tenant.select(build_filter(**filters), now or utcnow(), _check_limit(limit))

    def count(self, *, now: datetime | None = None, **filters: Unpack[FilterFields]) -> int:
        """How many records pass the typed filters."""
        return self._tenant.count(build_filter(**filters), now or utcnow())

    def list_with_vectors(self, *, now: datetime | None = None, **filters: Unpack[FilterFields]
                          ) -> tuple[builtins.list[MemIR], np.ndarray, np.ndarray]:
        """(records, unit vectors, write steps) for the filtered rows, in write order."""
        return self._tenant.with_vectors(build_filter(**filters), now or utcnow())

    def recall(self, query: str | np.ndarray, k: int = 5, *, context: RoleContext | None = None,
               now: datetime | None = None, explain: bool = False, update_usage: bool = True,
               candidates: int | None = None, session_mix: float | None = None,
               dynamic_roles: bool | None = None, **filters: Unpack[FilterFields]) -> builtins.list[Hit]:
        """Typed filter → exact vector top-K over the rows that pass → SQL re-check → re-rank.

        Args:
            query: text (embedded with the store's encoder) or a query vector.
            k: hits to return.
            context: the caller's current role, for the role-match bonus.
            now: decision time for freshness/expiry (default: now, UTC).
            explain: log query (redacted), filters, raw top-K and final list (``scope.recall_log()``).
            update_usage: bump ``access_count``/``last_accessed_at`` of the returned hits.
            candidates: raw top-K before re-ranking (default ``StoreConfig.candidate_pool``).
            session_mix: weight ``w`` in [0, 1) of the scope's recent-context vector ``s`` (unit mean
                of its last ``policy.recent_window`` memories) in the query: the search runs with
                normalize((1-w)·q + w·s) (default ``StoreConfig.recall_session_mix``, 0 = off).
                Similarities in the hits are to that mixed query.
            dynamic_roles: weigh roles by the live context (default ``StoreConfig.dynamic_roles``):
                the role-weight model (``scope.role_weigher``, default the shipped
                :class:`~runtime.scoring.roles.RoleWeigher`) maps the context vector — unit mean of
                the query and the recent-context vector — to weights ``w`` over sub-roles; a memory
                of sub-role ``r`` gets role_match ``max(static, 1 + full_role_bonus · w[r]/max(w))``
                and ``hit.score.role_weight = w[r]/max(w)``.
            **filters: :class:`~runtime.store.filters.FilterFields` — ``roles``, ``sub_roles``,
                ``source_types``, ``sessions``, ``exclude_sessions``, ``since``, ``until``,
                ``min_confidence``, ``sensitivity``, ``tags``, ``task_ids``, ``dialog_roles``,
                ``include_expired``, ``tier``. Without ``sensitivity``, secrets are excluded
                (:data:`~runtime.store.filters.RECALL_SENSITIVITY`: at most ``pii``); name the
                level to include them (``sensitivity="secret"``).

        Returns:
            Hits sorted by total score, each with ``.record`` and ``.score`` (the breakdown).
        """
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValidationError(f"k must be a positive integer, got {k!r}", field="k")
        if "sensitivity" not in filters:  # secrets stay out of prompts unless asked for by level
            filters["sensitivity"] = RECALL_SENSITIVITY
        flt = build_filter(**filters)
        now = now or utcnow()
        store = self._store
        w = check_weight(store.config.recall_session_mix if session_mix is None else session_mix,
                         "session_mix", upper=1.0)
        if isinstance(query, str):
            if not query.strip():
                raise ValidationError("query must be non-empty text or a vector", field="query")
            check_text(query, "query")
            q = np.asarray(store.embedder.encode([query])[0], dtype=np.float32)
        else:
            q = check_vector(query, store.embedder)
        dyn = store.config.dynamic_roles if dynamic_roles is None else dynamic_roles
        if not isinstance(dyn, bool):
            raise ValidationError("dynamic_roles must be a bool", field="dynamic_roles")
        weights, role_weights = self.weights, None
        if dyn or w > 0.0:
            recent = recent_context(self._tenant.recent_vectors(self.policy.recent_window))
            if dyn:
                weigher = self.role_weigher or default_role_weigher(store.embedder.encoder_id)
                role_weights = weigher.relative(context_vector(q, recent))
                weights = replace(self.weights, role_weights=role_weights)
            q = mix_query(q, recent, w)
        pool = max(k, candidates or store.candidate_pool)
        res = self._tenant.search(flt, now, q, k=k, pool=pool, context=context, weights=weights,
                                  touch=update_usage)
        if update_usage and flt.tier != "working" and res.hits and store.config.promote_on_access:
            self._promote([h.record.id for h in res.hits], now)
        if explain and store.log_recalls:
            # the logged query is redacted: PII never reaches a log
            qtext = store.builder.draft(query, {}).text if isinstance(query, str) else "<vector>"
            self._tenant.log_recall({
                "query": qtext, "filters": flt.model_dump(mode="json", exclude_defaults=True), "at": now.isoformat(),
                **({"session_mix": w} if w > 0.0 else {}),
                **({"role_weights": {r: round(x, 6) for r, x in role_weights.items()}} if role_weights else {}),
                "raw_top_k": [{"id": i, "similarity": round(s, 6)} for i, s in res.raw],
                "final": [{"id": h.record.id, "raw_rank": h.raw_rank,
                           "score": {kk: round(vv, 6) for kk, vv in h.score.as_dict().items()}} for h in res.hits],
            }, now)
        return res.hits

    def _promote(self, memory_ids: builtins.list[str], now: datetime) -> None:
        """Move the archived memories among ``memory_ids`` (a recall's hits) back to the working tier,
        by a logged decision (:mod:`runtime.store.tiers`)."""
        promotable = self._tenant.promotable(memory_ids, now)
        if promotable:
            self._tenant.apply_decision(tiers.promotion_decision(promotable, at=now, user_id=self.user_id,
                                                                 agent_id=self.agent_id))
            self._live().working = None

    def recall_log(self, limit: int = 20) -> builtins.list[dict[str, Any]]:
        """The scope's most recent ``explain=True`` recalls, newest first."""
        return self._tenant.recall_log(_check_limit(limit, allow_none=False))

    # ------------------------------------------------------------------ forgetting
    def forget(self, memory_id: str, *, cascade: Literal["redact", "delete"] = "redact", reason: str = "forgotten",
               scrub: bool = True, include_versions: bool = True) -> ForgetReport:
        """Forget a memory and every version of it (its correction chain).

        ``cascade="redact"``: a memory others were derived from becomes a redacted placeholder
        (content, tags, attributes and vector gone; provenance kept) so their chain still explains
        itself (seed 001 pitfall 4); otherwise it is deleted. ``cascade="delete"``: it and
        everything derived from it (transitively) are deleted. With ``scrub`` the WAL is
        checkpointed and truncated so the old content leaves it too; if another connection holds a
        read transaction, forget waits for it (``StoreConfig.scrub_wait_s``) and otherwise raises —
        it never reports success while the bytes remain.

        Raises:
            NotFoundError: no memory ``memory_id`` in this scope.
            ValidationError: an unknown cascade, or a reason that is blank or over 100 characters.
            DeletionPendingError: the rows are deleted, but a reader kept their old bytes in the WAL
                past ``StoreConfig.scrub_wait_s``; call ``store.scrub()`` once it ends.
        """
        memory_id = self._check_id(memory_id, "memory_id")
        if cascade not in ("redact", "delete"):
            raise ValidationError(f"cascade must be 'redact' or 'delete', got {cascade!r}", field="cascade")
        if not isinstance(reason, str) or not reason.strip() or len(reason) > _REASON_MAX or "\n" in reason:
            raise ValidationError(f"reason must be one line of 1–{_REASON_MAX} characters", field="reason")
        if "\x00" in reason:  # otherwise the redaction step below would blame "content"
            raise ValidationError("reason must not contain NUL characters", field="reason")
        check_text(reason, "reason")
        if self._tenant.tier_of(memory_id) is None:
            raise self._not_found(memory_id)
        ids = self._tenant.versions(memory_id) if include_versions else [memory_id]
        plan = self._tenant.forget_plan(ids, cascade)
        reason = self._store.builder.draft(reason.strip(), {}).text  # a reason is stored: redact it too
        unlink(self._tenant, plan.deleted)
        self._tenant.forget(plan, reason=reason, scrub=scrub, wait_s=self._store.config.scrub_wait_s)
        self._live().working = None
        return ForgetReport(deleted=plan.deleted, redacted=plan.redacted)

    # ------------------------------------------------------------------ retention
    def retain(self, capacity: int | CapacityFn | None = None, *, budget_tokens: int | None = None,
               scorer: Scorer | None = None, rules: RuleSet | str | Path | dict[str, Any] | None = None,
               candidates: Sequence[str | MemIR | dict[str, Any]] = (), method: str | None = None,
               forgotten: Forgotten | None = None, on_infeasible: Literal["raise", "overflow"] | None = None,
               overflow_penalty: float | None = None, now: datetime | None = None, dry_run: bool = False,
               trigger: str = "explicit", context: ScoringContext | None = None) -> RetentionDecision:
        """Decide which working memories (and unsaved ``candidates``) to keep, and apply it.

        Every argument left at ``None`` comes from the scope's :class:`RetentionPolicy`.

        Args:
            capacity: max items kept (int), or a callable ``(records, utility) -> int``.
            budget_tokens: max total tokens kept (≈ 4 characters per token).
            scorer: a ``Scorer`` (default: the policy's, else the shipped ONNX utility model).
            rules: a ``RuleSet``, YAML path/text or dict (default: the policy's, else the defaults).
            candidates: unsaved items, written only if kept.
            method: ``auto`` | ``greedy`` | ``exact`` | ``cvxpy``.
            forgotten: ``archive`` (cold tier, recallable with ``tier="archive"``) or ``delete``.
            on_infeasible: ``raise`` (names the conflicting rules) or ``overflow``.
            overflow_penalty: makes the capacity soft.
            now: decision time (default: now, UTC).
            dry_run: decide and report exactly what would happen; change nothing.
            trigger: recorded with the decision (triggers set it themselves).
            context: a full :class:`ScoringContext` instead of the scope's own (advanced; tests).

        Must-forget items follow their rule (expired TTL and used secrets are deleted; a memory
        others derive from leaves a redacted placeholder; superseded versions are archived).

        Returns:
            The :class:`~runtime.retention.RetentionDecision` (typed; also stored for ``explain``).

        Example:
            >>> d = scope.retain(capacity=100)                       # doctest: +SKIP
            >>> scope.explain(d.kept[0]).summary                     # doctest: +SKIP
        """
        policy = self.policy.with_(capacity=capacity, budget_tokens=budget_tokens, scorer=scorer, rules=rules,
                                   method=method, forgotten=forgotten, on_infeasible=on_infeasible,
                                   overflow_penalty=overflow_penalty)
        scorer_ = policy.scorer or self._store.default_scorer()
        now = now or utcnow()
        recs, vecs, steps = self._tenant.with_vectors(MemoryFilter(tier="working", include_expired=True), now)
        prepared = [self._prepare(c, None, {}, track=False, where=f"candidate {i}: ") if not isinstance(c, dict)
                    else self._prepare(c.get("content"), c.get("embedding"),
                                       {k: v for k, v in c.items() if k not in ("content", "embedding")},
                                       track=False, where=f"candidate {i}: ")
                    for i, c in enumerate(candidates)]
        dim = self._store.embedder.dim
        all_recs = recs + [p.record for p in prepared]
        all_vecs = np.vstack([vecs.reshape(-1, dim)] + [p.vector[None, :] for p in prepared]) if prepared else vecs
        top = self._tenant.state().seq
        all_steps = np.concatenate([steps, np.arange(top + 1, top + 1 + len(prepared))]) if prepared else steps
        cand = np.array([False] * len(recs) + [True] * len(prepared), dtype=bool)
        if context is None:
            context = self._live_scoring_context(now, all_steps, all_recs, policy.recent_window)
        elif context.record_steps is None:
            context = scoring_context(now=context.now, steps=all_steps, recent=context.recent_embedding,
                                      goal=context.goal_embedding, stage=context.stage,
                                      session=self.session_context([r.id for r in all_recs]))
        plan = RetentionPlan(policy, scorer_)
        decision = plan.decide(all_recs, all_vecs, context, user_id=self.user_id, agent_id=self.agent_id,
                               trigger=trigger, candidate=cand)
        # the TTL holds in the archive too: archived memories past it leave with this decision
        decision = decision.model_copy(update={"expired": self._tenant.expired_ids(now, "archive")})
        if not dry_run:  # what it deletes leaves no link behind in the memories it corroborated
            doomed = [m for m, it in decision.items.items() if it.action == "delete" and not it.candidate]
            if doomed or decision.expired:
                unlink(self._tenant, doomed + decision.expired, {r.id: r for r in recs})
        applied = self._tenant.apply_decision(decision, candidates=[(p.record, p.vector) for p in prepared],
                                   dry_run=dry_run)
        if not dry_run:
            self._live().working = len(applied.kept)
        return applied

    def explain(self, memory_id: str) -> MemoryExplanation:
        """Why is this memory here, or why was it dropped, and when (every decision about it)."""
        memory_id = self._check_id(memory_id, "memory_id")
        return self._tenant.explain(memory_id)

    def decisions(self, limit: int = 20) -> builtins.list[RetentionDecision]:
        """This scope's retention decisions, most recently made first (without per-item details)."""
        return self._tenant.decisions(_check_limit(limit, allow_none=False))

    def decision(self, decision_id: str) -> RetentionDecision:
        """One decision of this scope, with every item (``NotFoundError`` otherwise)."""
        decision_id = self._check_id(decision_id, "decision_id")
        return self._tenant.decision(decision_id)

    def state_at(self, decision_id: str) -> RetentionDecision:
        """The decision, whose ``kept`` lists the working set right after it (ids only; for the
        memories themselves — content, tier, utility — see :meth:`memories_at`)."""
        decision_id = self._check_id(decision_id, "decision_id")
        return self.decision(decision_id)

    def memories_at(self, decision_id: str) -> MemoriesAt:
        """Time travel: every item decision ``decision_id`` saw, as it was — its content, the tier
        the decision put it in (kept → ``working``, ``archive``, ``deleted``...), the utility the
        decision computed, and what became of it since (``present``, ``redacted``, ``deleted``).
        A memory forgotten since comes back as a tombstone id with no content: never resurrected.

        Raises:
            NotFoundError: no decision ``decision_id`` in this scope.
        """
        d = self.decision(decision_id)
        stored: dict[str, tuple[MemIR, str]] = {}
        for mid in d.items:
            rec, tier = self._tenant.get(mid), self._tenant.tier_of(mid)
            if rec is not None and tier is not None:
                stored[mid] = (rec, tier)
        return memories_at(d, stored)

    def refresh(self, *, older_than_days: float = 30.0, weight: float = DEFAULT_REFRESH_WEIGHT,
                now: datetime | None = None, batch_size: int = 256, dry_run: bool = False) -> RefreshReport:
        """Semantic refresh (seed 001 pitfall 3): re-encode old memories with their session context.

        Each eligible memory's vector becomes normalize(embed(content) + weight·c), with c the unit
        mean of the content embeddings of every memory of its session (all tiers). Eligible: event
        time older than ``older_than_days``, in a session, not a redacted placeholder, and not
        already refreshed with this encoder and weight (a marker is kept beside the vector, so a
        re-run does nothing; ``memir reembed`` to a new encoder clears the effect and the marker's
        match). Contents are re-encoded by the store's encoder; records are not changed.
        All-or-nothing per batch of ``batch_size``; ``dry_run`` reports and writes nothing.
        See :mod:`runtime.store.refresh`.

        Memories whose vector was made by another encoder are left alone (``memir reembed`` first).

        Raises:
            ValidationError: a bad argument (named).
        """
        if isinstance(older_than_days, bool) or not isinstance(older_than_days, (int, float)) \
                or not 0 <= float(older_than_days) < 1e6:
            raise ValidationError(f"older_than_days must be a number of days >= 0, got {older_than_days!r}",
                                  field="older_than_days")
        w = check_weight(weight, "weight", upper=10.0)
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValidationError(f"batch_size must be a positive int, got {batch_size!r}", field="batch_size")
        now = now or utcnow()
        emb = self._store.embedder
        marker = refresh_marker(emb.encoder_id, w)
        old = [r for r in self._tenant.select(MemoryFilter(tier="any", include_expired=True,
                                                           until=now - timedelta(days=float(older_than_days))), now)
               if Flag.placeholder not in r.metadata.flags]
        in_session = [r for r in old if r.provenance.session_id is not None]
        marks = self._tenant.refresh_marks([r.id for r in in_session])
        todo = [r for r in in_session if marks.get(r.id) != marker]
        already = len(in_session) - len(todo)
        sessions = sorted({str(r.provenance.session_id) for r in todo})
        members: dict[str, np.ndarray] = {}
        own: dict[str, np.ndarray] = {}
        if todo and not dry_run:
            every = [r for r in self._tenant.select(MemoryFilter(tier="any", include_expired=True, sessions=sessions),
                                                    now) if Flag.placeholder not in r.metadata.flags]
            texts = [r.content for r in every]
            vecs = np.vstack([np.asarray(emb.encode(texts[i:i + batch_size]), dtype=np.float32)
                              for i in range(0, len(texts), batch_size)])
            own = {r.id: vecs[i] for i, r in enumerate(every)}
            rows: dict[str, builtins.list[int]] = {}
            for i, r in enumerate(every):
                rows.setdefault(str(r.provenance.session_id), []).append(i)
            members = {sid: vecs[rows[sid]] for sid in sessions if sid in rows}
            todo = [r for r in todo if r.id in own]  # placeholders made meanwhile are left alone
        done: builtins.list[str] = [r.id for r in todo] if dry_run else []
        if not dry_run:
            for i in range(0, len(todo), batch_size):
                chunk = todo[i:i + batch_size]
                new = refreshed_vectors(np.stack([own[r.id] for r in chunk]),
                                        [str(r.provenance.session_id) for r in chunk], members, w)
                done += self._tenant.put_refreshed([(r.id, v) for r, v in zip(chunk, new)], marker)
        return RefreshReport(refreshed=done, already=already, no_session=len(old) - len(in_session),
                             marker=marker, dry_run=dry_run)

    # ------------------------------------------------------------------ async
    # The same calls for async code (see :mod:`runtime.store.aio`): the blocking part of each runs on
    # the store's thread pool, never on the event loop, and the texts of concurrent writes and
    # recalls are embedded together, in one encoder call per turn of the loop.
    async def awrite(self, content: str | MemIR | Assembly, *, embedding: Any = None,
                     **fields: Unpack[WriteFields]) -> MemIR:
        """:meth:`write`, awaitable; concurrent calls share encoder calls. Same errors."""
        aio = self._store.aio
        if embedding is None and isinstance(content, str):
            embedding = await aio.batcher.encode(content, fields)
        return await aio.run(self._write_one, content, embedding, dict(fields), "archive")

    async def awrite_many(self, items: Iterable[str | MemIR | dict[str, Any]]) -> builtins.list[MemIR]:
        """:meth:`write_many` (all-or-nothing), awaitable."""
        return await self._store.aio.run(self.write_many, builtins.list(items))

    async def aupdate(self, memory_id: str, content: str, *, history: History = "archive", embedding: Any = None,
                      **fields: Unpack[WriteFields]) -> MemIR:
        """:meth:`update`, awaitable; concurrent calls share encoder calls. Same errors."""
        aio = self._store.aio
        if embedding is None and isinstance(content, str):
            embedding = await aio.batcher.encode(content, fields)
        return await aio.run(self.update, memory_id, content, history=history, embedding=embedding, **fields)

    async def arecall(self, query: str | np.ndarray, k: int = 5, *, context: RoleContext | None = None,
                      now: datetime | None = None, explain: bool = False, update_usage: bool = True,
                      candidates: int | None = None, session_mix: float | None = None,
                      dynamic_roles: bool | None = None, **filters: Unpack[FilterFields]) -> builtins.list[Hit]:
        """:meth:`recall`, awaitable; the queries of concurrent recalls share encoder calls."""
        aio = self._store.aio
        if isinstance(query, str) and query.strip() and not explain:  # an explained recall logs its text
            check_text(query, "query")  # as recall does, before the text joins a shared encoder call
            query = await aio.batcher.encode(query)
        return await aio.run(self.recall, query, k, context=context, now=now, explain=explain,
                             update_usage=update_usage, candidates=candidates, session_mix=session_mix,
                             dynamic_roles=dynamic_roles, **filters)

    async def aget(self, memory_id: str) -> MemIR:
        """:meth:`get`, awaitable."""
        return await self._store.aio.run(self.get, memory_id)

    async def alist(self, *, limit: int | None = None, now: datetime | None = None,
                    **filters: Unpack[FilterFields]) -> builtins.list[MemIR]:
        """:meth:`list`, awaitable."""
        return await self._store.aio.run(self.list, limit=limit, now=now, **filters)

    async def ahistory(self, memory_id: str) -> builtins.list[Version]:
        """:meth:`history`, awaitable."""
        return await self._store.aio.run(self.history, memory_id)

    async def aforget(self, memory_id: str, *, cascade: Literal["redact", "delete"] = "redact",
                      reason: str = "forgotten", scrub: bool = True, include_versions: bool = True) -> ForgetReport:
        """:meth:`forget`, awaitable (the WAL scrub waits on a pool thread, not on the loop)."""
        return await self._store.aio.run(self.forget, memory_id, cascade=cascade, reason=reason, scrub=scrub,
                                         include_versions=include_versions)

    async def aretain(self, capacity: int | CapacityFn | None = None, **kwargs: Any) -> RetentionDecision:
        """:meth:`retain` (same keyword arguments), awaitable: the solve runs on a pool thread."""
        return await self._store.aio.run(self.retain, capacity, **kwargs)

    async def aexplain(self, memory_id: str) -> MemoryExplanation:
        """:meth:`explain`, awaitable."""
        return await self._store.aio.run(self.explain, memory_id)

    async def aend_session(self, *, now: datetime | None = None) -> RetentionDecision | None:
        """:meth:`end_session`, awaitable."""
        return await self._store.aio.run(self.end_session, now=now)

    async def atag(self, ids: Sequence[str], tags: str | Sequence[str]) -> int:
        """:meth:`tag`, awaitable."""
        return await self._store.aio.run(self.tag, ids, tags)

    # ------------------------------------------------------------------ export
    def export_rows(self) -> builtins.list[tuple[MemIR, np.ndarray | None, str | None]]:
        """Every record of the scope (all tiers, expired included) with its stored vector and the id
        of the encoder that made it. Needs no encoder: nothing is re-embedded."""
        return self._tenant.export()

    def snapshot(self, path: str | Path) -> int:
        """Write the scope's whole state as JSONL (one MemIR per line, plus ``embedding`` and
        ``encoder_id`` keys), or as Parquet when ``path`` ends in ``.parquet`` — the dump formats
        ``memir score`` reads. Written to a temporary file and renamed. Returns the record count."""
        return dumps.write_dump(self.export_rows(), path)

    @staticmethod
    def _check_id(value: Any, name: str = "memory_id") -> str:
        """An id argument must look like an id before it reaches SQL (a typed error otherwise)."""
        if not isinstance(value, str) or not 0 < len(value) <= 128 or not re.match(ID_PATTERN, value):
            raise ValidationError(f"{name} must be an id (letters, digits and _ . : @ -, 1–128 characters), "
                                  f"got {str(value)[:40]!r}", field=name)
        return value

    def _not_found(self, memory_id: str) -> NotFoundError:
        return NotFoundError(f"no memory {memory_id!r} in scope user={self.user_id!r} agent={self.agent_id!r}")


def _check_limit(limit: Any, *, allow_none: bool = True) -> Any:
    if limit is None and allow_none:
        return None
    if isinstance(limit, bool) or not isinstance(limit, int) or not 0 <= limit <= 2**62:
        raise ValidationError(f"limit must be an int >= 0{' or None' if allow_none else ''}, got {limit!r}",
                              field="limit")
    return limit
