"""Batch scoring's worker processes: ordered results, and each process's BLAS given its share of the CPUs."""

from __future__ import annotations

import os

import numpy as np
import pytest

from runtime.batch.processes import in_processes, worker_threads
from runtime.errors import WorkerError


def blas_threads(i: int) -> tuple[int, int]:
    """(i, the most threads any BLAS library of this process may use) — run in a worker process."""
    from threadpoolctl import threadpool_info

    np.ones((2, 2)) @ np.ones((2, 2))  # NumPy's BLAS is loaded
    return i, max(info["num_threads"] for info in threadpool_info() if info["user_api"] == "blas")


def _die(_: int) -> None:
    os._exit(3)


def test_worker_threads_divide_the_cpus_among_the_processes() -> None:
    cpus = len(os.sched_getaffinity(0))
    assert worker_threads(1) == cpus
    assert worker_threads(cpus) == 1
    assert worker_threads(4 * cpus) == 1  # never none
    assert worker_threads(0) == cpus


@pytest.mark.parametrize("workers", [1, 2])
def test_each_worker_process_runs_blas_on_its_share_in_item_order(workers: int) -> None:
    out = list(in_processes(range(5), lambda i: (blas_threads, (i,)), workers, "test", "run"))
    assert [i for i, _ in out] == list(range(5))
    assert [r[0] for _, r in out] == list(range(5))  # results in item order
    assert {r[1] for _, r in out} == {worker_threads(workers)}


def test_a_dying_worker_is_a_typed_error() -> None:
    with pytest.raises(WorkerError, match="a test process died"):
        list(in_processes(range(2), lambda i: (_die, (i,)), 1, "test", "run"))
