"""The PostgreSQL layout of a memir store, its migrations, and row-level security.

The same typed MemIR columns as the SQLite layout (:mod:`runtime.store.sqlite.schema`), the same
record JSON (``text``, so a record round-trips byte for byte), working memories' vectors in
pgvector's ``vector`` type with one HNSW index per large scope and encoder, archived memories'
in the store's cold format as ``bytea`` (:mod:`.vectors`). Every table that holds a scope's data carries
``user_id``/``agent_id`` (child tables fill them from the transaction's scope settings by
default) and a row-level-security policy: the role a scope runs as (:data:`APP_ROLE`, neither
superuser nor owner, no ``BYPASSRLS``) sees and writes only rows of the scope named by
``memir.user_id`` / ``memir.agent_id``, which the store sets per transaction with ``SET LOCAL``.
A query that forgets its tenant clause still gets only that scope's rows.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from ...errors import NotFoundError, ValidationError
from ..scope_cache import CODED_COLUMNS, FLOAT_COLUMNS

__all__ = ["APP_ROLE", "STORE_FORMAT", "TENANT_TABLES", "HnswSettings", "hnsw_index_sql", "migrate"]

STORE_FORMAT = 4
"""Version of this layout (independent of the SQLite layout's). 1: the first release. 2: vectors
carry their format (``fmt``): float32 in ``vec`` (the working tier), float16/int8 in ``cold`` with
``vec`` NULL (the archive, in the store's cold format: :mod:`runtime.store.tiers`). 3: the
``feedback`` table. 4: ``scopes.vector_epoch``, moved by triggers whenever a scope's stored
vectors or filter columns change or go (what an in-process search cache checks: :mod:`.vector_cache`)."""

APP_ROLE = "memir_app"
"""The role every scoped transaction runs as (``SET LOCAL ROLE``); created on first migration."""

_LOCK_KEY = 0x6D656D6972  # "memir": one advisory lock serialises concurrent migrations

_SCOPE_COLS = ("user_id text NOT NULL DEFAULT current_setting('memir.user_id'), "
               "agent_id text NOT NULL DEFAULT current_setting('memir.agent_id')")

# a float32 vector is in `vec` (pgvector: the HNSW index covers it), a cold one in `cold`, never both
_VEC_CHECK = ("vectors_fmt_check CHECK ((fmt = 'float32' AND vec IS NOT NULL AND cold IS NULL) "
              "OR (fmt IN ('float16', 'int8') AND vec IS NULL AND cold IS NOT NULL))")

_EPOCH_SEQ = "memir_vector_epoch"
"""Store-wide sequence of vector epochs: a value is never reused, so a scope deleted and written
again never gets an epoch a stale cache could mistake for its own."""

# (table, CREATE statement); the tenant tables all get the same RLS policy.
_TABLES: list[tuple[str, str]] = [
    ("memir_meta", "CREATE TABLE IF NOT EXISTS memir_meta (key text PRIMARY KEY, value text NOT NULL)"),
    ("memories", """CREATE TABLE IF NOT EXISTS memories (
        rowid bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        id text NOT NULL UNIQUE,
        user_id text NOT NULL,
        agent_id text NOT NULL,
        seq bigint NOT NULL,
        tier text NOT NULL DEFAULT 'working',
        source_type text NOT NULL,
        session_id text,
        active_role text NOT NULL,
        sub_role text,
        dialog_role text NOT NULL,
        task_id text,
        created_at double precision NOT NULL,
        event_time double precision NOT NULL,
        expires_at double precision,
        confidence double precision NOT NULL,
        half_life_s double precision,
        sensitivity text NOT NULL,
        access_count bigint NOT NULL DEFAULT 0,
        last_accessed_at double precision,
        utility double precision,
        retention_reason text,
        record text NOT NULL)"""),
    ("memory_tags", f"""CREATE TABLE IF NOT EXISTS memory_tags (
        mem_rowid bigint NOT NULL REFERENCES memories(rowid) ON DELETE CASCADE,
        tag text NOT NULL, {_SCOPE_COLS}, PRIMARY KEY (mem_rowid, tag))"""),
    ("memory_parents", f"""CREATE TABLE IF NOT EXISTS memory_parents (
        mem_rowid bigint NOT NULL REFERENCES memories(rowid) ON DELETE CASCADE,
        parent_id text NOT NULL, {_SCOPE_COLS}, PRIMARY KEY (mem_rowid, parent_id))"""),
    ("memory_links", f"""CREATE TABLE IF NOT EXISTS memory_links (
        mem_rowid bigint NOT NULL REFERENCES memories(rowid) ON DELETE CASCADE,
        kind text NOT NULL, target_id text NOT NULL, {_SCOPE_COLS}, PRIMARY KEY (mem_rowid, kind, target_id))"""),
    ("memory_context", f"""CREATE TABLE IF NOT EXISTS memory_context (
        mem_rowid bigint PRIMARY KEY REFERENCES memories(rowid) ON DELETE CASCADE,
        features bytea NOT NULL, {_SCOPE_COLS})"""),
    ("scopes", """CREATE TABLE IF NOT EXISTS scopes (
        user_id text NOT NULL, agent_id text NOT NULL,
        seq bigint NOT NULL DEFAULT 0, decision_seq bigint NOT NULL DEFAULT 0,
        open_session text, session_last_at double precision,
        vector_epoch bigint NOT NULL DEFAULT nextval('memir_vector_epoch'),
        PRIMARY KEY (user_id, agent_id))"""),
    ("vectors", f"""CREATE TABLE IF NOT EXISTS vectors (
        mem_rowid bigint PRIMARY KEY REFERENCES memories(rowid) ON DELETE CASCADE,
        encoder_id text NOT NULL, dim integer NOT NULL, vec vector, cold bytea,
        fmt text NOT NULL DEFAULT 'float32', {_SCOPE_COLS}, CONSTRAINT {_VEC_CHECK})"""),
    ("recall_log", f"""CREATE TABLE IF NOT EXISTS recall_log (
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, {_SCOPE_COLS},
        at double precision NOT NULL, payload text NOT NULL)"""),
    ("feedback", f"""CREATE TABLE IF NOT EXISTS feedback (
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, {_SCOPE_COLS},
        at double precision NOT NULL, kind text NOT NULL, value double precision, memory_id text, task_id text,
        session_id text, arms text NOT NULL)"""),
    ("decisions", f"""CREATE TABLE IF NOT EXISTS decisions (
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, decision_id text NOT NULL UNIQUE, {_SCOPE_COLS},
        at double precision NOT NULL, payload text NOT NULL)"""),
    ("decision_items", f"""CREATE TABLE IF NOT EXISTS decision_items (
        decision_rowid bigint NOT NULL REFERENCES decisions(id) ON DELETE CASCADE,
        memory_id text NOT NULL, kept boolean NOT NULL, reason text NOT NULL, payload text NOT NULL,
        {_SCOPE_COLS}, PRIMARY KEY (decision_rowid, memory_id))"""),
]

TENANT_TABLES = tuple(name for name, _ in _TABLES if name != "memir_meta")
"""Every table holding a scope's data (each has ``user_id``, ``agent_id`` and an RLS policy)."""

_INDEXES = [
    "CREATE INDEX IF NOT EXISTS ix_mem_scope_tier ON memories(user_id, agent_id, tier, seq)",
    "CREATE INDEX IF NOT EXISTS ix_mem_scope_session ON memories(user_id, agent_id, session_id)",
    "CREATE INDEX IF NOT EXISTS ix_mem_scope_role ON memories(user_id, agent_id, active_role, sub_role)",
    "CREATE INDEX IF NOT EXISTS ix_mem_scope_time ON memories(user_id, agent_id, event_time)",
    "CREATE INDEX IF NOT EXISTS ix_mem_scope_expiry ON memories(user_id, agent_id, expires_at)",
    # scope first: a tag filter probes this scope's rows with that tag, never every scope's
    "CREATE INDEX IF NOT EXISTS ix_tags_scope_tag ON memory_tags(user_id, agent_id, tag, mem_rowid)",
    "CREATE INDEX IF NOT EXISTS ix_parents_parent ON memory_parents(parent_id)",
    "CREATE INDEX IF NOT EXISTS ix_links_target ON memory_links(kind, target_id)",
    "CREATE INDEX IF NOT EXISTS ix_vectors_scope ON vectors(user_id, agent_id, encoder_id)",
    "CREATE INDEX IF NOT EXISTS ix_recall_scope ON recall_log(user_id, agent_id, at)",
    "CREATE INDEX IF NOT EXISTS ix_feedback_scope ON feedback(user_id, agent_id, at)",
    "CREATE INDEX IF NOT EXISTS ix_decisions_scope ON decisions(user_id, agent_id, at)",
    "CREATE INDEX IF NOT EXISTS ix_decision_items_mem ON decision_items(memory_id)",
]

# The scope's vector epoch moves whenever rows a search cache mirrors change or go. Statement-level
# triggers: one bump per statement, whatever the number of rows. The scope is the transaction's
# (``memir.user_id``/``memir.agent_id``, set by every scoped transaction); an admin transaction has
# none and may have touched any scope, so it moves them all. Deleting memories cascades to their
# vectors row by row (each cascade a statement of its own), so the vectors trigger skips cascades
# (trigger depth > 0): the memories trigger has covered them. An UPDATE of memories moves the epoch
# only when it sets a column the cache filters on (not the usage counters every recall updates).
_EPOCH_SQL = [
    f"""CREATE OR REPLACE FUNCTION memir_bump_vector_epoch() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE
        u text := current_setting('memir.user_id', true);
        a text := current_setting('memir.agent_id', true);
    BEGIN
        IF coalesce(u, '') = '' THEN
            UPDATE scopes SET vector_epoch = nextval('{_EPOCH_SEQ}');
        ELSE
            UPDATE scopes SET vector_epoch = nextval('{_EPOCH_SEQ}') WHERE user_id = u AND agent_id = a;
        END IF;
        RETURN NULL;
    END $$""",
    "CREATE OR REPLACE TRIGGER vectors_epoch_update AFTER UPDATE ON vectors "
    "FOR EACH STATEMENT EXECUTE FUNCTION memir_bump_vector_epoch()",
    "CREATE OR REPLACE TRIGGER vectors_epoch_delete AFTER DELETE ON vectors "
    "FOR EACH STATEMENT WHEN (pg_trigger_depth() < 1) EXECUTE FUNCTION memir_bump_vector_epoch()",
    f"CREATE OR REPLACE TRIGGER memories_epoch_update AFTER UPDATE OF {', '.join(CODED_COLUMNS + FLOAT_COLUMNS)} "
    "ON memories FOR EACH STATEMENT EXECUTE FUNCTION memir_bump_vector_epoch()",
    "CREATE OR REPLACE TRIGGER memories_epoch_delete AFTER DELETE ON memories "
    "FOR EACH STATEMENT EXECUTE FUNCTION memir_bump_vector_epoch()",
    "CREATE OR REPLACE TRIGGER tags_epoch_delete AFTER DELETE ON memory_tags "
    "FOR EACH STATEMENT WHEN (pg_trigger_depth() < 1) EXECUTE FUNCTION memir_bump_vector_epoch()",
]

# The scope a transaction runs as; missing_ok=true makes an unscoped session see nothing, not fail.
_TENANT = ("user_id = current_setting('memir.user_id', true) "
           "AND agent_id = current_setting('memir.agent_id', true)")


@dataclass(frozen=True)
class HnswSettings:
    """pgvector HNSW parameters (``StoreConfig.hnsw_*``).

    Attributes:
        m: links per node (pgvector: 2–100). More: better recall, a larger index, slower builds.
        ef_construction: candidate list while building (4–1000, at least ``2 × m``).
        ef_search: candidate list while searching (1–1000); ``None`` = ``4 ×`` the recall's candidate
            pool, between 100 and 1000. A search asks the index for the candidate pool, so a value
            below it is raised to it.
    """

    m: int = 16
    ef_construction: int = 64
    ef_search: int | None = None

    def search_ef(self, pool: int) -> int:
        """The ``hnsw.ef_search`` a search for ``pool`` candidates runs with."""
        if self.ef_search is None:
            return min(1000, max(100, 4 * pool))
        return min(1000, max(self.ef_search, pool))


def hnsw_index_sql(user_id: str, agent_id: str, encoder_id: str, dim: int,
                   settings: HnswSettings = HnswSettings()) -> tuple[str, str]:
    """(index name, ``CREATE INDEX CONCURRENTLY`` statement) for one large scope's HNSW index.

    Each scope past the exact-search threshold gets an index of its own, restricted to its rows
    and its encoder: a search walks only its own vectors (no post-filtering of other tenants'
    neighbours), small scopes pay no index maintenance on write, and pgvector's fixed-dimension
    requirement is met by indexing ``vec::vector(dim)``. The name does not depend on ``settings``:
    they apply to indexes built after they are set (drop an index to rebuild it with new ones).
    """
    if not isinstance(dim, int) or not 0 < dim <= 2000:
        raise ValidationError(f"pgvector's HNSW index supports 1–2000 dimensions, the encoder has {dim}",
                              field="embedder.dim")
    name = "ix_vec_hnsw_" + hashlib.sha1(f"{user_id}\x00{agent_id}\x00{encoder_id}\x00{dim}".encode()).hexdigest()[:20]

    def lit(x: str) -> str:
        return "'" + x.replace("'", "''") + "'"

    return name, (f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON vectors USING hnsw ((vec::vector({dim})) "
                  f"vector_ip_ops) WITH (m = {int(settings.m)}, ef_construction = {int(settings.ef_construction)}) WHERE user_id = {lit(user_id)} "
                  f"AND agent_id = {lit(agent_id)} AND encoder_id = {lit(encoder_id)} AND dim = {dim}")


def migrate(conn: Any, *, create: bool, where: str) -> None:
    """Create the schema, the app role and the RLS policies, or check an existing store's format,
    in one transaction under an advisory lock (several clients may open a new store at once).

    ``conn``: an autocommit psycopg connection as the store's owner (the URL's user).

    Raises:
        NotFoundError: no memir schema there and ``create`` is False.
        ValidationError: the database holds a newer memir layout, or the user may not create
            what the store needs (the message names the privilege).
    """
    import psycopg

    try:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
            found = _format(conn)
            if found is not None and found > STORE_FORMAT:
                raise ValidationError(f"{where} has memir store format {found}, this memir reads up to "
                                      f"{STORE_FORMAT}; upgrade memir to open it", field="memir_meta.format")
            if found == STORE_FORMAT and _role_ready(conn):
                return
            if found is None and not create:
                raise NotFoundError(f"no memir store at {where}; open it with create=True (CLI: --create)")
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            conn.execute(f"CREATE SEQUENCE IF NOT EXISTS {_EPOCH_SEQ}")
            for _, ddl in _TABLES:
                conn.execute(ddl)
            if found is not None and found < 2:
                _migrate_1_to_2(conn)
            if found is not None and found < STORE_FORMAT:  # 2 -> 3: the feedback table (created above)
                conn.execute(f"ALTER TABLE scopes ADD COLUMN IF NOT EXISTS vector_epoch bigint NOT NULL "
                             f"DEFAULT nextval('{_EPOCH_SEQ}')")  # 3 -> 4
                conn.execute("UPDATE memir_meta SET value = %s WHERE key = 'format'", (str(STORE_FORMAT),))
            for ddl in _INDEXES + _EPOCH_SQL:
                conn.execute(ddl)
            conn.execute("INSERT INTO memir_meta(key, value) VALUES ('format', %s) ON CONFLICT (key) DO NOTHING",
                         (str(STORE_FORMAT),))
            _secure(conn)
    except psycopg.errors.InsufficientPrivilege as e:
        raise ValidationError(
            f"the user of {where} may not set up a memir store: {e.diag.message_primary}. It needs CREATE on the "
            f"database (for the vector extension: superuser, or the extension created beforehand), CREATEROLE "
            f"(or a role {APP_ROLE!r} created beforehand and granted to it)", field="url") from e


def _migrate_1_to_2(conn: Any) -> None:
    """Vectors carry their format. Existing vectors are float32 (``fmt`` defaults to it, no rewrite);
    archived ones move to the cold format on ``compact_vectors`` (or when a decision next touches them)."""
    conn.execute("ALTER TABLE vectors ALTER COLUMN vec DROP NOT NULL, ADD COLUMN IF NOT EXISTS cold bytea, "
                 "ADD COLUMN IF NOT EXISTS fmt text NOT NULL DEFAULT 'float32'")
    if conn.execute("SELECT 1 FROM pg_constraint WHERE conrelid = 'vectors'::regclass "
                    "AND conname = 'vectors_fmt_check'").fetchone() is None:
        conn.execute(f"ALTER TABLE vectors ADD CONSTRAINT {_VEC_CHECK}")
    conn.execute("UPDATE memir_meta SET value = %s WHERE key = 'format'", (str(STORE_FORMAT),))


def _format(conn: Any) -> int | None:
    if conn.execute("SELECT to_regclass('memir_meta')").fetchone()[0] is None:
        if conn.execute("SELECT 1 FROM information_schema.tables WHERE table_schema = current_schema() "
                        "AND table_name = 'memories'").fetchone():
            raise ValidationError("this database has a 'memories' table but no memir metadata: it belongs to "
                                  "another application; give memir a database (or schema) of its own", field="url")
        return None
    row = conn.execute("SELECT value FROM memir_meta WHERE key = 'format'").fetchone()
    return int(row[0]) if row else None


def _role_ready(conn: Any) -> bool:
    """The app role exists and this user may switch to it."""
    return bool(conn.execute("SELECT pg_has_role(current_user, %s, 'MEMBER') FROM pg_roles WHERE rolname = %s",
                             (APP_ROLE, APP_ROLE)).fetchone() or False)


def _secure(conn: Any) -> None:
    """The app role, its grants, and the tenant policy on every tenant table."""
    if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (APP_ROLE,)).fetchone() is None:
        conn.execute(f"CREATE ROLE {APP_ROLE} NOLOGIN NOSUPERUSER NOBYPASSRLS NOINHERIT")
    if not conn.execute("SELECT pg_has_role(current_user, %s, 'MEMBER')", (APP_ROLE,)).fetchone()[0]:
        conn.execute(f"GRANT {APP_ROLE} TO CURRENT_USER")
    conn.execute(f"GRANT USAGE ON SCHEMA {_schema(conn)} TO {APP_ROLE}")
    conn.execute(f"GRANT SELECT ON memir_meta TO {APP_ROLE}")
    conn.execute(f"GRANT USAGE ON SEQUENCE {_EPOCH_SEQ} TO {APP_ROLE}")
    for table in TENANT_TABLES:
        conn.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON {table} TO {APP_ROLE}")
        conn.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
        conn.execute(f"DROP POLICY IF EXISTS memir_tenant ON {table}")
        conn.execute(f"CREATE POLICY memir_tenant ON {table} TO {APP_ROLE} USING ({_TENANT}) WITH CHECK ({_TENANT})")


def _schema(conn: Any) -> str:
    from psycopg import sql

    name = conn.execute("SELECT current_schema()").fetchone()[0]
    return sql.Identifier(name).as_string(conn)
