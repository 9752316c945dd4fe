"""The SQLite layout of a memir store, and the record <-> row mapping.

Typed columns for every field a query filters on (composite indexes start with the tenant columns,
so every scoped query is an index range scan); the full record as JSON for exact round-trips;
vectors as float32 blobs beside the row with the id of the encoder that made them. Usage state
(access count, last access, utility, retention reason) lives in columns only, so a recall updates a
few integers instead of rewriting JSON.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime
from typing import Any

from .memir import MemIR

__all__ = ["SCHEMA_SQL", "STORE_FORMAT", "COLUMNS", "N_COLUMNS", "record_to_row", "row_to_record", "ts", "from_ts",
           "half_life_seconds"]

STORE_FORMAT = 1

SCHEMA_SQL = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS memories (
    rowid INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    user_id TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    tier TEXT NOT NULL DEFAULT 'working',
    source_type TEXT NOT NULL,
    session_id TEXT,
    active_role TEXT NOT NULL,
    sub_role TEXT,
    dialog_role TEXT NOT NULL,
    task_id TEXT,
    created_at REAL NOT NULL,
    event_time REAL NOT NULL,
    expires_at REAL,
    confidence REAL NOT NULL,
    half_life_s REAL,
    sensitivity TEXT NOT NULL,
    access_count INTEGER NOT NULL DEFAULT 0,
    last_accessed_at REAL,
    utility REAL,
    retention_reason TEXT,
    record TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS ix_mem_scope ON memories(user_id, agent_id);
CREATE INDEX IF NOT EXISTS ix_mem_scope_tier ON memories(user_id, agent_id, tier, seq);
CREATE INDEX IF NOT EXISTS ix_mem_scope_session ON memories(user_id, agent_id, session_id);
CREATE INDEX IF NOT EXISTS ix_mem_scope_role ON memories(user_id, agent_id, active_role, sub_role);
CREATE INDEX IF NOT EXISTS ix_mem_scope_source ON memories(user_id, agent_id, source_type);
CREATE INDEX IF NOT EXISTS ix_mem_scope_time ON memories(user_id, agent_id, event_time);
CREATE INDEX IF NOT EXISTS ix_mem_scope_expiry ON memories(user_id, agent_id, expires_at);
CREATE TABLE IF NOT EXISTS memory_tags (
    mem_rowid INTEGER NOT NULL REFERENCES memories(rowid) ON DELETE CASCADE,
    tag TEXT NOT NULL,
    PRIMARY KEY (mem_rowid, tag)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS ix_tags_tag ON memory_tags(tag, mem_rowid);
CREATE TABLE IF NOT EXISTS memory_parents (
    mem_rowid INTEGER NOT NULL REFERENCES memories(rowid) ON DELETE CASCADE,
    parent_id TEXT NOT NULL,
    PRIMARY KEY (mem_rowid, parent_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS ix_parents_parent ON memory_parents(parent_id);
CREATE TABLE IF NOT EXISTS vectors (
    mem_rowid INTEGER PRIMARY KEY REFERENCES memories(rowid) ON DELETE CASCADE,
    encoder_id TEXT NOT NULL,
    dim INTEGER NOT NULL,
    vec BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS ix_vectors_encoder ON vectors(encoder_id);
CREATE TABLE IF NOT EXISTS recall_log (
    id INTEGER PRIMARY KEY,
    user_id TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    at REAL NOT NULL,
    payload TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS ix_recall_scope ON recall_log(user_id, agent_id, at);
CREATE TABLE IF NOT EXISTS decisions (
    id INTEGER PRIMARY KEY,
    decision_id TEXT NOT NULL UNIQUE,
    user_id TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    at REAL NOT NULL,
    payload TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS ix_decisions_scope ON decisions(user_id, agent_id, at);
CREATE TABLE IF NOT EXISTS decision_items (
    decision_rowid INTEGER NOT NULL REFERENCES decisions(id) ON DELETE CASCADE,
    memory_id TEXT NOT NULL,
    kept INTEGER NOT NULL,
    reason TEXT NOT NULL,
    payload TEXT NOT NULL,
    PRIMARY KEY (decision_rowid, memory_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS ix_decision_items_mem ON decision_items(memory_id);
-- Any change to existing rows that the in-process caches mirror (filter columns, vectors, tags,
-- deletions) bumps vector_epoch in the same transaction, whoever makes it, so every cache (in
-- every process) reloads. Usage columns (access_count, utility...) are not mirrored: no bump.
CREATE TRIGGER IF NOT EXISTS tr_mem_delete AFTER DELETE ON memories BEGIN
    UPDATE meta SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT) WHERE key = 'vector_epoch'; END;
CREATE TRIGGER IF NOT EXISTS tr_mem_update AFTER UPDATE OF id, user_id, agent_id, tier, source_type,
    session_id, active_role, sub_role, dialog_role, task_id, event_time, expires_at, confidence,
    half_life_s, sensitivity, record ON memories BEGIN
    UPDATE meta SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT) WHERE key = 'vector_epoch'; END;
CREATE TRIGGER IF NOT EXISTS tr_vec_delete AFTER DELETE ON vectors BEGIN
    UPDATE meta SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT) WHERE key = 'vector_epoch'; END;
CREATE TRIGGER IF NOT EXISTS tr_vec_update AFTER UPDATE ON vectors BEGIN
    UPDATE meta SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT) WHERE key = 'vector_epoch'; END;
CREATE TRIGGER IF NOT EXISTS tr_tag_change AFTER DELETE ON memory_tags BEGIN
    UPDATE meta SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT) WHERE key = 'vector_epoch'; END;
"""

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
    body = r.model_dump(mode="json", exclude={"usage"})
    u = r.usage
    return (
        r.id, r.provenance.user_id, r.provenance.agent_id, seq, tier, r.provenance.type.value,
        r.provenance.session_id, r.role_context.active_role, r.role_context.sub_role,
        r.role_context.dialog_role.value, r.role_context.task_id, ts(r.created_at), ts(r.event_time),
        ts(r.metadata.expires_at), r.metadata.confidence, half_life_seconds(r), r.metadata.sensitivity.value,
        u.access_count, ts(u.last_accessed_at), u.utility, u.retention_reason,
        json.dumps(body, separators=(",", ":"), ensure_ascii=False),
    )


def row_to_record(record_json: str, access_count: int, last_accessed_at: float | None,
                  utility: float | None, retention_reason: str | None) -> MemIR:
    """Rebuild the record from its JSON body and the usage columns.

    One ``model_validate_json`` over the body with the usage spliced in (~25 µs, about half of
    ``json.loads`` + ``model_validate``). Every call returns a fresh, unshared record: a cache of
    parsed records handed out shallow copies whose nested models (metadata, provenance) were
    shared, so mutating one returned record silently changed later reads of the same row.
    """
    last = from_ts(last_accessed_at)
    usage = json.dumps({"access_count": int(access_count), "last_accessed_at": last and last.isoformat(),
                        "utility": utility, "retention_reason": retention_reason}, separators=(",", ":"))
    return MemIR.model_validate_json(f'{record_json[:-1]},"usage":{usage}}}')


def apply_pragmas(conn: sqlite3.Connection, busy_timeout_ms: int, in_memory: bool) -> None:
    """WAL for concurrent readers, a busy timeout for concurrent writers, foreign keys for cascades,
    and ``secure_delete`` so deleted content is overwritten with zeros instead of lingering in free
    pages (DESIGN: deletion is complete)."""
    conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
    if not in_memory:
        conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute("PRAGMA secure_delete = ON")
