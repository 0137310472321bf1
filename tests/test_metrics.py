"""Evaluation metrics of ``sklearn_gpulda.metrics``."""

import itertools

import numpy as np
import pytest
import scipy.sparse as sp

from sklearn_gpulda import metrics
from sklearn_gpulda.datasets import load_kjv_chapters, make_lda_corpus
from sklearn_gpulda.metrics import (
    compare_models,
    document_completion,
    log_likelihood,
    npmi_coherence,
    perplexity,
    top_words,
    topic_word_distribution,
    umass_coherence,
)
from sklearn_gpulda.metrics._checks import as_counts
from sklearn_gpulda.metrics._completion import split_halves


@pytest.fixture(scope="module")
def corpus():
    return make_lda_corpus(n_docs=400, n_words=500, n_topics=8, doc_length=80, alpha=0.1,
                           random_state=7)


@pytest.fixture(scope="module")
def kjv():
    return load_kjv_chapters()


def _random_topics(n_topics, n_words, seed):
    return np.random.default_rng(seed).dirichlet(np.full(n_words, 0.1), size=n_topics)


# --------------------------------------------------------------------------------------------------
# distributions and likelihood
# --------------------------------------------------------------------------------------------------


def test_topic_word_distribution(corpus):
    weights = corpus.topic_word * 37.0 + 0.01
    phi = topic_word_distribution(weights)
    assert phi.dtype == np.float64
    np.testing.assert_allclose(phi.sum(axis=1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(topic_word_distribution(sp.csr_matrix(weights)), phi)
    with pytest.raises(ValueError, match="non-negative"):
        topic_word_distribution(-weights)
    with pytest.raises(ValueError, match="row 1 .* sums to zero"):
        topic_word_distribution(np.vstack([weights[0], np.zeros(weights.shape[1])]))
    with pytest.raises(ValueError, match="2-d"):
        topic_word_distribution(weights[0])


def test_log_likelihood_matches_dense_formula(corpus):
    X = corpus.data
    expected = np.sum(X.toarray() * np.log(corpus.doc_topic @ corpus.topic_word))
    got = log_likelihood(X, corpus.doc_topic, corpus.topic_word)
    np.testing.assert_allclose(got, expected, rtol=1e-12)
    # Unnormalised weights are normalised first; dense input works the same.
    scaled = log_likelihood(X.toarray(), corpus.doc_topic * 3.0, corpus.topic_word * 11.0)
    np.testing.assert_allclose(scaled, expected, rtol=1e-12)


def test_log_likelihood_chunks_agree(corpus, monkeypatch):
    whole = log_likelihood(corpus.data, corpus.doc_topic, corpus.topic_word)
    monkeypatch.setattr(metrics._likelihood, "_CHUNK_ENTRIES", 50)  # many small chunks
    chunked = log_likelihood(corpus.data, corpus.doc_topic, corpus.topic_word)
    np.testing.assert_allclose(chunked, whole, rtol=1e-12)


def test_perplexity_prefers_true_topics(corpus):
    X, theta, phi = corpus.data, corpus.doc_topic, corpus.topic_word
    true = perplexity(X, theta, phi)
    uniform = perplexity(X, theta, np.ones_like(phi))
    random = perplexity(X, theta, _random_topics(*phi.shape, seed=0))
    assert true < uniform and true < random
    np.testing.assert_allclose(uniform, phi.shape[1], rtol=1e-12)  # every word 1 / V
    np.testing.assert_allclose(
        np.log(true), -log_likelihood(X, theta, phi) / X.sum(), rtol=1e-12
    )


def test_likelihood_shape_errors(corpus):
    X, theta, phi = corpus.data, corpus.doc_topic, corpus.topic_word
    with pytest.raises(ValueError, match="X has 500 columns .* topic_word has 499"):
        log_likelihood(X, theta, phi[:, :-1])
    with pytest.raises(ValueError, match="400 documents but doc_topic has 399"):
        log_likelihood(X, theta[:-1], phi)
    with pytest.raises(ValueError, match="doc_topic has 7 topics but topic_word has 8"):
        log_likelihood(X, theta[:, :-1], phi)
    with pytest.raises(ValueError, match="no tokens"):
        perplexity(sp.csr_matrix(X.shape), theta, phi)
    with pytest.raises(ValueError, match="non-negative"):
        log_likelihood(-X, theta, phi)


# --------------------------------------------------------------------------------------------------
# document completion
# --------------------------------------------------------------------------------------------------


def _reference_completion(observed, held_out, phi, alpha, n_iter):
    """Document completion written out one document at a time, with plain loops over words."""
    n_topics = phi.shape[0]
    loglik = 0.0
    for d in range(observed.shape[0]):
        obs = observed.getrow(d)
        theta = np.full(n_topics, 1.0 / n_topics)
        for _ in range(n_iter):
            gamma = np.full(n_topics, alpha)
            for v, n in zip(obs.indices, obs.data):
                resp = theta * phi[:, v]
                gamma += n * resp / resp.sum()
            theta = gamma / gamma.sum()
        held = held_out.getrow(d)
        for v, n in zip(held.indices, held.data):
            loglik += n * np.log(theta @ phi[:, v])
    return loglik


def test_split_is_an_exact_random_half(corpus):
    X = as_counts(corpus.data)
    observed, held_out = split_halves(X, np.random.default_rng(0))
    assert (observed + held_out != X).nnz == 0
    lengths = X.sum(axis=1).A1.astype(np.int64)
    np.testing.assert_array_equal(held_out.sum(axis=1).A1, lengths // 2)
    np.testing.assert_array_equal(observed.sum(axis=1).A1, lengths - lengths // 2)
    assert observed.data.min() > 0 and held_out.data.min() > 0
    again, _ = split_halves(X, np.random.default_rng(0))
    other, _ = split_halves(X, np.random.default_rng(1))
    assert (again != observed).nnz == 0 and (other != observed).nnz > 0


def test_split_is_uniform():
    # One document of 4 tokens: words a, a, b, c. Holding out 2 tokens at random, the held-out
    # multiset is {a,a} with probability 1/6, {a,b} 2/6, {a,c} 2/6, {b,c} 1/6.
    X = sp.csr_matrix(np.tile([[2, 1, 1]], (30000, 1)).astype(np.float64))
    _, held = split_halves(X, np.random.default_rng(3))
    held = held.toarray()
    freq = {key: np.mean(np.all(held == key, axis=1))
            for key in [(2, 0, 0), (1, 1, 0), (1, 0, 1), (0, 1, 1)]}
    expected = {(2, 0, 0): 1 / 6, (1, 1, 0): 2 / 6, (1, 0, 1): 2 / 6, (0, 1, 1): 1 / 6}
    for key, p in expected.items():
        assert abs(freq[key] - p) < 0.015, (key, freq[key])


def test_document_completion_matches_reference(corpus):
    X = corpus.data[:60]
    phi, alpha, n_iter = corpus.topic_word, 0.1, 15
    result = document_completion(X, phi, alpha, n_iter=n_iter, random_state=4, tol=0)
    observed, held_out = split_halves(as_counts(X), np.random.default_rng(4))
    expected = _reference_completion(observed, held_out, phi, alpha, n_iter)
    np.testing.assert_allclose(result.loglik, expected, rtol=1e-10)
    assert result.n_tokens == held_out.sum() == (X.sum(axis=1).A1 // 2).sum()
    np.testing.assert_allclose(result.per_token, result.loglik / result.n_tokens)
    np.testing.assert_allclose(result.perplexity, np.exp(-result.per_token))
    np.testing.assert_allclose(result.doc_topic.sum(axis=1), 1.0, rtol=1e-12)


def test_document_completion_chunking_and_compaction(corpus, monkeypatch):
    exact = document_completion(corpus.data, corpus.topic_word, 0.1, n_iter=200, tol=0,
                                random_state=0)
    early = document_completion(corpus.data, corpus.topic_word, 0.1, n_iter=200, tol=1e-7,
                                random_state=0)
    np.testing.assert_allclose(early.per_token, exact.per_token, rtol=1e-5)
    monkeypatch.setattr(metrics._likelihood, "_CHUNK_ENTRIES", 64)
    small = document_completion(corpus.data, corpus.topic_word, 0.1, n_iter=200, tol=0,
                                random_state=0)
    np.testing.assert_allclose(small.loglik, exact.loglik, rtol=1e-12)


def test_document_completion_prefers_true_topics(corpus):
    X, phi = corpus.data, corpus.topic_word
    true = document_completion(X, phi, 0.1, random_state=0)
    shuffled = document_completion(
        X, phi[:, np.random.default_rng(0).permutation(phi.shape[1])], 0.1, random_state=0
    )
    flat = document_completion(X, np.ones_like(phi), 0.1, random_state=0)
    assert true.n_tokens == shuffled.n_tokens == flat.n_tokens
    assert true.per_token > shuffled.per_token
    assert true.per_token > flat.per_token
    np.testing.assert_allclose(flat.perplexity, phi.shape[1], rtol=1e-10)
    # Same seed, same answer; components_-style weights are normalised inside.
    again = document_completion(X, phi * 250.0 + 0.0, 0.1, random_state=0)
    assert again.loglik == pytest.approx(true.loglik, rel=1e-12)


def test_document_completion_gibbs_agrees_with_fixed_point(corpus):
    X, phi = corpus.data[:150], corpus.topic_word
    fixed = document_completion(X, phi, 0.1, random_state=1)
    gibbs = document_completion(X, phi, 0.1, n_iter=40, random_state=1, method="gibbs")
    assert gibbs.n_tokens == fixed.n_tokens
    assert abs(gibbs.per_token - fixed.per_token) < 0.05
    shuffled = document_completion(X, phi[:, ::-1], 0.1, n_iter=40, random_state=1,
                                   method="gibbs")
    assert gibbs.per_token > shuffled.per_token


def test_document_completion_accepts_sklearn_components(kjv):
    from sklearn.decomposition import LatentDirichletAllocation

    X = kjv.data[:200]
    lda = LatentDirichletAllocation(n_components=5, max_iter=3, random_state=0).fit(X)
    result = document_completion(X, lda.components_, alpha=1 / 5, random_state=0)
    assert np.isfinite(result.loglik) and result.per_token < 0
    flat = document_completion(X, np.ones_like(lda.components_), alpha=1 / 5, random_state=0)
    assert result.per_token > flat.per_token


def test_document_completion_errors(corpus):
    X, phi = corpus.data, corpus.topic_word
    with pytest.raises(ValueError, match="X has 500 columns .* topic_word has 400"):
        document_completion(X, phi[:, :400], 0.1)
    with pytest.raises(ValueError, match="integer counts"):
        document_completion(X * 0.5, phi, 0.1)
    with pytest.raises(ValueError, match="alpha"):
        document_completion(X, phi, -0.1)
    with pytest.raises(ValueError, match="alpha"):
        document_completion(X, phi, [0.1, 0.1])
    with pytest.raises(ValueError, match="method"):
        document_completion(X, phi, 0.1, method="left_to_right")
    with pytest.raises(ValueError, match="n_iter"):
        document_completion(X, phi, 0.1, n_iter=0)
    with pytest.raises(ValueError, match="held-out"):
        document_completion(sp.identity(500, format="csr"), phi, 0.1)


@pytest.fixture(scope="module")
def fitted_pair(kjv):
    """A model of this package and one of scikit-learn, both fitted on the same chapters."""
    from sklearn.decomposition import LatentDirichletAllocation

    from sklearn_gpulda import GPULatentDirichletAllocation

    X = kjv.data[:200]
    # Fixed priors: the test below checks that a bare matrix gets 1 / K, the estimator's None.
    ours = GPULatentDirichletAllocation(n_components=5, max_iter=10, random_state=0,
                                        doc_topic_prior=None, topic_word_prior=None,
                                        device="cpu").fit(X)
    theirs = LatentDirichletAllocation(n_components=5, max_iter=3, random_state=0).fit(X)
    return ours, theirs


def test_compare_models_scores_every_model_on_one_split(kjv, fitted_pair):
    ours, theirs = fitted_pair
    X_test = kjv.data[200:300]
    scores = compare_models(X_test, {"ours": ours, "sklearn": theirs}, random_state=3)
    assert list(scores) == ["ours", "sklearn"]
    for name, model in (("ours", ours), ("sklearn", theirs)):
        alone = document_completion(X_test, model.components_, model.doc_topic_prior_,
                                    random_state=3)
        assert scores[name].loglik == pytest.approx(alone.loglik, rel=1e-12)
        assert scores[name].n_tokens == alone.n_tokens


def test_compare_models_takes_pipelines_matrices_and_per_topic_priors(kjv, fitted_pair):
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import FunctionTransformer

    ours, _ = fitted_pair
    X_test = kjv.data[200:260]
    alpha = np.linspace(0.05, 0.5, 5)
    scores = compare_models(
        X_test,
        {"pipeline": make_pipeline(FunctionTransformer(accept_sparse=True), ours),
         "matrix": ours.components_, "asymmetric": ours.components_},
        alpha=None, random_state=0)
    assert scores["pipeline"].loglik == pytest.approx(scores["matrix"].loglik, rel=1e-12)
    # A bare matrix gets alpha = 1 / n_topics, the estimators' default prior.
    assert ours.doc_topic_prior_ == pytest.approx(1 / 5)
    asymmetric = compare_models(X_test, {"m": ours.components_}, alpha=alpha, random_state=0)
    expected = document_completion(X_test, ours.components_, alpha, random_state=0)
    assert asymmetric["m"].loglik == pytest.approx(expected.loglik, rel=1e-12)


def test_compare_models_errors(kjv, fitted_pair):
    ours, _ = fitted_pair
    with pytest.raises(ValueError, match="models is empty"):
        compare_models(kjv.data[:10], {})
    with pytest.raises(ValueError, match="X has 100 columns .* model 'ours' has 3117"):
        compare_models(kjv.data[:10, :100], {"ours": ours})

    class Topics:
        components_ = ours.components_

    with pytest.raises(ValueError, match="no fitted doc_topic_prior_"):
        compare_models(kjv.data[:10], {"bare": Topics()})


# --------------------------------------------------------------------------------------------------
# coherence and top words
# --------------------------------------------------------------------------------------------------


def test_coherence_prefers_true_topics():
    corpus = make_lda_corpus(n_docs=600, n_words=800, n_topics=10, doc_length=80, alpha=0.05,
                             beta=0.05, zipf_exponent=0.5, random_state=9)
    # Random topics over the words that occur, so that every score is finite.
    present = corpus.data.sum(axis=0).A1 > 0
    random = _random_topics(10, 800, seed=1) * present
    for score in (umass_coherence, npmi_coherence):
        true = score(corpus.data, corpus.topic_word)
        other = score(corpus.data, random)
        assert true.shape == other.shape == (10,)
        assert np.all(np.isfinite(true))
        assert true.mean() > other.mean(), score.__name__


def _document_sets(X, words):
    X = sp.csc_matrix(X)
    return {v: set(X.indices[X.indptr[v]:X.indptr[v + 1]][X.data[X.indptr[v]:X.indptr[v + 1]] > 0])
            for v in words}


def test_umass_matches_direct_computation(kjv):
    X = kjv.data[:80, :400]
    # Frequent words weighted at random, plus one topic led by words absent from the subset.
    freq = X.sum(axis=0).A1.astype(np.float64)
    components = freq[None, :] * np.random.default_rng(5).random((4, 400)) ** 4
    components[3] += (freq == 0) * 1e9
    top = top_words(components, n_words=6)
    docs = _document_sets(X, set(itertools.chain(*top)))
    expected = []
    for words in top:
        total = 0.0
        for later in range(1, len(words)):
            for earlier in range(later):
                both = len(docs[words[later]] & docs[words[earlier]])
                with np.errstate(divide="ignore"):
                    total += np.log(np.float64(both + 1) / len(docs[words[earlier]]))
        expected.append(total)
    got = umass_coherence(X, components, top_n=6)
    np.testing.assert_allclose(got[:3], expected[:3], rtol=1e-12)
    # A conditioning word absent from the subset makes the topic NaN, by design.
    assert not np.isfinite(expected[3]) and np.isnan(got[3])


def test_npmi_matches_direct_computation(kjv):
    X = kjv.data[:150]
    # Topics built from frequent words, so that every top word occurs in the subset.
    freq = X.sum(axis=0).A1.astype(np.float64)
    rng = np.random.default_rng(6)
    components = freq[None, :] * rng.random((3, freq.size)) ** 4
    top = top_words(components, n_words=8)
    docs = _document_sets(X, set(itertools.chain(*top)))
    n_docs, eps = X.shape[0], 1e-12
    expected = []
    for words in top:
        values = []
        for a, b in itertools.combinations(words, 2):
            p_ab = len(docs[a] & docs[b]) / n_docs
            p_a, p_b = len(docs[a]) / n_docs, len(docs[b]) / n_docs
            values.append(np.log((p_ab + eps) / (p_a * p_b)) / -np.log(p_ab + eps))
        expected.append(np.mean(values))
    got = npmi_coherence(X, components, top_n=8)
    np.testing.assert_allclose(got, expected, rtol=1e-10)
    assert np.all((got >= -1) & (got <= 1))


def test_one_count_gives_both_coherences(kjv):
    # choose_n_components scores UMass and NPMI from one count of the co-occurrences.
    from sklearn_gpulda.metrics._coherence import coherence_pair

    X = kjv.data[:200]
    components = _random_topics(6, X.shape[1], seed=4) * (X.sum(axis=0).A1 > 0)
    umass, npmi = coherence_pair(X, components, top_n=7)
    np.testing.assert_array_equal(umass, umass_coherence(X, components, top_n=7))
    np.testing.assert_array_equal(npmi, npmi_coherence(X, components, top_n=7))


def test_coherence_edge_cases():
    X = sp.csr_matrix(np.array([[1, 1, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0]]))
    components = np.array([[5.0, 4.0, 1.0, 0.0], [0.0, 0.0, 4.0, 5.0]])
    # Words 0 and 1 occur in every document: NPMI 1 by convention. Word 3 never occurs: NaN.
    npmi = npmi_coherence(X, components, top_n=2)
    assert npmi[0] == 1.0 and np.isnan(npmi[1])
    umass = umass_coherence(X, components, top_n=2)  # conditioning word 3 is absent: NaN
    assert umass[0] == pytest.approx(np.log(4 / 3)) and np.isnan(umass[1])
    with pytest.raises(ValueError, match="X has 4 columns .* components has 3"):
        umass_coherence(X, components[:, :3])
    with pytest.raises(ValueError, match="top_n"):
        npmi_coherence(X, components, top_n=1)


def test_top_words(kjv):
    counts = kjv.data.sum(axis=0).A1.astype(np.float64)
    components = np.vstack([counts, counts[::-1]])
    words = top_words(components, kjv.feature_names, n_words=4)
    assert set(words[0]) == {"shall", "unto", "lord", "thou"}
    ids = top_words(components, n_words=4)
    assert [kjv.feature_names[i] for i in ids[1]] == words[1]
    assert all(isinstance(i, int) for i in ids[0])
    as_list = top_words(components, list(kjv.feature_names), n_words=4)
    assert as_list == words and all(type(w) is str for w in as_list[0])
    # Ties go to the smaller word id.
    assert top_words([[1.0, 2.0, 2.0, 0.5]], n_words=3) == [[1, 2, 0]]
    with pytest.raises(ValueError, match="feature_names has 3 entries but components has 4"):
        top_words([[1.0, 2.0, 2.0, 0.5]], ["a", "b", "c"], n_words=2)
    with pytest.raises(ValueError, match="n_words"):
        top_words([[1.0, 2.0]], n_words=3)
