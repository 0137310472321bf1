"""Reading the document-topic counts A of the sparse CUDA chain: A itself, the histogram of its
counts, and the table learning alpha reads, binned on the device (``cuda/counts.cu``).

A mixin of :class:`~.sparse.CudaSparseSampler`, which provides the chunks (``_chunks_with_a``),
the corpus and the device; split from it so that each module keeps one job.
"""

import numpy as np

from .. import prior_learning as _learning
from . import counts
from .chain import decode_keys


def alpha_table_of_bins(table, keys, n):
    """:meth:`~sklearn_gpulda.backends.base.Sampler.doc_topic_table`'s pair from
    :meth:`DocTopicReading.doc_topic_bins`' arrays on the host. The counts become float64
    there: CuPy's uint64 -> float64 cast is a kernel it would compile on a user's machine (the
    cast is exact below 2**53)."""
    topic, count = decode_keys(keys)
    return table[:, 1:].astype(np.float64), (topic, count, n.astype(np.float64))


def merged_alpha_table(tables, keys, n_docs):
    """:meth:`~sklearn_gpulda.backends.base.Sampler.doc_topic_table`'s pair for a corpus in
    parts, from each part's :meth:`DocTopicReading.doc_topic_bins` (host arrays, in part
    order): the tables summed and the other entries' keys merged (integers: exact in any
    order), which is the one-GPU chain's table."""
    table = np.array(tables[0], dtype=np.uint64)
    for other in tables[1:]:
        table += other
    keys, where = np.unique(np.concatenate(keys), return_inverse=True)
    n = np.bincount(where.ravel(), weights=np.concatenate(n_docs),
                    minlength=keys.size).astype(np.uint64)
    return alpha_table_of_bins(table, keys, n)


def histogram_of_bins(table, big_keys, n_big):
    """The ``(topic, count, n_docs)`` pairs of a host copy of ``doc_topic_bins``' arrays, in
    increasing (topic, count) order, as every engine gives them. The table (K x KEY_BINS cells)
    is listed on the host: CuPy's ``nonzero`` would compile a kernel on a user's machine."""
    topic, count = np.nonzero(table)
    small_keys = ((topic.astype(np.uint64) << np.uint64(32))
                  | count.astype(np.float32).view(np.uint32).astype(np.uint64))
    keys = np.concatenate([small_keys, np.asarray(big_keys, dtype=np.uint64)])
    n = np.concatenate([table[topic, count], n_big]).astype(np.int64)
    order = np.argsort(keys, kind="stable")
    return decode_keys(keys[order]) + (n[order],)


