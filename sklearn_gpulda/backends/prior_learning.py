"""Learning the Dirichlet priors from the chain's counts: Minka's fixed points on histograms.

Minka's fixed-point iteration for the Dirichlet-multinomial (Minka 2000, "Estimating a Dirichlet
distribution", Eq. 55) runs on the histograms of counts rather than the counts themselves
(Wallach 2008, PhD thesis, Sec. 2.3), as MALLET and tomotopy do. For an asymmetric document-topic
prior alpha, with ``C_k(n)`` the number of documents holding ``n`` tokens of topic ``k`` and
``C(n)`` the number of documents of length ``n``::

    alpha_k <- alpha_k * sum_n C_k(n) [psi(n + alpha_k) - psi(alpha_k)]
                       / sum_n C(n) [psi(n + sum_j alpha_j) - psi(sum_j alpha_j)]

and for a symmetric topic-word prior beta over V words, with ``H(n)`` the number of (word, topic)
cells holding ``n`` tokens and ``n_k`` the tokens of topic k::

    beta <- beta * sum_n H(n) [psi(n + beta) - psi(beta)]
                 / (V sum_k [psi(n_k + V beta) - psi(V beta)])

Counts need not be integers (weighted tokens): the histograms then hold every distinct value.
Each update runs the fixed point from the current value to convergence, with a floor that keeps
a topic nobody uses from reaching zero (tomotopy floors at the same 1e-5). What the prior
parameters mean, and the seeded cells of a matrix prior, are :mod:`.priors`'.

A GPU chain runs these fixed points on its device (``cuda/priors.cu``); the host runs them for
the NumPy engine and for a Dask fit's driver. Where the host stands in for GPUs (``like_gpu``:
the driver of GPU workers), it must learn the GPU chain's priors bit for bit, so every
operation is one the device repeats in the same order: the digamma of :mod:`.digamma` (basic
operations only), and sums in the fixed orders of :func:`ordered_sum` (a warp's lanes), of
:func:`table_numerator` and of ``np.bincount`` (left to right); NumPy's own sums pair their
terms in an order of their own. The NumPy engine's fits never have to match a GPU's, so it
takes SciPy's digamma, several times cheaper on the host, with the same sums.
"""

import functools

import numpy as np
from scipy.special import digamma as scipy_digamma

from .digamma import digamma as basic_digamma


#: Smallest value a learned prior takes.
FLOOR = 1e-5
#: Fixed-point iterations per update, at most; and the relative change that ends them earlier.
MAX_ITERATIONS = 100
TOLERANCE = 1e-7


#: Integer counts below this are the columns of the alpha histogram's dense table
#: (:func:`alpha_table`); nearly every count of A is one of them.
TABLE_COUNTS = 64


def alpha_table(topic, count, n_docs, n_topics, n_counts=TABLE_COUNTS):
    """Split an alpha histogram into a dense table of its small integer counts and the rest.

    Parameters
    ----------
    topic, count, n_docs : ndarray
        ``n_docs[i]`` documents hold ``count[i]`` tokens of topic ``topic[i]`` (counts > 0).
    n_topics : int
    n_counts : int
        The table holds integer counts ``1 .. n_counts - 1``.

    Returns
    -------
    table : ndarray of float64, shape (n_topics, n_counts - 1)
        ``table[k, c - 1]`` documents hold ``c`` tokens of topic ``k``.
    rest : tuple of ndarray
        ``(topic, count, n_docs)`` of the other pairs, in their given order.
    """
    topic = np.asarray(topic, dtype=np.int64)
    count = np.asarray(count, dtype=np.float64)
    n_docs = np.asarray(n_docs, dtype=np.float64)
    small = (count < n_counts) & (count == np.floor(count))
    table = np.zeros((n_topics, n_counts - 1), dtype=np.float64)
    table[topic[small], count[small].astype(np.int64) - 1] = n_docs[small]
    rest = ~small
    return table, (topic[rest], count[rest], n_docs[rest])


