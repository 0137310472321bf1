"""Launchers of ``cuda/model.cu``: averaging's running sum and topic-major blocks of a
word-major table, the same numbers as the CuPy expressions they stand for, with no kernel
compiled at run time."""

import numpy as np

from . import kernels as _kernels

STEM = "model"
BLOCK = 256
#: Most blocks of the grid-strided kernel.
MAX_GRID = 4096
TILE, TILE_ROWS = 32, 8
_SUFFIX = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64"}


def accumulate(table, total):
    """``total + table`` into ``total`` (float64) where ``total`` is given, else a new float64
    copy of ``table``: the running sum of averaging. ``table`` is a C-contiguous float32 device
    array."""
    import cupy as cp

    first = total is None
    if first:
        total = cp.empty(table.shape, dtype=cp.float64)
    n = int(table.size)
    if n:
        _kernels.launch(STEM, "accumulate_sum", max(1, min(-(-n // BLOCK), MAX_GRID)), BLOCK,
                        [(table, np.float32), (n, "i64"), (int(first), "i32"),
                         (total, np.float64)])
    return total


def can_make_topic_major(table, rows, dtype):
    """Whether :func:`topic_major` takes these arguments (else the caller uses CuPy)."""
    import cupy as cp

    return (isinstance(table, cp.ndarray) and table.ndim == 2 and table.flags.c_contiguous
            and table.dtype in _SUFFIX and np.dtype(dtype) in _SUFFIX
            and (rows is None or (isinstance(rows, cp.ndarray) and rows.dtype == np.int32
                                  and rows.flags.c_contiguous)))


def topic_major(table, rows, lo, hi, divisor, add, dtype):
    """Device ``(hi - lo, n_words)`` array of ``dtype``: topics ``lo:hi`` of the word-major
    ``table`` (V' x K, float32 or float64) at rows ``rows`` (int32, or None for all), in
    float64, divided by ``divisor`` and then plus ``add`` where given, converted last."""
    import cupy as cp

    n_words = int(table.shape[0] if rows is None else rows.shape[0])
    out = cp.empty((hi - lo, n_words), dtype=dtype)
    if out.size:
        name = f"topic_major_{_SUFFIX[table.dtype]}_{_SUFFIX[np.dtype(dtype)]}"
        grid = (-(-n_words // TILE), -(-(hi - lo) // TILE))
        _kernels.launch(
            STEM, name, grid, (TILE, TILE_ROWS),
            [(table, table.dtype), (int(table.shape[1]), "i32"), (rows, np.int32),
             (n_words, "i64"), (lo, "i32"), (hi, "i32"), (int(divisor is not None), "i32"),
             (1.0 if divisor is None else divisor, "f64"), (int(add is not None), "i32"),
             (0.0 if add is None else add, "f64"), (out, out.dtype)])
    return out
