"""The SQLite layout of a memir store and its migrations (the record <-> row mapping is
:mod:`runtime.store.row_codec`, shared with the PostgreSQL backend).

Typed columns for every field a query filters on (composite indexes start with the tenant columns,
so every scoped query is an index range scan); the full record as JSON for exact round-trips;
vectors as float32 blobs beside the row with the id of the encoder that made them. Usage state
(access count, last access, utility, retention reason) lives in columns only, never in the JSON, and
a recall's accesses go to a narrow table of their own (``memory_usage``): counting ten accesses then
rewrites one small page instead of the ten wide rows' pages (a row carries its JSON body; about three
fit on a page), and the write-ahead log grows a sixth as much (:data:`READ_COLS` folds them in).
"""

from __future__ import annotations

import sqlite3

from ...errors import ValidationError

__all__ = ["COUNT_ACCESSES", "READ_COLS", "SCHEMA_SQL", "STORE_FORMAT", "apply_pragmas", "check_not_foreign",
           "migrate"]

STORE_FORMAT = 4
"""Version of this layout. 1: the first release. 2: per-scope state (``scopes``: write counter,
open session, last decision), correction links (``memory_links``) and session-context features
(``memory_context``); ``seq`` counts writes per scope. 3: ``vectors.fmt``, the format a vector is
stored in (float32 in the working tier, the store's cold format in the archive:
:mod:`runtime.store.tiers`). 4: ``memory_usage``, recall accesses counted beside the row (older stores
have none pending: the table starts empty)."""

READ_COLS = ("m.record, m.access_count + ifnull((SELECT u.accesses FROM memory_usage u WHERE u.mem_rowid = m.rowid), 0), "
             "ifnull((SELECT u.last_at FROM memory_usage u WHERE u.mem_rowid = m.rowid), m.last_accessed_at), "
             "m.utility, m.retention_reason")
"""The columns a record read selects (``row_codec.READ_COLS``'s order): the JSON body, then the usage
columns, with the accesses counted in ``memory_usage`` added to the row's own (those it was written
with: a restored record's)."""

COUNT_ACCESSES = ("INSERT INTO memory_usage(mem_rowid, accesses, last_at) SELECT m.rowid, ?, ? FROM memories m "
                  "WHERE {rows} ON CONFLICT(mem_rowid) DO UPDATE SET accesses = accesses + excluded.accesses, "
                  "last_at = excluded.last_at")
"""Count accesses (``?``: how many, the time of the latest) of the ``memories m`` rows that match
``{rows}`` (the scope's clause and the rows, whose parameters follow)."""

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
-- Typed links between memories; kind 'supersedes': mem_rowid corrects target_id (Scope.update).
CREATE TABLE IF NOT EXISTS memory_links (
    mem_rowid INTEGER NOT NULL REFERENCES memories(rowid) ON DELETE CASCADE,
    kind TEXT NOT NULL,
    target_id TEXT NOT NULL,
    PRIMARY KEY (mem_rowid, kind, target_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS ix_links_target ON memory_links(kind, target_id);
-- Session-context features of a memory (utilitynet.dialog), computed when its session closed;
-- float64 blobs kept beside the record so the record itself round-trips exactly as written.
CREATE TABLE IF NOT EXISTS memory_context (
    mem_rowid INTEGER PRIMARY KEY REFERENCES memories(rowid) ON DELETE CASCADE,
    features BLOB NOT NULL
);
-- Per-scope state that must survive restarts and be shared by every process: the write counter
-- (seq of the scope's last write), the seq at its last retention decision, and its open session.
CREATE TABLE IF NOT EXISTS scopes (
    user_id TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    seq INTEGER NOT NULL DEFAULT 0,
    decision_seq INTEGER NOT NULL DEFAULT 0,
    open_session TEXT,
    session_last_at REAL,
    PRIMARY KEY (user_id, agent_id)
) WITHOUT ROWID;
-- Recall accesses of a row since it was written (READ_COLS adds them to its usage columns); a
-- deleted row's go with it.
CREATE TABLE IF NOT EXISTS memory_usage (
    mem_rowid INTEGER PRIMARY KEY REFERENCES memories(rowid) ON DELETE CASCADE,
    accesses INTEGER NOT NULL,
    last_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS vectors (
    mem_rowid INTEGER PRIMARY KEY REFERENCES memories(rowid) ON DELETE CASCADE,
    encoder_id TEXT NOT NULL,
    dim INTEGER NOT NULL,
    vec BLOB NOT NULL,
    fmt TEXT NOT NULL DEFAULT 'float32'
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
CREATE TABLE IF NOT EXISTS feedback (
    id INTEGER PRIMARY KEY,
    user_id TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    at REAL NOT NULL,
    kind TEXT NOT NULL,
    value REAL,
    memory_id TEXT,
    task_id TEXT,
    session_id TEXT,
    arms TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS ix_feedback_scope ON feedback(user_id, agent_id, at);
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
-- every process) reloads. Usage columns (access_count, utility...) and the JSON body (session
-- context attributes) are not mirrored: no bump.
CREATE TRIGGER IF NOT EXISTS tr_mem_delete AFTER DELETE ON memories BEGIN
    UPDATE meta SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT) WHERE key = 'vector_epoch'; END;
CREATE TRIGGER IF NOT EXISTS tr_mem_update AFTER UPDATE OF id, user_id, agent_id, tier, source_type,
    session_id, active_role, sub_role, dialog_role, task_id, event_time, expires_at, confidence,
    half_life_s, sensitivity ON memories BEGIN
    UPDATE meta SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT) WHERE key = 'vector_epoch'; END;
CREATE TRIGGER IF NOT EXISTS tr_vec_delete AFTER DELETE ON vectors BEGIN
    UPDATE meta SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT) WHERE key = 'vector_epoch'; END;
CREATE TRIGGER IF NOT EXISTS tr_vec_update AFTER UPDATE ON vectors BEGIN
    UPDATE meta SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT) WHERE key = 'vector_epoch'; END;
CREATE TRIGGER IF NOT EXISTS tr_tag_change AFTER DELETE ON memory_tags BEGIN
    UPDATE meta SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT) WHERE key = 'vector_epoch'; END;
