"""The mini-batched draw rule: the NumPy oracle of ``cuda/sample_minibatch.cu``.

``doc/algorithm.md`` ("Mini-batched sweeps") defines it: every token of a batch draws from the
collapsed conditional with the counts of the batch's start, its own weight out of A, B and n,
walking the topics in the lane order of one warp (lane ``l`` holds topics ``l, l + 32, ...``).
Every float32 operation here is one the kernel does, in the same order, so the two agree token
for token; NumPy's ``add.accumulate`` is the sequential sum the kernel's loop makes.
"""

import numpy as np

from .threads import chunks

#: Lanes of the warp whose order the draw follows.
LANES = 32


def batch_doc_side(a, totals, n_words, alpha, beta, cells=None):
    """``dnt[d, k] = float32((A[d,k] + alpha_k) / D[k])`` for a batch's documents, and ``D``.

    Parameters
    ----------
    a : ndarray of float32, shape (n_batch_docs, n_topics)
        A rows of the batch's documents.
    totals : ndarray of float64, shape (n_topics,)
        ``n[k]``.
    n_words : int
    alpha : ndarray of float64, shape (n_topics,)
    beta : float
    cells : :class:`~sklearn_gpulda.backends.priors.CellPrior` or None
        The seeded cells of a matrix topic-word prior: ``D`` then adds ``sum_v extra[k, v]``.

    Returns
    -------
    dnt : ndarray of float32, shape (n_batch_docs, n_topics)
    denom : ndarray of float64, shape (n_topics,)
    """
    denom = totals + n_words * beta
    if cells is not None:
        denom = denom + cells.topic_sums
    dnt = ((a.astype(np.float64) + alpha) / denom).astype(np.float32)
    return dnt, denom


def _hillis_steele(s):
    """Inclusive scan over the last axis (32 lanes) in the association of ``cuda/warp.cuh``."""
    c = s.copy()
    off = 1
    while off < LANES:
        shifted = c[:, :-off].copy()
        c[:, off:] += shifted
        off <<= 1
    return c


def draw_batch(doc, word, topic, weight, u, a, b, denom, dnt, alpha, beta, out=None,
               cells=None):
    """Draw the topics of one batch's tokens (``doc/algorithm.md``, mini-batched sweeps).

    Parameters
    ----------
    doc : ndarray of int, shape (n,)
        Document of each token, as a row of ``a`` and ``dnt`` (the batch's first document is 0).
    word : ndarray of int, shape (n,)
        Word of each token (row of ``b``).
    topic : ndarray of int, shape (n,)
        Current topic of each token; ``a`` and ``b`` count it.
    weight : ndarray of float32 of shape (n,), or None
        Token weights (None: every weight is 1).
    u : ndarray of float32, shape (n,)
        The tokens' uniforms.
    a : ndarray of float32, shape (n_batch_docs, n_topics)
    b : ndarray of float32, shape (n_words, n_topics)
        B at the batch's start, word-major.
    denom, dnt : from :func:`batch_doc_side`.
    alpha : ndarray of float64, shape (n_topics,)
    beta : float
    out : ndarray of int32, shape (n,), optional
    cells : :class:`~sklearn_gpulda.backends.priors.CellPrior` or None
        The seeded cells of a matrix topic-word prior: the word side of topic k is then
        ``float32(float32(B[v,k] + beta) + float32(extra[k, v]))`` (the own topic's, in float64,
        ``((B[v,z] - w) + beta) + extra[z, v]``); a cell seeded with 0.0 changes nothing.

    Returns
    -------
    new : ndarray of int32, shape (n,)
    """
    n = doc.shape[0]
    k = a.shape[1]
    m = -(-k // LANES)
    out = np.empty(n, dtype=np.int32) if out is None else out
    beta32 = np.float32(beta)
    for piece in chunks(0, n, m * LANES):
        s, e = piece.start, piece.stop
        d, v, z = doc[s:e], word[s:e], topic[s:e].astype(np.int64)
        rows = np.arange(e - s)
        p = np.zeros((e - s, m * LANES), dtype=np.float32)
        word_side = b[v] + beta32
        if cells is not None:
            word_side += cells.rows(v, np.float32)
        p[:, :k] = dnt[d] * word_side
        w = 1.0 if weight is None else weight[s:e].astype(np.float64)
        own_word = (b[v, z].astype(np.float64) - w) + beta
        if cells is not None:
            own_word = own_word + cells.at(v, z)
        own = (((a[d, z].astype(np.float64) - w) + alpha[z]) / (denom[z] - w)) * own_word
        p[rows, z] = own.astype(np.float32)
        out[s:e] = _search(p.reshape(e - s, m, LANES), u[s:e], k)
    return out


def draw_batch_range(tokens, doc, word, topic, weight, u, first_doc, a, b, denom, dnt, alpha,
                     beta, out, cells=None):
    """One task of a batch's draws: the tokens ``range(*tokens)`` (canonical indices, documents
    from ``first_doc`` on, the rows of ``a`` and ``dnt``) into ``out`` (:func:`draw_batch`; each
    token independent of the others, so the cuts do not change a draw)."""
    t0, t1 = tokens
    if t1 <= t0:
        return
    sl = slice(t0, t1)
    draw_batch(doc[sl] - first_doc, word[sl], topic[sl], None if weight is None else weight[sl],
               u[sl], a, b, denom, dnt, alpha, beta, out=out[sl], cells=cells)


def _search(p, u, n_topics):
    """Topics drawn from terms ``p`` of shape (n, m, 32) (topic ``32 j + l`` at ``[:, j, l]``,
    zero past ``n_topics``) with uniforms ``u``: steps 1-5 of the rule."""
    n, m, lanes = p.shape
    rows = np.arange(n)
    lane_sum = np.add.accumulate(p, axis=1)[:, -1, :]
    c = _hillis_steele(lane_sum)
    x = (u.astype(np.float32) * c[:, -1]).astype(np.float32)
    hit = c > x[:, None]
    last_lane = lanes - 1 - np.argmax((lane_sum > 0)[:, ::-1], axis=1)
    lane = np.where(hit.any(axis=1), np.argmax(hit, axis=1), last_lane)
    start = np.where(lane > 0, c[rows, np.maximum(lane - 1, 0)], np.float32(0))
    terms = p[rows, :, lane]                                # (n, m)
    walk = np.add.accumulate(np.concatenate([start[:, None], terms], axis=1), axis=1)[:, 1:]
    hit = walk > x[:, None]
    last_j = m - 1 - np.argmax((terms > 0)[:, ::-1], axis=1)
    found = np.where(hit.any(axis=1), np.argmax(hit, axis=1), last_j) * lanes + lane
    # A lane with no positive term (only where every term underflowed) gives the last topic.
    found = np.where(hit.any(axis=1) | (terms > 0).any(axis=1), found, n_topics - 1)
    return found.astype(np.int32)
