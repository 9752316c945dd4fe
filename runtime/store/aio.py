"""Async execution for a store: blocking work off the event loop, concurrent encodes batched.

An ``await scope.awrite(...)`` never blocks the event loop on the store. The loop does no work of
its own: each call hands its blocking part — the record builder, the SQL statements, the retention
solve — to the store's thread pool, and the encoder runs there too. What makes many concurrent
coroutines faster than the same calls made one after another is the :class:`EncodeBatcher`: every
text submitted in the same turn of the loop (a hundred ``awrite`` started by ``asyncio.gather``)
is embedded in *one* encoder call, while the next turn's texts queue behind it. The writes
themselves stay one transaction each, in the order their vectors arrive, so their semantics are
exactly those of :meth:`Scope.write`: a bad item fails alone.

Cancelling a coroutine before its blocking part starts means nothing happens; once that part runs
on a thread it completes (a write is then stored, exactly as if the caller had waited).

Both backends work this way. SQLite statements run on the pool's threads (the connection is
serialised by the store's lock); on PostgreSQL each thread takes a pooled connection, so the
statements of concurrent calls really overlap.

Example:
    >>> async def main(scope):                                             # doctest: +SKIP
    ...     await asyncio.gather(*(scope.awrite(f"note {i}") for i in range(100)))
    ...     return await scope.arecall("note 7", k=3)
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

if TYPE_CHECKING:  # asyncio (29 modules) loads when a coroutine first runs, not at import
    import asyncio

import numpy as np

from ..encoders.embedder import Embedder
from ..errors import check_text
from ..record.builder import RecordBuilder

__all__ = ["AsyncRunner", "Before", "EncodeBatcher", "async_twin", "encode_query", "encode_write_text", "read_items"]

P = ParamSpec("P")
T = TypeVar("T")


@dataclass
class _Pending:
    """Texts submitted in one turn of one event loop, waiting for one encoder call."""

    items: list[tuple[str, Mapping[str, Any] | None, asyncio.Future[np.ndarray]]] = field(default_factory=list)
    scheduled: bool = False


class EncodeBatcher:
    """Collects the texts concurrent coroutines want embedded and encodes them together.

    A text is either embedded as given (a recall query), or — when the write fields come with it —
    first drafted by the record builder (validated and redacted), so the vector is of exactly the
    text :meth:`Scope.write` will store. An item that fails its draft fails alone.

    Args:
        embedder: returns the store's encoder (loaded on first use).
        builder: the store's record builder.
        run: runs a blocking function on the store's thread pool.
        max_batch: the most texts in one encoder call.
    """

    def __init__(self, embedder: Callable[[], Embedder], builder: RecordBuilder,
                 run: Callable[..., asyncio.Future[Any]], max_batch: int = 128) -> None:
        self._embedder = embedder
        self._builder = builder
        self._run = run
        self.max_batch = max_batch
        self._pending: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Pending] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()
        self.calls = 0  # encoder calls made (for tests and benchmarks)

    async def encode(self, text: str, fields: Mapping[str, Any] | None = None) -> np.ndarray:
        """The unit vector of ``text`` (of its drafted, redacted form when ``fields`` is given).

        Raises:
            ValidationError / ContentTooLargeError: the draft refused the text (this item only).
        """
        import asyncio

        loop = asyncio.get_running_loop()
        fut: asyncio.Future[np.ndarray] = loop.create_future()
        with self._lock:
            batch = self._pending.get(loop)
            if batch is None:
                batch = self._pending[loop] = _Pending()
            batch.items.append((text, fields, fut))
            schedule = not batch.scheduled
            batch.scheduled = True
        if schedule:  # after every coroutine already runnable in this turn has submitted its text
            loop.call_soon(self._flush, loop)
        return await fut

    def _flush(self, loop: asyncio.AbstractEventLoop) -> None:
        with self._lock:
            batch = self._pending.pop(loop, None)
        if batch is None:
            return
        items = batch.items
        for start in range(0, len(items), self.max_batch):
            chunk = items[start:start + self.max_batch]
            done = self._run(self._encode_chunk, [(t, f) for t, f, _ in chunk])
            done.add_done_callback(partial(_deliver, futures=[f for _, _, f in chunk]))

    def _encode_chunk(self, items: list[tuple[str, Mapping[str, Any] | None]]) -> list[np.ndarray | Exception]:
        """On a pool thread: draft the texts that come with fields, then one encoder call."""
        out: list[np.ndarray | Exception] = []
        texts: list[str] = []
        where: list[int] = []
        for i, (text, fields) in enumerate(items):
            try:
                # a text the encoder cannot take fails alone, not the whole shared call
                texts.append(check_text(text, "text") if fields is None else self._builder.draft(text, fields).text)
                where.append(i)
                out.append(np.empty(0, dtype=np.float32))
            except Exception as e:  # noqa: BLE001 — this item's error goes back to its own coroutine
                out.append(e)
        if texts:
            self.calls += 1
            vecs = np.asarray(self._embedder().encode(texts), dtype=np.float32)
            for i, v in zip(where, vecs):
                out[i] = v
        return out


def _deliver(done: asyncio.Future[list[np.ndarray | Exception]], futures: list[asyncio.Future[np.ndarray]]) -> None:
    """Hand each coroutine its own vector or error (the encoder failing fails the whole chunk)."""
    try:
        results = done.result()
    except BaseException as e:  # noqa: BLE001 — propagate to every waiter, never lose it
        for f in futures:
            if not f.done():
                f.set_exception(e)
        return
    for f, r in zip(futures, results):
        if f.done():  # the waiting coroutine was cancelled
            continue
        if isinstance(r, Exception):
            f.set_exception(r)
        else:
            f.set_result(r)


class AsyncRunner:
    """The store's thread pool for async calls, and its encode batcher. Made on first async use.

    Args:
        embedder: returns the store's encoder.
        builder: the store's record builder.
        workers: pool threads (``StoreConfig.async_workers``).
    """

    def __init__(self, embedder: Callable[[], Embedder], builder: RecordBuilder, workers: int) -> None:
        from concurrent.futures import ThreadPoolExecutor  # loaded with the first async call, not with the store

        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="memir-async")
        self.batcher = EncodeBatcher(embedder, builder, self._submit)

    def _submit(self, fn: Callable[..., Any], *args: Any) -> asyncio.Future[Any]:
        import asyncio

        return asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    async def run(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        """Run ``fn(*args, **kwargs)`` on the pool and await its result (the loop stays free)."""
        import asyncio

        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, lambda: fn(*args, **kwargs))

    def close(self) -> None:
        """Finish the calls already running, then stop the threads."""
        self._pool.shutdown(wait=True, cancel_futures=True)


S = TypeVar("S")
Before = Callable[[AsyncRunner, tuple[Any, ...], dict[str, Any]], Awaitable[tuple[tuple[Any, ...], dict[str, Any]]]]
"""A twin's step on the event loop before the blocking call: ``(runner, args, kwargs) -> (args, kwargs)``
(e.g. hand the text to the :class:`EncodeBatcher` and pass its vector on)."""


def async_twin(fn: Callable[Concatenate[S, P], T], runner: Callable[[S], AsyncRunner], *, before: Before | None = None,
               note: str = "") -> Callable[Concatenate[S, P], Coroutine[Any, Any, T]]:
    """The awaitable twin of the method ``fn``: one definition for every ``a*`` call of a scope.

    The twin takes exactly ``fn``'s arguments, runs ``before`` on the event loop (if given), then
    ``fn`` on the store's thread pool (:meth:`AsyncRunner.run`) and returns its value; it raises what
    ``fn`` raises.

    Args:
        fn: the blocking method.
        runner: the object's :class:`AsyncRunner`.
        before: a step on the loop first (see :data:`Before`).
        note: appended to the twin's docstring.
    """
    async def twin(self: S, /, *args: P.args, **kwargs: P.kwargs) -> T:
        aio = runner(self)
        a: tuple[Any, ...] = args
        kw: dict[str, Any] = kwargs
        if before is not None:
            a, kw = await before(aio, a, kw)
        return await aio.run(partial(fn, self), *a, **kw)

    twin.__name__ = twin.__qualname__ = f"a{fn.__name__}"
    twin.__doc__ = f":meth:`{fn.__name__}`, awaitable{note}. The same arguments and errors."
    return twin


def encode_write_text(at: int) -> Before:
    """A write's text (positional argument ``at``) to the encode batcher, drafted with its fields."""
    async def before(aio: AsyncRunner, a: tuple[Any, ...], kw: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
        content = a[at] if len(a) > at else kw.get("content")
        if kw.get("embedding") is None and isinstance(content, str):
            fields = {k: v for k, v in kw.items() if k not in ("embedding", "history", "content")}
            kw = {**kw, "embedding": await aio.batcher.encode(content, fields)}
        return a, kw
    return before


async def encode_query(aio: AsyncRunner, a: tuple[Any, ...], kw: dict[str, Any]
                        ) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """A recall's query text to the encode batcher (an explained recall logs its text: left as text)."""
    query = a[0] if a else kw.get("query")
    if isinstance(query, str) and query.strip() and not kw.get("explain"):
        check_text(query, "query")  # as recall does, before the text joins a shared encoder call
        vec = await aio.batcher.encode(query)
        a, kw = ((vec, *a[1:]), kw) if a else (a, {**kw, "query": vec})
    return a, kw


async def read_items(aio: AsyncRunner, a: tuple[Any, ...], kw: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """A batch's items read on the loop (a generator must not be consumed on a pool thread)."""
    if a:
        return (list(a[0]), *a[1:]), kw
    return a, {**kw, "items": list(kw["items"])}
