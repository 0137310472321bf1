"""The Dirichlet priors: what the ``doc_topic_prior`` and ``topic_word_prior`` parameters mean,
and learning them from the chain's counts.

Learning is Minka's fixed-point iteration for the Dirichlet-multinomial (Minka 2000, "Estimating
a Dirichlet distribution", Eq. 55) on the histograms of counts rather than the counts themselves
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
a topic nobody uses from reaching zero (tomotopy floors at the same 1e-5).
"""

from dataclasses import dataclass
from numbers import Real

import numpy as np
from scipy.special import digamma


#: Smallest value a learned prior takes.
FLOOR = 1e-5
#: Fixed-point iterations per update, at most; and the relative change that ends them earlier.
MAX_ITERATIONS = 100
TOLERANCE = 1e-7


@dataclass(frozen=True)
class Prior:
    """A resolved prior: the value the chain starts from, and whether the fit learns it.

    Attributes
    ----------
    value : float or ndarray of shape (n_components,)
    learn : bool
    """

    value: object
    learn: bool


def resolve_prior(param, default, n_topics=None, name="doc_topic_prior"):
    """Turn a prior parameter into a :class:`Prior`.

    Parameters
    ----------
    param : None, float, array-like or 'auto'
        None means ``default``; 'auto' means learned, starting from ``default``; an array (only
        where ``n_topics`` is given) is a fixed prior per topic.
    default : float
    n_topics : int or None
        Number of topics where a per-topic array is allowed, else None.
    name : str
        Parameter name for error messages.

    Raises
    ------
    ValueError
        An array of the wrong shape or with a value that is not finite and positive.
    """
    if param is None:
        return Prior(float(default), False)
    if isinstance(param, str):
        if param != "auto":
            raise ValueError(f"{name} must be a positive number{', an array' if n_topics else ''}"
                             f" or 'auto', got {param!r}")
        return Prior(float(default), True)
    if isinstance(param, Real):
        return Prior(float(param), False)
    values = np.asarray(param, dtype=np.float64)
    if n_topics is None or values.shape != (n_topics,):
        expected = f"shape ({n_topics},)" if n_topics is not None else "a number"
        raise ValueError(f"{name} must be {expected} (one value per topic), got shape "
                         f"{values.shape}")
    if not (np.all(np.isfinite(values)) and np.all(values > 0)):
        raise ValueError(f"every value of {name} must be finite and positive")
    return Prior(values.copy(), False)


def _digamma_gain(counts, prior):
    """``psi(counts + prior) - psi(prior)``, elementwise."""
    return digamma(counts + prior) - digamma(prior)


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


def table_numerator(alpha, table):
    """The table's part of alpha's numerator: ``sum_c table[k, c] sum_{j <= c} 1 / (alpha_k + j)``
    per topic k, for a host table.

    The sum runs count by count, each operation rounded on its own; a GPU engine runs the same
    order on a table it keeps (``Sampler.alpha_table_numerator``), so both give the same value
    bit for bit: a fit whose table comes from a GPU and one whose table was merged on the host
    from shards (a Dask fit) learn the same alpha. A cumulative sum and a row sum would each
    round in the order of their own library's reduction.
    """
    alpha = np.asarray(alpha, dtype=np.float64)
    if table.shape[1] == 0:
        return np.zeros(alpha.shape, dtype=np.float64)
    # Both running sums as accumulations along each row: NumPy's accumulate adds one element
    # at a time, left to right (it never pairs them as its reductions do), so every value is
    # the count-by-count loop's to the bit, in a handful of calls instead of two per count
    # (a fixed point at small K runs this some twenty times per update).
    steps = np.arange(table.shape[1], dtype=np.float64)
    gain = np.add.accumulate(1.0 / (alpha[:, None] + steps[None, :]), axis=1)
    return np.add.accumulate(np.asarray(table, dtype=np.float64) * gain, axis=1)[:, -1]


def update_alpha(alpha, table, rest, length, n_length, numerator=table_numerator):
    """Minka's fixed point for an asymmetric document-topic prior, from histograms.

    Parameters
    ----------
    alpha : ndarray of shape (n_topics,)
        Where the iteration starts.
    table : array of float64, shape (n_topics, C)
        ``table[k, c - 1]`` documents hold ``c`` tokens of topic ``k`` (:func:`alpha_table`),
        where ``numerator`` reads it.
    rest : tuple of ndarray
        ``(topic, count, n_docs)``: the pairs the table does not hold, on the host.
    length, n_length : ndarray
        ``n_length[j]`` documents have length ``length[j]`` (lengths > 0).
    numerator : callable, default=table_numerator
        ``numerator(alpha, table)``: the table's part of the numerator, on the host (a
        sampler's ``alpha_table_numerator`` for a table it keeps on its device).

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
    for _ in range(MAX_ITERATIONS):
        total = alpha.sum()
        denominator = np.dot(n_length, _digamma_gain(length, total))
        gains = numerator(alpha, table)
        gains += np.bincount(topic, weights=n_docs * _digamma_gain(count, alpha[topic]),
                             minlength=n_topics)
        new = np.maximum(alpha * gains / denominator, FLOOR)
        done = np.max(np.abs(new - alpha) / alpha) < TOLERANCE
        alpha = new
        if done:
            break
    return alpha


def update_beta(beta, count, n_cells, topic_totals, n_words):
    """Minka's fixed point for a symmetric topic-word prior, from the histogram of the cells.

    Parameters
    ----------
    beta : float
        Where the iteration starts.
    count, n_cells : ndarray
        ``n_cells[i]`` (word, topic) cells hold ``count[i]`` tokens (counts > 0).
    topic_totals : ndarray of shape (n_topics,)
    n_words : int
        Vocabulary size V.

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
    for _ in range(MAX_ITERATIONS):
        numerator = np.dot(n_cells, _digamma_gain(count, beta))
        denominator = n_words * _digamma_gain(totals, n_words * beta).sum()
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
