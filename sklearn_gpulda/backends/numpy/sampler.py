"""The NumPy backend: ESCA on the CPU, and the oracle the CUDA backends are tested against.

It follows ``doc/algorithm.md`` literally. Rows of A are held dense, but the document branch is
computed exactly as a sparse sampler would: zero entries of A add exactly 0.0 to a float32
running sum, so the dense running sum equals the running sum over the non-zeros in topic order.
Work is chunked over tokens so that no temporary exceeds a few tens of megabytes.
"""

import numpy as np

from ..._input.layouts import stable_counting_sort
from ..._runtime.device import CPU
from ..._runtime.host import available_memory
from .. import random as _random
from ..base import Sampler, normalised_rows
from .dense_rule import draw_topics_dense
from .mh_rule import FrozenState, draw_topics_mh, word_ranks
from .processes import choose_team, make_team
from .row_tasks import (
    UniformKey,
    accumulate,
    count_doc_and_word_rows,
    count_rows,
    nonzero_histogram,
    topic_range,
    transposed,
    uniform_range,
    value_counts,
)
from .sparse_rule import draw_topics, log_likelihood_terms
from .tables import WordTables
from .threads import resolve_n_jobs

#: Draw rules of the E-step: 'sparse' is the two-branch rule of ``doc/algorithm.md``, 'dense'
#: the single running sum of the dense kernels (:mod:`.dense_rule`); both take the same uniforms.
#: 'mh' runs a short Metropolis-Hastings chain per token with the same stationary distribution
#: (:mod:`.mh_rule`: a reference for an O(1) sampler, integer counts of a whole corpus only).
RULES = ("sparse", "dense", "mh")

#: Fewest tokens for which a chain with several jobs runs in worker processes. A sweep of
#: fewer takes some tens of milliseconds on one core, about what the processes' round trips and
#: the copies into shared memory cost (an estimate from the 16-core measurements of
#: ``doc/performance.md``, not measured at this size); mini-batches of online learning stay on
#: threads.
PROCESS_MIN_TOKENS = 100_000

#: Below this many topics the document branch always runs over dense rows (listing A's
#: non-zeros costs more than it saves).
SPARSE_ROWS_MIN_TOPICS = 64


def host_bytes(n_docs, n_words, n_tokens, n_topics):
    """Host bytes of a chain at its peak. Per document and topic 8: A (D x K float32), and the
    new A the M-step counts before the old one goes. Per word and topic 32: B and Bhat (V x K
    float32), the running sum of averaging (float64), the K x V float64 model it is read into
    and the transposition's float64 temporary (measured with tracemalloc: 310 MB at D = 60,
    V = 40, K = 200,000, against 352 MB here). And about 76 bytes per token (the corpus's token
    arrays, the copies worker processes share, the word-major order, two topic arrays, the
    uniforms and the listing of A's non-zeros)."""
    return (8 * n_docs + 32 * n_words) * n_topics + 76 * n_tokens


def check_host_memory(n_docs, n_words, n_tokens, n_topics):
    """Raise MemoryError before allocating when the chain cannot fit in host memory."""
    need = host_bytes(n_docs, n_words, n_tokens, n_topics)
    have = available_memory()
    if have is not None and need > have:
        gib = 1 << 30
        raise MemoryError(
            f"n_components={n_topics} with {n_docs} documents and {n_words} words needs about "
            f"{need:,} bytes, {need / gib:.1f} GiB of host memory for the CPU engine "
            f"({8 * n_docs + 32 * n_words:,} bytes per topic), but only {have:,} bytes "
            f"({have / gib:.1f} GiB) are available; use fewer topics, fewer documents per call "
            "(partial_fit), or a GPU"
        )


