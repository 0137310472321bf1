"""Document-term counts to token arrays, and host builds of the two token layouts.

Everything here is vectorised: a 100 M-token corpus converts without a Python loop per document.
The canonical token order (``doc/algorithm.md``) is the CSR order of the input with each non-zero
expanded to ``ceil(count)`` tokens; a token's canonical index is its identity in every layout.

What reads what: every backend takes a :class:`TokenCorpus` (:func:`tokens`). The sparse CUDA
backend builds its PDOW chunks on the device (``backends/cuda/layout.py``); :func:`pdow_chunks`
builds the same token order on the host, and is what the GPU tests check the device layout
against. :func:`segmented_csr` builds Moon's mini-batch tiling, which no backend reads yet: it is
here for the mini-batch backend to come, and tested on its own.
"""

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp


@dataclass
class TokenCorpus:
    """Tokens of a corpus in canonical (document-major) order.

    Attributes
    ----------
    n_docs, n_words : int
        Shape of the count matrix the tokens came from.
    doc_ptr : ndarray of int64, shape (n_docs + 1,)
        Tokens of document ``d`` are ``doc_ptr[d]:doc_ptr[d + 1]``.
    doc : ndarray of int32, shape (n_tokens,)
        Document of each token.
    word : ndarray of int32, shape (n_tokens,)
        Vocabulary id of each token (the input's column).
    weight : ndarray of float32 of shape (n_tokens,), or None
        ``count / ceil(count)`` of the non-zero the token came from; None when every count is an
        integer (all weights 1).
    """

    n_docs: int
    n_words: int
    doc_ptr: np.ndarray
    doc: np.ndarray
    word: np.ndarray
    weight: object = None

    @property
    def n_tokens(self):
        return int(self.doc.shape[0])

    @property
    def total_weight(self):
        """Sum of token weights: the number of tokens for integer counts."""
        if self.weight is None:
            return float(self.n_tokens)
        return float(self.weight.sum(dtype=np.float64))

    def doc_lengths(self):
        """Weighted length of each document, float64 of shape (n_docs,), on the host."""
        if self.weight is None:
            return np.diff(self.doc_ptr).astype(np.float64)
        return _host(_bincount(self.doc, self.weight, self.n_docs))

    def word_frequencies(self):
        """Weighted number of tokens of each word, float64 of shape (n_words,), on the host."""
        return _host(_bincount(self.word, self.weight, self.n_words)).astype(np.float64)


def _on_device(a):
    """True for CuPy arrays: a corpus made from device input keeps its token arrays there."""
    return type(a).__module__.startswith("cupy")


def _host(a):
    return a.get() if _on_device(a) else a


def _bincount(index, weights, length):
    if _on_device(index):
        import cupy

        return cupy.bincount(index, weights=weights, minlength=length)
    return np.bincount(index, weights=weights, minlength=length)


def tokens(X):
    """:class:`TokenCorpus` of validated counts, made where the counts lie (host or device)."""
    if _on_device(X):
        return tokens_from_device_counts(X)
    return tokens_from_counts(X)


def tokens_from_counts(X):
    """Expand a non-negative count matrix into a :class:`TokenCorpus`.

    Parameters
    ----------
    X : sparse matrix or ndarray of shape (n_docs, n_words)
        Non-negative counts (validated by the caller). Non-integer counts become weighted tokens.

    Returns
    -------
    corpus : TokenCorpus
    """
    X = sp.csr_matrix(X, copy=True)
    # Duplicate entries of a non-canonical matrix are one count, not separate weighted tokens.
    X.sum_duplicates()
    X.eliminate_zeros()
    n_docs, n_words = X.shape
    if np.issubdtype(X.data.dtype, np.integer):
        # Integer counts are their own token counts: skip the float round trip.
        reps = X.data.astype(np.int64, copy=False)
        integral = True
    else:
        data = np.asarray(X.data, dtype=np.float64)
        reps = np.ceil(data).astype(np.int64)
        integral = np.array_equal(reps, data)
    # Token offsets of every non-zero; a document's tokens start where its first non-zero's do.
    nz_ptr = np.zeros(X.nnz + 1, dtype=np.int64)
    np.cumsum(reps, out=nz_ptr[1:])
    doc_ptr = nz_ptr[X.indptr]
    # Repeating one id per document (not per non-zero) is much cheaper at 100 M tokens.
    doc = np.repeat(np.arange(n_docs, dtype=np.int32), np.diff(doc_ptr))
    word = np.repeat(X.indices.astype(np.int32, copy=False), reps)
    weight = None
    if not integral:
        weight = np.repeat((data / reps).astype(np.float32), reps)
    return TokenCorpus(n_docs, n_words, doc_ptr, doc, word, weight)


