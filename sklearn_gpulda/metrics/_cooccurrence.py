"""Exact co-occurrence counts of topic words over "units" (sliding windows or documents), the
counting step of :func:`~sklearn_gpulda.metrics.gensim_coherence`: on the host by expanding the
pairs of overlapping intervals (:func:`window_cooccurrence`, sparse where the topic words are
many), or as segment products written once for NumPy and CuPy (the ``xp`` argument:
:func:`window_counts`, :func:`document_counts`, dense), which is how large reference corpora are
counted on a GPU. Both give the same integers (tested).

A word's presence over the units is a union of intervals of unit indices: the windows that hold
it as gensim counts them (:func:`window_intervals`), or the documents that hold it
(:func:`document_intervals`). :func:`interval_cooccurrence` turns the intervals of the ``T``
distinct topic words into the ``T x T`` matrix ``C[u, v]``, the units holding both ``u`` and
``v`` (``C[u, u]``: the units holding ``u``), as a product ``P^T P`` of the 0/1 unit-by-word
presence matrix ``P``.

``P`` is never made over every unit: between two consecutive interval ends no word enters or
leaves, so the units there share one row of ``P``. Each such run ("segment") is one row,
weighted by its length, and ``C = P_s^T diag(n) P_s`` over the segments; runs that hold no topic
word are dropped. The product goes a block of segments at a time, as a matrix product (a GEMM on
the GPU). The counts are integers and must come out exact: a block's 0/1 and weight entries are
exact in float32, and every partial sum of a block is an integer no larger than the block's
total weight, which is kept at most 2**24, where float32 still holds every integer. Blocks are
summed in float64 (exact to 2**53) and returned as int64.
"""

import os

import numpy as np
import scipy.sparse as sp

# Cells of the presence matrix made at a time (float64 scatter, float32 product): 128 MiB.
_BLOCK_CELLS = 1 << 24
# Largest total weight of a block whose float32 product is exact.
_EXACT_FLOAT32 = 1 << 24


def _flag(xp, value, size=1):
    return xp.full(size, value, dtype=bool)


def window_intervals(xp, doc, pos, word, lengths, window_size):
    """Windows holding each topic word as gensim's sliding window counts them.

    Parameters
    ----------
    xp : module
        NumPy or CuPy; every array argument lives in it.
    doc, pos, word : int64 arrays of shape (n_occurrences,)
        Document, position in it and topic-word id of every occurrence of a topic word.
    lengths : int64 array of shape (n_docs,)
        Tokens per document.
    window_size : int

    Returns
    -------
    lo, hi, word : int64 arrays of shape (n_intervals,)
        The word is present in windows ``lo .. hi - 1`` (windows numbered across documents);
        intervals of one word are disjoint, sorted by (document, word, start).
    n_windows : int
        Windows in all.

    Notes
    -----
    A document of ``L`` tokens has ``max(L - W + 1, 1)`` windows, window ``t`` covering tokens
    ``t .. t + W - 1``. In gensim's update an occurrence at ``p`` enters the word set at window
    ``a = max(0, p - W + 1)``; the word is struck out at window ``q + 1`` for every occurrence
    ``q`` of it, a later entry overriding an earlier strike-out. So the entry at ``a`` lasts
    until the strike-out of the first occurrence at or after ``a``, at ``f + 1``: the word is
    present over windows ``a .. min(f, last window)``, the union over its occurrences. (A true
    window set would keep it until ``p``.)
    """
    n_windows = xp.maximum(lengths - window_size + 1, 1)
    first_window = xp.concatenate([xp.zeros(1, dtype=n_windows.dtype),
                                   xp.cumsum(n_windows)[:-1]])
    total = int(n_windows.sum())
    if doc.size == 0:
        empty = xp.zeros(0, dtype=np.int64)
        return empty, empty, empty, total

    # Occurrences sorted by (document, word, position); f found by a search in that order.
    order = xp.lexsort(xp.stack([pos, word, doc]))
    doc, pos, word = doc[order], pos[order], word[order]
    new_group = xp.concatenate([_flag(xp, True),
                                (doc[1:] != doc[:-1]) | (word[1:] != word[:-1])])
    group = xp.cumsum(new_group) - 1
    stride = int(lengths.max()) + 1
    key = group * stride + pos
    enter = xp.maximum(pos - window_size + 1, 0)
    f = pos[xp.searchsorted(key, group * stride + enter, side="left")]
    lo = first_window[doc] + enter
    hi = first_window[doc] + xp.minimum(f, n_windows[doc] - 1) + 1  # exclusive

    # Within a group both ends grow with the position: merge the intervals that overlap, so a
    # word's intervals are disjoint.
    starts = xp.flatnonzero(new_group | xp.concatenate([_flag(xp, True), lo[1:] >= hi[:-1]]))
    ends = xp.concatenate([starts[1:], xp.full(1, lo.size, dtype=starts.dtype)]) - 1
    return lo[starts], hi[ends], word[starts], total


