"""The NumPy reference engine against exact distributions and its own invariants."""

import numpy as np
import pytest
import scipy.sparse as sp

from sklearn_gpulda import _random
from sklearn_gpulda._corpus import tokens_from_counts
from sklearn_gpulda._engines.numpy_engine import NumpyEngine, WordTables, draw_topics, fold_in
from sklearn_gpulda.datasets import load_kjv_chapters, make_lda_corpus

from _engine_checks import check_counts_every_sweep
from _stats import merged_chisquare


@pytest.fixture(scope="module")
def kjv():
    return load_kjv_chapters().data


@pytest.mark.parametrize("n_topics", [2, 7, 100, 1000])
@pytest.mark.parametrize("alpha", [0.01, 5.0])
def test_draw_matches_exact_distribution(n_topics, alpha):
    # One fixed (A[d], Bhat[v]) pair drawn many times: small alpha mostly takes the sparse branch,
    # large alpha mostly the word's tree, so both branches are checked against the exact p(k).
    rng = np.random.default_rng(n_topics)
    row = rng.poisson(3.0, n_topics).astype(np.float32)
    row[rng.random(n_topics) < 0.5] = 0
    row[0] = max(row[0], 1)
    bhat = rng.dirichlet(np.ones(n_topics), size=3).astype(np.float32)
    tables = WordTables(bhat)
    n = 200_000
    token = np.arange(n, dtype=np.int64)
    u = _random.token_uniform(12345, 1, _random.STREAM_SAMPLE, token)
    k = draw_topics(np.zeros(n, np.int32), np.full(n, 1, np.int32), u, row[None, :], tables, alpha)
    p = (row.astype(np.float64) + alpha) * bhat[1]
    p /= p.sum()
    observed = np.bincount(k, minlength=n_topics)
    assert observed[p == 0].sum() == 0
    assert merged_chisquare(observed[np.argsort(p)], np.sort(p) * n).pvalue > 1e-4


def test_draw_branch_frequency_matches_sparse_mass():
    rng = np.random.default_rng(0)
    n_topics = 50
    row = np.zeros(n_topics, np.float32)
    row[[3, 17, 40]] = [5, 2, 9]
    bhat = rng.dirichlet(np.ones(n_topics), size=1).astype(np.float32)
    alpha = 0.3
    n = 100_000
    u = _random.token_uniform(7, 1, _random.STREAM_SAMPLE, np.arange(n))
    k = draw_topics(np.zeros(n, np.int32), np.zeros(n, np.int32), u, row[None], WordTables(bhat), alpha)
    s = float((row * bhat[0]).sum())
    q = alpha * float(bhat[0].sum())
    # Tokens landing outside A's support can only come from the tree branch.
    outside = ~np.isin(k, [3, 17, 40])
    expected_outside = q / (s + q) * (1 - bhat[0, [3, 17, 40]].sum())
    assert abs(outside.mean() - expected_outside) < 5 * np.sqrt(expected_outside / n)


def test_counts_are_consistent_after_every_iteration(kjv):
    corpus = tokens_from_counts(kjv[:300])
    engine = NumpyEngine(15, 0.1, 0.01, seed=3)
    engine.initialize(corpus)
    check_counts_every_sweep(engine, corpus, 15)
    a = engine.doc_topic_counts()
    np.testing.assert_array_equal(a.sum(axis=1), np.asarray(kjv[:300].sum(axis=1)).ravel())


def test_same_seed_same_state_other_seed_other_state(kjv):
    corpus = tokens_from_counts(kjv[:200])
    runs = []
    for seed in (1, 1, 2):
        engine = NumpyEngine(10, 0.1, 0.01, seed=seed)
        engine.initialize(corpus)
        for it in range(1, 4):
            engine.sweep(it)
        runs.append(engine.topics())
    np.testing.assert_array_equal(runs[0], runs[1])
    assert (runs[0] != runs[2]).mean() > 0.5


def test_training_log_likelihood_improves(kjv):
    corpus = tokens_from_counts(kjv)
    engine = NumpyEngine(20, 0.05, 0.05, seed=0)
    engine.initialize(corpus)
    start = engine.log_likelihood()
    for it in range(1, 21):
        engine.sweep(it)
    assert engine.log_likelihood() > start + 0.2 * corpus.n_tokens


def test_weighted_tokens_keep_count_totals():
    rng = np.random.default_rng(0)
    X = sp.random(40, 30, density=0.3, random_state=0, format="csr") * 3.7
    corpus = tokens_from_counts(X)
    assert corpus.weight is not None
    engine = NumpyEngine(4, 0.5, 0.1, seed=rng.integers(1 << 31))
    engine.initialize(corpus)
    engine.sweep(1)
    np.testing.assert_allclose(engine.doc_topic_counts().sum(axis=1), np.asarray(X.sum(axis=1)).ravel(), rtol=1e-5)
    np.testing.assert_allclose(engine.word_topic_counts().sum(), X.sum(), rtol=1e-5)


