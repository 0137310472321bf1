"""ESCA with the dense draw rule on an NVIDIA GPU: the small-K engine of issue 4.

Layout on the device: the tokens in canonical (document-major) order -- document pointer (int64),
word (int32), topic (int32) and, for non-integer counts, weight (float32) -- and three dense
tables: A (D x K), B and Bhat (V x K), all float32. The E-step is one launch of a dense kernel of
``cuda/sample_dense.cu`` through :func:`~sklearn_gpulda._engines.dense_sampler.sample_dense`
(one thread per document, documents by decreasing length); it draws by the rule of
:func:`~sklearn_gpulda._engines.dense_rule.draw_topics_dense`, the oracle this engine is checked
against (``NumpyEngine(algorithm='dense')``). The M-step rebuilds A and B from the topics and the
weights with ``cupy.bincount`` (exact for integer counts, whatever the order of the atomics), then
Bhat by Eq. (2) of SaberLDA in float64, cast to float32, as ``doc/algorithm.md`` prescribes.

Fold-in does not depend on the draw rule: it is delegated to the sparse engine's fold-in kernel.
"""

import numpy as np

from .. import _kernels
from .._random import STREAM_BATCH_INIT, STREAM_BATCH_SAMPLE, STREAM_INIT, STREAM_SAMPLE
from ._transfer import topic_major_to_host
from .base import Engine
from .cuda_engine import _OnDevice
from .dense_sampler import BLOCK, MAX_TOPICS, VARIANTS, document_order, sample_dense

#: Tokens per launch of the initial-topic kernel (its token offsets are 32-bit).
_INIT_CHUNK = 1 << 30
#: Elements of one (tokens x K) float64 temporary of the log-likelihood (128 MB).
_LOGLIK_ELEMENTS = 1 << 24


