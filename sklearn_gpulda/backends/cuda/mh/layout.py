"""The host arrays the chains read beside the topics: each token's document and word, the tokens
sorted by word and each token's place there. Made with the NumPy reference's own functions, so
the word proposal picks the same other token in both."""

import numpy as np

from ...._input.layouts import stable_counting_sort
from ...._runtime.device import to_host
from ...numpy.mh_rule import word_ranks


class TokenLayout:
    """Canonical (document-major) token arrays of a corpus, on the host.

    Attributes
    ----------
    doc, word : ndarray of int32, shape (n_tokens,)
    doc_ptr : ndarray of int64, shape (n_docs + 1,)
    by_word : ndarray of int64, shape (n_tokens,)
        Canonical ids sorted by word, stably (each word's tokens in canonical order).
    word_ptr : ndarray of int64, shape (n_words + 1,)
    word_rank : ndarray of int64, shape (n_tokens,)
        Each token's place among its word's tokens in ``by_word``.
    nz_doc, nz_word : ndarray of int32, shape (nnz,)
    nz_count : ndarray of float64, shape (nnz,)
        The non-zero counts (the training likelihood sums over them).
    """

    def __init__(self, corpus):
        self.doc = np.ascontiguousarray(to_host(corpus.doc), dtype=np.int32)
        self.word = np.ascontiguousarray(to_host(corpus.word), dtype=np.int32)
        self.doc_ptr = np.ascontiguousarray(corpus.doc_ptr, dtype=np.int64)
        by_word, word_ptr = stable_counting_sort(self.word, corpus.n_words)
        self.by_word = np.ascontiguousarray(by_word, dtype=np.int64)
        self.word_ptr = np.ascontiguousarray(word_ptr, dtype=np.int64)
        self.word_rank = word_ranks(self.by_word, self.word_ptr, self.word.astype(np.int64))
        indptr = to_host(corpus.indptr)
        self.nz_doc = np.repeat(np.arange(corpus.n_docs, dtype=np.int32), np.diff(indptr))
        self.nz_word = np.ascontiguousarray(to_host(corpus.indices), dtype=np.int32)
        self.nz_count = np.diff(to_host(corpus.nz_ptr)).astype(np.float64)
