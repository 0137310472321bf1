"""The protocol every sampling backend implements.

A :class:`Sampler` holds one Gibbs chain on one device: the tokens of a corpus laid out as the
backend likes, each token's topic, and the counts derived from them. It does the arithmetic of
``doc/algorithm.md`` and nothing else: the fit loop (:mod:`sklearn_gpulda._fitting.loop`) decides
what to
run when (sweeps, prior updates, averaging, evaluation, stopping), and the estimator validates
user input before any of it.

Life cycle::

    sampler.load(corpus)                 # lay the tokens out (no topics yet)
    sampler.init_topics()                # or set_topics(z); both end with the M-step
    sampler.sweep(1); sampler.sweep(2)   # E-step then M-step, keyed by the iteration number
    sampler.sweeps(3, 9)                 # or a run of sweeps the fit loop hands over at once
    sampler.word_topic_counts()          # read the state back (host arrays)
    sampler.release()                    # free what the backend holds on its device

For mini-batch learning the topic-word distributions come from a fitted model instead:
``fix_topic_word(components)`` before ``init_topics``, and from then on an M-step rebuilds the
document-topic counts only.
"""

import abc

import numpy as np

from .._runtime.stages import stage
from . import prior_learning as _learning
from .random import STREAM_INIT, STREAM_SAMPLE


def topic_prior(alpha, n_topics):
    """The document-topic prior as a float64 array of shape (n_topics,).

    A number means the same prior for every topic; an array must hold one positive value per
    topic.
    """
    alpha = np.asarray(alpha, dtype=np.float64)
    if alpha.ndim == 0:
        alpha = np.full(n_topics, float(alpha))
    if alpha.shape != (n_topics,):
        raise ValueError(
            f"alpha must be a number or an array of shape ({n_topics},), got shape {alpha.shape}"
        )
    if not (np.all(np.isfinite(alpha)) and np.all(alpha > 0)):
        raise ValueError("alpha must be finite and positive")
    return alpha


def normalised_rows(xp, components, row_sums=None):
    """``components`` (K x V) in float64 with each row divided by ``row_sums`` (K,), or by its
    own sum where None: the ``Bhat`` that :meth:`Sampler.fix_topic_word` holds, topic-major.
    NumPy or CuPy as ``xp``."""
    comp = xp.asarray(components, dtype=xp.float64)
    sums = (comp.sum(axis=1, keepdims=True) if row_sums is None
            else xp.asarray(row_sums, dtype=xp.float64).reshape(-1, 1))
    return comp / sums