class CudaDenseEngine(_OnDevice, Engine):
    """ESCA with dense sampling kernels on a CUDA GPU (see :class:`~.base.Engine`).

    Parameters
    ----------
    n_topics, alpha, beta, seed
        As :class:`~sklearn_gpulda._engines.base.Engine`; ``n_topics`` at most
        :data:`~sklearn_gpulda._engines.dense_sampler.MAX_TOPICS` (1,024).
    device : int or None, default=None
        CUDA device index; None for the current one.
    variant : {'transpose', 'butterfly', 'plain'}, default='transpose'
        Dense kernel of the E-step. 'transpose' (Alg. 4 with the register transposition) measured
        fastest on an H200 at every K of ``doc/performance.md``; the other two are for comparison.
    block : int, default=128
        Threads per block of the sampling kernel.
    profile : bool, default=False
        Record CUDA events around the sampling kernel and the M-step of :meth:`sweep` into
        ``self.stage_ms`` (milliseconds, keys 'sample' and 'mstep').

    Raises
    ------
    ValueError
        ``n_topics`` outside 1..1,024 or an unknown ``variant``.
    """

    name = "cuda-dense"

    def __init__(
        self,
        n_topics,
        alpha,
        beta,
        seed,
        device=None,
        variant="transpose",
        block=BLOCK,
        profile=False,
    ):
        super().__init__(n_topics, alpha, beta, seed)
        if not 1 <= self.n_topics <= MAX_TOPICS:
            raise ValueError(
                f"the dense CUDA engine supports 1 <= n_topics <= {MAX_TOPICS}, got "
                f"{self.n_topics}; use the sparse engine (algorithm='sparse') for more topics"
            )
        if variant not in VARIANTS:
            raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
        self._attach(device)
        self.variant = variant
        self.block = int(block)
        self.profile = profile
        self.stage_ms = {}
        self._state = None
        self._sparse = None

    # -- memory ---------------------------------------------------------------------------
    def estimate_bytes(self, corpus):
        """Device bytes a fit on ``corpus`` holds, and the peak during an M-step.

        Returns
        -------
        steady, peak : int
        """
        n, d, v, k = corpus.n_tokens, corpus.n_docs, corpus.n_words, self.n_topics
        weighted = corpus.weight is not None
        per_token = 4 + 4 + 4 + (4 if weighted else 0)  # word, doc, topic, weight
        per_doc = 8 + 8 + 4  # pointer, normaliser, master index
        steady = n * per_token + d * per_doc + 4 * d * k + 8 * v * k + 16 * k
        # M-step: flat (row, topic) keys of every token (int64) and one bincount result of the
        # larger table (8 bytes an entry) plus its float64 copy for Bhat. The log-likelihood's
        # chunk takes a few (tokens x K) float64 temporaries of _LOGLIK_ELEMENTS each.
        peak = steady + max(8 * n + 16 * max(d, v) * k, 3 * 8 * _LOGLIK_ELEMENTS)
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
            f"device {self.device}. Use fewer documents per call (partial_fit) or "
            "algorithm='sparse'"
        )

    # -- layout and M-step --------------------------------------------------------------------
    def _build(self, corpus):
        """Upload ``corpus`` and allocate the tables; topics are left undefined."""
        cp = self._cp
        self._check_memory(corpus)
        st = _DenseState()
        st.corpus = corpus
        st.n_docs, st.n_words = int(corpus.n_docs), int(corpus.n_words)
        st.n_tokens = corpus.n_tokens
        if st.n_docs < 1 or st.n_words < 1:
            raise ValueError("the dense CUDA engine needs at least one document and one word")
        st.doc_ptr = cp.asarray(corpus.doc_ptr, dtype=cp.int64)
        st.doc = cp.asarray(corpus.doc, dtype=cp.int32)
        st.word = cp.asarray(corpus.word, dtype=cp.int32)
        st.weight = None if corpus.weight is None else cp.asarray(corpus.weight, dtype=cp.float32)
        st.order = document_order(st.doc_ptr)
        lengths = np.asarray(corpus.doc_lengths(), dtype=np.float64)
        st.doc_norm = cp.asarray(lengths + self.n_topics * self.alpha)
        st.z = cp.zeros(st.n_tokens, dtype=cp.int32)
        st.A = cp.zeros((st.n_docs, self.n_topics), dtype=cp.float32)
        st.B = cp.zeros((st.n_words, self.n_topics), dtype=cp.float32)
        st.bhat = cp.zeros((st.n_words, self.n_topics), dtype=cp.float32)
        return st

    def _init_topics(self, st, iteration, stream):
        """Uniform topic of every token (``_random.token_topic``), by the sparse engine's kernel."""
        cp = self._cp
        n = st.n_tokens
        if n == 0:
            return
        tok = cp.arange(min(n, _INIT_CHUNK), dtype=cp.uint32)
        for t0 in range(0, n, _INIT_CHUNK):
            m = min(_INIT_CHUNK, n - t0)
            _kernels.launch(
                "sample_sparse",
                "init_topics_i32",
                -(-m // 256),
                256,
                [
                    (tok, np.uint32),
                    (m, "i64"),
                    (t0, "i64"),
                    (self.n_topics, "u32"),
                    (self.seed, "u32"),
                    (iteration, "u32"),
                    (stream, "u32"),
                    (0, "u32"),
                    (st.z[t0 : t0 + m], np.int32),
                ],
            )

    def _count(self, st, index, n_rows):
        """Weighted (row, topic) counts of the current topics: float64 or int64, (n_rows, K)."""
        cp = self._cp
        k = self.n_topics
        if st.n_tokens == 0:
            return cp.zeros((n_rows, k), dtype=cp.float64)
        flat = index.astype(cp.int64) * k + st.z
        counts = cp.bincount(flat, weights=st.weight, minlength=n_rows * k)
        return counts.reshape(n_rows, k)

    def _count_a(self, st):
        st.A[...] = self._count(st, st.doc, st.n_docs).astype(self._cp.float32)

    def _count_b(self, st):
        """B from the topics; returns its float64 counts (for Bhat)."""
        b = self._count(st, st.word, st.n_words).astype(self._cp.float64, copy=False)
        st.B[...] = b.astype(self._cp.float32)
        return b

    def _set_bhat(self, st, b):
        """Eq. (2): ``(B + beta) / (n + V beta)`` divided in float64, then float32."""
        denom = b.sum(axis=0) + st.n_words * self.beta
        st.bhat[...] = ((b + self.beta) / denom).astype(self._cp.float32)

    def _mstep(self, st):
        self._count_a(st)
        self._set_bhat(st, self._count_b(st))

    def _sample(self, st, iteration, stream, sweep):
        sample_dense(
            self.variant,
            st.order,
            st.doc_ptr,
            st.word,
            st.A,
            st.bhat,
            self.alpha,
            self.seed,
            iteration,
            st.z,
            stream=stream,
            sweep=sweep,
            block=self.block,
        )

    # -- protocol -----------------------------------------------------------------------------
    def initialize(self, corpus):
        with self._dev():
            self.release()
            st = self._build(corpus)
            self._init_topics(st, 0, STREAM_INIT)
            self._mstep(st)
            self._state = st

    def set_topics(self, corpus, topics):
        topics = self._checked_topics(corpus, topics)
        with self._dev():
            self.release()
            st = self._build(corpus)
            st.z[...] = self._cp.asarray(topics)
            self._mstep(st)
            self._state = st

    def sweep(self, iteration):
        st = self._require()
        cp = self._cp
        with self._dev():
            if not self.profile:
                self._sample(st, iteration, STREAM_SAMPLE, 0)
                self._mstep(st)
                return
            ev = [cp.cuda.Event() for _ in range(3)]
            ev[0].record()
            self._sample(st, iteration, STREAM_SAMPLE, 0)
            ev[1].record()
            self._mstep(st)
            ev[2].record()
            ev[2].synchronize()
            self.stage_ms = {
                "sample": cp.cuda.get_elapsed_time(ev[0], ev[1]),
                "mstep": cp.cuda.get_elapsed_time(ev[1], ev[2]),
            }

    def topics(self):
        st = self._require()
        with self._dev():
            return st.z.get().astype(np.int32, copy=False)

    def word_topic_counts(self):
        st = self._require()
        with self._dev():
            return topic_major_to_host(self._cp, st.B)

    def doc_topic_counts(self):
        st = self._require()
        with self._dev():
            return st.A.get().astype(np.float64)

    def log_likelihood(self):
        """Training log-likelihood of ``doc/algorithm.md``, evaluated in float64 chunk by chunk.

        ``S_t = sum_k A[d,k] Bhat[v,k]`` and ``W[v] = sum_k Bhat[v,k]`` are summed in float64 from
        the float32 tables (the NumPy engine sums them in float32, so the two agree to about
        1e-7 relative).
        """
        st = self._require()
        cp = self._cp
        total = 0.0
        with self._dev():
            w_row = st.bhat.sum(axis=1, dtype=cp.float64)
            step = max(1, _LOGLIK_ELEMENTS // self.n_topics)
            for t0 in range(0, st.n_tokens, step):
                t1 = min(st.n_tokens, t0 + step)
                d, v = st.doc[t0:t1], st.word[t0:t1]
                s = cp.sum(st.A[d].astype(cp.float64) * st.bhat[v], axis=1)
                terms = cp.log(s + self.alpha * w_row[v]) - cp.log(st.doc_norm[d])
                if st.weight is not None:
                    terms *= st.weight[t0:t1]
                total += float(terms.sum())
        return total

    # -- topics fixed -------------------------------------------------------------------------
    def fold_in(self, X, components, alpha, max_iter, tol, return_loglik=False):
        """The sparse engine's fold-in: it does not depend on the draw rule."""
        if self._sparse is None:
            from .cuda_engine import CudaEngine

            self._sparse = CudaEngine(
                self.n_topics, self.alpha, self.beta, self.seed, device=self.device
            )
        return self._sparse.fold_in(X, components, alpha, max_iter, tol, return_loglik)

    def batch_statistics(self, corpus, components, n_sweeps, iteration, first):
        """Mini-batch statistics (``doc/algorithm.md``), the NumPy engine's loop on the GPU."""
        cp = self._cp
        with self._dev():
            st = self._build(corpus)
            try:
                self._init_topics(st, iteration, STREAM_BATCH_INIT)
                self._count_a(st)
                if not first:
                    comp = np.asarray(components, dtype=np.float64)
                    bhat = (comp / comp.sum(axis=1, keepdims=True)).T
                    st.bhat[...] = cp.asarray(np.ascontiguousarray(bhat, dtype=np.float32))
                    total = cp.zeros((st.n_words, self.n_topics), dtype=cp.float64)
                keep_from = n_sweeps - (n_sweeps + 1) // 2
                for s in range(n_sweeps):
                    if first:
                        self._set_bhat(st, self._count_b(st))
                    self._sample(st, iteration, STREAM_BATCH_SAMPLE, s)
                    self._count_a(st)
                    if not first and s >= keep_from:
                        total += self._count(st, st.word, st.n_words).astype(cp.float64)
                if first:
                    out = topic_major_to_host(cp, self._count(st, st.word, st.n_words))
                else:
                    out = topic_major_to_host(cp, total, divisor=n_sweeps - keep_from)
            finally:
                st.release()
        return out

    def release(self):
        if self._sparse is not None:
            self._sparse.release()
        super().release()


class _DenseState:
    """Everything the dense engine holds on the device for one corpus."""

    def release(self):
        self.__dict__.clear()
