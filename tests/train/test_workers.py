"""train.workers.ordered_map: results in order, and each forked worker's BLAS on its share of the CPUs."""

from __future__ import annotations

import numpy as np
import pytest

from runtime.batch.processes import worker_threads
from train.workers import ordered_map


def _blas_threads(i: int) -> tuple[int, int]:
    from threadpoolctl import threadpool_info

    np.ones((2, 2)) @ np.ones((2, 2))
    return i, max(info["num_threads"] for info in threadpool_info() if info["user_api"] == "blas")


@pytest.mark.parametrize("workers", [1, 2])
def test_ordered_map_keeps_order_and_shares_the_cpus(workers: int) -> None:
    out = list(ordered_map(_blas_threads, range(7), workers, window=3))
    assert [i for i, _ in out] == list(range(7))
    if workers > 1:  # workers <= 1 runs here, unlimited
        assert {t for _, t in out} == {worker_threads(workers)}