def tokens_from_device_counts(X):
    """Device twin of :func:`~sklearn_gpulda._corpus.tokens_from_counts`.

    Parameters
    ----------
    X : cupyx.scipy.sparse.csr_matrix
        Canonical counts from :func:`check_device_counts`.

    Returns
    -------
    corpus : TokenCorpus
        ``doc``, ``word`` and ``weight`` are CuPy arrays; ``doc_ptr`` is on the host.
    """
    import cupy

    n_docs, n_words = X.shape
    data = X.data.astype(cupy.float64)
    reps = cupy.ceil(data).astype(cupy.int64)
    integral = bool((reps == data).all())
    nz_ptr = cupy.zeros(X.nnz + 1, dtype=cupy.int64)
    cupy.cumsum(reps, out=nz_ptr[1:])
    doc_ptr_d = nz_ptr[X.indptr.astype(cupy.int64)]
    n_tokens = int(nz_ptr[-1])
    token = cupy.arange(n_tokens, dtype=cupy.int64)
    # Each token's non-zero and document by binary search over the running offsets: the device
    # has no repeat-by-array, and a search per token is cheap next to one sampling iteration.
    nz_of_token = cupy.searchsorted(nz_ptr[1:], token, side="right")
    doc = (cupy.searchsorted(doc_ptr_d[1:], token, side="right")).astype(cupy.int32)
    del token
    word = X.indices.astype(cupy.int32)[nz_of_token]
    weight = None
    if not integral:
        weight = (data / reps).astype(cupy.float32)[nz_of_token]
    return TokenCorpus(n_docs, n_words, doc_ptr_d.get(), doc, word, weight)


def _stable_counting_sort(keys, n_keys, offset=0):
    """Positions ``offset + i`` sorted by ``keys[i]`` (stable), and the bucket pointers.

    SciPy's CSR -> CSC conversion is a linear-time stable counting sort written in C++: a single
    row whose column indices are the keys and whose values are the positions comes back with the
    values grouped by key, in their original order inside a key. At 100 M tokens this is several
    times faster than ``np.argsort(kind="stable")``.
    """
    n = keys.size
    row = sp.csr_matrix(
        (np.arange(offset, offset + n, dtype=np.int64), keys, np.array([0, n], dtype=np.int64)),
        shape=(1, n_keys),
    )
    by_key = row.tocsc()
    return by_key.data, by_key.indptr.astype(np.int64, copy=False)


def frequency_relabel(word_frequencies):
    """New word ids in decreasing frequency (ties by old id), as SaberLDA 3.4 and ezLDA IV-B do.

    Returns
    -------
    new_of_old : ndarray of int32
        ``new_of_old[v]`` is the relabelled id of vocabulary word ``v``; id 0 is the most frequent.
    old_of_new : ndarray of int32
        The inverse permutation.
    """
    freq = np.asarray(word_frequencies)
    old_of_new = np.argsort(-freq, kind="stable").astype(np.int32)
    new_of_old = np.empty_like(old_of_new)
    new_of_old[old_of_new] = np.arange(old_of_new.size, dtype=np.int32)
    return new_of_old, old_of_new


@dataclass
class PDOWChunk:
    """One chunk of the partition-by-document, order-by-word layout (SaberLDA 3.1.4).

    Attributes
    ----------
    doc_begin, doc_end : int
        The chunk holds every token of documents ``doc_begin:doc_end``.
    token : ndarray of int64
        Canonical indices of the chunk's tokens, sorted by relabelled word, then canonical index.
    word_ptr : ndarray of int64, shape (n_words + 1,)
        Tokens of relabelled word ``w`` are ``token[word_ptr[w]:word_ptr[w + 1]]``.
    """

    doc_begin: int
    doc_end: int
    token: np.ndarray
    word_ptr: np.ndarray


