"""Recall's usage bookkeeping written behind: counted in the process, journalled, applied in batches.

Every recall (``update_usage=True``, the default) counts one access for each memory it returns. By
default each recall updates those rows in a transaction of its own. With
``StoreConfig.usage_flush_s`` above 0, a recall instead adds its hits to this buffer and appends
one line to a journal file, and the buffer is applied in batches, one transaction each (on
PostgreSQL, one transaction for every scope of the batch, each statement confined to its scope by
row-level security):

- when its oldest entry is ``flush_s`` old (a background thread waits for that), or holds
  :data:`MAX_PENDING` accesses;
- before any other operation of this store object reads or writes (so a ``get`` or ``list`` after a
  recall, a retention decision, an export or a deletion sees every access counted);
- when the store is closed.

Crashes lose nothing: a process that dies with accesses pending leaves its journal (under the user's
cache, :func:`usage_journal_dir`), and the next store object opened on the same store, on the same
machine, applies it (:meth:`UsageBuffer.recover`). Each journal is locked (``flock``) by its owner,
so a live process's journal is never taken. A crash in the moment between a batch's commit and the
journal's deletion counts that batch twice; nothing is ever counted less. Other processes see a
process's accesses once they are applied.

The journal holds row numbers and times, never content or ids; once a batch is applied its
journal's bytes are overwritten with zeros, synced, and the file deleted, and a deletion applies
(and so erases) the pending batch first.

It pays for read-heavy processes (PostgreSQL, 8 client processes, 100k memories: recall p50
14.2–14.5 → 11.4–12.3 ms); an agent that alternates one recall and one write moves the update, and
a journal sync, to the write (SQLite: 1.8–2.1 → 3.4–3.6 ms per recall + write). Hence off by
default.
"""
from __future__ import annotations

import contextlib
import json
import os
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

__all__ = ["MAX_PENDING", "Accesses", "UsageBuffer", "usage_journal_dir"]

MAX_PENDING = 4096
"""Accesses held before a recall applies them itself."""

Accesses = dict[tuple[str, str], list[tuple[int, int, float]]]
"""Pending accesses by scope ``(user_id, agent_id)``: ``(rowid, count, time of the latest)``, rowids
ascending, scopes in sorted order (every applier locks rows in the same order)."""

Apply = Callable[[Accesses], None]
"""Applies a batch of accesses in one transaction (the backend's ``apply_usage``)."""


