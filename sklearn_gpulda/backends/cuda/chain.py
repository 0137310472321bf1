"""What the CUDA samplers share: their GPU, the memory check before allocating, the running sum
of the word-topic counts kept on the device, counting distinct values there, and the learned
priors' fixed points."""

from contextlib import contextmanager

import numpy as np

from ..._runtime.device import free_device_bytes
from ..base import normalised_rows
from . import counts, model_kernels, prior_kernels, process_memory
from .resident_priors import ResidentPriors
from .sparse.hybrid_table import HybridTable
from .transfer import topic_major_to_host


def decode_keys(keys):
    """``(topic, count)`` host arrays (int64, float64) of A's keys ``(topic << 32) | float
    bits of the count`` (``cuda/counts.cu``, ``a_entry_keys``)."""
    topic = (keys >> np.uint64(32)).astype(np.int64)
    count = (keys & np.uint64(0xFFFFFFFF)).astype(np.uint32).view(np.float32)
    return topic, count.astype(np.float64)


class StageClock:
    """CUDA events between the stages of one sweep of a profiled sampler (its ``profile``
    option); a clock that is off records nothing and leaves ``stage_ms`` as it was.

    Parameters
    ----------
    cp : module
        CuPy.
    names : tuple of str
        The stages, in order: :meth:`mark` is called once at the end of each.
    on : bool
        Whether to record.
    """

    def __init__(self, cp, names, on):
        self.cp, self.names = cp, names
        self.events = [cp.cuda.Event() for _ in range(len(names) + 1)] if on else None
        self.ended = 0
        if self.events:
            self.events[0].record()

    def mark(self):
        """The current stage ends here (on the current stream)."""
        if self.events:
            self.ended += 1
            self.events[self.ended].record()

    def stage_ms(self, previous):
        """Milliseconds of each stage once the last has ended; ``previous`` where off."""
        if not self.events:
            return previous
        self.events[-1].synchronize()
        pairs = zip(self.names, self.events, self.events[1:])
        return {name: self.cp.cuda.get_elapsed_time(a, b) for name, a, b in pairs}


