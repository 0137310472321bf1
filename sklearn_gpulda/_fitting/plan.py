"""What a fit runs: the estimator's parameters resolved into a :class:`Plan`.

A plan names no engine. What differs between engines is asked of their registry entry
(:meth:`~sklearn_gpulda.backends.Backend.sampler_options`): the plan keeps only the settings its
sampler takes. What differs between learning methods is the method's (``batch``, ``online`` or
``partial``): a partial fit is one silent pass, and only a batch fit learns priors or averages.
"""

from dataclasses import dataclass, field

import numpy as np

from .._runtime.device import parse_bytes
from ..backends import priors as _priors
from . import stopping as _stopping

#: The learning methods a plan is made for: a batch fit, online learning's fit, and one call of
#: ``partial_fit``.
METHODS = ("batch", "online", "partial")


@dataclass
class Iterations:
    """The fit loop's iterations (sweeps or passes): how many, which are evaluated, when the fit
    stops early, and who hears of each."""

    #: The most iterations (with ``stopping``, its ceiling).
    max_iter: int = 100
    #: ``max_iter=None``'s rule (:class:`~sklearn_gpulda._fitting.stopping.StoppingRule`): the
    #: fit stops once its likelihood stops rising; None runs ``max_iter`` iterations.
    stopping: object = None
    evaluate_every: int = -1
    perp_tol: float = 0.1
    verbose: int = 0
    #: ``callback(iteration, info)`` after every iteration; ``info`` holds max_iter, n_tokens,
    #: seconds and log_likelihood (per token, or None if not evaluated), and in a batch fit
    #: ``snapshot``.
    callback: object = None

    def evaluates(self, n_iter):
        """Whether ``evaluate_every`` asks for an evaluation after iteration ``n_iter``."""
        return self.evaluate_every > 0 and n_iter % self.evaluate_every == 0


@dataclass
class Schedule:
    """What a batch fit does between its sweeps besides sampling: prior updates and averaging."""

    prior_burn_in: int = 0
    prior_update_every: int = 10
    n_averaged_sweeps: int = 0
    #: The averaging is the estimator's default rather than asked for: where its running sum
    #: does not fit in memory the fit goes on without it (with a warning) instead of failing.
    averaging_is_default: bool = False


@dataclass
class Online:
    """Online learning's mini-batches and how they are blended into the model."""

    batch_size: int = 128
    learning_offset: float = 10.0
    learning_decay: float = 0.7
    n_batch_sweeps: int = 10
    #: Documents the corpus is assumed to hold (None: those of the fit's X).
    total_samples: float = None


@dataclass
class FoldIn:
    """The deterministic fold-in's settings (online learning's evaluation)."""

    max_iter: int = 100
    tol: float = 1e-3
    #: Threads of the CPU's fold-in (a GPU ignores it).
    n_jobs: object = None


@dataclass
class Plan:
    """What a fit needs to know, resolved from the estimator's parameters."""

    backend: object            # sklearn_gpulda.backends.Backend
    device: object             # sklearn_gpulda._runtime.device.Device
    n_topics: int
    seed: int
    alpha: _priors.Prior
    beta: _priors.Prior
    iterations: Iterations = field(default_factory=Iterations)
    schedule: Schedule = field(default_factory=Schedule)
    online: Online = field(default_factory=Online)
    fold_in: FoldIn = field(default_factory=FoldIn)
    #: The keyword arguments the backend's sampler takes (``Backend.sampler_options``).
    engine: dict = field(default_factory=dict)
    #: dtype of ``components_`` (scikit-learn's rule: float32 for float32 input, else float64).
    components_dtype: object = np.float64
    #: The seeded cells of a matrix ``topic_word_prior``
    #: (:class:`~sklearn_gpulda.backends.priors.CellPrior`), on top of the base ``beta``; None
    #: for a scalar prior.
    beta_cells: object = None

    def sampler(self):
        """A new sampler of the plan's backend, starting from the plan's priors."""
        sampler = self.backend.make(self.n_topics, self.alpha.value, self.beta.value, self.seed,
                                    self.device, **self.engine)
        if self.beta_cells is not None:
            sampler.set_beta_cells(self.beta_cells)
        return sampler


