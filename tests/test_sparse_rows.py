"""The document branch over A's non-zeros only (:class:`~sklearn_gpulda.backends.numpy.
sparse_rule.DocRows`) draws exactly what the pass over dense rows draws."""

import numpy as np
import pytest

from sklearn_gpulda._input.corpus import tokens
from sklearn_gpulda.backends.numpy import sparse_rule
from sklearn_gpulda.backends.numpy.sampler import NumpySampler
from sklearn_gpulda.datasets import make_lda_corpus


def _chain(X, n_topics, sparse_rows):
    chain = NumpySampler(n_topics, 0.05, 0.01, seed=5)
    chain.sparse_rows = sparse_rows
    chain.load(tokens(X))
    chain.init_topics()
    return chain


@pytest.fixture
def sparse_calls(monkeypatch):
    """Counts the chunks that took the sparse path."""
    calls = []
    original = sparse_rule._document_run_sparse

    def counted(*args):
        calls.append(args[0].size)
        return original(*args)

    monkeypatch.setattr(sparse_rule, "_document_run_sparse", counted)
    return calls


@pytest.mark.parametrize("weighted", [False, True])
def test_sparse_rows_draw_what_dense_rows_draw(weighted, sparse_calls):
    # Short documents and many topics: every chunk takes the sparse path.
    X = make_lda_corpus(n_docs=300, n_words=400, n_topics=10, doc_length=12,
                        random_state=1).data.astype(np.float64)
    if weighted:
        X.data *= 0.6
    n_topics = 256
    chains = [_chain(X, n_topics, True), _chain(X, n_topics, False)]
    corpus = chains[0].corpus
    rows = sparse_rule.DocRows(chains[0]._a)
    assert sparse_rule.SPARSE_FACTOR * rows.lengths(corpus.doc).max() <= n_topics
    initial = chains[0].topics()
    for it in range(1, 6):
        for chain in chains:
            chain.sweep(it)
        np.testing.assert_array_equal(chains[0].topics(), chains[1].topics())
    # The chains moved, and the sparse path drew every token of the first chain.
    assert np.mean(chains[0].topics() != initial) > 0.5
    assert sum(sparse_calls) == 5 * corpus.n_tokens


def test_doc_rows_list_each_documents_non_zeros_in_topic_order():
    a = np.array([[0, 2, 0, 1], [0, 0, 0, 0], [3, 0, 0, 0.5]], dtype=np.float32)
    rows = sparse_rule.DocRows(a)
    np.testing.assert_array_equal(rows.ptr, [0, 2, 2, 4])
    np.testing.assert_array_equal(rows.topic, [1, 3, 0, 3])
    np.testing.assert_array_equal(rows.value, [2, 1, 3, 0.5])
    np.testing.assert_array_equal(rows.lengths(np.array([2, 0, 1])), [2, 2, 0])


def test_mixed_chunks_take_either_path_and_agree(sparse_calls):
    # Short documents first, long ones after: the first chunks fit the sparse path, the last
    # ones are too wide for it.
    short = make_lda_corpus(n_docs=600, n_words=300, n_topics=8, doc_length=8, random_state=2)
    long = make_lda_corpus(n_docs=60, n_words=300, n_topics=8, doc_length=400, random_state=3)
    import scipy.sparse as sp

    X = sp.vstack([short.data, long.data]).tocsr()
    n_topics = 128
    chains = [_chain(X, n_topics, True), _chain(X, n_topics, False)]
    for it in range(1, 4):
        for chain in chains:
            chain.sweep(it)
        np.testing.assert_array_equal(chains[0].topics(), chains[1].topics())
    n_tokens = chains[0].corpus.n_tokens
    assert 0 < sum(sparse_calls) < 3 * n_tokens


def test_likelihood_over_sparse_rows_is_the_dense_one():
    X = make_lda_corpus(n_docs=300, n_words=400, n_topics=10, doc_length=12,
                        random_state=4).data
    chains = [_chain(X, 256, True), _chain(X, 256, False)]
    for chain in chains:
        chain.sweep(1)
    assert chains[0].log_likelihood() == chains[1].log_likelihood()