def document_intervals(xp, doc, word):
    """Documents holding each word, as intervals ``[d, d + 1)`` (one per distinct pair).

    Parameters
    ----------
    xp : module
    doc, word : int64 arrays of shape (n,)
        Document and word id of occurrences (pairs may repeat).

    Returns
    -------
    lo, hi, word : int64 arrays
    """
    if doc.size == 0:
        empty = xp.zeros(0, dtype=np.int64)
        return empty, empty, empty
    n_words = int(word.max()) + 1
    pair = xp.unique(doc.astype(np.int64) * n_words + word.astype(np.int64))
    lo = pair // n_words
    return lo, lo + 1, pair % n_words


def _tf32_matmul():
    """Whether CuPy may run float32 products in TF32 (its CUPY_TF32 switch): its 10-bit
    mantissa would round weights above 2**11, so blocks then go in float64."""
    return os.environ.get("CUPY_TF32", "0") not in ("", "0")


def interval_cooccurrence(xp, word, lo, hi, n_words, block_cells=_BLOCK_CELLS):
    """Units holding each pair of words, from each word's intervals of units.

    Parameters
    ----------
    xp : module
        NumPy or CuPy, where the arrays live and the products run.
    word, lo, hi : int64 arrays of shape (n_intervals,)
        Word ``word[i]`` is present in units ``lo[i] .. hi[i] - 1``; the intervals of one word
        must be disjoint (:func:`window_intervals`, :func:`document_intervals` make them so).
    n_words : int
        Distinct words ``T`` (ids ``0 .. T - 1``).
    block_cells : int, default=2**24
        Cells of the segment-by-word presence matrix made at a time (memory bound).

    Returns
    -------
    counts : ndarray of int64 of shape (n_words, n_words), on the host
        ``counts[u, v]``: units holding both ``u`` and ``v``; ``counts[u, u]``: units holding
        ``u``. Exact.
    """
    counts = np.zeros((n_words, n_words), dtype=np.int64)
    if word.size == 0 or n_words == 0:
        return counts
    # Segments: runs of units between consecutive interval ends, where no word changes.
    bounds = xp.unique(xp.concatenate([lo, hi]))
    s_lo = xp.searchsorted(bounds, lo)
    s_hi = xp.searchsorted(bounds, hi)
    n_seg = bounds.size - 1
    # Keep only segments some word covers (a difference array over the segments).
    cover = xp.cumsum(xp.bincount(s_lo, minlength=n_seg + 1)
                      - xp.bincount(s_hi, minlength=n_seg + 1))[:n_seg]
    keep = cover > 0
    rank = xp.cumsum(keep) - 1
    # An interval covers kept segments only, and consecutive ones: renumber its ends.
    s_lo, s_hi = rank[s_lo], rank[s_hi - 1] + 1
    weight = xp.diff(bounds)[keep]
    n_kept = int(weight.size)

    # Blocks of segments: at most block_cells cells, and a total weight float32 holds exactly.
    rows = max(1, int(block_cells) // n_words)
    weight_host = weight.get() if hasattr(weight, "get") else weight
    cum = np.concatenate([[0], np.cumsum(weight_host)])
    tf32 = xp is not np and _tf32_matmul()
    total = xp.zeros((n_words, n_words), dtype=np.float64)
    a = 0
    while a < n_kept:
        b = min(a + rows, n_kept,
                max(a + 1, int(np.searchsorted(cum, cum[a] + _EXACT_FLOAT32, side="right")) - 1))
        exact32 = cum[b] - cum[a] <= _EXACT_FLOAT32 and not tf32
        dtype = np.float32 if exact32 else np.float64
        inside = xp.flatnonzero((s_lo < b) & (s_hi > a))
        w = word[inside]
        start = xp.maximum(s_lo[inside], a) - a
        stop = xp.minimum(s_hi[inside], b) - a
        n = b - a
        # +1 where an interval starts in the block and -1 past its end; a running sum down the
        # segments gives 0/1 presence (a word's intervals are disjoint).
        delta = xp.bincount(xp.concatenate([start * n_words + w, stop * n_words + w]),
                            weights=xp.concatenate([xp.ones(w.size), -xp.ones(w.size)]),
                            minlength=(n + 1) * n_words)
        present = xp.cumsum(delta.reshape(n + 1, n_words)[:n], axis=0).astype(dtype)
        weighted = present * weight[a:b, None].astype(dtype)
        total += (present.T @ weighted).astype(np.float64)
        a = b
    total = xp.rint(total).astype(np.int64)
    return total.get() if hasattr(total, "get") else total


# --------------------------------------------------------------------------------------------------
# the counts gensim_coherence reads: on the host with NumPy alone, or through the functions above
# on NumPy or CuPy
# --------------------------------------------------------------------------------------------------

# Interval pairs expanded at once when counting windows on the host (about 200 MB).
PAIR_CHUNK = 1 << 22
# Up to this many distinct topic words, host pair counts accumulate in a dense array.
DENSE_WORDS = 2048


def window_cooccurrence(doc, pos, word, lengths, window_size, n_words):
    """Windows holding each word and each pair of words, as gensim counts them; window count.

    Each word's presence is a union of intervals of windows (:func:`window_intervals`, which
    says how gensim's update makes them). Windows are numbered across documents, so intervals
    of different documents never overlap; two words share the windows where their intervals
    overlap.
    """
    lo, hi, word, total = window_intervals(np, doc, pos, word, lengths, window_size)
    if lo.size == 0:
        return sp.csr_matrix((n_words, n_words)), total
    singles = np.bincount(word, weights=(hi - lo).astype(np.float64), minlength=n_words)

    # Every pair of intervals (i, j), j after i in order of start, with j starting before i
    # ends; expanded in chunks to bound memory.
    order = np.argsort(lo, kind="stable")
    lo, hi, word = lo[order], hi[order], word[order]
    n_later = np.searchsorted(lo, hi, side="left") - np.arange(1, lo.size + 1)
    dense = n_words <= DENSE_WORDS
    pairs = np.zeros(n_words * n_words) if dense else sp.csr_matrix((n_words, n_words))
    bounds = np.concatenate([[0], np.cumsum(n_later)])
    a = 0
    while a < lo.size:
        b = min(max(np.searchsorted(bounds, bounds[a] + PAIR_CHUNK, side="right") - 1, a + 1),
                lo.size)
        i = np.repeat(np.arange(a, b), n_later[a:b])
        j = i + 1 + np.arange(i.size) - np.repeat(bounds[a:b] - bounds[a], n_later[a:b])
        overlap = (np.minimum(hi[i], hi[j]) - lo[j]).astype(np.float64)
        if dense:
            pairs += np.bincount(word[i] * n_words + word[j], weights=overlap,
                                 minlength=n_words * n_words)
        else:
            pairs = pairs + sp.csr_matrix((overlap, (word[i], word[j])),
                                          shape=(n_words, n_words))
        a = b
    if dense:
        pairs = pairs.reshape(n_words, n_words)
        return pairs + pairs.T + np.diag(singles), total
    return sp.csr_matrix(pairs + pairs.T + sp.diags(singles)), total


def document_cooccurrence(units):
    """Documents holding each word (diagonal) and each pair of words, from a 0/1 matrix."""
    return sp.csr_matrix(units.T @ units)


def on_gpu(index, count, *args):
    """``count(cupy, *args)`` with the host arrays among ``args`` copied to GPU ``index``."""
    import cupy

    with cupy.cuda.Device(index):
        moved = [cupy.asarray(a, dtype=np.int64) if isinstance(a, np.ndarray) else a
                 for a in args]
        return count(cupy, *moved)


def window_counts(xp, doc, pos, word, lengths, window_size, n_words):
    """Dense window co-occurrence counts (int64, host) and the number of windows, on ``xp``."""
    lo, hi, word, total = window_intervals(xp, doc, pos, word, lengths, window_size)
    return interval_cooccurrence(xp, word, lo, hi, n_words), total


def document_counts(xp, doc, word, n_words):
    """Dense document co-occurrence counts (int64, host), on ``xp``."""
    lo, hi, word = document_intervals(xp, doc, word)
    return interval_cooccurrence(xp, word, lo, hi, n_words)