"""

def check_not_foreign(conn: sqlite3.Connection, path: str) -> None:
    """Refuse an SQLite database of another application (tables, but no memir metadata) — before
    anything, even a journal-mode pragma, touches it."""
    has_meta = conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='meta'").fetchone()
    if not has_meta and conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' LIMIT 1").fetchone():
        raise ValidationError(f"{path} is an SQLite database of another application (it has tables but no memir "
                              "metadata); memir will not add its tables to it: give the path of a memir store",
                              field="path")


def migrate(conn: sqlite3.Connection, path: str) -> None:
    """Create the schema, or bring an older store up to :data:`STORE_FORMAT` in one transaction.

    Raises:
        ValidationError: the file was written by a newer memir (its format is higher).
    """
    row = None
    has_meta = conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='meta'").fetchone()
    if has_meta:
        row = conn.execute("SELECT value FROM meta WHERE key='format'").fetchone()
    found = int(row[0]) if row else None
    if found is None:
        check_not_foreign(conn, path)
    if found is not None and found > STORE_FORMAT:
        raise ValidationError(f"{path} has store format {found}, this memir reads up to {STORE_FORMAT}; "
                              "upgrade memir to open it", field="meta.format")
    conn.execute("BEGIN IMMEDIATE")  # executescript would commit on its own: one statement at a time
    try:
        for stmt in _statements(SCHEMA_SQL):
            conn.execute(stmt)
        if found is None:
            conn.execute("INSERT OR IGNORE INTO meta(key, value) VALUES ('format', ?)", (str(STORE_FORMAT),))
            conn.execute("INSERT OR IGNORE INTO meta(key, value) VALUES ('vector_epoch', '0')")
        else:
            if found < 2:
                _migrate_1_to_2(conn)
            if found < 3:
                _migrate_2_to_3(conn)
            # 3 -> 4: memory_usage (created above, empty: nothing was pending)
            conn.execute("UPDATE meta SET value=? WHERE key='format'", (str(STORE_FORMAT),))
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def _migrate_1_to_2(conn: sqlite3.Connection) -> None:
    conn.execute("DROP TRIGGER IF EXISTS tr_mem_update")  # v1 also fired on the JSON body
    for stmt in _statements(SCHEMA_SQL):
        if "tr_mem_update" in stmt:
            conn.execute(stmt)
    # seq was a store-wide counter; it stays monotonic within each scope, so the scope counters
    # continue from the scope's maximum. Pending writes: none (decision_seq = seq).
    conn.execute("INSERT OR IGNORE INTO scopes(user_id, agent_id, seq, decision_seq) "
                 "SELECT user_id, agent_id, max(seq), max(seq) FROM memories GROUP BY user_id, agent_id")
    conn.execute("INSERT OR IGNORE INTO memory_links(mem_rowid, kind, target_id) "
                 "SELECT rowid, 'supersedes', json_extract(record, '$.metadata.attributes.supersedes') "
                 "FROM memories WHERE json_extract(record, '$.metadata.attributes.supersedes') IS NOT NULL")
    conn.execute("DELETE FROM meta WHERE key='seq'")


def _migrate_2_to_3(conn: sqlite3.Connection) -> None:
    # existing vectors are float32 (their rows say so); archived ones move to the cold format with
    # `memir compact` (MemoryStore.admin_compact_vectors), those archived from now on as they go
    cols = {r[1] for r in conn.execute("PRAGMA table_info(vectors)")}
    if "fmt" not in cols:
        conn.execute("ALTER TABLE vectors ADD COLUMN fmt TEXT NOT NULL DEFAULT 'float32'")


def _statements(script: str) -> list[str]:
    """Split the schema script into statements (triggers contain ``;`` inside BEGIN … END)."""
    out, buf = [], []
    for line in script.splitlines():
        if line.strip().startswith("--") or not line.strip():
            continue
        buf.append(line)
        joined = "\n".join(buf)
        if joined.rstrip().endswith(";") and (("BEGIN" not in joined) or joined.rstrip().endswith("END;")):
            out.append(joined)
            buf = []
    if buf:
        out.append("\n".join(buf))
    return out


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
