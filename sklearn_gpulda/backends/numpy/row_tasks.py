"""Work of the CPU engine's M-step and read-outs over ranges of rows, as module-level tasks a
:class:`~.threads.ThreadTeam` or :class:`~.processes.ProcessTeam` runs (``task(rows, **arrays)``):
the counts of A and B, the uniforms, the running sum of averaging, the transposed model and
the histogram of B. Each task's result depends on its rows alone, so the cuts do not change a
value.

The last three functions run the read-outs of a word-major table B (V x K) on a team, for any
holder of B on the host: the NumPy sampler, and the Dask client, which holds the sum of its
shards' B.
"""

from dataclasses import dataclass

import numpy as np

from .. import random as _random


def count_pairs(index, topics, weight, n_rows, n_topics, dtype=np.float64):
    """Weighted counts of (row, topic) pairs, shape (n_rows, n_topics): exact integer counts or
    float64 weighted sums, rounded once to ``dtype``."""
    flat = index.astype(np.int64) * n_topics + topics
    counts = np.bincount(flat, weights=weight, minlength=n_rows * n_topics)
    return counts.astype(dtype, copy=False).reshape(n_rows, n_topics)


#: Cells of a table counted at once by :func:`count_rows`: the block's int64 or float64 counts
#: (2 MB) stay in a core's cache and the table is written once, in its own dtype. Counting a
#: whole V x K table in one ``bincount`` wrote and read a float64 table twice its size.
COUNT_BLOCK_CELLS = 1 << 18


