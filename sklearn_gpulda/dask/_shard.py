"""What a Dask worker keeps between sweeps: one shard of the corpus and its part of the chain.

A :class:`Shard` lives on a worker as a Dask actor. It holds a contiguous range of the corpus's
documents as tokens, each token keyed by its canonical index in the whole corpus
(``token_offset``), so it draws exactly the numbers a single process draws for those tokens.
After each E-step it counts its tokens' part of the word-topic matrix and hands it back as the
non-zero cells only; the driver sums the parts and sends the total back, its non-zero cells
again, from which every shard builds the same sampling tables (:mod:`sklearn_gpulda.dask.
_sampler`). The chain is an engine's own, made for data-parallel training and driven through
its public methods: the NumPy sampler on a CPU worker, the multi-GPU engine's device shard on a
GPU worker. GPU shards of one host, one per GPU, instead sum B among themselves over NCCL (the
whole table; across hosts, where asked for, the cells each changed), and run whole runs of sweeps
in one call (:meth:`Shard.sweeps_summed`), with the prior updates due in them
(:mod:`._rank_priors`).

Nothing here imports Dask: the class is plain Python, and Dask makes it an actor.
"""

import numpy as np
import scipy.sparse as sp
from sklearn.utils import check_array
from sklearn.utils.validation import check_non_negative

from .._input.corpus import tokens
from ..backends.numpy.sampler import NumpySampler
from ._wire import cell_dtype


def validated_block(block, n_words):
    """A row block of the count matrix as a CSR matrix of float64 or float32, with the checks
    the estimator applies to a whole matrix (numeric, finite, non-negative, ``n_words``
    columns)."""
    X = check_array(block, accept_sparse="csr", dtype=[np.float64, np.float32])
    if X.shape[1] != n_words:
        raise ValueError(f"a block of X has {X.shape[1]} columns, expected {n_words}")
    check_non_negative(X, "sklearn_gpulda.dask.LatentDirichletAllocation.fit")
    return sp.csr_matrix(X)


def shard_chain(engine, n_topics, alpha, beta, seed, n_jobs=None, rule="sparse"):
    """The engine's data-parallel chain a shard drives: ``engine`` 'cpu' (the NumPy sampler,
    ``n_jobs`` threads, ``rule``) or 'cuda' (the multi-GPU engine's device shard, the sparse
    CUDA sampler, on the worker's first visible GPU)."""
    if engine == "cpu":
        # Threads, not processes: Dask's worker processes are daemons, which may not start
        # processes, and several shards may share one worker process.
        return NumpySampler(n_topics, alpha, beta, seed, n_jobs=n_jobs, rule=rule,
                            worker_processes=False, data_parallel=True)
    if engine != "cuda" or rule != "sparse":
        raise ValueError(f"no shard chain for engine={engine!r}, rule={rule!r}")
    from .._runtime.device import resolve_device
    from ..backends.cuda.multi_gpu.shard import DeviceShard  # needs CuPy: GPU workers only

    # A dask-cuda worker sees its own GPU first (CUDA_VISIBLE_DEVICES); others share GPU 0.
    return DeviceShard(n_topics, alpha, beta, seed, resolve_device("cuda"))


