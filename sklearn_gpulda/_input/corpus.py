"""Document-term counts as a corpus of tokens.

Everything here is vectorised: a 100 M-token corpus converts without a Python loop per document.
The canonical token order (``doc/algorithm.md``) is the CSR order of the input with each non-zero
expanded to ``ceil(count)`` tokens; a token's canonical index is its identity in every layout.

What reads what: every backend takes a :class:`TokenCorpus` (:func:`tokens`), which keeps the
counts and expands them to per-token arrays only for an engine that reads those (the NumPy,
dense and mini-batched engines). The layouts built from it are in :mod:`._layouts`.
"""

import numpy as np
import scipy.sparse as sp

from .._runtime.device import array_module, is_device_array, to_host


class Corpus:
    """What every corpus gives the samplers besides its counts: the documents' weighted lengths,
    whether tokens carry weights, and the per-token arrays :attr:`doc`, :attr:`word` and
    :attr:`weight`, made on first use by the subclass's ``_expand_tokens()`` (only the NumPy and
    dense engines read them). A subclass sets ``integral`` and ``_doc_lengths``."""

    _tokens = None

    @property
    def weighted(self):
        """Whether some count is not an integer (tokens carry weights)."""
        return not self.integral

    @property
    def total_weight(self):
        """Sum of token weights: the number of tokens for integer counts."""
        return float(self._doc_lengths.sum())

    def doc_lengths(self):
        """Weighted length of each document, float64 of shape (n_docs,), on the host."""
        return self._doc_lengths

    @property
    def doc(self):
        """Document of each token: int32 of shape (n_tokens,), where the counts lie."""
        return self._token_arrays()[0]

    @property
    def word(self):
        """Vocabulary id of each token (the input's column): int32 of shape (n_tokens,)."""
        return self._token_arrays()[1]

    @property
    def weight(self):
        """Weight of each token (float32), or None when every count is an integer."""
        return self._token_arrays()[2]

    def _token_arrays(self):
        if self._tokens is None:
            self._tokens = self._expand_tokens()
        return self._tokens


