"""Held-out likelihood by document completion, for one topic model or several on one split.

The split of each document's tokens into an observed and a held-out half, the estimation of the
documents' topic mixtures from the observed half (the estimator's deterministic fold-in, or a
Gibbs fold-in here), and the scoring of the held-out half.
"""

import numbers

import numpy as np
from sklearn.utils import Bunch

from .._runtime.device import resolve_device
from ..backends import fold_in
from ..datasets._synthetic import as_generator
from ._checks import as_counts, as_float_matrix, check_alpha, check_vocabulary
from ._likelihood import items_per_chunk, token_probabilities, topic_word_distribution


def split_halves(X, rng):
    """Split each document's tokens into an observed and a held-out half at random.

    A document of ``n`` tokens keeps ``ceil(n / 2)`` tokens observed and holds ``floor(n / 2)``
    out, the held-out ones a uniformly random subset: the same law as shuffling the tokens and
    dealing them alternately. Rather than shuffling every token, each non-zero's held-out count is
    drawn from its conditional (hypergeometric) law given the non-zeros before it, stepping through
    position j of every document at once: linear in the non-zeros, one vectorised draw per j.
    """
    counts = X.data.astype(np.int64)
    row_nnz = np.diff(X.indptr)
    cumulative = np.zeros(X.nnz + 1, dtype=np.int64)
    np.cumsum(counts, out=cumulative[1:])
    remaining = cumulative[X.indptr[1:]] - cumulative[X.indptr[:-1]]
    to_hold = remaining // 2
    held = np.zeros(X.nnz, dtype=np.int64)
    # Documents by decreasing number of non-zeros, so those with a j-th non-zero are a prefix.
    by_nnz = np.argsort(-row_nnz, kind="stable")
    sorted_nnz = row_nnz[by_nnz]
    n_with = np.searchsorted(-sorted_nnz, -np.arange(sorted_nnz[0] if sorted_nnz.size else 0),
                             side="left")
    for j, n_docs_j in enumerate(n_with):
        docs = by_nnz[:n_docs_j]
        nz = X.indptr[docs] + j
        n = counts[nz]
        left, need = remaining[docs], to_hold[docs]
        # A single token is held out with probability need / left; most non-zeros are single
        # tokens, and a uniform draw is far cheaper than numpy's general hypergeometric sampler.
        h = (rng.random(n.size) * left < need).astype(np.int64)
        multi = np.flatnonzero(n > 1)
        if multi.size:
            h[multi] = rng.hypergeometric(n[multi], left[multi] - n[multi], need[multi])
        held[nz] = h
        remaining[docs] -= n
        to_hold[docs] -= h
    observed = X.copy()
    observed.data = (counts - held).astype(np.float64)
    held_out = X.copy()
    held_out.data = held.astype(np.float64)
    observed.eliminate_zeros()
    held_out.eliminate_zeros()
    return observed, held_out


def _fold_in_gibbs(X, phi_t, alpha, n_iter, rng):
    """Gibbs sampling of the observed tokens' topics with phi fixed; theta from mean counts.

    All tokens of a sweep are drawn at once given the previous sweep's document-topic counts
    (each token's own previous topic removed), the simultaneous update of GPU LDA samplers. The
    counts of the second half of the sweeps are averaged.
    """
    n_docs, n_topics = X.shape[0], phi_t.shape[1]
    counts = X.data.astype(np.int64)
    word = np.repeat(X.indices, counts)
    cumulative = np.zeros(X.nnz + 1, dtype=np.int64)
    np.cumsum(counts, out=cumulative[1:])
    doc_lengths = cumulative[X.indptr[1:]] - cumulative[X.indptr[:-1]]
    doc = np.repeat(np.arange(n_docs), doc_lengths)

    def doc_topic_counts(z):
        flat = np.bincount(doc * n_topics + z, minlength=n_docs * n_topics)
        return flat.reshape(n_docs, n_topics).astype(np.float64)

    z = rng.integers(0, n_topics, size=word.size)
    A = doc_topic_counts(z)
    burn_in = n_iter // 2
    mean_A = np.zeros_like(A)
    chunk = items_per_chunk(n_topics)
    for sweep in range(n_iter):
        new_z = np.empty_like(z)
        for t0 in range(0, word.size, chunk):
            t1 = min(word.size, t0 + chunk)
            weights = A[doc[t0:t1]] + alpha
            weights[np.arange(t1 - t0), z[t0:t1]] -= 1.0
            weights *= phi_t[word[t0:t1]]
            cdf = np.cumsum(weights, axis=1)
            u = rng.random(t1 - t0) * cdf[:, -1]
            new_z[t0:t1] = np.minimum((cdf <= u[:, None]).sum(axis=1), n_topics - 1)
        z = new_z
        A = doc_topic_counts(z)
        if sweep >= burn_in:
            mean_A += A
    theta = mean_A / (n_iter - burn_in) + alpha
    return theta / theta.sum(axis=1, keepdims=True)