def chunk_bounds(doc_ptr, max_tokens):
    """Split documents into consecutive ranges of at most ``max_tokens`` tokens each.

    A document longer than ``max_tokens`` gets a chunk of its own.

    Returns
    -------
    bounds : ndarray of int64
        Document indices ``[0, ..., n_docs]``; chunk i holds documents ``bounds[i]:bounds[i+1]``.
    """
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be positive, got {max_tokens}")
    n_docs = doc_ptr.size - 1
    bounds = [0]
    while bounds[-1] < n_docs:
        start = bounds[-1]
        limit = doc_ptr[start] + max_tokens
        end = int(np.searchsorted(doc_ptr, limit, side="right")) - 1
        bounds.append(min(max(end, start + 1), n_docs))
    return np.asarray(bounds, dtype=np.int64)


def pdow_chunks(corpus, new_of_old, max_tokens):
    """Partition by document into chunks of at most ``max_tokens`` tokens, order each by word.

    Parameters
    ----------
    corpus : TokenCorpus
    new_of_old : ndarray of int32
        Word relabelling from :func:`frequency_relabel`.
    max_tokens : int
        Token budget of one chunk (the engine derives it from its memory budget).

    Returns
    -------
    chunks : list of PDOWChunk
    """
    relabelled = new_of_old[corpus.word]
    chunks = []
    bounds = chunk_bounds(corpus.doc_ptr, max_tokens)
    for d0, d1 in zip(bounds[:-1], bounds[1:]):
        t0, t1 = corpus.doc_ptr[d0], corpus.doc_ptr[d1]
        token, word_ptr = _stable_counting_sort(relabelled[t0:t1], corpus.n_words, int(t0))
        chunks.append(PDOWChunk(int(d0), int(d1), token, word_ptr))
    return chunks


@dataclass
class SegmentedCSR:
    """Tokens tiled by document mini-batch and vocabulary panel (Moon, thesis Fig. 2.11).

    Tile ``(b, p)`` holds the tokens of documents ``batch_bounds[b]:batch_bounds[b+1]`` whose
    relabelled word lies in ``[p * panel_width, (p + 1) * panel_width)``, in CSR order by document.

    Attributes
    ----------
    batch_bounds : ndarray of int64
        Document boundaries of the mini-batches.
    panel_width : int
        Words per vocabulary panel (chosen so a panel's word-topic rows fit in shared memory).
    n_panels : int
    token : ndarray of int64
        Canonical token indices, tile after tile (batch-major, then panel), CSR order inside a tile.
    tile_ptr : ndarray of int64, shape (n_batches * n_panels + 1,)
        Tile ``b * n_panels + p`` is ``token[tile_ptr[i]:tile_ptr[i + 1]]``.
    """

    batch_bounds: np.ndarray
    panel_width: int
    n_panels: int
    token: np.ndarray
    tile_ptr: np.ndarray


def segmented_csr(corpus, new_of_old, docs_per_batch, panel_width):
    """Build the segmented-CSR tiling of a corpus.

    Parameters
    ----------
    corpus : TokenCorpus
    new_of_old : ndarray of int32
        Word relabelling from :func:`frequency_relabel`.
    docs_per_batch : int
        Documents per mini-batch.
    panel_width : int
        Relabelled words per vocabulary panel.

    Returns
    -------
    tiles : SegmentedCSR
    """
    if docs_per_batch < 1 or panel_width < 1:
        raise ValueError("docs_per_batch and panel_width must be positive")
    n_panels = -(-corpus.n_words // panel_width)
    batch_bounds = np.arange(0, corpus.n_docs + docs_per_batch, docs_per_batch, dtype=np.int64)
    batch_bounds[-1] = corpus.n_docs
    batch_bounds = np.unique(batch_bounds)
    n_batches = batch_bounds.size - 1
    n_tiles = n_batches * n_panels
    # Tile ids in 32 bits when they fit: half the memory traffic of int64 on 100 M tokens.
    tile_dtype = np.int32 if n_tiles <= np.iinfo(np.int32).max else np.int64
    tile = (corpus.doc // docs_per_batch).astype(tile_dtype)
    tile *= n_panels
    tile += new_of_old[corpus.word] // panel_width
    # Canonical order is already by document, so a stable sort by tile keeps CSR order inside it.
    token, tile_ptr = _stable_counting_sort(tile, n_tiles)
    return SegmentedCSR(batch_bounds, int(panel_width), int(n_panels), token, tile_ptr)