class KeyBins:
    """A's histogram on the device, as ``counts.a_entry_histogram`` fills it: ``table`` (K x
    KEY_BINS uint64: ``table[k, c]`` documents hold c tokens of topic k), ``keys`` (room for the
    other entries' keys ``(topic << 32) | float bits``: a count of KEY_BINS or more takes that
    many tokens, so there are at most n_tokens / KEY_BINS of them) and ``n_keys`` (their number,
    uint64). The table and the number share one buffer, so that one copy reads both."""

    def __init__(self, cp, n_topics, n_tokens):
        n_bins = counts.KEY_BINS
        cells = n_topics * n_bins
        self._buffer = cp.zeros(cells + 1, dtype=cp.uint64)
        self.table = self._buffer[:cells].reshape(n_topics, n_bins)
        self.n_keys = self._buffer[cells:]
        self.keys = cp.empty(n_tokens // n_bins + 1, dtype=cp.uint64)

    def on_host(self):
        """``(table, keys, n)`` host arrays: ``n[i]`` documents hold the pair of ``keys[i]``
        (sorted, distinct); None where the keys overflowed their room (the kernels stop
        listing there; integer counts never reach it)."""
        host = self._buffer.get()
        cells = self.table.size
        n_over = int(host[cells])
        if n_over > self.keys.size:
            return None
        # Sorted and counted on the host: there are few, and CuPy's unique would compile half
        # a dozen kernels on a user's machine.
        big_keys, n_big = np.unique(self.keys[:n_over].get(), return_counts=True)
        return host[:cells].reshape(self.table.shape), big_keys, n_big.astype(np.uint64)


class DocTopicReading:
    """What the sparse CUDA chain reads of A (see the module's docstring)."""

    def doc_topic_counts(self):
        corpus = self._require()
        topic, count, doc = self._entries_on_host()
        out = np.zeros((corpus.n_docs, self.n_topics), dtype=np.float64)
        out[doc, topic] = count
        return out

    def _entries_on_host(self):
        """Every non-zero of A as host arrays (topic, count, document)."""
        with self.device_context():
            keys, doc = [], []
            for ch in self._chunks_with_a():
                k = self._chunk_keys(ch)
                nnz = ch.a_row[:, 1].get().astype(np.int64)
                keys.append(k.get())
                doc.append(np.repeat(np.arange(ch.d0, ch.d1), nnz))
        keys = np.concatenate(keys) if keys else np.zeros(0, dtype=np.uint64)
        topic, count = decode_keys(keys)
        return topic, count, np.concatenate(doc) if doc else np.zeros(0, int)

    def _chunk_keys(self, ch):
        """The chunk's A entries as uint64 keys ``(topic << 32) | float bits``, document-major."""
        cp = self.cp
        nnz = ch.a_row[:, 1].astype(cp.int64)
        key_off = cp.zeros(ch.n_docs, dtype=cp.int64)
        if ch.n_docs > 1:
            cp.cumsum(nnz[:-1], out=key_off[1:])
        total = int(nnz.sum()) if ch.n_docs else 0
        keys = cp.empty(total, dtype=cp.uint64)
        counts.a_entry_keys(ch, key_off, keys, self._n_sm)
        return keys

    def doc_topic_histogram(self):
        corpus = self._require()
        cp = self.cp
        with self.device_context():
            bins = self.doc_topic_bins(corpus)
            if bins is None:
                keys = [self._chunk_keys(ch) for ch in self._chunks_with_a()]
                keys = cp.concatenate(keys) if keys else cp.zeros(0, dtype=cp.uint64)
                return self._topic_count_pairs(keys)
        return histogram_of_bins(*bins)

    def doc_topic_table(self):
        corpus = self._require()
        with self.device_context():
            # On the host in one copy: the fixed point (learn_alpha) sends its inputs to the
            # device together.
            bins = self.doc_topic_bins(corpus)
            if bins is None or bins[0].shape[1] != _learning.TABLE_COUNTS:
                return super().doc_topic_table()
            return alpha_table_of_bins(*bins)

    def doc_topic_bins(self, corpus):
        """A's integer counts below ``KEY_BINS`` binned per topic by a kernel reading A's rows,
        the other entries' keys sorted and counted (fewer than n_tokens / KEY_BINS of them):
        sorting every key of A would dominate a prior update at large K, and listing them
        takes 8 bytes per entry of device memory. The chain's device must be the current one
        (:meth:`~.chain.CudaChain.device_context`).

        Parameters
        ----------
        corpus : TokenCorpus
            The loaded corpus.

        Returns
        -------
        (table, keys, n) of host arrays, or None for weighted counts
            ``table[k, c]`` (uint64, shape (K, KEY_BINS)) documents hold c tokens of topic k;
            ``n[i]`` documents hold the pair of ``keys[i]`` (sorted, distinct). The table comes
            in one copy with the overflow's count, so a prior update waits on the device once
            for both.
        """
        found = self.doc_topic_bins_device(corpus)
        return None if found is None else found.on_host()

    def doc_topic_bins_device(self, corpus):
        """:meth:`doc_topic_bins` left on the device, nothing read back: a :class:`KeyBins`,
        or None for weighted counts."""
        if not corpus.integral:
            return None
        bins = KeyBins(self.cp, self.n_topics, corpus.n_tokens)
        for ch in self._chunks_with_a():
            counts.a_entry_histogram(ch, bins.table, bins.keys, bins.n_keys, self._n_sm)
        return bins
