"""Online learning's passes, for the fit loop (:mod:`sklearn_gpulda._fitting.loop`): what one
pass does, how it is scored and the model it gives, for a fit (:class:`OnlineLearning`) and for
one call of ``partial_fit`` (:class:`PartialFit`). A pass's arithmetic is
:mod:`sklearn_gpulda._fitting.online`'s."""

import numpy as np

from .._runtime.device import to_host
from .fitted import FittedState, public_prior
from .online import held_out_perplexity, online_pass
from .score import Score, perplexity


class _Passes:
    """Passes of online learning over the counts ``X`` on ``sampler``, for the fit loop: the
    model they carry from one pass to the next, and its score by fold-in of ``X``.

    Parameters
    ----------
    plan : Plan
    X : validated counts
    sampler : Sampler
    components : array or None
        The model to continue (on the host, or on the sampler's GPU); None to start afresh.
    n_batch_iter : int
        Number of the first batch.
    """

    unit = "passes"
    #: No throughput is printed, no prior learned, no snapshot offered.
    tokens_per_step = None
    prior_updates = None
    snapshot = None

    def __init__(self, plan, X, sampler, components=None, n_batch_iter=1):
        self.plan, self.X, self.sampler = plan, X, sampler
        self.n_tokens = float(X.sum())
        total = plan.online.total_samples
        self.total_samples = X.shape[0] if total is None else total
        self.components, self.alpha, self.n_batch_iter = components, plan.alpha.value, n_batch_iter
        self.held = None

    def _cells_matrix(self):
        """The seeded cells the fitted model keeps (``topic_word_prior_cells_``), or None."""
        cells = self.plan.beta_cells
        return None if cells is None else cells.as_matrix()

    def start(self):
        """Nothing: the first pass lays its mini-batches out."""

    def _pass(self, want_loglik=False):
        """One pass over ``X``; the last batch's log-likelihood and tokens where asked."""
        # The sampler holds the pass's batches from the first pass on.
        self.components, self.alpha, self.n_batch_iter, loglik, n_tokens, self.held = (
            online_pass(self.plan, self.X, self.components, self.alpha, self.n_batch_iter,
                        self.total_samples, self.sampler, want_loglik, self.held))
        return loglik, n_tokens

    def evaluate(self):
        return Score(held_out_perplexity(self.plan, self.X, self.components, self.alpha))


class OnlineLearning(_Passes):
    """Online learning's fit: passes over ``X`` from the prior, scored by fold-in."""

    def __init__(self, plan, X, sampler):
        super().__init__(plan, X, sampler)
        self.bound = None

    def step(self, n_iter):
        self._pass()

    def finish(self, last):
        """Keep the last pass's evaluation, if it had one; the closing line reports no score."""
        self.bound = None if last is None else last.perplexity
        return None

    def state(self, n_iter, fit_time, history):
        components = self.components
        if components is None:
            # max_iter=0: no batch was seen; topics stay at the prior (a matrix prior's cells
            # added to its base, as everywhere).
            components = np.full((self.plan.n_topics, self.X.shape[1]), self.plan.beta.value)
            if self.plan.beta_cells is not None:
                self.plan.beta_cells.add_to_components(components)
        bound = self.bound
        if bound is None:
            # The last pass's evaluation, when it had one, is the model's: not computed twice.
            bound = held_out_perplexity(self.plan, self.X, components, self.alpha)
        return FittedState(
            components=to_host(components),
            doc_topic_prior=public_prior(self.alpha, self.plan.alpha),
            topic_word_prior=float(self.plan.beta.value), n_iter=n_iter,
            n_batch_iter=self.n_batch_iter, bound=bound, n_tokens=self.n_tokens,
            fit_time=fit_time, history=history, topic_word_prior_cells=self._cells_matrix())


class PartialFit(_Passes):
    """One call of ``partial_fit``: a single pass over ``X`` that continues ``previous`` (a
    :class:`~sklearn_gpulda._fitting.fitted.Continuation`, None for the first call), scored by
    the last mini-batch's chain."""

    def __init__(self, plan, X, sampler, previous=None):
        if previous is None:
            super().__init__(plan, X, sampler)
        else:
            super().__init__(plan, X, sampler, previous.components, previous.n_batch_iter)
        self.previous = previous
        self.bound = float("nan")

    def step(self, n_iter):
        # bound_ is the last batch's perplexity.
        self.bound = perplexity(*self._pass(want_loglik=True))

    def finish(self, last):
        return None

    def state(self, n_iter, fit_time, history):
        # A call counts its mini-batches, not passes (n_iter_ stays), and keeps the history of
        # the last fit.
        previous = self.previous
        return FittedState(
            # Kept on the GPU between mini-batches and calls; copied to the host when read.
            components=self.components,
            doc_topic_prior=public_prior(self.alpha, self.plan.alpha),
            topic_word_prior=float(self.plan.beta.value),
            n_iter=0 if previous is None else previous.n_iter, n_batch_iter=self.n_batch_iter,
            bound=self.bound, n_tokens=self.n_tokens, fit_time=fit_time,
            history={} if previous is None else previous.history,
            topic_word_prior_cells=self._cells_matrix())