class Shard:
    """One shard's chain on a worker (made by the driver as a Dask actor).

    The shard holds an engine's data-parallel chain (:func:`shard_chain`) and drives it through
    its public methods only: the methods here are what the driver calls, and their arguments
    and results are what travels (:mod:`._wire`).

    Parameters
    ----------
    block : sparse matrix or ndarray
        Validated counts of the shard's documents.
    n_topics, alpha, beta, seed, n_jobs, rule
        As :class:`~sklearn_gpulda.backends.numpy.sampler.NumpySampler`.
    engine : {'cpu', 'cuda'}
        Where the shard samples (:func:`shard_chain`).
    beta_cells : CellPrior or None, default=None
        The seeded cells of a matrix topic-word prior
        (:class:`~sklearn_gpulda.backends.priors.CellPrior`): the chain samples with them
        against the summed B, which holds the counts alone.
    """

    def __init__(self, block, n_topics, alpha, beta, seed, n_jobs=None, rule="sparse",
                 engine="cpu", beta_cells=None):
        self.corpus = tokens(sp.csr_matrix(block))
        self.engine = engine
        self.chain = shard_chain(engine, n_topics, alpha, beta, seed, n_jobs, rule)
        if beta_cells is not None:
            # Before the layout: a GPU chain places the cells in its rows when it loads.
            self.chain.set_beta_cells(beta_cells)
        self._cell_dtype = cell_dtype(self.corpus.n_words, n_topics)
        # Iterations done; None until init_topics. Dask may quietly make an actor anew on
        # another worker when its worker dies: the check in sweep turns that into an error
        # instead of a shard that has forgotten its topics.
        self.iteration = None
        self._rank = None  # the NCCL rank summing B among the GPU workers, if they do
        self._n_ranks = self._flags = None
        self._exchange = None  # summing B by changed cells instead of NCCL's all-reduce
        self._previous = None  # B before the sweep, where sweeps_summed counts changed cells

    def summary(self):
        """``(n_tokens, total_weight, doc_lengths)`` of the shard."""
        c = self.corpus
        return c.n_tokens, c.total_weight, c.doc_lengths()

    def word_frequencies(self):
        return self.corpus.word_frequencies()

    def prepare(self, offset, word_frequencies=None, exchange_ranks=None):
        """Lay the shard's tokens out, once every shard has counted its tokens; before
        :meth:`init_topics`.

        Parameters
        ----------
        offset : int
            Canonical index of the shard's first token.
        word_frequencies : ndarray, optional
            The whole corpus's, for GPU shards whose B are summed in place: every shard then
            relabels its words alike, so that their B have the same rows.
        exchange_ranks : int, optional
            The number of shards, where they will sum B by changed cells
            (:meth:`join_all_reduce` with ``exchange='changes'``): the memory plan then leaves
            room for the exchange's buffers.
        """
        self.chain.token_offset = int(offset)
        if word_frequencies is not None:
            self.chain.word_frequencies = word_frequencies
        if exchange_ranks:
            from ..backends.cuda.multi_gpu.change_exchange import buffer_bytes

            n_cells = self.corpus.n_words * self.chain.n_topics
            self.chain.exchange_bytes = buffer_bytes(n_cells, int(exchange_ranks))
        self.chain.load(self.corpus)

    # -- summing B among GPU workers with NCCL ---------------------------------------------------
    def gpu_identity(self):
        """``(host, PCI bus id)`` of the shard's GPU, or None for a CPU shard or without NCCL."""
        from ..backends.cuda.multi_gpu.all_reduce import gpu_identity, nccl_module

        if self.engine != "cuda" or nccl_module() is None:
            return None
        with self.chain.device_context():
            return gpu_identity(self.chain.cp)

    def nccl_unique_id(self):
        from ..backends.cuda.multi_gpu.all_reduce import nccl_unique_id

        return nccl_unique_id()

    def join_all_reduce(self, n_ranks, unique_id, rank, exchange="ring", capacity=None):
        """Join the communicator of the GPU shards (every shard calls this at once).

        Parameters
        ----------
        n_ranks, unique_id, rank
            As :class:`~sklearn_gpulda.backends.cuda.multi_gpu.all_reduce.NcclRank`.
        exchange : {'ring', 'changes'}, default='ring'
            How B is summed every sweep: NCCL's all-reduce of the whole table, or the cells each
            shard changed, gathered by all
            (:class:`~sklearn_gpulda.backends.cuda.multi_gpu.change_exchange.ChangeExchange`,
            for shards on several hosts).
        capacity : int, optional
            'changes' only: the longest list of changes gathered (default V K / (4 N):
            :func:`~sklearn_gpulda.backends.cuda.multi_gpu.change_exchange.list_capacity`).
        """
        from ..backends.cuda.multi_gpu.all_reduce import NcclRank

        if exchange not in ("ring", "changes"):
            raise ValueError(f"exchange must be 'ring' or 'changes', got {exchange!r}")
        from ._rank_priors import Flags

        self._rank = NcclRank(self.chain.cp, self.chain.gpu, n_ranks, unique_id, rank)
        self._n_ranks = int(n_ranks)
        with self.chain.device_context():
            self._flags = Flags(self.chain.cp, n_ranks)  # for the prior updates of the runs
        self._exchange = None
        if exchange == "changes":
            from ..backends.cuda.multi_gpu.change_exchange import ChangeExchange

            # Its buffers now, after the communicator: a rank short of memory fails here,
            # where no collective waits for it (in a sweep its peers would wait forever).
            with self.chain.device_context():
                self._exchange = ChangeExchange(self.chain.cp, self._rank, n_ranks,
                                                self.chain.word_topic_buffer().size, capacity)

    def _summed(self, first=False):
        buffer = self.chain.word_topic_buffer()
        with self.chain.device_context():
            if self._exchange is None:
                self._rank.all_reduce(buffer)
            elif first:
                self._exchange.start(buffer)
            else:
                self._exchange.sum(buffer)
        self.chain.finish_reduction()

    def integral(self):
        """Whether the shard's counts are integers (unit tokens), which the exchange by changed
        cells needs to sum exactly."""
        return self.corpus.integral

    def exchange_record(self):
        """Under ``exchange='changes'``, per sum since the initial topics: ``sent``, the bytes
        this shard sent, and ``lists``, the longest list of changes gathered (None where the
        whole table was summed); None under the ring."""
        if self._exchange is None:
            return None
        return dict(sent=list(self._exchange.sent), lists=list(self._exchange.lists))

    def init_topics_summed(self):
        """Initial topics, the shard's part of B summed with the others' in place."""
        self.chain.init_topics()
        self._summed(first=True)
        self.iteration = 0

    def sweep_summed(self, iteration):
        """One E-step and the shard's M-step, B summed in place; returns nothing."""
        self._check_iteration(iteration)
        self.chain.sweep(iteration)
        self._summed()
        self.iteration = iteration

    def sweeps_summed(self, first, last, accumulate_from=None, count_changes=False, priors=None,
                      fetch=(), updates=None):
        """Sweeps ``first`` to ``last`` as :meth:`sweep_summed` runs each (E-step, the shard's
        M-step, B summed in place with the other shards), in one call: a run of the fit loop
        (:meth:`~sklearn_gpulda.backends.base.Sampler.sweeps`). Every shard runs the same
        sweeps, so each sweep's sum meets its peers' in the same order.

        Parameters
        ----------
        first, last : int
            The run's sweeps, both included; ``first`` follows the shard's last sweep.
        accumulate_from : int, optional
            From this sweep on, the summed B is added to the averaging's running sum here (the
            driver asks the first shard only, whose sum it reads).
        count_changes : bool, default=False
            Also count, per sweep, the cells of the summed B that the sweep changed (a copy of
            B and a comparison on the GPU each sweep: for measuring what a sweep would send as
            changes rather than as the whole table).
        priors : tuple (alpha, beta), optional
            Priors to sample the run with, set before its first sweep (a prior update the
            driver made after the last run, sent with this call rather than in one of its own).
        fetch : tuple of str, default=()
            What the driver reads of the chain after the run, computed at its end and returned
            with it: 'doc' the shard's :meth:`doc_topic_histogram`, 'word' the (summed)
            :meth:`word_topic_histogram`.
        updates : sklearn_gpulda._fitting.batch.PriorUpdates, optional
            The fit's prior updates, made here after every sweep they are due (after the
            sweep's accumulation, where the run accumulates it, as the fit loop would), every
            shard at once (:mod:`._rank_priors`).

        Returns
        -------
        dict
            'changes': the changed cells of each sweep with ``count_changes``, else None;
            'priors': ``(alpha, beta)`` after the run where ``updates`` is given;
            'averaging_failed': ``(sweep, message)`` where an accumulation ran out of memory
            (the run went on without accumulating), else None; and one entry per name in
            ``fetch``.
        """
        first, last = int(first), int(last)
        self._check_iteration(first)
        if priors is not None:
            self.set_priors(*priors)
        changed = [] if count_changes else None
        failed = None
        for iteration in range(first, last + 1):
            if count_changes:
                self._keep_previous()
            self.chain.sweep(iteration)
            self._summed()
            self.iteration = iteration
            if accumulate_from is not None and iteration >= accumulate_from and failed is None:
                try:
                    self.chain.accumulate_word_topic()
                except MemoryError as exc:
                    # The other shards go on to the next sweep's sum and would wait for this
                    # one for ever: the run goes on unaveraged, in step with them, and the
                    # driver hears of it with the run's answer.
                    failed = (iteration, str(exc))
            if count_changes:
                changed.append(self._changed_cells())
            if updates is not None and updates.due(iteration):
                from ._rank_priors import update_on_ranks

                update_on_ranks(updates, self.chain, self._rank, self._n_ranks, self._flags)
        out = {"changes": changed, "averaging_failed": failed}
        if updates is not None:
            out["priors"] = (np.array(self.chain.alpha), float(self.chain.beta))
        if "doc" in fetch:
            out["doc"] = self.doc_topic_histogram()
        if "word" in fetch:
            out["word"] = self.word_topic_histogram()
        return out

    def _keep_previous(self):
        """Copy the summed B aside (on the GPU) before a sweep, for :meth:`_changed_cells`."""
        chain = self.chain
        with chain.device_context():
            b = chain.word_topic_buffer()
            if self._previous is None or self._previous.shape != b.shape:
                self._previous = chain.cp.empty_like(b)
            self._previous[...] = b

    def _changed_cells(self):
        """Cells of the summed B that differ from the copy :meth:`_keep_previous` made."""
        chain = self.chain
        with chain.device_context():
            return int(chain.cp.count_nonzero(chain.word_topic_buffer() != self._previous))

    def word_topic_cells(self):
        """The non-zero cells of the shard's B (the corpus's, once summed in place) as they
        travel: cell ``word * K + topic`` (:func:`~._wire.cell_dtype`), counts float32."""
        return self.chain.word_topic_cells(self._cell_dtype)

    def word_topic_histogram(self):
        return self.chain.word_topic_histogram()

    def accumulate_word_topic(self):
        self.chain.accumulate_word_topic()

    def accumulated(self, divisor):
        return self.chain.averaged_word_topic(divisor)

    def discard_accumulated(self):
        self.chain.discard_accumulated()

    def _check_iteration(self, iteration):
        if self.iteration != iteration - 1:
            raise RuntimeError(
                f"this shard was asked for sweep {iteration} after sweep {self.iteration}: it "
                "was made anew (its worker was lost), so its chain is gone")

    def init_topics(self):
        """Initial topics; returns the shard's part of B as (cell indices, counts)."""
        self.chain.init_topics()
        self.iteration = 0
        return self.word_topic_cells()

    def sweep(self, iteration):
        """One E-step and the shard's M-step; returns its part of B as :meth:`init_topics`."""
        self._check_iteration(iteration)
        self.chain.sweep(iteration)
        self.iteration = iteration
        return self.word_topic_cells()

    def set_word_topic(self, cells, counts):
        self.chain.set_word_topic(cells, counts)

    def set_priors(self, alpha, beta):
        self.chain.set_priors(alpha=alpha, beta=beta)

    def seeded_counts(self):
        """B at a matrix prior's seeded cells (the corpus's, once summed), float64."""
        return self.chain.seeded_counts()

    def doc_topic_histogram(self):
        return self.chain.doc_topic_histogram()

    def log_likelihood(self):
        return self.chain.log_likelihood()

    def topics(self):
        return self.chain.topics()

    def doc_topic_counts(self):
        return self.chain.doc_topic_counts()

    def release(self):
        self._previous = self._flags = None
        if self._exchange is not None:
            self._exchange.close()
            self._exchange = None
        if self._rank is not None:
            self._rank.close()
            self._rank = None
        self.chain.release()