def _fold_in_one_document(counts, words, phi, alpha, max_iter, tol):
    """Straightforward per-document fold-in, written independently of the engine's vectorisation."""
    n_topics = phi.shape[0]
    theta = np.full(n_topics, 1.0 / n_topics)
    for _ in range(max_iter):
        gamma = np.full(n_topics, alpha)
        for c, v in zip(counts, words):
            r = theta * phi[:, v]
            gamma += c * r / r.sum()
        new = gamma / gamma.sum()
        change = np.abs(new - theta).mean()
        theta = new
        if change < tol:
            break
    return theta


def test_fold_in_matches_per_document_reference():
    data = make_lda_corpus(n_docs=30, n_words=80, n_topics=6, doc_length=40, random_state=1)
    X = sp.csr_matrix(data.data, dtype=np.float64)
    comp = data.topic_word * 100 + 0.1
    phi = comp / comp.sum(axis=1, keepdims=True)
    theta = fold_in(X, comp, 0.2, 50, 1e-4)
    for d in range(X.shape[0]):
        row = X[d]
        expected = _fold_in_one_document(row.data, row.indices, phi, 0.2, 50, 1e-4)
        np.testing.assert_allclose(theta[d], expected, rtol=1e-10, atol=1e-12)


def test_fold_in_is_per_document(kjv):
    comp = np.random.default_rng(0).gamma(1.0, 1.0, size=(8, kjv.shape[1]))
    X = kjv[:60].astype(np.float64)
    full = fold_in(X, comp, 0.1, 100, 1e-3)
    order = np.random.default_rng(1).permutation(60)
    shuffled = fold_in(X[order], comp, 0.1, 100, 1e-3)
    np.testing.assert_array_equal(shuffled, full[order])
    np.testing.assert_array_equal(fold_in(X[7:8], comp, 0.1, 100, 1e-3)[0], full[7])


def test_fold_in_empty_document_is_uniform(kjv):
    X = sp.vstack([kjv[:2], sp.csr_matrix((1, kjv.shape[1]))]).tocsr().astype(np.float64)
    theta, loglik = fold_in(X, np.ones((5, kjv.shape[1])), 0.1, 10, 1e-3, return_loglik=True)
    np.testing.assert_array_equal(theta[2], np.full(5, 0.2))
    assert loglik[2] == 0
    np.testing.assert_allclose(theta.sum(axis=1), 1.0)


@pytest.mark.parametrize("first", [True, False])
def test_batch_statistics_total_equals_batch_tokens(kjv, first):
    corpus = tokens_from_counts(kjv[:50])
    engine = NumpyEngine(6, 0.1, 0.01, seed=5)
    comp = None if first else np.random.default_rng(0).gamma(2.0, 1.0, (6, kjv.shape[1]))
    stats = engine.batch_statistics(corpus, comp, n_sweeps=4, iteration=1, first=first)
    assert stats.shape == (6, kjv.shape[1])
    np.testing.assert_allclose(stats.sum(), corpus.n_tokens)
    np.testing.assert_allclose(stats.sum(axis=0), corpus.word_frequencies())


def test_memory_check_refuses_before_allocating(kjv):
    corpus = tokens_from_counts(kjv[:10])
    engine = NumpyEngine(10**9, 0.1, 0.01, seed=0)
    with pytest.raises(MemoryError, match="n_components=1000000000"):
        engine.initialize(corpus)


def test_set_topics_rejects_wrong_shape_and_range_and_keeps_state(kjv):
    corpus = tokens_from_counts(kjv[:40])
    engine = NumpyEngine(6, 0.1, 0.01, seed=0)
    engine.initialize(corpus)
    before = engine.topics().copy()
    with pytest.raises(ValueError, match=r"topics must have shape"):
        engine.set_topics(corpus, np.zeros(corpus.n_tokens - 1, dtype=np.int32))
    with pytest.raises(ValueError, match=r"topics must lie in \[0, 6\)"):
        engine.set_topics(corpus, np.full(corpus.n_tokens, 6, dtype=np.int32))
    with pytest.raises(ValueError, match=r"topics must lie in"):
        engine.set_topics(corpus, np.full(corpus.n_tokens, -1, dtype=np.int32))
    np.testing.assert_array_equal(engine.topics(), before)
    z = np.arange(corpus.n_tokens, dtype=np.int32) % 6
    engine.set_topics(corpus, z)
    np.testing.assert_array_equal(engine.topics(), z)
