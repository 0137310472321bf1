"""``GPULatentDirichletAllocation``: scikit-learn's LDA interface over ESCA sampling backends.

The estimator validates input, resolves its parameters into a plan and keeps the fitted arrays;
the fit loop (:mod:`sklearn_gpulda._fit`) runs the plan on a sampler from the registry of
:mod:`sklearn_gpulda.backends`, and ``doc/algorithm.md`` defines the arithmetic. Fitted state is
plain NumPy, so a model pickled on a GPU machine loads and transforms on one without.
"""

import time
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

from . import _fit, _fit_online
from ._device import resolve_device, to_host
from ._docstrings import ESTIMATOR_DOC
from ._block_corpus import BlockCorpus
from ._corpus import tokens
from ._fitted import FittedStateMixin, transaction
from ._stages import stage
from ._validation import check_counts, check_fit_input
from ._warnings import warn_caller
from .backends import algorithm_names, choose_backend, fold_in

class GPULatentDirichletAllocation(
    FittedStateMixin, ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator
):
    __doc__ = ESTIMATOR_DOC

    _parameter_constraints: dict = {
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "doc_topic_prior": [None, Interval(Real, 0, None, closed="neither"), "array-like",
                            StrOptions({"auto"})],
        "topic_word_prior": [None, Interval(Real, 0, None, closed="neither"),
                             StrOptions({"auto"})],
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

    def _plan(self, device, algorithm, seed, alpha_start=None, beta_start=None, batch=True):
        """The fit loop's :class:`~sklearn_gpulda._fit.Plan` for these parameters (``batch``:
        False for ``partial_fit``, which learns from mini-batches whatever learning_method)."""
        if algorithm not in ("auto", *algorithm_names()):
            names = ", ".join(repr(a) for a in ("auto", *algorithm_names()))
            raise InvalidParameterError(
                f"The 'algorithm' parameter of {type(self).__name__} must be one of {names}. "
                f"Got {algorithm!r} instead."
            )
        backend = choose_backend(algorithm, self.n_components, device)
        return _fit.plan_for(self, backend, device, seed, alpha_start, beta_start,
                             batch and self.learning_method == "batch")

    def _new_seed(self):
        return int(check_random_state(self.random_state).randint(np.iinfo(np.uint32).max))

    @staticmethod
    def _warn_if_empty(total, whom):
        """Warn when the counts hold no token (their ``total`` is zero)."""
        if total == 0.0:
            warn_caller(
                f"{whom}: X holds no tokens (every count is zero), so there is nothing to learn "
                "from: the topics stay at the prior and the training perplexity is NaN",
                RuntimeWarning,
            )

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
            (online learning), for progress displays; ``info`` is a dict with ``max_iter``,
            ``n_tokens`` (tokens per sweep), ``seconds`` (since sampling began) and
            ``log_likelihood`` (training log-likelihood per token, None when this sweep was not
            evaluated) and, in batch learning, ``snapshot``: a function returning
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
            plan = self._plan(device, self.algorithm, self._new_seed())
            plan.callback = callback
            plan.components_dtype = dtype
            if batch:
                with stage("tokens"):
                    corpus = BlockCorpus(X) if blocks else tokens(X)
                # The corpus holds what the fit reads: the counts' copy on the device can go.
                del X
                self._warn_if_empty(corpus.total_weight, "fit")
                state = _fit.fit_corpus(plan, corpus, release_counts=True)
            else:
                self._warn_if_empty(float(X.sum()), "fit")
                state = _fit_online.fit_online(plan, X)
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
            total = float(X.sum())
            self._warn_if_empty(total, "partial_fit")
            if first:
                plan = self._plan(device, self.algorithm, self._new_seed(), batch=False)
                components, alpha, n_batch_iter, n_iter = None, plan.alpha.value, 1, 0
            else:
                plan = self._plan(device, self.algorithm_, self._seed, self.doc_topic_prior_,
                                  self.topic_word_prior_, batch=False)
                components = self._components_to_continue(device)
                alpha = self.doc_topic_prior_
                n_batch_iter, n_iter = self.n_batch_iter_, self.n_iter_
            start = time.perf_counter()
            sampler = plan.sampler(alpha=alpha)
            try:
                # bound_ is the last batch's perplexity.
                components, alpha, n_batch_iter, loglik, n_tokens, _ = _fit_online.online_pass(
                    plan, X, components, alpha, n_batch_iter, self.total_samples, sampler,
                    want_loglik=True)
                sampler.synchronize()
            finally:
                sampler.release()
            state = _fit.FittedState(
                # Kept on the GPU between mini-batches and calls; copied to the host when read.
                components=components,
                doc_topic_prior=_fit.public_prior(alpha, plan.alpha),
                topic_word_prior=float(plan.beta.value), n_iter=n_iter,
                n_batch_iter=n_batch_iter, bound=_fit.perplexity(loglik, n_tokens),
                n_tokens=total, fit_time=time.perf_counter() - start,
                history=getattr(self, "history_", {}),
            )
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
        return _fit.perplexity(loglik.sum(), float(X.sum()))

    @property
    def _n_features_out(self):
        """Number of transformed output features."""
        return self._n_topics_fitted()
