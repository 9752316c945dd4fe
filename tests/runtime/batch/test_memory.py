"""Batch scoring gives memory back promptly: mimalloc asked to decommit freed pages, before Arrow loads."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from runtime.batch.memory import MIMALLOC_RELEASE, give_back, release_promptly
from runtime.batch.processes import in_processes

ROOT = Path(__file__).resolve().parents[3]


def _env(keys: tuple[str, ...]) -> dict[str, str | None]:
    return {k: os.environ.get(k) for k in keys}


def test_release_promptly_sets_the_options_and_keeps_the_users_own(monkeypatch: pytest.MonkeyPatch) -> None:
    first, second = sorted(MIMALLOC_RELEASE)
    monkeypatch.delenv(first, raising=False)
    monkeypatch.setenv(second, "7")  # a user's own choice stands
    release_promptly()
    assert os.environ[first] == MIMALLOC_RELEASE[first] and os.environ[second] == "7"
    give_back()  # and returning freed memory is safe to call at any point


def test_worker_processes_started_after_it_inherit_the_options(monkeypatch: pytest.MonkeyPatch) -> None:
    for k in MIMALLOC_RELEASE:
        monkeypatch.delenv(k, raising=False)
    release_promptly()
    keys = tuple(sorted(MIMALLOC_RELEASE))
    [(_, seen)] = list(in_processes([keys], lambda k: (_env, (k,)), 1, "test", "run"))
    assert seen == {k: MIMALLOC_RELEASE[k] for k in keys}


def test_memir_score_asks_before_anything_loads_arrow(tmp_path: Path) -> None:
    """The options are read when mimalloc starts, so the CLI must set them before Arrow is imported:
    checked in a fresh interpreter on a Parquet dump without records (checking it loads Arrow; the
    command then fails, cleanly, for want of a record)."""
    import pyarrow.parquet as pq

    from runtime.store.dumps import memir_arrow_schema

    dump = tmp_path / "empty.parquet"
    pq.write_table(memir_arrow_schema().empty_table(), str(dump))
    probe = tmp_path / "probe.txt"
    code = (
        "import sys\n"
        "import runtime.batch.memory as m\n"
        "real = m.release_promptly\n"
        "def probe():\n"
        f"    open({str(probe)!r}, 'w').write(str('pyarrow' in sys.modules))\n"
        "    real()\n"
        "m.release_promptly = probe\n"
        "from runtime.cli import main\n"
        f"sys.exit(main(['score', {str(dump)!r}, '-o', {str(tmp_path / 'out.jsonl')!r}]))\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert r.returncode != 0 and "no valid record" in r.stderr and "Traceback" not in r.stderr
    assert probe.read_text() == "False"
