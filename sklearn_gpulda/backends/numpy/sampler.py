"""The NumPy backend: ESCA on the CPU, and the oracle the CUDA backends are tested against.

It follows ``doc/algorithm.md`` literally. Rows of A are held dense, but the document branch is
computed exactly as a sparse sampler would: zero entries of A add exactly 0.0 to a float32
running sum, so the dense running sum equals the running sum over the non-zeros in topic order.
Work is chunked over tokens so that no temporary exceeds a few tens of megabytes.
"""

import numpy as np

from ... import _random
from ..._device import CPU
from ..base import Sampler
from .dense_rule import draw_topics_dense
from .sparse_rule import draw_topics, sparse_mass
from .tables import WordTables

#: Draw rules of the E-step: 'sparse' is the two-branch rule of ``doc/algorithm.md``, 'dense'
#: the single running sum of the dense kernels (:mod:`.dense_rule`). Both take the same uniforms.
RULES = ("sparse", "dense")


def _available_memory():
    """Bytes of host memory available now (Linux), or None where it cannot be read."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def host_bytes(n_docs, n_words, n_tokens, n_topics):
    """Host bytes of a chain: A (D x K float32), B, Bhat and the prior's running sums (V x K
    float32 each), float64 count temporaries of the same shapes, and about 24 bytes per token."""
    return 12 * n_docs * n_topics + 20 * n_words * n_topics + 24 * n_tokens


def check_host_memory(n_docs, n_words, n_tokens, n_topics):
    """Raise MemoryError before allocating when the chain cannot fit in host memory."""
    need = host_bytes(n_docs, n_words, n_tokens, n_topics)
    have = _available_memory()
    if have is not None and need > have:
        gib = 1 << 30
        raise MemoryError(
            f"n_components={n_topics} with {n_docs} documents and {n_words} words needs about "
            f"{need / gib:.1f} GiB of host memory for the CPU engine, but only {have / gib:.1f} GiB "
            "is available; use fewer topics, fewer documents per call (partial_fit), or a GPU"
        )


def count_pairs(index, topics, weight, n_rows, n_topics):
    """Weighted counts of (row, topic) pairs as float64 of shape (n_rows, n_topics)."""
    flat = index.astype(np.int64) * n_topics + topics
    counts = np.bincount(flat, weights=weight, minlength=n_rows * n_topics)
    return counts.astype(np.float64, copy=False).reshape(n_rows, n_topics)


def value_counts(*keys):
    """Distinct tuples of ``keys`` (equal-length arrays) and how often each occurs.

    Returns
    -------
    uniques : list of ndarray
        One array per key, the distinct tuples in lexicographic order.
    counts : ndarray of int64
    """
    if keys[0].size == 0:
        return [k[:0] for k in keys], np.zeros(0, dtype=np.int64)
    order = np.lexsort(keys[::-1])
    keys = [k[order] for k in keys]
    new = np.zeros(keys[0].size, dtype=bool)
    new[0] = True
    for k in keys:
        new[1:] |= k[1:] != k[:-1]
    starts = np.flatnonzero(new)
    counts = np.diff(np.append(starts, keys[0].size)).astype(np.int64)
    return [k[starts] for k in keys], counts


class NumpySampler(Sampler):
    """ESCA on the CPU with NumPy (see :class:`~sklearn_gpulda.backends.base.Sampler`).

    Parameters
    ----------
    n_topics, alpha, beta, seed, device
        As :class:`~sklearn_gpulda.backends.base.Sampler`.
    rule : {'sparse', 'dense'}, default='sparse'
        Draw rule of every E-step (:data:`RULES`); everything else is shared.
    """

    def __init__(self, n_topics, alpha, beta, seed, device=CPU, rule="sparse"):
        super().__init__(n_topics, alpha, beta, seed, device)
        if rule not in RULES:
            raise ValueError(f"rule must be one of {RULES}, got {rule!r}")
        self.rule = rule
        self._clear()

    def _clear(self):
        self._z = self._a = self._b = self._tables = self._fixed_bhat = self._sum = None

    # -- memory ---------------------------------------------------------------------------------
    def estimate_bytes(self, corpus):
        need = host_bytes(corpus.n_docs, corpus.n_words, corpus.n_tokens, self.n_topics)
        return need, need

    # -- the chain ------------------------------------------------------------------------------
    def load(self, corpus):
        check_host_memory(corpus.n_docs, corpus.n_words, corpus.n_tokens, self.n_topics)
        self.release()
        self.corpus = corpus

    def _token_index(self):
        return np.arange(self._require().n_tokens, dtype=np.int64)

    def init_topics(self, iteration=0, stream=_random.STREAM_INIT):
        t = self._token_index()
        self._set(_random.token_topic(self.seed, iteration, stream, t, self.n_topics))

    def set_topics(self, topics):
        self._set(self._checked_topics(topics))

    def fix_topic_word(self, components):
        self._require()
        comp = np.asarray(components, dtype=np.float64)
        self._fixed_bhat = np.ascontiguousarray(
            (comp / comp.sum(axis=1, keepdims=True)).T, dtype=np.float32
        )
        self._tables = WordTables(self._fixed_bhat, self.alpha)

    def sweep(self, iteration, stream=_random.STREAM_SAMPLE, sub=0):
        c = self._require()
        u = _random.token_uniform(self.seed, iteration, stream, self._token_index(), sweep=sub)
        if self.rule == "dense":
            z = draw_topics_dense(c.doc, c.word, self._z, c.weight, u, self._a, self._tables.bhat,
                                  self.alpha, self._tables.word_side)
        else:
            z = draw_topics(c.doc, c.word, self._z, c.weight, u, self._a, self._tables)
        self._set(z)

    def _set(self, z):
        """The M-step: A, and B with its tables unless the topic-word side is fixed."""
        c = self._require()
        self._z = z
        self._a = count_pairs(c.doc, z, c.weight, c.n_docs, self.n_topics).astype(np.float32)
        if self._fixed_bhat is None:
            self._b = count_pairs(c.word, z, c.weight, c.n_words, self.n_topics).astype(np.float32)
            self._priors_changed()

    def _priors_changed(self):
        if self._fixed_bhat is not None:
            self._tables = WordTables(self._fixed_bhat, self.alpha)
        elif self._b is not None:
            b = self._b.astype(np.float64)
            self._tables = WordTables.from_counts(b, b.sum(axis=0), self.beta, self.alpha)

    # -- reading the state ----------------------------------------------------------------------
    def _word_major_counts(self):
        c = self._require()
        if self._fixed_bhat is None:
            return self._b.astype(np.float64)
        return count_pairs(c.word, self._z, c.weight, c.n_words, self.n_topics)

    def topics(self):
        return self._z.copy()

    def word_topic_counts(self):
        return np.ascontiguousarray(self._word_major_counts().T)

    def doc_topic_counts(self):
        return self._a.astype(np.float64)

    def log_likelihood(self):
        c = self._require()
        s = sparse_mass(c.doc, c.word, self._a, self._tables).astype(np.float64)
        q = self._tables.qtotal[c.word].astype(np.float64)
        norm = c.doc_lengths() + self.alpha.sum()
        terms = np.log(s + q) - np.log(norm[c.doc])
        if c.weight is not None:
            terms *= c.weight
        return float(terms.sum())

    def doc_topic_histogram(self):
        doc, topic = np.nonzero(self._a)
        (topic, count), n_docs = value_counts(topic.astype(np.int64),
                                              self._a[doc, topic].astype(np.float64))
        return topic, count, n_docs

    def word_topic_histogram(self):
        b = self._word_major_counts()
        (count,), n_cells = value_counts(b[b != 0])
        return count, n_cells, b.sum(axis=0)

    # -- averaging ------------------------------------------------------------------------------
    def _accumulate(self):
        counts = self._word_major_counts()
        if self._sum is None:
            self._sum = counts.copy()
        else:
            self._sum += counts

    def _accumulated(self, divisor):
        return np.ascontiguousarray((self._sum / divisor).T)

    def release(self):
        super().release()
        self._clear()
