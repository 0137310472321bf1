"""One Metropolis-Hastings chain on the current GPU: the tokens, their topics and the dense
counts, and the sweep that moves them (``cuda/sample_mh.cu``)."""

import numpy as np

from ... import random as _random
from ...numpy.mh_rule import DEFAULT_CYCLES
from . import launch
from .checks import (check_corpus, check_count_dtype, check_iteration, check_settings,
                     topic_dtype)
from .layout import TokenLayout


class DeviceTokens:
    """:class:`~.layout.TokenLayout`'s arrays on the device (same names)."""

    def __init__(self, cupy, layout):
        for name in ("doc", "word", "doc_ptr", "by_word", "word_ptr", "word_rank", "nz_doc",
                     "nz_word", "nz_count"):
            setattr(self, name, cupy.asarray(getattr(layout, name)))


class DeviceCounts:
    """The dense state the chains read: A (n_docs x K), B (V x K, float32), the topic totals
    (uint64), ``denom = n_k + V beta`` (float64), alpha and its running sums (float64)."""

    def __init__(self, cupy, n_docs, n_words, alpha, beta, count_dtype):
        k = alpha.shape[0]
        self.A = cupy.zeros((n_docs, k), dtype=count_dtype)
        self.B = cupy.zeros((n_words, k), dtype=np.float32)
        self.totals = cupy.zeros(k, dtype=np.uint64)
        self.denom = cupy.zeros(k, dtype=np.float64)
        self.alpha = cupy.asarray(alpha, dtype=np.float64)
        # np.cumsum on the host: the reference's alpha draw searches exactly these sums.
        self.alpha_cumsum = cupy.asarray(np.cumsum(alpha))
        self.beta = float(beta)


class MhChain:
    """A chain of Metropolis-Hastings E-steps on the GPU, with the dense counts of its topics.

    Every sweep draws, from the same state and key, the topics of
    ``NumpySampler(rule='mh')`` token for token (``backends/numpy/mh_rule.py``). Unit-weight
    tokens of a whole corpus only. A prototype for measuring time to quality (issue 37); it
    implements no fit-loop protocol.

    Parameters
    ----------
    n_topics : int
        K.
    alpha : float or array-like of shape (n_topics,)
        Document-topic prior (fixed).
    beta : float
        Topic-word prior (fixed).
    seed : int
        The Philox key's first word (its low 32 bits).
    n_cycles : int, default=2
        Cycles (a document and a word step each) per token and sweep.
    count_dtype : {np.float32, np.int32}, default=np.float32
        dtype of the dense document-topic counts A.

    Attributes
    ----------
    n_tokens : int
        Tokens of the loaded corpus (0 before :meth:`load`).
    """

    def __init__(self, n_topics, alpha, beta, seed, n_cycles=DEFAULT_CYCLES,
                 count_dtype=np.float32):
        (self.n_topics, self.alpha, self.beta, self.seed,
         self.n_cycles) = check_settings(n_topics, alpha, beta, seed, n_cycles)
        self.count_dtype = check_count_dtype(count_dtype)
        self.topic_dtype = topic_dtype(self.n_topics)
        self.n_tokens = 0
        self._tokens = self._counts = self._z = self._n_sm = None
        self._doc_lengths = None

    # -- the chain ------------------------------------------------------------------------------
    def load(self, corpus):
        """Hold ``corpus`` (a :class:`~sklearn_gpulda._input.corpus.TokenCorpus` of integer
        counts) on the device; topics come from :meth:`init_topics` or :meth:`set_topics`.
        A corpus refused leaves the chain as it was."""
        check_corpus(corpus, self.n_topics)
        import cupy

        layout = TokenLayout(corpus)
        tokens = DeviceTokens(cupy, layout)
        counts = DeviceCounts(cupy, corpus.n_docs, corpus.n_words, self.alpha, self.beta,
                              self.count_dtype)
        self._n_sm = int(cupy.cuda.Device().attributes["MultiProcessorCount"])
        self._tokens, self._counts = tokens, counts
        self._doc_lengths = np.diff(layout.doc_ptr).astype(np.float64)
        self.n_tokens = int(corpus.n_tokens)
        self._z = None

    def init_topics(self):
        """Uniform initial topics (stream ``STREAM_INIT``, iteration 0), as every engine draws
        them; then the counts."""
        from ..sparse import sample_sparse

        import cupy

        z = cupy.empty(self._require_loaded(), dtype=self.topic_dtype)
        # The sparse engine's launcher: uint16 or int32 topics, token_topic(seed, 0, INIT, t).
        sample_sparse.init_topics(0, self.n_topics, self.seed, 0, _random.STREAM_INIT, z)
        self._set(z)

    def set_topics(self, topics):
        """Start from ``topics`` (canonical order, host or device); then the counts."""
        n = self._require_loaded()
        import cupy

        z = cupy.asarray(topics)
        if z.shape != (n,):
            raise ValueError(f"topics must have shape ({n},), got {tuple(z.shape)}")
        if z.size and (int(z.min()) < 0 or int(z.max()) >= self.n_topics):
            raise ValueError(f"topics must lie in [0, {self.n_topics})")
        self._set(cupy.ascontiguousarray(z.astype(self.topic_dtype)))

    def sweep(self, iteration):
        """One E-step (every token's chain, keyed by ``(seed, iteration)``) and the counts."""
        iteration = check_iteration(iteration)
        self._require_topics()
        import cupy

        z_out = cupy.empty_like(self._z)
        launch.sample(self._tokens, self._counts, self._z, z_out, 0, self.seed, iteration,
                      self.n_cycles)
        self._set(z_out)

    def _set(self, z):
        self._z = z
        launch.count(self._tokens, z, self._counts, self._n_sm)

    def _require_loaded(self):
        if self._tokens is None:
            raise RuntimeError("load a corpus first")
        return self.n_tokens

    def _require_topics(self):
        self._require_loaded()
        if self._z is None:
            raise RuntimeError("give the chain topics first (init_topics or set_topics)")

    # -- state readers (host arrays) ------------------------------------------------------------
    def topics(self):
        """Every token's topic, canonical order: int32 of shape (n_tokens,)."""
        self._require_topics()
        return self._z.get().astype(np.int32)

    def doc_topic_counts(self):
        """A as float64, shape (n_docs, n_topics)."""
        self._require_topics()
        return self._counts.A.get().astype(np.float64)

    def word_topic_counts(self):
        """B as float64, shape (n_words, n_topics)."""
        self._require_topics()
        return self._counts.B.get().astype(np.float64)

    def topic_totals(self):
        """n_k, the tokens of each topic: int64 of shape (n_topics,)."""
        self._require_topics()
        return self._counts.totals.get().astype(np.int64)

    def log_likelihood(self):
        """The training log-likelihood (``doc/algorithm.md``), computed on the device in float64
        (:func:`.likelihood.training_log_likelihood`)."""
        from .likelihood import training_log_likelihood

        self._require_topics()
        return training_log_likelihood(self._tokens, self._counts, self._doc_lengths)

    def release(self):
        """Free the device arrays."""
        self._tokens = self._counts = self._z = None
        self.n_tokens = 0