class NumpySampler(Sampler):
    """ESCA on the CPU with NumPy (see :class:`~sklearn_gpulda.backends.base.Sampler`).

    Parameters
    ----------
    n_topics, alpha, beta, seed, device
        As :class:`~sklearn_gpulda.backends.base.Sampler`.
    rule : {'sparse', 'dense', 'mh'}, default='sparse'
        Draw rule of every E-step (:data:`RULES`); everything else is shared.
    n_jobs : int or None, default=None
        The most workers (threads or processes), read as scikit-learn reads ``n_jobs``
        (:func:`~.threads.resolve_n_jobs`); each corpus loaded gets as many as its work and
        the free cores pay for (:func:`~.processes.worker_count`), none when one thread is as
        fast. The chain is the same, bit for bit, whatever the number (:mod:`.threads`).
    worker_processes : bool, default=True
        Whether several jobs may run in worker processes on a large corpus
        (:func:`~.processes.make_team`); False keeps them on threads, for a caller that may not
        start processes (a daemon process, such as a Dask worker's).
    data_parallel : bool, default=False
        Whether the chain holds one part of a corpus whose word-topic counts B its caller sums
        over the parts (data-parallel training). The M-step then counts only this part's B,
        read by :meth:`word_topic_cells`, and the E-step samples against the corpus-wide B
        given to :meth:`set_word_topic`. Each part sets ``token_offset``, so that the parts
        together are the single chain, bit for bit, for integer counts.

    Attributes
    ----------
    token_offset : int
        Canonical index of the loaded corpus's first token (0 for a whole corpus). A shard of a
        larger corpus sets it, so that its tokens draw the numbers they draw in the whole.
    """

    def __init__(self, n_topics, alpha, beta, seed, device=CPU, rule="sparse", n_jobs=None,
                 worker_processes=True, data_parallel=False):
        super().__init__(n_topics, alpha, beta, seed, device)
        if rule not in RULES:
            raise ValueError(f"rule must be one of {RULES}, got {rule!r}")
        if rule == "mh" and data_parallel:
            raise ValueError("rule='mh' draws other tokens' topics as proposals, so it needs "
                             "the whole corpus; it does not run data-parallel")
        self.rule = rule
        self.worker_processes = bool(worker_processes)
        self.data_parallel = bool(data_parallel)
        # Let the document branch walk A's non-zeros where they are few (same draws).
        self.sparse_rows = n_topics >= SPARSE_ROWS_MIN_TOPICS
        self.n_jobs = resolve_n_jobs(n_jobs)
        self.team = make_team(1)  # chosen again for each corpus loaded
        self.token_offset = 0
        self._clear()

    def _clear(self):
        self._z = self._a = self._b = self._tables = self._fixed_bhat = self._sum = None
        self._by_word = self._word_ptr = self._word_rank = None
        self._tokens = None  # (doc, word, weight, doc_ptr) where the team's workers read them
        self._totals = None  # B's column sums when the M-step had them for free
        self._z_key = None
        self._part_b = None  # a data-parallel part's own B, as its last M-step counted it

    # -- memory ---------------------------------------------------------------------------------
    def estimate_bytes(self, corpus):
        need = host_bytes(corpus.n_docs, corpus.n_words, corpus.n_tokens, self.n_topics)
        return need, need

    # -- the chain ------------------------------------------------------------------------------
    def load(self, corpus):
        check_host_memory(corpus.n_docs, corpus.n_words, corpus.n_tokens, self.n_topics)
        self.release()
        # As many workers as the sweep's work and the free cores pay for, up to n_jobs (none
        # for a small corpus or a busy machine); processes where they may start, threads for
        # a small corpus (a mini-batch) (.processes.choose_team).
        self.team = choose_team(self.n_jobs, corpus.n_tokens, self.n_topics,
                                self.worker_processes and corpus.n_tokens >= PROCESS_MIN_TOKENS)
        self.corpus = corpus
        # Every sweep reads the token arrays: expand them now, while the corpus has its counts
        # (a fit may release those once the sampler is loaded).
        share = self.team.share
        self._tokens = (share("doc", corpus.doc), share("word", corpus.word),
                        share("weight", corpus.weight), share("doc_ptr", corpus.doc_ptr))
        # Tokens of each word in canonical order: B's rows are counted by word ranges (in
        # cache-sized blocks, on separate workers), each cell summing its tokens in token order.
        by_word, word_ptr = stable_counting_sort(corpus.word, corpus.n_words)
        self._by_word, self._word_ptr = share("by_word", by_word), share("word_ptr", word_ptr)
        if self.rule == "mh":
            if not corpus.integral:
                self.release()
                raise ValueError("rule='mh' needs integer counts: a random token of a "
                                 "document stands for its topic counts")
            self._word_rank = word_ranks(by_word, word_ptr, corpus.word)

    def init_topics(self, iteration=0, stream=_random.STREAM_INIT):
        n = self._require().n_tokens
        key = self._free_topic_key()
        z = self.team.empty(key, (n,), np.int32)
        self.team.run(topic_range, self.team.token_ranges(n), seed=self.seed,
                      iteration=iteration, stream=stream, offset=self.token_offset,
                      n_topics=self.n_topics, out=z)
        self._set(z, key)

    def set_topics(self, topics):
        self._set(self._checked_topics(topics))

    def fix_topic_word(self, components, row_sums=None):
        if self.data_parallel:
            raise NotImplementedError("a data-parallel part samples against the summed counts "
                                      "it is given")
        self._require()
        self._fixed_bhat = self.team.share("fixed_bhat", np.ascontiguousarray(
            normalised_rows(np, components, row_sums).T, dtype=np.float32))
        self._tables = WordTables(self._fixed_bhat, self.alpha, team=self.team)

    def sweep(self, iteration, stream=_random.STREAM_SAMPLE, sub=0):
        self._ensure_tables()
        doc, word, weight, _ = self._loaded_tokens()
        key = self._free_topic_key()
        out = self.team.empty(key, doc.shape, np.int32)
        if self.rule == "mh":
            if stream != _random.STREAM_SAMPLE or sub or self._fixed_bhat is not None:
                raise ValueError("rule='mh' runs the batch E-step of training only")
            state = FrozenState(self._z, self._tokens[3], self._by_word, self._word_ptr,
                                self._a, self._tables, self.alpha)
            out[...] = draw_topics_mh(state, doc, word, self.seed, iteration,
                                      self.token_offset, word_rank=self._word_rank)
        elif self.rule == "dense":
            u = self._uniforms(iteration, stream, sub)
            draw_topics_dense(doc, word, self._z, weight, u, self._a, self._tables.bhat,
                              self.alpha, self._tables.word_side, team=self.team, out=out,
                              cells=self._tables.cells)
        else:
            # Each draw task makes its chunks' uniforms (one round of tasks fewer per sweep).
            u = UniformKey(self.seed, iteration, stream, sub, self.token_offset)
            draw_topics(doc, word, self._z, weight, u, self._a, self._tables, team=self.team,
                        sparse_rows=self.sparse_rows, out=out)
        self._set(out, key)

    def _loaded_tokens(self):
        """(doc, word, weight, doc_ptr) of the loaded corpus, where the team's workers read."""
        self._require()
        return self._tokens

    def _free_topic_key(self):
        """Of the team's two topic arrays, the one the current topics are not in."""
        return "z1" if self._z_key == "z0" else "z0"

    def _uniforms(self, iteration, stream, sub):
        """Every token's uniform, computed over token ranges on the team."""
        n = self._require().n_tokens
        u = self.team.empty("u", (n,), np.float32)
        self.team.run(uniform_range, self.team.token_ranges(n), seed=self.seed,
                      iteration=iteration, stream=stream, sub=sub, offset=self.token_offset,
                      out=u)
        return u

    def _hold_topics(self, z, key=None):
        """Make ``z`` the current topics. ``key`` names the team's array ``z`` is already in
        (None: copied into the free one)."""
        self._require()
        if key is None:
            key = self._free_topic_key()
            z = self.team.share(key, z)
        self._z, self._z_key = z, key

    def _set(self, z, key=None):
        """The M-step: A, and B with its tables unless the topic-word side is fixed; a
        data-parallel part's own B, whose tables wait for the corpus-wide B."""
        self._hold_topics(z, key)
        if self.data_parallel:
            self._a = self._doc_topic(z)
            self._part_b = self._word_topic(z)
        elif self._fixed_bhat is not None:
            self._a = self._doc_topic(z)
        else:
            self._a, self._b, self._totals = self._doc_and_word_topic(z)
            self._priors_changed()

    def _doc_topic(self, z):
        """A as float32, its rows counted by document ranges on the team (tokens are
        document-major, so each range is a run of tokens)."""
        c = self._require()
        _, _, weight, doc_ptr = self._loaded_tokens()
        a = self.team.empty("a", (c.n_docs, self.n_topics), np.float32)
        self.team.run(count_rows, self.team.row_ranges(c.doc_ptr), out=a, index=self._tokens[0],
                      topics=z, weight=weight, row_ptr=doc_ptr)
        return a

    def _doc_and_word_topic(self, z):
        """A and B (float32), counted in one round of tasks on the team: A by document
        ranges, B by word ranges, each range as :meth:`_doc_topic` and :meth:`_word_topic`
        count it (the same numbers); and for unit tokens the topic totals (float64, from the
        B tasks' per-topic token counts), else None."""
        c = self._require()
        doc, word, weight, doc_ptr = self._loaded_tokens()
        a = self.team.empty("a", (c.n_docs, self.n_topics), np.float32)
        b = self.team.empty(f"b:{np.dtype(np.float32).str}", (c.n_words, self.n_topics),
                            np.float32)
        items = [("a", r) for r in self.team.row_ranges(c.doc_ptr)]
        items += [("b", r) for r in self.team.row_ranges(self._word_ptr)]
        parts = self.team.run(count_doc_and_word_rows, items, a=a, b=b, doc=doc, word=word,
                              topics=z, weight=weight, doc_ptr=doc_ptr, word_ptr=self._word_ptr,
                              by_word=self._by_word)
        if weight is not None:
            return a, b, None
        totals = np.zeros(self.n_topics, dtype=np.int64)
        for part in parts:
            if part is not None:
                totals += part
        return a, b, totals.astype(np.float64)

    def _word_topic(self, z):
        """B (V x K) in float64, its rows counted by word ranges on the team: a V x K pass on
        one thread would cost a sweep as much as its draws."""
        c = self._require()
        _, word, weight, _ = self._loaded_tokens()
        b = self.team.empty(f"b:{np.dtype(np.float64).str}", (c.n_words, self.n_topics),
                            np.float64)
        self.team.run(count_rows, self.team.row_ranges(self._word_ptr), out=b, index=word,
                      topics=z, weight=weight, row_ptr=self._word_ptr, order=self._by_word)
        return b

    def _priors_changed(self):
        if self._fixed_bhat is not None:
            self._tables = WordTables(self._fixed_bhat, self.alpha, team=self.team)
        elif self._b is not None:
            # The float32 counts go in as they are: the tables widen them to float64 range by
            # range on the team's threads, and the column sums accumulate in float64 (a float64
            # copy of B first was a serial V x K pass, a tenth of a 16-thread sweep at K = 1,000).
            self._tables = WordTables.from_counts(self._b, self._topic_totals(), self.beta,
                                                  self.alpha, team=self.team,
                                                  cells=self.beta_cells)

    def _ensure_tables(self):
        """Build the word tables where B changed without them (:meth:`set_word_topic` leaves
        them to the next reader, so that a caller's reduction costs only its transfers)."""
        if self._tables is None:
            self._priors_changed()

    def _topic_totals(self):
        """``n_k``, the column sums of B in float64: the topics' histogram where the M-step
        counted one (unit weights: exact integers, without a serial V x K pass)."""
        if self._totals is not None:
            return self._totals
        return self._b.sum(axis=0, dtype=np.float64)

    # -- data-parallel training -----------------------------------------------------------------
    def word_topic_cells(self, dtype=np.int64):
        """The non-zero cells of this part's word-topic counts, as its last M-step counted them
        (a chain made with ``data_parallel=True``).

        Parameters
        ----------
        dtype : numpy integer dtype, default=np.int64
            Type of the cell ids (one that holds ``n_words * n_topics - 1``).

        Returns
        -------
        cells : ndarray of ``dtype``
            Cell ids ``word * n_topics + topic``, increasing.
        counts : ndarray of float32
            The counts of those cells.
        """
        if self._part_b is None:
            raise RuntimeError("the chain counts a part's word-topic cells only when made with "
                               "data_parallel=True, after init_topics")
        b = self._part_b.ravel()
        cells = np.flatnonzero(b)
        return cells.astype(dtype), b[cells].astype(np.float32)

    def set_word_topic(self, cells, counts):
        """Take the corpus-wide word-topic counts B, summed over the parts, as its non-zero
        cells (a chain made with ``data_parallel=True``). The next sweep builds its tables from
        it, as the single chain builds them from its own B.

        Parameters
        ----------
        cells : ndarray of int
            Distinct cell ids ``word * n_topics + topic``.
        counts : ndarray of float32
            The counts of those cells.
        """
        if not self.data_parallel:
            raise RuntimeError("only a chain made with data_parallel=True takes a summed B")
        c = self._require()
        b = np.zeros(c.n_words * self.n_topics, dtype=np.float32)
        b[cells] = counts
        self._b = b.reshape(c.n_words, self.n_topics)
        self._totals = None  # the M-step's totals were this part's only
        self._tables = None

    # -- reading the state ----------------------------------------------------------------------
    def _word_major_source(self):
        """B word-major as counted (float32; float64 when the topic side is fixed)."""
        self._require()
        return self._b if self._fixed_bhat is None else self._word_topic(self._z)

    def seeded_counts(self):
        self._ensure_tables()
        cells = self.beta_cells
        src = self._word_major_source()
        return src[cells.word, cells.topic].astype(np.float64)

    def word_topic_histogram(self):
        src = self._word_major_source()
        values, n_cells = nonzero_histogram(self.team, src)
        totals = (self._topic_totals() if self._fixed_bhat is None
                  else src.sum(axis=0, dtype=np.float64))
        return values, n_cells, totals

    def word_topic_counts(self):
        return transposed(self.team, self._word_major_source())

    def _accumulate(self):
        self._sum = accumulate(self.team, self._word_major_source(), self._sum)

    def averaged_word_topic(self, divisor):
        return transposed(self.team, self._sum, float(divisor))

    def topic_word_components(self, dtype=np.float64):
        # Sampler's (statistics + beta), with the sum formed in the transposition.
        if self.n_accumulated:
            stats = transposed(self.team, self._sum, float(self.n_accumulated), self.beta)
        else:
            stats = transposed(self.team, self._word_major_source(), plus=self.beta)
        if self.beta_cells is not None:
            # The matrix prior's cells: ``(B + beta) + extra``, a cell seeded with 0.0 as the
            # scalar prior's.
            stats = self.beta_cells.add_to_components(np.array(stats, dtype=np.float64))
        return stats.astype(dtype, copy=False)

    def topics(self):
        return self._z.copy()

    def doc_topic_counts(self):
        return self._a.astype(np.float64)

    def log_likelihood(self):
        self._ensure_tables()
        c = self._require()
        doc, word, weight, _ = self._loaded_tokens()
        log_norm = np.log(c.doc_lengths() + self.alpha.sum())
        terms = log_likelihood_terms(doc, word, weight, self._a, self._tables, log_norm,
                                     team=self.team, sparse_rows=self.sparse_rows,
                                     out=self.team.empty("loglik", doc.shape, np.float64))
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
