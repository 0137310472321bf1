"""Prior updates made by the GPU shards themselves, inside a run of sweeps.

A Dask fit whose GPU shards sum B among themselves (:class:`~._sampler.NcclDaskSampler`) would
otherwise end its run of sweeps at every prior update: the shards send their histograms to the
driver, which runs the fixed points on its CPU and sends the priors out with the next run, while
every GPU waits. But every shard holds the corpus-wide B after each sweep, so beta's histogram
is its own; and alpha's binned table is a sum of the shards' parts, which they gather through
the communicator that sums B and merge as the in-process chain merges its GPUs' parts
(:func:`~sklearn_gpulda.backends.cuda.doc_topic.merged_alpha_table`). Each rank then runs the
fit's own update (:meth:`~sklearn_gpulda._fitting.batch.PriorUpdates.update`) on the same
numbers with the same code, so every rank, and the driver that reads the priors back after the
run, holds the priors one process learns, bit for bit.

Only for integer counts: weighted tokens have no binned table to sum.
"""

import numpy as np

from ..backends.cuda.doc_topic import merged_alpha_table


class RankView:
    """A GPU shard's chain as a prior update reads it (the sampler methods that
    :meth:`~sklearn_gpulda._fitting.batch.PriorUpdates.update` calls): its own B, which is the
    corpus's, and alpha's table summed over the ranks.

    Parameters
    ----------
    chain : sklearn_gpulda.backends.cuda.multi_gpu.shard.DeviceShard
    rank : sklearn_gpulda.backends.cuda.multi_gpu.all_reduce.NcclRank
    n_ranks : int
    """

    def __init__(self, chain, rank, n_ranks):
        self.chain, self.rank, self.n_ranks = chain, rank, int(n_ranks)

    @property
    def alpha(self):
        return self.chain.alpha

    @property
    def beta(self):
        return self.chain.beta

    def doc_topic_table(self):
        return summed_alpha_table(self.chain, self.rank, self.n_ranks)

    def alpha_table_numerator(self, alpha, table):
        return self.chain.alpha_table_numerator(alpha, table)

    def word_topic_histogram(self):
        return self.chain.word_topic_histogram()

    def seeded_counts(self):
        return self.chain.seeded_counts()

    def set_priors(self, alpha=None, beta=None):
        self.chain.set_priors(alpha=alpha, beta=beta)


def summed_alpha_table(chain, rank, n_ranks):
    """The corpus's alpha table (``doc_topic_table``'s pair) from every rank's part; every rank
    calls this at once."""
    bins = chain.alpha_bins()
    if bins is None:
        # The driver hands the updates over for integer counts only; a rank raising here
        # would leave its peers waiting in the gather.
        raise RuntimeError("alpha's table of weighted counts is not summed on the shards")
    table, keys, n = bins
    parts = gather(chain, rank, n_ranks, [table.ravel(), keys, n])
    with chain.device_context():
        return merged_alpha_table(chain.cp, [p[0].reshape(table.shape) for p in parts],
                                  [p[1] for p in parts], [p[2] for p in parts])


def gather(chain, rank, n_ranks, arrays):
    """Every rank's ``arrays`` (host, uint64, one dimension, of any lengths), rank after rank:
    their lengths gathered first, then the arrays padded to the longest in one gather."""
    cp = chain.cp
    with chain.device_context():
        sizes = np.array([a.size for a in arrays], dtype=np.int64)
        everyone = cp.empty(n_ranks * sizes.size, dtype=cp.int64)
        rank.all_gather(cp.asarray(sizes), everyone, sizes.size)
        everyone = everyone.get().reshape(n_ranks, sizes.size)
        widths = everyone.max(axis=0)
        starts = np.concatenate(([0], np.cumsum(widths)[:-1])).astype(np.int64)
        packed = np.zeros(int(widths.sum()), dtype=np.uint64)
        for array, start in zip(arrays, starts):
            packed[start:start + array.size] = array
        received = cp.empty(n_ranks * packed.size, dtype=cp.uint64)
        rank.all_gather(cp.asarray(packed), received, packed.size)
        received = received.get().reshape(n_ranks, packed.size)
    return [[received[r, start:start + everyone[r, j]] for j, start in enumerate(starts)]
            for r in range(n_ranks)]