def document_completion(X, topic_word, alpha, n_iter=100, random_state=None,
                        method="fixed_point", tol=1e-6, device="cpu"):
    """Held-out log-likelihood by document completion (Wallach et al. 2009, Sec. 5.1).

    Each document's tokens are split at random (seeded) into an observed half of ``ceil(n/2)``
    tokens and a held-out half of ``floor(n/2)``, as if shuffled and dealt alternately. With the
    topics fixed, ``theta_d`` is estimated from the observed half only, and the held-out half is
    scored as ``sum n_v log(sum_k theta_dk phi_kv)``. This needs nothing of a trained model but
    its topic-word matrix, so one evaluator serves every system, as in SaberLDA's evaluation.

    Parameters
    ----------
    X : sparse matrix or array-like of shape (n_docs, n_words)
        Integer counts of the test documents.
    topic_word : array-like of shape (n_topics, n_words)
        Non-negative topic-word weights of the model (``components_`` of scikit-learn or of this
        package, gensim's ``get_topics()``); rows are normalised here.
    alpha : float or array-like of shape (n_topics,)
        Document-topic Dirichlet parameter used when estimating ``theta``.
    n_iter : int, default=100
        Maximum fold-in iterations ("fixed_point") or number of sweeps ("gibbs").
    random_state : int, numpy.random.Generator or None, default=None
        Seed of the split (and of the Gibbs sampler): the same seed gives the same split.
    method : {"fixed_point", "gibbs"}, default="fixed_point"
        How ``theta`` is estimated from the observed half.

        - "fixed_point": the deterministic fold-in of ``doc/algorithm.md`` from ``theta = 1/K``:
          ``theta <- normalise(alpha + sum_v n_v theta_k phi_kv / sum_j theta_j phi_jv)``.
        - "gibbs": sample the observed tokens' topics with ``phi`` fixed for ``n_iter`` sweeps;
          ``theta`` is ``alpha`` plus the document-topic counts averaged over the second half of
          the sweeps, normalised.
    tol : float, default=1e-6
        "fixed_point" only: a document stops iterating once an update changes its ``theta`` by
        less than ``tol`` (mean absolute change). ``tol=0`` runs exactly ``n_iter`` iterations.
    device : str, default="cpu"
        Where the "fixed_point" fold-in runs, as the estimator's ``device`` parameter ('auto'
        takes a GPU where there is one): the same iteration, many times faster on a GPU at large
        K. The split and the scoring stay on the host.

    Returns
    -------
    result : sklearn.utils.Bunch
        ``loglik`` (float, summed over held-out tokens), ``n_tokens`` (int, held-out tokens),
        ``per_token`` (``loglik / n_tokens``), ``perplexity`` (``exp(-per_token)``) and
        ``doc_topic`` (the estimated ``theta``, shape ``(n_docs, n_topics)``).

    Raises
    ------
    ValueError
        If counts are not non-negative integers, the vocabulary sizes differ, ``alpha`` is not
        positive, or no document has a held-out token.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_gpulda.datasets import make_lda_corpus
    >>> from sklearn_gpulda.metrics import document_completion
    >>> corpus = make_lda_corpus(n_docs=200, n_words=300, n_topics=5, doc_length=60,
    ...                          random_state=0)
    >>> true = document_completion(corpus.data, corpus.topic_word, alpha=0.1, random_state=0)
    >>> flat = document_completion(corpus.data, np.ones((5, 300)), alpha=0.1, random_state=0)
    >>> true.n_tokens == flat.n_tokens, bool(true.per_token > flat.per_token)
    (True, True)
    """
    X = _check_completion_args(X, n_iter, method, tol)
    phi = topic_word_distribution(topic_word)
    check_vocabulary(X, phi.shape[1], "topic_word")
    alpha = check_alpha(alpha, phi.shape[0])
    rng = as_generator(random_state)
    observed, held_out = split_halves(X, rng)
    return _complete(observed, held_out, phi, alpha, n_iter, method, tol, rng, device)


