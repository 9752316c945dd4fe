"""The PostgreSQL the store tests run against: a server named by ``MEMIR_PG_DSN``, or one the
session starts from the ``pgserver`` wheel (as the unprivileged ``postgres`` OS user when the
tests run as root). Each test gets fresh databases cloned from a migrated template.

If the server cannot start, every PostgreSQL test fails with the reason: they never skip.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from runtime import MemoryStore
from runtime.encoders import HashEmbedder
from runtime.store.postgres.local import LocalPostgres

TEMPLATE = "memir_test_template"


class PgServer:
    """Fresh databases on one server. ``admin_dsn`` connects as a user allowed to create databases."""

    def __init__(self, admin_dsn: str, local: LocalPostgres | None = None) -> None:
        self.admin_dsn = admin_dsn
        self.local = local
        self._made: list[str] = []
        self._template_ready = False

    def url(self, database: str) -> str:
        p = urlsplit(self.admin_dsn)
        return urlunsplit((p.scheme, p.netloc, f"/{database}", p.query, p.fragment))

    def _admin(self):  # type: ignore[no-untyped-def]
        import psycopg

        return psycopg.connect(self.admin_dsn, autocommit=True)

    def _template(self) -> None:
        if self._template_ready:
            return
        with self._admin() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{TEMPLATE}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{TEMPLATE}"')
        MemoryStore.open(self.url(TEMPLATE), embedder=HashEmbedder(dim=8)).close()  # migrate once
        self._template_ready = True

    def fresh(self) -> str:
        """The URL of a new, migrated, empty database (dropped by :meth:`drop_all`)."""
        self._template()
        name = f"memir_t_{uuid.uuid4().hex[:12]}"
        with self._admin() as conn:
            conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{TEMPLATE}"')
        self._made.append(name)
        return self.url(name)

    def fresh_empty(self) -> str:
        """The URL of a new database with no memir schema (dropped by :meth:`drop_all`)."""
        name = f"memir_e_{uuid.uuid4().hex[:12]}"
        with self._admin() as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        self._made.append(name)
        return self.url(name)

    def drop_all(self) -> None:
        with self._admin() as conn:
            for name in self._made:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        self._made.clear()

    def close(self) -> None:
        self.drop_all()
        if self.local is not None:
            self.local.stop()


_CURRENT: list[PgServer] = []


def is_url(target: object) -> bool:
    return isinstance(target, str) and target.startswith(("postgresql://", "postgres://"))


def _url_of(store_path: str) -> str:
    """The admin URL of the database a store's (password-free) ``path`` names."""
    assert _CURRENT, "no PostgreSQL server in this session"
    return _CURRENT[0].url(urlsplit(store_path).path.lstrip("/"))


def table_counts(store_path: str, tables: tuple[str, ...]) -> dict[str, int]:
    """Row counts as the superuser sees them (every scope; what is really committed)."""
    import psycopg

    with psycopg.connect(_url_of(store_path), autocommit=True) as conn:
        return {t: int(conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]) for t in tables}


def stored_bytes(store_path: str) -> dict[str, bytes]:
    """Every file of the store's database in the data directory (tables, TOAST, indexes, free-space
    and visibility maps), read through the server after a ``CHECKPOINT`` has written every dirty
    page out — so a deleted row still in shared buffers would be written, and found, too."""
    import psycopg

    with psycopg.connect(_url_of(store_path), autocommit=True) as conn:
        conn.execute("CHECKPOINT")
        oid = conn.execute("SELECT oid FROM pg_database WHERE datname = current_database()").fetchone()[0]
        out = {}
        for (name,) in conn.execute("SELECT pg_ls_dir(%s)", (f"base/{oid}",)).fetchall():
            if name[0].isdigit():
                out[f"base/{oid}/{name}"] = bytes(conn.execute("SELECT pg_read_binary_file(%s)",
                                                               (f"base/{oid}/{name}",)).fetchone()[0])
    return out


def start_server() -> Iterator[PgServer]:
    """The session's server (``MEMIR_PG_DSN`` wins over starting one)."""
    dsn = os.environ.get("MEMIR_PG_DSN")
    base: Path | None = None
    if dsn:
        server = PgServer(dsn)
    else:
        base = Path(tempfile.mkdtemp(prefix="memir-pgdata-"))
        os.chmod(base, 0o755)
        local = LocalPostgres(base / "data").start()
        server = PgServer(local.dsn("postgres"), local)
    _CURRENT.append(server)
    try:
        yield server
    finally:
        _CURRENT.remove(server)
        server.close()
        if base is not None:  # the session's cluster goes with the session
            shutil.rmtree(base, ignore_errors=True)
