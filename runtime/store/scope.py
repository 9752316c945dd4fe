"""A user's view of the store: every read and write confined to one ``(user_id, agent_id)``.

The scope is a thin, typed facade: it checks the arguments a user gives and hands the work to the
room that owns it, each of which walks *down* once and comes back with a value —

- the write pipeline (:mod:`.prepare`, :mod:`.writing`): draft and redact, embed, place in a
  session, annotate, build, corroborate, insert, supersede, triggers;
- session closing (:mod:`.session_close`): session features, summaries, the ``on_session_end`` trigger;
- recall (:mod:`.recalling`), retention (:mod:`.retaining`, over :mod:`runtime.retention`),
  forgetting (:mod:`.forgetting`), refresh (:mod:`.refresh`), time travel (:mod:`.time_travel`);
- the tenant's SQL (:mod:`runtime.store.sqlite`, :mod:`runtime.store.postgres`) under all of them.

What an agent gets without calling anything else: sessions (an explicit ``session_id`` is
authoritative, otherwise the detector splits on time gaps and topic shifts), the live context
(recent-context vector, the goal and stage of :meth:`Scope.task`), the policy's triggers, and
corrections (:meth:`Scope.update`: the newer version wins; :meth:`Scope.history` lists the chain).
Every blocking call has an awaitable twin (``awrite``, ``arecall``...; :func:`.aio.async_twin`).

Example:
    >>> alice = store.scope(user_id="alice")                      # doctest: +SKIP
    >>> rec = alice.write("Budget for project Orion is 40k EUR", tags=["orion"], sub_role="pm")
    >>> alice.update(rec.id, "Budget for project Orion is now 55k EUR")
    >>> hits = alice.recall("what is Orion's budget?", k=3, sub_roles=["pm"])
    >>> print(format_context(hits))
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Unpack

import numpy as np

from ..annotate.assembler import Assembly
from ..errors import ValidationError
from ..record.fields import WriteFields
from ..record.memir import MemIR, RoleContext, utcnow
from ..retention.policy import CapacityFn, Forgotten, RetentionPolicy
from . import dumps, forgetting, outcomes, tagging
from .aio import AsyncRunner, async_twin, encode_query, encode_write_text, read_items
from .backend import TenantBackend
from .filters import FilterFields, build_filter
from .forgetting import ForgetReport
from .ranking import Hit, RankWeights
from .refresh import DEFAULT_REFRESH_WEIGHT, RefreshReport, refresh_scope
from .scope_core import ScopeCore, check_id, check_limit
from .services import StoreServices

if TYPE_CHECKING:
    from utilitynet.context import ScoringContext

    from ..annotate.extract import Candidate
    from ..experiments.events import Feedback
    from ..retention.decision import MemoryExplanation, RetentionDecision
    from ..retention.rules import RuleSet
    from ..scoring.role_weights import RoleWeigher
    from ..scoring.scorer import Scorer
    from .time_travel import MemoriesAt
    from .writing import History

__all__ = ["ForgetReport", "Scope", "Version"]

# The walks (writing, recalling, retaining, session_close) are imported in the methods that take them,
# so opening a store and a scope does not load the model, the rules and the solver.


@dataclass(frozen=True)
class Version:
    """One version in a correction chain (:meth:`Scope.history`), oldest first.

    Attributes:
        record: the memory. tier: ``working`` or ``archive``. current: the newest version of the chain.
    """

    record: MemIR
    tier: str
    current: bool


class Scope:
    """Reads and writes for one ``(user_id, agent_id)``. Get one from ``MemoryStore.scope``."""

    def __init__(self, store: StoreServices, tenant: TenantBackend, policy: RetentionPolicy) -> None:
        arms, policy, recall_defaults = outcomes.arm_settings(store.config.experiments, tenant.user_id, policy)
        self._core = ScopeCore(store, tenant, policy, RankWeights(freshness=store.config.freshness), arms=arms,
                               recall_defaults=recall_defaults)
        self.user_id = tenant.user_id
        self.agent_id = tenant.agent_id

    def __repr__(self) -> str:
        return f"Scope(user_id={self.user_id!r}, agent_id={self.agent_id!r})"

    # ------------------------------------------------------------------ settings and live context
    @property
    def policy(self) -> RetentionPolicy:
        """The scope's retention policy (capacity, rules, triggers...)."""
        return self._core.policy

    @policy.setter
    def policy(self, policy: RetentionPolicy) -> None:
        self._core.policy = policy

    @property
    def weights(self) -> RankWeights:
        """The recall re-ranking weights."""
        return self._core.weights

    @weights.setter
    def weights(self, weights: RankWeights) -> None:
        self._core.weights = weights

    @property
    def role_weigher(self) -> RoleWeigher | None:
        """The dynamic role-weight model (``None``: the shipped one)."""
        return self._core.role_weigher

    @role_weigher.setter
    def role_weigher(self, weigher: RoleWeigher | None) -> None:
        self._core.role_weigher = weigher

    def set_policy(self, policy: RetentionPolicy) -> None:
        """Replace this scope object's retention policy (capacity, rules, triggers...)."""
        if not isinstance(policy, RetentionPolicy):
            raise ValidationError("policy must be a RetentionPolicy(...)", field="policy")
        self._core.policy = policy

    def set_task(self, goal: str | None = None, *, stage: float | None = None) -> None:
        """Tell the scope what the agent is working on: the goal text (redacted, then embedded) and
        the task stage in [0, 1]. Retention decisions score with both. ``None`` clears a field."""
        self._core.set_task(goal, stage)

    @contextmanager
    def task(self, goal: str | None = None, *, stage: float | None = None) -> Iterator[Scope]:
        """``with scope.task(goal="Plan the Oslo trip"):`` — the goal and stage hold inside the block.

        Example:
            >>> with scope.task(goal="Book the team offsite in Lisbon", stage=0.2):  # doctest: +SKIP
            ...     scope.write("Venue must hold 40 people")
        """
        live = self._core.live()
        with live.lock:
            before = (live.goal, live.goal_vector, live.stage)
        self.set_task(goal, stage=stage)
        try:
            yield self
        finally:
            with live.lock:
                live.goal, live.goal_vector, live.stage = before

    @contextmanager
    def acting_as(self, active_role: str = "general", sub_role: str | None = None, *, task_id: str | None = None,
                  required_tone: str | None = None) -> Iterator[Scope]:
        """``with scope.acting_as("support", "billing", required_tone="calm"):`` — the role the agent
        acts in holds inside the block (seed 000 §3.1, §4.4).

        Writes take the role and sub-role unless they name their own (with role rules or prototypes
        configured, a memory that matches none keeps this role instead of ``general``), the
        ``task_id``, and ``attributes["required_tone"]``: the tone the agent must adopt. Recalls
        without a ``context`` re-rank by this role, as with ``context=RoleContext(...)``.

        Raises:
            ValidationError: a label that is not one (1–128 characters) or a bad task id.
        """
        from .acting import acting_as
        from .live import ActingAs

        with acting_as(self._core, ActingAs(active_role, sub_role, task_id, required_tone)):
            yield self

    # ------------------------------------------------------------------ write side
    def write(self, content: str | MemIR | Assembly, *, embedding: Any = None, **fields: Unpack[WriteFields]) -> MemIR:
        """Validate, redact, embed and store one memory; returns the stored record.

        A session change closes the previous session first (its session context is computed and
        an ``on_session_end`` trigger runs); afterwards the scope's triggers may run retention.

        Args:
            content: the memory text, a ready ``MemIR`` (its tenant fields must match this scope;
                it is revalidated and redacted), or an ``Assembly`` from a ``ContextAssembler``.
            embedding: a precomputed vector of the (redacted) content from the store's encoder.
            **fields: :class:`~runtime.record.WriteFields` — typed, flat fields (``source_type``,
                ``session_id``, ``sub_role``, ``confidence``, ``expires_at``, ``tags``, ``supersedes``…).

        Raises:
            ValidationError / ContentTooLargeError / VectorError: naming the field; nothing is written.
        """
        from . import writing
        return writing.write_one(self._core, content, embedding, dict(fields), "archive")

    def write_many(self, items: Iterable[str | MemIR | dict[str, Any]]) -> builtins.list[MemIR]:
        """Write a batch all-or-nothing: every item is validated and embedded first, then one
        transaction inserts them all. Any invalid item raises (naming its index) and nothing is
        written. Sessions the batch closes are annotated after it is written; triggers run once."""
        from . import writing
        return writing.write_many(self._core, items)

    def update(self, memory_id: str, content: str, *, history: History = "archive", embedding: Any = None,
               **fields: Unpack[WriteFields]) -> MemIR:
        """Correct a memory: write the new version, which wins over the old one from now on.

        The new version inherits the old one's roles, task, tags, source type, speaker and flags
        unless given. ``history``: ``archive`` (default) moves the old version to the archive tier
        (reason ``superseded_by:<new id>``); ``keep`` leaves it in working memory, flagged superseded;
        ``delete`` forgets it. :meth:`history` lists the chain and :meth:`forget` removes all of it.

        Raises:
            NotFoundError: no memory ``memory_id`` in this scope.
        """
        from . import writing

        memory_id = check_id(memory_id)
        writing.check_history(history)
        return writing.update(self._core, self.get(memory_id), content, embedding, dict(fields), history)

    def history(self, memory_id: str) -> builtins.list[Version]:
        """Every version of the fact ``memory_id`` belongs to, oldest first (see :meth:`update`).

        Raises:
            NotFoundError: no memory ``memory_id`` in this scope.
        """
        tenant = self._core.tenant
        if tenant.tier_of(check_id(memory_id)) is None:
            raise self._core.not_found(memory_id)
        ids = tenant.versions(memory_id)
        found = [(tenant.get(m), tenant.tier_of(m), i == len(ids) - 1) for i, m in enumerate(ids)]
        return [Version(r, t, cur) for r, t, cur in found if r is not None and t is not None]

    def event(self, name: str, *, now: datetime | None = None) -> RetentionDecision | None:
        """Tell the scope something happened (``"task_phase_change"``, ``"new_instruction"``...).
        Returns the decision if the policy's triggers list the event, else ``None``."""
        if not isinstance(name, str) or not name.strip():
            raise ValidationError("event name must be a non-empty string", field="name")
        if name in self.policy.triggers.events:
            from . import retaining
            return retaining.auto_retain(self._core, f"event:{name}", now or utcnow())
        return None

    def end_session(self, *, now: datetime | None = None) -> RetentionDecision | None:
        """Close the open session: store its session context, and run retention if the policy
        triggers on session end (returns that decision). The next write opens a new session."""
        from . import session_close
        return session_close.end_session(self._core, now)

    def annotate_session(self, session_id: str, *, now: datetime | None = None) -> int:
        """Compute and store the session-context features of every record of one session (all
        tiers, write order); returns how many were annotated. Called when a session closes; call it
        yourself after importing a session in bulk. The records themselves are not changed."""
        from . import session_close
        return session_close.annotate_session(self._core, check_id(session_id, "session_id"), now)

    def summarize_session(self, session_id: str, *, now: datetime | None = None) -> MemIR | None:
        """Summarise one session now (closing a session does it when ``policy.summaries.enabled``):
        returns the summary written, or ``None`` (fewer than ``min_turns`` working turns, or no text).

        The session's turns are scored as a retention decision would score them, and
        :func:`~runtime.annotate.summary.extract_summary` (or the policy's ``summarizer`` hook, fed
        the ``max_turns`` highest-utility turns) makes the text. It is written like any memory, as a
        ``derived_inference`` tagged ``summary``, ``derived_from`` = the turns used. With
        ``demote_sources`` those turns (except must-keep ones) are archived by a logged decision
        (trigger ``summary:<session>``), so :meth:`explain` says why.
        """
        from . import session_close
        return session_close.summarize_session(self._core, check_id(session_id, "session_id"), now)

    def session_context(self, ids: Sequence[str]) -> np.ndarray:
        """The stored session-context features of ``ids`` (row-aligned; NaN rows: session still open)."""
        return self._core.session_context(ids)

    def exists(self, ids: Sequence[str]) -> set[str]:
        """The subset of ``ids`` that are memories of this scope (for ``derived_from`` checks)."""
        return self._core.tenant.existing_ids(builtins.list(ids))

    def tag(self, ids: Sequence[str], tags: str | Sequence[str]) -> int:
        """Add ``tags`` to existing memories of this scope, retroactively (e.g. a type named after
        :func:`runtime.store.discovery.discover_types`); only their tags change, in one transaction.

        Tags are checked as by :meth:`check_tags`. Every id must be a memory of this scope (an
        unknown id, or another user's, raises ``NotFoundError`` and nothing changes). Returns how
        many memories gained a tag.
        """
        return tagging.tag(self._core, ids, tags)

    @staticmethod
    def check_tags(tags: str | Sequence[str]) -> builtins.list[str]:
        """The tags :meth:`tag` would add: checked like tag filters (letters, digits, spaces and
        ``_ . : @ / + # & -``, at most 128 characters) and refused if they look like PII or a secret
        (tags are stored as given). Raises ``ValidationError`` / ``FilterError`` naming the tag."""
        return tagging.check_tags(tags)

    # ------------------------------------------------------------------ read side
    def get(self, memory_id: str) -> MemIR:
        """The record with this id in this scope; ``NotFoundError`` otherwise (also for other users' ids)."""
        rec = self._core.tenant.get(check_id(memory_id))
        if rec is None:
            raise self._core.not_found(memory_id)
        return rec

    def parents(self, memory_id: str) -> builtins.list[MemIR]:
        """The memories ``memory_id`` was derived from (its ``derived_from``) that are still in this
        scope, oldest first (:mod:`runtime.store.lineage`).

        Raises:
            NotFoundError: no memory ``memory_id`` in this scope.
        """
        from . import lineage
        return lineage.parents(self._core, memory_id)

    def children(self, memory_id: str) -> builtins.list[MemIR]:
        """The memories derived from ``memory_id`` (their ``derived_from`` names it), oldest first:
        what it led to. Forgetting with ``cascade`` acts on these and their own descendants.

        Raises:
            NotFoundError: no memory ``memory_id`` in this scope, and none derived from it.
        """
        return self.descendants(memory_id, depth=1)

    def descendants(self, memory_id: str, *, depth: int | None = None) -> builtins.list[MemIR]:
        """Everything derived from ``memory_id``, directly or through other memories, generation by
        generation (children, then grandchildren...; oldest first within one), up to ``depth``
        generations (``None``: all). A memory derived along two paths appears once, at the nearer.

        Raises:
            NotFoundError: no memory ``memory_id`` in this scope, and none derived from it (a memory
                forgotten since still lists what was derived from it and kept).
            ValidationError: ``depth`` is not a positive integer.
        """
        from . import lineage
        return lineage.descendants(self._core, memory_id, depth)

    def list(self, *, limit: int | None = None, now: datetime | None = None,
             **filters: Unpack[FilterFields]) -> builtins.list[MemIR]:
        """Records passing the typed filters (see :class:`~runtime.store.filters.MemoryFilter`), oldest first."""
        return self._core.tenant.select(build_filter(**filters), now or utcnow(), check_limit(limit))

    def count(self, *, now: datetime | None = None, **filters: Unpack[FilterFields]) -> int:
        """How many records pass the typed filters."""
        return self._core.tenant.count(build_filter(**filters), now or utcnow())

    def list_with_vectors(self, *, now: datetime | None = None, **filters: Unpack[FilterFields]
                          ) -> tuple[builtins.list[MemIR], np.ndarray, np.ndarray]:
        """(records, unit vectors, write steps) for the filtered rows, in write order."""
        return self._core.tenant.with_vectors(build_filter(**filters), now or utcnow())

    def recall(self, query: str | np.ndarray, k: int = 5, *, context: RoleContext | None = None,
               now: datetime | None = None, explain: bool = False, update_usage: bool = True,
               candidates: int | None = None, session_mix: float | None = None,
               dynamic_roles: bool | None = None, **filters: Unpack[FilterFields]) -> builtins.list[Hit]:
        """Typed filter → exact vector top-K over the rows that pass → re-rank → the hits re-checked
        in SQL (:mod:`runtime.store.recalling`).

        Args:
            query: text (embedded with the store's encoder) or a query vector.
            k: hits to return.
            context: the caller's current role, for the role-match bonus.
            now: decision time for freshness/expiry (default: now, UTC).
            explain: log query (redacted), filters, raw top-K and final list (``scope.recall_log()``).
            update_usage: bump ``access_count``/``last_accessed_at`` of the returned hits.
            candidates: raw top-K before re-ranking (default ``StoreConfig.candidate_pool``).
            session_mix: weight ``w`` in [0, 1) of the scope's recent-context vector ``s`` in the
                query: the search runs with normalize((1-w)·q + w·s) (default
                ``StoreConfig.recall_session_mix``, 0 = off).
            dynamic_roles: weigh roles by the live context (default ``StoreConfig.dynamic_roles``):
                the role-weight model (``scope.role_weigher``) maps the unit mean of the query and the
                recent context to weights over sub-roles; ``hit.score.role_weight`` shows each.
            **filters: :class:`~runtime.store.filters.FilterFields` — ``roles``, ``sub_roles``,
                ``source_types``, ``sessions``, ``since``, ``until``, ``min_confidence``,
                ``sensitivity``, ``tags``, ``task_ids``, ``dialog_roles``, ``tier``... Without
                ``sensitivity``, secrets are excluded; name the level to include them.

        Returns:
            Hits sorted by total score, each with ``.record`` and ``.score`` (the breakdown).
        """
        from . import recalling
        return recalling.recall(self._core, query, k, context=context, now=now, explain=explain,
                                update_usage=update_usage, candidates=candidates, session_mix=session_mix,
                                dynamic_roles=dynamic_roles, filters=dict(filters))

    def recall_log(self, limit: int = 20) -> builtins.list[dict[str, Any]]:
        """The scope's most recent ``explain=True`` recalls, newest first."""
        return self._core.tenant.recall_log(check_limit(limit, allow_none=False))

    # ------------------------------------------------------------------ experiments and outcomes
    @property
    def arms(self) -> dict[str, str]:
        """Experiment → this user's arm (``StoreConfig.experiments``; deterministic and sticky)."""
        return dict(self._core.arms)

    def feedback(self, kind: str, value: float | bool | None = None, *, memory_id: str | None = None,
                 task_id: str | None = None, session_id: str | None = None, now: datetime | None = None) -> Feedback:
        """Record one business outcome for the store's experiments (:mod:`runtime.store.outcomes`).

        Args:
            kind: ``resolved`` (``value`` True/False, default True), ``satisfaction`` (``value`` in
                [0, 1]), ``useful`` or ``wrong`` (a recalled memory helped or misled: ``memory_id``).
            memory_id: the memory a ``useful``/``wrong`` event is about (a memory of this scope).
            task_id: the task the outcome belongs to (optional).
            session_id: the session it belongs to (optional).
            now: when it happened (default: now, UTC).

        Returns:
            The stored :class:`~runtime.experiments.Feedback`, with this user's arms.

        Raises:
            ValidationError: a bad kind, value or id (the field is named).
            NotFoundError: ``memory_id`` is not in this scope.
        """
        return outcomes.record(self._core, kind, value, memory_id=memory_id, task_id=task_id, session_id=session_id,
                               now=now, arms=self._core.arms)

    def feedback_log(self, limit: int = 100) -> builtins.list[Feedback]:
        """The scope's latest outcome events, newest first."""
        return self._core.tenant.feedback(check_limit(limit, allow_none=False))

    # ------------------------------------------------------------------ forgetting
    def forget(self, memory_id: str, *, cascade: Literal["redact", "delete"] = "redact", reason: str = "forgotten",
               scrub: bool = True, include_versions: bool = True) -> ForgetReport:
        """Forget a memory and every version of it (its correction chain).

        ``cascade="redact"``: a memory others were derived from becomes a redacted placeholder
        (content, tags, attributes and vector gone; provenance kept) so their chain still explains
        itself; otherwise it is deleted. ``cascade="delete"``: it and everything derived from it
        (transitively) are deleted. With ``scrub`` the WAL is checkpointed and truncated so the old
        content leaves it too; it never reports success while the bytes remain.

        Raises:
            NotFoundError: no memory ``memory_id`` in this scope.
            ValidationError: an unknown cascade, or a reason that is blank or over 100 characters.
            DeletionPendingError: the rows are deleted, but a reader kept their old bytes in the WAL
                past ``StoreConfig.scrub_wait_s``; call ``store.scrub()`` once it ends.
        """
        return forgetting.forget(self._core, check_id(memory_id), cascade=cascade, reason=reason, scrub=scrub,
                                  include_versions=include_versions)

    # ------------------------------------------------------------------ retention
    def retain(self, capacity: int | CapacityFn | None = None, *, budget_tokens: int | None = None,
               scorer: Scorer | None = None, rules: RuleSet | str | Path | dict[str, Any] | None = None,
               candidates: Sequence[str | MemIR | dict[str, Any] | Candidate] = (), method: str | None = None,
               forgotten: Forgotten | None = None, on_infeasible: Literal["raise", "overflow"] | None = None,
               overflow_penalty: float | None = None, now: datetime | None = None, dry_run: bool = False,
               trigger: str = "explicit", context: ScoringContext | None = None) -> RetentionDecision:
        """Decide which working memories (and unsaved ``candidates``) to keep, and apply it
        (:mod:`runtime.store.retaining`). Every argument left at ``None`` comes from the policy.

        Args:
            capacity: max items kept (int), or a callable ``(records, utility) -> int``.
            budget_tokens: max total tokens kept (≈ 4 characters per token).
            scorer: a ``Scorer`` (default: the policy's, else the shipped ONNX utility model).
            rules: a ``RuleSet``, YAML path/text or dict (default: the policy's, else the defaults).
            candidates: unsaved items, written only if kept: content, a ``MemIR``, a dict of write
                fields, or a :class:`~runtime.annotate.extract.Candidate` from ``extract_candidates``
                (stored as ``derived_inference`` by the agent — ``dialog_role="agent"``, its
                ``source_entity`` the agent id — with the ``derived_from`` parents it names).
            method: ``auto`` | ``greedy`` | ``exact`` | ``cvxpy``.
            forgotten: ``archive`` (cold tier, recallable with ``tier="archive"``) or ``delete``.
            on_infeasible: ``raise`` (names the conflicting rules) or ``overflow``.
            overflow_penalty: makes the capacity soft.
            now: decision time (default: now, UTC).
            dry_run: decide and report exactly what would happen; change nothing.
            trigger: recorded with the decision (triggers set it themselves).
            context: a full :class:`ScoringContext` instead of the scope's own (advanced; tests).

        Returns:
            The :class:`~runtime.retention.RetentionDecision` (typed; also stored for ``explain``).

        Example:
            >>> d = scope.retain(capacity=100)                       # doctest: +SKIP
            >>> scope.explain(d.kept[0]).summary                     # doctest: +SKIP
        """
        from . import retaining
        return retaining.retain(self._core, candidates=candidates, now=now, dry_run=dry_run, trigger=trigger,
                                context=context, capacity=capacity, budget_tokens=budget_tokens, scorer=scorer,
                                rules=rules, method=method, forgotten=forgotten, on_infeasible=on_infeasible,
                                overflow_penalty=overflow_penalty)

    def explain(self, memory_id: str) -> MemoryExplanation:
        """Why is this memory here, or why was it dropped, and when (every decision about it)."""
        return self._core.tenant.explain(check_id(memory_id))

    def decisions(self, limit: int = 20) -> builtins.list[RetentionDecision]:
        """This scope's retention decisions, most recently made first (without per-item details)."""
        return self._core.tenant.decisions(check_limit(limit, allow_none=False))

    def decision(self, decision_id: str) -> RetentionDecision:
        """One decision of this scope, with every item (``NotFoundError`` otherwise)."""
        return self._core.tenant.decision(check_id(decision_id, "decision_id"))

    def state_at(self, decision_id: str) -> RetentionDecision:
        """The decision, whose ``kept`` lists the working set right after it (ids only; for the
        memories themselves — content, tier, utility — see :meth:`memories_at`)."""
        return self.decision(decision_id)

    def memories_at(self, decision_id: str) -> MemoriesAt:
        """Time travel: every item decision ``decision_id`` saw, as it was — its content, the tier
        the decision put it in, the utility it computed, and what became of it since (``present``,
        ``redacted``, ``deleted``). A memory forgotten since comes back as a tombstone id with no
        content: never resurrected.

        Raises:
            NotFoundError: no decision ``decision_id`` in this scope.
        """
        from .time_travel import stored_memories_at

        return stored_memories_at(self._core.tenant, self.decision(decision_id))

    def refresh(self, *, older_than_days: float = 30.0, weight: float = DEFAULT_REFRESH_WEIGHT,
                now: datetime | None = None, batch_size: int = 256, dry_run: bool = False) -> RefreshReport:
        """Semantic refresh (seed 001 pitfall 3): re-encode old memories with their session context.

        Each eligible memory's vector becomes normalize(embed(content) + weight·c), with c the unit
        mean of the content embeddings of every memory of its session (all tiers). Eligible: event
        time older than ``older_than_days``, in a session, not a redacted placeholder, and not
        already refreshed with this encoder and weight (a re-run does nothing). Memories whose
        vector another encoder made are left alone (``memir reembed`` first). All-or-nothing per
        batch of ``batch_size``; ``dry_run`` reports and writes nothing. See :mod:`runtime.store.refresh`.
        """
        return refresh_scope(self._core, older_than_days=older_than_days, weight=weight, now=now,
                             batch_size=batch_size, dry_run=dry_run)

    # ------------------------------------------------------------------ export
    def export_rows(self) -> builtins.list[tuple[MemIR, np.ndarray | None, str | None]]:
        """Every record of the scope (all tiers, expired included) with its stored vector and the id
        of the encoder that made it. Needs no encoder: nothing is re-embedded."""
        return self._core.tenant.export()

    def snapshot(self, path: str | Path) -> int:
        """Write the scope's whole state as JSONL (one MemIR per line, plus ``embedding`` and
        ``encoder_id`` keys), or as Parquet when ``path`` ends in ``.parquet`` — the dump formats
        ``memir score`` reads. Written to a temporary file and renamed. Returns the record count."""
        return dumps.write_dump(self.export_rows(), path)

    # ------------------------------------------------------------------ async twins
    # The blocking part of each runs on the store's thread pool, never on the event loop; the texts of
    # concurrent writes and recalls are embedded together, one encoder call per turn of the loop.
    def _aio(self) -> AsyncRunner:
        return self._core.store.aio

    awrite = async_twin(write, _aio, before=encode_write_text(0), note="; concurrent calls share encoder calls")
    awrite_many = async_twin(write_many, _aio, before=read_items)
    aupdate = async_twin(update, _aio, before=encode_write_text(1), note="; concurrent calls share encoder calls")
    arecall = async_twin(recall, _aio, before=encode_query, note="; concurrent recalls share encoder calls")
    afeedback = async_twin(feedback, _aio)
    aget = async_twin(get, _aio)
    alist = async_twin(list, _aio)
    ahistory = async_twin(history, _aio)
    aparents = async_twin(parents, _aio)
    achildren = async_twin(children, _aio)
    adescendants = async_twin(descendants, _aio)
    aforget = async_twin(forget, _aio, note=" (the WAL scrub waits on a pool thread, not on the loop)")
    aretain = async_twin(retain, _aio, note=": the solve runs on a pool thread")
    aexplain = async_twin(explain, _aio)
    aend_session = async_twin(end_session, _aio)
    atag = async_twin(tag, _aio)

