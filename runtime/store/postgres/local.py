"""A local PostgreSQL 16 + pgvector server from the ``pgserver`` wheel, for development and tests.

``pgserver`` bundles the PostgreSQL binaries and the pgvector extension, so a memir developer (or
the test suite, or CI) gets a real server with one ``pip install``. PostgreSQL refuses to run as
root; when this process is root, the server runs as an unprivileged OS user (``postgres`` by
default, which the Debian image provides) that owns the data directory.

Example:
    >>> from runtime.store.postgres.local import LocalPostgres
    >>> with LocalPostgres("/tmp/memir-pg") as pg:                    # doctest: +SKIP
    ...     store = MemoryStore.open(pg.dsn("memir"))

This is not how production runs Postgres: point ``MemoryStore.open`` at your server's URL.
"""

from __future__ import annotations

import importlib.util
import os
import pwd
import shutil
import socket
import stat
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from ...errors import MemirError

__all__ = ["LocalPostgres", "LocalPostgresError", "pgserver_bin", "shared_copy_dir"]


class LocalPostgresError(MemirError):
    """The local server could not be installed, initialised or started (the message says why)."""


def pgserver_bin() -> Path:
    """The directory of the PostgreSQL binaries bundled by ``pgserver``."""
    spec = importlib.util.find_spec("pgserver")  # only its files are used: importing it starts machinery
    if spec is None or not spec.submodule_search_locations:
        raise LocalPostgresError("the local PostgreSQL needs the `pgserver` package: "
                                 "pip install 'memir-runtime[postgres-local]'")
    return Path(list(spec.submodule_search_locations)[0]) / "pginstall" / "bin"


class LocalPostgres:
    """Initialise (once) and run a PostgreSQL server on a data directory; stop it on :meth:`stop`.

    Args:
        data_dir: the cluster's directory (created by ``initdb`` when empty or missing).
        os_user: the OS user the server runs as when this process is root (ignored otherwise).
        port: TCP port on 127.0.0.1; ``None`` picks a free one. The server also listens on a
            Unix socket in a short private directory, which :meth:`dsn` uses.
    """

    def __init__(self, data_dir: str | Path, *, os_user: str = "postgres", port: int | None = None) -> None:
        self.data_dir = Path(data_dir).resolve()
        self.port = port or _free_port()
        self._root = os.geteuid() == 0
        self._user: pwd.struct_passwd | None = None
        if self._root:
            try:
                self._user = pwd.getpwnam(os_user)
            except KeyError as e:
                raise LocalPostgresError(
                    f"running as root, PostgreSQL must run as an unprivileged OS user, and {os_user!r} does not "
                    f"exist; create it (useradd --system {os_user}) or pass os_user=") from e
        self.socket_dir = Path(tempfile.mkdtemp(prefix="memirpg-"))  # Unix socket paths must be short
        self._chown(self.socket_dir)
        self._started = False
        self._bin = pgserver_bin()
        self._private_copy: Path | None = None  # a copy of the binaries for this server alone, removed at stop

    # ------------------------------------------------------------------ lifecycle
    def start(self, timeout_s: float = 60.0) -> LocalPostgres:
        """``initdb`` if needed, then ``pg_ctl start``; returns self once it accepts connections.

        Raises:
            LocalPostgresError: with the server log's tail when it cannot start.
        """
        bin_dir = self._reachable_bin()
        self._bin = bin_dir
        if not (self.data_dir / "PG_VERSION").exists():
            self.data_dir.mkdir(parents=True, exist_ok=True)
            self._chown(self.data_dir)
            self._run([str(bin_dir / "initdb"), "-D", str(self.data_dir), "-U", "postgres", "--auth=trust",
                       "--encoding=UTF8", "--locale=C"], "initdb")
        log = self.data_dir / "server.log"
        opts = (f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.socket_dir} "
                f"-c max_connections=200 -c shared_buffers=256MB -c fsync=on")
        self._run([str(bin_dir / "pg_ctl"), "-D", str(self.data_dir), "-l", str(log), "-w",
                   "-t", str(int(timeout_s)), "-o", opts, "start"], "pg_ctl start", log=log)
        self._started = True
        return self

    def stop(self) -> None:
        """Stop the server (fast shutdown). Idempotent."""
        if not self._started:
            return
        self._started = False
        try:
            self._run([str(self._bin / "pg_ctl"), "-D", str(self.data_dir), "-m", "fast", "-w", "stop"],
                      "pg_ctl stop")
        finally:
            shutil.rmtree(self.socket_dir, ignore_errors=True)
            if self._private_copy is not None:
                shutil.rmtree(self._private_copy, ignore_errors=True)
                self._private_copy = None

    def __enter__(self) -> LocalPostgres:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ connecting
    def dsn(self, database: str = "postgres", *, tcp: bool = False) -> str:
        """A connection URL for ``database`` (created on first request) as the superuser ``postgres``."""
        if database != "postgres":
            self.create_database(database)
        if tcp:
            return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"
        return f"postgresql://postgres@/{database}?host={self.socket_dir}&port={self.port}"

    def create_database(self, name: str) -> None:
        """``CREATE DATABASE name`` unless it exists."""
        import psycopg

        with psycopg.connect(self.dsn("postgres"), autocommit=True) as conn:
            if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone() is None:
                conn.execute(f'CREATE DATABASE "{name}"')

    # ------------------------------------------------------------------ helpers
    def _reachable_bin(self) -> Path:
        """The binaries, where the server's OS user can run them. A venv inside a private directory
        (a ``mktemp -d`` checkout, a home directory) is out of its reach: then the bundled install
        (34 MB) is copied once into the temp directory, readable by everyone, and reused by later
        servers of the same install — but only a copy this OS user made and no one else can write:
        a directory of that name made by anyone else is never run (a private copy is made instead)."""
        bin_dir = pgserver_bin()
        if self._user is None or self._can_run(bin_dir):
            return bin_dir
        src = bin_dir.parent
        dest = shared_copy_dir()
        if not (dest / ".complete").exists():
            tmp = _copy_install(src)
            try:
                os.rename(tmp / "i", dest)
            except OSError:  # another process won the race (or the name is taken): see below whose copy it is
                shutil.rmtree(tmp, ignore_errors=True)
            else:
                os.rmdir(tmp)
        if not _own_copy(dest):
            tmp = _copy_install(src)
            self._private_copy = tmp
            dest = tmp / "i"
        dest = dest / "pgserver" / "pginstall"
        if not self._can_run(dest / "bin"):
            raise LocalPostgresError(f"the OS user {self._user and self._user.pw_name!r} cannot run PostgreSQL from "
                                     f"{src} nor from a copy in {dest}")
        return dest / "bin"

    def _can_run(self, bin_dir: Path) -> bool:
        kwargs: dict[str, Any] = {}
        if self._user is not None:
            kwargs = {"user": self._user.pw_uid, "group": self._user.pw_gid, "extra_groups": [], "cwd": "/"}
        try:
            return subprocess.run([str(bin_dir / "postgres"), "--version"], capture_output=True, check=False,
                                  **kwargs).returncode == 0
        except OSError:
            return False

    def _chown(self, path: Path) -> None:
        if self._user is not None:
            os.chown(path, self._user.pw_uid, self._user.pw_gid)

    def _run(self, cmd: list[str], what: str, log: Path | None = None) -> None:
        kwargs: dict[str, Any] = {}
        if self._user is not None:
            kwargs = {"user": self._user.pw_uid, "group": self._user.pw_gid, "extra_groups": [],
                      "cwd": str(self.data_dir.parent)}
        env = {**os.environ, "LC_ALL": "C", "HOME": self._user.pw_dir if self._user else os.environ.get("HOME", "/")}
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False, **kwargs)
        if proc.returncode != 0:
            tail = ""
            if log is not None and log.exists():
                tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:])
            raise LocalPostgresError(f"{what} failed ({proc.returncode}): {(proc.stderr or proc.stdout).strip()}"
                                     + (f"\nserver log:\n{tail}" if tail else ""))


