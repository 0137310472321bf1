"""The fit loop: sweeps, prior learning, averaging, evaluation, stopping and progress, over any
:class:`~sklearn_gpulda.backends.base.Sampler`; online learning's loop is in
:mod:`sklearn_gpulda._fitting.online`.

Nothing here touches the estimator: :func:`fit_corpus` takes a
:class:`~sklearn_gpulda._fitting.plan.Plan`
(the estimator's parameters, resolved) and returns a :class:`FittedState` that the estimator
assigns only once the fit has succeeded, so a fit that raises leaves a fitted model as it was
(``doc/algorithm.md`` defines every step).
"""

import time
from dataclasses import dataclass, field

import numpy as np

from .._runtime.stages import stage
from .._runtime.warnings import warn_caller
from ..backends import priors as _priors
from .cadence import Cadence


@dataclass
class FittedState:
    """The fitted attributes a successful fit gives the estimator."""

    components: np.ndarray
    doc_topic_prior: object
    topic_word_prior: float
    n_iter: int
    n_batch_iter: int
    bound: float
    n_tokens: float
    fit_time: float
    history: dict = field(default_factory=dict)


def perplexity(loglik, n_tokens):
    """``exp(-loglik / n_tokens)``; NaN without tokens."""
    if n_tokens <= 0:
        return float("nan")
    return float(np.exp(-loglik / n_tokens))


def public_prior(value, prior):
    """A fixed number stays a number (scikit-learn's ``doc_topic_prior_``); a learned or
    per-topic prior is an array."""
    if not prior.learn and np.ndim(prior.value) == 0:
        return float(prior.value)
    return np.array(value, dtype=np.float64)


class _History:
    """The figures of every evaluation, as arrays at the end (``history_``)."""

    def __init__(self):
        self.rows = []
        self.stop_reason = ""
        self._last_bound = None

    def settled(self, bound, plan, n_iter, unit):
        """``evaluate_every``'s stopping rule: True, with ``stop_reason`` set, when the
        perplexity moved by less than ``perp_tol`` since the previous call."""
        last, self._last_bound = self._last_bound, bound
        if last is None or abs(last - bound) >= plan.iterations.perp_tol:
            return False
        self.stop_reason = (f"perplexity changed by {abs(last - bound):.4g} < perp_tol="
                            f"{plan.iterations.perp_tol:g} after {n_iter} {unit}")
        return True

    def add(self, **row):
        self.rows.append(row)

    def as_dict(self):
        keys = list(self.rows[0]) if self.rows else ["iteration", "seconds"]
        out = {k: np.array([r[k] for r in self.rows]) for k in keys}
        out["stop_reason"] = self.stop_reason
        return out


def _print_sweep(plan, n_iter, n_tokens, cadence, loglik, weight):
    """verbose's line for one sweep: the mean sampling rate so far, and the likelihood when this
    sweep was evaluated (:class:`~sklearn_gpulda._fitting.cadence.Cadence` says how often)."""
    sampling = max(cadence.working(), 1e-12)
    line = (f"iteration: {n_iter} of max_iter: {plan.iterations.max_iter}, "
            f"{n_tokens * n_iter / sampling / 1e6:.2f} Mtoken/s")
    if loglik is not None:
        line += (f", log-likelihood/token: {loglik / max(weight, 1):.4f}, "
                 f"perplexity: {perplexity(loglik, weight):.4f}")
    print(line)


def _snapshot(sampler, plan):
    """The model as a fit stopped now would give it: ``(components, doc_topic_prior)``."""
    components = sampler.topic_word_components(plan.components_dtype)
    return components, public_prior(sampler.alpha, plan.alpha)


