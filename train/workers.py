"""Work over many independent items on every core, in order, with bounded memory, and its progress bar.

Replaying one LongMemEval question through the store takes seconds of single-threaded Python; a
benchmark is hundreds of them. :func:`ordered_map` fans them out to forked worker processes (which
inherit the scorers, encoder cache and function from the parent: nothing but the items and the
results is pickled) and yields results in input order, holding at most ``window`` items in flight.
"""

from __future__ import annotations

import multiprocessing as mp
import sys
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any, TypeVar

from runtime.batch.processes import limit_blas, worker_threads

__all__ = ["ordered_map"]

T = TypeVar("T")
R = TypeVar("R")

_FN: Callable[[Any], Any] | None = None


def _call(item: Any) -> Any:
    assert _FN is not None, "ordered_map's function was not inherited (needs the fork start method)"
    return _FN(item)


def ordered_map(fn: Callable[[T], R], items: Iterable[T], workers: int = 1, *, window: int | None = None
                ) -> Iterator[R]:
    """``map(fn, items)`` on ``workers`` processes, lazily, in order.

    Args:
        fn: any callable (closures too: workers are forked after it is set, so it is never pickled).
        items: consumed lazily; each must be picklable, as must each result.
        workers: processes; ``<= 1`` runs in this process (no fork).
        window: most items in flight (default ``2 × workers``): memory stays bounded.
    """
    global _FN
    if workers <= 1 or "fork" not in mp.get_all_start_methods():
        yield from map(fn, items)
        return
    _FN = fn
    try:
        with ProcessPoolExecutor(workers, mp_context=mp.get_context("fork"), initializer=limit_blas,
                                 initargs=(worker_threads(workers),)) as ex:
            pending: deque[Future[Any]] = deque()
            for item in items:
                pending.append(ex.submit(_call, item))
                if len(pending) >= (window or 2 * workers):
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
    finally:
        _FN = None


def progress_bar(total: int, desc: str, progress: bool) -> Any:
    """A tqdm bar on stderr (``None`` when ``progress`` is off)."""
    if not progress:
        return None
    from tqdm import tqdm
    return tqdm(total=total, desc=desc, unit="run", leave=False, file=sys.stderr)
