"""The protocol every sampling engine implements.

The estimator validates input and runs the loops; an engine only holds the numbers of one fit
(token topics and the counts derived from them) and does the arithmetic. ``doc/algorithm.md``
defines every quantity an engine computes.
"""

import abc

import numpy as np


class Engine(abc.ABC):
    """Sampling engine for one model.

    Parameters
    ----------
    n_topics : int
        Number of topics K.
    alpha : float
        Document-topic prior.
    beta : float
        Topic-word prior.
    seed : int
        32-bit seed; with the iteration number it keys every random draw.
    """

    #: short name reported by the estimator (``device_``)
    name = "abstract"

    def __init__(self, n_topics, alpha, beta, seed):
        self.n_topics = int(n_topics)
        self.alpha = float(alpha)
        self.beta = float(beta)
        self.seed = int(seed) & 0xFFFFFFFF

    @abc.abstractmethod
    def initialize(self, corpus):
        """Draw initial topics (stream 0) for a :class:`~sklearn_gpulda._corpus.TokenCorpus`."""

    @abc.abstractmethod
    def set_topics(self, corpus, topics):
        """Load an explicit topic assignment (canonical token order) and run the M-step."""

    def _checked_topics(self, corpus, topics):
        """``topics`` as int32, after checking it gives every token of ``corpus`` a topic of
        this engine; what each ``set_topics`` does first."""
        topics = np.asarray(topics, dtype=np.int32)
        if topics.shape != (corpus.n_tokens,):
            raise ValueError(f"topics must have shape ({corpus.n_tokens},), got {topics.shape}")
        if topics.size and (topics.min() < 0 or topics.max() >= self.n_topics):
            raise ValueError(f"topics must lie in [0, {self.n_topics})")
        return topics

    @abc.abstractmethod
    def sweep(self, iteration):
        """One ESCA iteration: E-step keyed by ``(seed, iteration)``, then the M-step."""

    @abc.abstractmethod
    def topics(self):
        """Current topic of every token, int32 in canonical order."""

    @abc.abstractmethod
    def word_topic_counts(self):
        """B transposed: float64 array of shape (n_topics, n_words)."""

    @abc.abstractmethod
    def doc_topic_counts(self):
        """A: float64 array of shape (n_docs, n_topics)."""

    @abc.abstractmethod
    def log_likelihood(self):
        """Training log-likelihood of the current state (``doc/algorithm.md``)."""

    @abc.abstractmethod
    def fold_in(self, X, components, alpha, max_iter, tol, return_loglik=False):
        """Deterministic per-document fold-in with the topics fixed.

        Parameters
        ----------
        X : scipy.sparse.csr_matrix of shape (n_docs, n_words)
        components : ndarray of shape (n_topics, n_words)
            Topic-word pseudo-counts; rows are normalised inside.
        alpha : float
        max_iter : int
        tol : float
            Per-document stop: mean absolute change of theta below ``tol``.
        return_loglik : bool
            Also return each document's log-likelihood under the folded-in theta.

        Returns
        -------
        theta : ndarray of shape (n_docs, n_topics), float64
        doc_loglik : ndarray of shape (n_docs,), float64
            Only when ``return_loglik``.
        """

    @abc.abstractmethod
    def batch_statistics(self, corpus, components, n_sweeps, iteration, first):
        """Word-topic statistics of a mini-batch (``doc/algorithm.md``, mini-batch learning).

        Returns
        -------
        stats : ndarray of shape (n_topics, n_words), float64
        """

    def synchronize(self):
        """Wait until the work queued on the engine's device has finished (nothing on the CPU).

        GPU kernels run asynchronously: a clock read right after the last sweep was queued would
        count only the launches, not the sampling.
        """

    def release(self):
        """Free whatever the engine holds on a device (nothing on the CPU)."""
