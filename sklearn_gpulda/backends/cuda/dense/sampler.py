"""The dense CUDA backend: ESCA with the dense draw rule (``algorithm='dense'``).

Layout on the device: the tokens in canonical (document-major) order -- document pointer
(int64), word (int32), topic (int32) and, for non-integer counts, weight (float32) -- and three
dense tables: A (D x K), B and Bhat (V x K), all float32. The E-step launches dense kernels of
``cuda/sample_dense.cu`` over the documents by decreasing length: with the 'transpose' kernel,
documents of at least ``long_document`` tokens get a warp or more each (``sample_dense_long``),
the rest a thread each. Every kernel draws by the rule of
:func:`~sklearn_gpulda.backends.numpy.dense_rule.draw_topics_dense`, the oracle this backend is
checked against (``NumpySampler(rule='dense')``), with the token's own Philox number, so which
thread draws a token does not matter.

The M-step: for integer counts (``mstep='fused'``, the default) the sampling kernels count the new
topics into a second A and B as they draw, which then take the first pair's place; the topic
totals and Bhat follow in two precompiled kernels (:mod:`.mstep`). Otherwise (weights, or
``mstep='bincount'``) A and B are rebuilt from the topics and the weights with ``cupy.bincount``.
Either way Bhat is Eq. (2) of SaberLDA in float64, cast to float32, as ``doc/algorithm.md``
prescribes, and both give the same tables for integer counts (exact sums, see :mod:`.mstep`).
"""

import numpy as np

from ...base import Sampler
from ...random import STREAM_INIT, STREAM_SAMPLE
from .. import counts
from ..chain import CudaChain, StageClock
from ..sparse import sample_sparse
from ..transfer import topic_major_to_host
from . import mstep as _mstep
from .sample_dense import (BLOCK, MAX_TOPICS, VARIANTS, document_order, long_document_group,
                           sample_dense, sample_dense_long)

#: Values of the ``mstep`` option.
MSTEPS = ("fused", "bincount")

#: Elements of one (tokens x K) float64 temporary of the log-likelihood (128 MB).
_LOGLIK_ELEMENTS = 1 << 24


