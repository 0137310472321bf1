"""Launchers of ``cuda/layout.cu``: a chunk's PDOW tokens laid out from its counts, and the
documents' normalisers, with no kernel compiled at run time.

Besides these kernels the build uses two precompiled CuPy routines only: the in-place sort of a
contiguous 1-d array (``ndarray.sort``, Thrust, no copy) and CUB's in-place device scan
(``cupy.cuda.cub.device_scan``). ``cupy.cumsum`` and ``cupy.argsort`` would each compile a copy
kernel first (``elementwise_copy``).
"""

import numpy as np

from .. import kernels as _kernels

STEM = "layout"
BLOCK = 256
#: Most blocks of a grid-strided kernel (enough to fill any GPU we support).
MAX_GRID = 4096


def _grid(n):
    return max(1, min(-(-int(n) // BLOCK), MAX_GRID))


def inclusive_sum(cp, values):
    """``values`` (contiguous 1-d int64) replaced by its inclusive prefix sum, in place (CUB)."""
    from cupy.cuda import cub

    if values.size:
        cub.device_scan(values, cub.CUPY_CUB_CUMSUM)
    return values


def word_tokens(cp, indices, new_of_old, nz_ptr, n_words):
    """Host int64 ``(n_words,)``: tokens of each relabelled word among the non-zeros
    ``indices`` (int32, vocabulary ids) whose first tokens are ``nz_ptr`` (one more)."""
    count = cp.zeros(n_words, dtype=cp.uint64)
    n_nz = int(indices.shape[0])
    if n_nz:
        _kernels.launch(STEM, "word_tokens", _grid(n_nz), BLOCK,
                        [(indices, np.int32), (new_of_old, np.int32), (nz_ptr, np.int64),
                         (n_nz, "i64"), (count, np.uint64)])
    return count.get().astype(np.int64)


def sorted_nonzeros(cp, indices, new_of_old, nz_ptr):
    """The non-zeros of a piece sorted by (relabelled word, index): device ``(keys, ends)``,
    ``keys`` (uint64) ``(word << 32) | j`` and ``ends`` (int64) the end of each one's tokens
    in that order (the inclusive sum of their token counts)."""
    n_nz = int(indices.shape[0])
    if n_nz >= 1 << 32:
        raise ValueError(f"a piece of the layout holds {n_nz} non-zeros; at most 2**32 - 1")
    keys = cp.empty(n_nz, dtype=cp.uint64)
    ends = cp.empty(n_nz, dtype=cp.int64)
    if n_nz:
        grid = _grid(n_nz)
        _kernels.launch(STEM, "nonzero_keys", grid, BLOCK,
                        [(indices, np.int32), (new_of_old, np.int32), (n_nz, "i64"),
                         (keys, np.uint64)])
        keys.sort()  # in place: Thrust, precompiled
        _kernels.launch(STEM, "sorted_reps", grid, BLOCK,
                        [(keys, np.uint64), (nz_ptr, np.int64), (n_nz, "i64"), (ends, np.int64)])
        inclusive_sum(cp, ends)
    return keys, ends


def place_tokens(cp, keys, ends, cursor, nz_ptr, indptr, j0, doc_base, t0, doc_off, place, doc):
    """Each token of a piece (its non-zeros sorted by :func:`sorted_nonzeros`) into the chunk's
    ``place`` and ``doc`` (``cuda/layout.cu``), and ``cursor`` advanced past them."""
    n_nz = int(keys.shape[0])
    if not n_nz:
        return
    grid = _grid(n_nz)
    first = cp.empty(cursor.shape[0], dtype=cp.int64)
    _kernels.launch(STEM, "word_firsts", grid, BLOCK,
                    [(keys, np.uint64), (ends, np.int64), (n_nz, "i64"), (first, np.int64)])
    suffix = "u16" if place.dtype == np.uint16 else "u32"
    _kernels.launch(
        STEM, f"place_tokens_{suffix}", grid, BLOCK,
        [(keys, np.uint64), (ends, np.int64), (first, np.int64), (cursor, np.int64),
         (nz_ptr, np.int64), (indptr, np.int64), (int(indptr.shape[0]) - 1, "i32"),
         (j0, "i64"), (doc_base, "i64"), (t0, "i64"), (doc_off, np.int32), (n_nz, "i64"),
         (place, place.dtype), (doc, np.int32)])
    _kernels.launch(STEM, "advance_cursor", grid, BLOCK,
                    [(keys, np.uint64), (ends, np.int64), (first, np.int64), (n_nz, "i64"),
                     (cursor, np.int64)])


def token_weights(nz_ptr, nz_weight, t0, weight):
    """``weight`` (the chunk's tokens, canonical order) from its non-zeros' weights."""
    n_nz = int(nz_weight.shape[0])
    if n_nz:
        _kernels.launch(STEM, "token_weights", _grid(n_nz), BLOCK,
                        [(nz_ptr, np.int64), (nz_weight, np.float32), (n_nz, "i64"),
                         (t0, "i64"), (weight, np.float32)])


def document_norms(weight, alpha_sum, norm):
    """``norm = weight + alpha_sum`` (float64 device arrays of the documents)."""
    n_docs = int(weight.shape[0])
    if n_docs:
        _kernels.launch(STEM, "document_norms", _grid(n_docs), BLOCK,
                        [(weight, np.float64), (alpha_sum, "f64"), (n_docs, "i64"),
                         (norm, np.float64)])
