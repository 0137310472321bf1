"""The dense CUDA backend: ESCA with the dense draw rule (``algorithm='dense'``).

Layout on the device: the tokens in canonical (document-major) order -- document pointer
(int64), word (int32), topic (int32) and, for non-integer counts, weight (float32) -- and three
dense tables: A (D x K), B and Bhat (V x K), all float32. The E-step launches dense kernels of
``cuda/sample_dense.cu`` over the documents by decreasing length: with the 'transpose' kernel,
documents of at least ``long_document`` tokens (by default every document) get a warp or more
each (``sample_dense_long``, a group sized by each document's own length), the rest a thread
each. Every kernel draws by the rule of
:func:`~sklearn_gpulda.backends.numpy.dense_rule.draw_topics_dense`, the oracle this backend is
checked against (``NumpySampler(rule='dense')``), with the token's own Philox number, so which
thread draws a token does not matter.

The M-step: for integer counts (``mstep='fused'``, the default) the sampling kernels count the new
topics into a second A and B as they draw, which then take the first pair's place; the topic
totals and Bhat follow in two precompiled kernels (:mod:`.mstep`). Otherwise (weights, or
``mstep='bincount'``) A and B are rebuilt from the topics and the weights with ``cupy.bincount``.
Either way Bhat is Eq. (2) of SaberLDA in float64, cast to float32, as ``doc/algorithm.md``
prescribes, and both give the same tables for integer counts (exact sums, see :mod:`.mstep`).

A matrix topic-word prior (:meth:`CudaDenseSampler.set_beta_cells`): Bhat is the NumPy engine's
``((B + beta) + extra) / ((n + V beta) + E)`` at every cell, and while the kernels draw, B holds
the seeded cells' pseudo-counts (:mod:`..seeded`) for each token's own-topic term, as on the
sparse engine (one rounding moved there, ``doc/algorithm.md``).

For integer counts a fit launches only precompiled kernels (``cuda/dense_mstep.cu``,
``cuda/dense_read.cu`` and the shared ones): nothing is compiled on a user's machine
(``tests/test_precompiled.py``). A weighted corpus, and ``mstep='bincount'``, keep CuPy's
bincounts and reductions.
"""

import contextlib

import numpy as np

from ...base import Sampler
from ...random import STREAM_INIT, STREAM_SAMPLE
from .. import counts
from ..chain import CudaChain, StageClock
from ..doc_topic import KeyBins, alpha_table_of_bins, histogram_of_bins
from ..seeded import DeviceCells
from ..sparse import layout_kernels, sample_sparse
from ..transfer import topic_major_to_host
from . import mstep as _mstep
from . import reading as _reading
from .graph_replay import DenseGraphReplay
from .sample_dense import (BLOCK, MAX_TOPICS, VARIANTS, document_groups, document_order,
                           sample_dense, sample_dense_long, warp_offsets)

#: Values of the ``mstep`` option.
MSTEPS = ("fused", "bincount")