class CudaDenseSampler(CudaChain, Sampler):
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
    long_document : int or None, default=256
        With the 'transpose' kernel, documents of at least this many tokens are drawn by one or
        more warps each instead of one thread (same draws); None: a thread for every document.
    """

    def __init__(self, n_topics, alpha, beta, seed, device, variant="transpose", block=BLOCK,
                 profile=False, max_device_memory=None, mstep="fused", long_document=256):
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
        per_doc = 8 + 8 + 8 + 4  # pointer, weight, normaliser, master index
        steady = n * per_token + d * per_doc + 4 * d * k + 8 * v * k + 16 * k
        if self.mstep == "fused" and not weighted:
            # The fused M-step's next A and B, and its 64-bit topic totals.
            steady += 4 * d * k + 4 * v * k + 8 * k
        # M-step: flat (row, topic) keys of every token (int64) and one bincount result of the
        # larger table (8 bytes an entry) plus its float64 copy for Bhat. The log-likelihood's
        # chunk takes a few (tokens x K) float64 temporaries of at most _LOGLIK_ELEMENTS each.
        peak = steady + max(8 * n + 16 * max(d, v) * k, 3 * 8 * min(_LOGLIK_ELEMENTS, n * k))
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
            st = _DenseState()
            st.n_docs, st.n_words, st.n_tokens = corpus.n_docs, corpus.n_words, corpus.n_tokens
            st.doc_ptr = cp.asarray(corpus.doc_ptr, dtype=cp.int64)
            st.doc = cp.asarray(corpus.doc, dtype=cp.int32)
            st.word = cp.asarray(corpus.word, dtype=cp.int32)
            st.weight = None if corpus.weight is None else cp.asarray(corpus.weight,
            dtype=cp.float32)
            st.order = document_order(st.doc_ptr)
            st.doc_weight = cp.asarray(np.asarray(corpus.doc_lengths(), dtype=np.float64))
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
            self._split_long_documents(st)
            st.fixed = False
            st.b_current = False
            self._st = st
            self.corpus = corpus
            self._priors_changed()

    def _split_long_documents(self, st):
        """``st.order`` split into the documents drawn a warp (group) each, the first
        ``n_long`` (documents are by decreasing length), and the rest, a thread each."""
        st.n_long, st.group = 0, 1
        if self.variant == "transpose" and self.long_document is not None and st.order.size:
            lengths = self.cp.diff(st.doc_ptr)[st.order].get()
            st.n_long = int(np.count_nonzero(lengths >= self.long_document))
            if st.n_long:
                st.group = long_document_group(st.n_long, float(lengths[:st.n_long].mean()),
                                               self._sm_count())
        st.order_long = st.order[:st.n_long]
        st.order_short = st.order[st.n_long:]

    def _priors_changed(self):
        st = self._st
        if st is None:
            return
        cp = self.cp
        with self.device_context():
            st.alpha = cp.asarray(self.alpha.astype(np.float32))
            st.doc_norm = st.doc_weight + float(self.alpha.sum())
            if not st.fixed and st.b_current:
                self._set_bhat()

    def init_topics(self, iteration=0, stream=STREAM_INIT):
        st = self._require_state()
        with self.device_context():
            sample_sparse.init_topics(0, self.n_topics, self.seed, iteration, stream, st.z)
            self._mstep()

    def set_topics(self, topics):
        topics = self._checked_topics(topics)
        with self.device_context():
            self._st.z[...] = self.cp.asarray(topics)
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
            if st.n_long:
                sample_dense_long(st.order_long, *args, group=st.group, **common)
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
                            st.denom, self._sm_count())
            return
        b = st.B.astype(cp.float64)
        st.denom = b.sum(axis=0) + st.n_words * self.beta
        st.bhat[...] = ((b + self.beta) / st.denom).astype(cp.float32)

    def _mstep(self):
        st = self._st
        st.A[...] = self._count(st.doc, st.n_docs).astype(self.cp.float32)
        if st.fixed:
            st.b_current = False
            return
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

    def doc_topic_histogram(self):
        st = self._require_state()
        cp = self.cp
        with self.device_context():
            doc, topic = cp.nonzero(st.A)
            keys = (topic.astype(cp.uint64) << 32) | st.A[doc,
            topic].view(cp.uint32).astype(cp.uint64)
            return self._topic_count_pairs(keys)

    def log_likelihood(self):
        """Training log-likelihood of ``doc/algorithm.md``, evaluated in float64 chunk by chunk.

        ``S_t = sum_k A[d,k] Bhat[v,k]`` and ``Q[v] = sum_k alpha_k Bhat[v,k]`` are summed in
        float64
        from the float32 tables (the NumPy backend sums them in float32, so the two agree to about
        1e-7 relative).
        """
        st = self._require_state()
        cp = self.cp
        total = 0.0
        with self.device_context():
            q_row = (st.bhat * st.alpha).sum(axis=1, dtype=cp.float64)
            step = max(1, _LOGLIK_ELEMENTS // self.n_topics)
            for t0 in range(0, st.n_tokens, step):
                t1 = min(st.n_tokens, t0 + step)
                d, v = st.doc[t0:t1], st.word[t0:t1]
                s = cp.sum(st.A[d].astype(cp.float64) * st.bhat[v], axis=1)
                terms = cp.log(s + q_row[v]) - cp.log(st.doc_norm[d])
                if st.weight is not None:
                    terms *= st.weight[t0:t1]
                total += float(terms.sum())
        return total

    def _release_state(self):
        if self._st is not None:
            self._st.__dict__.clear()
        self._st = None


class _DenseState:
    """Everything the dense backend holds on the device for one corpus."""