def fit_corpus(plan, corpus, sampler=None, release_counts=False):
    """Batch learning: every token of ``corpus`` is sampled in each of up to ``max_iter``
    sweeps, on ``sampler`` (the plan's backend's when None; a sampler spread over several
    processes brings its own).

    Parameters
    ----------
    plan : Plan
    corpus : TokenCorpus, or an object with its ``n_tokens``, ``n_words``, ``total_weight``
        and ``doc_lengths()`` whose tokens ``sampler`` already holds.
    sampler : Sampler, optional
        Released at the end, whether the fit succeeds or not.
    release_counts : bool, default=False
        The corpus is the fit's own: once the sampler has laid its tokens out, drop the
        corpus's arrays (:meth:`~sklearn_gpulda._input.corpus.TokenCorpus.release_counts`), so that
        their memory is free for the sampling.

    Returns
    -------
    FittedState
    """
    weight = corpus.total_weight
    sampler = plan.sampler() if sampler is None else sampler
    history = _History()
    try:
        start = time.perf_counter()
        with stage("load"):
            sampler.load(corpus)
            if release_counts:
                corpus.release_counts()
        with stage("init"):
            sampler.init_topics()
        with stage("sweeps"):
            n_iter, loglik = _sweeps(plan, corpus, sampler, history, start)
        sampler.synchronize()
        fit_time = time.perf_counter() - start
        # The last sweep's likelihood, when it was evaluated, is the model's: bound_ reuses it.
        with stage("final likelihood"):
            final_loglik = sampler.log_likelihood() if loglik is None else loglik
        if plan.iterations.verbose:
            print(f"stopped: {history.stop_reason}; log-likelihood/token: "
                  f"{final_loglik / max(weight, 1):.4f}, "
                  f"perplexity: {perplexity(final_loglik, weight):.4f}")
        with stage("model out"):
            components, doc_topic_prior = _snapshot(sampler, plan)
        state = FittedState(
            components=components,
            doc_topic_prior=doc_topic_prior,
            topic_word_prior=float(sampler.beta),
            n_iter=n_iter, n_batch_iter=n_iter + 1,
            bound=perplexity(final_loglik, weight),
            n_tokens=weight, fit_time=fit_time, history=history.as_dict(),
        )
    finally:
        sampler.release()
    return state


def _sweeps(plan, corpus, sampler, history, start):
    """The sweeps of a batch fit, with the prior updates, averaging, evaluations, progress and
    stopping between them; returns the sweeps done and the last sweep's log-likelihood (None
    when it was not evaluated)."""
    weight = corpus.total_weight
    iterations, extras = plan.iterations, plan.schedule
    schedule = _priors.PriorUpdates(plan.alpha, plan.beta, extras.prior_burn_in,
                                    extras.prior_update_every, corpus)
    average_from = iterations.max_iter - min(extras.n_averaged_sweeps, iterations.max_iter)
    averaging = extras.n_averaged_sweeps > 0
    n_iter, loglik = 0, None
    history.stop_reason = f"max_iter={iterations.max_iter} sweeps done"
    cadence = Cadence()
    for i in range(iterations.max_iter):
        with stage("sweeps: sampling"):
            sampler.sweep(i + 1)
        n_iter = i + 1
        if schedule.due(n_iter):
            with stage("sweeps: prior updates"):
                schedule.update(sampler)
        if averaging and i >= average_from:
            try:
                with stage("sweeps: averaging"):
                    sampler.accumulate_word_topic()
            except MemoryError as exc:
                if not extras.averaging_is_default:
                    raise
                averaging = False
                sampler.discard_accumulated()
                warn_caller(f"the fit goes on without averaging the last sweeps: {exc}",
                            RuntimeWarning)
        evaluate = iterations.evaluates(n_iter)
        loglik = None
        if evaluate or (iterations.verbose and cadence.due(n_iter)):
            # Queued sweeps finish first, so that the evaluation's time is its own.
            sampler.synchronize()
            with stage("sweeps: evaluation"), cadence.timing():
                loglik = sampler.log_likelihood()
            bound = perplexity(loglik, weight)
            history.add(iteration=n_iter, seconds=time.perf_counter() - start,
                        train_loglik=loglik / max(weight, 1), train_perplexity=bound,
                        alpha_sum=float(sampler.alpha.sum()), beta=sampler.beta)
        if iterations.verbose:
            _print_sweep(plan, n_iter, corpus.n_tokens, cadence, loglik, weight)
        if iterations.callback is not None:
            iterations.callback(n_iter, dict(
                max_iter=iterations.max_iter, n_tokens=weight, seconds=time.perf_counter() - start,
                log_likelihood=None if loglik is None else loglik / max(weight, 1),
                snapshot=lambda: _snapshot(sampler, plan)))
        if evaluate and history.settled(bound, plan, n_iter, "sweeps"):
            break
    return n_iter, loglik
