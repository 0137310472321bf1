"""Launchers of ``cuda/dense_read.cu``: what the fit loop reads of a dense chain besides its
tables, A's histogram for learning alpha and the training log-likelihood, with no kernel
compiled at run time."""

import numpy as np

from .. import kernels as _kernels
from ..constants import DENSE_LOGLIK_BLOCK, DENSE_LOGLIK_TOKENS

_STEM = "dense_read"
_BLOCK = 256
#: Topics a block of the histogram bins in shared memory at once (128 x 64 bins of 4 bytes).
_TOPICS_PER_PASS = 128
#: Tokens whose log-likelihood terms one block adds into one partial sum.
LOGLIK_TILE = DENSE_LOGLIK_BLOCK * DENSE_LOGLIK_TOKENS


def topic_bins(A, table, overflow, n_overflow, n_sm):
    """Add A's non-zero counts to ``table`` (K x n_bins uint64: integer counts below n_bins) and
    the other entries' keys ``(topic << 32) | float bits`` to ``overflow`` (its size is the
    capacity) through the device counter ``n_overflow`` (``cuda/dense_read.cu``).

    Parameters
    ----------
    A : cupy.ndarray of float32, shape (D, K)
    table : cupy.ndarray of uint64, shape (K, n_bins)
    overflow : cupy.ndarray of uint64
    n_overflow : cupy.ndarray of uint64, shape (1,)
    n_sm : int
    """
    n_rows, n_topics = A.shape
    n_bins = int(table.shape[1])
    if A.size == 0:
        return
    per_pass = min(n_topics, _TOPICS_PER_PASS)
    cells = n_rows * per_pass
    grid = (max(1, min(-(-cells // _BLOCK), 4 * n_sm)), -(-n_topics // per_pass))
    _kernels.launch(_STEM, "dense_topic_bins", grid, _BLOCK,
                    [(A, np.float32), (n_rows, "i64"), (n_topics, "i32"), (per_pass, "i32"),
                     (n_bins, "i32"), (table, np.uint64), (overflow, np.uint64),
                     (n_overflow, np.uint64), (int(overflow.size), "i64")],
                    shared_mem=per_pass * n_bins * 4)


def log_likelihood(doc, word, weight, A, bhat, alpha, doc_norm, n_sm):
    """The training log-likelihood of ``doc/algorithm.md`` of a dense chain, a float.

    Each tile of :data:`LOGLIK_TILE` tokens gives one float64 partial sum in an order fixed by
    the corpus alone (``cuda/dense_read.cu``); the partial sums are added on the host (NumPy's
    pairwise sum), so the value does not depend on the GPU.

    Parameters
    ----------
    doc, word : cupy.ndarray of int32, shape (n_tokens,)
    weight : cupy.ndarray of float32, shape (n_tokens,), or None
    A : cupy.ndarray of float32, shape (D, K)
    bhat : cupy.ndarray of float32, shape (V, K)
    alpha : cupy.ndarray of float32, shape (K,)
    doc_norm : cupy.ndarray of float64, shape (D,)
        ``N_d + sum(alpha)``.
    n_sm : int
    """
    import cupy as cp

    n_tokens = int(doc.shape[0])
    if n_tokens == 0:
        return 0.0
    n_words, n_topics = bhat.shape
    q = cp.empty(n_words, dtype=cp.float64)
    _kernels.launch(_STEM, "dense_prior_mass", max(1, min(-(-n_words // _BLOCK), 8 * n_sm)),
                    _BLOCK, [(bhat, np.float32), (alpha, np.float32), (n_words, "i64"),
                             (n_topics, "i32"), (q, np.float64)])
    n_tiles = -(-n_tokens // LOGLIK_TILE)
    partial = cp.empty(n_tiles, dtype=cp.float64)
    _kernels.launch(_STEM, "dense_token_loglik", n_tiles, DENSE_LOGLIK_BLOCK,
                    [(doc, np.int32), (word, np.int32), (weight, np.float32), (A, np.float32),
                     (bhat, np.float32), (q, np.float64), (doc_norm, np.float64),
                     (n_tokens, "i64"), (n_topics, "i32"), (partial, np.float64)])
    return float(np.sum(partial.get()))


def loglik_bytes(n_tokens, n_words):
    """Device bytes :func:`log_likelihood` allocates: Q of each word and a partial per tile."""
    return 8 * n_words + 8 * (-(-n_tokens // LOGLIK_TILE))