#: What ``max_iter=None`` means for a batch fit: True, sweep until the training likelihood stops
#: rising (:mod:`~sklearn_gpulda._fitting.stopping`); False, the fixed counts below. The one line
#: to change to go back to fixed defaults.
NONE_STOPS_WHEN_CONVERGED = True

#: ``max_iter=None`` without the rule: sweeps of a batch fit on a GPU, where they take seconds
#: (held-out likelihood still rose from 800 to 1,600 sweeps at K = 1,000 on the corpora of
#: doc/performance.md), and passes everywhere else (a batch fit on the CPU engine, online
#: learning, which never stops by the rule).
DEFAULT_SWEEPS_GPU = 1000
DEFAULT_ITERATIONS = 100


def stopping_rule(max_iter, learning_method="batch"):
    """The :class:`~sklearn_gpulda._fitting.stopping.StoppingRule` a fit with ``max_iter``
    stops by, or None for a fixed number of iterations (an integer ``max_iter``, online
    learning, whose passes are scored by a fold-in far dearer than a sweep's likelihood)."""
    if max_iter is None and learning_method == "batch" and NONE_STOPS_WHEN_CONVERGED:
        return _stopping.default_rule()
    return None


def resolve_max_iter(max_iter, device_kind, learning_method="batch"):
    """``max_iter`` as a number of sweeps: itself, or for ``None`` the most a fit on a device of
    ``device_kind`` ('cpu' or 'cuda', resolved) with ``learning_method`` runs (the stopping
    rule's ceiling where it stops by the rule)."""
    if max_iter is not None:
        return max_iter
    rule = stopping_rule(max_iter, learning_method)
    if rule is not None:
        return rule.ceiling
    on_gpu = device_kind == "cuda" and learning_method == "batch"
    return DEFAULT_SWEEPS_GPU if on_gpu else DEFAULT_ITERATIONS


def _priors_of(params, method, alpha_start, beta_start):
    """The document-topic and topic-word :class:`~sklearn_gpulda.backends.priors.Prior`.

    Priors are learned from the counts of a whole corpus's chain: online learning holds only
    short chains of mini-batches, whose spread-out counts overstate alpha (measured on KJV: 0.5
    to 0.8 learned, and a worse model than 1 / K), so there they stay where they are."""
    k = params.n_components
    alpha = _priors.resolve_prior(params.doc_topic_prior, 1.0 / k, k, "doc_topic_prior")
    beta, cells = _priors.resolve_topic_word_prior(params.topic_word_prior, 1.0 / k, k,
                                                   getattr(params, "n_features_in_", None))
    learn = method == "batch"
    alpha = _priors.Prior(alpha.value if alpha_start is None else alpha_start,
                          alpha.learn and learn)
    beta = _priors.Prior(beta.value if beta_start is None else beta_start, beta.learn and learn)
    return alpha, beta, cells


def matrix_prior_engines():
    """Names of the registry entries whose samplers take a matrix ``topic_word_prior``."""
    from ..backends import BACKENDS

    return tuple(b.name for b in BACKENDS if b.matrix_prior)


def check_matrix_prior(backend, cells, word_topic_storage="auto"):
    """Raise where a fit with a matrix ``topic_word_prior`` would not sample with it (never
    silently with the base value alone): an engine whose entry does not take it
    (:attr:`~sklearn_gpulda.backends.Backend.matrix_prior`), or B stored hybrid (its hashed
    rows hold integer counts, where the GPU adds the seeded cells' pseudo-counts). Batch
    fits, online learning and ``partial_fit`` all take it on those engines."""
    if cells is None:
        return
    if not getattr(backend, "matrix_prior", False):
        names = ", ".join(repr(n) for n in matrix_prior_engines())
        raise ValueError(f"a matrix topic_word_prior samples on the engines {names} so far "
                         f"(algorithm='sparse', 'dense' or 'minibatch' on device='cuda', or "
                         f"any algorithm on device='cpu'); this fit would run {backend.name!r}")
    if word_topic_storage == "hybrid":
        raise ValueError("a matrix topic_word_prior needs the word-topic counts stored dense: "
                         "use word_topic_storage='auto' or 'dense', not 'hybrid'")


