"""MemIR — the typed memory record (DESIGN.md "MemIR"; seed 000 §2.2).

A memory is not a string: it is content plus *provenance* (where it came from: source type, user,
session, time, causal parents) kept apart from *role context* (the role the agent was in when it
was written), plus metadata (confidence, freshness, TTL, sensitivity, flags) and usage/retention
state. Records are validated on the way in (``extra="forbid"``, real ``datetime``/enum types) and
round-trip through JSON exactly.

Example:
    >>> from runtime.record import MemIR, Provenance
    >>> r = MemIR(content="User prefers aisle seats", provenance=Provenance(user_id="u1"))
    >>> MemIR.model_validate_json(r.model_dump_json()) == r
    True
"""

from __future__ import annotations

import math
import re
import uuid
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints, field_validator, model_validator

__all__ = [
    "SCHEMA_VERSION",
    "SourceType",
    "DialogRole",
    "Sensitivity",
    "Flag",
    "Provenance",
    "RoleContext",
    "Metadata",
    "Usage",
    "MemIR",
    "Id",
    "is_id",
    "new_id",
    "utcnow",
]

SCHEMA_VERSION: Literal[1] = 1

# Ids are plain tokens: letters, digits and ``_ . : @ -``. This is what keeps a filter value that
# "looks like SQL" out at the boundary (queries are parameterised anyway; this is defence in depth
# and gives the caller a clear error instead of an empty result).
# The length bound lives in max_length, not in the regex: pydantic-core compiles ``{1,128}`` into an
# automaton ~40x costlier to build (7 ms per field, paid at import for every Id field).
ID_PATTERN = r"^[A-Za-z0-9_.:@\-]+$"
Id = Annotated[str, StringConstraints(pattern=ID_PATTERN, max_length=128)]
_ID = re.compile(ID_PATTERN)


def is_id(value: Any) -> bool:
    """Whether ``value`` is an :data:`Id`, checked as pydantic checks one but without building a
    validator: the whole string (Python's ``$`` alone would also take a trailing newline), 1–128 chars."""
    return isinstance(value, str) and 0 < len(value) <= 128 and _ID.fullmatch(value) is not None


# Labels are free text, but never a NUL: no text column of either backend can hold one (PostgreSQL
# refuses it outright), so it is refused here, by name, instead of failing deep in a write.
def _no_nul(v: str) -> str:
    if "\x00" in v:
        raise ValueError("must not contain NUL characters")
    return v


Label = Annotated[str, StringConstraints(min_length=1, max_length=128, strip_whitespace=True), AfterValidator(_no_nul)]


def utcnow() -> datetime:
    """The current time, timezone-aware UTC (memir never stores naive datetimes)."""
    return datetime.now(UTC)


def new_id(prefix: str = "mem") -> str:
    """A fresh random memory id, e.g. ``mem_3f2a…`` (32 hex digits)."""
    return f"{prefix}_{uuid.uuid4().hex}"


def _utc(v: datetime) -> datetime:
    # Naive datetimes are taken as UTC (what `datetime.utcnow()` callers mean); everything is
    # normalised to UTC so equality and SQL ordering agree.
    if v.tzinfo is None:
        return v.replace(tzinfo=UTC)
    try:
        return v.astimezone(UTC)
    except OverflowError:  # e.g. 0001-01-01T00:00+01:00: pydantic reports only ValueError by field
        raise ValueError(f"{v.isoformat()} is outside the range of dates once converted to UTC "
                         "(years 1–9999)") from None


UTCDateTime = Annotated[datetime, AfterValidator(_utc)]


class SourceType(StrEnum):
    """How the information came to be (seed 000 §2.1, "来源")."""

    direct_interaction = "direct_interaction"  # said by a user / observed in the environment
    derived_inference = "derived_inference"    # the agent's own analysis, summary or prediction
    external_ingest = "external_ingest"        # read from a document, database or API
    system_feedback = "system_feedback"        # reward, error or state change from the system


class DialogRole(StrEnum):
    """Who spoke the content in the dialog."""

    user = "user"
    agent = "agent"
    system = "system"
    tool = "tool"


class Sensitivity(StrEnum):
    """What redaction found (or the caller declared). Ordered: none < pii < secret.

    This is the one definition of that order: :attr:`rank`, :meth:`at_most` and :meth:`highest`
    are what filters, redaction and the record builder use.
    """

    none = "none"
    pii = "pii"
    secret = "secret"

    @property
    def rank(self) -> int:
        """0 for none, 1 for pii, 2 for secret."""
        return _SENSITIVITY_RANK[self]

    def at_most(self) -> list[Sensitivity]:
        """Every level up to and including this one (``pii`` -> ``[none, pii]``)."""
        return [s for s in Sensitivity if s.rank <= self.rank]

    @classmethod
    def highest(cls, *levels: Sensitivity | str) -> Sensitivity:
        """The most sensitive of ``levels`` (``none`` when there are none)."""
        return max((cls(x) for x in levels), key=lambda s: s.rank, default=cls.none)


_SENSITIVITY_RANK = {Sensitivity.none: 0, Sensitivity.pii: 1, Sensitivity.secret: 2}


class Flag(StrEnum):
    """Closed set of behavioural flags that rules and features read."""

    core_instruction = "core_instruction"  # a standing instruction; must-keep by default
    user_confirmed = "user_confirmed"      # the user confirmed it explicitly
    pinned = "pinned"                      # an operator pinned it
    key_result = "key_result"              # a tool result the task depends on
    urgent = "urgent"                      # carried urgency markers ("must", "ASAP", ...)
    used = "used"                          # a secret that has served its purpose
    placeholder = "placeholder"            # redacted stand-in left by a cascade forget
    superseded = "superseded"              # a newer version of this fact exists


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True, frozen=False, defer_build=True)


