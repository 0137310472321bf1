"""Reference ESCA engine in NumPy: the oracle for the CUDA engine and the CPU fallback.

It follows ``doc/algorithm.md`` literally. Rows of A are held dense, but the sparse branch is
computed exactly as a sparse engine would: zero entries of A add exactly 0.0 to a float32 running
sum, so the dense running sum equals the running sum over the non-zeros in topic order.
Work is chunked over tokens so that no temporary exceeds a few tens of megabytes.
"""

import numpy as np
import scipy.sparse as sp

from .. import _random
from .base import Engine

# Elements of a (tokens x topics) temporary per chunk; bounds memory at ~16 MB per float32 array.
_CHUNK_ELEMENTS = 1 << 22


def _chunks(n, n_topics):
    step = max(1, _CHUNK_ELEMENTS // max(1, n_topics))
    for start in range(0, n, step):
        yield slice(start, min(n, start + step))


class WordTables:
    """Per-word sampling tables derived from the word-topic matrix.

    Attributes
    ----------
    bhat : ndarray of float32, shape (n_words, n_topics)
        Normalised word-topic matrix (``Bhat``).
    cum : ndarray of float32, shape (n_words, n_topics)
        Running sum of ``bhat`` along topics: the leaves of each word's sampling tree.
    total : ndarray of float32, shape (n_words,)
        ``W[v] = cum[v, -1]``.
    """

    def __init__(self, bhat):
        self.bhat = np.ascontiguousarray(bhat, dtype=np.float32)
        # Running sums in float64, rounded once: a float32 running sum over thousands of topics
        # drifts by many ulps, further from the exact rule than the GPU's tree of partial sums.
        self.cum = np.cumsum(self.bhat, axis=1, dtype=np.float64).astype(np.float32)
        self.total = np.ascontiguousarray(self.cum[:, -1])

    @classmethod
    def from_counts(cls, word_topic, topic_totals, beta):
        """Eq. (2) of SaberLDA: ``(B + beta) / (n + V beta)``, divided in float64."""
        n_words = word_topic.shape[0]
        denom = np.asarray(topic_totals, dtype=np.float64) + n_words * beta
        return cls((word_topic.astype(np.float64) + beta) / denom)

    @classmethod
    def from_components(cls, components):
        """Topics fixed from a fitted ``components_`` (rows normalised)."""
        comp = np.asarray(components, dtype=np.float64)
        return cls((comp / comp.sum(axis=1, keepdims=True)).T)


def draw_topics(doc, word, u, doc_topic, tables, alpha):
    """The two-branch draw of ``doc/algorithm.md`` for a set of tokens.

    Parameters
    ----------
    doc, word : ndarray of int
        Document and word of each token.
    u : ndarray of float32
        One uniform per token.
    doc_topic : ndarray of float32, shape (n_docs, n_topics)
        A, held fixed.
    tables : WordTables
    alpha : float

    Returns
    -------
    topics : ndarray of int32
    """
    n_topics = doc_topic.shape[1]
    alpha32 = np.float32(alpha)
    out = np.empty(doc.shape[0], dtype=np.int32)
    for sl in _chunks(doc.shape[0], n_topics):
        d, v = doc[sl], word[sl]
        run = np.cumsum(doc_topic[d] * tables.bhat[v], axis=1, dtype=np.float32)
        s = run[:, -1]
        x = u[sl] * (s + alpha32 * tables.total[v])
        sparse = x < s
        k = np.empty(d.shape[0], dtype=np.int32)
        k[sparse] = (run[sparse] <= x[sparse, None]).sum(axis=1)
        dense = ~sparse
        y = (x[dense] - s[dense]) / alpha32
        kd = (tables.cum[v[dense]] <= y[:, None]).sum(axis=1)
        k[dense] = np.minimum(kd, n_topics - 1)
        out[sl] = k
    return out


def _sparse_mass(doc, word, doc_topic, tables):
    """``S_t = sum_k A[d,k] Bhat[v,k]`` per token, float32 like the sampler."""
    n_topics = doc_topic.shape[1]
    out = np.empty(doc.shape[0], dtype=np.float32)
    for sl in _chunks(doc.shape[0], n_topics):
        d, v = doc[sl], word[sl]
        out[sl] = np.cumsum(doc_topic[d] * tables.bhat[v], axis=1, dtype=np.float32)[:, -1]
    return out


def _available_memory():
    """Bytes of host memory available now (Linux), or None where it cannot be read."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def check_host_memory(n_docs, n_words, n_tokens, n_topics):
    """Raise before allocating when the dense counts of this engine cannot fit in host memory.

    The engine holds A (D x K, float32), B, Bhat and its running sum (V x K, float32 each), float64
    count temporaries of the same shapes, and about 24 bytes per token.
    """
    need = 12 * n_docs * n_topics + 20 * n_words * n_topics + 24 * n_tokens
    have = _available_memory()
    if have is not None and need > have:
        gib = 1 << 30
        raise MemoryError(
            f"n_components={n_topics} with {n_docs} documents and {n_words} words needs about "
            f"{need / gib:.1f} GiB of host memory for the CPU engine, but only {have / gib:.1f} GiB "
            "is available; use fewer topics, fewer documents per call (partial_fit), or a GPU"
        )


def _count(index, topics, weight, n_rows, n_topics):
    """Weighted counts of (row, topic) pairs as float64 of shape (n_rows, n_topics)."""
    flat = index.astype(np.int64) * n_topics + topics
    counts = np.bincount(flat, weights=weight, minlength=n_rows * n_topics)
    return counts.astype(np.float64, copy=False).reshape(n_rows, n_topics)


class NumpyEngine(Engine):
    """ESCA on the CPU with NumPy (see :class:`~sklearn_gpulda._engines.base.Engine`).

    Parameters
    ----------
    n_topics, alpha, beta, seed
        As :class:`~sklearn_gpulda._engines.base.Engine`.
    algorithm : {'sparse', 'dense'}, default='sparse'
        Draw rule of every E-step (training sweeps and mini-batch sweeps): 'sparse' is the
        two-branch rule of ``doc/algorithm.md`` (:func:`draw_topics`), 'dense' the single running
        sum of the dense kernels
        (:func:`~sklearn_gpulda._engines.dense_rule.draw_topics_dense`). Both take the same
        uniforms; everything else (initialisation, M-step, log-likelihood, fold-in) is shared.
    """

    name = "cpu"

    def __init__(self, n_topics, alpha, beta, seed, algorithm="sparse"):
        super().__init__(n_topics, alpha, beta, seed)
        if algorithm not in ("sparse", "dense"):
            raise ValueError(f"algorithm must be 'sparse' or 'dense', got {algorithm!r}")
        self.algorithm = algorithm
        self.corpus = None
        self._z = None

    def _draw(self, doc, word, u, doc_topic, tables):
        """One E-step draw per token with the engine's rule."""
        if self.algorithm == "dense":
            # Imported here: dense_rule imports this module.
            from .dense_rule import draw_topics_dense

            return draw_topics_dense(doc, word, u, doc_topic, tables.bhat, self.alpha)
        return draw_topics(doc, word, u, doc_topic, tables, self.alpha)

    # -- training state -------------------------------------------------------------------
    def _token_index(self):
        return np.arange(self.corpus.n_tokens, dtype=np.int64)

    def initialize(self, corpus):
        check_host_memory(corpus.n_docs, corpus.n_words, corpus.n_tokens, self.n_topics)
        self.corpus = corpus
        z = _random.token_topic(self.seed, 0, _random.STREAM_INIT, self._token_index(), self.n_topics)
        self._set(z)

    def set_topics(self, corpus, topics):
        topics = self._checked_topics(corpus, topics)
        self.corpus = corpus
        self._set(topics)

    def _set(self, z):
        c = self.corpus
        self._z = z
        a = _count(c.doc, z, c.weight, c.n_docs, self.n_topics)
        b = _count(c.word, z, c.weight, c.n_words, self.n_topics)
        self._a = a.astype(np.float32)
        self._b = b.astype(np.float32)
        self._tables = WordTables.from_counts(b, b.sum(axis=0), self.beta)

    def sweep(self, iteration):
        c = self.corpus
        u = _random.token_uniform(self.seed, iteration, _random.STREAM_SAMPLE, self._token_index())
        self._set(self._draw(c.doc, c.word, u, self._a, self._tables))

    def topics(self):
        return self._z.copy()

    def word_topic_counts(self):
        return self._b.T.astype(np.float64)

    def doc_topic_counts(self):
        return self._a.astype(np.float64)

    def log_likelihood(self):
        c = self.corpus
        s = _sparse_mass(c.doc, c.word, self._a, self._tables).astype(np.float64)
        q = self.alpha * self._tables.total[c.word].astype(np.float64)
        norm = c.doc_lengths() + self.n_topics * self.alpha
        terms = np.log(s + q) - np.log(norm[c.doc])
        if c.weight is not None:
            terms *= c.weight
        return float(terms.sum())

    # -- topics fixed -------------------------------------------------------------------
    def fold_in(self, X, components, alpha, max_iter, tol, return_loglik=False):
        return fold_in(X, components, alpha, max_iter, tol, return_loglik)

    def batch_statistics(self, corpus, components, n_sweeps, iteration, first):
        n_topics, n_words = self.n_topics, corpus.n_words
        check_host_memory(corpus.n_docs, n_words, corpus.n_tokens, n_topics)
        t = np.arange(corpus.n_tokens, dtype=np.int64)
        z = _random.token_topic(self.seed, iteration, _random.STREAM_BATCH_INIT, t, n_topics)
        a = _count(corpus.doc, z, corpus.weight, corpus.n_docs, n_topics).astype(np.float32)
        if not first:
            tables = WordTables.from_components(components)
        total = np.zeros((n_words, n_topics), dtype=np.float64)
        keep_from = n_sweeps - (n_sweeps + 1) // 2
        for s in range(n_sweeps):
            if first:
                b = _count(corpus.word, z, corpus.weight, n_words, n_topics)
                tables = WordTables.from_counts(b, b.sum(axis=0), self.beta)
            u = _random.token_uniform(self.seed, iteration, _random.STREAM_BATCH_SAMPLE, t, sweep=s)
            z = self._draw(corpus.doc, corpus.word, u, a, tables)
            a = _count(corpus.doc, z, corpus.weight, corpus.n_docs, n_topics).astype(np.float32)
            if not first and s >= keep_from:
                total += _count(corpus.word, z, corpus.weight, n_words, n_topics)
        if first:
            return _count(corpus.word, z, corpus.weight, n_words, n_topics).T.copy()
        return (total / (n_sweeps - keep_from)).T.copy()


def fold_in(X, components, alpha, max_iter, tol, return_loglik=False):
    """Deterministic fold-in of ``doc/algorithm.md``, vectorised over documents.

    Each document's arithmetic touches only its own rows, and the reductions run in a fixed order
    per row, so a document's result does not depend on the other documents of ``X``.
    """
    X = sp.csr_matrix(X)
    X.sort_indices()
    comp = np.asarray(components, dtype=np.float64)
    n_topics = comp.shape[0]
    phi_t = np.ascontiguousarray((comp / comp.sum(axis=1, keepdims=True)).T)
    n_docs = X.shape[0]
    theta = np.full((n_docs, n_topics), 1.0 / n_topics)
    loglik = np.zeros(n_docs) if return_loglik else None
    indptr = X.indptr
    # Blocks of whole documents whose gathered phi rows stay within the chunk budget.
    budget = max(1, _CHUNK_ELEMENTS // n_topics)
    start = 0
    while start < n_docs:
        stop = int(np.searchsorted(indptr, indptr[start] + budget, side="right")) - 1
        stop = min(max(stop, start + 1), n_docs)
        _fold_in_block(
            X[start:stop], phi_t, alpha, max_iter, tol, theta[start:stop],
            loglik[start:stop] if return_loglik else None,
        )
        start = stop
    if return_loglik:
        return theta, loglik
    return theta


def _fold_in_block(Xb, phi_t, alpha, max_iter, tol, theta, loglik):
    lengths = np.diff(Xb.indptr)
    docs = np.flatnonzero(lengths)
    it = 0
    while it < max_iter and docs.size:
        # The active documents' entries, gathered once and reused until half of them converge.
        sub = Xb[docs]
        counts = sub.data.astype(np.float64)
        word_rows = phi_t[sub.indices]
        local_doc = np.repeat(np.arange(docs.size), np.diff(sub.indptr))
        # Row d of `block` @ word_rows sums document d's entries in order: one row per document,
        # so no document's arithmetic depends on which others are in the batch.
        block = sp.csr_matrix(
            (counts, np.arange(counts.size), sub.indptr), shape=(docs.size, counts.size)
        )
        th = theta[docs]
        active = np.ones(docs.size, dtype=bool)
        while it < max_iter:
            it += 1
            den = np.einsum("ik,ik->i", th[local_doc], word_rows)
            # A word every topic gives probability 0 (possible in other systems' topics, never
            # in components_ = B + beta) says nothing about theta.
            block.data = np.divide(counts, den, out=np.zeros_like(counts), where=den > 0)
            new = th * (block @ word_rows) + alpha
            new /= new.sum(axis=1, keepdims=True)
            moving = np.abs(new - th).mean(axis=1) >= tol
            # A converged document keeps the theta of the update that stopped it.
            th = np.where(active[:, None], new, th)
            active &= moving
            if np.count_nonzero(active) * 2 <= active.size:
                break
        theta[docs] = th
        docs = docs[active]
    if loglik is None:
        return
    # Per-document log-likelihood under the final theta.
    counts = Xb.data.astype(np.float64)
    rows = np.repeat(np.arange(Xb.shape[0]), lengths)
    den = (theta[rows] * phi_t[Xb.indices]).sum(axis=1)
    nz = np.flatnonzero(lengths)
    loglik[nz] = np.add.reduceat(counts * np.log(den), Xb.indptr[nz], axis=0)
