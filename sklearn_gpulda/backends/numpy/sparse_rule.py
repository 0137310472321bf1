"""The two-branch draw of ``doc/algorithm.md``: the oracle of ``cuda/sample_sparse.cu``."""

import numpy as np

from .threads import ThreadTeam

#: One thread: what the functions below use when given no team.
_SERIAL = ThreadTeam(1)


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


def draw_topics(doc, word, topic, weight, u, doc_topic, tables, team=None):
    """Draw a new topic for each token from the collapsed conditional of ``doc/algorithm.md``,
    ``p(k) ∝ (A[d,k] - w [k = z] + alpha_k) Bhat'[v,k]``, where ``Bhat'`` is ``Bhat`` with the
    token's own weight taken out of ``B[v, z]`` and ``n_z`` (:func:`~.tables.own_bhat`).

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
    team : :class:`~.threads.ThreadTeam`, optional
        Threads to spread the tokens over (one when None); the draws do not depend on it.

    Returns
    -------
    topics : ndarray of int32

    Notes
    -----
    With ``S`` the running sum of ``(A[d,k] - w [k = z]) Bhat'[v,k]`` over the topics in order and
    ``Q = sum_k alpha_k Bhat'[v,k]``: ``x = u (S + Q)``; below ``S`` the draw is the first topic
    whose running sum exceeds x (the document branch), else the first topic whose running sum of
    ``alpha_k Bhat'[v,k]`` exceeds ``x - S`` (the prior branch). Only topic z's Bhat' differs from
    Bhat, so the prior branch uses the word's precomputed running sums, lowered from z on by
    ``eps = alpha_z Bhat[v,z] - alpha_z Bhat'[v,z]``.
    """
    team = _SERIAL if team is None else team
    out = np.empty(doc.shape[0], dtype=np.int32)

    def draw(sl):
        out[sl] = _draw_chunk(doc[sl], word[sl], topic[sl], None if weight is None else weight[sl],
                              u[sl], doc_topic, tables)

    team.map(draw, team.token_chunks(doc.shape[0], doc_topic.shape[1]))
    return out


def _draw_chunk(d, v, z, w, u, doc_topic, tables):
    """:func:`draw_topics` for one chunk of tokens (every token independent of the others)."""
    n_topics = doc_topic.shape[1]
    alpha32 = tables.alpha32
    own = np.arange(d.shape[0])
    rows = own_removed(doc_topic, d, z, w)
    b_adj = tables.own_bhat(v, z, w)
    bhat = tables.bhat[v]
    eps = alpha32[z] * bhat[own, z] - alpha32[z] * b_adj
    bhat[own, z] = b_adj
    run = np.cumsum(rows * bhat, axis=1, dtype=np.float32)
    s = run[:, -1]
    x = u * (s + np.maximum(tables.qtotal[v] - eps, np.float32(0.0)))
    sparse = x < s
    k = np.empty(d.shape[0], dtype=np.int32)
    # The terms are non-negative, so the running sums never decrease and the number of them
    # at or below x is the index of the first one above it.
    k[sparse] = (run[sparse] <= x[sparse, None]).sum(axis=1)
    dense = ~sparse
    y = x[dense] - s[dense]
    lowered = np.arange(n_topics) >= z[dense, None]
    qcum = tables.qcum[v[dense]] - np.where(lowered, eps[dense, None], np.float32(0.0))
    k[dense] = np.minimum((qcum <= y[:, None]).sum(axis=1), n_topics - 1)
    return k


def sparse_mass(doc, word, doc_topic, tables, team=None):
    """``S_t = sum_k A[d,k] Bhat[v,k]`` per token (own count included), float32 like the
    sampler: what the training log-likelihood needs."""
    team = _SERIAL if team is None else team
    out = np.empty(doc.shape[0], dtype=np.float32)

    def mass(sl):
        out[sl] = np.cumsum(doc_topic[doc[sl]] * tables.bhat[word[sl]], axis=1,
                            dtype=np.float32)[:, -1]

    team.map(mass, team.token_chunks(doc.shape[0], doc_topic.shape[1]))
    return out
