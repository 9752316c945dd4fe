"""Recall's usage bookkeeping, written behind (``runtime/store/usage.py``), on both backends: counted
in the process and applied before anything else of the store object reads, within
``usage_flush_s`` for other processes, never lost when the process is killed, never counted twice
by taking a live process's journal, and erased from the journal when the memories it names are
deleted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from runtime import MemoryStore, StoreConfig
from runtime.errors import ValidationError
from runtime.store.usage import usage_journal_dir

ROOT = Path(__file__).resolve().parents[3]
HOLD = StoreConfig(usage_flush_s=3600.0)  # nothing is applied by the clock during a test


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # PostgreSQL stores' journals


def _count(store: MemoryStore, memory_id: str, user: str = "alice") -> int:
    rec = store.scope(user_id=user).get(memory_id)
    assert rec is not None
    return rec.usage.access_count


def _journals(store: MemoryStore) -> list[Path]:
    d = usage_journal_dir(store.path)
    return sorted(d.glob("*.jnl")) if d is not None and d.exists() else []


def test_another_operation_of_the_store_object_sees_every_recall(make_store: Callable[..., MemoryStore]) -> None:
    st = make_store("u", config=HOLD)
    other = make_store("u", config=HOLD)  # another store object on the same store: another process's view
    me = st.scope(user_id="alice")
    m = me.write("the invoice is due on Friday")
    for _ in range(3):
        assert me.recall("invoice due", k=1)[0].record.id == m.id
    assert _count(other, m.id) == 0          # pending in the first object
    assert _count(st, m.id) == 3             # its own read applies them first
    assert _count(other, m.id) == 3
    assert [len(_journals(s)) for s in (st, other)] == [1, 1]  # applied, but kept for the object's life
    assert not st.backend.usage.pending


def _recalled_once(make_store: Callable[..., MemoryStore], flush_s: float) -> tuple[MemoryStore, MemoryStore, str]:
    """(a store object with ``usage_flush_s=flush_s`` that recalled one memory once, another store
    object on the same store that holds its own accesses, the memory's id)."""
    st = make_store("u", config=StoreConfig(usage_flush_s=flush_s))
    other = make_store("u", config=HOLD)
    me = st.scope(user_id="alice")
    m = me.write("the invoice is due on Friday")
    me.recall("invoice due", k=1)
    return st, other, m.id


def test_pending_accesses_are_applied_within_usage_flush_s(make_store: Callable[..., MemoryStore]) -> None:
    _, other, mid = _recalled_once(make_store, 0.2)
    deadline = time.monotonic() + 5.0
    while _count(other, mid) == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _count(other, mid) == 1
    assert time.monotonic() < deadline


def test_write_through_when_usage_flush_s_is_zero(make_store: Callable[..., MemoryStore]) -> None:
    st, other, mid = _recalled_once(make_store, 0)
    assert _count(other, mid) == 1
    assert st.backend.usage is None
    with pytest.raises(ValidationError, match="usage_flush_s"):
        StoreConfig(usage_flush_s=-1)


_CRASH = """
import os, signal, sys
from runtime import MemoryStore, StoreConfig
from runtime.encoders import HashEmbedder
st = MemoryStore.open(sys.argv[1], embedder=HashEmbedder(dim=int(sys.argv[2])), config=StoreConfig(usage_flush_s=3600))
me = st.scope(user_id="alice")
for _ in range(3):
    me.recall("invoice due", k=2)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_killed_process_loses_no_access(make_store: Callable[..., MemoryStore], store_target: Callable[[str], Any],
                                          embedder: Any) -> None:
    st = make_store("u", config=HOLD)
    me = st.scope(user_id="alice")
    a = me.write("the invoice is due on Friday")
    b = me.write("the invoice was paid on Monday")
    st.close()
    out = subprocess.run([sys.executable, "-c", _CRASH, str(store_target("u")), str(embedder.dim)], cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, timeout=120)
    assert out.returncode == -9, out.stderr.decode()[-2000:]
    (left,) = _journals(st)                   # what the killed process had pending, journalled
    assert left.stat().st_size > 0
    reopened = make_store("u", config=HOLD)  # opening applies the dead process's journal
    assert (_count(reopened, a.id), _count(reopened, b.id)) == (3, 3)
    assert _journals(reopened) == []           # the dead process's journal is gone (this one made none yet)
    reopened.close()
    again = make_store("u", config=HOLD)      # applied once, not again
    assert (_count(again, a.id), _count(again, b.id)) == (3, 3)


def test_a_live_object_journal_is_never_taken(make_store: Callable[..., MemoryStore]) -> None:
    st = make_store("u", config=HOLD)
    me = st.scope(user_id="alice")
    m = me.write("the invoice is due on Friday")
    me.recall("invoice due", k=1)
    other = make_store("u", config=HOLD)      # recovers nothing: the journal's owner is alive
    assert _count(other, m.id) == 0
    st.close()                                 # applies it
    assert _count(other, m.id) == 1


@pytest.mark.parametrize("how", ["forget", "forget_user"])
def test_a_deletion_erases_the_journal(make_store: Callable[..., MemoryStore], how: str, tmp_path: Path) -> None:
    st = make_store("u", config=HOLD)
    me = st.scope(user_id="alice")
    m = me.write("the invoice is due on Friday")
    me.recall("invoice due", k=1)
    (journal,) = _journals(st)
    assert journal.stat().st_size > 0         # the access, pending, journalled
    peek = tmp_path / "peek"
    os.link(journal, peek)                    # the same file, still readable once the journal is deleted
    if how == "forget":
        me.forget(m.id, cascade="delete")
    else:
        st.forget_user("alice")
    assert _journals(st) == [journal]          # the object's journal, applied, then zeroed and synced
    assert b"alice" not in peek.read_bytes() and b"[" not in peek.read_bytes()
    assert not st.backend.usage.pending


def test_closing_erases_and_deletes_the_journal(make_store: Callable[..., MemoryStore], tmp_path: Path) -> None:
    st = make_store("u", config=HOLD)
    me = st.scope(user_id="alice")
    m = me.write("the invoice is due on Friday")
    me.recall("invoice due", k=1)
    (journal,) = _journals(st)
    peek = tmp_path / "peek"
    os.link(journal, peek)
    st.close()
    assert not journal.exists() and peek.read_bytes() == b""
    assert _count(make_store("u", config=HOLD), m.id) == 1


def test_a_journal_of_the_first_layout_is_applied(make_store: Callable[..., MemoryStore]) -> None:
    """A process of an older memir that died left one file per batch, ``[user, agent, time, [rowid…]]``
    lines without a header: the next store opened applies it all (a torn last line skipped)."""
    st = make_store("u", config=HOLD)
    me = st.scope(user_id="alice")
    m = me.write("the invoice is due on Friday")
    me.recall("invoice due", k=1)
    (journal,) = _journals(st)
    line = journal.read_bytes().splitlines()[1]  # after the header: [generation, user, agent, time, rowids]
    rowid = json.loads(line.rpartition(b"\t")[0])[4][0]
    st.close()                                 # applies the one access
    old = journal.parent / "1-0123456789ab.jnl"
    old.write_text(f'["alice","default",{time.time()},[{rowid}]]\n' * 2 + '["alice","def')
    again = make_store("u", config=HOLD)
    assert _count(again, m.id) == 3
    assert _journals(again) == []
