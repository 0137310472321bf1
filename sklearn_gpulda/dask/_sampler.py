"""The driver's side of a fit spread over Dask workers: a :class:`~sklearn_gpulda.backends.base.
Sampler` whose tokens live in :class:`~._shard.Shard` actors.

The fit loop (:func:`sklearn_gpulda._fitting.loop.fit_corpus`) drives it like any sampler. Each
E-step runs on every shard at once; the shards' parts of the word-topic matrix B are summed here and
the total is sent back to every shard, which builds the sampling tables from it. Counts of
integer tokens are integers, whose sums do not depend on their order, and every token draws
the number it draws in one process, so the chain is the single-process chain, bit for bit,
whatever the number of workers. The priors are learnt from histograms merged the same way.

Cost per sweep, for S shards, a vocabulary of V words and K topics: each shard sends its non-zero
cells of B (8 bytes each while V K < 2^32, else 12; at most min(V K, its tokens) of them) and
receives the non-zero cells of the total, as many bytes each. The driver keeps the total as cells
too, and makes the dense V x K table only for what reads it (beta's histogram, the model).
GPU workers that sum B among themselves instead drive their shards through
:class:`~._nccl_sampler.NcclDaskSampler`.
"""

import asyncio
import concurrent.futures
import time

import numpy as np

from ..backends.base import Sampler
from ..backends.numpy.row_tasks import nonzero_histogram, transposed
from ..backends.numpy.threads import ThreadTeam
from ..backends.prior_learning import merge_histograms
from ..backends.random import STREAM_INIT, STREAM_SAMPLE
from ._wire import cell_dtype, dense_word_topic

#: Seconds a shard's cancelled or broken call waits for the scheduler to report a lost worker.
LOSS_GRACE_S = 10.0


def _could_be_worker_loss(exc):
    """Whether a shard call's error, or the error it came from, is of the kinds a dying worker
    causes: a cancelled future (distributed's FutureCancelledError is a concurrent.futures
    one), a closed connection (an OSError, as distributed's and tornado's are), a killed
    worker."""
    from distributed import KilledWorker  # only a Dask fit, with distributed there, gets here

    kinds = (concurrent.futures.CancelledError, asyncio.CancelledError, OSError, KilledWorker)
    return any(isinstance(e, kinds) for e in (exc, exc.__cause__, exc.__context__)
               if e is not None)


def _telling(exc, futures, grace_s=5.0):
    """The error of a failed call to report: ``exc``, or where it only says that another
    shard's prior update failed (:class:`~._rank_priors.PeerFailed`: every shard raises at
    once), the failed shard's own, waited for up to ``grace_s`` seconds in all."""
    from ._rank_priors import PeerFailed

    if not isinstance(exc, PeerFailed):
        return exc
    deadline = time.monotonic() + grace_s
    for future in futures:
        try:
            future.result(timeout=max(0.0, deadline - time.monotonic()))
        except PeerFailed:
            continue
        except Exception as other:  # noqa: BLE001 -- a timeout keeps exc; an error tells more
            if not isinstance(other, (TimeoutError, asyncio.TimeoutError)):
                return other
    return exc


class WorkerLost(RuntimeError):
    """A worker holding a shard of the corpus went away during a fit."""


def shard_workers(client, actor_futures):
    """Addresses of the workers that hold the shards' actors, as the scheduler placed them.

    Parameters
    ----------
    client : distributed.Client
    actor_futures : list of distributed.Future
        The futures the actors were made by (``client.submit(..., actor=True)``), finished.

    Returns
    -------
    set of str
        Read once, when the actors are made: a worker of these that leaves the cluster has
        taken shards with it, even where Dask makes their actors anew elsewhere.
    """
    return {address for where in client.who_has(actor_futures).values() for address in where}


