"""``LocalPostgres`` as root: when the server's OS user cannot run the venv's binaries, it runs a copy
from the temp directory — never one someone else planted under the shared copy's name."""

from __future__ import annotations

import os
import pwd
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime.store.postgres.local import LocalPostgres, pgserver_bin, shared_copy_dir

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the copy is made only when this process is root")


@pytest.fixture
def shared_tmp(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A temp directory of the test's own (the server's OS user can reach it), with the venv's
    binaries counted out of that user's reach, so the server runs from a copy in it."""
    d = Path(tempfile.mkdtemp(prefix="memir-test-tmp-"))
    os.chmod(d, 0o755)
    monkeypatch.setattr(tempfile, "tempdir", str(d))
    real = LocalPostgres._can_run
    monkeypatch.setattr(LocalPostgres, "_can_run",
                        lambda self, bin_dir: bin_dir != pgserver_bin() and real(self, bin_dir))
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _planted(dest: Path, owner: str) -> Path:
    """A look-alike of the shared copy whose ``postgres`` program leaves a mark when run."""
    mark = dest.parent / "planted-ran"
    bin_dir = dest / "pgserver" / "pginstall" / "bin"
    bin_dir.mkdir(parents=True)
    (dest / ".complete").touch()
    for name in ("postgres", "initdb", "pg_ctl"):
        (bin_dir / name).write_text(f"#!/bin/sh\ntouch {mark}\nexit 0\n")
        os.chmod(bin_dir / name, 0o755)
    user = pwd.getpwnam(owner)
    for root, dirs, files in os.walk(dest):
        for x in [root, *(os.path.join(root, f) for f in dirs + files)]:
            os.chown(x, user.pw_uid, user.pw_gid)
    return mark


def _serves(pg: LocalPostgres) -> bool:
    import psycopg

    with psycopg.connect(pg.dsn("postgres")) as conn:
        return conn.execute("SELECT 1").fetchone() == (1,)


def test_a_copy_made_by_another_user_is_never_run(shared_tmp: Path) -> None:
    dest = shared_copy_dir()
    assert dest.parent == shared_tmp
    mark = _planted(dest, "postgres")  # any OS user other than this one
    data = shared_tmp / "data"
    with LocalPostgres(data) as pg:
        assert _serves(pg)
        assert not mark.exists()
        private = [p for p in shared_tmp.iterdir() if p.name.startswith("memir-pginstall-") and p != dest]
        assert len(private) == 1  # the server's own copy
    assert not private[0].exists()  # removed with the server
    assert not mark.exists()


def test_a_copy_others_can_write_is_never_run(shared_tmp: Path) -> None:
    dest = shared_copy_dir()
    mark = _planted(dest, "root")
    os.chmod(dest / "pgserver" / "pginstall" / "bin", 0o777)
    with LocalPostgres(shared_tmp / "data") as pg:
        assert _serves(pg)
    assert not mark.exists()


def test_the_shared_copy_is_made_once_and_reused(shared_tmp: Path) -> None:
    dest = shared_copy_dir()
    with LocalPostgres(shared_tmp / "a") as pg:
        assert _serves(pg)
    assert (dest / ".complete").exists()
    made = os.stat(dest / "pgserver" / "pginstall" / "bin" / "postgres").st_ino
    with LocalPostgres(shared_tmp / "b") as pg:
        assert _serves(pg)
    assert os.stat(dest / "pgserver" / "pginstall" / "bin" / "postgres").st_ino == made
    assert [p for p in shared_tmp.iterdir() if p.name.startswith("memir-pginstall-")] == [dest]
