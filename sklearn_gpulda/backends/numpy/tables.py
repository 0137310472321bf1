"""Per-word sampling tables of the NumPy backend (``doc/algorithm.md``, notation)."""

import numpy as np

from ..base import topic_prior
from .threads import ThreadTeam

_ONE_THREAD = ThreadTeam(1)


def _by_rows(team, n_rows, task, **arguments):
    """Run ``task((r0, r1), **arguments)`` over row ranges of a V x K table on ``team`` (one
    thread when None). Every table here is built row by row, so the ranges do not change a
    value."""
    team = _ONE_THREAD if team is None else team
    team.run(task, team.row_ranges(np.arange(n_rows + 1)), **arguments)


def own_bhat(bhat, word_side, v, z, w, cells=None):
    """``Bhat[v, z]`` with each token's own weight taken out of ``B[v, z]`` and ``n_z``.

    The word side of the collapsed conditional: ``(B[v,z] - w + beta) / (n_z - w + V beta)``,
    computed in float64 in this order (the kernels do the same) and rounded to float32. With a
    matrix prior (``cells``) the numerator is ``((B[v,z] - w) + beta) + extra[z, v]`` and
    ``denom`` already holds ``sum_v extra[z, v]``: a cell seeded with 0.0 gives the scalar
    prior's value bit for bit.

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
    cells : :class:`~sklearn_gpulda.backends.priors.CellPrior` or None
        The seeded cells of a matrix prior (None: a scalar prior).

    Returns
    -------
    ndarray of float32, shape (n_tokens,)
    """
    if word_side is None:
        return bhat[v, z]
    counts, denom, beta = word_side
    w = 1.0 if w is None else np.asarray(w, dtype=np.float64)
    b = counts[v, z].astype(np.float64)
    numerator = (b - w) + beta
    if cells is not None:
        numerator = numerator + cells.at(v, z)
    return (numerator / (denom[z] - w)).astype(np.float32)


#: Rows of a V x K table per block when Q is summed: the block's float64 products stay in a
#: core's cache (256 rows x 1,000 topics is 2 MB) instead of a V x K float64 temporary.
_Q_BLOCK_ROWS = 256


def prior_running_sums(bhat_rows, alpha32):
    """Running sums of ``q[v, k] = float32(alpha_k * Bhat[v, k])`` along the topics of each row:
    the leaves of a word's sampling tree for the prior branch.

    The products are rounded to float32 as the kernels form them; the sums run in float64 and
    are rounded once (a float32 running sum over thousands of topics drifts by many ulps,
    further from the exact rule than the GPU's tree of partial sums).
    """
    return np.cumsum(bhat_rows * alpha32, axis=1, dtype=np.float64).astype(np.float32)


def _prior_mass(bhat_rows, alpha32, scratch):
    """``Q = sum_k float32(alpha_k Bhat[v, k])`` of each row, summed in float64 (pairwise, so
    it may differ from :func:`prior_running_sums`' last entry in its last float64 bits; a draw
    past the running sums then takes the last topic). ``scratch``: float64, the rows' shape."""
    np.multiply(bhat_rows, alpha32, out=scratch, dtype=np.float32, casting="unsafe")
    return scratch.sum(axis=1)


def fill_prior_mass(rows, bhat, alpha32, qtotal):
    """``qtotal[r0:r1] = Q`` of the rows ``rows = (r0, r1)`` of ``bhat``, a block at a time."""
    r0, r1 = rows
    wide = np.empty((min(_Q_BLOCK_ROWS, r1 - r0), bhat.shape[1]))
    for b0 in range(r0, r1, _Q_BLOCK_ROWS):
        b1 = min(r1, b0 + _Q_BLOCK_ROWS)
        qtotal[b0:b1] = _prior_mass(bhat[b0:b1], alpha32, wide[:b1 - b0])


