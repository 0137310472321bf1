"""Deterministic fold-in with the topics fixed (``doc/algorithm.md``): ``transform``, ``score``
and the evaluator of :mod:`sklearn_gpulda.metrics` on the host."""

import numpy as np
import scipy.sparse as sp

from ..base import topic_prior
from .threads import CHUNK_ELEMENTS, CHUNKS_PER_THREAD, ThreadTeam, resolve_n_jobs


def fold_in(X, components, alpha, max_iter, tol, return_loglik=False, n_jobs=None):
    """Deterministic fold-in of ``doc/algorithm.md``, vectorised over documents.

    Each document's arithmetic touches only its own rows, and the reductions run in a fixed order
    per row, so a document's result does not depend on the other documents of ``X``.

    Parameters
    ----------
    X : sparse matrix or ndarray of shape (n_docs, n_words)
        Counts of the documents.
    components : ndarray of shape (n_topics, n_words)
        Topic-word pseudo-counts; rows are normalised here.
    alpha : float or ndarray of shape (n_topics,)
        Document-topic prior.
    max_iter : int
    tol : float
        Per-document stop: mean absolute change of theta below ``tol``.
    return_loglik : bool
        Also return each document's log-likelihood under the folded-in theta.
    n_jobs : int or None, default=None
        Threads over blocks of documents, read as scikit-learn reads ``n_jobs``; documents are
        independent, so the result does not depend on it.

    Returns
    -------
    theta : ndarray of shape (n_docs, n_topics), float64
    doc_loglik : ndarray of shape (n_docs,), float64
        Only when ``return_loglik``.
    """
    X = sp.csr_matrix(X)
    X.sort_indices()
    comp = np.asarray(components, dtype=np.float64)
    n_topics = comp.shape[0]
    alpha = topic_prior(alpha, n_topics)
    phi_t = np.ascontiguousarray((comp / comp.sum(axis=1, keepdims=True)).T)
    n_docs = X.shape[0]
    theta = np.full((n_docs, n_topics), 1.0 / n_topics)
    loglik = np.zeros(n_docs) if return_loglik else None
    indptr = X.indptr
    team = ThreadTeam(resolve_n_jobs(n_jobs))
    # Blocks of whole documents whose gathered phi rows stay within the chunk budget (cut finer
    # for balance when there are several threads).
    budget = max(1, CHUNK_ELEMENTS // n_topics)
    if team.n_threads > 1:
        budget = min(budget, max(1, -(-int(indptr[-1]) // (CHUNKS_PER_THREAD * team.n_threads))))
    blocks, start = [], 0
    while start < n_docs:
        stop = int(np.searchsorted(indptr, indptr[start] + budget, side="right")) - 1
        stop = min(max(stop, start + 1), n_docs)
        blocks.append((start, stop))
        start = stop

    def run(block):
        b0, b1 = block
        _fold_in_block(X[b0:b1], phi_t, alpha, max_iter, tol, theta[b0:b1],
                       loglik[b0:b1] if return_loglik else None)

    try:
        team.map(run, blocks)
    finally:
        team.close()
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
