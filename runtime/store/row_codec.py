"""The record <-> row mapping every backend shares: typed columns for every field a query filters
on, the full record as JSON (exact round trips), and usage state (access count, last access,
utility, retention reason) in columns only, so a recall updates a few numbers instead of rewriting
JSON."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from typing import Any

from ..record.memir import MemIR

__all__ = ["COLUMNS", "N_COLUMNS", "READ_COLS", "body_json", "from_ts", "half_life_seconds", "record_to_row",
           "row_to_record", "ts", "with_tags"]

COLUMNS = ("id, user_id, agent_id, seq, tier, source_type, session_id, active_role, sub_role, dialog_role, "
           "task_id, created_at, event_time, expires_at, confidence, half_life_s, sensitivity, access_count, "
           "last_accessed_at, utility, retention_reason, record")
N_COLUMNS = len(COLUMNS.split(","))


def half_life_seconds(r: MemIR) -> float | None:
    """``metadata.freshness_half_life`` in seconds (the ``half_life_s`` column; re-ranking reads it)."""
    hl = r.metadata.freshness_half_life
    return None if hl is None else hl.total_seconds()


# The columns every record read selects: the JSON body, then the usage columns.
READ_COLS = "m.record, m.access_count, m.last_accessed_at, m.utility, m.retention_reason"


def ts(dt: datetime | None) -> float | None:
    """Datetime -> epoch seconds (REAL column), None-safe."""
    return None if dt is None else dt.timestamp()


def from_ts(x: float | None) -> datetime | None:
    return None if x is None else datetime.fromtimestamp(x, tz=UTC)


def record_to_row(r: MemIR, seq: int, tier: str = "working") -> tuple[Any, ...]:
    """The values for :data:`COLUMNS`, in order."""
    u = r.usage
    return (
        r.id, r.provenance.user_id, r.provenance.agent_id, seq, tier, r.provenance.type.value,
        r.provenance.session_id, r.role_context.active_role, r.role_context.sub_role,
        r.role_context.dialog_role.value, r.role_context.task_id, ts(r.created_at), ts(r.event_time),
        ts(r.metadata.expires_at), r.metadata.confidence, half_life_seconds(r), r.metadata.sensitivity.value,
        u.access_count, ts(u.last_accessed_at), u.utility, u.retention_reason,
        body_json(r),
    )


def body_json(r: MemIR) -> str:
    """The record's JSON body as stored (usage lives in its own columns)."""
    return r.model_dump_json(exclude={"usage"})


def with_tags(r: MemIR, tags: list[str] | tuple[str, ...]) -> MemIR | None:
    """The record with ``tags`` appended (those it lacks, in order), or ``None`` if it has them all
    (``Scope.tag``: the one change a stored record's tags may get)."""
    new = [t for t in dict.fromkeys(tags) if t not in r.metadata.tags]
    if not new:
        return None
    return r.model_copy(update={"metadata": r.metadata.model_copy(update={"tags": [*r.metadata.tags, *new]})})


def row_to_record(record_json: str, access_count: int, last_accessed_at: float | None,
                  utility: float | None, retention_reason: str | None) -> MemIR:
    """Rebuild the record from its JSON body and the usage columns.

    One ``model_validate_json`` over the body with the usage spliced in as JSON text written here
    (~13 µs in all, about half of ``json.loads`` + ``model_validate``; ``json.dumps`` of the usage
    dict cost a quarter more). Every call returns a fresh, unshared record: a cache of parsed
    records handed out shallow copies whose nested models (metadata, provenance) were shared, so
    mutating one returned record silently changed later reads of the same row.
    """
    last = "null" if last_accessed_at is None else f'"{datetime.fromtimestamp(last_accessed_at, tz=UTC).isoformat()}"'
    util = ("null" if utility is None else repr(float(utility)) if math.isfinite(utility)
            else json.dumps(float(utility)))
    reason = "null" if retention_reason is None else json.dumps(retention_reason)
    return MemIR.model_validate_json(f'{record_json[:-1]},"usage":{{"access_count":{int(access_count)},'
                                     f'"last_accessed_at":{last},"utility":{util},"retention_reason":{reason}}}}}')
