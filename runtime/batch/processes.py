"""Worker processes of batch scoring: a bounded, ordered pool, each process given its share of the CPUs.

:func:`in_processes` runs jobs in spawned processes at most ``2 × workers`` items ahead (memory stays
bounded) and yields their results in item order. Each process starts with NumPy's BLAS limited to
:func:`worker_threads` threads — the CPUs divided among the workers — before its own initializer runs.

Why the limit: OpenBLAS starts a thread per CPU in every process, so one process per CPU means CPUs²
threads, and the small matrix products a decider makes (a scope's redundancy features: 200 × 384 by
384 × 200) then wait on threads another process holds. Measured on this project's 2-CPU machine with
both CPUs busy: 10.4 ms for that product with 2 BLAS threads, 0.8 ms with one; ``memir score`` of
200k records with the default options went from 5,655 to 8,558 records/s (medians of two alternated
runs each), with the same decisions; on the quiet machine, 1M records, 15,058 to 18,791 records/s
(``bench/bench_batch.py`` measures both side by side).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any, TypeVar

from ..errors import WorkerError

__all__ = ["in_processes", "limit_blas", "worker_threads"]

T = TypeVar("T")


def worker_threads(workers: int) -> int:
    """BLAS threads each of ``workers`` processes gets: the CPUs this process may run on (its affinity
    mask, where the OS has one) divided among them, at least one."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    return max(1, cpus // max(1, workers))


_LIMITS: Any = None  # this process's BLAS thread limit, held for its lifetime


def limit_blas(threads: int) -> None:
    """Limit this process's BLAS (NumPy's OpenBLAS, or whichever is loaded) to ``threads`` for the rest
    of its life: the start of a worker process, here and in ``train.workers``."""
    global _LIMITS
    from threadpoolctl import threadpool_limits

    _LIMITS = threadpool_limits(limits=threads, user_api="blas")


def _start(threads: int, initializer: Callable[..., None] | None, initargs: tuple[Any, ...]) -> None:
    """A worker process's start: BLAS limited to ``threads``, then the pool's own ``initializer``."""
    limit_blas(threads)
    if initializer is not None:
        initializer(*initargs)


def in_processes(items: Iterable[T], job: Callable[[T], tuple[Callable[..., Any], tuple[Any, ...]]], workers: int,
                 noun: str, verb: str, *, initializer: Callable[..., None] | None = None,
                 initargs: tuple[Any, ...] = ()) -> Iterator[tuple[T, Any]]:
    """Each item with the result of its job (``job(item)`` = ``(function, args)``), in item order,
    run by ``workers`` spawned processes at most ``2 × workers`` items ahead, so memory stays bounded.

    Raises:
        WorkerError: a process died (``noun`` names what it was doing, ``verb`` the in-process way out).
    """
    import multiprocessing as mp
    from concurrent.futures.process import BrokenProcessPool

    try:
        with ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn"), initializer=_start,
                                 initargs=(worker_threads(workers), initializer, initargs)) as pool:
            pending: list[tuple[T, Future[Any]]] = []
            for item in items:
                fn, args = job(item)
                pending.append((item, pool.submit(fn, *args)))
                if len(pending) >= 2 * workers:
                    i0, f0 = pending.pop(0)
                    yield i0, f0.result()
            for i0, f0 in pending:
                yield i0, f0.result()
    except BrokenProcessPool as e:
        raise WorkerError(f"a {noun} process died ({e}). If score_dump is called from a script, put the call "
                          "under `if __name__ == \"__main__\":` (the processes are started with spawn), or pass "
                          f"ScoreConfig(workers=1) to {verb} in this process; if memory ran out, lower --memory-mb") from e