class TokenCorpus(Corpus):
    """Tokens of a corpus in canonical (document-major) order, kept as the counts they expand
    from.

    Non-zero ``j`` of the canonical CSR counts stands for ``reps[j] = ceil(count)`` consecutive
    tokens starting at canonical index ``nz_ptr[j]``, each of weight ``count / reps[j]``. Only
    these per-non-zero arrays are held, on the host or on a GPU as the counts were; the per-token
    arrays :attr:`doc`, :attr:`word` and :attr:`weight` are expanded there on first use. The
    sparse CUDA engine never asks for them: it lays its tokens out from the counts a piece at a
    time (``backends/cuda/sparse/layout.py``), so a corpus never exists on the device as token
    arrays.

    Parameters
    ----------
    n_docs, n_words : int
        Shape of the count matrix.
    indptr : int array of shape (n_docs + 1,)
    indices : int array of shape (nnz,)
        Canonical CSR structure: sorted column indices, no duplicates. Explicit zeros may stay:
        they expand to no tokens.
    data : real array of shape (nnz,)
        Non-negative finite counts (validated by the caller). Not kept: what is kept is derived.

    Attributes
    ----------
    doc_ptr : ndarray of int64, shape (n_docs + 1,), on the host
        Tokens of document ``d`` are ``doc_ptr[d]:doc_ptr[d + 1]``.
    nz_ptr : int64 array of shape (nnz + 1,)
        First token of each non-zero, where the counts lie.
    nz_weight : float32 array of shape (nnz,), or None
        ``count / ceil(count)`` of each non-zero; None when every count is an integer.
    """

    def __init__(self, n_docs, n_words, indptr, indices, data):
        xp = array_module(data)
        self.n_docs, self.n_words = int(n_docs), int(n_words)
        self.indptr = indptr.astype(xp.int64, copy=False)
        self.indices = indices.astype(xp.int32, copy=False)
        if data.dtype.kind in "biu":
            # Integer counts are their own token counts: skip the float round trip.
            reps = data.astype(xp.int64, copy=False)
            integral = True
        else:
            reps = xp.ceil(data).astype(xp.int64)
            integral = bool((reps == data).all())
        self.nz_ptr = xp.zeros(reps.shape[0] + 1, dtype=xp.int64)
        xp.cumsum(reps, out=self.nz_ptr[1:])
        #: Every count is an integer (every token weighs 1).
        self.integral = integral
        self.nz_weight = None
        if not integral:
            safe = xp.maximum(reps, 1)  # an explicit zero has no tokens to weigh
            self.nz_weight = (data.astype(xp.float64) / safe).astype(xp.float32)
        self.doc_ptr = to_host(self.nz_ptr[self.indptr])
        self.n_tokens = int(self.doc_ptr[-1])
        if integral:
            self._doc_lengths = np.diff(self.doc_ptr).astype(np.float64)
        elif xp is np:
            # A document's weighted length is the sum of its counts, summed within the document
            # alone, so that it does not depend on the documents before it (a corpus given in
            # blocks has the lengths of the joined matrix).
            self._doc_lengths = np.zeros(self.n_docs, dtype=np.float64)
            starts = self.indptr[:-1]
            filled = starts < self.indptr[1:]
            if filled.any():
                self._doc_lengths[filled] = np.add.reduceat(data.astype(np.float64),
                                                            starts[filled])
        else:
            cum = xp.zeros(data.shape[0] + 1, dtype=xp.float64)
            xp.cumsum(data, out=cum[1:])
            self._doc_lengths = to_host(xp.diff(cum[self.indptr]))

    @property
    def on_device(self):
        """Whether the counts lie on a GPU (CuPy arrays)."""
        return is_device_array(self.nz_ptr)

    @property
    def n_nonzero(self):
        """Non-zeros of the counts (explicit zeros included)."""
        return int(self.indices.shape[0])

    def word_frequencies(self):
        """Weighted number of tokens of each word, float64 of shape (n_words,), on the host."""
        xp = array_module(self.nz_ptr)
        weights = (self.nz_ptr[1:] - self.nz_ptr[:-1]).astype(xp.float64)
        if self.nz_weight is not None:
            weights *= self.nz_weight
        if xp is not np:
            return to_host(xp.bincount(self.indices, weights=weights, minlength=self.n_words))
        # SciPy's column sum of the CSR counts adds in the same order as a weighted bincount,
        # so the same numbers, without the bincount's weighted scatter, which dominated a
        # streamed fit's set-up.
        counts = sp.csr_matrix((weights, self.indices, self.indptr),
                               shape=(self.n_docs, self.n_words), copy=False)
        return np.asarray(counts.sum(axis=0), dtype=np.float64).ravel()

    def over_used_words(self):
        """This corpus with its vocabulary cut to the words it holds, and those words.

        Returns
        -------
        corpus : TokenCorpus
            The same tokens in the same canonical order, with word ``j`` standing for the
            input's column ``used[j]``.
        used : ndarray of int64, on the host
            The columns with a stored count (explicit zeros included), increasing, so that
            the words keep their relative order.
        """
        if self.nz_ptr is None:
            raise RuntimeError("the corpus's counts were released before it was cut")
        xp = array_module(self.indices)
        # A mask over the vocabulary rather than np.unique, whose hash-based unique costs a
        # mini-batch's few thousand non-zeros far more than a scatter into a mask.
        held = xp.zeros(self.n_words, dtype=bool)
        held[self.indices] = True
        new_of_old = xp.cumsum(held, dtype=xp.int32) - 1
        part = TokenCorpus.__new__(TokenCorpus)
        part.__dict__.update(self.__dict__)
        part._tokens = None
        part.indices = new_of_old[self.indices]
        used = to_host(xp.flatnonzero(held)).astype(np.int64)
        part.n_words = int(used.shape[0])
        return part, used

    def doc_range(self, d0, d1, move=None):
        """Documents ``d0:d1`` as a corpus of their own, tokens numbered from 0 (a sampler
        holding it sets its ``token_offset`` to ``doc_ptr[d0]``).

        Parameters
        ----------
        d0, d1 : int
        move : callable, optional
            Applied to each per-non-zero array of the part (e.g. a copy to another GPU); by
            default the part holds slices of these arrays, where they lie.

        Returns
        -------
        TokenCorpus
            With this corpus's ``integral``, so that a part of a weighted corpus weighs its
            tokens as the whole does even where its own counts are all integers.
        """
        if self.nz_ptr is None:
            raise RuntimeError("the corpus's counts were released before it was split")
        move = move or (lambda a: a)
        # From a host copy of the offsets: reading a device array's element would wait for the
        # device (online learning takes a part per mini-batch while the last one runs).
        if getattr(self, "_host_indptr", None) is None:
            self._host_indptr = to_host(self.indptr)
        j0, j1 = int(self._host_indptr[d0]), int(self._host_indptr[d1])
        t0 = int(self.doc_ptr[d0])
        part = TokenCorpus.__new__(TokenCorpus)
        part.n_docs, part.n_words = int(d1 - d0), self.n_words
        part.indptr = move(self.indptr[d0 : d1 + 1] - j0)
        part.indices = move(self.indices[j0:j1])
        part.nz_ptr = move(self.nz_ptr[j0 : j1 + 1] - t0)
        part.nz_weight = None if self.nz_weight is None else move(self.nz_weight[j0:j1])
        part.integral = self.integral
        part.doc_ptr = self.doc_ptr[d0 : d1 + 1] - t0
        part.n_tokens = int(part.doc_ptr[-1])
        part._doc_lengths = self._doc_lengths[d0:d1]
        return part

    def release_counts(self):
        """Drop the per-non-zero arrays, keeping the shape, ``doc_ptr``, the lengths and any
        token arrays already made (an engine that reads those keeps them): for a fit whose
        sampler has laid its tokens out. Token arrays not made by then cannot be made after."""
        self.indices = self.nz_ptr = self.nz_weight = self.indptr = None

    def _expand_tokens(self):
        if self.nz_ptr is None:
            raise RuntimeError("the corpus's counts were released before its tokens were made")
        return expand_counts(self)


