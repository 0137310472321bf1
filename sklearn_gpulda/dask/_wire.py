"""What travels between the shards and the client of a Dask fit, and how each side reads it.

A shard's part of the word-topic matrix B, and the corpus-wide total sent back, travel as their
non-zero cells: cell ids ``word * K + topic`` (:func:`cell_dtype`) and float32 counts. The
document-topic histograms that prior learning reads travel as ``(topic, count, n_docs)`` triples
and are merged by :func:`~sklearn_gpulda.backends.prior_learning.merge_histograms`.
"""

import numpy as np


def cell_dtype(n_words, n_topics):
    """The integer type of a cell index ``word * K + topic`` on the wire: 4 bytes when every
    cell fits, else 8."""
    return np.uint32 if n_words * n_topics <= 2**32 else np.int64


def dense_word_topic(cells, counts, n_words, n_topics, dtype=np.float32):
    """B (V x K) of ``dtype`` from its non-zero cells."""
    b = np.zeros(n_words * n_topics, dtype=dtype)
    b[cells] = counts
    return b.reshape(n_words, n_topics)
