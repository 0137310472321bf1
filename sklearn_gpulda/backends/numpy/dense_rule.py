"""The dense draw rule: the NumPy oracle of ``cuda/sample_dense.cu``.

The sparse engines split ``p(k) = (A[d,k] - w [k = z] + alpha_k) * Bhat[v,k]`` into a document part
and a prior part (two branches, ``doc/algorithm.md``). The dense kernels of Steele and Tristan
(PPoPP'17) evaluate every term instead and search one running sum, so their rule is different and
gets its own oracle. For a token of current topic ``z`` and weight ``w``:

- ``p_k = float32(float32(A[d,k] + alpha_k) * Bhat[v,k])`` for k = 0..K-1, the own count included;
- ``C_k`` the running float32 sum of ``p_0..p_k``, summed in topic order;
- the own count removed (the collapsed conditional) changes only topic z's term, to
  ``t'_z = float32(float32(theta_z - w) * Bhat'[v,z])`` with ``theta_z = float32(A[d,z] + alpha_z)``
  and ``Bhat'`` from :func:`~.tables.own_bhat` (the token's weight out of ``B[v,z]`` and ``n_z``);
  ``delta = float32(t_z - t'_z)``; ``C'_k = C_k`` for ``k < z`` and
  ``max(float32(C_k - delta), C_{z-1})`` for ``k >= z`` (``C_{-1} = 0``; the max keeps ``C'``
  non-decreasing where the subtraction rounds below ``C_{z-1}``);
- ``x = float32(u * max(float32(C_{K-1} - delta), 0))`` with ``u`` the token's Philox uniform (the
  same number the sparse engine uses: stream 1, key ``(seed, iteration)``, counter = canonical
  token index);
- the new topic is the smallest k with ``C'_k > x``, or ``K - 1`` where rounding leaves none.

The kernels ``sample_dense_plain`` and ``sample_dense_transpose`` form ``C`` and ``C'`` in exactly
this order and agree with this function bit for bit; ``sample_dense_butterfly`` adds each 32-topic
block as a tree (and subtracts ``delta`` without the max), so it may move a draw whose ``x`` lies
within rounding of an interval end.
"""

import numpy as np

from ..base import topic_prior
from .tables import own_bhat
from .threads import ThreadTeam, chunks


