"""The two-branch draw of ``doc/algorithm.md``: the oracle of ``cuda/sample_sparse.cu``."""

import numpy as np

from .tables import WordTables
from .threads import ThreadTeam, chunks

#: One thread: what the functions below use when given no team.
_SERIAL = ThreadTeam(1)

#: The document branch walks only a document's non-zero topics when the widest document of a
#: chunk has at most 1 / SPARSE_FACTOR of the K topics; its gathers cost more per entry than a
#: pass over the dense row, so it pays only well below K.
SPARSE_FACTOR = 4


class DocRows:
    """The non-zero entries of A by document, topics ascending (CSR), for the document branch
    at large K: its running sum over a row adds exactly 0.0 at every zero entry, so summing the
    non-zeros in topic order gives the same float32 sums at the same topics.

    Attributes
    ----------
    ptr : ndarray of int64, shape (n_docs + 1,)
    topic : ndarray of int32
    value : ndarray of float32
    """

    def __init__(self, doc_topic, first_row=0):
        rows, topics = np.nonzero(doc_topic)
        self.first_row = int(first_row)
        self.ptr = np.zeros(doc_topic.shape[0] + 1, dtype=np.int64)
        np.cumsum(np.bincount(rows, minlength=doc_topic.shape[0]), out=self.ptr[1:])
        self.topic = topics.astype(np.int32)
        self.value = doc_topic[rows, topics]

    @classmethod
    def of_documents(cls, doc_topic, d):
        """The rows of ``doc_topic`` from the least to the greatest of the documents ``d``
        (a task's documents), indexed by document as the whole would be."""
        d0, d1 = int(d.min()), int(d.max()) + 1
        return cls(doc_topic[d0:d1], first_row=d0)

    def lengths(self, d):
        """Non-zero topics of the documents ``d``."""
        r = d - self.first_row
        return self.ptr[r + 1] - self.ptr[r]

    def pays(self, d, n_topics):
        """Whether a chunk of tokens of documents ``d`` should walk these lists rather than
        dense rows of ``n_topics``."""
        return d.size > 0 and SPARSE_FACTOR * self.lengths(d).max() <= n_topics

    def padded(self, d, v, bhat):
        """Each token's document's non-zeros, one row per token, padded to the chunk's widest.

        Returns ``topics`` (int32), ``values`` (A's entries, 0.0 in the padding), ``bhat`` (the
        token's word's Bhat at those topics) and ``valid`` (False in the padding), each of shape
        (tokens, width). Padding repeats a row's last topic; its zero value makes its term 0.
        """
        lengths = self.lengths(d)
        col = np.arange(int(lengths.max()))
        valid = col < lengths[:, None]
        pos = self.ptr[d - self.first_row][:, None] + np.minimum(col, lengths[:, None] - 1)
        topics = self.topic.take(pos)
        values = np.where(valid, self.value.take(pos), np.float32(0.0))
        # Flat takes: much faster than a two-dimensional fancy index of the same cells.
        cells = v.astype(np.int64)[:, None] * bhat.shape[1] + topics
        return topics, values, bhat.ravel().take(cells), valid


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