@functools.lru_cache(maxsize=8)
def _steps(n, column=False):
    """``0, 1, ..., n - 1`` as float64, one read-only array per length (the fixed point asks
    for the same one every iteration); with ``column``, shaped (n, 1)."""
    steps = np.arange(n, dtype=np.float64).reshape((n, 1) if column else n)
    steps.flags.writeable = False
    return steps


#: Topics from which :func:`table_numerator` runs its sums across topics, one count at a time,
#: rather than along each topic's row (a host table at large K: the CPU engine's, a Dask
#: fit's). Measured on a 2-core host at C = 63, the row sums cost about 0.6 us per topic and
#: the column sums about 110 us plus 0.15 us per topic (K = 1,000: 1.2-1.4 ms against 0.27-0.4).
COLUMN_SUM_TOPICS = 256


def table_numerator(alpha, table):
    """The table's part of alpha's numerator: ``sum_c table[k, c] sum_{j <= c} 1 / (alpha_k + j)``
    per topic k, for a host table.

    The sum runs count by count, each operation rounded on its own, the order a GPU's fixed
    point takes (``cuda/priors.cu``): a cumulative sum and a row sum would each round in the
    order of their own library's reduction.
    """
    alpha = np.asarray(alpha, dtype=np.float64)
    n_counts = table.shape[1]
    if n_counts == 0:
        return np.zeros(alpha.shape, dtype=np.float64)
    table = np.asarray(table, dtype=np.float64)
    if alpha.size >= COLUMN_SUM_TOPICS:
        return _column_sums(alpha, table)
    # Both running sums as accumulations along each row: NumPy's accumulate adds one element
    # at a time, left to right (it never pairs them as its reductions do), so every value is
    # the count-by-count loop's to the bit, in a handful of calls instead of two per count.
    gain = np.add.accumulate(1.0 / (alpha[:, None] + _steps(n_counts)[None, :]), axis=1)
    return np.add.accumulate(table * gain, axis=1)[:, -1]


def _column_sums(alpha, table):
    """:func:`table_numerator` at many topics: the same operations, laid out count-major.

    An accumulation along a row waits on each addition before the next (about 4.5 ns per
    cell); at large K, one vector addition per count over all topics is faster. Cell by cell
    it computes what the row accumulation does, ``sum[c] = sum[c - 1] + term[c]`` from
    ``sum[0] = term[0]``, so the bits are the same.
    """
    n_counts = table.shape[1]
    terms = np.add(alpha, _steps(n_counts, column=True))
    np.divide(1.0, terms, out=terms)
    for c in range(1, n_counts):
        np.add(terms[c - 1], terms[c], out=terms[c])
    np.multiply(table.T, terms, out=terms)
    total = terms[0].copy()
    for c in range(1, n_counts):
        np.add(total, terms[c], out=total)
    return total


#: Lanes of :func:`ordered_sum`: a warp of the GPU's fixed point adds one each.
SUM_LANES = 32


