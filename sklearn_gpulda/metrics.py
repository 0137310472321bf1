"""Evaluation of topic models that works the same for every system.

Every function takes plain arrays: a document-term count matrix and a non-negative
``(n_topics, n_words)`` topic-word matrix (``components_`` of this package or of scikit-learn,
gensim's ``get_topics()``, ...), so two systems are scored by the same code.

- :func:`log_likelihood` and :func:`perplexity`: fit of given document-topic and topic-word
  distributions to a corpus;
- :func:`document_completion`: held-out likelihood by document completion (Wallach et al. 2009),
  the protocol SaberLDA reports; :func:`compare_models` applies it to several fitted models (of
  this package, scikit-learn or any other) on one split, the fair way to compare them;
- :func:`umass_coherence` and :func:`npmi_coherence`: topic coherence from document co-occurrence;
- :func:`top_words` and :func:`topic_word_distribution`: helpers.
"""

import numbers

import numpy as np
import scipy.sparse as sp
from sklearn.utils import Bunch

from ._device import resolve_device
from .backends import fold_in
from .datasets import _as_generator

__all__ = [
    "topic_word_distribution",
    "log_likelihood",
    "perplexity",
    "document_completion",
    "compare_models",
    "umass_coherence",
    "npmi_coherence",
    "top_words",
]

# Gathered (non-zero x topic) arrays are built for about a million entries at a time: scoring a
# 100 M-token corpus then needs tens of MB of scratch memory, and a fold-in chunk stays in cache
# across its iterations.
_CHUNK_ENTRIES = 1 << 20

#: Smoothing of NPMI (Röder et al. 2015; gensim uses the same value).
NPMI_EPSILON = 1e-12


# --------------------------------------------------------------------------------------------------
# validation helpers
# --------------------------------------------------------------------------------------------------


def _as_float_matrix(a, name):
    if sp.issparse(a):
        a = a.toarray()
    a = np.asarray(a, dtype=np.float64)
    if a.ndim != 2:
        raise ValueError(f"{name} must be a 2-d array, got {a.ndim} dimension(s)")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} contains NaN or infinity")
    if a.size and a.min() < 0:
        raise ValueError(f"{name} must be non-negative")
    return a


def _normalise_rows(a, name):
    sums = a.sum(axis=1, keepdims=True)
    if np.any(sums <= 0):
        bad = int(np.flatnonzero(sums.ravel() <= 0)[0])
        raise ValueError(f"row {bad} of {name} sums to zero and cannot be normalised")
    return a / sums


def _as_counts(X, name="X"):
    """Canonical CSR float64 copy of a non-negative count matrix."""
    X = sp.csr_matrix(X, dtype=np.float64, copy=True)
    X.sum_duplicates()
    if X.nnz and (not np.all(np.isfinite(X.data)) or X.data.min() < 0):
        raise ValueError(f"{name} must hold finite non-negative counts")
    X.eliminate_zeros()
    return X


def _check_vocabulary(X, n_words, what):
    if X.shape[1] != n_words:
        raise ValueError(
            f"vocabulary size mismatch: X has {X.shape[1]} columns (words) but {what} has "
            f"{n_words}"
        )


def _check_alpha(alpha, n_topics):
    alpha = np.asarray(alpha, dtype=np.float64)
    if alpha.ndim == 0:
        alpha = np.full(n_topics, float(alpha))
    if alpha.shape != (n_topics,) or not np.all(alpha > 0) or not np.all(np.isfinite(alpha)):
        raise ValueError(f"alpha must be a positive number or {n_topics} positive numbers")
    return alpha