def expand_counts(corpus):
    """The per-token arrays ``(doc, word, weight)`` of the whole corpus, where its counts lie
    (``weight`` None for integer counts)."""
    xp = array_module(corpus.nz_ptr)
    if xp is np:
        reps = np.diff(corpus.nz_ptr)
        # One id per document (not per non-zero) is much cheaper at 100 M tokens.
        doc = np.repeat(np.arange(corpus.n_docs, dtype=np.int32), np.diff(corpus.doc_ptr))
        word = np.repeat(corpus.indices, reps)
        weight = None if corpus.nz_weight is None else np.repeat(corpus.nz_weight, reps)
        return doc, word, weight
    # The device has no repeat-by-array: each token finds its non-zero by binary search on the
    # offsets, and the non-zero its document the same way.
    token = xp.arange(corpus.n_tokens, dtype=xp.int64)
    nz = xp.searchsorted(corpus.nz_ptr[1:], token, side="right")
    del token
    doc = xp.searchsorted(corpus.indptr[1:], nz, side="right").astype(xp.int32)
    word = corpus.indices[nz]
    weight = None if corpus.nz_weight is None else corpus.nz_weight[nz]
    return doc, word, weight


def tokens(X):
    """:class:`TokenCorpus` of validated counts, kept where the counts lie (host or device).

    Parameters
    ----------
    X : SciPy sparse matrix or ndarray, or cupyx.scipy.sparse.csr_matrix (canonical)
        Non-negative finite counts. Non-integer counts become weighted tokens.
    """
    if is_device_array(X):
        # Canonical already (check_device_counts).
        return TokenCorpus(X.shape[0], X.shape[1], X.indptr, X.indices, X.data)
    X = sp.csr_matrix(X)
    if not X.has_canonical_format:
        # Duplicate entries of a non-canonical matrix are one count, not separate tokens.
        X = X.copy()
        X.sum_duplicates()
    return TokenCorpus(X.shape[0], X.shape[1], X.indptr, X.indices, X.data)
