"""Per-word sampling tables of the NumPy backend (``doc/algorithm.md``, notation)."""

import numpy as np

from ..base import topic_prior

from .threads import ThreadTeam

_ONE_THREAD = ThreadTeam(1)


def _by_rows(team, n_rows, fill):
    """Call ``fill(r0, r1)`` over row ranges of a V x K table, on ``team``'s threads (one when
    None). Every table here is built row by row, so the ranges do not change a value."""
    team = _ONE_THREAD if team is None else team
    team.map(lambda rows: fill(*rows), team.row_ranges(np.arange(n_rows + 1)))


def own_bhat(bhat, word_side, v, z, w):
    """``Bhat[v, z]`` with each token's own weight taken out of ``B[v, z]`` and ``n_z``.

    The word side of the collapsed conditional: ``(B[v,z] - w + beta) / (n_z - w + V beta)``,
    computed in float64 in this order (the kernels do the same) and rounded to float32.

    Parameters
    ----------
    bhat : ndarray of float32, shape (n_words, n_topics)
    word_side : tuple (counts, denom, beta) or None
        The counts B Bhat came from (V x K), ``n + V beta`` (K,) and beta; None when the topic-word
        side is fixed (mini-batch learning), whose tokens are in no count: Bhat itself.
    v, z : ndarray of int
        Word and current topic of each token.
    w : ndarray of float32, or None
        Weight of each token; None for all 1.

    Returns
    -------
    ndarray of float32, shape (n_tokens,)
    """
    if word_side is None:
        return bhat[v, z]
    counts, denom, beta = word_side
    w = 1.0 if w is None else np.asarray(w, dtype=np.float64)
    b = counts[v, z].astype(np.float64)
    return (((b - w) + beta) / (denom[z] - w)).astype(np.float32)


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
    word_side : tuple (counts, denom, beta) or None
        What Bhat came from, for :func:`own_bhat`; None for a fixed ``Bhat``.
    """

    def __init__(self, bhat, alpha, word_side=None, team=None):
        self.bhat = np.ascontiguousarray(bhat, dtype=np.float32)
        self.alpha32 = topic_prior(alpha, self.bhat.shape[1]).astype(np.float32)
        self.qcum = np.empty_like(self.bhat)

        def fill(r0, r1):
            # Products rounded to float32 as the kernels form them; running sums in float64,
            # rounded once: a float32 running sum over thousands of topics drifts by many ulps,
            # further from the exact rule than the GPU's tree of partial sums.
            self.qcum[r0:r1] = np.cumsum(self.bhat[r0:r1] * self.alpha32, axis=1,
                                         dtype=np.float64)

        _by_rows(team, self.bhat.shape[0], fill)
        self.qtotal = np.ascontiguousarray(self.qcum[:, -1])
        self.word_side = word_side

    def own_bhat(self, v, z, w):
        """:func:`own_bhat` of these tables."""
        return own_bhat(self.bhat, self.word_side, v, z, w)

    @classmethod
    def from_counts(cls, word_topic, topic_totals, beta, alpha, team=None):
        """Eq. (2) of SaberLDA: ``(B + beta) / (n + V beta)``, divided in float64."""
        counts = np.asarray(word_topic)
        n_words = counts.shape[0]
        denom = np.asarray(topic_totals, dtype=np.float64) + n_words * beta
        bhat = np.empty(counts.shape, dtype=np.float32)

        def fill(r0, r1):
            bhat[r0:r1] = (counts[r0:r1].astype(np.float64) + beta) / denom

        _by_rows(team, n_words, fill)
        return cls(bhat, alpha, (counts, denom, float(beta)), team)

    @classmethod
    def from_components(cls, components, alpha):
        """Topics fixed from a fitted ``components_`` (rows normalised)."""
        comp = np.asarray(components, dtype=np.float64)
        return cls((comp / comp.sum(axis=1, keepdims=True)).T, alpha)