def _row_chunks(indptr, per_entry):
    """Row ranges whose non-zeros times ``per_entry`` stay near the scratch budget."""
    n_rows = indptr.size - 1
    budget = max(1, _CHUNK_ENTRIES // max(1, per_entry))
    start = 0
    while start < n_rows:
        end = int(np.searchsorted(indptr, indptr[start] + budget, side="right")) - 1
        end = min(max(end, start + 1), n_rows)
        yield start, end
        start = end


def _token_probabilities(X, doc_topic, topic_word_t):
    """``sum_k theta[d, k] phi[k, v]`` for every non-zero (d, v) of ``X``, in CSR order."""
    out = np.empty(X.nnz, dtype=np.float64)
    for r0, r1 in _row_chunks(X.indptr, topic_word_t.shape[1]):
        lo, hi = X.indptr[r0], X.indptr[r1]
        doc = np.repeat(np.arange(r0, r1), np.diff(X.indptr[r0:r1 + 1]))
        out[lo:hi] = np.einsum("ik,ik->i", doc_topic[doc], topic_word_t[X.indices[lo:hi]])
    return out


# --------------------------------------------------------------------------------------------------
# distributions and likelihood
# --------------------------------------------------------------------------------------------------


def topic_word_distribution(components):
    """Normalise a topic-word matrix so that every topic is a distribution over words.

    Parameters
    ----------
    components : array-like of shape (n_topics, n_words)
        Non-negative topic-word weights (pseudo-counts, variational parameters, probabilities).

    Returns
    -------
    topic_word : ndarray of float64, shape (n_topics, n_words)
        Rows sum to 1.

    Raises
    ------
    ValueError
        If the matrix is not 2-d, has negative or non-finite entries, or a row sums to zero.

    Examples
    --------
    >>> from sklearn_gpulda.metrics import topic_word_distribution
    >>> topic_word_distribution([[1, 3], [2, 2]])
    array([[0.25, 0.75],
           [0.5 , 0.5 ]])
    """
    return _normalise_rows(_as_float_matrix(components, "components"), "components")


def log_likelihood(X, doc_topic, topic_word):
    """Log-likelihood of a corpus under given document-topic and topic-word distributions.

    Computes ``sum_d sum_v n_dv log(sum_k theta_dk phi_kv)`` over the non-zeros of ``X`` only,
    in chunks of documents so that memory stays bounded for corpora of any size. Both matrices are
    row-normalised first, so unnormalised weights such as ``components_`` can be passed directly.

    Parameters
    ----------
    X : sparse matrix or array-like of shape (n_docs, n_words)
        Non-negative counts.
    doc_topic : array-like of shape (n_docs, n_topics)
        Document-topic weights ``theta``; every row must have a positive sum.
    topic_word : array-like of shape (n_topics, n_words)
        Topic-word weights ``phi``; every row must have a positive sum.

    Returns
    -------
    loglik : float
        Natural-log likelihood; ``-inf`` when a token has probability 0.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_gpulda.metrics import log_likelihood
    >>> X = np.array([[2, 0], [0, 1]])
    >>> round(log_likelihood(X, [[1.0], [1.0]], [[0.5, 0.5]]), 6)  # 3 tokens of probability 1/2
    -2.079442
    """
    X = _as_counts(X)
    theta = _normalise_rows(_as_float_matrix(doc_topic, "doc_topic"), "doc_topic")
    phi = topic_word_distribution(topic_word)
    _check_vocabulary(X, phi.shape[1], "topic_word")
    if theta.shape[0] != X.shape[0]:
        raise ValueError(f"X has {X.shape[0]} documents but doc_topic has {theta.shape[0]} rows")
    if theta.shape[1] != phi.shape[0]:
        raise ValueError(
            f"doc_topic has {theta.shape[1]} topics but topic_word has {phi.shape[0]}"
        )
    prob = _token_probabilities(X, theta, np.ascontiguousarray(phi.T))
    with np.errstate(divide="ignore"):
        return float(np.dot(X.data, np.log(prob)))


def perplexity(X, doc_topic, topic_word):
    """Perplexity ``exp(-log_likelihood / number of tokens)`` of a corpus.

    Parameters
    ----------
    X : sparse matrix or array-like of shape (n_docs, n_words)
        Non-negative counts, not all zero.
    doc_topic : array-like of shape (n_docs, n_topics)
        Document-topic weights.
    topic_word : array-like of shape (n_topics, n_words)
        Topic-word weights.

    Returns
    -------
    perplexity : float

    See Also
    --------
    log_likelihood

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_gpulda.metrics import perplexity
    >>> X = np.array([[2, 0], [0, 1]])
    >>> round(perplexity(X, [[1.0], [1.0]], [[0.5, 0.5]]), 6)
    2.0
    """
    X = _as_counts(X)
    total = X.data.sum()
    if total <= 0:
        raise ValueError("X holds no tokens; perplexity is undefined")
    return float(np.exp(-log_likelihood(X, doc_topic, topic_word) / total))


# --------------------------------------------------------------------------------------------------
# document completion
# --------------------------------------------------------------------------------------------------


def _split_halves(X, rng):
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
    chunk = max(1, _CHUNK_ENTRIES // n_topics)
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
    _check_vocabulary(X, phi.shape[1], "topic_word")
    alpha = _check_alpha(alpha, phi.shape[0])
    rng = _as_generator(random_state)
    observed, held_out = _split_halves(X, rng)
    return _complete(observed, held_out, phi, alpha, n_iter, method, tol, rng, device)


def _check_completion_args(X, n_iter, method, tol):
    """Validated options of document completion, and ``X`` as canonical integer counts."""
    if method not in ("fixed_point", "gibbs"):
        raise ValueError(f"method must be 'fixed_point' or 'gibbs', got {method!r}")
    if not isinstance(n_iter, numbers.Integral) or n_iter < 1:
        raise ValueError(f"n_iter must be a positive integer, got {n_iter!r}")
    if not isinstance(tol, numbers.Real) or not tol >= 0:
        raise ValueError(f"tol must be a non-negative number, got {tol!r}")
    X = _as_counts(X)
    if X.nnz and not np.array_equal(X.data, np.round(X.data)):
        raise ValueError("document completion splits tokens, so X must hold integer counts")
    return X


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
    prob = _token_probabilities(held_out, theta, phi_t)
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
    topic_word = _as_float_matrix(model, f"topic-word matrix of {name!r}")
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
        _check_vocabulary(X, phi.shape[1], f"model {name!r}")
        prepared[name] = phi, _check_alpha(prior, phi.shape[0])
    rng = _as_generator(random_state)
    observed, held_out = _split_halves(X, rng)
    return {name: _complete(observed, held_out, phi, prior, n_iter, method, tol, rng, device)
            for name, (phi, prior) in prepared.items()}


# --------------------------------------------------------------------------------------------------
# coherence
# --------------------------------------------------------------------------------------------------


def _top_indices(components, n):
    # A stable sort of the negated weights breaks ties by word id, the same on every platform.
    return np.argsort(-components, axis=1, kind="stable")[:, :n]


def _cooccurrence(X, components, top_n):
    """Document frequencies of each topic's top words (``single``) and of their pairs."""
    X = _as_counts(X, "reference corpus X")
    components = _as_float_matrix(components, "components")
    _check_vocabulary(X, components.shape[1], "components")
    if not isinstance(top_n, numbers.Integral) or not 2 <= top_n <= components.shape[1]:
        raise ValueError(f"top_n must be an integer in 2..{components.shape[1]}, got {top_n!r}")
    top = _top_indices(components, top_n)
    vocab, local = np.unique(top, return_inverse=True)
    local = local.reshape(top.shape)
    incidence = X[:, vocab]
    incidence.data[:] = 1.0
    # joint[i, j]: documents holding both words; its diagonal: documents holding each word.
    joint = (incidence.T @ incidence).toarray()
    pair = joint[local[:, :, None], local[:, None, :]]
    single = np.diagonal(joint)[local]
    return pair, single, X.shape[0]


def umass_coherence(X, components, top_n=10):
    """UMass topic coherence (Mimno et al. 2011) from document co-occurrence in a corpus.

    For the top words ``v_1, ..., v_M`` of a topic (most probable first),
    ``C = sum_{m=2..M} sum_{l<m} log((D(v_m, v_l) + 1) / D(v_l))`` where ``D(.)`` counts the
    documents of ``X`` holding the word(s). Higher (closer to 0) is more coherent.

    Parameters
    ----------
    X : sparse matrix or array-like of shape (n_docs, n_words)
        Reference corpus; only whether a word occurs in a document matters.
    components : array-like of shape (n_topics, n_words)
        Topic-word weights; only their ranking within each topic matters.
    top_n : int, default=10
        Number of top words per topic.

    Returns
    -------
    coherence : ndarray of float64, shape (n_topics,)
        One score per topic, a sum over ``top_n * (top_n - 1) / 2`` pairs; NaN for a topic one
        of whose conditioning words (all top words but the last) never occurs in ``X``. Average
        them yourself if needed.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_gpulda.metrics import umass_coherence
    >>> X = np.array([[1, 1, 0], [1, 1, 0], [0, 0, 1], [1, 0, 1]])
    >>> components = np.array([[0.6, 0.3, 0.1], [0.1, 0.3, 0.6]])
    >>> np.round(umass_coherence(X, components, top_n=2), 4)  # log((2+1)/3), log((0+1)/2)
    array([ 0.    , -0.6931])
    """
    pair, single, _ = _cooccurrence(X, components, top_n)
    later, earlier = np.tril_indices(top_n, k=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        scores = np.log((pair[:, later, earlier] + 1.0) / single[:, earlier])
    scores[single[:, earlier] == 0] = np.nan
    return scores.sum(axis=1)


def npmi_coherence(X, components, top_n=10):
    """NPMI topic coherence (Bouma 2009; Röder et al. 2015) from document co-occurrence.

    For every pair of a topic's top words, with probabilities estimated as fractions of documents
    of ``X``, ``NPMI = log((P(wi, wj) + eps) / (P(wi) P(wj))) / -log(P(wi, wj) + eps)`` with
    ``eps = 1e-12``; a topic's score is the mean over its pairs, in ``[-1, 1]``, higher is more
    coherent. Two words present in every document score 1 (they only ever occur together).

    Parameters
    ----------
    X : sparse matrix or array-like of shape (n_docs, n_words)
        Reference corpus; only whether a word occurs in a document matters.
    components : array-like of shape (n_topics, n_words)
        Topic-word weights; only their ranking within each topic matters.
    top_n : int, default=10
        Number of top words per topic.

    Returns
    -------
    coherence : ndarray of float64, shape (n_topics,)
        One score per topic; NaN when one of its top words never occurs in ``X``.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_gpulda.metrics import npmi_coherence
    >>> X = np.array([[1, 1, 0, 0], [1, 1, 0, 0], [0, 0, 1, 1], [0, 0, 1, 0]])
    >>> components = np.array([[5, 4, 1, 0], [0, 1, 5, 4]])
    >>> np.round(npmi_coherence(X, components, top_n=2), 4)  # always together; log 2 / log 4
    array([1. , 0.5])
    """
    pair, single, n_docs = _cooccurrence(X, components, top_n)
    i, j = np.triu_indices(top_n, k=1)
    p_joint = pair[:, i, j] / n_docs
    p_i = single[:, i] / n_docs
    p_j = single[:, j] / n_docs
    with np.errstate(divide="ignore", invalid="ignore"):
        pmi = np.log((p_joint + NPMI_EPSILON) / (p_i * p_j))
        scores = pmi / -np.log(p_joint + NPMI_EPSILON)
    scores[p_joint == 1.0] = 1.0
    scores[(p_i == 0) | (p_j == 0)] = np.nan
    return scores.mean(axis=1)


def top_words(components, feature_names=None, n_words=10):
    """The most probable words of each topic.

    Parameters
    ----------
    components : array-like of shape (n_topics, n_words_total)
        Topic-word weights.
    feature_names : array-like of str of shape (n_words_total,) or None, default=None
        Vocabulary; without it word ids are returned.
    n_words : int, default=10
        Words per topic (at most the vocabulary size).

    Returns
    -------
    words : list of lists
        ``words[k]`` lists topic ``k``'s top words, most probable first (ties by word id).

    Examples
    --------
    >>> from sklearn_gpulda.metrics import top_words
    >>> components = [[0.1, 0.7, 0.2], [0.5, 0.2, 0.3]]
    >>> top_words(components, ["cat", "dog", "fish"], n_words=2)
    [['dog', 'fish'], ['cat', 'fish']]
    >>> top_words(components, n_words=1)
    [[1], [0]]
    """
    components = _as_float_matrix(components, "components")
    vocab_size = components.shape[1]
    if not isinstance(n_words, numbers.Integral) or not 1 <= n_words <= vocab_size:
        raise ValueError(f"n_words must be an integer in 1..{vocab_size}, got {n_words!r}")
    top = _top_indices(components, n_words)
    if feature_names is None:
        return [[int(v) for v in row] for row in top]
    names = np.asarray(feature_names, dtype=object)
    if names.ndim != 1 or names.shape[0] != vocab_size:
        raise ValueError(
            f"vocabulary size mismatch: feature_names has {names.size} entries but components "
            f"has {vocab_size} columns"
        )
    # NumPy scalars (np.str_ and the like) come back as plain Python values.
    return [[names[v].item() if isinstance(names[v], np.generic) else names[v] for v in row]
            for row in top]
