"""``GPULatentDirichletAllocation``: scikit-learn's LDA interface over ESCA sampling backends.

The estimator validates input, resolves its parameters into a plan and keeps the fitted arrays;
the fit loop (:mod:`sklearn_gpulda._fitting.loop`) runs the plan on a sampler from the registry of
:mod:`sklearn_gpulda.backends`, and ``doc/algorithm.md`` defines the arithmetic. Fitted state is
plain NumPy, so a model pickled on a GPU machine loads and transforms on one without.
"""

from numbers import Integral, Real

import numpy as np
from sklearn.base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    TransformerMixin,
    _fit_context,
)
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, InvalidParameterError, StrOptions
from sklearn.utils.validation import check_is_fitted

from ._fitting import loop as _loop, score as _score
from ._fitting.fitted import FittedStateMixin, transaction
from ._fitting.plan import plan_for
from ._input.corpus import tokens
from ._input.row_blocks import BlockCorpus
from ._input.validation import check_counts, check_fit_input, warn_if_empty
from ._runtime.device import resolve_device, to_host
from ._runtime.stages import stage
from ._runtime.warnings import warn_caller
from .backends import algorithm_names, choose_backend, fold_in
from .backends.auto_rule import FitShape, auto_picks_dense


class GPULatentDirichletAllocation(
    FittedStateMixin, ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator
):
    """Latent Dirichlet Allocation trained by sparsity-aware ESCA sampling on a GPU or the CPU.

    A drop-in for :class:`sklearn.decomposition.LatentDirichletAllocation`: the same parameters,
    attributes and methods, trained by the ESCA algorithm (stochastic expectation maximisation with
    sampled topic assignments; Zaheer et al. 2016, as implemented on GPUs by SaberLDA, Li et al.
    2017) instead of variational Bayes. On a machine with CuPy and a CUDA GPU the sampler runs
    there; elsewhere a NumPy engine runs the same algorithm with the same random numbers.

    Parameters
    ----------
    n_components : int, default=10
        Number of topics.
    doc_topic_prior : float, array-like of shape (n_components,), 'auto' or None, default='auto'
        Prior ``alpha`` of the document-topic distributions. 'auto' (the default, unlike
        scikit-learn's None) learns an asymmetric prior during the fit by Minka's fixed point on
        the histograms of document lengths and per-document topic counts (as MALLET and tomotopy
        do), starting from ``1 / n_components``; see ``prior_burn_in`` and ``prior_update_every``.
        Priors are learned in batch fits only: online learning keeps the starting value, and
        ``partial_fit`` after a batch fit keeps the learned one (a mini-batch's short chain
        overstates alpha). A number fixes the prior for every topic, an array gives each topic its
        own fixed prior, and None means ``1 / n_components`` fixed (scikit-learn's default).
        Learned priors won by measurement: on NIPS, KOS, 20 Newsgroups and a NYTimes-shaped
        corpus at K = 20, 100 and 1,000, 'auto' with a learned ``topic_word_prior`` gave the best
        held-out log-likelihood in 11 of the 12 cases (``benchmarks/defaults.py``,
        ``doc/performance.md``); scikit-learn's ``1 / n_components`` was made for variational Bayes
        and, at K = 1,000, scored 0.16 to 0.50 nats per token lower.
    topic_word_prior : float, 'auto', None, array-like or tuple, default='auto'
        Prior ``beta`` of the topic-word distributions. 'auto' (the default, unlike
        scikit-learn's None) learns a symmetric prior during a batch fit, starting from
        ``1 / n_components``; online learning and ``partial_fit``, which never hold the whole
        corpus's word-topic counts, keep that starting value. None means ``1 / n_components``.

        A matrix prior seeds topics (gensim's ``eta``): an array of shape
        ``(n_components, n_features)`` gives every (topic, word) cell its own fixed positive
        prior; a tuple ``(base, additions)``, as :func:`sklearn_gpulda.seeded_topic_prior`
        builds from seed words, is ``base`` (a positive number, or 'auto' to learn it) plus a
        SciPy sparse matrix of shape ``(n_components, n_features)`` whose few stored cells add
        non-negative amounts to it. Only the cells above the least value are kept, so a prior
        with few seeded cells costs memory for those cells only. With a base of 'auto' the base
        is learned (Minka's fixed point) while the seeded additions stay fixed
        (``doc/algorithm.md``). A matrix prior runs on the CPU engines and on the sparse and
        mini-batched GPU engines (``algorithm='sparse'``, 'auto' or 'minibatch'; the sparse one
        on one GPU or several; B stored dense), in batch fits, online learning (each
        mini-batch blended towards ``eta`` plus its statistics) and ``partial_fit``, and on a
        Dask cluster; the dense GPU engine and ``word_topic_storage='hybrid'`` raise.
    learning_method : {'batch', 'online'}, default='batch'
        'batch' samples every token in each iteration; 'online' learns from mini-batches of
        ``batch_size`` documents, blending each batch's statistics into the model.
    learning_decay : float, default=0.7
        Exponent of the online learning rate ``(learning_offset + n_batch_iter_) **
        -learning_decay``.
    learning_offset : float, default=10.0
        Down-weights early mini-batches in online learning.
    max_iter : int or None, default=None
        Passes over the training data (sweeps in batch learning). None lets a batch fit run
        until the model has converged: the training log-likelihood per token is evaluated
        twice per doubling of the sweeps, and the fit stops, from 400 sweeps on, once its
        values over the last doubling lie within 0.005 nats per token of each other, or
        at 6,400 sweeps (``doc/algorithm.md``, "When a batch fit stops"; the numbers were
        measured at K = 20 and 100, not yet at 1,000). The evaluations cost at most about 3% of the
        fit. An integer runs exactly that many iterations. Online learning takes None as
        100 passes. Differs from scikit-learn's 10: a sampler needs more passes than
        variational Bayes to settle.
    batch_size : int, default=128
        Documents per mini-batch in online learning and ``partial_fit``.
    evaluate_every : int, default=-1
        Compute the training perplexity every this many iterations (0 or negative: never during
        fitting); fitting stops once it changes by less than ``perp_tol``.
    total_samples : int, default=1e6
        Total number of documents assumed by ``partial_fit``.
    perp_tol : float, default=1e-1
        Perplexity tolerance of the stopping rule above.
    mean_change_tol : float, default=1e-3
        Per-document stopping tolerance of the fold-in used by ``transform`` and ``score``.
    max_doc_update_iter : int, default=100
        Maximum fold-in iterations per document.
    n_jobs : int, default=None
        The most workers of the CPU engine (fit, ``transform``, ``score``), read as scikit-learn
        reads it: None means 1 unless in a ``joblib.parallel_config`` context, -1 all cores. A
        fit uses fewer where a sweep's work is too small to share or other processes keep cores
        busy (never more busy processes than cores, the caller included), and runs on one
        thread below two workers. The model does not depend on it: same ``random_state``, same
        model, bit for bit, whatever the number of workers. A GPU ignores it.
    verbose : int, default=0
        When positive, print a line per iteration with the mean throughput so far, and at the
        end why the fit stopped and the final training log-likelihood; with ``max_iter=None``
        the lines of the stopping rule's evaluations also give the gain per doubling. The
        likelihood of other iterations is printed only where computing it keeps evaluations
        within 3% of the fit's time (on the CPU engine it costs about a third of a sweep), and
        at every ``evaluate_every`` iterations.
    random_state : int, RandomState instance or None, default=None
        Seeds the counter-based generator; an int gives the same model on the same hardware.
    device : {'auto', 'cpu', 'cuda'}, 'cuda:N', 'cuda:N,M,...' or list, default='auto'
        Where to sample. 'auto' picks the GPU when CuPy sees one, else the CPU. Several GPUs of
        this host ('cuda:0,1', or a list such as ``[0, 1]``) share a batch fit with
        ``algorithm='sparse'``: each samples a contiguous part of the documents and the
        word-topic counts are summed over them after every sweep (through NCCL where CuPy has
        it), which gives the model one GPU gives, bit for bit, for integer counts. Online
        learning, ``partial_fit`` and inference run on the first GPU named.
    algorithm : {'auto', 'sparse', 'dense', 'minibatch'}, default='auto'
        Sampler. 'sparse' is ESCA with the two-branch sparsity-aware draw, whose cost per token
        grows with the non-zeros of the document's topic counts. 'dense' evaluates all K topics
        of every token with one running sum (Steele and Tristan's dense kernels on a GPU); it
        supports at most 1,024 topics. Both draw from the same distribution with the same random
        numbers. 'minibatch' is Moon's mini-batched sweep: documents in batches of about
        ``minibatch_tokens`` tokens, each batch drawn from counts that already hold the earlier
        batches' new topics (up to 4,096 topics). 'auto' picks what was measured best for the
        number of topics and the corpus on the device: 'dense' for a batch fit of one matrix on one
        GPU with no ``max_device_memory``, a scalar ``topic_word_prior`` and
        ``word_topic_storage`` 'auto' or 'dense', at K <= 128 for corpora of 1 M tokens or
        more (default fits on an H200 swept 1.5 to 3.3 times as fast as with 'sparse' on
        20 Newsgroups and NIPS, the NYTimes shape's sweeps 3 to 4 times), falling back to
        'sparse' where the dense chain would not fit the GPU; 'sparse' everywhere else (it
        reached its converged held-out likelihood as soon as or sooner than 'minibatch' at
        K = 100 and 1,000 on four corpora; on the CPU both rules cost the same). The choice is
        made at the first fit and kept in ``algorithm_``.
    n_batch_sweeps : int, default=10
        Sampling sweeps over each mini-batch in online learning and ``partial_fit``; statistics are
        averaged over the second half of them.
    n_averaged_sweeps : int or 'auto', default='auto'
        Batch learning only: ``components_`` becomes the mean word-topic counts of the last
        ``n_averaged_sweeps`` sweeps (plus the prior) instead of the counts after the last sweep.
        'auto' averages the last half of the sweeps, and skips averaging with a warning where its
        running sum (8 bytes per word and topic, kept on the device that samples) does not fit
        the device or ``max_device_memory`` (the model is then the last sample); an explicit
        number raises MemoryError instead, and the sparse GPU engine plans for it at load
        (streaming the corpus to make room). 0 keeps the last sample. A single sample's counts are
        noisy when there are few tokens per
        topic (large ``n_components``, small corpus); averaging the samples of one chain smooths
        them: with learned priors, averaging the second half of 1,600 sweeps raised the held-out
        log-likelihood by 0.01 to 0.07 nats per token (``doc/performance.md``). When
        ``evaluate_every`` stops the fit before the averaged sweeps, the sweeps already counted
        are used, or the last sample if none were. With ``max_iter=None`` the end is not known
        in advance: 'auto' averages the sweeps since the last doubling point of the stopping
        rule (100, 200, 400, ...), which is the last half of the run or, for a fit that stops
        between two of them, about the last 29%; an integer needs an integer ``max_iter``.
    prior_burn_in : int, default=0
        Sweeps before the first update of a learned prior ('auto').
    prior_update_every : int, default=10
        Sweeps between updates of a learned prior ('auto').
    max_device_memory : int, str or None, default=None
        GPU memory the process may hold during a batch fit, in bytes or as a string such as
        ``'8GB'`` or ``'512MiB'``; None means what the GPU has free. The budget is the whole
        process's: the CUDA context, the loaded kernels and their local memory, and every CuPy
        array of the process are measured when the fit starts and taken off it first (about
        0.5-2.5 GiB on a large GPU), so ``'8GB'`` fits an 8 GB card. The driver reports the
        whole GPU, so other processes' memory on a shared GPU is taken off too. When the
        corpus's tokens do not fit
        beside the model, the sparse GPU engine keeps them in pinned host memory and streams
        them through the GPU every sweep, overlapping the copies with the sampling (SaberLDA's
        scheme): the same model, bit for bit, at some cost in speed. Ignored on the CPU.
    minibatch_tokens : int or None, default=None
        Most tokens of one batch of ``algorithm='minibatch'`` (whole documents; a longer document
        is a batch of its own); None means 131,072, measured on an H200 (smaller batches apply
        the model more often per sweep but leave the GPU idle between them). Ignored by the
        other algorithms.
    word_topic_storage : {'auto', 'dense', 'hybrid'}, default='auto'
        How the sparse GPU engine stores the topic counts of each word during a batch fit.
        'dense' keeps a row of ``n_components`` cells per word. 'hybrid' keeps dense rows only
        for frequent words and a small hash table of (topic, count) for each word with few
        tokens (ezLDA's scheme), which makes large ``n_components`` fit in far less GPU memory;
        it needs integer counts. Both give the same model, bit for bit. 'auto' chooses 'hybrid'
        for integer counts from 4,096 topics on; below that it keeps the rows dense unless the
        hybrid ones let the corpus stay on the GPU where the dense ones would make it stream
        (``max_device_memory``), or keep averaging's running sum where the dense ones leave
        no room for it. Only 'auto' and 'dense' are accepted elsewhere
        (the CPU engine, several GPUs, other algorithms), where the rows are dense.

    Attributes
    ----------
    components_ : ndarray of shape (n_components, n_features)
        Topic-word pseudo-counts ``B + topic_word_prior_`` (plus ``topic_word_prior_cells_``
        with a matrix prior); rows normalised give the topics.
    exp_dirichlet_component_ : ndarray of shape (n_components, n_features)
        ``exp(E[log(beta)])`` under a Dirichlet with parameters ``components_``, as in scikit-learn.
        Computed from ``components_`` on first access (and again if ``components_`` is replaced),
        not during fit.
    n_batch_iter_ : int
        Number of iterations of the EM step (sweeps in batch learning, mini-batches in online).
    n_iter_ : int
        Number of passes over the data.
    bound_ : float
        Training perplexity: of the chain's last state in batch learning, of ``X`` by fold-in in
        online learning, and of the last mini-batch's chain in ``partial_fit``.
    doc_topic_prior_ : float or ndarray of shape (n_components,)
        The prior actually used: a float for a fixed number, an array for a per-topic or learned
        prior. ``transform``, ``score`` and ``partial_fit`` use it.
    topic_word_prior_ : float
        The prior actually used (learned with 'auto'); with a matrix prior, its base.
    topic_word_prior_cells_ : scipy.sparse.csr_matrix of shape (n_components, n_features)
        Only after a fit with a matrix ``topic_word_prior``: what its seeded cells add to
        ``topic_word_prior_`` (the prior of cell ``(k, v)`` is ``topic_word_prior_ +
        topic_word_prior_cells_[k, v]``). ``components_`` holds ``B`` plus that prior.
    random_state_ : RandomState instance
        The generator ``random_state`` gives (``check_random_state``), set by every ``fit`` and
        the first ``partial_fit``, as in scikit-learn; the seed of the chain is drawn from it.
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of features seen during fit, when X has string feature names.
    device_ : str
        Where the model was trained: 'cpu' or 'cuda:N'.
    algorithm_ : str
        The sampler used, 'sparse' or 'dense' (``algorithm`` resolved at the first fit); later
        ``partial_fit``, ``transform``, ``score`` and ``perplexity`` calls keep using it.
    n_tokens_ : float
        Number of training tokens (weighted sum for non-integer counts) in the last fit call.
    fit_time_ : float
        Wall-clock seconds of the last fit call's initialisation and sampling (on a GPU, up to
        the end of the last sweep's kernels), without input validation and the final copy of the
        topics back to the host.
    history_ : dict
        Figures of every evaluation of the last ``fit`` (at ``evaluate_every``, and those
        ``verbose`` could afford):
        arrays ``iteration``, ``seconds`` and ``train_perplexity`` (batch learning adds
        ``train_loglik``, the training log-likelihood per token, ``alpha_sum`` and ``beta``;
        with ``max_iter=None`` every evaluation of the stopping rule is among them),
        ``stop_reason``, a sentence saying why the fit stopped, and ``stopped_by``, which
        rule stopped it: 'tolerance' (``max_iter=None``, converged), 'ceiling'
        (``max_iter=None``, at its most sweeps), 'perp_tol' (``evaluate_every``) or 'max_iter'.

    See Also
    --------
    sklearn.decomposition.LatentDirichletAllocation : Variational Bayes LDA on the CPU.

    Notes
    -----
    Non-integer counts become weighted tokens: a count ``c`` is ``ceil(c)`` tokens of weight
    ``c / ceil(c)``, so integer counts are sampled exactly.

    Each token is drawn from the collapsed conditional: its own weight is taken out of its
    document's count of its current topic before the draw (``doc/algorithm.md``).

    ``transform`` folds documents in deterministically with the topics fixed, each document on its
    own, so its result does not depend on the other documents passed with it.

    A fit is a transaction: if it raises, the estimator is left exactly as it was.

    Examples
    --------
    >>> from sklearn_gpulda import GPULatentDirichletAllocation
    >>> from sklearn_gpulda.datasets import make_lda_corpus
    >>> X = make_lda_corpus(n_docs=100, n_words=200, n_topics=5, random_state=0).data
    >>> lda = GPULatentDirichletAllocation(n_components=5, max_iter=20, random_state=0,
    ...                                    device="cpu").fit(X)
    >>> lda.transform(X[:2]).shape
    (2, 5)
    """

    _parameter_constraints: dict = {
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "doc_topic_prior": [None, Interval(Real, 0, None, closed="neither"), "array-like",
                            StrOptions({"auto"})],
        # An array (n_components, n_features) or (base, additions): checked at fit
        # (backends.priors.resolve_topic_word_prior), where n_features is known.
        "topic_word_prior": [None, Interval(Real, 0, None, closed="neither"),
                             StrOptions({"auto"}), "array-like", tuple],
        "learning_method": [StrOptions({"batch", "online"})],
        "learning_decay": [Interval(Real, 0, 1, closed="both")],
        "learning_offset": [Interval(Real, 1.0, None, closed="left")],
        "max_iter": [None, Interval(Integral, 0, None, closed="left")],
        "batch_size": [Interval(Integral, 0, None, closed="neither")],
        "evaluate_every": [Interval(Integral, None, None, closed="neither")],
        "total_samples": [Interval(Real, 0, None, closed="neither")],
        "perp_tol": [Interval(Real, 0, None, closed="left")],
        "mean_change_tol": [Interval(Real, 0, None, closed="left")],
        "max_doc_update_iter": [Interval(Integral, 0, None, closed="left")],
        "n_jobs": [None, Integral],
        "verbose": ["verbose"],
        "random_state": ["random_state"],
        "device": [str, list, tuple],
        # Checked against the backend registry at fit: a new backend needs no change here.
        "algorithm": [str],
        "n_batch_sweeps": [Interval(Integral, 1, None, closed="left")],
        "n_averaged_sweeps": [Interval(Integral, 0, None, closed="left"), StrOptions({"auto"})],
        "prior_burn_in": [Interval(Integral, 0, None, closed="left")],
        "prior_update_every": [Interval(Integral, 1, None, closed="left")],
        # A number of bytes or a string such as '8GB', parsed at fit (_device.parse_bytes).
        "max_device_memory": [None, Interval(Integral, 1, None, closed="left"), str],
        "minibatch_tokens": [None, Interval(Integral, 1, None, closed="left")],
        "word_topic_storage": [StrOptions({"auto", "dense", "hybrid"})],
    }

    def __init__(
        self,
        n_components=10,
        *,
        doc_topic_prior="auto",
        topic_word_prior="auto",
        learning_method="batch",
        learning_decay=0.7,
        learning_offset=10.0,
        max_iter=None,
        batch_size=128,
        evaluate_every=-1,
        total_samples=1e6,
        perp_tol=1e-1,
        mean_change_tol=1e-3,
        max_doc_update_iter=100,
        n_jobs=None,
        verbose=0,
        random_state=None,
        device="auto",
        algorithm="auto",
        n_batch_sweeps=10,
        n_averaged_sweeps="auto",
        prior_burn_in=0,
        prior_update_every=10,
        max_device_memory=None,
        minibatch_tokens=None,
        word_topic_storage="auto",
    ):
        self.n_components = n_components
        self.doc_topic_prior = doc_topic_prior
        self.topic_word_prior = topic_word_prior
        self.learning_method = learning_method
        self.learning_decay = learning_decay
        self.learning_offset = learning_offset
        self.max_iter = max_iter
        self.batch_size = batch_size
        self.evaluate_every = evaluate_every
        self.total_samples = total_samples
        self.perp_tol = perp_tol
        self.mean_change_tol = mean_change_tol
        self.max_doc_update_iter = max_doc_update_iter
        self.n_jobs = n_jobs
        self.verbose = verbose
        self.random_state = random_state
        self.device = device
        self.algorithm = algorithm
        self.n_batch_sweeps = n_batch_sweeps
        self.n_averaged_sweeps = n_averaged_sweeps
        self.prior_burn_in = prior_burn_in
        self.max_device_memory = max_device_memory
        self.prior_update_every = prior_update_every
        self.minibatch_tokens = minibatch_tokens
        self.word_topic_storage = word_topic_storage

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.positive_only = True
        tags.input_tags.sparse = True
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags

    # -- resolving the parameters ------------------------------------------------------------
    def _fit_device(self):
        """The device a new fit uses; a misspelt ``device`` is an invalid parameter."""
        try:
            return resolve_device(self.device)
        except ValueError as exc:
            raise InvalidParameterError(
                f"The 'device' parameter of {type(self).__name__} is not valid: {exc}"
            ) from None

    def _inference_device(self):
        """Where a fitted model folds documents in and learns from more batches.

        ``device='cpu'`` means the CPU; 'auto' the GPU when one is usable here, else the CPU; an
        explicit GPU falls back to the CPU with a warning when it is missing, because a model
        trained on a GPU must still load and transform on a machine without one.
        """
        try:
            return resolve_device(self.device).lead
        except RuntimeError:
            warn_caller(
                f"device={self.device!r} is not usable here; using the CPU for this model",
                RuntimeWarning,
            )
            return resolve_device("cpu")

    def _plan(self, device, algorithm, seed, method=None, alpha_start=None, beta_start=None,
              callback=None, components_dtype=np.float64, n_tokens=0.0, row_blocks=False):
        """The fit loop's :class:`~sklearn_gpulda._fitting.plan.Plan` for these parameters:
        ``method`` is 'partial' for ``partial_fit``, and by default ``learning_method``;
        ``n_tokens`` and ``row_blocks`` describe the corpus to 'auto'."""
        if algorithm not in ("auto", *algorithm_names()):
            names = ", ".join(repr(a) for a in ("auto", *algorithm_names()))
            raise InvalidParameterError(
                f"The 'algorithm' parameter of {type(self).__name__} must be one of {names}. "
                f"Got {algorithm!r} instead."
            )
        if algorithm == "auto":
            algorithm = self._auto_algorithm(device, method or self.learning_method, n_tokens,
                                             row_blocks)
        backend = choose_backend(algorithm, self.n_components, device)
        return plan_for(self, backend, device, seed, method or self.learning_method,
                        alpha_start, beta_start, callback, components_dtype)

    def _auto_algorithm(self, device, method, n_tokens=0.0, row_blocks=False):
        """'dense' where ``algorithm='auto'`` takes the dense engine for this fit
        (:mod:`~sklearn_gpulda.backends.auto_rule`), else 'auto' (the registry's order)."""
        shape = FitShape(n_topics=self.n_components, device_kind=device.kind,
                         n_gpus=len(device.indices), method=method,
                         word_topic_storage=self.word_topic_storage, n_tokens=float(n_tokens),
                         memory_budget=self.max_device_memory is not None,
                         row_blocks=bool(row_blocks))
        return "dense" if auto_picks_dense(shape) else "auto"

    def _sampler_that_fits(self, plan, corpus, device, callback, dtype):
        """The plan and a sampler for ``corpus``: where 'auto' took the dense engine and its
        chain would not fit the GPU, the sparse engine's (which streams), with the same seed."""
        sampler = plan.sampler()
        if self.algorithm != "auto" or plan.backend.algorithm != "dense" or sampler.fits(corpus):
            return plan, sampler
        sampler.release()
        plan = self._plan(device, "sparse", plan.seed, callback=callback, components_dtype=dtype)
        return plan, plan.sampler()

    def _new_seed(self):
        """The 32-bit seed of a new chain, drawn from ``random_state_``, which it sets first.

        scikit-learn's LDA sets ``random_state_`` where it starts a model (every ``fit``, the
        first ``partial_fit``) and draws its initial topics from it; here the generator gives
        one number, the seed of the counter-based streams, so the model depends on
        ``random_state`` exactly as before.
        """
        self.random_state_ = check_random_state(self.random_state)
        return int(self.random_state_.randint(np.iinfo(np.uint32).max))

    # -- fitting ---------------------------------------------------------------------------------
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None, *, callback=None):
        """Learn topics from a document-term count matrix.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features), or list of them
            Document-term counts. NumPy, SciPy sparse, CuPy and cupyx sparse inputs are accepted.
            Batch learning also takes a list or tuple of row blocks (SciPy sparse matrices or
            2-d NumPy arrays, e.g. memory-mapped, with the same columns) as the documents of
            all of them in order: the blocks are validated and laid out one at a time and never
            joined, and the model is the one of the joined matrix.
        y : Ignored
            Not used, present for API consistency.
        callback : callable, default=None
            Called as ``callback(iteration, info)`` after every sweep (batch learning) or pass
            (online learning), for progress displays; ``info`` is a dict with ``max_iter``
            (with ``max_iter=None``, the most sweeps the fit may run), ``n_tokens`` (tokens
            per sweep), ``seconds`` (since sampling began) and ``log_likelihood`` (training
            log-likelihood per token, None when this sweep was not evaluated) and, in batch
            learning, ``snapshot``: a function returning
            ``(components, doc_topic_prior)`` as a fit stopped after this sweep would set them
            (a copy to the host: call it only where you need it, e.g. to score held-out
            documents along the way). Not stored on the model, so a fitted model stays
            picklable.

        Returns
        -------
        self : object
            Fitted estimator. If the fit raises (bad input, too little memory, an interrupt),
            the estimator is left exactly as it was before the call.

        Examples
        --------
        >>> from sklearn_gpulda import GPULatentDirichletAllocation
        >>> from sklearn_gpulda.datasets import load_kjv_chapters
        >>> X = load_kjv_chapters().data[:200]
        >>> lda = GPULatentDirichletAllocation(n_components=5, max_iter=10, random_state=0,
        ...                                    device="cpu").fit(X)
        >>> lda.components_.shape, lda.n_iter_
        ((5, 3117), 10)
        """
        whom = "GPULatentDirichletAllocation.fit"
        with transaction(self):
            batch = self.learning_method == "batch"
            # Mini-batches are small: online learning runs on the first GPU named.
            device = self._fit_device()
            if not batch:
                device = device.lead
            with stage("validate"):
                X, blocks, dtype = check_fit_input(self, X, whom, device, batch)
            # Only 'auto' on a GPU reads the corpus's size (a pass over the counts, and on a
            # device array a reduction CuPy would compile).
            sized = self.algorithm == "auto" and device.kind == "cuda" and batch and not blocks
            plan = self._plan(device, self.algorithm, self._new_seed(), callback=callback,
                              components_dtype=dtype, n_tokens=float(X.sum()) if sized else 0.0,
                              row_blocks=blocks)
            if batch:
                with stage("tokens"):
                    corpus = BlockCorpus(X) if blocks else tokens(X)
                # The corpus holds what the fit reads: the counts' copy on the device can go.
                del X
                warn_if_empty(corpus.total_weight, "fit")
                plan, sampler = self._sampler_that_fits(plan, corpus, device, callback, dtype)
                state = _loop.fit_corpus(plan, corpus, sampler, release_counts=True)
            else:
                warn_if_empty(float(X.sum()), "fit")
                state = _loop.fit_online(plan, X)
            with stage("assign"):
                self._assign(state, dtype, device, plan.backend, plan.seed)
        return self

    @_fit_context(prefer_skip_nested_validation=True)
    def partial_fit(self, X, y=None):
        """Update the model with one pass of mini-batches over ``X`` (online learning).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Document-term counts.
        y : Ignored
            Not used, present for API consistency.

        Returns
        -------
        self : object
            Partially fitted estimator; left as it was if the call raises.

        Examples
        --------
        >>> from sklearn_gpulda import GPULatentDirichletAllocation
        >>> from sklearn_gpulda.datasets import load_kjv_chapters
        >>> X = load_kjv_chapters().data
        >>> lda = GPULatentDirichletAllocation(n_components=5, total_samples=X.shape[0],
        ...                                    random_state=0, device="cpu")
        >>> for start in range(0, 400, 100):
        ...     lda = lda.partial_fit(X[start:start + 100])
        >>> lda.n_batch_iter_
        5
        """
        with transaction(self):
            first = not self._has_components()
            device = self._fit_device().lead if first else self._inference_device()
            # Counts for a GPU go up once, as CSR: the sampler lays every mini-batch out there.
            X = check_counts(self, X, reset=first,
                             whom="GPULatentDirichletAllocation.partial_fit", device=device,
                             upload=True)
            warn_if_empty(float(X.sum()), "partial_fit")
            if first:
                plan = self._plan(device, self.algorithm, self._new_seed(), "partial")
            else:
                plan = self._plan(device, self.algorithm_, self._seed, "partial",
                                  self.doc_topic_prior_, self.topic_word_prior_)
            state = _loop.partial_fit(plan, X, self._continuation(device))
            self._assign(state, X.dtype, device, plan.backend, plan.seed)
        return self

    # -- topics fixed ------------------------------------------------------------------------------
    def _fold_in(self, X, whom, return_loglik=False):
        check_is_fitted(self)
        device = self._inference_device()
        X = check_counts(self, X, reset=False, whom=whom, device=device)
        result = fold_in(device, X, self.components_, self.doc_topic_prior_,
                         self.max_doc_update_iter, self.mean_change_tol, return_loglik,
                         n_jobs=self.n_jobs)
        return X, result

    def transform(self, X, *, normalize=True):
        """Document-topic distributions of ``X`` with the topics fixed.

        Each document is folded in on its own (``doc/algorithm.md``, "Fold-in"), so its result
        does not depend on the other documents passed with it.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Document-term counts.
        normalize : bool, default=True
            Whether rows are normalised to sum to one, as in scikit-learn. With False each row
            is the document's unnormalised posterior Dirichlet parameter, ``gamma = alpha +
            expected topic counts``, the quantity scikit-learn returns unnormalised.

        Returns
        -------
        doc_topic_distr : ndarray of shape (n_samples, n_components)
            Rows sum to one (``normalize=True``); an empty document gets the uniform
            distribution. Same dtype as ``X`` (float64 for integer input).

        Examples
        --------
        >>> from sklearn_gpulda import GPULatentDirichletAllocation
        >>> from sklearn_gpulda.datasets import load_kjv_chapters
        >>> X = load_kjv_chapters().data
        >>> lda = GPULatentDirichletAllocation(n_components=5, max_iter=10, random_state=0,
        ...                                    device="cpu").fit(X[:200])
        >>> theta = lda.transform(X[200:203])
        >>> theta.shape, bool(abs(theta.sum(axis=1) - 1).max() < 1e-12)
        ((3, 5), True)
        """
        X, theta = self._fold_in(X, "GPULatentDirichletAllocation.transform")
        if not normalize:
            # theta = gamma / sum(gamma) with sum(gamma) = document length + sum(alpha).
            lengths = np.asarray(to_host(X.sum(axis=1)), dtype=np.float64).reshape(-1, 1)
            theta = theta * (lengths + np.sum(np.broadcast_to(self.doc_topic_prior_,
                                                              (self.n_components,))))
        return theta.astype(X.dtype, copy=False)

    def fit_transform(self, X, y=None, *, normalize=True):
        """Fit the model to ``X``, then return its document-topic distributions.

        The same as ``fit(X).transform(X, normalize=normalize)``: the distributions come from
        folding ``X`` in with the fitted topics, not from the chain's last sample. Defined here
        because scikit-learn's ``TransformerMixin.fit_transform`` passes extra keywords such as
        ``normalize`` on to ``fit``, which does not take them.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Document-term counts (a single matrix: the rows are transformed as well).
        y : Ignored
            Not used, present for API consistency.
        normalize : bool, default=True
            Whether rows are normalised to sum to one (see :meth:`transform`).

        Returns
        -------
        doc_topic_distr : ndarray of shape (n_samples, n_components)
            As :meth:`transform` returns it.

        Examples
        --------
        >>> from sklearn_gpulda import GPULatentDirichletAllocation
        >>> from sklearn_gpulda.datasets import load_kjv_chapters
        >>> X = load_kjv_chapters().data[:200]
        >>> lda = GPULatentDirichletAllocation(n_components=5, max_iter=10, random_state=0,
        ...                                    device="cpu")
        >>> gamma = lda.fit_transform(X, normalize=False)
        >>> theta = gamma / gamma.sum(axis=1, keepdims=True)
        >>> gamma.shape, bool(abs(theta - lda.transform(X)).max() < 1e-12)
        ((200, 5), True)
        """
        return self.fit(X, y).transform(X, normalize=normalize)

    def score(self, X, y=None):
        """Approximate log-likelihood of ``X`` under the model: a sum of per-document terms.

        Each document is folded in with the topics fixed (as in :meth:`transform`) and scored by
        ``sum_v n_v log(sum_k theta_k phi_kv)``, where ``theta`` was estimated from the same
        document. This is not scikit-learn's variational bound, and the two numbers are not
        comparable (see :meth:`perplexity`). Because it is a plain sum over documents, scores
        of disjoint folds add up to the score of their union.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Document-term counts.
        y : Ignored
            Not used, present for API consistency.

        Returns
        -------
        score : float

        Examples
        --------
        >>> from sklearn_gpulda import GPULatentDirichletAllocation
        >>> from sklearn_gpulda.datasets import load_kjv_chapters
        >>> X = load_kjv_chapters().data
        >>> lda = GPULatentDirichletAllocation(n_components=5, max_iter=10, random_state=0,
        ...                                    device="cpu").fit(X[:200])
        >>> bool(lda.score(X[200:220]) + lda.score(X[220:240]) - lda.score(X[200:240]) < 1e-6)
        True
        """
        _, (_, loglik) = self._fold_in(X, "GPULatentDirichletAllocation.score",
                                       return_loglik=True)
        return float(loglik.sum())

    def perplexity(self, X, sub_sampling=False):
        """Perplexity ``exp(-score(X) / number of tokens)``.

        What it estimates: how well the topics predict the words of documents whose topic
        proportions were fitted to those same words (a fold-in estimate, optimistic for new
        documents). scikit-learn's ``perplexity`` is ``exp`` of its variational bound instead,
        which is looser, so its numbers run higher than ours for the same topics; to compare
        models from different libraries, score them all with
        :func:`sklearn_gpulda.metrics.document_completion`, which estimates the proportions from
        one half of each held-out document and scores the other half.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Document-term counts.
        sub_sampling : bool, default=False
            Accepted for compatibility with scikit-learn, where it is deprecated and ignored;
            ignored here too.

        Returns
        -------
        score : float
            Perplexity; NaN when ``X`` holds no tokens.

        Examples
        --------
        >>> from sklearn_gpulda import GPULatentDirichletAllocation
        >>> from sklearn_gpulda.datasets import load_kjv_chapters
        >>> X = load_kjv_chapters().data
        >>> lda = GPULatentDirichletAllocation(n_components=5, max_iter=10, random_state=0,
        ...                                    device="cpu").fit(X[:200])
        >>> bool(lda.perplexity(X[200:240]) > 1)
        True
        """
        X, (_, loglik) = self._fold_in(X, "GPULatentDirichletAllocation.perplexity",
                                       return_loglik=True)
        return _score.perplexity(loglik.sum(), float(X.sum()))

    @property
    def _n_features_out(self):
        """Number of transformed output features."""
        return self._n_topics_fitted()
