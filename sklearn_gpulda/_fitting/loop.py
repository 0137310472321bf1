"""The fit loop: sweeps, prior learning, averaging, evaluation, stopping and progress, over any
:class:`~sklearn_gpulda.backends.base.Sampler`; online learning's loop is in
:mod:`sklearn_gpulda._fitting.online`.

Nothing here touches the estimator: :func:`fit_corpus` takes a :class:`Plan`
(the estimator's parameters, resolved) and returns a :class:`FittedState` that the estimator
assigns only once the fit has succeeded, so a fit that raises leaves a fitted model as it was
(``doc/algorithm.md`` defines every step).
"""

import time
from dataclasses import dataclass, field

import numpy as np

from .._runtime.device import parse_bytes
from .._runtime.stages import stage
from .._runtime.warnings import warn_caller
from ..backends import priors as _priors
from .cadence import Cadence


@dataclass
class Plan:
    """What a fit needs to know, resolved from the estimator's parameters."""

    backend: object            # sklearn_gpulda.backends.Backend
    device: object             # sklearn_gpulda._runtime.device.Device
    n_topics: int
    seed: int
    alpha: _priors.Prior
    beta: _priors.Prior
    max_iter: int = 100
    evaluate_every: int = -1
    perp_tol: float = 0.1
    n_averaged_sweeps: int = 0
    #: The averaging is the estimator's default rather than asked for: where its running sum
    #: does not fit in memory the fit goes on without it (with a warning) instead of failing.
    averaging_is_default: bool = False
    prior_burn_in: int = 0
    prior_update_every: int = 10
    verbose: int = 0
    batch_size: int = 128
    learning_offset: float = 10.0
    learning_decay: float = 0.7
    n_batch_sweeps: int = 10
    max_doc_update_iter: int = 100
    mean_change_tol: float = 1e-3
    #: The engine settings (``backends.ENGINE_SETTINGS``), passed to the samplers whose
    #: registry entry names them: threads of the CPU engines, device bytes a GPU sampler may
    #: use (None: what the GPU has free), tokens per batch of the mini-batched samplers (None:
    #: their default), and how the sparse single-GPU sampler stores B.
    n_jobs: object = None
    max_device_memory: object = None
    minibatch_tokens: object = None
    word_topic_storage: str = "auto"
    #: Whether the sparse single-GPU sampler's memory plan keeps room for averaging's sum
    #: ('required' where asked for, 'optional' for the default averaging and online learning,
    #: 'none' for a batch fit that does not average; ``backends/cuda/sparse/memory_plan.py``).
    averaging: str = "optional"
    #: dtype of ``components_`` (scikit-learn's rule: float32 for float32 input, else float64).
    components_dtype: object = np.float64
    #: ``callback(iteration, info)`` after every sweep (batch) or pass (online); ``info`` holds
    #: max_iter, n_tokens, seconds and log_likelihood (per token, or None if not evaluated).
    callback: object = None

    def engine_options(self):
        """The keyword arguments the backend's sampler takes, from its registry entry."""
        settings = dict(n_jobs=self.n_jobs, max_device_memory=self.max_device_memory,
                        batch_tokens=self.minibatch_tokens,
                        word_topic_storage=self.word_topic_storage, averaging=self.averaging)
        return self.backend.sampler_options(settings, self.device)

    def sampler(self, alpha=None, beta=None):
        options = self.engine_options()
        return self.backend.make(self.n_topics, self.alpha.value if alpha is None else alpha,
                                 self.beta.value if beta is None else beta, self.seed, self.device,
                                 **options)


#: ``max_iter=None``: sweeps of a batch fit on a GPU, where they take seconds (held-out
#: likelihood still rose from 800 to 1,600 sweeps at K = 1,000 on the corpora of
#: doc/performance.md), and passes everywhere else (a batch fit on the CPU engine, online learning).
DEFAULT_SWEEPS_GPU = 1000
DEFAULT_ITERATIONS = 100


def resolve_max_iter(max_iter, device_kind, learning_method="batch"):
    """``max_iter`` as a number of sweeps: itself, or for ``None`` the default of a fit on a
    device of ``device_kind`` ('cpu' or 'cuda', resolved) with ``learning_method``."""
    if max_iter is not None:
        return max_iter
    on_gpu = device_kind == "cuda" and learning_method == "batch"
    return DEFAULT_SWEEPS_GPU if on_gpu else DEFAULT_ITERATIONS


