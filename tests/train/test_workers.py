"""train.workers.ordered_map: results in order, and each forked worker's BLAS on its share of the CPUs."""

from __future__ import annotations

import pytest

from runtime.batch.processes import worker_threads
from tests.runtime.batch.test_processes import blas_threads
from train.workers import ordered_map


@pytest.mark.parametrize("workers", [1, 2])
def test_ordered_map_keeps_order_and_shares_the_cpus(workers: int) -> None:
    out = list(ordered_map(blas_threads, range(7), workers, window=3))
    assert [i for i, _ in out] == list(range(7))
    if workers > 1:  # workers <= 1 runs here, unlimited
        assert {t for _, t in out} == {worker_threads(workers)}