class CudaDenseSampler(DenseGraphReplay, CudaChain, Sampler):
    """ESCA with dense sampling kernels on a CUDA GPU (see
    :class:`~sklearn_gpulda.backends.base.Sampler`).

    Parameters
    ----------
    n_topics, alpha, beta, seed, device
        As :class:`~sklearn_gpulda.backends.base.Sampler`; ``n_topics`` at most
        :data:`~sklearn_gpulda.backends.cuda.dense.sample_dense.MAX_TOPICS` (1,024).
    variant : {'transpose', 'butterfly', 'plain'}, default='transpose'
        Dense kernel of the E-step. 'transpose' (Alg. 4 with the register transposition) is the
        fastest at every K ``doc/performance.md`` measures; the other two are for comparison.
    block : int, default=128
        Threads per block of the sampling kernel.
    profile : bool, default=False
        Record CUDA events around the sampling kernel and the M-step of :meth:`sweep` into
        ``self.stage_ms`` (milliseconds, keys 'sample' and 'mstep').
    max_device_memory : int or None, default=None
        Device bytes the chain may use (None: what the GPU has free); this engine does not
        stream, so a corpus beyond it is a MemoryError.
    mstep : {'fused', 'bincount'}, default='fused'
        'fused': the sampling kernels count A and B as they draw, where that is exact (integer
        counts, no document or word of 2^24 tokens; other corpora take the bincount path, and
        ``fused_mstep`` says which ran). 'bincount': A and B rebuilt by ``cupy.bincount`` after
        each sweep. The two give the same model.

    Notes
    -----
    A matrix topic-word prior (:meth:`set_beta_cells`) samples in batch fits: Bhat holds the
    seeded cells' extras (``doc/algorithm.md``, "A matrix topic-word prior").
    long_document : int or None, default=1
        With the 'transpose' kernel, documents of at least this many tokens are drawn by one or
        more warps each instead of one thread (same draws); None: a thread for every document.
        The default gives every document warps: measured faster than a thread per short
        document on every corpus tried, the NYTimes shape's 330-token documents included
        (``doc/performance.md``, "Warps for every document").
    """

    def __init__(self, n_topics, alpha, beta, seed, device, variant="transpose", block=BLOCK,
                 profile=False, max_device_memory=None, mstep="fused", long_document=1):
        super().__init__(n_topics, alpha, beta, seed, device)
        if not 1 <= self.n_topics <= MAX_TOPICS:
            raise ValueError(
                f"the dense CUDA engine supports 1 <= n_topics <= {MAX_TOPICS}, got "
                f"{self.n_topics}; use the sparse engine (algorithm='sparse') for more topics"
            )
        if variant not in VARIANTS:
            raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
        if mstep not in MSTEPS:
            raise ValueError(f"mstep must be one of {MSTEPS}, got {mstep!r}")
        if long_document is not None and int(long_document) < 1:
            raise ValueError(f"long_document must be None or at least 1, got {long_document}")
        self._attach(device)
        self.variant = variant
        self.mstep = mstep
        self.long_document = None if long_document is None else int(long_document)
        self.block = int(block)
        self.profile = profile
        self.max_device_memory = None if max_device_memory is None else int(max_device_memory)
        self.stage_ms = {}
        self._st = None

    #: Every draw kernel (their per-thread tables are local arrays of 8 KiB, which the driver
    #: reserves for every thread the GPU holds: :mod:`..process_memory`) and the M-step's module.
    budget_kernels = CudaChain.budget_kernels + tuple(
        ("sample_dense", f"sample_dense_{v}") for v in VARIANTS + ("long",)) + (
        ("dense_mstep", "dense_bhat"),)

    # -- memory ---------------------------------------------------------------------------------
    def estimate_bytes(self, corpus):
        """Device bytes a chain on ``corpus`` holds, and the peak during an M-step."""
        n, d, v, k = corpus.n_tokens, corpus.n_docs, corpus.n_words, self.n_topics
        weighted = corpus.weighted
        per_token = 4 + 4 + 4 + (4 if weighted else 0)  # word, doc, topic, weight
        per_doc = 8 + 8 + 8 + 4 + 4  # pointer, weight, normaliser, master index, first warp
        steady = n * per_token + d * per_doc + 4 * d * k + 8 * v * k + 16 * k
        if self.mstep == "fused" and not weighted:
            # The fused M-step's next A and B, and its 64-bit topic totals.
            steady += 4 * d * k + 4 * v * k + 8 * k
        cells = self.beta_cells
        if cells is not None:
            steady += DeviceCells.nbytes(cells.n_cells, k)
        # M-step: flat (row, topic) keys of every token (int64) and one bincount result of the
        # larger table (8 bytes an entry) plus its float64 copy for Bhat. The log-likelihood
        # takes Q of each word and a partial sum per tile of tokens (reading.py); alpha's
        # histogram its table and a key per large count.
        peak = steady + max(8 * n + 16 * max(d, v) * k, _reading.loglik_bytes(n, v),
                            8 * (k * counts.KEY_BINS + 1) + 8 * (n // counts.KEY_BINS + 1))
        return int(steady), int(peak)

    def _memory_message(self, corpus, steady, peak, free, total):
        gib = 2**30
        d, v, k = corpus.n_docs, corpus.n_words, self.n_topics
        return (
            f"the dense CUDA engine needs about {peak / gib:.2f} GiB of device memory "
            f"({steady / gib:.2f} GiB kept): A of {d} documents x {k} topics float32 "
            f"({4 * d * k / gib:.2f} GiB), B and Bhat of {v} words x {k} topics float32 "
            f"({8 * v * k / gib:.2f} GiB), {corpus.n_tokens} tokens, and M-step "
            f"temporaries; only {free / gib:.2f} GiB of {total / gib:.2f} GiB is free on "
            f"GPU {self.gpu}. Use fewer documents per call (partial_fit) or "
            "algorithm='sparse'"
        )

    # -- the chain ------------------------------------------------------------------------------
    def load(self, corpus):
        cp = self.cp
        with self.device_context():
            self.release()
            if corpus.n_docs < 1 or corpus.n_words < 1:
                raise ValueError("the dense CUDA engine needs at least one document and one word")
            self._check_memory(corpus)
            self._cap_pool()
            st = _DenseState()
            st.n_docs, st.n_words, st.n_tokens = corpus.n_docs, corpus.n_words, corpus.n_tokens
            # The pointers and the master index are made on the host: CuPy's diff, argsort and
            # masks would compile kernels on a user's machine (the order is the same).
            doc_ptr = np.asarray(corpus.doc_ptr, dtype=np.int64)
            st.doc_ptr = cp.asarray(doc_ptr)
            st.doc = cp.asarray(corpus.doc, dtype=cp.int32)
            st.word = cp.asarray(corpus.word, dtype=cp.int32)
            st.weight = (None if corpus.weight is None
                         else cp.asarray(corpus.weight, dtype=cp.float32))
            order = document_order(doc_ptr)
            st.order = cp.asarray(order)
            st.doc_weight = cp.asarray(np.asarray(corpus.doc_lengths(), dtype=np.float64))
            st.doc_norm = cp.empty_like(st.doc_weight)
            st.z = cp.zeros(st.n_tokens, dtype=cp.int32)
            st.A = cp.zeros((st.n_docs, self.n_topics), dtype=cp.float32)
            st.B = cp.zeros((st.n_words, self.n_topics), dtype=cp.float32)
            st.bhat = cp.zeros((st.n_words, self.n_topics), dtype=cp.float32)
            st.denom = cp.zeros(self.n_topics, dtype=cp.float64)
            st.fused = self.mstep == "fused" and _mstep.counts_are_exact(cp, corpus, st.word)
            if st.fused:
                st.A_next = cp.zeros_like(st.A)
                st.B_next = cp.zeros_like(st.B)
                st.totals = cp.zeros(self.n_topics, dtype=cp.uint64)
            st.seeded = self._device_cells()
            # alpha (float32) and (beta, V beta) on the device, written in place when they
            # change, so that a sweep replayed as a graph reads the current priors.
            st.alpha = None
            st.prior_word = cp.zeros(2, dtype=cp.float64)
            self._split_long_documents(st, np.diff(doc_ptr)[order])
            st.fixed = False
            st.b_current = False
            self._st = st
            self.corpus = corpus
            self._priors_changed()

    def _split_long_documents(self, st, lengths):
        """``st.order`` split into the documents drawn by warps, the first ``n_long``
        (documents are by decreasing length), each a group of its own size (``st.groups``,
        on the device ``st.warps``), and the rest, a thread each; ``lengths`` (host) are the
        ordered documents' lengths."""
        st.n_long, st.groups, st.warps = 0, np.zeros(0, dtype=np.int64), None
        if self.variant == "transpose" and self.long_document is not None and st.order.size:
            st.n_long = int(np.count_nonzero(lengths >= self.long_document))
            if st.n_long:
                st.groups = document_groups(lengths[:st.n_long], self._sm_count())
                warp_ptr, n_warps = warp_offsets(st.groups)
                st.warps = (self.cp.asarray(warp_ptr), n_warps)
        st.order_long = st.order[:st.n_long]
        st.order_short = st.order[st.n_long:]

    def _priors_changed(self):
        st = self._st
        if st is None:
            return
        with self.device_context():
            # Written in place: a sweep replayed as a CUDA graph keeps their addresses.
            st.alpha = self._written_in_place(st.alpha, self.alpha.astype(np.float32))
            self._written_in_place(st.prior_word, np.array([self.beta, st.n_words * self.beta]))
            # N_d + sum(alpha): the same float64 addition as CuPy's, by a precompiled kernel.
            layout_kernels.document_norms(st.doc_weight, float(self.alpha.sum()), st.doc_norm)
            if not st.fixed and st.b_current:
                self._set_bhat()

    # -- a matrix topic-word prior --------------------------------------------------------------
    def set_beta_cells(self, cells):
        super().set_beta_cells(cells)
        if self._st is not None:
            with self.device_context():
                self._st.seeded = self._device_cells()
                self._priors_changed()

    def _device_cells(self):
        """The seeded cells on the chain's GPU (rows are words: no relabelling), or None."""
        if self.beta_cells is None:
            return None
        return DeviceCells(self.cp, self.beta_cells, None, self._sm_count())

    def _seeded_b(self):
        """A context in which B holds the seeded cells' pseudo-counts, for the kernels' own-topic
        term (nothing for a scalar prior, or while the topic-word side is fixed)."""
        st = self._st
        if st.seeded is None or st.fixed:
            return contextlib.nullcontext()
        return st.seeded.seeded(st.B)

    def seeded_counts(self):
        self._require_state()
        with self._reading():
            return self._st.seeded.counts_at(self._word_major_device())

    def init_topics(self, iteration=0, stream=STREAM_INIT):
        st = self._require_state()
        with self.device_context():
            sample_sparse.init_topics(0, self.n_topics, self.seed, iteration, stream, st.z)
            self._mstep()

    def set_topics(self, topics):
        topics = self._checked_topics(topics)
        with self.device_context():
            self._st.z.set(np.ascontiguousarray(topics))  # a copy, no kernel
            self._mstep()

    def fix_topic_word(self, components, row_sums=None):
        st = self._require_state()
        with self.device_context():
            st.bhat[...] = self._fixed_bhat(components, row_sums=row_sums)
            st.fixed = True
            st.b_current = False

    def sweep(self, iteration, stream=STREAM_SAMPLE, sub=0):
        st = self._require_state()
        cp = self.cp
        with self.device_context():
            clock = StageClock(cp, ("sample", "mstep"), self.profile)
            word_counts = None if st.fixed else (st.B, st.denom, self.beta)
            counts_next = None
            if st.fused:
                counts.clear(st.A_next)
                if not st.fixed:
                    counts.clear(st.B_next)
                counts_next = (st.A_next, None if st.fixed else st.B_next)
            common = dict(stream=stream, sweep=sub, block=self.block, word_counts=word_counts,
                          counts_next=counts_next)
            args = (st.doc_ptr, st.word, st.weight, st.A, st.bhat, st.alpha, self.seed,
                    iteration, st.z)
            with self._seeded_b():
                if st.n_long:
                    sample_dense_long(st.order_long, *args, warps=st.warps, **common)
                sample_dense(self.variant, st.order_short, *args, **common)
            clock.mark()
            if st.fused:
                self._swap_counts()
            else:
                self._mstep()
            clock.mark()
            self.stage_ms = clock.stage_ms(self.stage_ms)

    @property
    def fused_mstep(self):
        """Whether the loaded chain counts A and B in its sampling kernels (None before load)."""
        return None if self._st is None else self._st.fused

    # -- M-step ---------------------------------------------------------------------------------
    def _count(self, index, n_rows):
        """Weighted (row, topic) counts of the current topics: float64 or int64, (n_rows, K)."""
        cp = self.cp
        st, k = self._st, self.n_topics
        if st.n_tokens == 0:
            return cp.zeros((n_rows, k), dtype=cp.float64)
        flat = index.astype(cp.int64) * k + st.z
        return cp.bincount(flat, weights=st.weight, minlength=n_rows * k).reshape(n_rows, k)

    def _count_b(self):
        st = self._st
        if st.fused:
            counts.clear(st.B)
            _mstep.count_tokens(st.doc, st.word, st.z, None, st.B, self._sm_count())
        else:
            st.B[...] = self._count(st.word, st.n_words).astype(self.cp.float32)
        st.b_current = True

    def _swap_counts(self):
        """After a fused sweep: the counted tables become A and B, then Bhat from them."""
        st = self._st
        st.A, st.A_next = st.A_next, st.A
        if st.fixed:
            st.b_current = False
            return
        st.B, st.B_next = st.B_next, st.B
        st.b_current = True
        self._set_bhat()

    def _set_bhat(self):
        """Eq. (2): ``(B + beta) / (n + V beta)`` divided in float64, then float32 (by the
        precompiled kernels of :mod:`.mstep` for a fused chain, the same numbers)."""
        cp = self.cp
        st = self._st
        if st.fused:
            _mstep.set_bhat(st.B, st.totals, self.beta, st.n_words * self.beta, st.bhat,
                            st.denom, self._sm_count(), st.seeded)
            return
        b = st.B.astype(cp.float64)
        denom = b.sum(axis=0) + st.n_words * self.beta
        if st.seeded is not None:
            denom = denom + st.seeded.topic_sums
        st.denom = denom
        st.bhat[...] = ((b + self.beta) / st.denom).astype(cp.float32)
        if st.seeded is not None:
            _mstep.seed_bhat(st.B, st.seeded, self.beta, st.denom, st.bhat, self._sm_count())

    def _mstep(self):
        st = self._st
        if st.fused:
            # The first topics' counts by precompiled atomics (the fused sweep's exact tables).
            counts.clear(st.A)
            count_b = not st.fixed
            if count_b:
                counts.clear(st.B)
            _mstep.count_tokens(st.doc, st.word, st.z, st.A, st.B if count_b else None,
                                self._sm_count())
        else:
            st.A[...] = self._count(st.doc, st.n_docs).astype(self.cp.float32)
        if st.fixed:
            st.b_current = False
            return
        if st.fused:
            st.b_current = True
        else:
            self._count_b()
        self._set_bhat()

    def _word_major_device(self):
        if not self._st.b_current:
            self._count_b()
        return self._st.B

    def _host_rows(self):
        return None

    def _require_state(self):
        self._require()
        return self._st

    # -- reading the state ----------------------------------------------------------------------
    def topics(self):
        st = self._require_state()
        with self.device_context():
            return st.z.get().astype(np.int32, copy=False)

    def word_topic_counts(self):
        self._require_state()
        with self.device_context():
            return topic_major_to_host(self.cp, self._word_major_device())

    def doc_topic_counts(self):
        st = self._require_state()
        with self.device_context():
            return st.A.get().astype(np.float64)

    def _topic_totals_device(self):
        # B's column sums exactly (integer counts), by a precompiled kernel (CuPy's float64
        # reduction would compile), from the B the caller has just made current
        # (_word_major_device).
        st = self._st
        if not st.fused:
            return None
        _mstep.topic_totals(st.B, st.totals, self._sm_count())
        return st.totals

    # -- A's histogram, for learning alpha ------------------------------------------------------
    def _doc_topic_bins(self):
        """A's integer counts below ``KEY_BINS`` binned per topic, on the host, and the other
        entries' keys sorted with their numbers of documents; None where the keys do not fit
        (weighted counts; see :meth:`~..doc_topic.DocTopicReading.doc_topic_bins`, the
        sparse chain's, which this mirrors)."""
        bins = self._alpha_bins_device()
        return None if bins is None else bins.on_host()

    def _alpha_bins_device(self):
        """:meth:`_doc_topic_bins` left on the device (a :class:`~..doc_topic.KeyBins`), or
        None for weighted counts."""
        st = self._st
        if not self.corpus.integral:
            return None
        bins = KeyBins(self.cp, self.n_topics, st.n_tokens)
        _reading.topic_bins(st.A, bins.table, bins.keys, bins.n_keys, self._sm_count())
        return bins

    def doc_topic_histogram(self):
        st = self._require_state()
        cp = self.cp
        with self.device_context():
            bins = self._doc_topic_bins()
            if bins is None:
                doc, topic = cp.nonzero(st.A)
                bits = st.A[doc, topic].view(cp.uint32).astype(cp.uint64)
                keys = (topic.astype(cp.uint64) << 32) | bits
                return self._topic_count_pairs(keys)
        return histogram_of_bins(*bins)

    def doc_topic_table(self):
        self._require_state()
        with self.device_context():
            bins = self._doc_topic_bins()
            if bins is None:
                return super().doc_topic_table()
            return alpha_table_of_bins(*bins)

    def log_likelihood(self):
        """Training log-likelihood of ``doc/algorithm.md`` (``cuda/dense_read.cu``).

        ``S_t = sum_k A[d,k] Bhat[v,k]`` and ``Q[v] = sum_k alpha_k Bhat[v,k]`` are summed in
        float64, in topic order, from the float32 tables (the NumPy backend sums them in
        float32, so the two agree to about 1e-7 relative).
        """
        st = self._require_state()
        with self.device_context():
            return _reading.log_likelihood(st.doc, st.word, st.weight, st.A, st.bhat, st.alpha,
                                           st.doc_norm, self._sm_count())

    def _release_state(self):
        self._forget_graphs()
        if self._st is not None:
            self._st.__dict__.clear()
        self._st = None


class _DenseState:
    """Everything the dense backend holds on the device for one corpus."""