def plan_for(params, backend, device, seed, alpha_start=None, beta_start=None, batch=True):
    """The :class:`Plan` of an estimator's parameters.

    Parameters
    ----------
    params : GPULatentDirichletAllocation
        Its parameters are read (validated already).
    backend, device, seed
        The registry entry, the resolved device and the 32-bit seed.
    alpha_start, beta_start : float or ndarray, optional
        Where the priors start instead of their parameters' values (a fitted model's priors,
        for ``partial_fit``).
    batch : bool
        A batch fit. Priors are learned from the counts of a whole corpus's chain: online learning
        holds only short chains of mini-batches, whose spread-out counts overstate alpha (measured
        on KJV: 0.5 to 0.8 learned, and a worse model than 1 / K), so there they stay where they are.
    """
    k = params.n_components
    alpha = _priors.resolve_prior(params.doc_topic_prior, 1.0 / k, k, "doc_topic_prior")
    beta = _priors.resolve_prior(params.topic_word_prior, 1.0 / k, None, "topic_word_prior")
    if alpha_start is not None:
        alpha = _priors.Prior(alpha_start, alpha.learn)
    if beta_start is not None:
        beta = _priors.Prior(beta_start, beta.learn)
    if not batch:
        alpha, beta = _priors.Prior(alpha.value, False), _priors.Prior(beta.value, False)
    max_iter = resolve_max_iter(params.max_iter, device.kind, params.learning_method)
    averaged = params.n_averaged_sweeps
    if averaged == "auto":
        averaged = max_iter // 2 if params.learning_method == "batch" else 0
    plan = Plan(
        backend=backend, device=device, n_topics=k, seed=seed, alpha=alpha, beta=beta,
        max_iter=max_iter, evaluate_every=params.evaluate_every, perp_tol=params.perp_tol,
        n_averaged_sweeps=averaged, averaging_is_default=params.n_averaged_sweeps == "auto",
        prior_burn_in=params.prior_burn_in, prior_update_every=params.prior_update_every,
        verbose=params.verbose, batch_size=params.batch_size,
        learning_offset=params.learning_offset, learning_decay=params.learning_decay,
        n_batch_sweeps=params.n_batch_sweeps, max_doc_update_iter=params.max_doc_update_iter,
        mean_change_tol=params.mean_change_tol, n_jobs=params.n_jobs,
        max_device_memory=parse_bytes(params.max_device_memory, "max_device_memory"),
        minibatch_tokens=params.minibatch_tokens,
        word_topic_storage=params.word_topic_storage,
        # Online learning's mini-batch chains average their second half of sweeps, and are
        # never streamed: their averaging is planned as the default's.
        averaging=("optional" if not batch or params.n_averaged_sweeps == "auto"
                   else "required" if averaged else "none"),
    )
    hybrid_taken = "word_topic_storage" in plan.engine_options()
    if plan.word_topic_storage == "hybrid" and not hybrid_taken:
        raise ValueError(
            "word_topic_storage='hybrid' is a storage of the sparse engine on one GPU; this fit "
            f"runs {backend.name!r} on {device}: use 'auto' or 'dense'")
    return plan


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
        if last is None or abs(last - bound) >= plan.perp_tol:
            return False
        self.stop_reason = (f"perplexity changed by {abs(last - bound):.4g} < perp_tol="
                            f"{plan.perp_tol:g} after {n_iter} {unit}")
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
    line = (f"iteration: {n_iter} of max_iter: {plan.max_iter}, "
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
        if plan.verbose:
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
    schedule = _priors.PriorUpdates(plan.alpha, plan.beta, plan.prior_burn_in,
                                    plan.prior_update_every, corpus)
    average_from = plan.max_iter - min(plan.n_averaged_sweeps, plan.max_iter)
    averaging = plan.n_averaged_sweeps > 0
    n_iter, loglik = 0, None
    history.stop_reason = f"max_iter={plan.max_iter} sweeps done"
    cadence = Cadence()
    for i in range(plan.max_iter):
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
                if not plan.averaging_is_default:
                    raise
                averaging = False
                sampler.discard_accumulated()
                warn_caller(f"the fit goes on without averaging the last sweeps: {exc}",
                            RuntimeWarning)
        evaluate = plan.evaluate_every > 0 and n_iter % plan.evaluate_every == 0
        loglik = None
        if evaluate or (plan.verbose and cadence.due(n_iter)):
            # Queued sweeps finish first, so that the evaluation's time is its own.
            sampler.synchronize()
            with stage("sweeps: evaluation"), cadence.timing():
                loglik = sampler.log_likelihood()
            bound = perplexity(loglik, weight)
            history.add(iteration=n_iter, seconds=time.perf_counter() - start,
                        train_loglik=loglik / max(weight, 1), train_perplexity=bound,
                        alpha_sum=float(sampler.alpha.sum()), beta=sampler.beta)
        if plan.verbose:
            _print_sweep(plan, n_iter, corpus.n_tokens, cadence, loglik, weight)
        if plan.callback is not None:
            plan.callback(n_iter, dict(
                max_iter=plan.max_iter, n_tokens=weight, seconds=time.perf_counter() - start,
                log_likelihood=None if loglik is None else loglik / max(weight, 1),
                snapshot=lambda: _snapshot(sampler, plan)))
        if evaluate and history.settled(bound, plan, n_iter, "sweeps"):
            break
    return n_iter, loglik