def completion_split(X, random_state):
    """``(observed, held_out)``: :func:`document_completion`'s split of ``X`` (integer counts)
    for ``random_state``, made once for scoring several models (:func:`complete_split`)."""
    return split_halves(_check_counts(X), as_generator(random_state))


def complete_split(split, topic_word, alpha, n_iter=100, tol=1e-6, device="cpu"):
    """:func:`document_completion` ("fixed_point") on a :func:`completion_split` of the test
    documents: the same result as ``document_completion`` with that split's seed."""
    _check_options(n_iter, "fixed_point", tol)
    observed, held_out = split
    phi = topic_word_distribution(topic_word)
    check_vocabulary(observed, phi.shape[1], "topic_word")
    alpha = check_alpha(alpha, phi.shape[0])
    return _complete(observed, held_out, phi, alpha, n_iter, "fixed_point", tol, None, device)


def _check_options(n_iter, method, tol):
    """Raise ValueError for an option of document completion out of its range."""
    if method not in ("fixed_point", "gibbs"):
        raise ValueError(f"method must be 'fixed_point' or 'gibbs', got {method!r}")
    if not isinstance(n_iter, numbers.Integral) or n_iter < 1:
        raise ValueError(f"n_iter must be a positive integer, got {n_iter!r}")
    if not isinstance(tol, numbers.Real) or not tol >= 0:
        raise ValueError(f"tol must be a non-negative number, got {tol!r}")


def _check_counts(X):
    """``X`` as canonical integer counts (document completion splits tokens)."""
    X = as_counts(X)
    if X.nnz and not np.array_equal(X.data, np.round(X.data)):
        raise ValueError("document completion splits tokens, so X must hold integer counts")
    return X


def _check_completion_args(X, n_iter, method, tol):
    """Validated options of document completion, and ``X`` as canonical integer counts."""
    _check_options(n_iter, method, tol)
    return _check_counts(X)


def _complete(observed, held_out, phi, alpha, n_iter, method, tol, rng, device="cpu"):
    """Score ``held_out`` under ``phi`` after estimating ``theta`` from ``observed``."""
    phi_t = np.ascontiguousarray(phi.T)
    if method == "fixed_point":
        # The estimator's own fold-in (doc/algorithm.md), so every system is scored alike; on a
        # GPU the same deterministic iteration runs there (equal to the host's to ~1e-5).
        theta = fold_in(resolve_device(device), observed, phi, alpha, n_iter, tol)
    else:
        theta = _fold_in_gibbs(observed, phi_t, alpha, n_iter, rng)
    n_tokens = int(held_out.data.sum())
    if n_tokens == 0:
        raise ValueError("no document has a held-out token (every document has < 2 tokens)")
    prob = token_probabilities(held_out, theta, phi_t)
    with np.errstate(divide="ignore"):
        loglik = float(np.dot(held_out.data, np.log(prob)))
    per_token = loglik / n_tokens
    return Bunch(loglik=loglik, n_tokens=n_tokens, per_token=per_token,
                 perplexity=float(np.exp(-per_token)), doc_topic=theta)


def _topics_and_prior(model, alpha, name):
    """``(topic_word, alpha)`` of a fitted LDA, a pipeline ending in one, or a bare matrix."""
    if hasattr(model, "steps"):  # a Pipeline: the topic model is its last step
        model = model.steps[-1][1]
    if hasattr(model, "components_"):
        if not hasattr(model, "doc_topic_prior_"):
            raise ValueError(f"model {name!r} has components_ but no fitted doc_topic_prior_")
        return model.components_, model.doc_topic_prior_
    topic_word = as_float_matrix(model, f"topic-word matrix of {name!r}")
    return topic_word, (1.0 / topic_word.shape[0] if alpha is None else alpha)


