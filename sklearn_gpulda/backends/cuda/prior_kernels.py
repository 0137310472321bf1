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


def _pow2_at_least(n):
    return 1 << max(0, int(n) - 1).bit_length()


def learn_from_bins(cp, alpha=None, alpha_bins=None, lengths=None, beta=None, beta_bins=None,
                    n_words=None):
    """Both fixed points from histograms the device holds, in one read: what
    :func:`alpha_fixed_point` and :func:`beta_fixed_point` learn from the host's copies of the
    same histograms, bit for bit, with no trip through the host before the fixed points run.

    Parameters
    ----------
    alpha : ndarray of float64, or None
        Where alpha's iteration starts (None: alpha is not learned).
    alpha_bins : tuple
        ``(bins, keys, n_keys)`` on the device: A's histogram as
        :func:`~sklearn_gpulda.backends.cuda.counts.a_entry_histogram` leaves it (a (K,
        KEY_BINS) uint64 table, the overflow's keys and their number).
    lengths : (length, n_length) host arrays
        The length histogram of the documents.
    beta : float or None
        Where beta's iteration starts (None: beta is not learned).
    beta_bins : tuple
        ``(bins, values, n_values, totals)`` on the device: B's histogram as
        :func:`~sklearn_gpulda.backends.cuda.counts.value_bins` leaves it, and the topic totals
        (float64 or uint64, exact).
    n_words : int

    Returns
    -------
    (alpha, beta) : the learned priors on the host (None for one not learned).
    """
    n_topics = 0 if alpha is None else int(np.size(alpha))
    length = n_length = None
    if alpha is not None:
        length = np.asarray(lengths[0], dtype=np.float64)
        n_length = np.asarray(lengths[1], dtype=np.float64)
        if not n_length.sum():  # no document: alpha stays (as the host's update_alpha)
            alpha, n_topics = np.array(alpha, dtype=np.float64), 0
    # Alpha, then beta, in one buffer: the one copy read back at the end.
    out = cp.asarray(np.concatenate([np.asarray(alpha if n_topics else [], dtype=np.float64),
                                     [0.0 if beta is None else float(beta)]]))
    if n_topics:
        bins, keys, n_keys = alpha_bins
        capacity, n_bins = int(keys.size), int(bins.shape[1])
        n_lengths, n_counts = length.size, n_bins - 1
        lengths_d = cp.asarray(np.concatenate([length, n_length]))
        sort = cp.empty(_pow2_at_least(capacity), dtype=cp.uint64)
        ints = cp.empty(2 * capacity + n_topics + 2, dtype=cp.int32)
        head, topic = ints[:capacity], ints[capacity:2 * capacity]
        start, n_pairs = ints[2 * capacity:2 * capacity + n_topics + 1], ints[-1:]
        floats = cp.empty(n_topics * n_counts + 3 * capacity + n_lengths + 2 * n_topics,
                          dtype=cp.float64)
        views = np.cumsum([0, n_topics * n_counts, capacity, capacity])
        table, count, docs = (floats[a:b] for a, b in zip(views[:-1], views[1:]))
        _kernels.launch(
            STEM, "alpha_pairs_of_keys", 1, BLOCK,
            [(bins, np.uint64), (n_bins, "i32"), (keys, np.uint64), (n_keys, np.uint64),
             (capacity, "i32"), (n_topics, "i32"), (sort, np.uint64), (head, np.int32),
             (table, np.float64), (topic, np.int32), (start, np.int32), (count, np.float64),
             (docs, np.float64), (n_pairs, np.int32)],
        )
        _kernels.launch(
            STEM, "alpha_fixed_point_bins", 1, BLOCK,
            [(out[:n_topics], np.float64), (table, np.float64), (n_counts, "i32"),
             (start, np.int32), (topic, np.int32), (count, np.float64), (docs, np.float64),
             (n_pairs, np.int32), (lengths_d[:n_lengths], np.float64),
             (lengths_d[n_lengths:], np.float64), (n_lengths, "i32"), (n_topics, "i32"),
             (_learning.MAX_ITERATIONS, "i32"), (_learning.TOLERANCE, "f64"),
             (_learning.FLOOR, "f64"), (floats[views[-1]:], np.float64)],
        )
    if beta is not None:
        bins, values, n_values, totals = beta_bins
        n_bins, capacity, k = int(bins.size), int(values.size), int(totals.size)
        wide = totals.dtype == cp.float64
        sort = cp.empty(_pow2_at_least(capacity), dtype=cp.uint64)
        head = cp.empty(max(n_bins, capacity), dtype=cp.int32)
        n_max = n_bins + capacity
        floats = cp.empty(3 * n_max + k, dtype=cp.float64)
        _kernels.launch(
            STEM, "beta_fixed_point_bins", 1, BLOCK,
            [(out[out.size - 1:], np.float64), (bins, np.uint64), (n_bins, "i32"),
             (values, np.float32), (n_values, np.uint64), (capacity, "i32"),
             (totals if wide else None, np.float64), (None if wide else totals, np.uint64),
             (k, "i32"), (float(n_words), "f64"), (_learning.MAX_ITERATIONS, "i32"),
             (_learning.TOLERANCE, "f64"), (_learning.FLOOR, "f64"), (sort, np.uint64),
             (head, np.int32), (floats[:n_max], np.float64),
             (floats[n_max:2 * n_max], np.float64), (floats[2 * n_max:], np.float64)],
        )
    host = out.get()
    learned_alpha = None
    if alpha is not None:
        learned_alpha = host[:n_topics] if n_topics else np.array(alpha, dtype=np.float64)
    return learned_alpha, None if beta is None else float(host[-1])