def ordered_sum(values):
    """The sum of a 1-D float64 array in one fixed order (0.0 for none), the order a warp of
    the GPU's fixed point adds in (``cuda/priors.cu``): lane ``j`` of 32 adds elements ``j, j +
    32, j + 64, ...`` left to right, each addition rounded on its own (a lane past the end adds
    0.0), then the lanes are folded in halves, ``lane[i] + lane[i + 16]``, then ``+ 8``, and so
    on. NumPy's accumulation along the first axis adds one row at a time, so it is that order;
    its reductions pair terms in an order of their own, and a BLAS dot product splits a long
    one over threads."""
    values = np.asarray(values, dtype=np.float64).ravel()
    if values.size == 0:
        return 0.0
    rows = -(-values.size // SUM_LANES)
    padded = np.zeros(rows * SUM_LANES)
    padded[:values.size] = values
    lanes = np.add.accumulate(padded.reshape(rows, SUM_LANES), axis=0)[-1]
    width = SUM_LANES // 2
    while width:
        lanes = lanes[:width] + lanes[width:2 * width]
        width //= 2
    return float(lanes[0])


def _weighted_sum(weights, values):
    """``sum_i weights[i] * values[i]``, in :func:`ordered_sum`'s order."""
    return ordered_sum(weights * values)


def _digamma(like_gpu):
    """The digamma a fixed point takes: the GPU's (:mod:`.digamma`) or SciPy's."""
    return basic_digamma if like_gpu else scipy_digamma


def _digammas(digamma, *parts):
    """``digamma`` of every value of each part (arrays or numbers), in one call: one NumPy pass
    per operation for all of them, each value's the same as part by part."""
    sizes = [np.size(part) for part in parts]
    values = digamma(np.concatenate([np.ravel(part) for part in parts]))
    return np.split(values, np.cumsum(sizes)[:-1])


def _digamma_gain(digamma, counts, prior):
    """``psi(counts + prior) - psi(prior)``, elementwise."""
    return digamma(counts + prior) - digamma(prior)


def update_alpha(alpha, table, rest, length, n_length, like_gpu=False):
    """Minka's fixed point for an asymmetric document-topic prior, from histograms.

    Parameters
    ----------
    alpha : ndarray of shape (n_topics,)
        Where the iteration starts.
    table : ndarray of float64, shape (n_topics, C)
        ``table[k, c - 1]`` documents hold ``c`` tokens of topic ``k`` (:func:`alpha_table`).
    rest : tuple of ndarray
        ``(topic, count, n_docs)``: the pairs the table does not hold, in increasing
        (topic, count) order.
    length, n_length : ndarray
        ``n_length[j]`` documents have length ``length[j]`` (lengths > 0).
    like_gpu : bool, default=False
        Learn what a GPU chain's fixed point learns, bit for bit (the module says how); else
        with SciPy's digamma.

    Returns
    -------
    alpha : ndarray of shape (n_topics,), on the host

    Notes
    -----
    For an integer count c, ``psi(c + a) - psi(a) = sum_{j < c} 1 / (a + j)``: the table's part
    of the numerator is a running sum of reciprocals along each row, weighted by the table,
    with no digamma at all. With nearly every count in the table, an iteration costs K x C
    additions however many documents there are (a pair list at K = 10,000 held about a million
    pairs, and its digammas took about 0.2 s per update on the host).
    """
    alpha = np.asarray(alpha, dtype=np.float64).copy()
    n_topics = alpha.size
    topic, count, n_docs = (np.asarray(a, dtype=t) for a, t in
                            zip(rest, (np.int64, np.float64, np.float64)))
    length = np.asarray(length, dtype=np.float64)
    n_length = np.asarray(n_length, dtype=np.float64)
    if not n_length.sum():
        return alpha
    digamma = _digamma(like_gpu)
    # The fixed point runs every few sweeps and its digammas are most of its host time, so
    # each iteration computes only what changes, in as few NumPy calls as it can: every
    # digamma of the iteration in one call (each value is its own, so the same bits as call by
    # call), psi(alpha_k) once per topic rather than once per pair, and no bincount when the
    # table holds every pair.
    for _ in range(MAX_ITERATIONS):
        total = ordered_sum(alpha)
        psi_length, psi_total, psi_pair, psi_alpha = _digammas(
            digamma, length + total, total, count + alpha[topic], alpha)
        denominator = _weighted_sum(n_length, psi_length - psi_total)
        gains = table_numerator(alpha, table)
        if topic.size:
            pair_gain = psi_pair - psi_alpha[topic]
            gains += np.bincount(topic, weights=n_docs * pair_gain, minlength=n_topics)
        new = np.maximum(alpha * gains / denominator, FLOOR)
        done = (np.abs(new - alpha) / alpha).max() < TOLERANCE
        alpha = new
        if done:
            break
    return alpha


def update_beta(beta, count, n_cells, topic_totals, n_words, cells=None, cell_counts=None,
                like_gpu=False):
    """Minka's fixed point for a symmetric topic-word prior, from the histogram of the cells;
    with ``cells``, for the base beta of a matrix prior ``eta = beta + extra``, the seeded
    cells' ``extra`` held fixed.

    With seeded cells the gradient of the Dirichlet-multinomial likelihood in beta is
    ``sum_(v,k) [psi(B + eta) - psi(eta)] - V sum_k [psi(n_k + S_k) - psi(S_k)]`` with
    ``S_k = V beta + sum_v extra[k, v]``: the fixed point reads the unseeded cells from the
    histogram and the seeded ones from their counts ``cell_counts``. Cells seeded with 0.0 add
    nothing, so a matrix of zeros learns the scalar prior's value bit for bit.

    Parameters
    ----------
    beta : float
        Where the iteration starts.
    count, n_cells : ndarray
        ``n_cells[i]`` (word, topic) cells hold ``count[i]`` tokens (counts > 0), seeded cells
        included.
    topic_totals : ndarray of shape (n_topics,)
    n_words : int
        Vocabulary size V.
    cells : CellPrior or None, default=None
        The seeded cells of a matrix prior.
    cell_counts : ndarray of float64, optional
        ``B`` at the cells, in their order (with ``cells``).
    like_gpu : bool, default=False
        As :func:`update_alpha`'s (a GPU chain learns with seeded cells on the host, this way).

    Returns
    -------
    beta : float
    """
    beta = float(beta)
    count = np.asarray(count, dtype=np.float64)
    n_cells = np.asarray(n_cells, dtype=np.float64)
    totals = np.asarray(topic_totals, dtype=np.float64)
    if not n_cells.sum():
        return beta
    digamma = _digamma(like_gpu)
    if cells is not None:
        keep = cells.value != 0
        seeded = np.asarray(cell_counts, dtype=np.float64)[keep]
        extra = cells.value[keep]
    for _ in range(MAX_ITERATIONS):
        sums = n_words * beta
        if cells is not None:
            sums = sums + cells.topic_sums  # one per topic
        psi_count, psi_beta, psi_totals, psi_sums = _digammas(digamma, count + beta, beta,
                                                              totals + sums, sums)
        numerator = _weighted_sum(n_cells, psi_count - psi_beta)
        if cells is not None:
            # The seeded cells' terms at their own prior instead of the base's.
            numerator = (numerator - ordered_sum(_digamma_gain(digamma, seeded, beta))
                         + ordered_sum(_digamma_gain(digamma, seeded, beta + extra)))
        denominator = n_words * ordered_sum(psi_totals - psi_sums)
        new = max(beta * numerator / denominator, FLOOR)
        done = abs(new - beta) / beta < TOLERANCE
        beta = new
        if done:
            break
    return beta


def length_histogram(lengths):
    """``(length, n_docs)``: how many documents have each non-zero length."""
    lengths = np.asarray(lengths, dtype=np.float64)
    values, counts = np.unique(lengths[lengths > 0], return_counts=True)
    return values, counts.astype(np.int64)


def merge_histograms(parts):
    """Sum the ``(topic, count, n_docs)`` histograms of parts of a corpus (the shards of a
    chain spread over GPUs or Dask workers) into the corpus's, its pairs in the lexicographic
    order one chain gives them (integers: the sums are exact)."""
    topic = np.concatenate([p[0] for p in parts])
    count = np.concatenate([p[1] for p in parts])
    n_docs = np.concatenate([p[2] for p in parts])
    if topic.size == 0:
        return topic, count, n_docs
    order = np.lexsort((count, topic))
    topic, count, n_docs = topic[order], count[order], n_docs[order]
    new = np.ones(topic.size, dtype=bool)
    new[1:] = (topic[1:] != topic[:-1]) | (count[1:] != count[:-1])
    starts = np.flatnonzero(new)
    return topic[starts], count[starts], np.add.reduceat(n_docs, starts)
