"""The MemIR assembler: role and session for a new memory, from the agent's context (seed 000 §3.1).

Writing a memory is an annotation step, not a string append. The record itself — field checks,
redaction of every free-text field, confidence per source type, urgency flags, validation — is
built by the one :class:`~runtime.record.RecordBuilder`; the assembler adds what depends on the
agent's context, looking only at the *redacted* text:

1. **Role and sub-role** (:mod:`.roles`): explicit arguments, else keyword rules, else the nearest
   role prototype by embedding, else the context's current role.
2. **Session** (:mod:`.sessions`): a new session after a time gap or a topic shift.
3. **derived_from** must name existing memories (the store's ``exists``).

``MemoryStore`` owns one assembler and ``Scope.write`` goes through it, so an agent writing to the
store gets roles and session boundaries without calling anything else; standalone,
:meth:`ContextAssembler.assemble_traced` returns an :class:`Assembly` that ``Scope.write`` accepts
as is (it is not redacted or validated a second time).

Example:
    >>> from runtime.encoders import HashEmbedder
    >>> roles = RoleConfig(rules={"billing": [r"\\binvoice"]}, parents={"billing": "support"})
    >>> asm = ContextAssembler(AssemblerConfig(roles=roles), embedder=HashEmbedder())
    >>> rec = asm.assemble("Send the invoice to bob@example.com ASAP", AgentContext(user_id="u1"))
    >>> rec.content, rec.role_context.active_role, rec.role_context.sub_role
    ('Send the invoice to [EMAIL] ASAP', 'support', 'billing')
    >>> rec.metadata.sensitivity.value, [f.value for f in rec.metadata.flags], rec.metadata.confidence
    ('pii', ['urgent'], 0.95)
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field
from pydantic import ValidationError as PydanticValidationError

from ..encoders.embedder import Embedder
from ..errors import ValidationError
from ..record.builder import Draft, RecordBuilder, RecordConfig
from ..record.memir import DialogRole, Id, Label, MemIR, SourceType, UTCDateTime, utcnow
from ..record.redaction import Finding
from .enrich import EnrichConfig, Enricher
from .role_classifier import RoleClassifier, RoleConfig, RoleDecision
from .sessions import SessionConfig, SessionDecision, SessionState, SessionTracker, as_unit_vector

if TYPE_CHECKING:
    from .extract import Candidate

__all__ = [
    "AgentContext",
    "AssemblerConfig",
    "Assembly",
    "ContextAssembler",
    "EnrichConfig",
    "ExistsFn",
    "RoleConfig",
    "RoleDecision",
    "SessionConfig",
    "SessionDecision",
    "SessionState",
]

ExistsFn = Callable[[Sequence[str]], Collection[str]]
"""``exists(ids) -> the subset of ids that exist``, scoped to the writing user (the store's)."""


class AgentContext(BaseModel):
    """The agent's current context, from which provenance and role context are filled.

    ``session_id``/``last_event_at``/``last_embedding`` describe the session the *caller* believes
    it is in. The assembler owns session boundaries: an id it has not seen for this scope is a
    declared switch (adopted, and seeded with ``last_event_at``/``last_embedding`` so detection
    survives a restart); an id it already knows is superseded by its own tracked state.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    user_id: Id
    agent_id: Id = "default"
    active_role: Label = "general"
    sub_role: Label | None = None
    task_id: Id | None = None
    tone: Label | None = None
    session_id: Id | None = None
    last_event_at: UTCDateTime | None = None
    last_embedding: tuple[float, ...] | None = Field(default=None, description="The session's context vector.")

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except PydanticValidationError as e:
            raise ValidationError.from_pydantic(e, what="AgentContext") from e


@dataclass(frozen=True)
class AssemblerConfig:
    """Everything :class:`ContextAssembler` decides by.

    Attributes:
        roles: role and sub-role classification (:class:`~runtime.annotate.role_classifier.RoleConfig`).
        session: session-boundary detection (:class:`~runtime.annotate.sessions.SessionConfig`).
        record: how records are built (redaction, confidence defaults, urgency, limits).
        enrich: write-time tone, intent, entity tags and corroboration (:mod:`.enrich`; all off by default).
    """

    roles: RoleConfig = field(default_factory=RoleConfig)
    session: SessionConfig = field(default_factory=SessionConfig)
    record: RecordConfig = field(default_factory=RecordConfig)
    enrich: EnrichConfig = field(default_factory=EnrichConfig)

    def __post_init__(self) -> None:
        p = [(name, f"must be a {cls.__name__}") for name, cls in
             (("roles", RoleConfig), ("session", SessionConfig), ("record", RecordConfig), ("enrich", EnrichConfig))
             if not isinstance(getattr(self, name), cls)]
        if p:
            raise ValidationError.from_problems("AssemblerConfig", p)


@dataclass(frozen=True)
class Assembly:
    """The assembled record plus every decision that shaped it (no raw sensitive values).

    Attributes:
        record: the validated, redacted :class:`MemIR`, ready for the store.
        role, session: how the role and the session were decided.
        findings: what redaction replaced (kind and count).
        confidence_source: ``declared`` by the caller or the source type's ``default``.
        embedding: unit-norm embedding of the redacted content, when one was given or computed.
    """

    record: MemIR
    role: RoleDecision
    session: SessionDecision
    findings: tuple[Finding, ...]
    confidence_source: Literal["declared", "default"]
    embedding: np.ndarray | None


class ContextAssembler:
    """Builds validated :class:`MemIR` records from content + the agent's context. Thread-safe.

    Args:
        config: the frozen :class:`AssemblerConfig`.
        embedder: needed for prototype roles and topic-shift detection (or pass ``embedding=``
            per call); without either, only rules and time gaps apply.
        builder: the record builder (default: one built from ``config.record``).
        exists: default ``derived_from`` checker; a per-call ``exists=`` overrides it. Either must
            be scoped to the writing user (e.g. ``store.scope(user_id=...).exists``).
        clock: the time source for ``created_at`` and default event times (tests pin it).

    Raises:
        ValidationError: role descriptions are configured but no embedder is given.
    """

    def __init__(self, config: AssemblerConfig | None = None, *, embedder: Embedder | None = None,
                 builder: RecordBuilder | None = None, exists: ExistsFn | None = None,
                 clock: Callable[[], datetime] = utcnow) -> None:
        self.config = config or AssemblerConfig()
        self.embedder = embedder
        self.builder = builder or RecordBuilder(self.config.record)
        self.roles = RoleClassifier(self.config.roles, embedder)
        self.sessions = SessionTracker(self.config.session)
        self.enricher = Enricher(self.config.enrich)
        if self.config.enrich.tone and self.config.enrich.tone_fn is None and embedder is None:
            raise ValidationError("EnrichConfig.tone classifies by embedding: pass embedder=... (see "
                                  "runtime.encoders), a tone_fn, or tone=False", field="embedder")
        self._exists, self._clock = exists, clock

    def session_state(self, user_id: str, agent_id: str = "default") -> SessionState | None:
        """The tracked session of a scope (None if untracked)."""
        return self.sessions.state(user_id, agent_id)

    def forget_user(self, user_id: str) -> int:
        """Drop a user's tracked session state (call with ``store.forget_user``)."""
        return self.sessions.forget_user(user_id)

    def assemble(self, content: str, ctx: AgentContext | Mapping[str, Any], **fields: Any) -> MemIR:
        """Build the record for ``content``; the arguments are those of :meth:`assemble_traced`."""
        return self.assemble_traced(content, ctx, **fields).record

    def assemble_candidate(self, candidate: Candidate, ctx: AgentContext | Mapping[str, Any], *,
                           source_type: SourceType | str = SourceType.derived_inference,
                           dialog_role: DialogRole | str = DialogRole.agent, **fields: Any) -> MemIR:
        """Build the record for an extracted :class:`~runtime.annotate.extract.Candidate`.

        An LLM-proposed memory defaults to ``derived_inference`` spoken by the ``agent``; the
        candidate's own fields apply unless ``fields`` overrides them.
        """
        data = candidate.model_dump(exclude={"content"}, exclude_defaults=True)
        return self.assemble(candidate.content, ctx, source_type=source_type, dialog_role=dialog_role,
                             **{**data, **fields})

    def assemble_traced(self, content: str, ctx: AgentContext | Mapping[str, Any], *, at: datetime | None = None,
                        embedding: np.ndarray | Sequence[float] | None = None, exists: ExistsFn | None = None,
                        record_id: str | None = None, **fields: Any) -> Assembly:
        """Redact, classify, place in a session and validate one new memory.

        Args:
            content: the raw text; only its redacted form goes any further.
            ctx: the agent's :class:`AgentContext` (or a dict of its fields).
            at: when the event happened (default: the clock; naive = UTC); drives session gaps.
            embedding: the *redacted* content's embedding, if the caller already has one.
            exists: checks ``derived_from`` ids (default: the constructor's).
            record_id: the record id (default: a fresh one).
            **fields: :class:`~runtime.record.WriteFields`; ``active_role``/``sub_role`` set the role
                explicitly (no classification); ``tone`` and ``task_id`` default to the context's,
                ``source_entity`` to the speaker.

        Raises:
            ValidationError: any invalid input, naming the field; no session state changes.
        """
        ctx = _coerce_ctx(ctx)
        if record_id is not None:
            fields["id"] = record_id
        draft = self.builder.draft(content, fields)
        self._check_parents(list(dict.fromkeys(draft.fields.get("derived_from") or ())), exists or self._exists)
        at = _utc(at) if at is not None else (draft.fields.get("timestamp") or self._clock())
        dim = self.embedder.dim if self.embedder is not None else None
        cache = [as_unit_vector(embedding, "embedding", dim) if embedding is not None else None]

        def embed() -> np.ndarray | None:  # the encoder only ever sees redacted text
            if cache[0] is None and self.embedder is not None:
                cache[0] = as_unit_vector(self.embedder.encode([draft.text])[0], "embedder output", dim)
            return cache[0]

        role = self.role_of(draft, ctx.active_role, ctx.sub_role, embed)
        extra = self.enrich(draft, embed)
        declared = draft.fields.get("tone") or ctx.tone
        if declared:  # a declared tone wins over the classified one
            extra["tone"] = declared
        scfg = self.config.session
        e = embed() if scfg.enabled and scfg.topic_shift_threshold is not None else cache[0]
        with self.sessions.lock:  # decide → validate → commit, atomically per assembler
            decision, pending = self.sessions.decide(
                ctx.user_id, ctx.agent_id, at, e, declared_id=ctx.session_id,
                declared_last_event_at=ctx.last_event_at, declared_context=ctx.last_embedding)
            record = self.builder.finish(
                draft, user_id=ctx.user_id, agent_id=ctx.agent_id, session_id=decision.session_id, timestamp=at,
                active_role=role.active_role, sub_role=role.sub_role,
                **extra, task_id=draft.fields.get("task_id") or ctx.task_id,
                created_at=draft.fields.get("created_at") or self._clock())
            self.sessions.commit(pending)  # only a valid record moves the session state
        return Assembly(record, role, decision, draft.findings, draft.confidence_source, e)

    def enrich(self, draft: Draft, embed: Callable[[], np.ndarray | None],
               embedder: Embedder | None = None) -> dict[str, Any]:
        """The fields write-time enrichment adds to a drafted memory (``{}`` when it is off): ``tone``
        (unless the draft has one), ``tags``, ``flags`` (urgent) and ``attributes["intent"]``, from its
        redacted text. A hook's output (``tone_fn``, ``entity_fn``) is redacted like the caller's fields."""
        cfg = self.config.enrich
        if not cfg.any:
            return {}
        out = self.enricher.enrich(draft.text, embed, embedder or self.embedder).fields(draft.fields)
        hooked: dict[str, Any] = {k: out[k] for k in ("tone", "tags") if k in out and (cfg.tone_fn or cfg.entity_fn)}
        if hooked:
            out.update({k: v for k, v in self.builder.draft(draft.text, hooked, defaults=False).fields.items()
                        if k in hooked})
        return out

    def role_of(self, draft: Draft, current_role: str, current_sub_role: str | None,
                embed: Callable[[], np.ndarray | None]) -> RoleDecision:
        """The role of a drafted memory: explicit fields, else classification of its redacted text."""
        active, sub = draft.fields.get("active_role"), draft.fields.get("sub_role")
        if active is not None or sub is not None:
            return self.roles.explicit(active, sub, current_role)
        return self.roles.classify(draft.text, current_role, current_sub_role, embed)

    def _check_parents(self, parents: list[str], exists: ExistsFn | None) -> None:
        if not parents:
            return
        if exists is None:
            raise ValidationError("derived_from cannot be checked: pass exists=scope.exists (scoped to this "
                                  "user) to the assembler or to the call", field="provenance.derived_from")
        found = set(exists(parents))
        missing = [i for i in parents if i not in found]
        if missing:
            raise ValidationError(f"derived_from names memories that do not exist in this scope: {missing}; "
                                  "write the parents first or drop them", field="provenance.derived_from",
                                  problems=[("provenance.derived_from", f"missing: {missing}")])


def _coerce_ctx(ctx: AgentContext | Mapping[str, Any]) -> AgentContext:
    if isinstance(ctx, AgentContext):
        return ctx
    if isinstance(ctx, Mapping):
        return AgentContext(**ctx)
    raise ValidationError(f"ctx must be an AgentContext or a dict, got {type(ctx).__name__}", field="ctx")


def _utc(v: datetime) -> datetime:
    try:
        return v.replace(tzinfo=UTC) if v.tzinfo is None else v.astimezone(UTC)
    except OverflowError:  # e.g. 0001-01-01T00:00+01:00
        raise ValidationError(f"at={v.isoformat()} is outside the range of dates once converted to UTC",
                              field="at") from None
