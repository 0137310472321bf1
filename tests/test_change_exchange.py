"""Summing B by changed cells (``backends/cuda/multi_gpu/change_exchange.py``): the sum is the
whole table's, bit for bit, whether the changes are gathered or a sweep falls back to the ring,
and the bytes it records are what it sent. One NCCL rank in one process, so one GPU suffices;
several ranks in several processes are tested through Dask (tests/test_dask.py)."""

import numpy as np
import pytest

from sklearn_gpulda.backends.cuda.multi_gpu.change_exchange import (
    PAIR_BYTES, buffer_bytes, list_capacity, ring_bytes)


def test_capacity_stays_below_the_ring_and_bounds_memory():
    n = 1_000_000
    for n_ranks in (2, 4, 16, 64):
        m = list_capacity(n, n_ranks)
        assert (n_ranks - 1) * m * PAIR_BYTES < ring_bytes(n, n_ranks)
        assert n_ranks * m * PAIR_BYTES <= 3 * n  # the gathered lists: 3 bytes a cell
    assert ring_bytes(n, 4) == 2 * 3 * 4 * n // 4
    assert list_capacity(3, 4) == 1


def _one_rank():
    import cupy

    from sklearn_gpulda.backends.cuda.multi_gpu.all_reduce import (NcclRank, nccl_module,
                                                                   nccl_unique_id)

    if nccl_module() is None:
        pytest.skip("CuPy has no NCCL here")
    return cupy, NcclRank(cupy, 0, 1, nccl_unique_id(), 0)


@pytest.mark.gpu
@pytest.mark.parametrize("capacity", [None, 5])
def test_one_rank_sum_follows_its_counts(capacity):
    from sklearn_gpulda.backends.cuda.multi_gpu.change_exchange import ChangeExchange

    cp, rank = _one_rank()
    rng = np.random.default_rng(0)
    counts = rng.integers(0, 50, size=(300, 7)).astype(np.float32)
    pool = cp.get_default_memory_pool()
    used = pool.used_bytes()
    exchange = ChangeExchange(cp, rank, 1, counts.size, capacity)
    # What a shard's memory plan keeps aside (the pool rounds each of 8 arrays up to 512 bytes).
    if capacity is None:
        assert pool.used_bytes() - used <= buffer_bytes(counts.size, 1) + 8 * 512
    try:
        buffer = cp.asarray(counts)
        exchange.start(buffer)
        np.testing.assert_array_equal(buffer.get(), counts)
        expected = [None]
        # Sweeps that change no cell, a few cells, and many (past a capacity of 5); a cell
        # may go down as well as up.
        for n_drawn in (0, 3, 40, 2):
            before = counts.copy()
            cells = rng.choice(counts.size, size=n_drawn, replace=False)
            counts.ravel()[cells] += rng.integers(-3, 9, size=n_drawn).astype(np.float32)
            np.maximum(counts, 0, out=counts)
            n_changed = int(np.count_nonzero(counts != before))
            expected.append(None if capacity is not None and n_changed > capacity
                            else n_changed)
            buffer = cp.asarray(counts)
            exchange.sum(buffer)
            np.testing.assert_array_equal(buffer.get(), counts)
        assert exchange.lists == expected
        assert any(m is not None and m > 5 for m in expected) == (capacity is None)
        assert exchange.sent == [0] * 5  # one rank sends nothing, either way
    finally:
        exchange.close()
        rank.close()
