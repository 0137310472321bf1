"""The sparse CUDA backend: ESCA on PDOW chunks (SaberLDA, Li et al., ASPLOS 2017, Sec. 3).

B is dense, word-major (words relabelled by decreasing frequency), float32; Bhat and each word's
W-ary tree are never stored: the block that samples a word builds them in shared memory from B
and the topic totals (``cuda/sample_sparse.cu``). ``doc/performance.md`` has the measurements
behind these choices.

One iteration: for each chunk, sample then rebuild that chunk's A (A rows are private to a
chunk); then B by atomics over every chunk, and the topic totals. Only the E-step needs the
previous B, so when the chunks do not fit the device they are streamed (``streaming.py``, and
``streamed_chain.py`` for the sweeps over them): per chunk, A from its topics, the E-step against
B, and its counts into a second B, which becomes B after the last chunk; the same chain.

A load measures the corpus, asks the memory plan (``memory_plan.py``) once, before anything is
allocated, how to lay it out within the device budget, and carries the answer out: the words
relabelled, the chunks built (resident or streamed), then B stored dense or hybrid.
"""

import contextlib
from dataclasses import dataclass

import numpy as np

from ...._input.layouts import frequency_relabel
from ...._runtime.stages import stage
from ...base import Sampler
from ...random import STREAM_INIT, STREAM_SAMPLE
from .. import counts
from ..chain import CudaChain, StageClock
from ..constants import MAX_TOPICS
from ..doc_topic import DocTopicReading
from ..seeded import DeviceCells
from ..transfer import topic_major_to_host
from . import hybrid, layout_kernels, memory_plan, sample_sparse
from .graph_replay import GraphReplay
from .layout import build_chunks
from .online_batches import OnlineBatchChain
from .streamed_chain import StreamedChain
from .streaming import ChunkStream, evict

#: Device bytes of a load above which the layout's scratch is returned to the driver before the
#: tables are made: below it (a mini-batch) the round trip costs more than the memory is worth.
RETURN_CACHE_BYTES = 1 << 28


@dataclass
class WordSide:
    """The word side of the chain on the device: what every E-step reads besides A."""

    n_topics: int
    n_words: int
    B: object            # (n_dense, K) float32 counts of the first (relabelled) words; V if dense
    totals: object       # (K,) float64 topic totals n[k]
    denom: object        # (K,) float64 n[k] + V beta
    partial: object      # (slices, K) float64 scratch of the totals
    counter: object      # (1,) int32 work-item counter
    alpha: object        # (K,) float32, written in place by each prior update
    beta: float
    beta_word: object    # (1,) float64: beta on the device, written in place by each update
    bhat_fixed: object = None  # (V, K) float32 when the topic-word side is held fixed
    leaf_scratch: object = None  # (grid, K) float32: the large-K sampler's Bhat rows, or None
    b_current: bool = True     # whether B counts the current topics
    rare: object = None        # hybrid.RareRows of words n_dense .. V - 1, or None (all dense)
    prior: object = None       # float32 beta / denom (K) and its tree's levels, for the rare rows
    seeded: object = None      # seeded.DeviceCells of a matrix prior, or None (a scalar prior)

    @property
    def n_dense(self):
        return int(self.B.shape[0])

    def zero(self):
        hybrid.zero(self.B, self.rare)


