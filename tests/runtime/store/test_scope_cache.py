"""The scope cache (``runtime/store/scope_cache.py``) both backends search from: rows appended in
rowid order, the mask's columns, vectors decoded from any stored format, and memory proportional to
what it holds — a process serving thousands of small scopes must not reserve room for a thousand
rows in each."""

from __future__ import annotations

import numpy as np

from runtime.store import tiers
from runtime.store.scope_cache import CODED_COLUMNS, FLOAT_COLUMNS, VectorCache

DIM = 384


def _rows(rng: np.random.Generator, start: int, n: int, fmt: str = "float32") -> tuple[list[tuple], np.ndarray]:
    vecs = rng.standard_normal((n, DIM)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    rows = []
    for i in range(n):
        coded = ["archive" if i % 2 else "working", "direct_interaction", f"s{i % 3}", "support", None, "user",
                 None, "none"]
        floats = [float(i), None, 0.9, None if i % 4 else 3600.0 * (i + 1)]
        rows.append((start + i, *coded, *floats, fmt, tiers.encode(vecs[i], fmt)))
    return rows, vecs


def test_rows_append_in_order_with_their_columns_and_vectors() -> None:
    rng = np.random.default_rng(0)
    cache = VectorCache("u", "a", "enc", DIM)
    rows, vecs = _rows(rng, 1, 20)
    more, more_vecs = _rows(rng, 40, 30, fmt="int8")
    assert cache.append(rows, [(3, "t1"), (5, "t1")]) == 20
    assert cache.append(more) == 30
    assert cache.n == 50 and cache.max_rowid == 69
    assert cache.rowids.tolist() == list(range(1, 21)) + list(range(40, 70))
    np.testing.assert_allclose(cache.matrix[:20], vecs, atol=1e-6)
    np.testing.assert_allclose(cache.matrix[20:], tiers.decode_rows([(r[-1], "int8") for r in more], DIM), atol=1e-6)
    assert cache.tag_mask(["t1"]).nonzero()[0].tolist() == [2, 4]
    tier = cache.column("tier")
    assert (tier == cache.codes("tier", ["archive"])[0]).sum() == 10 + 15
    assert np.isnan(cache.column("expires_at")).all()


def test_a_small_scope_holds_little() -> None:
    rng = np.random.default_rng(1)
    small = VectorCache("u", "a", "enc", DIM)
    small.append(_rows(rng, 1, 10)[0])
    assert small.nbytes < 64 * DIM * 4  # room for 16 rows, not 1,024 (1.5 MB at 384 dimensions)
    big = VectorCache("u", "a", "enc", DIM)
    for start in range(1, 3001, 100):  # growth stays amortised: capacity at most twice what is held
        big.append(_rows(rng, start, 100)[0])
    assert big.n == 3000 and big.nbytes <= 2 * 3000 * (DIM * 4 + 8 + 1 + 4 * len(CODED_COLUMNS) + 8 * len(FLOAT_COLUMNS))


def test_rows_appended_a_few_at_a_time_equal_one_block() -> None:
    """A write's rows (one to a few: filled element by element) and a load's block (vectorised) give
    the same cache: rowids, every column with its None values, vectors of any format, tags."""
    rng = np.random.default_rng(2)
    rows, _ = _rows(rng, 1, 9)
    more, _ = _rows(rng, 20, 5, fmt="int8")
    rows = [r[:5] + (None,) + r[6:10] + (5.0 + i,) + r[11:] if i % 2 else r for i, r in enumerate(rows + more)]
    tags = [(r[0], f"t{r[0] % 3}") for r in rows if r[0] % 2]
    block, few = VectorCache("u", "a", "enc", DIM), VectorCache("u", "a", "enc", DIM)
    block.append(rows, tags)
    for s, n in ((0, 1), (1, 3), (4, 4), (8, 2), (10, 4)):
        part = rows[s:s + n]
        ids = {r[0] for r in part}
        few.append(part, [t for t in tags if t[0] in ids])
    assert few.rowids.tolist() == block.rowids.tolist() and few.n == 14
    np.testing.assert_array_equal(few.matrix, block.matrix)
    np.testing.assert_array_equal(few.has_vector, block.has_vector)
    for c in CODED_COLUMNS + FLOAT_COLUMNS:
        np.testing.assert_array_equal(few.column(c), block.column(c))
    for t in ("t0", "t1", "t2"):
        assert few.tag_mask([t]).tolist() == block.tag_mask([t]).tolist()