def fill_tables(rows, counts, denom, beta, alpha32, bhat, qtotal, cells=None):
    """Bhat and Q of the rows ``rows = (r0, r1)`` of the counts, into ``bhat`` and ``qtotal``;
    with a matrix prior's ``cells``, ``((B + beta) + extra) / denom`` at the seeded cells."""
    r0, r1 = rows
    # One float64 block per range, reused in place: a fresh temporary per block is allocated
    # from and returned to the system each time, and its page faults cost more than the
    # arithmetic (3-8x on a 2-core VM).
    wide = np.empty((min(_Q_BLOCK_ROWS, r1 - r0), counts.shape[1]), dtype=np.float64)
    for b0 in range(r0, r1, _Q_BLOCK_ROWS):
        b1 = min(r1, b0 + _Q_BLOCK_ROWS)
        block = wide[:b1 - b0]
        block[...] = counts[b0:b1]
        block += beta
        if cells is not None:
            seeded = cells.cells_of_rows(b0, b1)
            block[cells.word[seeded] - b0, cells.topic[seeded]] += cells.value[seeded]
        block /= denom
        bhat[b0:b1] = block
        qtotal[b0:b1] = _prior_mass(bhat[b0:b1], alpha32, block)


class WordTables:
    """Per-word sampling tables derived from the word-topic matrix and the prior.

    Only Bhat and each word's prior mass are kept (both V x K work per M-step at most once):
    the prior branch's running sums are formed for the few tokens that take that branch
    (:func:`prior_running_sums`), which costs less than a V x K table of them per sweep.

    Attributes
    ----------
    bhat : ndarray of float32, shape (n_words, n_topics)
        Normalised word-topic matrix (``Bhat``).
    qtotal : ndarray of float32, shape (n_words,)
        ``Q[v] = sum_k alpha_k Bhat[v, k]``, the total of :func:`prior_running_sums`.
    word_side : tuple (counts, denom, beta) or None
        What Bhat came from, for :func:`own_bhat`; None for a fixed ``Bhat``.
    cells : :class:`~sklearn_gpulda.backends.priors.CellPrior` or None
        The seeded cells of a matrix topic-word prior Bhat came from (None: a scalar prior).
    """

    def __init__(self, bhat, alpha, word_side=None, team=None, qtotal=None, cells=None):
        self.bhat = np.ascontiguousarray(bhat, dtype=np.float32)
        self.alpha32 = topic_prior(alpha, self.bhat.shape[1]).astype(np.float32)
        if qtotal is None:
            team = _ONE_THREAD if team is None else team
            qtotal = team.empty("qtotal", (self.bhat.shape[0],), np.float32)
            _by_rows(team, self.bhat.shape[0], fill_prior_mass, bhat=self.bhat,
                     alpha32=self.alpha32, qtotal=qtotal)
        self.qtotal = qtotal
        self.word_side = word_side
        self.cells = cells if word_side is not None else None

    def prior_running_sums(self, v):
        """:func:`prior_running_sums` of the words ``v`` (one row per entry)."""
        return prior_running_sums(self.bhat[v], self.alpha32)

    def own_bhat(self, v, z, w):
        """:func:`own_bhat` of these tables."""
        return own_bhat(self.bhat, self.word_side, v, z, w, self.cells)

    @classmethod
    def from_counts(cls, word_topic, topic_totals, beta, alpha, team=None, cells=None):
        """Eq. (2) of SaberLDA: ``(B + beta) / (n + V beta)``, divided in float64; Q summed in
        the same pass over each block of rows, while the block is in the cache
        (:func:`fill_tables`, over row ranges on ``team``). With a matrix prior's ``cells``:
        ``((B + beta) + extra) / ((n + V beta) + sum_v extra)``."""
        team = _ONE_THREAD if team is None else team
        counts = np.asarray(word_topic)
        n_words = counts.shape[0]
        denom = np.asarray(topic_totals, dtype=np.float64) + n_words * beta
        if cells is not None:
            denom = denom + cells.topic_sums
        bhat = team.empty("bhat", counts.shape, np.float32)
        qtotal = team.empty("qtotal", (n_words,), np.float32)
        alpha32 = topic_prior(alpha, counts.shape[1]).astype(np.float32)
        _by_rows(team, n_words, fill_tables, counts=counts, denom=denom, beta=float(beta),
                 alpha32=alpha32, bhat=bhat, qtotal=qtotal, cells=cells)
        return cls(bhat, alpha, (counts, denom, float(beta)), team, qtotal=qtotal, cells=cells)

    @classmethod
    def from_components(cls, components, alpha):
        """Topics fixed from a fitted ``components_`` (rows normalised)."""
        comp = np.asarray(components, dtype=np.float64)
        return cls((comp / comp.sum(axis=1, keepdims=True)).T, alpha)