class CudaSparseSampler(GraphReplay, OnlineBatchChain, StreamedChain, DocTopicReading, CudaChain,
                        Sampler):
    """ESCA on a CUDA GPU (see :class:`~sklearn_gpulda.backends.base.Sampler`).

    Parameters
    ----------
    n_topics, alpha, beta, seed, device
        As :class:`~sklearn_gpulda.backends.base.Sampler`; one GPU.
    max_chunk_tokens : int or None
        Token budget of one PDOW chunk; None puts the whole corpus in one chunk.
    profile : bool
        Record CUDA events around each stage of :meth:`sweep` into ``self.stage_ms``.
    max_device_memory : int or None
        Device bytes the chain may use; None means what the GPU has free. A corpus whose layout
        does not fit is streamed: its chunks stay in pinned host memory and pass through the
        device every sweep (:mod:`.streaming`), with the same chain.
    word_topic_storage : {'dense', 'hybrid', 'auto'}, default='dense'
        How B is stored: a dense (V, K) array, or dense rows for frequent words and small hash
        tables for rare ones (:mod:`.hybrid`; integer counts only). The chain is the same bit for
        bit; 'auto' decides at load (:func:`.memory_plan.table_plan`).
    averaging : {'required', 'optional', 'none'}, default='optional'
        Whether the memory plan keeps room for averaging's running sum (:mod:`.memory_plan`):
        always (a corpus that fits only without it is streamed), where it fits, or not at all.
        Averaging checks its room whatever this says, and raises MemoryError where there is
        none.

    Notes
    -----
    A matrix topic-word prior (:meth:`set_beta_cells`) samples in batch fits, resident or
    streamed, with B stored dense ('auto' storage stays dense; 'hybrid' is refused): its seeded
    cells act as pseudo-counts of B while the kernels read it (:mod:`..seeded`).

    Attributes
    ----------
    token_offset : int
        Canonical index of the loaded corpus's first token (0 for a whole corpus); a shard of a
        larger corpus sets it, so that its tokens draw the numbers they draw in the whole.
    word_frequencies : ndarray or None
        What words are relabelled by (decreasing frequency); None: the loaded corpus's own. The
        shards of a multi-GPU chain set the whole corpus's, so that their B have the same rows.
    """

    #: Runs of sweeps may replay as CUDA graphs (:class:`~.graph_replay.GraphReplay`): this
    #: class only, not its subclasses.
    replays_graphs = True

    def __init__(self, n_topics, alpha, beta, seed, device, max_chunk_tokens=None, profile=False,
                 max_device_memory=None, word_topic_storage="dense", averaging="optional"):
        super().__init__(n_topics, alpha, beta, seed, device)
        self.word_topic_storage = memory_plan.check_storage(word_topic_storage)
        self.averaging = memory_plan.check_averaging(averaging)
        self.averaging_reserved = False
        if not 1 <= self.n_topics <= MAX_TOPICS:
            raise ValueError(
                f"the CUDA engine supports 1 <= n_topics <= {MAX_TOPICS}, got {self.n_topics}"
            )
        self._attach(device)
        self.max_chunk_tokens = max_chunk_tokens
        self.profile = profile
        self.stage_ms = {}
        self.token_offset = 0
        self.word_frequencies = None
        self.max_device_memory = None if max_device_memory is None else int(max_device_memory)
        self.chunks = []
        self._batches = None  # online_batches.OnlineBatchSet of load_online_batches
        self._stream = None   # ChunkStream when the chunks live in host memory
        self._b_next = None   # the B a streamed sweep counts into while sampling reads B
        self.words = None
        self._graphs = None   # sweep_graph.SweepGraphs once a run of sweeps replays graphs
        with self.device_context():
            props = self.cp.cuda.runtime.getDeviceProperties(self.gpu)
            self._n_sm = int(props["multiProcessorCount"])
            smem_sm = int(props["sharedMemPerMultiprocessor"])
            smem_block_max = int(props.get("sharedMemPerBlockOptin", props["sharedMemPerBlock"]))
            max_blocks_sm = int(props.get("maxBlocksPerMultiProcessor", 16))
            regs_sm = int(props.get("regsPerMultiprocessor", 65536))
        self.large_k, self._shape = sample_sparse.launch_shape(
            self.n_topics, self.gpu, self._n_sm, smem_sm, smem_block_max, max_blocks_sm, regs_sm)

    #: Every variant of the draw kernel (:mod:`..process_memory` plans for the largest local
    #: memory among them) and the layout's module.
    budget_kernels = CudaChain.budget_kernels + tuple(
        ("sample_sparse", f"sample_tokens_u16_{form}{large}{hybrid}")
        for form in ("packed", "wide") for large in ("", "_large") for hybrid in ("", "_hybrid")
    ) + (("layout", "word_tokens"),)

    # -- memory ---------------------------------------------------------------------------------
    def estimate_bytes(self, corpus):
        """Device bytes a chain on ``corpus`` holds were it to stay on the device, and its peak
        while building the layout (:func:`.memory_plan.resident_bytes`)."""
        sizes = memory_plan.corpus_sizes(corpus, self._frequencies(corpus))
        settings = self.plan_settings()
        return memory_plan.resident_bytes(sizes, settings, memory_plan.table_plan(sizes, settings),
                                          self._extra_bytes(corpus))

    def _frequencies(self, corpus):
        """What words are relabelled and split by: the set frequencies, or the corpus's."""
        if self.word_frequencies is not None:
            return self.word_frequencies
        return corpus.word_frequencies()

    def plan_settings(self):
        """What the memory plan reads of this chain (its budget as the device stands now)."""
        # A matrix prior's pseudo-counts are added to dense rows only (hash rows hold integers).
        storage = "dense" if self.beta_cells is not None else self.word_topic_storage
        return memory_plan.ChainSettings(
            n_topics=self.n_topics, budget=self._memory_budget(), averaging=self.averaging,
            storage=storage, max_chunk_tokens=self.max_chunk_tokens,
            scratch_bytes=self._leaf_scratch_bytes(),
            shared_frequencies=self.word_frequencies is not None, gpu=self.gpu)

    def _extra_bytes(self, corpus):
        """Device bytes kept beside the chain on ``corpus``: a matrix prior's seeded cells."""
        cells = self.beta_cells
        return 0 if cells is None else DeviceCells.nbytes(cells.n_cells, self.n_topics)

    # -- a matrix topic-word prior --------------------------------------------------------------
    def set_beta_cells(self, cells):
        if cells is not None and self.word_topic_storage == "hybrid":
            raise NotImplementedError("a matrix topic_word_prior needs B stored dense "
                                      "(word_topic_storage='dense' or 'auto')")
        super().set_beta_cells(cells)
        if self.words is not None:
            with self.device_context():
                self.words.seeded = self._device_cells()
                self._priors_changed()

    def _device_cells(self):
        """The seeded cells on the chain's GPU in its row order, or None (a scalar prior)."""
        if self.beta_cells is None:
            return None
        return DeviceCells(self.cp, self.beta_cells, self.new_of_old, self._n_sm)

    def _seeded_b(self):
        """A context in which B holds the seeded cells' pseudo-counts (nothing for a scalar
        prior, or while the topic-word side is fixed and the kernels do not read B)."""
        w = self.words
        if w.seeded is None or w.bhat_fixed is not None:
            return contextlib.nullcontext()
        return w.seeded.seeded(w.B)

    def seeded_counts(self):
        self._require()
        with self._reading():
            dense, _ = self._hybrid_parts()
            return self.words.seeded.counts_at(dense)

    @property
    def hybrid(self):
        """Whether the loaded chain stores B hybrid (dense frequent rows, hashed rare rows)."""
        return self.words is not None and self.words.rare is not None

    def _leaf_scratch_bytes(self):
        """Device bytes of the large-K sampler's global Bhat rows (0 below that K)."""
        return self._shape[0] * self.n_topics * 4 if self.large_k else 0

    # -- the chain ------------------------------------------------------------------------------
    def load(self, corpus):
        cp = self.cp
        with self.device_context():
            # The previous corpus's blocks stay in CuPy's pool for this one's arrays (online
            # learning loads a mini-batch per step); fit's last release returns them.
            self.release(return_cache=False)
            frequencies = self._frequencies(corpus)
            plan = self._load_plan(corpus, frequencies)
            self._cap_pool()
            with stage("load: relabel"):
                self.new_of_old, self.old_of_new = frequency_relabel(frequencies)
            with stage("load: layout"):
                # A streamed chunk moves to host memory as soon as it is built.
                self.chunks = build_chunks(cp, corpus, self.new_of_old, self.n_topics,
                                           plan.chunk_tokens, plan.piece_tokens,
                                           each=evict if plan.streamed else None)
                if plan.streamed:
                    self._stream = ChunkStream(cp, self.chunks)
                self._drop_build_scratch(plan)
            self._make_word_side(corpus, plan)

    def _load_plan(self, corpus, frequencies):
        """How the chain lays ``corpus`` out within its budget (:func:`.memory_plan.load_plan`),
        decided before anything is allocated; ``frequencies`` are what its words are relabelled
        by."""
        with stage("load: plan"):
            sizes = memory_plan.corpus_sizes(corpus, frequencies)
            return memory_plan.load_plan(sizes, self.plan_settings(), self._extra_bytes(corpus))

    def _drop_build_scratch(self, plan):
        """Return the layout's sort scratch to the driver before the large table, so that the
        pool's peak is the larger of the two phases rather than their sum (for a corpus whose
        phases are large enough for that to matter)."""
        if plan.peak_bytes > RETURN_CACHE_BYTES:
            self.cp.get_default_memory_pool().free_all_blocks()

    def _make_word_side(self, corpus, plan):
        """B, its scratch and the priors' tables for the laid out ``corpus``, stored as
        ``plan`` says."""
        cp = self.cp
        self.averaging_reserved = plan.averaging_reserved
        table = plan.table
        k = self.n_topics
        n_dense = table.n_dense
        rare = hybrid.RareRows(cp, n_dense, table.offsets) if table.hybrid else None
        if table.hybrid and self.beta_cells is not None:
            raise NotImplementedError("a matrix topic_word_prior needs B stored dense")
        self.words = WordSide(
            n_topics=k, n_words=corpus.n_words, B=cp.zeros((n_dense, k), dtype=cp.float32),
            totals=cp.zeros(k, dtype=cp.float64), denom=cp.empty(k, dtype=cp.float64),
            partial=cp.empty((max(1, -(-n_dense // counts.ROWS_PER_SLICE)), k),
                             dtype=cp.float64),
            counter=cp.zeros(1, dtype=cp.int32), alpha=None, beta=self.beta,
            beta_word=cp.empty(1, dtype=cp.float64),
            leaf_scratch=(cp.empty((self._shape[0], k), dtype=cp.float32)
                          if self.large_k else None),
            rare=rare,
            prior=cp.empty(hybrid.prior_floats(k), dtype=cp.float32) if table.hybrid else None,
            seeded=self._device_cells(),
        )
        self.corpus = corpus
        self._priors_changed()

    def _priors_changed(self):
        if self.words is None:
            return
        cp = self.cp
        with self.device_context():
            w = self.words
            # Alpha and beta's device word are written in place: a sweep captured in a CUDA
            # graph keeps their addresses (sweep_graph.py).
            w.alpha = self._written_in_place(w.alpha, self.alpha.astype(np.float32))
            w.beta = self.beta
            self._written_in_place(w.beta_word, np.array([self.beta], dtype=np.float64))
            self._denominators()
            alpha_sum = float(self.alpha.sum())
            for ch in self._every_chunk():
                if ch.doc_norm is None:
                    ch.doc_norm = cp.empty_like(ch.doc_weight)
                layout_kernels.document_norms(ch.doc_weight, alpha_sum, ch.doc_norm)

    def init_topics(self, iteration=0, stream=STREAM_INIT):
        self._require()
        self._forget_graphs()
        with self.device_context():
            if self.streamed:
                return self._init_streamed(iteration, stream)
            for ch in self.chunks:
                ch.allocate_state(self.cp)
                sample_sparse.init_topics(self.token_offset + ch.t0, self.n_topics,
                                          self.seed, iteration, stream, ch.z_can)
                counts.gather_topics(ch)
            self._mstep()

    def set_topics(self, topics):
        topics = self._checked_topics(topics)
        self._forget_graphs()
        cp = self.cp
        with self.device_context():
            if self.streamed:
                self._stream.host_topics()  # no copy still writing the host arrays
                for ch in self.chunks:
                    ch.host_z_can[...] = topics[ch.t0 : ch.t1]
                self._mstep()
                return
            for ch in self.chunks:
                ch.allocate_state(cp)
                ch.z_can[...] = cp.asarray(topics[ch.t0 : ch.t1].astype(ch.z.dtype))
                counts.gather_topics(ch)
            self._mstep()

    def fix_topic_word(self, components, row_sums=None):
        self._require()
        if self.streamed:
            raise NotImplementedError("a streamed chain learns its topic-word side; online "
                                      "learning's mini-batches are never streamed")
        with self.device_context():
            if components.shape[1] != self.words.n_words:
                raise ValueError(f"components must have {self.words.n_words} columns, one per "
                                 f"word of the loaded corpus, got {components.shape[1]}")
            self.words.bhat_fixed = self._fixed_bhat(components, self.old_of_new, row_sums)
            self.words.b_current = False

    def sweep(self, iteration, stream=STREAM_SAMPLE, sub=0):
        self._require()
        cp = self.cp
        if self.streamed:
            return self._sweep_streamed(iteration, stream, sub)
        with self.device_context():
            clock = StageClock(cp, ("sample", "rebuild_a", "count_b_totals"), self.profile)
            self._queue_sweep(iteration, stream, sub, clock)
            self.stage_ms = clock.stage_ms(self.stage_ms)

    def _queue_sweep(self, iteration, stream=STREAM_SAMPLE, sub=0, clock=None):
        """Queue a sweep of the resident chunks: every chunk's E-step, their A rows, then B and
        the topic totals, marking ``clock`` (a :class:`~..chain.StageClock`) after each stage.
        ``iteration`` is a number, or a device word (uint32, (1,)) that the kernels read it
        from, as a sweep captured in a CUDA graph does (:mod:`.graph_replay`); beta is then read
        from the word side's device word too."""
        mark = clock.mark if clock is not None else (lambda: None)
        with self._seeded_b():
            for ch in self.chunks:
                sample_sparse.sample_tokens(ch, self.words, self._shape, self.seed,
                                            iteration, stream, sub, self.token_offset)
        mark()
        for ch in self.chunks:
            counts.rebuild_a(ch, self.n_topics, self._n_sm)
        mark()
        self._count_words(self.words.beta_word if isinstance(iteration, self.cp.ndarray)
                          else None)
        mark()

    def _mstep(self):
        if not self.streamed:
            for ch in self.chunks:
                counts.rebuild_a(ch, self.n_topics, self._n_sm)
        # A streamed chain keeps no A between passes: each pass rebuilds it from the topics.
        self._count_words()

    def _count_words(self, beta=None):
        """B and the topic totals from the current topics; only marks B stale while the
        topic-word side is fixed (the E-step does not read B then). ``beta``: as
        :meth:`_topic_totals` takes it."""
        w = self.words
        if w.bhat_fixed is not None:
            w.b_current = False
            return
        self._count_b()
        self._topic_totals(beta)

    def _topic_totals(self, beta=None):
        """The topic totals and the E-step's denominators from B (its dense rows summed in
        float64 by slices, the rare rows' integer counts added). ``beta``: the device word the
        one-kernel path reads beta from (a captured sweep), or None for the number."""
        w = self.words
        counts.column_partials(w.B, w.partial)
        if self._exact_totals():
            counts.topic_totals(w.partial, w.totals, w.denom, w.n_words,
                                w.beta if beta is None else beta, self._extra_sums())
            return
        if beta is not None:
            raise ValueError("beta is read from the device by the integer-count totals only")
        self.cp.sum(w.partial, axis=0, out=w.totals)
        if w.rare is not None:
            hybrid.add_rare_totals(w.rare, w.totals, self._n_sm)
        self._denominators()

    def _topic_totals_device(self):
        # The chain's own totals, summed after the sweep: for integer counts they are B's
        # column sums exactly, and reading them spares a reduction over the whole table.
        w = self.words
        if self._exact_totals() and w.bhat_fixed is None:
            return w.totals
        return None

    def _alpha_bins_device(self):
        return self.doc_topic_bins_device(self.corpus)

    def _exact_totals(self):
        """Whether the totals and denominators take one kernel (``counts.topic_totals``): B
        all dense and of integer counts, whose sums are exact in any order."""
        return self.words.rare is None and bool(getattr(self.corpus, "integral", False))

    def _denominators(self):
        """n[k] + V beta, and the rare rows' Bhat of a zero count with its tree's levels, after
        the totals or a prior changed."""
        w = self.words
        if self._exact_totals():
            counts.topic_totals(None, w.totals, w.denom, w.n_words, w.beta, self._extra_sums())
            return
        w.denom[...] = w.totals + w.n_words * w.beta
        if w.seeded is not None:
            w.denom += w.seeded.topic_sums
        if w.rare is not None:
            hybrid.prior_tables(w.denom, w.beta, w.alpha, w.prior)

    def _extra_sums(self):
        """What the seeded cells add to each topic's denominator (device, K), or None."""
        seeded = self.words.seeded
        return None if seeded is None else seeded.topic_sums

    def _count_b(self):
        w = self.words
        w.zero()
        if self.streamed:
            self._count_b_streamed()
        else:
            for ch in self.chunks:
                counts.count_b(ch, self.n_topics, w.B, self._n_sm, w.rare)
        w.b_current = True

    def _word_major_device(self):
        """B, word-major: the dense array, or a :class:`~.hybrid_table.HybridTable` over the
        dense rows and the rare ones."""
        dense, rare = self._hybrid_parts()
        return dense if rare is None else hybrid.table(self.cp, dense, rare, self.words.n_words)

    def _hybrid_parts(self):
        """The current B's dense rows and rare rows (None when B is all dense)."""
        if not self.words.b_current:
            self._count_b()
        return self.words.B, self.words.rare

    def _host_rows(self):
        return None if self.new_of_old is None else self.cp.asarray(self.new_of_old)

    # -- reading the state ----------------------------------------------------------------------
    def topics(self):
        self._require()
        with self.device_context():
            if self.streamed:
                parts = [z.astype(np.int32) for z in self._stream.host_topics()]
            else:
                parts = [ch.z_can.get().astype(np.int32) for ch in self.chunks]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int32)

    def word_topic_counts(self):
        self._require()
        with self._reading():
            return topic_major_to_host(self.cp, self._word_major_device(), self._host_rows())

    def log_likelihood(self):
        self._require()
        cp = self.cp
        total = 0.0
        with self.device_context():
            with self._seeded_b():
                for ch in self._chunks_with_a():
                    if ch.n_tokens == 0:
                        continue
                    partial = cp.empty(ch.n_batches, dtype=cp.float64)
                    sample_sparse.token_loglik(ch, self.words, self._shape, partial)
                    total += float(partial.sum())
        return total

    def _release_state(self):
        self._forget_graphs()
        self._graphs = None
        if self._stream is not None:
            self._stream.release()
        self._stream = self._b_next = None
        for ch in self._every_chunk():
            ch.release()
        self.chunks = []
        self._batches = None
        self.words = None
