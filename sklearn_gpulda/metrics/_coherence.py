"""Topic coherence from document co-occurrence (UMass, NPMI), and the top words of each topic."""

import numbers

import numpy as np

from ._checks import as_counts, as_float_matrix, check_vocabulary

#: Smoothing of NPMI (Röder et al. 2015; gensim uses the same value).
NPMI_EPSILON = 1e-12


def _top_indices(components, n):
    """Each row's ``n`` largest entries, largest first, ties by word id: the first ``n`` of a
    stable sort of the negated row, the same on every platform. Only the entries at least as
    large as the row's ``n``-th largest are sorted (a full sort of every row took most of the
    time of scoring a model at K = 200 on 20 Newsgroups)."""
    n_topics, n_words = components.shape
    if n >= n_words:
        return np.argsort(-components, axis=1, kind="stable")[:, :n]
    kth = np.partition(components, n_words - n, axis=1)[:, n_words - n]
    rows, words = np.nonzero(components >= kth[:, None])  # at least n a row
    order = np.lexsort((words, -components[rows, words], rows))
    starts = np.concatenate(([0], np.cumsum(np.bincount(rows, minlength=n_topics))[:-1]))
    return words[order][starts[:, None] + np.arange(n)]


def _cooccurrence(X, components, top_n):
    """Document frequencies of each topic's top words (``single``) and of their pairs."""
    X = as_counts(X, "reference corpus X")
    components = as_float_matrix(components, "components")
    check_vocabulary(X, components.shape[1], "components")
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
        Reference corpus: ``D(.)`` counts its documents holding the word(s); how often a word
        occurs in a document does not matter.
    components : array-like of shape (n_topics, n_words)
        Topic-word weights; only their ranking within each topic matters: it orders
        ``v_1, ..., v_M``.
    top_n : int, default=10
        ``M``, the number of top words per topic.

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
    return umass_of_counts(pair, single)


def umass_of_counts(pair, single):
    """UMass per topic from :func:`_cooccurrence`'s document frequencies (one count, two
    coherences: :func:`coherence_pair`)."""
    top_n = single.shape[1]
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
        Reference corpus: a word's probability is the fraction of its documents holding the
        word, whatever the count there.
    components : array-like of shape (n_topics, n_words)
        Topic-word weights; only which words rank in each topic's top ``top_n`` matters.
    top_n : int, default=10
        Number of top words per topic, whose pairs are averaged.

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
    return npmi_of_counts(*_cooccurrence(X, components, top_n))


def npmi_of_counts(pair, single, n_docs):
    """NPMI per topic from :func:`_cooccurrence`'s document frequencies."""
    i, j = np.triu_indices(single.shape[1], k=1)
    p_joint = pair[:, i, j] / n_docs
    p_i = single[:, i] / n_docs
    p_j = single[:, j] / n_docs
    with np.errstate(divide="ignore", invalid="ignore"):
        pmi = np.log((p_joint + NPMI_EPSILON) / (p_i * p_j))
        scores = pmi / -np.log(p_joint + NPMI_EPSILON)
    scores[p_joint == 1.0] = 1.0
    scores[(p_i == 0) | (p_j == 0)] = np.nan
    return scores.mean(axis=1)


def coherence_pair(X, components, top_n=10):
    """``(umass, npmi)`` per topic, as :func:`umass_coherence` and :func:`npmi_coherence` give
    them, from one count of the reference corpus's co-occurrences."""
    pair, single, n_docs = _cooccurrence(X, components, top_n)
    return umass_of_counts(pair, single), npmi_of_counts(pair, single, n_docs)


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
    components = as_float_matrix(components, "components")
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
