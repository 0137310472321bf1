"""The learned priors' fixed points on a chain's GPU (``cuda/priors.cu``): what
:func:`~sklearn_gpulda.backends.prior_learning.update_alpha` and
:func:`~sklearn_gpulda.backends.prior_learning.update_beta` compute, bit for bit, in one launch
each. On the host, at small corpora, the fixed point's digammas took as long as the sweeps
between two updates while the GPU waited (``doc/performance.md``, "Alpha's fixed point on the
device")."""

import numpy as np

from .. import prior_learning as _learning
from . import kernels as _kernels

STEM = "priors"
#: Threads of the one block each fixed point runs in (``kPriorBlock``).
BLOCK = 512


def alpha_fixed_point(cp, alpha, table, rest, length, n_length):
    """:func:`~sklearn_gpulda.backends.prior_learning.update_alpha` on the current GPU.

    Every input is on the host (``doc_topic_table``'s pair, the length histogram); they go to
    the device in a few copies. Returns the learned alpha on the host.
    """
    alpha = np.array(alpha, dtype=np.float64)
    length = np.asarray(length, dtype=np.float64)
    n_length = np.asarray(n_length, dtype=np.float64)
    if not n_length.sum():
        return alpha
    n_topics = alpha.size
    topic, count, n_docs = rest
    topic = np.asarray(topic, dtype=np.int64)
    # The device sums each topic's pairs in the order the host's bincount meets them.
    order = np.argsort(topic, kind="stable")
    topic = topic[order].astype(np.int32)
    count = np.asarray(count, dtype=np.float64)[order]
    n_docs = np.asarray(n_docs, dtype=np.float64)[order]
    start = np.searchsorted(topic, np.arange(n_topics + 1)).astype(np.int32)
    n_pairs, n_lengths = topic.size, length.size
    floats = cp.asarray(np.concatenate([alpha, count, n_docs, length, n_length]))
    ints = cp.asarray(np.concatenate([start, topic]))
    n_counts = table.shape[1] if table.size else 0
    table = cp.asarray(np.ascontiguousarray(table, dtype=np.float64))
    scratch = cp.empty(n_pairs + n_lengths + 2 * n_topics, dtype=cp.float64)
    views = np.cumsum([0, n_topics, n_pairs, n_pairs, n_lengths, n_lengths])
    alpha_d, count_d, docs_d, length_d, n_length_d = (
        floats[a:b] for a, b in zip(views[:-1], views[1:]))
    _kernels.launch(
        STEM, "alpha_fixed_point", 1, BLOCK,
        [(alpha_d, np.float64), (table if n_counts else None, np.float64), (n_counts, "i32"),
         (ints[:n_topics + 1], np.int32), (ints[n_topics + 1:], np.int32),
         (count_d, np.float64), (docs_d, np.float64), (n_pairs, "i32"),
         (length_d, np.float64), (n_length_d, np.float64), (n_lengths, "i32"),
         (n_topics, "i32"), (_learning.MAX_ITERATIONS, "i32"), (_learning.TOLERANCE, "f64"),
         (_learning.FLOOR, "f64"), (scratch, np.float64)],
    )
    return alpha_d.get()


def beta_fixed_point(cp, beta, count, n_cells, topic_totals, n_words):
    """:func:`~sklearn_gpulda.backends.prior_learning.update_beta` without seeded cells, on the
    current GPU, from host arrays. Returns the learned beta."""
    count = np.asarray(count, dtype=np.float64)
    n_cells = np.asarray(n_cells, dtype=np.float64)
    totals = np.asarray(topic_totals, dtype=np.float64)
    if not n_cells.sum():
        return float(beta)
    n_values, n_topics = count.size, totals.size
    floats = cp.asarray(np.concatenate([[float(beta)], count, n_cells, totals]))
    views = np.cumsum([0, 1, n_values, n_values, n_topics])
    beta_d, count_d, cells_d, totals_d = (floats[a:b] for a, b in zip(views[:-1], views[1:]))
    scratch = cp.empty(n_values + n_topics, dtype=cp.float64)
    _kernels.launch(
        STEM, "beta_fixed_point", 1, BLOCK,
        [(beta_d, np.float64), (count_d, np.float64), (cells_d, np.float64), (n_values, "i32"),
         (totals_d, np.float64), (n_topics, "i32"), (float(n_words), "f64"),
         (_learning.MAX_ITERATIONS, "i32"), (_learning.TOLERANCE, "f64"),
         (_learning.FLOOR, "f64"), (scratch, np.float64)],
    )
    return float(beta_d.get()[0])


def digamma(cp, x):
    """``cuda/digamma.cuh``'s digamma of a host array, on the current GPU (for the tests that
    compare it with :func:`sklearn_gpulda.backends.digamma.digamma`)."""
    x = cp.asarray(np.ascontiguousarray(x, dtype=np.float64))
    out = cp.empty_like(x)
    if x.size:
        _kernels.launch(STEM, "digamma_values", min(-(-x.size // 256), 4096), 256,
                        [(x, np.float64), (x.size, "i64"), (out, np.float64)])
    return out.get()
