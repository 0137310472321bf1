"""Prior updates from histograms that stay on a chain's GPU: :class:`ResidentPriors`, a base of
:class:`~.chain.CudaChain`.

A prior update used to read A's and B's histograms to the host, sort their large entries there,
send the pairs to the fixed points' kernels and read each prior back: several waits on the
device an update, the GPU idle while the host worked (``doc/performance.md``, "Prior updates on
the device, waited on once"). Here the histograms' large entries are sorted and counted on the
device and one copy brings both priors back (``cuda/priors.cu``, :mod:`.prior_kernels`).
"""

from . import counts, prior_kernels


class ResidentPriors:
    """:meth:`learn_priors` for a CUDA chain, which provides ``corpus``, ``cp``,
    ``_reading()``, ``_sm_count()``, ``hybrid``, ``_word_major_device()`` and, for each
    histogram it can keep on the device, ``_alpha_bins_device()`` and
    ``_topic_totals_device()``."""

    #: Whether :meth:`learn_priors` may learn the priors from this chain's own histograms:
    #: False for a chain that holds only part of the corpus (a shard of several GPUs or Dask
    #: workers) or that draws online mini-batches.
    resident_priors = True

    #: Most overflow entries of A's histogram (counts of ``KEY_BINS`` tokens and more; at most
    #: n_tokens / KEY_BINS) that :meth:`learn_priors` sorts in its one block: more, and the
    #: two-step path sorts them on the host.
    RESIDENT_MAX_KEYS = 1 << 16

    def learn_priors(self, alpha=None, beta=None, lengths=None, n_words=None, cells=None):
        """Both fixed points on the chain's GPU from histograms that never leave it, and one
        read of the learned priors at the end: what :meth:`learn_alpha` on
        :meth:`doc_topic_table` and :meth:`learn_beta` on :meth:`word_topic_histogram` learn,
        bit for bit (``cuda/priors.cu``, ``*_bins``), with one wait on the device per update
        instead of one per histogram and fixed point.

        Parameters
        ----------
        alpha : ndarray or None
            The current alpha, where alpha is learned.
        beta : float or None
            The current beta, where beta is learned.
        lengths : (length, n_length)
            The documents' length histogram (with ``alpha``).
        n_words : int
        cells : CellPrior or None
            A matrix prior's seeded cells, which this path does not take.

        Returns
        -------
        (alpha, beta) on the host (None for a prior not learned), or None where this chain
        cannot: the caller then takes the two-step path.
        """
        corpus = getattr(self, "corpus", None)
        if (not self.resident_priors or cells is not None or corpus is None
                or not corpus.integral or corpus.n_tokens == 0
                or corpus.n_tokens // counts.KEY_BINS + 1 > self.RESIDENT_MAX_KEYS
                or (alpha is None and beta is None)):
            return None
        with self._reading():
            alpha_bins = beta_bins = None
            if beta is not None:
                beta_bins = self._beta_bins_device()
                if beta_bins is None:
                    return None
            if alpha is not None:
                alpha_bins = self._alpha_bins_device()
                if alpha_bins is None:
                    return None
                alpha_bins = (alpha_bins.table, alpha_bins.keys, alpha_bins.n_keys)
            return prior_kernels.learn_from_bins(self.cp, alpha, alpha_bins, lengths, beta,
                                                 beta_bins, n_words)

    def _alpha_bins_device(self):
        """A's histogram on the device (a :class:`.doc_topic.KeyBins`), or None."""
        return None

    def _topic_totals_device(self):
        """The topic totals on the device, exact (float64 or uint64), or None."""
        return None

    def _beta_bins_device(self):
        """B's histogram on the device, ``(bins, values, n_values, totals)`` as
        :func:`.prior_kernels.learn_from_bins` reads it, or None (a hybrid B, or totals that
        are not exact on the device)."""
        if self.hybrid:
            return None
        B = self._word_major_device()
        totals = self._topic_totals_device()
        if totals is None:
            return None
        n_bins = counts.VALUE_BINS
        capacity = self.corpus.n_tokens // n_bins + 1
        buffer, overflow = counts.value_bins(B.ravel(), n_bins, capacity, self._sm_count())
        return buffer[:n_bins], overflow, buffer[n_bins:], totals
