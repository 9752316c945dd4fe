"""The typed fields a caller may set when writing a memory: ``scope.write(text, **WriteFields)``.

One definition serves three purposes: static typing of ``Scope.write`` / ``write_many`` keyword
arguments (``**fields: Unpack[WriteFields]``), the check of field names in dict items and CLI input
(:func:`check_field_names`; values are validated once, by MemIR itself, when the record is built),
and the mapping onto MemIR's nested groups (:data:`FIELD_GROUPS`). The tenant fields (``user_id``, ``agent_id``) are not
here: the scope sets them, so a caller cannot write into another scope.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from types import MappingProxyType
from typing import Any, TypedDict

from ..errors import ValidationError
from .memir import DialogRole, Flag, JSONScalar, Sensitivity, SourceType

__all__ = ["FIELD_GROUPS", "WRITE_FIELD_NAMES", "WriteFields", "check_field_names"]


class WriteFields(TypedDict, total=False):
    """Optional typed fields of a new memory (all keyword-only; every one may be omitted).

    Provenance — where it came from:
        id: the record id (letters, digits, ``_ . : @ -``); default a fresh ``mem_<hex>``.
        created_at: when it was written (UTC; naive = UTC); default now.
        source_type: direct_interaction | derived_inference | external_ingest | system_feedback.
        session_id: the interaction it belongs to; default: the scope's session detector.
        timestamp: when the source event happened (default: ``created_at``).
        source_entity: who or what produced it (speaker, tool, document).
        trigger: what caused the write (``user_message``, ``tool_result``...; default by speaker).
        derived_from: causal parent ids (must exist in this scope).
        source_uri, source_version: the document an ingested memory came from.
        supersedes: the id of the memory this one corrects (see ``Scope.update``).

    Role context — the role the agent was in:
        active_role, sub_role: e.g. ``"support"`` / ``"billing"``.
        dialog_role: user | agent | system | tool (who spoke it).
        tone: intent or emotion label.
        task_id: the task it belongs to.

    Metadata:
        confidence: in [0, 1]; default per source type (0.95 for what a user says).
        freshness_half_life: recall weight halves every this long; None = the store's default for
            the source type and dialog role (``StoreConfig.freshness``); ``runtime.store.NEVER``
            = never decays.
        expires_at: TTL; the memory must be forgotten after this.
        tags, related: labels and related memory ids.
        sensitivity: declared level; the record gets max(declared, found by redaction).
        flags: core_instruction, user_confirmed, pinned, key_result, urgent, used, ...
        attributes: open extension dict of JSON scalars.

    Usage state (restoring a record from a dump):
        access_count, last_accessed_at, utility, retention_reason.
    """

    id: str
    created_at: datetime
    source_type: SourceType
    session_id: str | None
    timestamp: datetime | None
    source_entity: str | None
    trigger: str | None
    derived_from: list[str]
    source_uri: str | None
    source_version: str | None
    supersedes: str | None
    active_role: str
    sub_role: str | None
    dialog_role: DialogRole
    tone: str | None
    task_id: str | None
    confidence: float
    freshness_half_life: timedelta | None
    expires_at: datetime | None
    tags: list[str]
    related: list[str]
    sensitivity: Sensitivity
    flags: list[Flag]
    attributes: dict[str, JSONScalar]
    access_count: int
    last_accessed_at: datetime | None
    utility: float | None
    retention_reason: str | None


FIELD_GROUPS: Mapping[str, tuple[str, str]] = MappingProxyType({
    "source_type": ("provenance", "type"), "session_id": ("provenance", "session_id"),
    "timestamp": ("provenance", "timestamp"), "source_entity": ("provenance", "source_entity"),
    "trigger": ("provenance", "trigger"), "derived_from": ("provenance", "derived_from"),
    "source_uri": ("provenance", "source_uri"), "source_version": ("provenance", "source_version"),
    "active_role": ("role_context", "active_role"), "sub_role": ("role_context", "sub_role"),
    "dialog_role": ("role_context", "dialog_role"), "tone": ("role_context", "tone"),
    "task_id": ("role_context", "task_id"),
    "confidence": ("metadata", "confidence"), "freshness_half_life": ("metadata", "freshness_half_life"),
    "expires_at": ("metadata", "expires_at"), "tags": ("metadata", "tags"), "related": ("metadata", "related"),
    "sensitivity": ("metadata", "sensitivity"), "flags": ("metadata", "flags"),
    "attributes": ("metadata", "attributes"),
    "access_count": ("usage", "access_count"), "last_accessed_at": ("usage", "last_accessed_at"),
    "utility": ("usage", "utility"), "retention_reason": ("usage", "retention_reason"),
})
"""Flat write field -> (MemIR group, field in the group). ``id``, ``created_at`` and ``supersedes``
are handled by the builder itself."""

WRITE_FIELD_NAMES: tuple[str, ...] = tuple(WriteFields.__annotations__)


def check_field_names(fields: Mapping[str, Any], *, where: str = "") -> None:
    """Refuse unknown field names, listing the valid ones (values are MemIR's to validate)."""
    unknown = sorted(k for k in fields if k not in _NAMES)
    if unknown:
        raise ValidationError(f"{where}unknown field(s) {unknown} for write(); valid fields: "
                              f"{', '.join(sorted(WRITE_FIELD_NAMES))}", field=unknown[0])


_NAMES = frozenset(WRITE_FIELD_NAMES)
