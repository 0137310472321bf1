"""The two-branch draw of ``doc/algorithm.md``: the oracle of ``cuda/sample_sparse.cu``."""

import numpy as np

from .tables import chunks


def own_removed(doc_topic, doc, topic, weight):
    """``A[d]`` of each token with the token's own weight taken from its current topic.

    Returns a float32 array of shape (n_tokens, n_topics), clamped at zero: with weighted tokens
    ``A`` is a float32 sum, which may round a hair below a weight it holds.
    """
    rows = doc_topic[doc]
    own = np.arange(doc.shape[0])
    rows[own, topic] -= np.float32(1.0) if weight is None else weight
    np.maximum(rows, 0, out=rows)
    return rows


def draw_topics(doc, word, topic, weight, u, doc_topic, tables):
    """Draw a new topic for each token from ``p(k) ∝ (A[d,k] - w [k = z] + alpha_k) Bhat[v,k]``.

    Parameters
    ----------
    doc, word : ndarray of int
        Document and word of each token.
    topic : ndarray of int
        Current topic z of each token; ``doc_topic`` counts it, and its weight leaves that count.
    weight : ndarray of float32, or None
        Weight w of each token; None when every weight is 1.
    u : ndarray of float32
        One uniform per token.
    doc_topic : ndarray of float32, shape (n_docs, n_topics)
        A, held fixed.
    tables : :class:`~.tables.WordTables`

    Returns
    -------
    topics : ndarray of int32

    Notes
    -----
    With ``S`` the running sum of ``(A[d,k] - w [k = z]) Bhat[v,k]`` over the topics in order and
    ``Q[v] = sum_k alpha_k Bhat[v,k]``: ``x = u (S + Q[v])``; below ``S`` the draw is the first
    topic whose running sum exceeds x (the document branch), else the first topic whose running
    sum of ``alpha_k Bhat[v,k]`` exceeds ``x - S`` (the prior branch).
    """
    n_topics = doc_topic.shape[1]
    out = np.empty(doc.shape[0], dtype=np.int32)
    for sl in chunks(doc.shape[0], n_topics):
        d, v = doc[sl], word[sl]
        rows = own_removed(doc_topic, d, topic[sl], None if weight is None else weight[sl])
        run = np.cumsum(rows * tables.bhat[v], axis=1, dtype=np.float32)
        s = run[:, -1]
        x = u[sl] * (s + tables.qtotal[v])
        sparse = x < s
        k = np.empty(d.shape[0], dtype=np.int32)
        # The terms are non-negative, so the running sums never decrease and the number of them
        # at or below x is the index of the first one above it.
        k[sparse] = (run[sparse] <= x[sparse, None]).sum(axis=1)
        dense = ~sparse
        y = x[dense] - s[dense]
        kd = (tables.qcum[v[dense]] <= y[:, None]).sum(axis=1)
        k[dense] = np.minimum(kd, n_topics - 1)
        out[sl] = k
    return out


def sparse_mass(doc, word, doc_topic, tables):
    """``S_t = sum_k A[d,k] Bhat[v,k]`` per token (own count included), float32 like the
    sampler: what the training log-likelihood needs."""
    n_topics = doc_topic.shape[1]
    out = np.empty(doc.shape[0], dtype=np.float32)
    for sl in chunks(doc.shape[0], n_topics):
        d, v = doc[sl], word[sl]
        out[sl] = np.cumsum(doc_topic[d] * tables.bhat[v], axis=1, dtype=np.float32)[:, -1]
    return out
