"""Batch learning: what one sweep over the whole corpus does for the fit loop
(:mod:`sklearn_gpulda._fitting.loop`), how it is scored (the chain's training likelihood), and
the model it gives (``doc/algorithm.md``)."""

from .._runtime.stages import stage
from ..backends.prior_learning import length_histogram
from .fitted import FittedState, public_prior
from .score import Score


class PriorUpdates:
    """When and how a batch fit updates the priors it learns, from its chain's counts.

    What the updates read of the corpus (its length histogram, where alpha is learned, and its
    vocabulary size) is read here once, at the start of the fit.

    Parameters
    ----------
    alpha, beta : Prior
        The priors of the fit; those with ``learn`` are updated.
    burn_in : int
        Sweeps before the first update.
    every : int
        Sweeps between updates.
    corpus : TokenCorpus, or an object with its ``n_words`` and ``doc_lengths()``
    """

    def __init__(self, alpha, beta, burn_in, every, corpus, beta_cells=None):
        self.learn_alpha, self.learn_beta = alpha.learn, beta.learn
        self.beta_cells = beta_cells
        self.burn_in, self.every = burn_in, every
        self.lengths = length_histogram(corpus.doc_lengths()) if alpha.learn else None
        self.n_words = corpus.n_words

    def due(self, n_iter):
        """Whether the priors are updated after sweep ``n_iter``."""
        past = n_iter - self.burn_in
        return (self.learn_alpha or self.learn_beta) and past > 0 and past % self.every == 0

    def update(self, sampler):
        """Run the fixed points from the ``sampler``'s priors on its histograms, and give it the
        priors found."""
        cells = self.beta_cells
        with stage("sweeps: prior updates: resident"):
            found = sampler.learn_priors(sampler.alpha if self.learn_alpha else None,
                                         sampler.beta if self.learn_beta else None,
                                         self.lengths, self.n_words, cells)
        if found is not None:
            alpha, beta = found
        else:
            alpha, beta = self._two_steps(sampler)
        sampler.set_priors(alpha=alpha, beta=beta)

    def _two_steps(self, sampler):
        """Each histogram read to the host, then its fixed point: the path of every sampler
        that cannot learn from histograms it keeps (:meth:`~sklearn_gpulda.backends.base.
        Sampler.learn_priors`)."""
        alpha = beta = None
        if self.learn_alpha:
            with stage("sweeps: prior updates: alpha histogram"):
                table, rest = sampler.doc_topic_table()
            with stage("sweeps: prior updates: alpha fixed point"):
                alpha = sampler.learn_alpha(sampler.alpha, table, rest, *self.lengths)
        if self.learn_beta:
            with stage("sweeps: prior updates: beta histogram"):
                histogram = sampler.word_topic_histogram()
            with stage("sweeps: prior updates: beta fixed point"):
                cells = self.beta_cells
                beta = sampler.learn_beta(sampler.beta, *histogram, self.n_words, cells,
                                          None if cells is None else sampler.seeded_counts())
        return alpha, beta


class BatchLearning:
    """Every token of ``corpus`` sampled once per iteration, on ``sampler``.

    Parameters
    ----------
    plan : Plan
    corpus : TokenCorpus, or an object with its ``n_tokens``, ``n_words``, ``total_weight``
        and ``doc_lengths()`` whose tokens ``sampler`` already holds.
    sampler : Sampler
    release_counts : bool, default=False
        Once the sampler has laid the tokens out, drop the corpus's arrays
        (:meth:`~sklearn_gpulda._input.corpus.TokenCorpus.release_counts`).
    """

    unit = "sweeps"

    def __init__(self, plan, corpus, sampler, release_counts=False):
        self.plan, self.corpus, self.sampler = plan, corpus, sampler
        self.release_counts = release_counts
        self.n_tokens = corpus.total_weight
        #: What a sweep samples, for verbose's throughput.
        self.tokens_per_step = corpus.n_tokens
        self.prior_updates = None
        self.out = None

    def start(self):
        """Lay the tokens out, draw their first topics, and read what prior learning needs."""
        with stage("load"):
            self.sampler.load(self.corpus)
            if self.release_counts:
                self.corpus.release_counts()
        with stage("init"):
            self.sampler.init_topics()
        schedule = self.plan.schedule
        self.prior_updates = PriorUpdates(self.plan.alpha, self.plan.beta,
                                          schedule.prior_burn_in, schedule.prior_update_every,
                                          self.corpus, self.plan.beta_cells)

    def step(self, n_iter):
        self.sampler.sweep(n_iter)

    def steps(self, first, last, accumulate_from=None):
        """Sweeps ``first`` to ``last`` as one run
        (:meth:`~sklearn_gpulda.backends.base.Sampler.sweeps`)."""
        self.sampler.sweeps(first, last, accumulate_from)

    def evaluate(self):
        loglik = self.sampler.log_likelihood()
        return Score.of_loglik(loglik, self.n_tokens, alpha_sum=float(self.sampler.alpha.sum()),
                               beta=self.sampler.beta)

    def snapshot(self):
        """The model as a fit stopped now would give it: ``(components, doc_topic_prior)``."""
        components = self.sampler.topic_word_components(self.plan.components_dtype)
        return components, public_prior(self.sampler.alpha, self.plan.alpha)

    def finish(self, last):
        """Read the model out of the chain; its score, which the closing line reports."""
        # The last sweep's likelihood, when it was evaluated, is the model's: bound_ reuses it.
        with stage("final likelihood"):
            final = (last if last is not None
                     else Score.of_loglik(self.sampler.log_likelihood(), self.n_tokens))
        with stage("model out"):
            components, doc_topic_prior = self.snapshot()
        self.out = dict(components=components, doc_topic_prior=doc_topic_prior,
                        topic_word_prior=float(self.sampler.beta), bound=final.perplexity)
        if self.plan.beta_cells is not None:
            self.out["topic_word_prior_cells"] = self.plan.beta_cells.as_matrix()
        return final

    def state(self, n_iter, fit_time, history):
        return FittedState(**self.out, n_iter=n_iter, n_batch_iter=n_iter + 1,
                           n_tokens=self.n_tokens, fit_time=fit_time, history=history)
