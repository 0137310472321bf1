"""The dense engine's fused M-step for integer counts.

The sampling kernels count each token's new topic into the next A and B as they draw
(``counts_next`` of :func:`~.sample_dense.sample_dense`); what is left is zeroing those tables
before the sweep and, after it, the topic totals and Bhat, two kernels of ``cuda/dense_mstep.cu``
(a third rewrites Bhat at a matrix prior's seeded cells). A chain's first topics are counted by
:func:`count_tokens`. Every launch is precompiled (no CuPy-generated kernel), and the zeroing is a
memset (``counts.clear``).

Why the model does not change: with every weight 1, each cell of A and B is a sum of ones, and
float32 adds integers below 2^24 exactly, so the atomics give the same table in any order, the one
``cupy.bincount`` gives; the totals are summed as 64-bit integers, and Bhat is the bincount path's
float64 expression, operation for operation (see the kernel file). A row whose sum could reach
2^24 (a document or a word of 2^24 tokens) or a weighted corpus keeps the bincount path.
"""

import numpy as np

from .. import kernels as _kernels
from ..counts import clear

_STEM = "dense_mstep"

#: Integer counts up to here are exact in float32, whatever order they are added in.
EXACT_COUNT = 1 << 24

#: Threads per block of the M-step kernels.
_BLOCK = 256


def counts_are_exact(cp, corpus, word):
    """Whether atomic float32 counts of ``corpus`` equal its bincounts: no weights, and every
    document and every word below :data:`EXACT_COUNT` tokens.

    Parameters
    ----------
    cp : module
        CuPy.
    corpus : TokenCorpus
    word : cupy.ndarray of int32
        The corpus's words on the device (counted only for a corpus of 2^24 tokens or more).

    Returns
    -------
    bool
    """
    if not corpus.integral:
        return False
    if corpus.n_tokens < EXACT_COUNT:
        return True
    longest = float(np.max(corpus.doc_lengths(), initial=0.0))
    if longest >= EXACT_COUNT:
        return False
    # Counted on the host: cupy.bincount would compile its kernels on a user's machine.
    host = corpus.word if isinstance(corpus.word, np.ndarray) else word.get()
    return int(np.bincount(host).max(initial=0)) < EXACT_COUNT


def count_tokens(doc, word, z, A, B, n_sm):
    """Add every token's topic to ``A`` (by document) and ``B`` (by word), either None to skip
    it: float32 atomics, exact for the integer counts :func:`counts_are_exact` admits. The
    tables are zeroed by the caller.

    Parameters
    ----------
    doc, word, z : cupy.ndarray of int32, shape (n_tokens,)
    A : cupy.ndarray of float32, shape (D, K), or None
    B : cupy.ndarray of float32, shape (V, K), or None
    n_sm : int
    """
    n = int(z.shape[0])
    if n == 0 or (A is None and B is None):
        return
    n_topics = int((A if A is not None else B).shape[1])
    _kernels.launch(_STEM, "dense_count_tokens", max(1, min(-(-n // _BLOCK), 16 * n_sm)), _BLOCK,
                    [(doc, np.int32), (word, np.int32), (z, np.int32), (n, "i64"),
                     (n_topics, "i32"), (A, np.float32), (B, np.float32)])


def seed_bhat(B, cells, beta, denom, bhat, n_sm):
    """Bhat at a matrix prior's seeded cells (``cells``, :class:`~..seeded.DeviceCells`):
    ``float32(((B + beta) + extra) / denom)``, the NumPy engine's order, after the other cells
    were written with ``denom`` (which holds the cells' topic sums)."""
    n = int(cells.rows.shape[0])
    if n == 0:
        return
    _kernels.launch(_STEM, "dense_seed_bhat", max(1, min(-(-n // _BLOCK), 8 * n_sm)), _BLOCK,
                    [(B, np.float32), (int(B.shape[1]), "i32"), (cells.rows, np.int32),
                     (cells.topics, np.int32), (cells.extra, np.float64), (n, "i64"),
                     (float(beta), "f64"), (denom, np.float64), (bhat, np.float32)])


def set_bhat(B, totals, beta, v_beta, bhat, denom, n_sm, cells=None, prior_word=None):
    """Bhat and ``denom = n + V beta`` of integer counts B, as the bincount path's CuPy
    expression computes them; with a matrix prior's ``cells`` (:class:`~..seeded.DeviceCells`)
    ``denom`` adds their topic sums and Bhat their extras at their cells, as the NumPy engine
    does.

    Parameters
    ----------
    B : cupy.ndarray of float32, shape (V, K)
        Word-topic counts, integer-valued.
    totals : cupy.ndarray of uint64, shape (K,)
        Scratch for the topic totals (overwritten).
    beta, v_beta : float
        beta and ``V * beta``, the latter formed by the caller as the CuPy path forms it.
    bhat : cupy.ndarray of float32, shape (V, K)
    denom : cupy.ndarray of float64, shape (K,)
        Written.
    n_sm : int
        Streaming multiprocessors of the GPU (the totals' grid).
    cells : DeviceCells or None, default=None
        A matrix prior's seeded cells; None for a scalar prior.
    prior_word : cupy.ndarray of float64, shape (2,), optional
        ``(beta, v_beta)`` on the device, read by the kernel instead of the arguments (a sweep
        replayed as a CUDA graph; with no seeded cells).
    """
    n_topics = B.shape[1]
    topic_totals(B, totals, n_sm)
    grid = max(1, min(-(-B.size // _BLOCK), 32 * n_sm))
    _kernels.launch(_STEM, "dense_bhat", grid, _BLOCK,
                    [(B, np.float32), (totals, np.uint64), (B.size, "i64"), (n_topics, "i32"),
                     (float(beta), "f64"), (float(v_beta), "f64"),
                     (None if cells is None else cells.topic_sums, np.float64),
                     (bhat, np.float32), (denom, np.float64), (prior_word, np.float64)])
    if cells is not None:
        seed_bhat(B, cells, beta, denom, bhat, n_sm)


def topic_totals(B, totals, n_sm):
    """``totals`` (K uint64) = the column sums of the integer counts ``B``, exact."""
    n_rows, n_topics = B.shape
    clear(totals)
    _kernels.launch(_STEM, "dense_topic_totals", 4 * n_sm, _BLOCK,
                    [(B, np.float32), (n_rows, "i32"), (n_topics, "i32"), (totals, np.uint64)])
