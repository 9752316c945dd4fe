"""The MemIR assembler: typed fields for a new memory from the agent's context (seed 000 §3.1).

Writing a memory is an annotation step, not a string append. :class:`ContextAssembler` takes the
agent's current :class:`AgentContext` and a new piece of content and returns a complete
:class:`runtime.memir.MemIR` for the store to write:

1. **Redaction first** (:mod:`runtime.redact`): the content becomes its redacted text and
   ``sensitivity`` = max(declared, found). Everything after this step — rules, the encoder, the
   record, the trace — only ever sees the redacted text.
2. **Role and sub-role** (:mod:`runtime.roles`): explicit arguments, else keyword rules, else the
   nearest role prototype by embedding, else the context's current role.
3. **Session** (:mod:`runtime.sessions`): a new session after a time gap or a topic shift.
4. **Confidence** defaults per source type (:data:`DEFAULT_CONFIDENCE`); **urgency** markers set
   ``Flag.urgent``; **derived_from** must name existing memories (the store's ``exists``).

Why a ``MemIR`` rather than a dict of fields: the record is validated here, at the boundary, so
a bad field fails before any session state changes, and the store writes exactly what was checked.
:meth:`ContextAssembler.assemble_traced` also returns every decision (role method, session reason,
redaction findings — never raw values) and the embedding of the redacted text, so the store need
not encode it again.

Example:
    >>> from runtime.embed import HashEmbedder
    >>> roles = RoleConfig(rules={"billing": [r"\\binvoice"]}, parents={"billing": "support"})
    >>> asm = ContextAssembler(AssemblerConfig(roles=roles), embedder=HashEmbedder())
    >>> rec = asm.assemble("Send the invoice to bob@example.com ASAP", AgentContext(user_id="u1"))
    >>> rec.content, rec.role_context.active_role, rec.role_context.sub_role
    ('Send the invoice to [EMAIL] ASAP', 'support', 'billing')
    >>> rec.metadata.sensitivity.value, [f.value for f in rec.metadata.flags], rec.metadata.confidence
    ('pii', ['urgent'], 0.95)
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from types import MappingProxyType
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field
from pydantic import ValidationError as PydanticValidationError

from .embed import Embedder
from .errors import ValidationError
from .extract import Candidate
from .memir import DialogRole, Flag, Id, Label, MemIR, Sensitivity, SourceType, UTCDateTime, new_id, utcnow
from .redact import Finding, RedactionKind, Redactor, max_sensitivity
from .roles import RoleClassifier, RoleConfig, RoleDecision
from .sessions import SessionConfig, SessionDecision, SessionState, SessionTracker, as_unit_vector

__all__ = [
    "DEFAULT_CONFIDENCE",
    "DEFAULT_URGENCY_PATTERNS",
    "AgentContext",
    "AssemblerConfig",
    "Assembly",
    "ContextAssembler",
    "ExistsFn",
    # re-exported so the write side is one import
    "RoleConfig",
    "RoleDecision",
    "SessionConfig",
    "SessionDecision",
    "SessionState",
]

ExistsFn = Callable[[Sequence[str]], Collection[str]]
"""``exists(ids) -> the subset of ids that exist``, scoped to the writing user (the store's)."""

# Seed 000 §3.1: data from an authoritative API ~0.99, a model's guess ~0.7. Per source type:
DEFAULT_CONFIDENCE: Mapping[SourceType, float] = MappingProxyType({
    # The environment reporting its own state (tool status, errors, rewards) is ground truth about it.
    SourceType.system_feedback: 0.99,
    # Authoritative about the user's own wishes and facts, but can be misheard, vague or revised.
    SourceType.direct_interaction: 0.95,
    # Documents/APIs are reliable but may be stale or low-authority; pass confidence= per source.
    SourceType.external_ingest: 0.9,
    # The agent's own inference or summary: a guess until confirmed.
    SourceType.derived_inference: 0.7,
})

DEFAULT_URGENCY_PATTERNS: tuple[str, ...] = (
    r"\burgent(?:ly)?\b", r"\basap\b", r"\bimmediately\b", r"\bright (?:away|now)\b", r"\bas soon as possible\b",
    r"\bemergency\b", r"\bcritical\b", r"\bdeadline\b", r"\bby (?:today|tonight|tomorrow|eod|end of (?:the )?day)\b",
    r"\b(?:do not|don't|never) forget\b", r"\bmust\b", r"!{2,}", "紧急", "尽快", "立刻", "马上", "务必", "必须",
)

# Seed 000 §3.1 annotates the trigger ("user_query"); over-annotate rather than leave it empty.
_DEFAULT_TRIGGER = {DialogRole.user: "user_message", DialogRole.agent: "agent_message",
                    DialogRole.tool: "tool_result", DialogRole.system: "system_message"}


class AgentContext(BaseModel):
    """The agent's current context, from which provenance and role context are filled.

    ``session_id``/``last_event_at``/``last_embedding`` describe the session the *caller* believes
    it is in. The assembler owns session boundaries: an id it has not seen for this scope is a
    declared switch (adopted, and seeded with ``last_event_at``/``last_embedding`` so detection
    survives a restart); an id it already knows is superseded by its own tracked state.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

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
        roles: role and sub-role classification (:class:`~runtime.roles.RoleConfig`).
        session: session-boundary detection (:class:`~runtime.sessions.SessionConfig`).
        default_confidence: confidence in [0, 1] per source type when the caller gives none; types
            left out keep :data:`DEFAULT_CONFIDENCE`.
        urgency_patterns: regexes (case-insensitive) whose presence sets ``Flag.urgent``.
        inference_requires_parents: reject ``derived_inference`` without ``derived_from`` (seed 000
            §3.1: an inference should point at the memories it rests on).
    """

    roles: RoleConfig = field(default_factory=RoleConfig)
    session: SessionConfig = field(default_factory=SessionConfig)
    default_confidence: Mapping[Any, float] = field(default_factory=lambda: DEFAULT_CONFIDENCE)  # SourceType | str
    urgency_patterns: tuple[str, ...] = DEFAULT_URGENCY_PATTERNS
    inference_requires_parents: bool = False

    def __post_init__(self) -> None:
        p: list[tuple[str, str]] = []
        merged = dict(DEFAULT_CONFIDENCE)
        for k, v in self.default_confidence.items():
            if k not in {s.value for s in SourceType}:
                p.append((f"default_confidence[{k!r}]", f"unknown source type; valid: {[s.value for s in SourceType]}"))
            elif isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 <= float(v) <= 1.0:
                p.append((f"default_confidence[{k!r}]", f"must be a number in [0, 1], got {v!r}"))
            else:
                merged[SourceType(k)] = float(v)
        for i, pat in enumerate(self.urgency_patterns):
            try:
                re.compile(pat)
            except (re.error, TypeError) as e:
                p.append((f"urgency_patterns[{i}]", f"not a valid regular expression: {e}"))
        for name, cls in (("roles", RoleConfig), ("session", SessionConfig)):
            if not isinstance(getattr(self, name), cls):
                p.append((name, f"must be a {cls.__name__}"))
        if p:
            text = "; ".join(f"{f}: {m}" for f, m in p)
            raise ValidationError(f"invalid AssemblerConfig — {text}", field=p[0][0], problems=p)
        object.__setattr__(self, "default_confidence", MappingProxyType(merged))  # keys: SourceType
        object.__setattr__(self, "urgency_patterns", tuple(self.urgency_patterns))


@dataclass(frozen=True)
class Assembly:
    """The assembled record plus every decision that shaped it (no raw sensitive values).

    Attributes:
        record: the validated :class:`MemIR`, ready for the store.
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
        redactor: the :class:`~runtime.redact.Redactor` to use (default: every kind).
        exists: default ``derived_from`` checker; a per-call ``exists=`` overrides it. Either must
            be scoped to the writing user (e.g. ``store.scope(user_id=...).exists``).
        clock: the time source for ``created_at`` and default event times (tests pin it).

    Raises:
        ValidationError: role descriptions are configured but no embedder is given.
    """

    def __init__(self, config: AssemblerConfig | None = None, *, embedder: Embedder | None = None,
                 redactor: Redactor | None = None, exists: ExistsFn | None = None,
                 clock: Callable[[], datetime] = utcnow) -> None:
        self.config = config or AssemblerConfig()
        self.embedder = embedder
        self.roles = RoleClassifier(self.config.roles, embedder)
        self.sessions = SessionTracker(self.config.session)
        self._redactor = redactor or Redactor()
        self._exists, self._clock = exists, clock
        # One alternation: a single scan of the content instead of one per pattern.
        pats = self.config.urgency_patterns
        self._urgent = re.compile("|".join(f"(?:{p})" for p in pats), re.IGNORECASE) if pats else None

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
        """Build the record for an extracted :class:`~runtime.extract.Candidate`.

        An LLM-proposed memory defaults to ``derived_inference`` spoken by the ``agent``; the
        candidate's own fields apply unless ``fields`` overrides them.
        """
        data = candidate.model_dump(exclude={"content"}, exclude_defaults=True)
        return self.assemble(candidate.content, ctx, source_type=source_type, dialog_role=dialog_role,
                             **{**data, **fields})

    def assemble_traced(
        self, content: str, ctx: AgentContext | Mapping[str, Any], *,
        source_type: SourceType | str = SourceType.direct_interaction,
        dialog_role: DialogRole | str = DialogRole.user, at: datetime | None = None,
        confidence: float | None = None, derived_from: Sequence[str] = (), exists: ExistsFn | None = None,
        sensitivity: Sensitivity | str = Sensitivity.none, flags: Sequence[Flag | str] = (),
        tags: Sequence[str] = (), related: Sequence[str] = (), active_role: str | None = None,
        sub_role: str | None = None, tone: str | None = None, task_id: str | None = None,
        source_entity: str | None = None, trigger: str | None = None, source_uri: str | None = None,
        source_version: str | None = None, freshness_half_life: timedelta | None = None,
        expires_at: datetime | None = None, attributes: Mapping[str, Any] | None = None,
        embedding: np.ndarray | Sequence[float] | None = None, record_id: str | None = None,
    ) -> Assembly:
        """Redact, classify, place in a session and validate one new memory.

        Args:
            content: the raw text; only its redacted form goes any further.
            ctx: the agent's :class:`AgentContext` (or a dict of its fields).
            source_type, dialog_role: provenance type and speaker.
            at: when the event happened (default: the clock; naive = UTC); drives session gaps.
            confidence: overrides the source type's default.
            derived_from: causal parent ids; each must exist (``exists`` or the constructor's).
            sensitivity: declared level; the record gets max(declared, found by redaction).
            active_role, sub_role: set the role explicitly (no classification).
            embedding: the *redacted* content's embedding, if the caller already has one.
            Other keywords fill the :class:`MemIR` fields of the same name; ``tone`` and
            ``task_id`` default to the context's, ``source_entity`` to the speaker.

        Raises:
            ValidationError: any invalid input, naming the field; no session state changes.
        """
        ctx = _coerce_ctx(ctx)
        if not isinstance(content, str) or not content.strip():
            raise ValidationError("content must be a non-empty string", field="content")
        stype = _enum(SourceType, source_type, "provenance.type")
        drole = _enum(DialogRole, dialog_role, "role_context.dialog_role")
        declared = _enum(Sensitivity, sensitivity, "metadata.sensitivity")
        parents = list(dict.fromkeys(derived_from))
        self._check_parents(parents, stype, exists or self._exists)
        red = self._redactor.redact(content)
        text = red.text
        # Free-text side fields can leak too (a token in a source URL, an email as a tag); ids are
        # left alone — they are the tenant/scoping keys and constrained to plain tokens.
        side = _SideRedactor(self._redactor)
        tags = [side(t) for t in tags]
        attrs = {k: side(v) if isinstance(v, str) else v for k, v in (attributes or {}).items()}
        source_uri, source_entity = side(source_uri), side(source_entity)
        at = _utc(at) if at is not None else self._clock()
        dim = self.embedder.dim if self.embedder is not None else None
        cache = [as_unit_vector(embedding, "embedding", dim) if embedding is not None else None]

        def embed() -> np.ndarray | None:  # the encoder only ever sees redacted text
            if cache[0] is None and self.embedder is not None:
                cache[0] = as_unit_vector(self.embedder.encode([text])[0], "embedder output", dim)
            return cache[0]

        if active_role is not None or sub_role is not None:
            role = self.roles.explicit(active_role, sub_role, ctx.active_role)
        else:
            role = self.roles.classify(text, ctx.active_role, ctx.sub_role, embed)
        scfg = self.config.session
        e = embed() if scfg.enabled and scfg.topic_shift_threshold is not None else cache[0]
        flag_list: list[Any] = list(flags)  # validated and de-duplicated by Metadata
        if self._urgent is not None and self._urgent.search(text):
            flag_list.append(Flag.urgent)
        conf = self.config.default_confidence[stype] if confidence is None else confidence
        with self.sessions.lock:  # decide → validate → commit, atomically per assembler
            decision, pending = self.sessions.decide(
                ctx.user_id, ctx.agent_id, at, e, declared_id=ctx.session_id,
                declared_last_event_at=ctx.last_event_at, declared_context=ctx.last_embedding)
            try:
                # Validated as one nested dict so that errors carry full paths ("metadata.tags.0").
                record = MemIR.model_validate({
                    "id": record_id or new_id(), "content": text, "created_at": self._clock(),
                    "provenance": {
                        "type": stype, "user_id": ctx.user_id, "agent_id": ctx.agent_id,
                        "session_id": decision.session_id, "timestamp": at,
                        "source_entity": source_entity or _default_entity(drole, ctx),
                        "trigger": trigger or _DEFAULT_TRIGGER[drole], "derived_from": parents,
                        "source_uri": source_uri, "source_version": source_version},
                    "role_context": {
                        "active_role": role.active_role, "sub_role": role.sub_role, "dialog_role": drole,
                        "tone": tone or ctx.tone, "task_id": task_id or ctx.task_id},
                    "metadata": {
                        "confidence": conf, "freshness_half_life": freshness_half_life, "expires_at": expires_at,
                        "tags": tags, "related": list(related), "flags": flag_list,
                        "sensitivity": max_sensitivity(declared, red.sensitivity, side.sensitivity),
                        "attributes": attrs}})
            except PydanticValidationError as err:
                raise ValidationError.from_pydantic(err, what="memory") from err
            self.sessions.commit(pending)  # only a valid record moves the session state
        findings = _merge_findings(red.findings + side.findings)
        return Assembly(record, role, decision, findings, "default" if confidence is None else "declared", e)

    def _check_parents(self, parents: list[str], stype: SourceType, exists: ExistsFn | None) -> None:
        if not parents:
            if stype is SourceType.derived_inference and self.config.inference_requires_parents:
                raise ValidationError("derived_inference needs derived_from (the ids it rests on): pass "
                                      "derived_from=[...] or set inference_requires_parents=False",
                                      field="provenance.derived_from")
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


class _SideRedactor:
    """Redacts optional side fields and remembers what it found."""

    def __init__(self, redactor: Redactor) -> None:
        self._redactor = redactor
        self.findings: tuple[Finding, ...] = ()
        self.sensitivity = Sensitivity.none

    def __call__(self, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        r = self._redactor.redact(value)
        self.findings += r.findings
        self.sensitivity = max_sensitivity(self.sensitivity, r.sensitivity)
        return r.text


def _merge_findings(findings: tuple[Finding, ...]) -> tuple[Finding, ...]:
    counts: dict[RedactionKind, int] = {}
    for f in findings:
        counts[f.kind] = counts.get(f.kind, 0) + f.count
    return tuple(Finding(k, counts[k]) for k in RedactionKind if k in counts)


def _coerce_ctx(ctx: AgentContext | Mapping[str, Any]) -> AgentContext:
    if isinstance(ctx, AgentContext):
        return ctx
    if isinstance(ctx, Mapping):
        return AgentContext(**ctx)
    raise ValidationError(f"ctx must be an AgentContext or a dict, got {type(ctx).__name__}", field="ctx")


def _enum(cls: Any, value: Any, name: str) -> Any:
    try:
        return cls(value)
    except ValueError:
        raise ValidationError(f"{name}: {value!r} is not one of {[m.value for m in cls]}", field=name) from None


def _utc(v: datetime) -> datetime:
    return v.replace(tzinfo=UTC) if v.tzinfo is None else v.astimezone(UTC)


def _default_entity(role: DialogRole, ctx: AgentContext) -> str | None:
    # The user and the agent are known from the context; a tool should be named by the caller.
    return {DialogRole.user: ctx.user_id, DialogRole.agent: ctx.agent_id, DialogRole.system: "system"}.get(role)
