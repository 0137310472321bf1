"""Log-likelihood and perplexity of a corpus under given topic distributions.

Also home of the chunked per-token probability ``sum_k theta[d, k] phi[k, v]`` that document
completion scores its held-out half with, and of the scratch budget both respect.
"""

import numpy as np

from ._checks import as_counts, as_float_matrix, check_vocabulary, normalise_rows

# Gathered (non-zero x topic) arrays are built for about a million entries at a time: scoring a
# 100 M-token corpus then needs tens of MB of scratch memory, and a fold-in chunk stays in cache
# across its iterations.
_CHUNK_ENTRIES = 1 << 20


def items_per_chunk(width):
    """How many items of ``width`` scratch entries each fit in the budget (at least one)."""
    return max(1, _CHUNK_ENTRIES // max(1, width))


def _row_chunks(indptr, per_entry):
    """Row ranges whose non-zeros times ``per_entry`` stay near the scratch budget."""
    n_rows = indptr.size - 1
    budget = items_per_chunk(per_entry)
    start = 0
    while start < n_rows:
        end = int(np.searchsorted(indptr, indptr[start] + budget, side="right")) - 1
        end = min(max(end, start + 1), n_rows)
        yield start, end
        start = end


def token_probabilities(X, doc_topic, topic_word_t):
    """``sum_k theta[d, k] phi[k, v]`` for every non-zero (d, v) of ``X``, in CSR order."""
    out = np.empty(X.nnz, dtype=np.float64)
    for r0, r1 in _row_chunks(X.indptr, topic_word_t.shape[1]):
        lo, hi = X.indptr[r0], X.indptr[r1]
        doc = np.repeat(np.arange(r0, r1), np.diff(X.indptr[r0:r1 + 1]))
        out[lo:hi] = np.einsum("ik,ik->i", doc_topic[doc], topic_word_t[X.indices[lo:hi]])
    return out


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
    return normalise_rows(as_float_matrix(components, "components"), "components")


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
    X = as_counts(X)
    theta = normalise_rows(as_float_matrix(doc_topic, "doc_topic"), "doc_topic")
    phi = topic_word_distribution(topic_word)
    check_vocabulary(X, phi.shape[1], "topic_word")
    if theta.shape[0] != X.shape[0]:
        raise ValueError(f"X has {X.shape[0]} documents but doc_topic has {theta.shape[0]} rows")
    if theta.shape[1] != phi.shape[0]:
        raise ValueError(
            f"doc_topic has {theta.shape[1]} topics but topic_word has {phi.shape[0]}"
        )
    prob = token_probabilities(X, theta, np.ascontiguousarray(phi.T))
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
    X = as_counts(X)
    total = X.data.sum()
    if total <= 0:
        raise ValueError("X holds no tokens; perplexity is undefined")
    return float(np.exp(-log_likelihood(X, doc_topic, topic_word) / total))
