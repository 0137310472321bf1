"""Prior updates made by the GPU shards themselves, inside a run of sweeps.

A Dask fit whose GPU shards sum B among themselves (:class:`~._nccl_sampler.NcclDaskSampler`) would
otherwise end its run of sweeps at every prior update: the shards send their histograms to the
driver, which runs the fixed points on its CPU and sends the priors out with the next run, while
every GPU waits. But every shard holds the corpus-wide B after each sweep, so beta's histogram
is its own; and alpha's binned table is a sum of the shards' parts, which they gather through
the communicator that sums B and merge as the in-process chain merges its GPUs' parts
(:func:`~sklearn_gpulda.backends.cuda.doc_topic.merged_alpha_table`). Each rank then runs the
fit's own update (:meth:`~sklearn_gpulda._fitting.batch.PriorUpdates.update`) on the same
numbers with the same code, so every rank, and the driver that reads the priors back after the
run, holds the priors one process learns, bit for bit.

The ranks must call the same collectives in the same order, or those waiting would wait for
ever: a rank whose part of an update fails (device memory, say) goes on to the next point
where the ranks compare notes (:func:`agreed`), calling no collective before it, and there all
of them raise together (:class:`AgreedFailure`).

Only for integer counts: weighted tokens have no binned table to sum.
"""

import numpy as np

from ..backends.cuda.doc_topic import merged_alpha_table


class AgreedFailure(RuntimeError):
    """A prior update failed on some shard, and every shard knows it: each raises one of these
    at the same point, with no collective left to wait for."""


class PeerFailed(AgreedFailure):
    """Raised by the shards whose own part of a prior update went well."""


class ShardFailed(AgreedFailure):
    """Raised by the shard whose own part of a prior update failed; it names the error."""


def _raise_agreed(failure):
    if failure is None:
        raise PeerFailed("a prior update failed on another shard")
    raise ShardFailed(f"a prior update failed on this shard: {failure!r}") from failure


class Flags:
    """The device buffers the ranks compare notes in, made when they join (so that comparing
    notes never needs memory that might be short).

    Parameters
    ----------
    cp : module
        CuPy.
    n_ranks : int
    """

    def __init__(self, cp, n_ranks):
        self.send = cp.zeros(1, dtype=cp.int64)
        self.all = cp.zeros(int(n_ranks), dtype=cp.int64)


def agreed(chain, rank, flags, ok):
    """Whether every rank is ``ok``; every rank calls this at the same point."""
    with chain.device_context():
        flags.send.fill(0 if ok else 1)
        rank.all_gather(flags.send, flags.all, 1)
        return not int(flags.all.get().sum())


def update_on_ranks(updates, chain, rank, n_ranks, flags):
    """``updates.update`` on this rank's view of the chain (:class:`RankView`), every rank at
    once; where it failed on any rank, every rank raises an :class:`AgreedFailure` (the failed
    one :class:`ShardFailed`, naming its error)."""
    try:
        updates.update(RankView(chain, rank, n_ranks, flags))
    except AgreedFailure:
        raise  # every rank stopped at the same collective: nothing more to compare
    except Exception as exc:
        agreed(chain, rank, flags, False)
        _raise_agreed(exc)
    if not agreed(chain, rank, flags, True):
        _raise_agreed(None)


class RankView:
    """A GPU shard's chain as a prior update reads it (the sampler methods that
    :meth:`~sklearn_gpulda._fitting.batch.PriorUpdates.update` calls): its own B, which is the
    corpus's, and alpha's table summed over the ranks.

    Parameters
    ----------
    chain : sklearn_gpulda.backends.cuda.multi_gpu.shard.DeviceShard
    rank : sklearn_gpulda.backends.cuda.multi_gpu.all_reduce.NcclRank
    n_ranks : int
    flags : Flags
    """

    def __init__(self, chain, rank, n_ranks, flags):
        self.chain, self.rank, self.n_ranks, self.flags = chain, rank, int(n_ranks), flags

    @property
    def alpha(self):
        return self.chain.alpha

    @property
    def beta(self):
        return self.chain.beta

    def learn_priors(self, *args):
        return None  # alpha's table is the ranks' sum: the two-step path

    def doc_topic_table(self):
        return summed_alpha_table(self.chain, self.rank, self.n_ranks, self.flags)

    def learn_alpha(self, *args):
        return self.chain.learn_alpha(*args)

    def learn_beta(self, *args):
        return self.chain.learn_beta(*args)

    def word_topic_histogram(self):
        return self.chain.word_topic_histogram()

    def seeded_counts(self):
        return self.chain.seeded_counts()

    def set_priors(self, alpha=None, beta=None):
        self.chain.set_priors(alpha=alpha, beta=beta)


def summed_alpha_table(chain, rank, n_ranks, flags):
    """The corpus's alpha table (``doc_topic_table``'s pair) from every rank's part; every rank
    calls this at once."""
    def own_part():
        bins = chain.alpha_bins()
        if bins is None:
            raise RuntimeError("alpha's table of weighted counts is not summed on the shards")
        return bins

    table, keys, n = _checked(chain, rank, flags, own_part)
    parts = gather(chain, rank, n_ranks, flags, [table.ravel(), keys, n])
    return merged_alpha_table([p[0].reshape(table.shape) for p in parts],
                              [p[1] for p in parts], [p[2] for p in parts])


def _checked(chain, rank, flags, make):
    """``make()`` on the chain's device, then the ranks compare notes: its result where it went
    well on every rank, else every rank raises (:func:`_raise_agreed`) before the collective
    that would wait for the failed one."""
    failure = result = None
    with chain.device_context():
        try:
            result = make()
        except Exception as exc:  # the others are about to gather: say so at the check
            failure = exc
    if not agreed(chain, rank, flags, failure is None):
        _raise_agreed(failure)
    return result


def gather(chain, rank, n_ranks, flags, arrays):
    """Every rank's ``arrays`` (host, uint64, one dimension, of any lengths), rank after rank:
    their lengths gathered first, then the arrays padded to the longest in one gather. The
    buffers of each gather are made, and agreed on, before it."""
    cp = chain.cp
    sizes = np.array([a.size for a in arrays], dtype=np.int64)
    everyone, send = _checked(chain, rank, flags, lambda: (
        cp.empty(n_ranks * sizes.size, dtype=cp.int64), cp.asarray(sizes)))
    with chain.device_context():
        rank.all_gather(send, everyone, sizes.size)

    def packed():
        lengths = everyone.get().reshape(n_ranks, sizes.size)
        widths = lengths.max(axis=0)
        starts = np.concatenate(([0], np.cumsum(widths)[:-1])).astype(np.int64)
        mine = np.zeros(int(widths.sum()), dtype=np.uint64)
        for array, start in zip(arrays, starts):
            mine[start:start + array.size] = array
        return lengths, starts, cp.empty(n_ranks * mine.size, dtype=cp.uint64), cp.asarray(mine)

    lengths, starts, received, send = _checked(chain, rank, flags, packed)
    width = send.size
    with chain.device_context():
        rank.all_gather(send, received, width)
        received = received.get().reshape(n_ranks, width)
    return [[received[r, start:start + lengths[r, j]] for j, start in enumerate(starts)]
            for r in range(n_ranks)]
