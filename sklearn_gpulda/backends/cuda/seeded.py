"""A matrix topic-word prior's seeded cells on a GPU chain (``doc/algorithm.md``, "A matrix
topic-word prior").

The CUDA samplers build ``Bhat[v, k] = (B[v, k] + beta) / denom[k]`` from a dense word-major B
inside their kernels. A seeded cell's ``extra[k, v]`` acts as that many pseudo-tokens: added to
B at the cell while the chain samples or scores (:meth:`DeviceCells.seeded`) and to the topic's
denominator (``denom[k] = (n[k] + V beta) + E[k]``, :attr:`DeviceCells.topic_sums`), it gives
the matrix prior's Bhat, its own-topic term and the prior branch's tree without a change to
any sampling kernel. Outside the sampling B holds the counts alone, as every reader of the
model (histograms, averaging, ``components_``, the shards' sums) expects. Memory: a few bytes
per seeded cell and K sums, never K x V.

One rounding differs from the NumPy engine's: the GPU forms ``float32(B + extra) + beta`` where
the oracle forms ``(B + beta) + extra`` in float64. For integer counts and an extra that is a
whole number (what ``seeded_topic_prior`` makes of a whole strength) both are the same number
up to the last bit of a float64, so Bhat, a float32, agrees; otherwise a seeded cell's Bhat can
differ in its last float32 bit, which moves a draw only at an interval's end, as the contract
allows.
"""

from contextlib import contextmanager

import numpy as np

from . import counts


class DeviceCells:
    """The seeded cells of a :class:`~sklearn_gpulda.backends.priors.CellPrior` on the current
    GPU, for a chain whose B row of word ``v`` is ``row_of_word[v]``.

    Parameters
    ----------
    cp : module
        CuPy.
    cells : CellPrior
    row_of_word : ndarray of int or None
        The device row of each caller's word (the sampler's relabelling); None: the identity.
    n_sm : int
        Streaming multiprocessors (grids of the cell kernels).

    Attributes
    ----------
    rows, topics : cupy.ndarray of int32
        Each cell's row of B and its topic.
    extra : cupy.ndarray of float64
        What each cell adds.
    topic_sums : cupy.ndarray of float64, shape (n_topics,)
        ``E[k] = sum_v extra[k, v]``, added to the denominators.
    """

    def __init__(self, cp, cells, row_of_word, n_sm):
        word = np.asarray(cells.word, dtype=np.int64)
        rows = word if row_of_word is None else np.asarray(row_of_word, dtype=np.int64)[word]
        self.cp, self.n_sm = cp, n_sm
        self.rows = cp.asarray(rows.astype(np.int32))
        self.topics = cp.asarray(np.asarray(cells.topic, dtype=np.int32))
        self.extra = cp.asarray(np.ascontiguousarray(cells.value, dtype=np.float64))
        self.topic_sums = cp.asarray(np.ascontiguousarray(cells.topic_sums, dtype=np.float64))
        self._saved = cp.empty(self.rows.shape[0], dtype=cp.float32)

    @staticmethod
    def nbytes(n_cells, n_topics):
        """Device bytes of the cells of a prior with ``n_cells`` cells over ``n_topics``."""
        return n_cells * (4 + 4 + 8 + 4) + n_topics * 8

    @contextmanager
    def seeded(self, B):
        """B with every seeded cell's extra added, for the kernels queued inside; the counts
        are written back on leaving (both on the current stream, so after those kernels)."""
        counts.seed_cells(B, self.rows, self.topics, self.extra, self._saved, self.n_sm)
        try:
            yield B
        finally:
            counts.unseed_cells(B, self.rows, self.topics, self._saved, self.n_sm)

    def counts_at(self, B):
        """B at the cells, in their order: float64 on the host (for learning beta)."""
        counts.seed_cells(B, self.rows, self.topics, None, self._saved, self.n_sm)
        return self._saved.get().astype(np.float64)
