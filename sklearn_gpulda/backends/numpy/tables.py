"""Per-word sampling tables of the NumPy backend (``doc/algorithm.md``, notation)."""

import numpy as np

from ..base import topic_prior

# Elements of a (tokens x topics) temporary per chunk; bounds memory at ~16 MB per float32 array.
CHUNK_ELEMENTS = 1 << 22


def chunks(n, n_topics):
    """Slices of ``range(n)`` whose (slice x n_topics) temporaries stay near 16 MB."""
    step = max(1, CHUNK_ELEMENTS // max(1, n_topics))
    for start in range(0, n, step):
        yield slice(start, min(n, start + step))


class WordTables:
    """Per-word sampling tables derived from the word-topic matrix and the prior.

    Attributes
    ----------
    bhat : ndarray of float32, shape (n_words, n_topics)
        Normalised word-topic matrix (``Bhat``).
    qcum : ndarray of float32, shape (n_words, n_topics)
        Running sum of ``q[v, k] = float32(alpha_k * Bhat[v, k])`` along topics: the leaves of each
        word's sampling tree for the prior branch.
    qtotal : ndarray of float32, shape (n_words,)
        ``Q[v] = qcum[v, -1] = sum_k alpha_k Bhat[v, k]``.
    """

    def __init__(self, bhat, alpha):
        self.bhat = np.ascontiguousarray(bhat, dtype=np.float32)
        alpha32 = topic_prior(alpha, self.bhat.shape[1]).astype(np.float32)
        # Products rounded to float32 as the kernels form them; running sums in float64, rounded
        # once: a float32 running sum over thousands of topics drifts by many ulps, further from
        # the exact rule than the GPU's tree of partial sums.
        self.qcum = np.cumsum(self.bhat * alpha32, axis=1, dtype=np.float64).astype(np.float32)
        self.qtotal = np.ascontiguousarray(self.qcum[:, -1])

    @classmethod
    def from_counts(cls, word_topic, topic_totals, beta, alpha):
        """Eq. (2) of SaberLDA: ``(B + beta) / (n + V beta)``, divided in float64."""
        n_words = word_topic.shape[0]
        denom = np.asarray(topic_totals, dtype=np.float64) + n_words * beta
        return cls((word_topic.astype(np.float64) + beta) / denom, alpha)

    @classmethod
    def from_components(cls, components, alpha):
        """Topics fixed from a fitted ``components_`` (rows normalised)."""
        comp = np.asarray(components, dtype=np.float64)
        return cls((comp / comp.sum(axis=1, keepdims=True)).T, alpha)