class CudaChain(ResidentPriors):
    """Mixin of :class:`~sklearn_gpulda.backends.base.Sampler` subclasses that live on one GPU.

    A subclass provides ``estimate_bytes``, ``_memory_message`` (if it calls ``_check_memory``),
    ``_word_major_device()`` (the current word-topic counts as a (V', K) device array) and
    ``_host_rows()`` (the device row of each of the caller's words, or None for the identity).

    Attributes
    ----------
    cp : module
        CuPy, imported when the chain is made, so that this module imports without it.
    gpu : int
        Ordinal of the chain's GPU among the visible ones.
    """

    def _attach(self, device):
        # Imported here, after the sampler has checked its arguments, so that a bad n_topics is
        # reported as such on a machine without CuPy.
        import cupy

        self.cp = cupy
        self.gpu = device.index
        self._sum = None

    def _sm_count(self):
        """Streaming multiprocessors of the chain's GPU (grids of grid-strided kernels)."""
        n_sm = getattr(self, "_n_sm", None)
        if n_sm is None:
            props = self.cp.cuda.runtime.getDeviceProperties(self.gpu)
            n_sm = self._n_sm = int(props["multiProcessorCount"])
        return n_sm

    def device_context(self):
        """The chain's GPU as a CuPy device; entered (``with chain.device_context():``), it is the
        current one, where the chain's arrays are made and its kernels queued."""
        return self.cp.cuda.Device(self.gpu)

    def synchronize(self):
        # On the legacy default stream (a plain fit), the whole device, as always. A fit on a
        # stream of its own (choose_n_components runs several at once) waits for that stream
        # only: every kernel of the chain is queued on it, and a streamed chain's own streams
        # are joined into it (ChunkStream.run), so the fit does not wait for the others.
        with self.device_context() as device:
            stream = self.cp.cuda.get_current_stream()
            if stream.ptr == 0:
                device.synchronize()
            else:
                stream.synchronize()

    def _written_in_place(self, array, values):
        """``values`` (host) on the chain's GPU in ``array``, by a copy queued on the current
        stream, where the sweeps run, so that kernels queued before read the old values and
        every later one the new, and a sweep captured in a CUDA graph, which holds the address,
        reads them on its next replay; a new array where ``array`` is None. (The stream is
        named: CuPy may otherwise copy on the legacy default stream, which a non-blocking
        current stream's kernels are not ordered with.)"""
        if array is None:
            return self.cp.asarray(values)
        array.set(values, stream=self.cp.cuda.get_current_stream())
        return array

    #: Whether B is stored hybrid (the sparse sampler's property says so for its chain).
    hybrid = False

    def learn_alpha(self, alpha, table, rest, length, n_length):
        # On the chain's GPU, the host's bits (cuda/priors.cu).
        with self.device_context():
            return prior_kernels.alpha_fixed_point(self.cp, alpha, table, rest, length, n_length)

    def learn_beta(self, beta, count, n_cells, topic_totals, n_words, cells=None,
                   cell_counts=None):
        if cells is not None:  # a matrix prior's seeded cells: on the host
            return super().learn_beta(beta, count, n_cells, topic_totals, n_words, cells,
                                      cell_counts)
        with self.device_context():
            return prior_kernels.beta_fixed_point(self.cp, beta, count, n_cells, topic_totals,
                                                  n_words)

    #: ``(stem, name)`` of kernels a chain with a budget loads before it measures what the
    #: process holds outside CuPy's pool (:mod:`.process_memory`): their modules are then
    #: counted, and the largest local memory per thread among them is planned for. A subclass
    #: names those of its engine (one per module, and every kernel with local arrays).
    budget_kernels = (("counts", "column_partials"), ("model", "accumulate_sum"),
                      ("priors", "alpha_fixed_point"))

    def _fixed_bytes(self):
        """What a budget gives up before any array on the chain's GPU (context, modules, local
        memory, headroom: :attr:`.process_memory.ProcessMemory.fixed`), measured at the first
        ask after each release of the chain."""
        fixed = getattr(self, "_fixed", None)
        if fixed is None:
            with self.device_context():
                fixed = self._fixed = process_memory.measure(self.cp, self.budget_kernels).fixed
        return fixed

    def _cap_pool(self):
        """Where the chain has a budget, cap CuPy's pool on its GPU at what the budget leaves it
        (:class:`.process_memory.PoolCaps`) until :meth:`release`: the pool's cached blocks
        count against the budget too, and capped, the pool hands them back rather than outgrow
        it. Called by a load once its plan is accepted."""
        limit = getattr(self, "max_device_memory", None)
        if limit is None or getattr(self, "_let_go_pool", None) is not None:
            return
        with self.device_context():
            self._let_go_pool = process_memory.POOL_CAPS.hold(
                self.cp.get_default_memory_pool(), self.cp.cuda.Device().id,
                int(limit) - self._fixed_bytes())

    def _memory_budget(self):
        """Device bytes the chain may still allocate: what the GPU has free or, where the
        sampler's ``max_device_memory`` is set, that budget for the whole process less what
        the process holds (:func:`.process_memory.chain_room`): outside CuPy's pool, and every
        array in it, the chain's own included."""
        free, _ = free_device_bytes(self.cp)
        limit = getattr(self, "max_device_memory", None)
        if limit is None:
            return free
        used = self.cp.get_default_memory_pool().used_bytes()
        return process_memory.chain_room(limit, free, self._fixed_bytes(), used)

    def _room(self):
        """Device bytes the chain may still allocate (:meth:`_memory_budget`), less the sweeps'
        buffers a reader gave back, which the next sweep takes again."""
        return self._memory_budget() - self._shed_bytes()

    def fits(self, corpus):
        """Whether a chain on ``corpus`` fits the memory it may use (:meth:`_check_memory`'s
        test, asked before anything is allocated)."""
        with self.device_context():
            return self.estimate_bytes(corpus)[1] <= self._memory_budget()

    def _check_memory(self, corpus):
        """Raise MemoryError, before allocating, when a chain on ``corpus`` would not fit."""
        steady, peak = self.estimate_bytes(corpus)
        budget = self._memory_budget()
        if peak > budget:
            _, total = free_device_bytes(self.cp)
            raise MemoryError(self._memory_message(corpus, steady, peak, budget, total))

    # -- averaging on the device ----------------------------------------------------------------
    def _accumulate(self):
        cp = self.cp
        with self.device_context():
            if self.hybrid:
                return self._accumulate_hybrid()
            table = self._word_major_device()
            if self._sum is None:
                self._check_averaging_room(table.size * 8)
            if table.dtype == cp.float32 and table.flags.c_contiguous:
                # A kernel (model_kernels): the same sums, with no kernel compiled at run time.
                self._sum = model_kernels.accumulate(table, self._sum)
            elif self._sum is None:
                self._sum = table.astype(cp.float64)
            else:
                self._sum += table

    def _check_averaging_room(self, need):
        """Raise MemoryError when averaging's next ``need`` bytes do not fit (:meth:`_room`)."""
        room = self._room()
        if need > room:
            raise MemoryError(
                f"averaging the word-topic counts needs {need / 2**30:.2f} GiB more on GPU "
                f"{self.gpu} for its float64 running sum, and {max(room, 0) / 2**30:.2f} GiB "
                "is left within the chain's device memory; use n_averaged_sweeps=0 or raise "
                "max_device_memory")

    def _shed_sweep_buffers(self):
        """Free what only sweeps use before a reader makes its scratch (a streamed chain's
        second B and device slots; nothing here)."""

    def _shed_bytes(self):
        """Bytes :meth:`_shed_sweep_buffers` gave back that the next sweep takes again."""
        return 0

    @contextmanager
    def _reading(self):
        """The chain's device, with the sweeps' buffers given back first: every reader of the
        word-topic side that makes scratch of the model's size enters this."""
        with self.device_context():
            self._shed_sweep_buffers()
            yield

    def topic_word_components(self, dtype=np.float64):
        # The division, the prior and the conversion on the device, then one copy of each
        # block of topics into its place (transfer.py).
        # A matrix prior's cells are added on the host in float64 before the conversion, as the
        # NumPy engine adds them: ``(B + beta) + extra``.
        cells = self.beta_cells
        with self._reading():
            if self.n_accumulated:
                table, divisor = self._sum_table(), self.n_accumulated
            else:
                table, divisor = self._word_major_device(), None
            out = topic_major_to_host(self.cp, table, self._host_rows(), divisor=divisor,
                                      add=self.beta,
                                      dtype=dtype if cells is None else np.float64)
        if cells is None:
            return out
        return cells.add_to_components(out).astype(dtype, copy=False)

    def word_topic_statistics(self):
        # On the device, in the caller's word order: online learning blends it into a model
        # kept there, so nothing of size K x V crosses to the host per mini-batch. The same
        # numbers as the host's (the division is the same IEEE operation).
        cp = self.cp
        with self._reading():
            if self.n_accumulated:
                table = self._sum_table()
                table = (table.dense() if isinstance(table, HybridTable) else table)
                table = table / self.n_accumulated
            else:
                table = self._word_major_device()
                table = (table.dense() if isinstance(table, HybridTable)
                         else table.astype(cp.float64))
            rows = self._host_rows()
            if rows is not None:
                table = table[rows]
            return cp.ascontiguousarray(table.T)

    def _fixed_bhat(self, components, rows=None, row_sums=None):
        """Device float32 ``Bhat`` (V' x K) of ``components`` (K x V, host or device): rows
        normalised in float64 on the device (by ``row_sums`` where given, else their own sums),
        transposed, words in device order (``rows[r]`` is the caller's word at device row r, or
        None for the identity)."""
        cp = self.cp
        bhat = normalised_rows(cp, components, row_sums).T
        if rows is not None:
            bhat = bhat[cp.asarray(rows)]
        return cp.ascontiguousarray(bhat, dtype=cp.float32)

    def averaged_word_topic(self, divisor):
        with self._reading():
            return topic_major_to_host(self.cp, self._sum_table(), self._host_rows(),
                                       divisor=divisor)

    def _sum_table(self):
        """Averaging's running sum as a word-major table (an array, or a HybridTable)."""
        return self._sum.table() if hasattr(self._sum, "table") else self._sum

    def _accumulate_hybrid(self):
        """Averaging for a sampler whose ``hybrid`` property is True (it provides
        ``_hybrid_parts``)."""
        from .sparse.hybrid import HybridSum

        dense, rare = self._hybrid_parts()
        if self._sum is None:
            self._sum = HybridSum(self.cp, self.words.n_words, self.n_topics)
        self._sum.add(dense, rare, self._check_averaging_room)

    # -- histograms -------------------------------------------------------------------------------
    def _topic_count_pairs(self, keys):
        """``(topic, count, n)`` host arrays from device keys ``(topic << 32) | float bits``."""
        cp = self.cp
        unique, n = cp.unique(keys, return_counts=True)
        return decode_keys(unique.get()) + (n.get().astype(np.int64),)

    def _value_counts(self, values):
        """Distinct non-zero values of a float32 device array and how many cells hold each,
        in increasing value order.

        Integer counts are binned by a kernel (``counts.value_histogram``) rather than sorted:
        sorting the non-zeros of a (V, K) table at large K would dominate every prior update.
        The values the bins cannot hold (large or fractional ones) are sorted; for
        integer counts there are fewer than n_tokens / VALUE_BINS of them. Where there are
        more (weighted tokens), every non-zero is sorted, as before.
        """
        cp = self.cp
        corpus = self.corpus
        if corpus is not None and corpus.integral:
            capacity = corpus.n_tokens // counts.VALUE_BINS + 1
            table, overflow, n_over = counts.value_histogram(values, counts.VALUE_BINS,
                                                             capacity, self._sm_count())
            if n_over <= capacity:
                small = np.flatnonzero(table)
                # Few (as above): sorted on the host, where CuPy's unique would compile.
                big, n_big = np.unique(overflow[:n_over].get(), return_counts=True)
                value = np.concatenate([small.astype(np.float64), big.astype(np.float64)])
                n = np.concatenate([table[small].astype(np.int64), n_big.astype(np.int64)])
                order = np.argsort(value, kind="stable")
                return value[order], n[order]
        unique, n = cp.unique(values[values != 0], return_counts=True)
        return unique.get().astype(np.float64), n.get().astype(np.int64)

    def word_topic_histogram(self):
        """Distinct non-zero counts of B with their numbers of cells, and the topic totals; B
        comes word-major from the sampler's ``_word_major_device``."""
        self._require()
        with self._reading():
            if self.hybrid:
                return self._hybrid_histogram()
            B = self._word_major_device()
            count, n_cells = self._value_counts(B.ravel())
            totals = self._host_topic_totals(B)
        return count, n_cells, totals

    def _host_topic_totals(self, B):
        """The topic totals of the word-major table ``B`` on the host, float64: the chain's
        exact totals on the device (``_topic_totals_device``) where it keeps them, else B's
        column sums."""
        totals = self._topic_totals_device()
        if totals is not None:
            return totals.get().astype(np.float64)
        return B.sum(axis=0, dtype=self.cp.float64).get()

    def _hybrid_histogram(self):
        """:meth:`word_topic_histogram` of a hybrid B: the dense rows' values and the rare
        slots' counts binned apart and merged; the totals are the chain's (integer sums)."""
        from .sparse.hybrid_table import slot_counts

        dense, rare = self._hybrid_parts()
        found = [self._value_counts(dense.ravel()),
                 self._value_counts(slot_counts(self.cp, rare.slots))]
        value = np.concatenate([v for v, _ in found])
        n = np.concatenate([c for _, c in found])
        unique, inverse = np.unique(value, return_inverse=True)
        n_cells = np.bincount(inverse, weights=n, minlength=unique.size).astype(np.int64)
        return unique, n_cells, self.words.totals.get()

    def release(self, return_cache=True):
        """Free the chain's device arrays and, unless ``return_cache`` is False (a chain about
        to load again, whose new arrays reuse the blocks), return CuPy's cached blocks to the
        driver."""
        let_go, self._let_go_pool = getattr(self, "_let_go_pool", None), None
        try:
            self._sum = None
            self._release_state()
            super().release()
        finally:
            # The pool's cap goes with the chain's arrays, even where freeing them failed.
            if let_go is not None:
                with self.device_context():
                    let_go()
        # Measured again at the next ask: the context and the modules may have grown since.
        self._fixed = None
        if not return_cache:
            return
        try:
            with self.device_context():  # the chain's GPU's pool, whichever GPU is current
                self.cp.get_default_memory_pool().free_all_blocks()
        except Exception:  # noqa: BLE001 -- freeing cached blocks is best effort
            pass