class Sampler(abc.ABC):
    """One Gibbs chain of ESCA on one device.

    Parameters
    ----------
    n_topics : int
        Number of topics K.
    alpha : float or array-like of shape (n_topics,)
        Document-topic prior.
    beta : float
        Topic-word prior.
    seed : int
        32-bit seed; with the iteration number it keys every random draw.
    device : sklearn_gpulda._runtime.device.Device
        Where the chain lives.
    """

    def __init__(self, n_topics, alpha, beta, seed, device):
        self.n_topics = int(n_topics)
        self._set_alpha(alpha)
        self.beta = float(beta)
        self.seed = int(seed) & 0xFFFFFFFF
        self.device = device
        self.corpus = None
        self.n_accumulated = 0

    # -- memory ---------------------------------------------------------------------------------
    @abc.abstractmethod
    def estimate_bytes(self, corpus):
        """Bytes of the device's memory a chain on ``corpus`` keeps, and its peak.

        Returns
        -------
        steady, peak : int
        """

    # -- the chain ------------------------------------------------------------------------------
    def fits(self, corpus):
        """Whether a chain on ``corpus`` fits the memory this sampler may use (True where it
        streams or plans its own memory)."""
        return True

    @abc.abstractmethod
    def load(self, corpus):
        """Lay out a :class:`~sklearn_gpulda._input.corpus.TokenCorpus`; raise MemoryError, before
        allocating, where it would not fit. Drops any earlier corpus."""

    def load_online_batches(self, corpus, ranges):
        """Hold the mini-batches of ``corpus`` (document ranges ``(d0, d1)``) for
        :meth:`select_online_batch`; drops any earlier corpus.

        Online learning runs one short chain per mini-batch: a call that holds all of them at
        once lets a backend lay them out together instead of one by one. Here they stay on the
        host, and each is laid out (:meth:`load`) when selected.
        """
        self.release()
        self._held_batches = (corpus, [(int(d0), int(d1)) for d0, d1 in ranges])

    def select_online_batch(self, i):
        """Make mini-batch ``i`` of :meth:`load_online_batches` the loaded corpus: its documents
        numbered from 0 and its tokens too (so that they draw the numbers they draw loaded on
        their own), no topics yet, nothing accumulated.

        Returns
        -------
        columns : ndarray of int64
            The held corpus's words the loaded corpus holds, each once: its word ``j`` is
            ``columns[j]``. Here they are the batch's words in increasing order; a backend may
            order them as it likes.
        """
        held = getattr(self, "_held_batches", None)
        if held is None:
            raise RuntimeError("the sampler holds no mini-batches; call load_online_batches first")
        corpus, ranges = held
        # The batch's chain reads only its own words' columns of a fixed topic-word side.
        part, columns = corpus.doc_range(*ranges[i]).over_used_words()
        self.load(part)  # which releases what the sampler held, the batches too
        self._held_batches = held
        return columns

    @abc.abstractmethod
    def init_topics(self, iteration=0, stream=STREAM_INIT):
        """Draw every token's topic uniformly (``_random.token_topic``), then the M-step."""

    @abc.abstractmethod
    def set_topics(self, topics):
        """Load an explicit topic per token (canonical order), then the M-step."""

    @abc.abstractmethod
    def sweep(self, iteration, stream=STREAM_SAMPLE, sub=0):
        """One E-step keyed by ``(seed, iteration)`` (counter words ``stream`` and ``sub``),
        then the M-step."""

    def sweeps(self, first, last, accumulate_from=None):
        """Sweeps ``first`` to ``last`` (both included) of a batch fit, as :meth:`sweep` runs
        them, adding the word-topic counts of every sweep from ``accumulate_from`` on to the
        averaging's running sum (:meth:`accumulate_word_topic`; None: none of them).

        The fit loop hands over a run of sweeps after which it needs nothing of the chain in
        between (no evaluation, progress or callback, and no prior update unless the chain
        makes them itself: :meth:`run_prior_updates`). Here the sweeps run one by
        one, as the loop would run them, so the chain is the same; a sampler whose sweeps cost a
        round trip each (a Dask fit whose shards sum B among themselves) runs the whole run in
        one call instead.

        Raises
        ------
        MemoryError
            Where an accumulation does not fit; its ``sweep`` attribute is the last sweep the
            chain holds: the one whose counts were not added, or the run's last where the
            chain went on without accumulating (a Dask fit's shards, which must keep their sums
            in step).
        """
        for iteration in range(int(first), int(last) + 1):
            with stage("sweeps: sampling"):
                self.sweep(iteration)
            if accumulate_from is not None and iteration >= accumulate_from:
                try:
                    with stage("sweeps: averaging"):
                        self.accumulate_word_topic()
                except MemoryError as exc:
                    exc.sweep = iteration
                    raise

    def run_prior_updates(self, updates):
        """Whether this chain runs a batch fit's prior updates itself, inside its runs of
        sweeps, rather than having the fit loop end a run at each update and make it.

        A chain whose runs cost a round trip (a Dask fit whose GPU shards sum B among
        themselves) can make the updates where its counts are, with the same arithmetic, so
        that a run goes on across them. Here: no, the loop makes them.

        Parameters
        ----------
        updates : sklearn_gpulda._fitting.batch.PriorUpdates
            When and how the fit updates its priors; a chain that accepts keeps it and runs
            ``updates.update`` after every sweep ``n`` of a run where ``updates.due(n)``, after
            the sweep's accumulation where the run accumulates it, as the loop would.

        Returns
        -------
        bool
        """
        return False

    @abc.abstractmethod
    def fix_topic_word(self, components, row_sums=None):
        """Hold ``Bhat`` at the normalised rows of ``components`` (K x V, on the host or, for a
        GPU chain, on its device) from now on; the M-step then rebuilds the document-topic
        counts only. Call after :meth:`load`.

        ``row_sums`` (K,), where given, is what each row is divided by instead of its own sum:
        a caller that passes only the columns of the words a corpus uses passes the whole
        model's sums, so that ``Bhat`` holds the same numbers as from the whole model."""

    #: The seeded cells of a matrix topic-word prior
    #: (:class:`~sklearn_gpulda.backends.priors.CellPrior`), or None for a scalar prior.
    beta_cells = None

    def set_beta_cells(self, cells):
        """Make the topic-word prior the matrix ``beta + extra`` of the seeded ``cells`` (a
        :class:`~sklearn_gpulda.backends.priors.CellPrior`; None: the scalar ``beta``). Call
        before :meth:`load`. Engines that do not sample with a matrix prior raise
        NotImplementedError."""
        if cells is None:
            self.beta_cells = None
            return
        if type(self).seeded_counts is Sampler.seeded_counts:
            raise NotImplementedError(f"{type(self).__name__} does not sample with a matrix "
                                      "topic_word_prior")
        self.beta_cells = cells
        self._priors_changed()

    def seeded_counts(self):
        """``B`` at the seeded cells of a matrix prior (their order), float64 on the host."""
        raise NotImplementedError

    def set_priors(self, alpha=None, beta=None):
        """Change the priors of the chain; the next E-step uses them. None keeps a prior, and so
        does a value equal to it (online learning sets its held prior before every mini-batch;
        rebuilding the tables each time cost a K = 20 step a tenth of its time)."""
        changed = False
        if alpha is not None and not self._alpha_equals(alpha):
            self._set_alpha(alpha)
            changed = True
        if beta is not None and float(beta) != self.beta:
            self.beta = float(beta)
            changed = True
        if changed:
            self._priors_changed()

    def _alpha_equals(self, alpha):
        """Whether ``alpha`` (a number or K numbers) is the chain's prior, without making the
        K-vector where both are numbers."""
        if np.ndim(alpha) == 0 and np.ndim(self._alpha) == 0:
            return float(alpha) == self._alpha
        k = self.n_topics
        return (np.shape(alpha) in ((), (k,))
                and np.array_equal(np.broadcast_to(alpha, (k,)), self.alpha))

    def _set_alpha(self, alpha):
        # A number is kept as it is until the chain needs the array: a sampler is made before
        # its memory check runs (in load), and K numbers can be the first thing too large.
        if np.ndim(alpha) == 0:
            topic_prior(float(alpha), 1)  # the same checks, without the K-sized array
            self._alpha = float(alpha)
        else:
            self._alpha = topic_prior(alpha, self.n_topics)

    @property
    def alpha(self):
        """The document-topic prior, float64 of shape (n_topics,)."""
        if np.ndim(self._alpha) == 0:
            self._alpha = topic_prior(self._alpha, self.n_topics)
        return self._alpha

    @abc.abstractmethod
    def _priors_changed(self):
        """Rebuild whatever the backend derives from the priors."""

    # -- reading the state ----------------------------------------------------------------------
    @abc.abstractmethod
    def topics(self):
        """Current topic of every token: int32 in canonical order, on the host."""

    @abc.abstractmethod
    def word_topic_counts(self):
        """B transposed: float64 array of shape (n_topics, n_words) on the host."""

    @abc.abstractmethod
    def doc_topic_counts(self):
        """A: float64 array of shape (n_docs, n_topics) on the host."""

    @abc.abstractmethod
    def log_likelihood(self):
        """Training log-likelihood of the current state (``doc/algorithm.md``)."""

    @abc.abstractmethod
    def doc_topic_histogram(self):
        """How many documents hold each non-zero count of each topic (for learning alpha).

        Returns
        -------
        topic : ndarray of int64
        count : ndarray of float64
            A value of ``A[d, topic]`` that is not zero.
        n_docs : ndarray of int64
            Number of documents d with ``A[d, topic] == count``. Pairs are distinct.
        """

    def doc_topic_table(self):
        """:meth:`doc_topic_histogram` split by
        :func:`sklearn_gpulda.backends.prior_learning.alpha_table`: ``(table, (topic, count,
        n_docs))`` on the host, what :func:`~sklearn_gpulda.backends.prior_learning.update_alpha`
        and :meth:`learn_alpha` read."""
        return _learning.alpha_table(*self.doc_topic_histogram(), self.n_topics)

    def learn_priors(self, alpha=None, beta=None, lengths=None, n_words=None, cells=None):
        """Both fixed points from histograms the sampler keeps where it runs, with no trip of
        theirs through the host; None where it cannot, and the caller reads each histogram
        (:meth:`doc_topic_table`, :meth:`word_topic_histogram`) and runs :meth:`learn_alpha`
        and :meth:`learn_beta` on it. This base class cannot (a CUDA chain can:
        :meth:`~sklearn_gpulda.backends.cuda.resident_priors.ResidentPriors.learn_priors`)."""
        return None

    def learn_alpha(self, alpha, table, rest, length, n_length):
        """Alpha's fixed point (:func:`sklearn_gpulda.backends.prior_learning.update_alpha`) from
        what :meth:`doc_topic_table` returned and the corpus's length histogram, on the host: as
        a GPU chain learns it where this chain samples on GPUs (a Dask driver's), bit for bit.
        A GPU engine runs it on its device."""
        return _learning.update_alpha(alpha, table, rest, length, n_length,
                                      like_gpu=self.device.kind == "cuda")

    def learn_beta(self, beta, count, n_cells, topic_totals, n_words, cells=None,
                   cell_counts=None):
        """Beta's fixed point (:func:`sklearn_gpulda.backends.prior_learning.update_beta`) from
        what :meth:`word_topic_histogram` returned, on the host as :meth:`learn_alpha` runs
        alpha's. A GPU engine runs it on its device where no cell is seeded."""
        return _learning.update_beta(beta, count, n_cells, topic_totals, n_words, cells,
                                     cell_counts, like_gpu=self.device.kind == "cuda")

    @abc.abstractmethod
    def word_topic_histogram(self):
        """How many (word, topic) cells hold each non-zero count, and the topic totals (for
        learning beta).

        Returns
        -------
        count : ndarray of float64
            A value of ``B[v, k]`` that is not zero.
        n_cells : ndarray of int64
            Number of cells with that value. Values are distinct.
        topic_totals : ndarray of float64, shape (n_topics,)
        """

    # -- averaging ------------------------------------------------------------------------------
    def accumulate_word_topic(self):
        """Add the current word-topic counts to a running sum kept on the chain's device."""
        self._accumulate()
        self.n_accumulated += 1

    def discard_accumulated(self):
        """Forget the running sum: what the chain gives is the current counts again (a fit whose
        averaging ran out of memory goes on without it rather than with a part of it)."""
        self.n_accumulated = 0
        self._discard_sum()

    def _discard_sum(self):
        self._sum = None

    def mean_word_topic(self):
        """The running sum over its :meth:`accumulate_word_topic` calls, divided by their number:
        float64 of shape (n_topics, n_words) on the host."""
        if not self.n_accumulated:
            raise RuntimeError("no word-topic counts were accumulated")
        return self.averaged_word_topic(self.n_accumulated)

    def word_topic_statistics(self):
        """What a mini-batch's chain gives online learning: the mean word-topic counts when any
        were accumulated, else the current ones, float64 of shape (n_topics, n_words), where the
        chain lives (a GPU chain's stay on its device)."""
        return self.mean_word_topic() if self.n_accumulated else self.word_topic_counts()

    def topic_word_components(self, dtype=np.float64):
        """What ``components_`` of a fit stopped now would be: the averaged word-topic counts
        when any were accumulated, else the current ones, plus beta; a host array of shape
        (n_topics, n_words) and ``dtype`` (the arithmetic in float64)."""
        # A new array: with one topic or word the counts can be a view of the chain's own.
        return (self.word_topic_statistics() + self.beta).astype(dtype, copy=False)

    @abc.abstractmethod
    def _accumulate(self):
        """Add the current word-topic counts to the running sum (allocated at the first call)."""

    @abc.abstractmethod
    def averaged_word_topic(self, divisor):
        """The running sum divided by ``divisor``, as :meth:`mean_word_topic` returns it."""

    # -- helpers --------------------------------------------------------------------------------
    def _checked_topics(self, topics):
        """``topics`` as int32, after checking it gives every token of the loaded corpus a topic
        of this chain."""
        corpus = self._require()
        topics = np.asarray(topics, dtype=np.int32)
        if topics.shape != (corpus.n_tokens,):
            raise ValueError(f"topics must have shape ({corpus.n_tokens},), got {topics.shape}")
        if topics.size and (topics.min() < 0 or topics.max() >= self.n_topics):
            raise ValueError(f"topics must lie in [0, {self.n_topics})")
        return topics

    def _require(self):
        if self.corpus is None:
            raise RuntimeError("the sampler holds no corpus; call load first")
        return self.corpus

    def synchronize(self):
        """Wait until the work queued on the device has finished (nothing on the CPU).

        GPU kernels run asynchronously: a clock read right after the last sweep was queued would
        count only the launches, not the sampling.
        """

    def release(self):
        """Free whatever the chain holds on its device; the sampler can then be loaded again."""
        self.corpus = None
        self.n_accumulated = 0
        self._held_batches = None
