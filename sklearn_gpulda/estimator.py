"""``GPULatentDirichletAllocation``: scikit-learn's LDA interface over ESCA sampling engines.

The estimator validates input, chooses an engine and runs the loops; engines do the arithmetic
(``doc/algorithm.md``). Fitted state is plain NumPy, so a model pickled on a GPU machine loads and
transforms on one without.
"""

import time
import warnings
from numbers import Integral, Real

import numpy as np
from scipy.special import psi
from sklearn.base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    TransformerMixin,
    _fit_context,
)
from sklearn.utils import check_random_state, gen_batches
from sklearn.utils._param_validation import Interval, InvalidParameterError, StrOptions
from sklearn.utils.validation import check_is_fitted, check_non_negative, validate_data

from ._corpus import tokens_from_counts
from ._device_input import (
    check_device_counts,
    is_device_array,
    to_host,
    tokens_from_device_counts,
)
from ._engines import choose_algorithm, make_engine, resolve_device


def _tokens(X):
    """Token corpus of validated counts, made where the counts lie."""
    return tokens_from_device_counts(X) if is_device_array(X) else tokens_from_counts(X)


def _as_device_pattern(device):
    return isinstance(device, str) and device.startswith("cuda:") and device[5:].isdigit()


class GPULatentDirichletAllocation(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Latent Dirichlet Allocation trained by sparsity-aware ESCA sampling on a GPU or the CPU.

    A drop-in for :class:`sklearn.decomposition.LatentDirichletAllocation`: the same parameters,
    attributes and methods, trained by the ESCA algorithm (stochastic expectation maximisation with
    sampled topic assignments; Zaheer et al. 2016, as implemented on GPUs by SaberLDA, Li et al.
    2017) instead of variational Bayes. On a machine with CuPy and a CUDA GPU the sampler runs there;
    elsewhere a NumPy engine runs the same algorithm with the same random numbers.

    Parameters
    ----------
    n_components : int, default=10
        Number of topics.
    doc_topic_prior : float, default=None
        Prior ``alpha`` of the document-topic distributions. None means ``1 / n_components``.
    topic_word_prior : float, default=None
        Prior ``beta`` of the topic-word distributions. None means ``1 / n_components``.
    learning_method : {'batch', 'online'}, default='batch'
        'batch' samples every token in each iteration; 'online' learns from mini-batches of
        ``batch_size`` documents, blending each batch's statistics into the model.
    learning_decay : float, default=0.7
        Exponent of the online learning rate ``(learning_offset + n_batch_iter_) ** -learning_decay``.
    learning_offset : float, default=10.0
        Down-weights early mini-batches in online learning.
    max_iter : int, default=100
        Passes over the training data. Differs from scikit-learn's 10: a sampler needs more
        passes than variational Bayes to settle (SaberLDA trains for about 100).
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
        Accepted for compatibility; engines parallelise internally and ignore it.
    verbose : int, default=0
        Print the log-likelihood and throughput of each iteration when positive.
    random_state : int, RandomState instance or None, default=None
        Seeds the counter-based generator; an int gives the same model on the same hardware.
    device : {'auto', 'cpu', 'cuda'} or 'cuda:N', default='auto'
        Where to sample. 'auto' picks the GPU when CuPy sees one, else the CPU.
    algorithm : {'auto', 'sparse', 'dense'}, default='auto'
        Sampler. 'sparse' is ESCA with the two-branch sparsity-aware draw, whose cost per token
        grows with the non-zeros of the document's topic counts. 'dense' evaluates all K topics
        of every token with one running sum (Steele and Tristan's dense kernels on a GPU); it
        supports at most 1,024 topics. Both draw from the same distribution with the same random
        numbers. 'auto' picks the engine measured faster for the number of topics on the device:
        at present 'sparse' everywhere (whole iterations on an H200 favoured it at every K from 16
        to 1,024); the choice is made at the first fit and kept in ``algorithm_``.
    n_batch_sweeps : int, default=10
        Sampling sweeps over each mini-batch in online learning and ``partial_fit``; statistics are
        averaged over the second half of them.
    n_averaged_sweeps : int, default=0
        Batch learning only: ``components_`` becomes the mean word-topic counts of the last
        ``n_averaged_sweeps`` sweeps (plus the prior) instead of the counts after the last sweep.
        A single sample's counts are noisy when there are few tokens per topic (large
        ``n_components``, small corpus); averaging the samples of one chain smooths them. On a
        1,000-document KOS sample with 500 topics, averaging the last 120 of 160 sweeps raised the
        held-out log-likelihood by 0.11 nats per token, at 20 topics by 0.016
        (``benchmarks/averaging.py``). The averaged sweeps
        are the last ones of ``max_iter``; when ``evaluate_every`` stops the fit earlier, the
        sweeps already counted are used, or the last sample if none were. Each averaged sweep
        copies the counts to the host, which on a GPU costs more than the sweep itself.

    Attributes
    ----------
    components_ : ndarray of shape (n_components, n_features)
        Topic-word pseudo-counts ``B + topic_word_prior``; rows normalised give the topics.
    exp_dirichlet_component_ : ndarray of shape (n_components, n_features)
        ``exp(E[log(beta)])`` under a Dirichlet with parameters ``components_``, as in scikit-learn.
        Computed from ``components_`` on first access (and again if ``components_`` is replaced),
        not during fit.
    n_batch_iter_ : int
        Number of iterations of the EM step (sweeps in batch learning, mini-batches in online).
    n_iter_ : int
        Number of passes over the data.
    bound_ : float
        Final perplexity on the training set.
    doc_topic_prior_ : float
        The prior actually used.
    topic_word_prior_ : float
        The prior actually used.
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
        the end of the last sweep's kernels, and including the copies of ``n_averaged_sweeps``),
        without input validation and the final copy of the topics back to the host.

    See Also
    --------
    sklearn.decomposition.LatentDirichletAllocation : Variational Bayes LDA on the CPU.

    Notes
    -----
    Non-integer counts become weighted tokens: a count ``c`` is ``ceil(c)`` tokens of weight
    ``c / ceil(c)``, so integer counts are sampled exactly.

    ``transform`` folds documents in deterministically with the topics fixed, each document on its
    own, so its result does not depend on the other documents passed with it.

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
        "doc_topic_prior": [None, Interval(Real, 0, None, closed="neither")],
        "topic_word_prior": [None, Interval(Real, 0, None, closed="neither")],
        "learning_method": [StrOptions({"batch", "online"})],
        "learning_decay": [Interval(Real, 0, 1, closed="both")],
        "learning_offset": [Interval(Real, 1.0, None, closed="left")],
        "max_iter": [Interval(Integral, 0, None, closed="left")],
        "batch_size": [Interval(Integral, 0, None, closed="neither")],
        "evaluate_every": [Interval(Integral, None, None, closed="neither")],
        "total_samples": [Interval(Real, 0, None, closed="neither")],
        "perp_tol": [Interval(Real, 0, None, closed="left")],
        "mean_change_tol": [Interval(Real, 0, None, closed="left")],
        "max_doc_update_iter": [Interval(Integral, 0, None, closed="left")],
        "n_jobs": [None, Integral],
        "verbose": ["verbose"],
        "random_state": ["random_state"],
        "device": [str],
        "algorithm": [StrOptions({"auto", "sparse", "dense"})],
        "n_batch_sweeps": [Interval(Integral, 1, None, closed="left")],
        "n_averaged_sweeps": [Interval(Integral, 0, None, closed="left")],
    }

    def __init__(
        self,
        n_components=10,
        *,
        doc_topic_prior=None,
        topic_word_prior=None,
        learning_method="batch",
        learning_decay=0.7,
        learning_offset=10.0,
        max_iter=100,
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
        n_averaged_sweeps=0,
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

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.positive_only = True
        tags.input_tags.sparse = True
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags

    # -- validation --------------------------------------------------------------------
    def _check_counts(self, X, reset, whom, device="cpu"):
        """Validate counts; CuPy input stays on the device when the engine runs there."""
        if is_device_array(X):
            if device != "cpu":
                return check_device_counts(self, X, reset, whom)
            X = to_host(X)
        X = validate_data(self, X, reset=reset, accept_sparse="csr", dtype=[np.float64, np.float32])
        check_non_negative(X, whom)
        return X

    def _fit_device(self):
        """Validate the ``device`` parameter and resolve it for a fit."""
        if self.device not in ("auto", "cpu", "cuda") and not _as_device_pattern(self.device):
            raise InvalidParameterError(
                f"The 'device' parameter of {type(self).__name__} must be 'auto', 'cpu', 'cuda' "
                f"or 'cuda:N'. Got {self.device!r} instead."
            )
        return resolve_device(self.device)

    def _init_params(self, device):
        # Resolved first: 'dense' beyond the dense kernels' topic ceiling raises before any
        # fitted attribute is set.
        algorithm = choose_algorithm(self.algorithm, self.n_components, device)
        self.doc_topic_prior_ = (
            1.0 / self.n_components if self.doc_topic_prior is None else float(self.doc_topic_prior)
        )
        self.topic_word_prior_ = (
            1.0 / self.n_components if self.topic_word_prior is None else float(self.topic_word_prior)
        )
        self.device_ = device
        self.algorithm_ = algorithm
        self._seed = int(check_random_state(self.random_state).randint(np.iinfo(np.uint32).max))
        self.n_batch_iter_ = 1
        self.n_iter_ = 0

    def _engine(self, device=None):
        return make_engine(
            device or self.device_,
            self.n_components,
            self.doc_topic_prior_,
            self.topic_word_prior_,
            self._seed,
            self.algorithm_,
        )

    def _set_components(self, topic_word, dtype):
        self.components_ = np.asarray(topic_word, dtype=dtype)

    @property
    def exp_dirichlet_component_(self):
        # Computed on first access rather than in fit: nothing here uses it, and at K = 1,000
        # over 55k words the digamma and exp of K x V entries took 1-3 s on the host, longer
        # than the whole GPU fit. Cached against the components_ array it was computed from.
        components = self.__dict__.get("components_")
        if components is None:
            raise AttributeError(
                f"This {type(self).__name__} instance is not fitted yet: "
                "exp_dirichlet_component_ is derived from components_."
            )
        cached = self.__dict__.get("_exp_dirichlet_cache")
        if cached is None or cached[0] is not components:
            value = np.exp(
                psi(components) - psi(np.sum(components, axis=1))[:, np.newaxis]
            ).astype(components.dtype, copy=False)
            cached = (components, value)
            self._exp_dirichlet_cache = cached
        return cached[1]

    def __getstate__(self):
        # The cache is derived data, as large as components_: not worth pickling.
        # On Python 3.11+ the inherited state may be the instance's own __dict__: copy it, or
        # pickling would drop the cache from the live model too.
        state = dict(super().__getstate__())
        state.pop("_exp_dirichlet_cache", None)
        return state

    # -- fitting ---------------------------------------------------------------------------
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Learn topics from a document-term count matrix.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Document-term counts. NumPy, SciPy sparse, CuPy and cupyx sparse inputs are accepted.
        y : Ignored
            Not used, present for API consistency.

        Returns
        -------
        self : object
            Fitted estimator.

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
        device = self._fit_device()
        X = self._check_counts(X, reset=True, whom="GPULatentDirichletAllocation.fit", device=device)
        self._init_params(device)
        engine = self._engine()
        try:
            if self.learning_method == "online":
                self._fit_online(X, engine)
            else:
                self._fit_batch(X, engine)
        finally:
            engine.release()
        return self

    def _fit_batch(self, X, engine):
        corpus = _tokens(X)
        self.n_tokens_ = corpus.total_weight
        start = time.perf_counter()
        engine.initialize(corpus)
        last_bound = None
        n_iter = 0
        average_from = self.max_iter - min(self.n_averaged_sweeps, self.max_iter)
        total, n_averaged = None, 0
        for i in range(self.max_iter):
            tic = time.perf_counter()
            engine.sweep(i + 1)
            n_iter = i + 1
            if self.n_averaged_sweeps and i >= average_from:
                counts = engine.word_topic_counts()
                if total is None:
                    # A copy: the running sum must not alias anything an engine might keep.
                    total = np.array(counts, dtype=np.float64)
                else:
                    total += counts
                n_averaged += 1
            self.n_batch_iter_ += 1
            evaluate = self.evaluate_every > 0 and n_iter % self.evaluate_every == 0
            if evaluate or self.verbose:
                loglik = engine.log_likelihood()
                bound = _perplexity(loglik, corpus.total_weight)
                if self.verbose:
                    rate = corpus.n_tokens / max(time.perf_counter() - tic, 1e-12) / 1e6
                    print(
                        f"iteration: {n_iter} of max_iter: {self.max_iter}, "
                        f"log-likelihood/token: {loglik / max(corpus.total_weight, 1):.4f}, "
                        f"perplexity: {bound:.4f}, {rate:.2f} Mtoken/s"
                    )
                if evaluate:
                    if last_bound is not None and abs(last_bound - bound) < self.perp_tol:
                        break
                    last_bound = bound
        engine.synchronize()
        self.fit_time_ = time.perf_counter() - start
        self.n_iter_ = n_iter
        counts = engine.word_topic_counts() if total is None else total / n_averaged
        self._set_components(counts + self.topic_word_prior_, X.dtype)
        self.bound_ = _perplexity(engine.log_likelihood(), corpus.total_weight)

    def _fit_online(self, X, engine):
        n_samples = X.shape[0]
        start = time.perf_counter()
        self.n_tokens_ = float(X.sum())
        last_bound = None
        n_iter = 0
        first = True
        for i in range(self.max_iter):
            for batch in gen_batches(n_samples, self.batch_size):
                self._online_step(X[batch], engine, n_samples, X.dtype, first)
                first = False
            n_iter = i + 1
            evaluate = self.evaluate_every > 0 and n_iter % self.evaluate_every == 0
            if evaluate or self.verbose:
                bound = self._perplexity(X, engine)
                if self.verbose:
                    print(f"iteration: {n_iter} of max_iter: {self.max_iter}, perplexity: {bound:.4f}")
                if evaluate:
                    if last_bound is not None and abs(last_bound - bound) < self.perp_tol:
                        break
                    last_bound = bound
        engine.synchronize()
        self.fit_time_ = time.perf_counter() - start
        self.n_iter_ = n_iter
        if first:
            # max_iter=0: no batch was seen; topics stay at the prior.
            self._set_components(
                np.full((self.n_components, X.shape[1]), self.topic_word_prior_), X.dtype
            )
        self.bound_ = self._perplexity(X, engine)

    def _online_step(self, X, engine, total_samples, dtype, first):
        corpus = _tokens(X)
        stats = engine.batch_statistics(
            corpus,
            None if first else self.components_,
            self.n_batch_sweeps,
            self.n_batch_iter_,
            first,
        )
        target = self.topic_word_prior_ + (total_samples / max(X.shape[0], 1)) * stats
        if first:
            new = target
        else:
            rho = (self.learning_offset + self.n_batch_iter_) ** (-self.learning_decay)
            new = (1.0 - rho) * self.components_.astype(np.float64) + rho * target
        self._set_components(new, dtype)
        self.n_batch_iter_ += 1

    @_fit_context(prefer_skip_nested_validation=True)
    def partial_fit(self, X, y=None):
        """Update the model with one mini-batch pass over ``X`` (online learning).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Document-term counts.
        y : Ignored
            Not used, present for API consistency.

        Returns
        -------
        self : object
            Partially fitted estimator.

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
        first_time = not hasattr(self, "components_")
        device = self._fit_device() if first_time else self._inference_device()
        X = self._check_counts(
            X, reset=first_time, whom="GPULatentDirichletAllocation.partial_fit", device=device
        )
        if first_time:
            self._init_params(device)
        engine = self._engine(device)
        try:
            for batch in gen_batches(X.shape[0], self.batch_size):
                self._online_step(X[batch], engine, self.total_samples, X.dtype, first_time)
                first_time = False
        finally:
            engine.release()
        return self

    # -- topics fixed ------------------------------------------------------------------------
    def _inference_device(self):
        """Where a fitted model folds documents in and learns from more batches.

        ``device='cpu'`` means the CPU; 'auto' the GPU when one is usable here, else the CPU; an
        explicit GPU falls back to the CPU with a warning when it is missing, because a model
        trained on a GPU must still load and transform on a machine without one.
        """
        if self.device == "cpu":
            return "cpu"
        if self.device == "auto":
            return resolve_device("auto")
        try:
            return resolve_device(self.device)
        except RuntimeError:
            warnings.warn(
                f"device={self.device!r} is not usable here; using the CPU for this model",
                RuntimeWarning,
            )
            return "cpu"

    def _fold_in(self, X, device, return_loglik=False, engine=None):
        """Fold ``X`` in with the topics fixed, on ``engine`` or on a fresh one for ``device``."""
        if engine is not None:
            return engine.fold_in(
                X,
                self.components_,
                self.doc_topic_prior_,
                self.max_doc_update_iter,
                self.mean_change_tol,
                return_loglik=return_loglik,
            )
        engine = self._engine(device)
        try:
            return self._fold_in(X, device, return_loglik, engine)
        finally:
            engine.release()

    def transform(self, X):
        """Document-topic distributions of ``X`` with the topics fixed.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Document-term counts.

        Returns
        -------
        doc_topic_distr : ndarray of shape (n_samples, n_components)
            Rows sum to one; an empty document gets the uniform distribution. Same dtype as ``X``
            (float64 for integer input).

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
        check_is_fitted(self)
        device = self._inference_device()
        X = self._check_counts(
            X, reset=False, whom="GPULatentDirichletAllocation.transform", device=device
        )
        return self._fold_in(X, device).astype(X.dtype, copy=False)

    def score(self, X, y=None):
        """Log-likelihood of ``X`` under the model, a sum of per-document terms.

        Each document is folded in with the topics fixed (as in :meth:`transform`) and scored by
        ``sum_v n_v log(sum_k theta_k phi_kv)``. Because it is a plain sum over documents, scores of
        disjoint folds add up to the score of their union.

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
        loglik, _ = self._held_out_loglik(X, "GPULatentDirichletAllocation.score")
        return float(loglik.sum())

    def perplexity(self, X):
        """Perplexity ``exp(-score(X) / number of tokens)``.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Document-term counts.

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
        loglik, n_tokens = self._held_out_loglik(X, "GPULatentDirichletAllocation.perplexity")
        return _perplexity(loglik.sum(), n_tokens)

    def _held_out_loglik(self, X, whom):
        """Per-document log-likelihoods of ``X`` after fold-in, and its number of tokens."""
        check_is_fitted(self)
        device = self._inference_device()
        X = self._check_counts(X, reset=False, whom=whom, device=device)
        _, loglik = self._fold_in(X, device, return_loglik=True)
        return loglik, float(X.sum())

    def _perplexity(self, X, engine):
        _, loglik = self._fold_in(X, None, return_loglik=True, engine=engine)
        return _perplexity(loglik.sum(), float(X.sum()))

    @property
    def _n_features_out(self):
        """Number of transformed output features."""
        return self.components_.shape[0]


def _perplexity(loglik, n_tokens):
    if n_tokens <= 0:
        return float("nan")
    return float(np.exp(-loglik / n_tokens))