def compare_models(X, models, *, alpha=None, n_iter=100, random_state=None,
                   method="fixed_point", tol=1e-6, device="cpu"):
    """Score several topic models on the same held-out documents, by document completion.

    The estimators' own scores cannot be compared across libraries. This package's ``score`` and
    ``perplexity`` fit each document's topic mixture to its words and then score those same words,
    an optimistic plug-in estimate. scikit-learn's ``score`` and ``perplexity`` report its
    variational lower bound, which also charges the Dirichlet terms of the topics themselves, a
    fixed amount that weighs the more the smaller the test set; it is pessimistic. On 238 held-out
    King James Bible chapters the first gave a perplexity of 525 for this package's model (NumPy
    engine) and the second 1,428 for scikit-learn's, while document completion scored the two
    models at 544 and 548 (``examples/plot_compare_sklearn.py``).

    Here every model is scored by one procedure, :func:`document_completion`, on one random split
    of the tokens of ``X``: half of each document's tokens estimate its topic mixture with the
    topics fixed, the other half are scored. Only each model's topic-word matrix and
    document-topic prior are used, so estimators of any library compare on equal terms.

    Parameters
    ----------
    X : sparse matrix or array-like of shape (n_docs, n_words)
        Integer counts of held-out documents (not used in training).
    models : dict
        Name to model. A model is a fitted estimator with ``components_`` and
        ``doc_topic_prior_`` (:class:`~sklearn_gpulda.GPULatentDirichletAllocation`,
        :class:`sklearn.decomposition.LatentDirichletAllocation`, or a
        :class:`~sklearn.pipeline.Pipeline` ending in one; ``X`` must then be in the model's
        vocabulary, not raw text), or a non-negative topic-word matrix of shape
        ``(n_topics, n_words)``.
    alpha : float, array-like of shape (n_topics,) or None, default=None
        Document-topic prior for models given as a matrix; None means ``1 / n_topics``, the
        default of both estimators. Estimators use their fitted ``doc_topic_prior_`` (a float or
        one value per topic).
    n_iter, method, tol, device
        As in :func:`document_completion`.
    random_state : int, numpy.random.Generator or None, default=None
        Seed of the split, drawn once and shared by every model (and of the Gibbs fold-in).

    Returns
    -------
    scores : dict
        Name to :class:`~sklearn.utils.Bunch` with ``loglik``, ``n_tokens``, ``per_token``
        (higher is better), ``perplexity`` (lower is better) and ``doc_topic``, as returned by
        :func:`document_completion`, in the order of ``models``.

    Raises
    ------
    ValueError
        As :func:`document_completion`; also when a model's vocabulary size differs from ``X``'s
        or ``models`` is empty.

    See Also
    --------
    document_completion : The evaluation of one topic-word matrix.

    Examples
    --------
    >>> from sklearn.decomposition import LatentDirichletAllocation
    >>> from sklearn_gpulda import GPULatentDirichletAllocation
    >>> from sklearn_gpulda.datasets import load_kjv_chapters
    >>> from sklearn_gpulda.metrics import compare_models
    >>> X = load_kjv_chapters().data
    >>> X_train, X_test = X[:300], X[300:400]
    >>> ours = GPULatentDirichletAllocation(n_components=5, max_iter=20, random_state=0,
    ...                                     device="cpu").fit(X_train)
    >>> theirs = LatentDirichletAllocation(n_components=5, max_iter=5,
    ...                                    random_state=0).fit(X_train)
    >>> scores = compare_models(X_test, {"ours": ours, "sklearn": theirs}, random_state=0)
    >>> [name for name in scores], scores["ours"].n_tokens == scores["sklearn"].n_tokens
    (['ours', 'sklearn'], True)
    """
    if not models:
        raise ValueError("models is empty; pass a dict of name -> fitted model")
    X = _check_completion_args(X, n_iter, method, tol)
    prepared = {}
    for name, model in models.items():
        topic_word, prior = _topics_and_prior(model, alpha, name)
        phi = topic_word_distribution(topic_word)
        check_vocabulary(X, phi.shape[1], f"model {name!r}")
        prepared[name] = phi, check_alpha(prior, phi.shape[0])
    rng = as_generator(random_state)
    observed, held_out = split_halves(X, rng)
    return {name: _complete(observed, held_out, phi, prior, n_iter, method, tol, rng, device)
            for name, (phi, prior) in prepared.items()}