class Provenance(_Model):
    """Where a memory came from — kept apart from the role it was used in."""

    type: SourceType = SourceType.direct_interaction
    user_id: Id = Field(description="Tenant key: every read is scoped to one user.")
    agent_id: Id = "default"
    session_id: Id | None = None
    timestamp: UTCDateTime | None = Field(default=None, description="When the source event happened (UTC).")
    source_entity: Label | None = Field(default=None, description="Who/what produced it: speaker, tool, doc.")
    trigger: Label | None = Field(default=None, description="What caused the write: user_query, tool_call, ...")
    derived_from: list[Id] = Field(default_factory=list, description="Causal parents (memory ids).")
    source_uri: Annotated[str, StringConstraints(max_length=2048)] | None = None
    source_version: Label | None = None


class RoleContext(_Model):
    """The role the agent was in when the memory was written (seed 000 §2.1, "角色")."""

    active_role: Label = "general"
    sub_role: Label | None = None
    dialog_role: DialogRole = DialogRole.user
    tone: Label | None = None
    task_id: Id | None = None


JSONScalar = str | int | float | bool | None


class Metadata(_Model):
    """Confidence, freshness, TTL, sensitivity, flags and an open extension dict."""

    confidence: float = Field(default=1.0, ge=0.0, le=1.0)
    freshness_half_life: timedelta | None = Field(
        default=None, description="Recall weight halves every this long; None = the store's default for the "
                                  "source type and dialog role (a MemIR on its own does not decay).")
    expires_at: UTCDateTime | None = Field(default=None, description="TTL: must be forgotten after this.")
    tags: list[Label] = Field(default_factory=list)
    related: list[Id] = Field(default_factory=list)
    sensitivity: Sensitivity = Sensitivity.none
    flags: list[Flag] = Field(default_factory=list)
    attributes: dict[Label, JSONScalar] = Field(default_factory=dict)

    @field_validator("freshness_half_life")
    @classmethod
    def _positive_half_life(cls, v: timedelta | None) -> timedelta | None:
        if v is not None and v <= timedelta(0):
            raise ValueError("freshness_half_life must be positive (or None for no decay)")
        return v

    @field_validator("flags")
    @classmethod
    def _dedupe_flags(cls, v: list[Flag]) -> list[Flag]:
        return sorted(set(v), key=lambda f: f.value)  # a set, stored in a canonical order

    @field_validator("attributes")
    @classmethod
    def _finite_attributes(cls, v: dict[str, Any]) -> dict[str, Any]:
        for k, x in v.items():
            if isinstance(x, float) and not math.isfinite(x):
                raise ValueError(f"attributes[{k!r}] must be a finite number, got {x}")
            _utf8(k, "an attribute name")
            for part in (x if isinstance(x, (list, tuple)) else (x,)):
                if isinstance(part, str):
                    _utf8(part, f"attributes[{k!r}]")
        return v


def _utf8(v: str, what: str) -> None:
    try:
        v.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueError(f"{what} holds a lone surrogate ({v[e.start]!r} at position {e.start}), which is not "
                         "valid Unicode text: decode the input with errors='replace'") from None


class Usage(_Model):
    """Usage and retention state, updated by recall and by retention decisions."""

    access_count: int = Field(default=0, ge=0)
    last_accessed_at: UTCDateTime | None = None
    utility: float | None = None
    retention_reason: Label | None = None

    @field_validator("utility")
    @classmethod
    def _finite(cls, v: float | None) -> float | None:
        if v is not None and not math.isfinite(v):
            raise ValueError("utility must be finite")
        # -0.0 -> 0.0: SQLite's REAL column (where usage lives) does not keep the sign of zero, and
        # the store must round-trip records exactly
        return 0.0 if v == 0 else v


class MemIR(_Model):
    """One typed memory record (schema version :data:`SCHEMA_VERSION`).

    Only ``content`` and ``provenance.user_id`` are required; everything else has a sensible
    default. ``embedding`` is *not* part of the record: the store keeps it beside the row with the
    id of the encoder that made it.
    """

    schema_version: Literal[1] = SCHEMA_VERSION
    id: Id = Field(default_factory=new_id)
    content: Annotated[str, StringConstraints(min_length=1)]
    created_at: UTCDateTime = Field(default_factory=utcnow)
    provenance: Provenance
    role_context: RoleContext = Field(default_factory=RoleContext)
    metadata: Metadata = Field(default_factory=Metadata)
    usage: Usage = Field(default_factory=Usage)

    @field_validator("content")
    @classmethod
    def _not_blank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("content must contain non-whitespace text")
        if "\x00" in v:
            raise ValueError("content must not contain NUL characters")
        _utf8(v, "content")
        return v

    @model_validator(mode="after")
    def _no_self_parent(self) -> "MemIR":
        if self.id in self.provenance.derived_from:
            raise ValueError("provenance.derived_from must not contain the record's own id")
        return self

    # Convenience read-only views used by rules, features and retrieval.
    @property
    def event_time(self) -> datetime:
        """When the source event happened (provenance.timestamp, else created_at)."""
        return self.provenance.timestamp or self.created_at

    def has_flag(self, flag: Flag | str) -> bool:
        return Flag(flag) in self.metadata.flags

    def is_expired(self, now: datetime | None = None) -> bool:
        exp = self.metadata.expires_at
        return exp is not None and exp <= (now or utcnow())