class UsageBuffer:
    """Pending recall accesses of one store object, with their journal.

    Args:
        apply: the backend's ``apply_usage(accesses)`` (one transaction for a whole batch).
        journal_dir: where journals live (``None``: no journal, for an in-memory store, whose data
            dies with the process anyway).
        flush_s: the longest an access waits before it is applied.

    Recalls only take a short lock (count, append a line); applying runs outside it, one batch at
    a time, so a recall never waits for a transaction or a disk sync. Each batch takes the journal
    files that cover it out of use (new accesses go to a new file) and erases them once applied.
    """

    def __init__(self, apply: Apply, journal_dir: Path | None, flush_s: float) -> None:
        self._apply, self.flush_s = apply, float(flush_s)
        self._lock = threading.Lock()           # pending, the current journal, the flusher thread
        self._flushing = threading.Lock()       # one batch applied at a time
        self._wake = threading.Condition(self._lock)
        self._pending: dict[tuple[str, str], dict[int, list[float]]] = {}  # scope -> rowid -> [count, at]
        self._n = 0
        self._since: float | None = None
        self._timer: threading.Thread | None = None
        self._closed = False
        self._dir = journal_dir
        self._journal: _Journal | None = None   # where new accesses are appended
        self._held: list[_Journal] = []         # older journals whose accesses are pending again

    @property
    def pending(self) -> bool:
        """Whether accesses wait to be applied."""
        return self._n > 0

    def add(self, user_id: str, agent_id: str, rowids: Sequence[int], at: float) -> None:
        """Count one access for each of ``rowids`` at time ``at`` (epoch seconds)."""
        if not rowids:
            return
        rows = [int(r) for r in rowids]
        with self._lock:
            if self._dir is not None:
                if self._journal is None:
                    self._journal = _Journal.create(self._dir)
                self._journal.append([user_id, agent_id, at, rows])
            scope = self._pending.setdefault((user_id, agent_id), {})
            for r in rows:
                _count(scope, r, 1, at)
            self._n += len(rows)
            if self._since is None:
                self._since = time.monotonic()
            full = self._n >= MAX_PENDING
            if not full and self._timer is None and not self._closed:
                self._timer = threading.Thread(target=self._run, name="memir-usage", daemon=True)
                self._timer.start()
        if full:
            self.flush()

    def flush(self) -> None:
        """Apply every pending access (one transaction), then erase the journals that held them. If
        the transaction fails, they all stay pending (and journalled) and the error is raised."""
        with self._flushing:
            with self._lock:
                if not self._n:
                    return
                batch, self._pending, self._n, self._since = self._pending, {}, 0, None
                journals = self._held + ([self._journal] if self._journal is not None else [])
                self._held, self._journal = [], None
            try:
                self._apply(_batch(batch))
            except BaseException:
                with self._lock:  # all of it pending again, before what came since
                    for key, rows in batch.items():
                        scope = self._pending.setdefault(key, {})
                        for r, (c, at) in rows.items():
                            _count(scope, r, int(c), at, older=True)
                            self._n += int(c)
                    self._since = self._since or time.monotonic()
                    self._held = journals + self._held  # they still hold what is pending again
                raise
            for j in journals:
                j.erase()

    def recover(self) -> int:
        """Apply the journals other store objects left behind (their process died), then delete them.
        Returns how many accesses were applied."""
        if self._dir is None or not self._dir.is_dir():
            return 0
        n = 0
        for path in sorted(self._dir.glob("*.jnl")):
            j = _Journal.take(path)
            if j is None:
                continue  # its owner is alive (or it is gone)
            scopes: dict[tuple[str, str], dict[int, list[float]]] = {}
            for user, agent, at, rowids in j.entries():
                scope = scopes.setdefault((user, agent), {})
                for r in rowids:
                    _count(scope, r, 1, at)
            if scopes:
                try:
                    self._apply(_batch(scopes))
                except BaseException:
                    os.close(j.fd)  # released: the journal stays for the next store opened
                    raise
                n += sum(int(c) for rows in scopes.values() for c, _ in rows.values())
            j.erase()
        return n

    def close(self) -> None:
        """Apply what is pending and remove this object's journals. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._wake.notify_all()
        self.flush()
        with self._lock:
            for j in self._held + ([self._journal] if self._journal is not None else []):
                j.erase()
            self._held, self._journal = [], None

    def _run(self) -> None:
        """The flusher thread: applies the pending accesses once the oldest is ``flush_s`` old."""
        while True:
            with self._lock:
                if self._closed or not self._n:
                    self._timer = None
                    return
                wait = (self._since or time.monotonic()) + self.flush_s - time.monotonic()
                if wait > 0:
                    self._wake.wait(wait)
                    continue
            try:
                self.flush()
            except Exception:  # noqa: BLE001 - the store may be busy or closing: kept pending, retried
                with self._lock:
                    if self._closed:
                        self._timer = None
                        return
                    self._since = time.monotonic()  # try again one period later


def _count(scope: dict[int, list[float]], rowid: int, n: int, at: float, *, older: bool = False) -> None:
    """Add ``n`` accesses of ``rowid`` at ``at`` to one scope's pending counts; the latest time is
    kept, unless these accesses are ``older`` than those already there (a failed batch put back)."""
    slot = scope.get(rowid)
    if slot is None:
        scope[rowid] = [n, at]
    else:
        slot[0] += n
        if not older:
            slot[1] = at


def _batch(scopes: dict[tuple[str, str], dict[int, list[float]]]) -> Accesses:
    return {key: [(r, int(c), float(at)) for r, (c, at) in sorted(rows.items())] for key, rows in sorted(scopes.items())}


class _Journal:
    """One append-only journal file, locked by its owner for as long as it is in use."""

    def __init__(self, path: Path, fd: int, size: int) -> None:
        self.path, self.fd, self.size = path, fd, size

    @classmethod
    def create(cls, directory: Path) -> _Journal:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        path = directory / f"{os.getpid()}-{uuid.uuid4().hex[:12]}.jnl"
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        _lock_file(fd, block=True)
        return cls(path, fd, 0)

    @classmethod
    def take(cls, path: Path) -> _Journal | None:
        """Another object's journal, if its owner is gone (the lock can be had)."""
        try:
            fd = os.open(path, os.O_RDWR)
        except FileNotFoundError:
            return None
        if not _lock_file(fd, block=False):
            os.close(fd)
            return None
        return cls(path, fd, os.fstat(fd).st_size)

    def append(self, entry: list[object]) -> None:
        data = (json.dumps(entry, separators=(",", ":")) + "\n").encode()
        os.pwrite(self.fd, data, self.size)  # a crash leaves whole lines (and perhaps a torn last one)
        self.size += len(data)

    def entries(self) -> list[tuple[str, str, float, list[int]]]:
        """The whole lines (a torn last line, or zeroed bytes, are skipped)."""
        out = []
        for raw in os.pread(self.fd, self.size, 0).splitlines():
            try:
                user, agent, at, rowids = json.loads(raw)
                out.append((str(user), str(agent), float(at), [int(r) for r in rowids]))
            except (ValueError, TypeError):
                continue
        return out

    def erase(self) -> None:
        """Overwrite with zeros, sync, truncate, delete and close."""
        try:
            _zero(self.fd, self.size)
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
        finally:
            os.close(self.fd)


def _lock_file(fd: int, *, block: bool) -> bool:
    """An exclusive advisory lock on the file (POSIX ``flock``); where there is none, ``True``."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if block else fcntl.LOCK_NB))
    except BlockingIOError:
        return False
    return True


def _zero(fd: int, size: int) -> None:
    """Overwrite the first ``size`` bytes with zeros, write them out, and truncate the file."""
    if size:
        os.pwrite(fd, b"\0" * size, 0)
        os.fsync(fd)
    os.ftruncate(fd, 0)


def usage_journal_dir(store_path: str) -> Path | None:
    """Where a store's usage journals live: under the user's cache (``$XDG_CACHE_HOME`` or
    ``~/.cache``), ``memir/usage/<hash>``, one directory per store — an SQLite file by its absolute
    path, a PostgreSQL database by its URL without the password; none for an in-memory store. Nothing
    is made until a recall is counted."""
    import hashlib

    from .location import is_postgres_url

    if store_path == ":memory:":
        return None
    key = store_path if is_postgres_url(store_path) else str(Path(store_path).resolve())
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "memir" / "usage" / hashlib.sha256(key.encode()).hexdigest()[:20]
