"""``topic_major_to_host``: the device-to-host copy behind both CUDA engines' topic-word counts.

It is written against the array module it is given, so NumPy stands in for CuPy here; the GPU
tests of the engines run the same function on CuPy arrays.
"""

import numpy as np
import pytest

from sklearn_gpulda.backends.cuda.transfer import topic_major_to_host


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.float64])
@pytest.mark.parametrize("block_bytes", [8, 8 * 7 * 3, 1 << 20])
def test_equals_gather_then_transpose(dtype, block_bytes):
    rng = np.random.default_rng(0)
    counts = rng.integers(0, 50, size=(23, 7)).astype(dtype)  # (V, K), word-major
    rows = rng.permutation(23)
    out = topic_major_to_host(np, counts, rows, block_bytes=block_bytes)
    expected = np.ascontiguousarray(counts[rows].T.astype(np.float64))
    assert out.dtype == np.float64 and out.flags.c_contiguous
    np.testing.assert_array_equal(out, expected)


def test_identity_order_and_divisor_match_float64_division():
    rng = np.random.default_rng(1)
    counts = rng.integers(0, 1000, size=(40, 9)).astype(np.float32)
    out = topic_major_to_host(np, counts, divisor=3, block_bytes=8 * 9 * 4)
    # Bit for bit what the engines computed before: float64 conversion, then the division.
    np.testing.assert_array_equal(out, (counts.astype(np.float64) / 3).T)


def test_fewer_rows_than_table_and_empty():
    counts = np.arange(30, dtype=np.float32).reshape(10, 3)
    rows = np.array([9, 0, 4])
    np.testing.assert_array_equal(topic_major_to_host(np, counts, rows), counts[rows].T)
    empty = topic_major_to_host(np, counts, np.zeros(0, dtype=np.int64))
    assert empty.shape == (3, 0)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_prior_added_after_division_then_converted(dtype):
    # components_ as the fit loop used to make it on the host: float64 mean, plus beta, then
    # scikit-learn's dtype; blocks of two topics so several blocks land in place.
    rng = np.random.default_rng(2)
    counts = rng.integers(0, 1000, size=(17, 5)).astype(np.float64)
    rows = rng.permutation(17)
    out = topic_major_to_host(np, counts, rows, divisor=7, add=0.01, dtype=dtype,
                              block_bytes=8 * 17 * 2)
    expected = ((counts[rows] / 7).T + 0.01).astype(dtype)
    assert out.dtype == dtype and out.flags.c_contiguous
    np.testing.assert_array_equal(out, expected)


@pytest.mark.gpu
def test_pipelined_copy_waits_for_the_callers_stream():
    # The blocks are made on a stream of their own: they must read the table after the work
    # the caller queued on its stream (here a long series of updates) is done.
    import cupy as cp

    table = cp.zeros((20000, 64), dtype=cp.float64)
    for _ in range(200):
        table += 1.0
    got = topic_major_to_host(cp, table, divisor=2.0, block_bytes=1 << 20)
    np.testing.assert_array_equal(got, np.full((64, 20000), 100.0))