def shared_copy_dir() -> Path:
    """Where :class:`LocalPostgres` keeps its one copy of this install's binaries when the server's
    OS user cannot run them where they are: a name in the temp directory tied to the install."""
    stamp = os.stat(pgserver_bin().parent)
    return Path(tempfile.gettempdir()) / f"memir-pginstall-{stamp.st_ino}-{int(stamp.st_mtime)}"


def _copy_install(src: Path) -> Path:
    """A fresh temporary directory holding ``i/``: a copy of ``pgserver``'s install ``src`` laid out as
    in site-packages (the binaries find their shared libraries at ``$ORIGIN/../../../pgserver.libs``,
    an auditwheel layout), readable and runnable by every OS user, writable by this one alone."""
    site = src.parent.parent
    tmp = Path(tempfile.mkdtemp(prefix="memir-pginstall-", dir=tempfile.gettempdir()))
    shutil.copytree(src, tmp / "i" / "pgserver" / "pginstall", symlinks=True)
    if (site / "pgserver.libs").is_dir():
        shutil.copytree(site / "pgserver.libs", tmp / "i" / "pgserver.libs", symlinks=True)
    (tmp / "i" / ".complete").touch()
    for d in (tmp, tmp / "i", tmp / "i" / "pgserver"):
        os.chmod(d, 0o755)
    return tmp


def _own_copy(dest: Path) -> bool:
    """Whether ``dest`` is a finished copy of the binaries that this OS user made and only it can
    write: every directory on the way to the programs, and the programs themselves."""
    inst = dest / "pgserver" / "pginstall"
    paths = [dest, dest / "pgserver", inst, inst / "bin", dest / ".complete",
             *(inst / "bin" / name for name in ("postgres", "initdb", "pg_ctl"))]
    try:
        stats = [os.lstat(p) for p in paths]
    except OSError:
        return False
    return all(st.st_uid == os.geteuid() and not st.st_mode & 0o022 and not stat.S_ISLNK(st.st_mode)
               for st in stats)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until_ready(dsn: str, timeout_s: float = 30.0) -> None:
    """Poll until ``dsn`` accepts a connection (for a server started elsewhere)."""
    import psycopg

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            psycopg.connect(dsn).close()
            return
        except psycopg.OperationalError as e:
            if time.monotonic() > deadline:
                raise LocalPostgresError(f"no PostgreSQL at {dsn} after {timeout_s:g} s: {e}") from e
            time.sleep(0.2)