class ShardedCorpus:
    """What the fit loop reads of a corpus whose tokens are held by shards.

    Parameters
    ----------
    n_words : int
    summaries : list of (n_tokens, total_weight, doc_lengths)
        One per shard, in document order.
    """

    def __init__(self, n_words, summaries):
        self.n_words = int(n_words)
        self.n_tokens = int(sum(s[0] for s in summaries))
        self._lengths = np.concatenate([np.asarray(s[2], dtype=np.float64) for s in summaries])
        self.n_docs = int(self._lengths.size)
        # The total of the per-document lengths, summed here in one order whatever the shards.
        self.total_weight = float(self._lengths.sum())

    def doc_lengths(self):
        return self._lengths


class DaskSampler(Sampler):
    """A chain whose tokens are spread over Dask actors (see the module's docstring).

    Parameters
    ----------
    shards : list of distributed.Actor
        :class:`~._shard.Shard` actors in document order, their chains made with the same
        ``n_topics``, priors and seed.
    n_topics, alpha, beta, seed, device
        As :class:`~sklearn_gpulda.backends.base.Sampler`.
    check_alive : callable
        Raises :class:`WorkerLost` when a worker holding a shard is gone; called while waiting.
    """

    def __init__(self, shards, n_topics, alpha, beta, seed, device, check_alive):
        super().__init__(n_topics, alpha, beta, seed, device)
        self.shards = list(shards)
        self.check_alive = check_alive
        self._cells = self._counts = None  # the corpus-wide B's non-zero cells, float32 counts
        self._b = None                     # the dense B made from them when read
        self._sum = None
        self._scratch = None               # float64 (V K,), zero between reductions
        # The read-outs of B here are a few V x K passes a fit: one thread.
        self.team = ThreadTeam(1)

    # -- talking to the shards ------------------------------------------------------------------
    def call_all(self, method, *args):
        """Call ``method`` on every shard at once; their results in shard order."""
        return self.call_each(method, [args] * len(self.shards))

    def call_each(self, method, args, shards=None):
        """Call ``method`` on each shard (of ``shards``, by default all) at once with its own
        arguments (a tuple per shard); their results in shard order."""
        shards = self.shards if shards is None else shards
        futures = [getattr(shard, method)(*a) for shard, a in zip(shards, args)]
        results = []
        for future in futures:
            while True:
                try:
                    results.append(future.result(timeout=1.0))
                    break
                except (TimeoutError, asyncio.TimeoutError):
                    self.check_alive()
                except Exception as exc:
                    # A shard's call failed: say so plainly when it is because its worker died.
                    self._check_alive_after(exc)
                    raise _telling(exc, futures) from None
        return results

    def _check_alive_after(self, exc):
        """Raise :class:`WorkerLost` if ``exc`` came from a lost worker. The scheduler can cancel
        a call ("lost dependencies") a moment before it drops the dead worker from its list
        (seen in CI), so after such errors the check is repeated for up to
        :data:`LOSS_GRACE_S` seconds; any other error is checked once."""
        deadline = time.monotonic() + (LOSS_GRACE_S if _could_be_worker_loss(exc) else 0.0)
        while True:
            self.check_alive()
            if time.monotonic() >= deadline:
                return
            time.sleep(0.1)

    def _reduce(self, parts):
        """Sum the shards' parts of B and send the total's non-zero cells back to every shard."""
        self._cells, self._counts = self._sum_parts(parts)
        self._b = None
        self.call_all("set_word_topic", self._cells, self._counts)

    def _sum_parts(self, parts):
        """The non-zero cells of the sum of sparse parts (cells distinct within a part), each
        cell once, in the order of first appearance.

        The parts are added into a dense float64 scratch; then each part's cells are read back
        and cleared, so a cell is emitted by the first part holding it and the scratch is zero
        again, without a pass over all V K cells.
        """
        if len(parts) == 1:
            return parts[0]
        corpus = self._require()
        if self._scratch is None:
            self._scratch = np.zeros(corpus.n_words * self.n_topics, dtype=np.float64)
        scratch = self._scratch
        for cells, counts in parts:
            scratch[cells] += counts
        out_cells, out_counts = [], []
        for cells, _ in parts:
            total = scratch[cells]
            first = total != 0
            out_cells.append(cells[first])
            out_counts.append(total[first].astype(np.float32))
            scratch[cells] = 0.0
        dtype = cell_dtype(corpus.n_words, self.n_topics)
        return np.concatenate(out_cells).astype(dtype), np.concatenate(out_counts)

    # -- the protocol ---------------------------------------------------------------------------
    def estimate_bytes(self, corpus):
        need = 8 * corpus.n_words * self.n_topics
        return need, need

    def load(self, corpus):
        self.corpus = corpus

    def init_topics(self, iteration=0, stream=STREAM_INIT):
        if iteration != 0 or stream != STREAM_INIT:
            raise NotImplementedError("shards draw their initial topics from iteration 0 only")
        self._reduce(self.call_all("init_topics"))

    def set_topics(self, topics):
        raise NotImplementedError("a sharded chain starts from its own initial topics")

    def sweep(self, iteration, stream=STREAM_SAMPLE, sub=0):
        if stream != STREAM_SAMPLE or sub:
            raise NotImplementedError("a sharded chain runs batch sweeps only")
        self._reduce(self.call_all("sweep", int(iteration)))

    def fix_topic_word(self, components, row_sums=None):
        raise NotImplementedError("online learning does not run on a Dask cluster")

    def _priors_changed(self):
        if self.corpus is not None:
            self.call_all("set_priors", self._alpha, self.beta)

    def topics(self):
        return np.concatenate(self.call_all("topics"))

    def _word_major_counts(self):
        """The corpus-wide B (V x K float64), made from its cells when first read."""
        if self._b is None:
            corpus = self._require()
            self._b = dense_word_topic(self._cells, self._counts, corpus.n_words,
                                       self.n_topics, np.float64)
        return self._b

    def word_topic_histogram(self):
        b = self._word_major_counts()
        values, n_cells = nonzero_histogram(self.team, b)
        return values, n_cells, b.sum(axis=0, dtype=np.float64)

    def seeded_counts(self):
        """B at a matrix prior's seeded cells, read here from the summed B the driver holds
        (the one beta's histogram was just read from): the one process's counts, bit for
        bit."""
        cells = self.beta_cells
        return self._word_major_counts()[cells.word, cells.topic].astype(np.float64)

    def topic_word_components(self, dtype=np.float64):
        if self.beta_cells is None:
            return super().topic_word_components(dtype)
        # ``(B + beta) + extra`` in float64, then the model's dtype, as one process adds the
        # seeded cells.
        components = super().topic_word_components(np.float64)
        return self.beta_cells.add_to_components(components).astype(dtype, copy=False)

    def word_topic_counts(self):
        return transposed(self.team, self._word_major_counts())

    def averaged_word_topic(self, divisor):
        return transposed(self.team, self._sum, float(divisor))

    def _accumulate(self):
        # The cells alone: a sum of integers in float64 is the dense sum, bit for bit.
        if self._sum is None:
            corpus = self._require()
            self._sum = np.zeros((corpus.n_words, self.n_topics), dtype=np.float64)
        self._sum.ravel()[self._cells] += self._counts

    def doc_topic_counts(self):
        return np.vstack(self.call_all("doc_topic_counts"))

    def log_likelihood(self):
        # Each shard sums its tokens' terms; the sum of the sums may differ from one process's
        # in the last bits (float addition is not associative). The model does not use it.
        return float(sum(self.call_all("log_likelihood")))

    def doc_topic_histogram(self):
        return merge_histograms(self.call_all("doc_topic_histogram"))

    def release(self):
        super().release()
        self._b = self._sum = self._scratch = self._cells = self._counts = None