def draw_topics(doc, word, topic, weight, u, doc_topic, tables, team=None, sparse_rows=False,
                out=None):
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
    u : ndarray of float32, or :class:`~.row_tasks.UniformKey`
        One uniform per token, or what keys them (each chunk then makes its own).
    doc_topic : ndarray of float32, shape (n_docs, n_topics)
        A, held fixed.
    tables : :class:`~.tables.WordTables`
    team : :class:`~.threads.ThreadTeam`, optional
        Threads or processes to spread the tokens over (one thread when None); the draws do
        not depend on it.
    sparse_rows : bool, default=False
        Let chunks of short documents walk only A's non-zeros (:class:`DocRows`): the same
        draws, less work at large K.
    out : ndarray of int32, optional
        Where to write the topics (one of a process team's arrays, so that workers write it).

    Returns
    -------
    topics : ndarray of int32

    Notes
    -----
    With ``S`` the running sum of ``(A[d,k] - w [k = z]) Bhat'[v,k]`` over the topics in order and
    ``Q = sum_k alpha_k Bhat'[v,k]``: ``x = u (S + Q)``; below ``S`` the draw is the first topic
    whose running sum exceeds x (the document branch), else the first topic whose running sum of
    ``alpha_k Bhat'[v,k]`` exceeds ``x - S`` (the prior branch). Only topic z's Bhat' differs from
    Bhat, so the prior branch uses the word's running sums of ``alpha_k Bhat[v,k]``, lowered from
    z on by ``eps = alpha_z Bhat[v,z] - alpha_z Bhat'[v,z]``.
    """
    team = _SERIAL if team is None else team
    out = np.empty(doc.shape[0], dtype=np.int32) if out is None else out
    counts, denom, beta = tables.word_side or (None, None, None)
    team.run(draw_range, team.token_ranges(doc.shape[0]), doc=doc, word=word, topic=topic,
             weight=weight, u=u, doc_topic=doc_topic, bhat=tables.bhat, qtotal=tables.qtotal,
             alpha32=tables.alpha32, counts=counts, denom=denom, beta=beta,
             cells=tables.cells, sparse_rows=sparse_rows, out=out)
    return out


def draw_range(tokens, doc, word, topic, weight, u, doc_topic, bhat, qtotal, alpha32, counts,
               denom, beta, sparse_rows, out, cells=None):
    """One task of :func:`draw_topics`: the tokens ``range(*tokens)``, chunk by chunk, into
    ``out`` (every token independent of the others)."""
    t0, t1 = tokens
    if t1 <= t0:
        return
    tables = WordTables(bhat, alpha32, None if counts is None else (counts, denom, beta),
                        qtotal=qtotal, cells=cells)
    doc_rows = DocRows.of_documents(doc_topic, doc[t0:t1]) if sparse_rows else None
    for sl in chunks(t0, t1, doc_topic.shape[1]):
        out[sl] = _draw_chunk(doc[sl], word[sl], topic[sl],
                              None if weight is None else weight[sl],
                              u[sl] if isinstance(u, np.ndarray) else u.of(sl), doc_topic, tables,
                              doc_rows)


#: Most topics for which running sums along a token's row are formed topic by topic (one
#: vectorised add per topic over every token of a chunk) instead of by ``np.cumsum`` along the
#: rows, which adds one element at a time; past some hundred topics the per-topic calls cost
#: more than they save. The float32 sums are the same, added in the same order.
LOOP_MAX_TOPICS = 128


def running_sums_by_topic(terms):
    """``np.cumsum(terms, axis=1, dtype=float32)`` of a (tokens x K) float32 array, bit for
    bit, returned topic-major: shape (K, tokens), row k the running sums up to topic k."""
    run = np.ascontiguousarray(terms.T, dtype=np.float32)
    for k in range(1, run.shape[0]):
        np.add(run[k - 1], run[k], out=run[k])
    return run


def row_totals(terms):
    """Each row's float32 sum, added left to right: ``np.cumsum(terms, axis=1)[:, -1]``, by
    :func:`running_sums_by_topic` where the rows are short enough for it to pay."""
    if terms.shape[1] <= LOOP_MAX_TOPICS:
        return running_sums_by_topic(terms)[-1]
    return np.cumsum(terms, axis=1, dtype=np.float32)[:, -1]


def _draw_chunk(d, v, z, w, u, doc_topic, tables, doc_rows=None):
    """:func:`draw_topics` for one chunk of tokens (every token independent of the others)."""
    n_topics = doc_topic.shape[1]
    alpha32 = tables.alpha32
    own = np.arange(d.shape[0])
    b_adj = tables.own_bhat(v, z, w)
    eps = alpha32[z] * tables.bhat[v, z] - alpha32[z] * b_adj
    topics = run_by_topic = None
    if doc_rows is not None and doc_rows.pays(d, n_topics):
        topics, run = _document_run_sparse(d, v, z, w, b_adj, doc_rows, tables)
    else:
        rows = own_removed(doc_topic, d, z, w)
        bhat = tables.bhat[v]
        bhat[own, z] = b_adj
        rows *= bhat
        if n_topics <= LOOP_MAX_TOPICS:
            run_by_topic = running_sums_by_topic(rows)
        else:
            run = np.cumsum(rows, axis=1, dtype=np.float32)
    s = run[:, -1] if run_by_topic is None else run_by_topic[-1]
    x = u * (s + np.maximum(tables.qtotal[v] - eps, np.float32(0.0)))
    sparse = x < s
    k = np.empty(d.shape[0], dtype=np.int32)
    # The terms are non-negative, so the running sums never decrease and the number of them
    # at or below x is the index of the first one above it.
    if run_by_topic is not None:
        k[sparse] = np.count_nonzero(run_by_topic <= x, axis=0)[sparse]
    else:
        first = (run[sparse] <= x[sparse, None]).sum(axis=1)
        k[sparse] = first if topics is None else topics[sparse][np.arange(first.size), first]
    dense = ~sparse
    y = x[dense] - s[dense]
    lowered = np.arange(n_topics) >= z[dense, None]
    qcum = tables.prior_running_sums(v[dense])
    qcum -= np.where(lowered, eps[dense, None], np.float32(0.0))
    k[dense] = np.minimum((qcum <= y[:, None]).sum(axis=1), n_topics - 1)
    return k


def _document_run_sparse(d, v, z, w, b_adj, doc_rows, tables):
    """The document branch's running sums over each token's non-zero topics only.

    Returns the (tokens x width) topics and float32 running sums, width the most non-zero topics
    of a chunk's document; shorter rows are padded with zero terms, which leave a running sum
    as it is, so the last column is the row's total. Each term is the dense rule's term for the
    same topic, formed by the same float32 operations.
    """
    own = np.arange(d.shape[0])
    topics, values, bhat, valid = doc_rows.padded(d, v, tables.bhat)
    # The token's own topic is always among its document's non-zeros: A counts the token.
    mine = np.argmax(valid & (topics == z[:, None]), axis=1)
    values[own, mine] -= np.float32(1.0) if w is None else w
    np.maximum(values, 0, out=values)
    bhat[own, mine] = b_adj
    return topics, np.cumsum(values * bhat, axis=1, dtype=np.float32)


def _masses(tokens, doc, word, doc_topic, bhat, sparse_rows):
    """``(slice, S)`` of each chunk of the tokens ``range(*tokens)``, ``S_t = sum_k A[d,k]
    Bhat[v,k]`` per token (own count included), float32 like the sampler. With
    ``sparse_rows``, chunks of short documents sum over A's non-zeros only, in topic order: the
    same float32 sums."""
    t0, t1 = tokens
    if t1 <= t0:
        return
    n_topics = doc_topic.shape[1]
    doc_rows = DocRows.of_documents(doc_topic, doc[t0:t1]) if sparse_rows else None
    for sl in chunks(t0, t1, n_topics):
        d, v = doc[sl], word[sl]
        if doc_rows is not None and doc_rows.pays(d, n_topics):
            _, values, bhat_rows, _ = doc_rows.padded(d, v, bhat)
            terms = values * bhat_rows
        else:
            terms = doc_topic[d] * bhat[v]
        yield sl, row_totals(terms)


def log_likelihood_terms(doc, word, weight, doc_topic, tables, log_norm, team=None,
                         sparse_rows=False, out=None):
    """Each token's term of the training log-likelihood (``doc/algorithm.md``),
    ``w_t (log(S_t + Q[v_t]) - log_norm[d_t])`` in float64, formed by token ranges on ``team``;
    their sum is the log-likelihood (summed by the caller, so it does not depend on the cuts).

    ``log_norm[d]`` is ``log(N_d + sum_k alpha_k)``; ``S_t`` is :func:`_masses`'.
    """
    team = _SERIAL if team is None else team
    out = np.empty(doc.shape[0], dtype=np.float64) if out is None else out
    team.run(loglik_range, team.token_ranges(doc.shape[0]), doc=doc, word=word, weight=weight,
             doc_topic=doc_topic, bhat=tables.bhat, qtotal=tables.qtotal, log_norm=log_norm,
             sparse_rows=sparse_rows, out=out)
    return out


def loglik_range(tokens, doc, word, weight, doc_topic, bhat, qtotal, log_norm, sparse_rows,
                 out):
    """One task of :func:`log_likelihood_terms`: the tokens ``range(*tokens)`` into ``out``."""
    for sl, mass in _masses(tokens, doc, word, doc_topic, bhat, sparse_rows):
        terms = np.log(mass.astype(np.float64) + qtotal[word[sl]].astype(np.float64))
        terms -= log_norm[doc[sl]]
        if weight is not None:
            terms *= weight[sl]
        out[sl] = terms