def draw_topics_dense(doc, word, topic, weight, u, doc_topic, bhat, alpha, word_side=None,
                      team=None, out=None, cells=None):
    """Draw one topic per token from ``p(k) ∝ (A[d,k] - w [k = z] + alpha_k) * Bhat'[v,k]``.

    Parameters
    ----------
    doc : ndarray of int, shape (n_tokens,)
        Document of each token (row of ``doc_topic``).
    word : ndarray of int, shape (n_tokens,)
        Word of each token (row of ``bhat``).
    topic : ndarray of int, shape (n_tokens,)
        Current topic of each token; ``doc_topic`` counts it.
    weight : ndarray of float32 of shape (n_tokens,), or None
        Token weights; None when every weight is 1.
    u : ndarray of float32, shape (n_tokens,)
        One uniform in [0, 1) per token, e.g. ``_random.token_uniform(seed, iteration,
        _random.STREAM_SAMPLE, t)`` for canonical token indices ``t``.
    doc_topic : ndarray of float32, shape (n_docs, n_topics)
        ``A``, held fixed.
    bhat : ndarray of float32, shape (n_words, n_topics)
        Normalised word-topic matrix, word-major, held fixed.
    alpha : float or ndarray of shape (n_topics,)
        Document-topic prior; rounded to float32 as the kernels take it.
    word_side : tuple (counts, denom, beta) or None, default=None
        What ``bhat`` came from, for the word side of the own count (:func:`~.tables.own_bhat`);
        None when ``bhat`` is fixed.
    team : :class:`~.threads.ThreadTeam`, optional
        Threads or processes to spread the tokens over (one thread when None); the draws do
        not depend on it.
    out : ndarray of int32, optional
        Where to write the topics (one of a process team's arrays, so that workers write it).
    cells : :class:`~sklearn_gpulda.backends.priors.CellPrior` or None
        The seeded cells of a matrix topic-word prior ``bhat`` came from, for the own count
        (:func:`~.tables.own_bhat`); None for a scalar prior.

    Returns
    -------
    topics : ndarray of int32, shape (n_tokens,)

    Notes
    -----
    Work is chunked over tokens so that the (tokens x topics) temporaries stay near 1 MB each.
    The float32 arithmetic is spelled out (no float64 promotion anywhere), because the GPU kernels
    are checked against this function token for token.
    """
    doc = np.asarray(doc)
    word = np.asarray(word)
    topic = np.asarray(topic)
    u = np.asarray(u, dtype=np.float32)
    doc_topic = np.asarray(doc_topic, dtype=np.float32)
    bhat = np.asarray(bhat, dtype=np.float32)
    if doc_topic.ndim != 2 or bhat.ndim != 2 or doc_topic.shape[1] != bhat.shape[1]:
        raise ValueError(
            f"doc_topic and bhat must be 2-d with the same number of topics, got shapes "
            f"{doc_topic.shape} and {bhat.shape}"
        )
    if not (doc.shape == word.shape == u.shape == topic.shape) or doc.ndim != 1:
        raise ValueError(
            f"doc, word, topic and u must be 1-d of one length, got {doc.shape}, {word.shape}, "
            f"{topic.shape}, {u.shape}"
        )
    n_topics = doc_topic.shape[1]
    alpha32 = topic_prior(alpha, n_topics).astype(np.float32)
    out = np.empty(doc.shape[0], dtype=np.int32) if out is None else out
    counts, denom, beta = word_side or (None, None, None)
    team = ThreadTeam(1) if team is None else team
    team.run(dense_range, team.token_ranges(doc.shape[0]), doc=doc, word=word, topic=topic,
             weight=weight, u=u, doc_topic=doc_topic, bhat=bhat, alpha32=alpha32, counts=counts,
             denom=denom, beta=beta, out=out, cells=cells)
    return out


def dense_range(tokens, doc, word, topic, weight, u, doc_topic, bhat, alpha32, counts, denom,
                beta, out, cells=None):
    """One task of :func:`draw_topics_dense`: the tokens ``range(*tokens)``, chunk by chunk."""
    word_side = None if counts is None else (counts, denom, beta)
    for sl in chunks(*tokens, doc_topic.shape[1]):
        w = None if weight is None else np.asarray(weight[sl], dtype=np.float32)
        out[sl] = _draw_chunk(doc[sl], word[sl], topic[sl], w, u[sl], doc_topic, bhat, alpha32,
                              word_side, cells)


def _draw_chunk(d, v, z, w, u, doc_topic, bhat, alpha32, word_side, cells=None):
    """:func:`draw_topics_dense` for one chunk of tokens."""
    n_topics = doc_topic.shape[1]
    n = d.shape[0]
    rows = np.arange(n)
    terms = doc_topic[d] + alpha32
    theta_own = terms[rows, z]
    terms *= bhat[v]
    # np.cumsum along an axis adds sequentially in float32: the order the kernels use.
    run = np.cumsum(terms, axis=1, dtype=np.float32)
    b_adj = own_bhat(bhat, word_side, v, z, w, cells)
    w32 = np.float32(1.0) if w is None else w
    delta = theta_own * bhat[v, z] - (theta_own - w32) * b_adj
    before = np.where(z > 0, run[rows, np.maximum(z - 1, 0)], np.float32(0.0))
    adjusted = np.where(
        np.arange(n_topics) >= z[:, None],
        np.maximum(run - delta[:, None], before[:, None]),
        run,
    )
    x = u * np.maximum(run[:, -1] - delta, np.float32(0.0))
    # C' is non-decreasing, so the number of C'_k <= x is the index of the first C'_k > x.
    k = np.count_nonzero(adjusted <= x[:, None], axis=1)
    return np.minimum(k, n_topics - 1)
