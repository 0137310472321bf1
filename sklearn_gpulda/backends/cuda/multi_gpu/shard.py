"""One part of a data-parallel chain on one GPU: the sparse sampler whose word-topic counts B
are summed over the parts of the corpus.

The parts are the GPUs of a multi-GPU chain (:mod:`.sampler`, B summed in place on the devices)
or the GPU workers of a Dask fit (B summed in place through NCCL, or on the client and sent back
as its non-zero cells). Each part's tokens are keyed by their place in the whole corpus
(``token_offset``) and its words are relabelled by the whole corpus's frequencies
(``word_frequencies``), so that every part's B has the same rows; integer counts sum exactly in
any order, so after every reduction B is the one-GPU chain's, bit for bit.

Imported only where CuPy runs the chain.
"""

import numpy as np

from ..sparse.sampler import CudaSparseSampler


class DeviceShard(CudaSparseSampler):
    """The sparse sampler on one GPU holding one part of a corpus whose B is summed over the
    parts (see the module's docstring).

    Its M-step counts the part's share of B into :meth:`word_topic_buffer` and leaves the topic
    totals until the sum is in: summed in place there, then :meth:`finish_reduction`, or given
    as cells to :meth:`set_word_topic`. B on the device has its rows in the relabelled word
    order; cells travel in the caller's word ids.
    """

    #: A shard's histograms are its part's: the corpus's priors are learned from the sum.
    resident_priors = False

    #: Device bytes kept beside the chain for summing B by changed cells (set before
    #: :meth:`load`, so that the memory plan leaves room for them).
    exchange_bytes = 0

    def _extra_bytes(self, corpus):
        return super()._extra_bytes(corpus) + int(self.exchange_bytes)

    def _topic_totals(self, beta=None):
        # The M-step's call, deferred: B holds this part's counts only until the parts are
        # summed (finish_reduction).
        pass

    def word_topic_buffer(self):
        """B on the device, which a reduction sums in place over the parts before
        :meth:`finish_reduction`.

        Returns
        -------
        cupy.ndarray of float32, shape (n_words, n_topics)
            Rows in the relabelled word order, the same in every part.
        """
        return self.words.B

    def finish_reduction(self):
        """Take the topic totals and the E-step's denominators from the summed B."""
        with self.device_context():
            super()._topic_totals()
            self.words.b_current = True

    def alpha_bins(self):
        """This part's share of alpha's binned table, on the host: ``(table, keys, n)`` of
        :meth:`~..doc_topic.DocTopicReading.doc_topic_bins`, which
        :func:`~..doc_topic.merged_alpha_table` sums over the parts; None for weighted
        counts."""
        corpus = self._require()
        with self.device_context():
            return self.doc_topic_bins(corpus)

    def word_topic_cells(self, dtype=np.int64):
        """The non-zero cells of B as it is now, the part's counts after an M-step and the
        corpus's once summed: ``(cells, counts)`` host arrays, cells ``word * n_topics +
        topic`` in the caller's word ids and of type ``dtype``, counts float32 (the NumPy
        engine's :meth:`~sklearn_gpulda.backends.numpy.sampler.NumpySampler.word_topic_cells`
        gives the same pair)."""
        cp = self.cp
        with self.device_context():
            flat = self.words.B.ravel()
            index = cp.flatnonzero(flat)
            values = flat[index]
            k = self.n_topics
            rows = cp.asarray(self.old_of_new, dtype=cp.int64)[index // k]
            cells = rows * k + index % k
            return cells.astype(dtype).get(), values.get()

    def set_word_topic(self, cells, counts):
        """Take the corpus-wide B, summed over the parts by the caller, as its non-zero cells,
        and the topic totals that follow from it.

        Parameters
        ----------
        cells : ndarray of int
            Distinct cell ids ``word * n_topics + topic`` in the caller's word ids (host).
        counts : ndarray of float32
            The counts of those cells (host).
        """
        cp = self.cp
        with self.device_context():
            w = self.words
            k = self.n_topics
            cells = cp.asarray(cells).astype(cp.int64)
            rows = cp.asarray(self.new_of_old, dtype=cp.int64)[cells // k]
            w.B.fill(0)
            w.B.ravel()[rows * k + cells % k] = cp.asarray(counts, dtype=cp.float32)
            del cells, rows
            self.finish_reduction()