def _engine_settings(params, method, averaged):
    """Every engine setting (``backends.ENGINE_SETTINGS``) of a fit, for the backend to pick
    those its sampler takes."""
    if method != "batch" or params.n_averaged_sweeps == "auto":
        # Online learning's mini-batch chains average their second half of sweeps, and are
        # never streamed: their averaging is planned as the default's.
        averaging = "optional"
    else:
        averaging = "required" if averaged else "none"
    return dict(n_jobs=params.n_jobs,
                max_device_memory=parse_bytes(params.max_device_memory, "max_device_memory"),
                batch_tokens=params.minibatch_tokens,
                word_topic_storage=params.word_topic_storage, averaging=averaging)


def plan_for(params, backend, device, seed, method="batch", alpha_start=None, beta_start=None,
             callback=None, components_dtype=np.float64):
    """The :class:`Plan` of an estimator's parameters.

    Parameters
    ----------
    params : GPULatentDirichletAllocation
        Its parameters are read (validated already).
    backend, device, seed
        The registry entry, the resolved device and the 32-bit seed.
    method : {'batch', 'online', 'partial'}, default='batch'
        A batch fit, online learning's fit, or one call of ``partial_fit`` (a single pass that
        prints, evaluates and calls back nothing).
    alpha_start, beta_start : float or ndarray, optional
        Where the priors start instead of their parameters' values (a fitted model's priors,
        for ``partial_fit``).
    callback : callable, optional
        See :attr:`Iterations.callback`.
    components_dtype : dtype, default=np.float64

    Raises
    ------
    ValueError
        ``word_topic_storage='hybrid'`` where the backend's sampler does not take it.
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    alpha, beta, cells = _priors_of(params, method, alpha_start, beta_start)
    check_matrix_prior(backend, cells, params.word_topic_storage)
    learning_method = "batch" if method == "batch" else "online"
    max_iter = resolve_max_iter(params.max_iter, device.kind, learning_method)
    rule = stopping_rule(params.max_iter, method)
    averaged = params.n_averaged_sweeps
    if method != "batch":
        averaged = 0
    elif averaged == "auto":
        # With the stopping rule: what a fit that reaches the ceiling averages; the windows
        # of the rule decide which sweeps (stopping.py).
        averaged = max_iter // 2
    elif rule is not None and averaged > 0:
        raise ValueError(
            f"n_averaged_sweeps={averaged} needs an integer max_iter: with max_iter=None the "
            "last sweep is not known in advance; use n_averaged_sweeps='auto' (the sweeps "
            "since the last doubling, doc/algorithm.md) or 0, or give max_iter")
    if method == "partial":
        iterations = Iterations(max_iter=1)
    else:
        iterations = Iterations(max_iter=max_iter, stopping=rule,
                                evaluate_every=params.evaluate_every,
                                perp_tol=params.perp_tol, verbose=params.verbose,
                                callback=callback)
    engine = backend.sampler_options(_engine_settings(params, method, averaged), device)
    if params.word_topic_storage == "hybrid" and "word_topic_storage" not in engine:
        raise ValueError(
            "word_topic_storage='hybrid' is a storage of the sparse engine on one GPU; this fit "
            f"runs {backend.name!r} on {device}: use 'auto' or 'dense'")
    return Plan(
        backend=backend, device=device, n_topics=params.n_components, seed=seed, alpha=alpha,
        beta=beta, iterations=iterations,
        schedule=Schedule(prior_burn_in=params.prior_burn_in,
                          prior_update_every=params.prior_update_every,
                          n_averaged_sweeps=averaged,
                          averaging_is_default=params.n_averaged_sweeps == "auto"),
        online=Online(batch_size=params.batch_size, learning_offset=params.learning_offset,
                      learning_decay=params.learning_decay, n_batch_sweeps=params.n_batch_sweeps,
                      total_samples=params.total_samples if method == "partial" else None),
        fold_in=FoldIn(max_iter=params.max_doc_update_iter, tol=params.mean_change_tol,
                       n_jobs=params.n_jobs),
        engine=engine, components_dtype=components_dtype, beta_cells=cells,
    )
