"""What :class:`~.chain.MhChain` refuses, checked on the host before anything is allocated (so
that these checks run, and are tested, without a GPU)."""

import numbers

import numpy as np

from ...base import topic_prior
from ..constants import MAX_TOPICS


def check_settings(n_topics, alpha, beta, seed, n_cycles):
    """The chain's settings, checked and normalised.

    Returns
    -------
    n_topics : int
    alpha : ndarray of float64, shape (n_topics,)
    beta : float
    seed : int
        Its low 32 bits (the Philox key word, as every engine takes it).
    n_cycles : int
    """
    if not isinstance(n_topics, numbers.Integral) or n_topics < 1:
        raise ValueError(f"n_topics must be a positive integer, got {n_topics!r}")
    alpha = topic_prior(alpha, int(n_topics))
    if not isinstance(beta, numbers.Real) or not np.isfinite(beta) or beta <= 0:
        raise ValueError(f"beta must be a finite positive number, got {beta!r}")
    if not isinstance(seed, numbers.Integral):
        raise ValueError(f"seed must be an integer, got {seed!r}")
    if not isinstance(n_cycles, numbers.Integral) or n_cycles < 1:
        raise ValueError(f"n_cycles must be a positive integer, got {n_cycles!r}")
    return int(n_topics), alpha, float(beta), int(seed) & 0xFFFFFFFF, int(n_cycles)


def check_count_dtype(dtype):
    """The dtype of the dense document-topic counts A: float32 or int32."""
    dtype = np.dtype(dtype)
    if dtype not in (np.dtype(np.float32), np.dtype(np.int32)):
        raise ValueError(f"count_dtype must be float32 or int32, got {dtype}")
    return dtype


def check_corpus(corpus, n_topics):
    """A corpus the chains can run on: a whole corpus of unit-weight tokens.

    The document proposal takes a random token of the document to stand for A's counts, so each
    token must weigh 1; and the kernels hold the token's document and word as int32.
    """
    for name in ("n_docs", "n_words", "n_tokens", "doc_ptr", "integral"):
        if not hasattr(corpus, name):
            raise ValueError("MhChain.load takes a TokenCorpus (sklearn_gpulda._input.corpus."
                             f"tokens(X)); got {type(corpus).__name__}")
    if not corpus.integral:
        raise ValueError("the Metropolis-Hastings chain needs integer counts (tokens of weight "
                         "1): a random token of a document stands for its topic counts")
    if corpus.n_tokens < 1:
        raise ValueError("the corpus has no tokens")
    if max(corpus.n_docs, corpus.n_words) >= 2**31:
        raise ValueError("documents and words are int32 in the MH kernels: at most 2**31 - 1")
    if n_topics > np.iinfo(np.int32).max:
        raise ValueError(f"n_topics must be below 2**31, got {n_topics}")


def topic_dtype(n_topics):
    """uint16 topics while K fits them, as the sparse engine keeps them; else int32."""
    return np.dtype(np.uint16) if n_topics <= MAX_TOPICS else np.dtype(np.int32)


def check_iteration(iteration):
    """The sweep's iteration number: the second Philox key word."""
    if not isinstance(iteration, numbers.Integral) or not 0 <= iteration < 2**32:
        raise ValueError(f"iteration must be an integer in [0, 2**32), got {iteration!r}")
    return int(iteration)