def count_rows(rows, out, index, topics, weight, row_ptr, order=None):
    """Count the (row, topic) pairs of the rows ``rows = (r0, r1)`` into ``out[r0:r1]``.

    The tokens of row r are ``order[row_ptr[r]:row_ptr[r + 1]]`` (``row_ptr``'s range itself
    when ``order`` is None), in canonical order within the row, so each cell sums its weights
    as one :func:`count_pairs` over every token would, and rounds once to ``out``'s dtype.
    """
    r0, r1 = rows
    n_topics = out.shape[1]
    step = max(1, COUNT_BLOCK_CELLS // n_topics)
    for b0 in range(r0, r1, step):
        b1 = min(r1, b0 + step)
        t0, t1 = int(row_ptr[b0]), int(row_ptr[b1])
        t = slice(t0, t1) if order is None else order[t0:t1]
        w = None if weight is None else weight[t]
        flat = (index[t] - b0).astype(np.int64) * n_topics + topics[t]
        out[b0:b1] = np.bincount(flat, weights=w, minlength=(b1 - b0) * n_topics).reshape(
            b1 - b0, n_topics)


def count_doc_and_word_rows(item, a, b, doc, word, topics, weight, doc_ptr, word_ptr, by_word):
    """A task of A's rows or of B's, ``item = ('a' or 'b', rows)``: both counts of an M-step in
    one round of tasks, saving a process team a round trip per sweep (:func:`count_rows`).

    Returns, for B's rows of a corpus of unit tokens (``weight`` None), the number of their
    tokens in each topic (int64, K): summed over the items, the topic totals, exact in any
    order, without a pass over every token in the caller (a serial pass that no number of
    workers would shorten). None otherwise.
    """
    which, rows = item
    if which == "a":
        count_rows(rows, a, doc, topics, weight, doc_ptr)
        return None
    count_rows(rows, b, word, topics, weight, word_ptr, order=by_word)
    if weight is not None:
        return None
    t0, t1 = int(word_ptr[rows[0]]), int(word_ptr[rows[1]])
    return np.bincount(topics[by_word[t0:t1]], minlength=b.shape[1])


#: Tokens whose random numbers are made at once: Philox's temporaries then stay in a core's
#: cache (10 M tokens in one call took 2.7 s on one core, in pieces of this size 0.4 s).
RANDOM_PIECE = 1 << 16


def _pieces(tokens):
    t0, t1 = tokens
    return [slice(s, min(t1, s + RANDOM_PIECE)) for s in range(t0, t1, RANDOM_PIECE)]


def uniform_range(tokens, seed, iteration, stream, sub, offset, out):
    """The uniforms of the tokens ``range(*tokens)`` (canonical index + ``offset``) into ``out``."""
    key = UniformKey(seed, iteration, stream, sub, offset)
    for sl in _pieces(tokens):
        out[sl] = key.of(sl)


def topic_range(tokens, seed, iteration, stream, offset, n_topics, out):
    """The uniform topics (``_random.token_topic``) of the tokens ``range(*tokens)``
    (canonical index + ``offset``) into ``out``: the initial topics, piece by piece."""
    for sl in _pieces(tokens):
        t = np.arange(sl.start, sl.stop, dtype=np.int64) + offset
        out[sl] = _random.token_topic(seed, iteration, stream, t, n_topics)


@dataclass(frozen=True)
class UniformKey:
    """What keys the tokens' uniforms of one E-step (``_random.token_uniform``): a draw task
    given this instead of an array makes each chunk's numbers itself, which saves the team a
    round of tasks and the array's memory traffic (same numbers)."""

    seed: int
    iteration: int
    stream: int
    sub: int
    offset: int

    def of(self, tokens):
        """The uniforms of the tokens of slice ``tokens`` (float32)."""
        t = np.arange(tokens.start, tokens.stop, dtype=np.int64) + self.offset
        return _random.token_uniform(self.seed, self.iteration, self.stream, t, sweep=self.sub)


#: Rows of a V x K table per block in :func:`transpose_rows`: the block's float64 copy (2 MB
#: at K = 1,000) stays in the cache while it is written out column-wise.
_TRANSPOSE_BLOCK_ROWS = 256


def transpose_rows(rows, src, out, divisor=None, plus=None):
    """``out[:, r0:r1] = src[r0:r1].T`` in float64 (divided by ``divisor``, then plus
    ``plus``), a block of rows at a time, for ``rows = (r0, r1)``."""
    r0, r1 = rows
    for b0 in range(r0, r1, _TRANSPOSE_BLOCK_ROWS):
        b1 = min(r1, b0 + _TRANSPOSE_BLOCK_ROWS)
        block = src[b0:b1].astype(np.float64)
        if divisor is not None:
            block /= divisor
        if plus is not None:
            block += plus
        out[:, b0:b1] = block.T


def add_rows(rows, src, out, first):
    """``out[r0:r1] (+)= src[r0:r1]`` in ``out``'s dtype (set when ``first``)."""
    r0, r1 = rows
    if first:
        out[r0:r1] = src[r0:r1]
    else:
        out[r0:r1] += src[r0:r1]


def nonzero_value_counts(rows, src):
    """The distinct non-zero values of ``src[r0:r1]`` (float64, ascending) and how often each
    occurs, for ``rows = (r0, r1)``."""
    r0, r1 = rows
    block = src[r0:r1]
    (values,), freq = value_counts(block[block != 0].astype(np.float64))
    return values, freq


def merge_value_counts(parts):
    """Sum ``(values, freq)`` pairs of :func:`nonzero_value_counts` over ranges into the whole
    table's: distinct values ascending and how often each occurs (the same as one call over
    every row)."""
    values = np.concatenate([p[0] for p in parts])
    freq = np.concatenate([p[1] for p in parts])
    if values.size == 0:
        return values, freq
    order = np.argsort(values, kind="stable")
    values, freq = values[order], freq[order]
    new = np.ones(values.size, dtype=bool)
    new[1:] = values[1:] != values[:-1]
    starts = np.flatnonzero(new)
    return values[starts], np.add.reduceat(freq, starts)


def value_counts(*keys):
    """Distinct tuples of ``keys`` (equal-length arrays) and how often each occurs.

    Returns
    -------
    uniques : list of ndarray
        One array per key, the distinct tuples in lexicographic order.
    counts : ndarray of int64
    """
    if keys[0].size == 0:
        return [k[:0] for k in keys], np.zeros(0, dtype=np.int64)
    order = np.lexsort(keys[::-1])
    keys = [k[order] for k in keys]
    new = np.zeros(keys[0].size, dtype=bool)
    new[0] = True
    for k in keys:
        new[1:] |= k[1:] != k[:-1]
    starts = np.flatnonzero(new)
    counts = np.diff(np.append(starts, keys[0].size)).astype(np.int64)
    return [k[starts] for k in keys], counts


# -- read-outs of a word-major table on a team -----------------------------------------------------
def _word_ranges(team, n_words):
    return team.row_ranges(np.arange(n_words + 1))


def transposed(team, word_major, divisor=None, plus=None):
    """``word_major.T``, divided by ``divisor`` and plus ``plus`` where given, converted by word
    ranges on ``team`` (:func:`transpose_rows`): a serial V x K transpose would cost a fit with
    many jobs more than its sweeps at large K.

    Parameters
    ----------
    team : ThreadTeam or ProcessTeam
    word_major : ndarray of shape (n_words, n_topics), any float dtype
    divisor, plus : float, optional

    Returns
    -------
    ndarray of float64, shape (n_topics, n_words)
        A new array, the caller's own.
    """
    n_words, n_topics = word_major.shape
    out = team.owned((n_topics, n_words), np.float64)
    team.run(transpose_rows, _word_ranges(team, n_words), src=word_major, out=out,
             divisor=divisor, plus=plus)
    return team.hand_over(out)


def nonzero_histogram(team, word_major):
    """The distinct non-zero values of ``word_major`` (float64, ascending) and how many cells
    hold each (int64), counted by word ranges on ``team`` (:func:`nonzero_value_counts`)."""
    return merge_value_counts(team.run(nonzero_value_counts,
                                       _word_ranges(team, word_major.shape[0]), src=word_major))


def accumulate(team, word_major, total=None):
    """Add ``word_major`` to the running sum ``total`` by word ranges on ``team``
    (:func:`add_rows`).

    Parameters
    ----------
    team : ThreadTeam or ProcessTeam
    word_major : ndarray of shape (n_words, n_topics)
    total : ndarray of float64 and the same shape, or None
        The sum so far; None makes it, in the team's memory, from ``word_major``.

    Returns
    -------
    ndarray of float64
        ``total``, or the new sum.
    """
    first = total is None
    if first:
        total = team.empty("sum", word_major.shape, np.float64)
    team.run(add_rows, _word_ranges(team, word_major.shape[0]), src=word_major, out=total,
             first=first)
    return total
