"""The driver's side of a Dask fit over GPU workers that sum B among themselves through NCCL,
one shard per GPU: :class:`NcclDaskSampler`, the :class:`~._sampler.DaskSampler` whose shards
run whole runs of sweeps, and the prior updates in them, on their own (:mod:`._shard`,
:mod:`._rank_priors`)."""

import numpy as np

from ..backends.prior_learning import merge_histograms
from ..backends.random import STREAM_INIT, STREAM_SAMPLE
from ._sampler import DaskSampler
from ._wire import dense_word_topic


class NcclDaskSampler(DaskSampler):
    """A chain over GPU workers, one shard per GPU, whose shards sum B among themselves in place
    through NCCL (:meth:`~._shard.Shard.join_all_reduce`): no part of B crosses to the driver
    in a sweep. Every shard's GPU then holds the corpus-wide B; the driver reads the model, the
    histogram learning beta and the averaging from the first shard's. The same chain as
    :class:`DaskSampler`'s, bit for bit (integer counts sum exactly in any order).

    The sweep loop runs on the workers: the fit loop hands over a run of sweeps up to the next
    point where it needs the chain (:meth:`sweeps`), and every shard runs the whole run in one
    call, summing B with its peers after each sweep and, on the first shard, adding it to the
    averaging's running sum. For integer counts the shards also make the prior updates
    (:meth:`run_prior_updates`, :mod:`._rank_priors`), so a run ends only where the fit
    evaluates, starts averaging or stops. The driver is contacted once per run, not once per
    sweep or per update.

    Every shard must be on its own GPU (NCCL takes one rank per GPU) and have been prepared
    with the whole corpus's word frequencies (the same rows of B everywhere).
    """

    #: A list to count changed cells into, or None (the default: nothing counted). Where a
    #: benchmark sets a list here, every run also has the first shard count how many cells of
    #: the summed B each sweep changed, and appends the counts, one per sweep, in order.
    change_log = None

    #: How the shards sum B, where set: 'ring' or 'changes' (see :meth:`join`); None (the
    #: default) leaves it to the fit. For tests and benchmarks.
    exchange = None
    #: The longest list of changes the 'changes' exchange gathers, where set (None: its
    #: default). For tests, which make it small to take the whole-table branch.
    exchange_capacity = None

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        #: What the driver reads after every run, fetched by the run's own call: 'doc' (the
        #: histogram learning alpha), 'word' (beta's). The fit sets it from the priors it learns
        #: (and empties it where the shards make the updates themselves).
        self.prefetch = ()
        #: Whether every shard's counts are integers (set by the fit): the shards then make the
        #: prior updates themselves (:meth:`run_prior_updates`).
        self.integral = False
        self._fetched = {}
        self._pending_priors = None
        self._updates = None

    # Where the shards cannot make the prior updates themselves (weighted counts), a fit with
    # learned priors reads alpha's and beta's histograms between two runs and sets the priors
    # found. As calls of their own these were three round trips to the workers per run
    # besides the run's: the histograms come back with the run, and the priors go out with
    # the next one.
    def call_each(self, method, args, shards=None):
        if self._pending_priors is not None and method != "sweeps_summed":
            priors, self._pending_priors = self._pending_priors, None
            super().call_each("set_priors", [priors] * len(self.shards))
        return super().call_each(method, args, shards)

    def _priors_changed(self):
        if self.corpus is not None:
            self._pending_priors = (self._alpha, self.beta)

    def run_prior_updates(self, updates):
        """The shards make the prior updates inside their runs (:mod:`._rank_priors`), for
        integer counts: a run then goes on across them, and the driver reads the priors back
        once, after it."""
        if not self.integral:
            return False
        self._updates = updates
        self.prefetch = ()
        return True

    def join(self, exchange="ring"):
        """Make the communicator: one shard draws its unique id, every shard joins at once.

        ``exchange`` (unless the class attribute of that name overrides it): 'ring', NCCL's
        all-reduce of the whole B every sweep, for shards on one host; 'changes', each shard's
        changed cells gathered by all
        (:class:`~sklearn_gpulda.backends.cuda.multi_gpu.change_exchange.ChangeExchange`),
        for shards on several hosts, where links are slower and a converging sweep changes
        few cells."""
        exchange = self.exchange or exchange
        (unique_id,) = self.call_each("nccl_unique_id", [()], self.shards[:1])
        n = len(self.shards)
        self.call_each("join_all_reduce", [(n, unique_id, rank, exchange,
                                            self.exchange_capacity) for rank in range(n)])

    def exchange_records(self):
        """Each shard's :meth:`~._shard.Shard.exchange_record` (under 'changes'), in order."""
        return self.call_all("exchange_record")

    def _lead(self, method, *args):
        return self.call_each(method, [args], self.shards[:1])[0]

    def init_topics(self, iteration=0, stream=STREAM_INIT):
        if iteration != 0 or stream != STREAM_INIT:
            raise NotImplementedError("shards draw their initial topics from iteration 0 only")
        self.call_all("init_topics_summed")
        self._b = None
        self._fetched = {}

    def sweep(self, iteration, stream=STREAM_SAMPLE, sub=0):
        if stream != STREAM_SAMPLE or sub:
            raise NotImplementedError("a sharded chain runs batch sweeps only")
        if self._updates is not None:  # the update due after it is the shards' to make
            return self.sweeps(iteration, iteration)
        self.call_all("sweep_summed", int(iteration))
        self._b = None
        self._fetched = {}

    def sweeps(self, first, last, accumulate_from=None):
        """Sweeps ``first`` to ``last`` on every shard in one call each
        (:meth:`~._shard.Shard.sweeps_summed`); the first shard accumulates the averaged ones."""
        first, last = int(first), int(last)
        accumulate_from = None if accumulate_from is None else int(accumulate_from)
        count = self.change_log is not None
        priors, self._pending_priors = self._pending_priors, None
        fetch = tuple(self.prefetch)
        updates = self._updates
        if updates is not None and not any(updates.due(i) for i in range(first, last + 1)):
            updates = None
        # Every shard's doc-topic histogram is its own; the summed B, and so beta's
        # histogram, is the same on every shard: the first one's is read.
        rest = (first, last, None, False, priors, tuple(f for f in fetch if f == "doc"), updates)
        self._b = None
        self._fetched = {}
        results = self.call_each("sweeps_summed", [(first, last, accumulate_from, count, priors,
                                                    fetch, updates)]
                                 + [rest] * (len(self.shards) - 1))
        if updates is not None:
            # Every shard holds these already: kept here without sending them out again.
            alpha, beta = results[0]["priors"]
            for r in results[1:]:
                if not (np.array_equal(r["priors"][0], alpha) and r["priors"][1] == beta):
                    # Each shard now samples with its own: not the one chain any more.
                    raise RuntimeError(
                        "the shards learned different priors from the same counts; the fit "
                        "was stopped")
            self._set_alpha(alpha)
            self.beta = float(beta)
        if "doc" in fetch:
            self._fetched["doc"] = merge_histograms([r["doc"] for r in results])
        if "word" in fetch:
            self._fetched["word"] = results[0]["word"]
        failed = results[0].get("averaging_failed")
        if accumulate_from is not None:
            until = last if failed is None else failed[0] - 1
            self.n_accumulated += max(0, until - max(first, accumulate_from) + 1)
        if count:
            self.change_log.extend(results[0]["changes"])
        if failed is not None:
            # The shards sampled the whole run, its last sweeps unaveraged: the fit loop drops
            # the sum and goes on, or stops where averaging was asked for (Sampler.sweeps).
            exc = MemoryError(f"averaging ran out of GPU memory on the first shard at sweep "
                              f"{failed[0]}: {failed[1]}")
            exc.sweep = last
            raise exc

    def doc_topic_histogram(self):
        if "doc" in self._fetched:
            return self._fetched["doc"]
        return super().doc_topic_histogram()

    def _discard_sum(self):
        super()._discard_sum()
        self._lead("discard_accumulated")

    def _word_major_counts(self):
        if self._b is None:
            cells, counts = self._lead("word_topic_cells")
            self._b = dense_word_topic(cells, counts, self._require().n_words, self.n_topics,
                                       np.float64)
        return self._b

    def word_topic_histogram(self):
        if "word" in self._fetched:
            return self._fetched["word"]
        return self._lead("word_topic_histogram")

    def seeded_counts(self):
        # The first shard's GPU holds the summed B: only the seeded cells cross.
        return self._lead("seeded_counts")

    def _accumulate(self):
        self._lead("accumulate_word_topic")

    def averaged_word_topic(self, divisor):
        return self._lead("accumulated", divisor)

    def release(self):
        # Priors not yet sent have nothing left to sample with.
        self._pending_priors = None
        self._updates = None
        self._fetched = {}
        super().release()
