"""The NumPy backend: ESCA on the CPU, and the oracle the CUDA backends are tested against.

It follows ``doc/algorithm.md`` literally. Rows of A are held dense, but the document branch is
computed exactly as a sparse sampler would: zero entries of A add exactly 0.0 to a float32
running sum, so the dense running sum equals the running sum over the non-zeros in topic order.
Work is chunked over tokens so that no temporary exceeds a few tens of megabytes.
"""

import numpy as np

from ... import _random
from ..._corpus import _stable_counting_sort
from ..._device import CPU
from ..base import Sampler
from .dense_rule import draw_topics_dense
from .sparse_rule import DocRows, draw_topics, sparse_mass
from .tables import WordTables
from .threads import ThreadTeam, resolve_n_jobs

#: Draw rules of the E-step: 'sparse' is the two-branch rule of ``doc/algorithm.md``, 'dense'
#: the single running sum of the dense kernels (:mod:`.dense_rule`). Both take the same uniforms.
RULES = ("sparse", "dense")

#: Below this many topics the document branch always runs over dense rows (listing A's
#: non-zeros costs more than it saves).
SPARSE_ROWS_MIN_TOPICS = 64


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
    float32 each), float64 count temporaries of the same shapes, and about 56 bytes per token
    (the word-major order of the threaded M-step and the listing of A's non-zeros included)."""
    return 12 * n_docs * n_topics + 20 * n_words * n_topics + 56 * n_tokens


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


def count_pairs(index, topics, weight, n_rows, n_topics, dtype=np.float64):
    """Weighted counts of (row, topic) pairs, shape (n_rows, n_topics): exact integer counts or
    float64 weighted sums, rounded once to ``dtype``."""
    flat = index.astype(np.int64) * n_topics + topics
    counts = np.bincount(flat, weights=weight, minlength=n_rows * n_topics)
    return counts.astype(dtype, copy=False).reshape(n_rows, n_topics)


#: Cells of a table counted at once by :func:`count_rows`: the block's int64 or float64 counts
#: (2 MB) stay in a core's cache and the table is written once, in its own dtype. Counting a
#: whole V x K table in one ``bincount`` wrote and read a float64 table twice its size.
COUNT_BLOCK_CELLS = 1 << 18


def count_rows(out, index, topics, weight, row_ptr, rows, order=None):
    """Count the (row, topic) pairs of the rows ``rows = (r0, r1)`` into ``out[r0:r1]``.

    The tokens of row r are ``order[row_ptr[r]:row_ptr[r + 1]]`` (``row_ptr``'s range itself
    when ``order`` is None), in canonical order within the row, so each cell sums its weights
    as one :func:`count_pairs` over every token would, and rounds once to ``out``'s dtype.
    """
    r0, r1 = rows
    n_topics = out.shape[1]
    step = max(1, COUNT_BLOCK_CELLS // n_topics)
    for b0 in range(r0, r1, step):
        b1 = min(r1, b0 + step)
        t0, t1 = int(row_ptr[b0]), int(row_ptr[b1])
        t = slice(t0, t1) if order is None else order[t0:t1]
        w = None if weight is None else weight[t]
        flat = (index[t] - b0).astype(np.int64) * n_topics + topics[t]
        out[b0:b1] = np.bincount(flat, weights=w, minlength=(b1 - b0) * n_topics).reshape(
            b1 - b0, n_topics)


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


class HostWordTopic:
    """What a sampler whose word-topic counts are on the host derives from them: the histogram
    for learning beta, and the running sum for averaging. The class using it provides
    ``_word_major_counts()`` (B, V x K float64) and keeps ``_sum`` (None at first)."""

    def word_topic_histogram(self):
        b = self._word_major_counts()
        (count,), n_cells = value_counts(b[b != 0])
        return count, n_cells, b.sum(axis=0)

    def _accumulate(self):
        counts = self._word_major_counts()
        if self._sum is None:
            self._sum = counts.copy()
        else:
            self._sum += counts

    def _accumulated(self, divisor):
        return np.ascontiguousarray((self._sum / divisor).T)


class NumpySampler(HostWordTopic, Sampler):
    """ESCA on the CPU with NumPy (see :class:`~sklearn_gpulda.backends.base.Sampler`).

    Parameters
    ----------
    n_topics, alpha, beta, seed, device
        As :class:`~sklearn_gpulda.backends.base.Sampler`.
    rule : {'sparse', 'dense'}, default='sparse'
        Draw rule of every E-step (:data:`RULES`); everything else is shared.
    n_jobs : int or None, default=None
        Threads, read as scikit-learn reads ``n_jobs`` (:func:`~.threads.resolve_n_jobs`). The
        chain is the same, bit for bit, whatever the number (:mod:`.threads`).

    Attributes
    ----------
    token_offset : int
        Canonical index of the loaded corpus's first token (0 for a whole corpus). A shard of a
        larger corpus sets it, so that its tokens draw the numbers they draw in the whole.
    """

    def __init__(self, n_topics, alpha, beta, seed, device=CPU, rule="sparse", n_jobs=None):
        super().__init__(n_topics, alpha, beta, seed, device)
        if rule not in RULES:
            raise ValueError(f"rule must be one of {RULES}, got {rule!r}")
        self.rule = rule
        self.team = ThreadTeam(resolve_n_jobs(n_jobs))
        self.token_offset = 0
        self._clear()

    def _clear(self):
        self._z = self._a = self._b = self._tables = self._fixed_bhat = self._sum = None
        self._by_word = self._word_ptr = None
        self._rows = None  # (the A they list, DocRows), made once per A

    # -- memory ---------------------------------------------------------------------------------
    def estimate_bytes(self, corpus):
        need = host_bytes(corpus.n_docs, corpus.n_words, corpus.n_tokens, self.n_topics)
        return need, need

    # -- the chain ------------------------------------------------------------------------------
    def load(self, corpus):
        check_host_memory(corpus.n_docs, corpus.n_words, corpus.n_tokens, self.n_topics)
        self.release()
        self.corpus = corpus
        # Every sweep reads the token arrays: expand them now, while the corpus has its counts
        # (a fit may release those once the sampler is loaded).
        corpus.doc, corpus.word, corpus.weight
        # Tokens of each word in canonical order: B's rows are counted by word ranges (on
        # separate threads, in cache-sized blocks), each cell summing its tokens in token order.
        self._by_word, self._word_ptr = _stable_counting_sort(corpus.word, corpus.n_words)

    def _token_index(self):
        n = self._require().n_tokens
        return np.arange(self.token_offset, self.token_offset + n, dtype=np.int64)

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
        self._tables = WordTables(self._fixed_bhat, self.alpha, team=self.team)

    def sweep(self, iteration, stream=_random.STREAM_SAMPLE, sub=0):
        c = self._require()
        u = self._uniforms(iteration, stream, sub)
        if self.rule == "dense":
            z = draw_topics_dense(c.doc, c.word, self._z, c.weight, u, self._a, self._tables.bhat,
                                  self.alpha, self._tables.word_side, team=self.team)
        else:
            z = draw_topics(c.doc, c.word, self._z, c.weight, u, self._a, self._tables,
                            team=self.team, doc_rows=self._doc_rows())
        self._set(z)

    def _doc_rows(self):
        """A's non-zeros by document when K is large enough for them to pay (else None)."""
        if self.n_topics < SPARSE_ROWS_MIN_TOPICS:
            return None
        # Listed once per M-step, for the next sweep and any likelihood in between.
        if self._rows is None or self._rows[0] is not self._a:
            self._rows = (self._a, DocRows(self._a))
        return self._rows[1]

    def _uniforms(self, iteration, stream, sub):
        """Every token's uniform, the chunks computed on the team's threads."""
        n = self._require().n_tokens
        u = np.empty(n, dtype=np.float32)

        def fill(sl):
            t = np.arange(sl.start, sl.stop, dtype=np.int64) + self.token_offset
            u[sl] = _random.token_uniform(self.seed, iteration, stream, t, sweep=sub)

        self.team.map(fill, self.team.token_chunks(n, 1))
        return u

    def _set(self, z):
        """The M-step: A, and B with its tables unless the topic-word side is fixed."""
        self._require()
        self._z = z
        self._a = self._doc_topic(z)
        if self._fixed_bhat is None:
            self._b = self._word_topic(z, np.float32)
            self._priors_changed()

    def _doc_topic(self, z):
        """A as float32, its rows counted by document ranges on the team's threads (tokens are
        document-major, so each range is a run of tokens)."""
        c = self._require()
        a = np.empty((c.n_docs, self.n_topics), dtype=np.float32)
        self.team.map(lambda rows: count_rows(a, c.doc, z, c.weight, c.doc_ptr, rows),
                      self.team.row_ranges(c.doc_ptr))
        return a

    def _word_topic(self, z, dtype=np.float64):
        """B (V x K) in ``dtype``, its rows counted, and rounded, by word ranges on the team's
        threads: a V x K pass on one thread would cost a sweep as much as its draws."""
        c = self._require()
        b = np.empty((c.n_words, self.n_topics), dtype=dtype)
        self.team.map(lambda rows: count_rows(b, c.word, z, c.weight, self._word_ptr, rows,
                                              order=self._by_word),
                      self.team.row_ranges(self._word_ptr))
        return b

    def _priors_changed(self):
        if self._fixed_bhat is not None:
            self._tables = WordTables(self._fixed_bhat, self.alpha, team=self.team)
        elif self._b is not None:
            # The float32 counts go in as they are: the tables widen them to float64 range by
            # range on the team's threads, and the column sums accumulate in float64 (a float64
            # copy of B first was a serial V x K pass, a tenth of a 16-thread sweep at K = 1,000).
            self._tables = WordTables.from_counts(self._b, self._b.sum(axis=0, dtype=np.float64),
                                                  self.beta, self.alpha, team=self.team)

    # -- reading the state ----------------------------------------------------------------------
    def _word_major_counts(self):
        self._require()
        if self._fixed_bhat is None:
            return self._b.astype(np.float64)
        return self._word_topic(self._z)

    def topics(self):
        return self._z.copy()

    def word_topic_counts(self):
        return np.ascontiguousarray(self._word_major_counts().T)

    def doc_topic_counts(self):
        return self._a.astype(np.float64)

    def log_likelihood(self):
        c = self._require()
        s = sparse_mass(c.doc, c.word, self._a, self._tables, team=self.team,
                        doc_rows=self._doc_rows()).astype(np.float64)
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

    def release(self):
        super().release()
        self._clear()
        self.team.close()
