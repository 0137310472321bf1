"""The ``algorithm`` parameter: the dense draw rule as an engine, the 'auto' rule, the estimator.

CPU tests cover the NumPy engine's dense rule, the choice between the rules and the estimator on
the CPU; tests marked ``gpu`` pin :class:`CudaDenseEngine` to ``NumpyEngine(algorithm='dense')``
and to the sparse CUDA engine.
"""

import functools

import numpy as np
import pytest
import scipy.sparse as sp
from _engine_checks import (
    check_counts_every_sweep, check_same_seed_same_model, check_weighted_counts)
from _stats import merged_chisquare

from sklearn_gpulda import GPULatentDirichletAllocation, _random
from sklearn_gpulda._corpus import tokens_from_counts
from sklearn_gpulda._engines import choose_algorithm, make_engine
from sklearn_gpulda._engines.dense_rule import draw_topics_dense
from sklearn_gpulda._engines.numpy_engine import NumpyEngine, draw_topics
from sklearn_gpulda.datasets import load_kjv_chapters
from sklearn_gpulda.metrics import document_completion

ALPHA, BETA, SEED = 0.1, 0.01, 4321


@functools.lru_cache(maxsize=1)
def _kjv():
    return load_kjv_chapters().data


@functools.lru_cache(maxsize=1)
def _kjv_split():
    X = _kjv()
    order = np.random.default_rng(0).permutation(X.shape[0])
    return X[np.sort(order[:1070])], X[np.sort(order[1070:])]


# -- the NumPy engine's dense rule ----------------------------------------------------------------
@pytest.mark.parametrize("n_topics", [16, 33, 100])
def test_numpy_dense_sweep_matches_exact_distribution(n_topics):
    # One document holding two words many times: every token of a word draws from the same
    # p(k) ∝ (A[k] + alpha) Bhat[v, k], so the counts of one sweep are multinomial.
    rng = np.random.default_rng(n_topics)
    n_each = 60_000
    X = sp.csr_matrix(np.array([[n_each, n_each]], dtype=np.int64))
    corpus = tokens_from_counts(X)
    weights = rng.gamma(0.5, size=n_topics)
    weights[rng.random(n_topics) < 0.3] = 0  # topics with no tokens at all
    weights /= weights.sum()
    z = rng.choice(n_topics, size=corpus.n_tokens, p=weights).astype(np.int32)
    eng = NumpyEngine(n_topics, ALPHA, BETA, SEED, algorithm="dense")
    eng.set_topics(corpus, z)
    a = eng.doc_topic_counts()[0]
    b = eng.word_topic_counts().T  # (V, K)
    bhat = (b + BETA) / (b.sum(axis=0) + 2 * BETA)
    eng.sweep(1)
    new = eng.topics()
    for v in range(2):
        p = (a + ALPHA) * bhat[v]
        p /= p.sum()
        got = np.bincount(new[corpus.word == v], minlength=n_topics)
        result = merged_chisquare(got, p * n_each)
        assert result.pvalue > 1e-4, (v, result)


def test_numpy_dense_sweep_uses_the_sparse_engines_uniforms():
    corpus = tokens_from_counts(_kjv()[:200])
    k = 24
    dense = NumpyEngine(k, ALPHA, BETA, SEED, algorithm="dense")
    sparse = NumpyEngine(k, ALPHA, BETA, SEED)
    dense.initialize(corpus)
    sparse.initialize(corpus)
    np.testing.assert_array_equal(dense.topics(), sparse.topics())  # same stream 0
    a = dense.doc_topic_counts().astype(np.float32)
    tables = dense._tables  # the sweep replaces it
    t = np.arange(corpus.n_tokens)
    u = _random.token_uniform(SEED, 1, _random.STREAM_SAMPLE, t)
    dense.sweep(1)
    sparse.sweep(1)
    np.testing.assert_array_equal(
        dense.topics(), draw_topics_dense(corpus.doc, corpus.word, u, a, tables.bhat, ALPHA)
    )
    # The sparse rule is untouched by the new argument.
    np.testing.assert_array_equal(
        sparse.topics(), draw_topics(corpus.doc, corpus.word, u, a, tables, ALPHA)
    )


@pytest.mark.parametrize("first", [True, False])
def test_numpy_dense_batch_statistics(first):
    corpus = tokens_from_counts(_kjv()[:150])
    k = 12
    components = np.random.default_rng(5).gamma(1.0, size=(k, corpus.n_words)) + 0.1
    eng = NumpyEngine(k, ALPHA, BETA, SEED, algorithm="dense")
    stats_dense = eng.batch_statistics(corpus, components, 4, 3, first)
    assert stats_dense.shape == (k, corpus.n_words)
    assert stats_dense.sum() == pytest.approx(corpus.n_tokens, rel=1e-12)
    again = NumpyEngine(k, ALPHA, BETA, SEED, algorithm="dense").batch_statistics(
        corpus, components, 4, 3, first
    )
    np.testing.assert_array_equal(stats_dense, again)


def test_numpy_engine_rejects_unknown_algorithm():
    with pytest.raises(ValueError, match="'sparse' or 'dense'"):
        NumpyEngine(4, ALPHA, BETA, SEED, algorithm="auto")


# -- the choice -----------------------------------------------------------------------------------
def test_auto_rule_follows_the_measured_crossover(monkeypatch):
    import sklearn_gpulda._engines as engines

    gpu = "cuda:0"
    # Measured: the sparse engine was faster over whole iterations at every K in 16..1,024.
    assert engines.DENSE_MAX_TOPICS == 0
    for k in (1, 16, 48, 1024, 10_000):
        assert choose_algorithm("auto", k, gpu) == "sparse"
    # The rule itself, at a crossover of 48.
    monkeypatch.setattr(engines, "DENSE_MAX_TOPICS", 48)
    assert choose_algorithm("auto", 48, gpu) == "dense"
    assert choose_algorithm("auto", 49, gpu) == "sparse"


def test_auto_keeps_the_reference_rule_on_the_cpu():
    assert choose_algorithm("auto", 10, "cpu") == "sparse"
    assert choose_algorithm("dense", 10, "cpu") == "dense"


def test_explicit_choices_and_the_dense_ceiling():
    for device in ("cpu", "cuda:0"):
        assert choose_algorithm("sparse", 8, device) == "sparse"
        assert choose_algorithm("sparse", 5000, device) == "sparse"
        assert choose_algorithm("dense", 1024, device) == "dense"
    with pytest.raises(ValueError, match="at most 1024 topics"):
        choose_algorithm("dense", 1025, "cpu")
    with pytest.raises(ValueError, match="algorithm must be"):
        choose_algorithm("fast", 10, "cpu")


@pytest.mark.parametrize("algorithm", ["sparse", "dense"])
def test_make_engine_on_the_cpu(algorithm):
    eng = make_engine("cpu", 7, ALPHA, BETA, SEED, algorithm)
    assert isinstance(eng, NumpyEngine) and eng.algorithm == algorithm
    assert make_engine("cpu", 7, ALPHA, BETA, SEED).algorithm == "sparse"


# -- the estimator on the CPU ---------------------------------------------------------------------
def _lda(**kw):
    kw.setdefault("device", "cpu")
    kw.setdefault("random_state", 0)
    return GPULatentDirichletAllocation(**kw)


@pytest.mark.parametrize(
    "algorithm, n_components, resolved",
    [
        ("auto", 48, "sparse"),  # the CPU keeps the reference rule
        ("auto", 49, "sparse"),
        ("sparse", 5, "sparse"),
        ("dense", 60, "dense"),
    ],
)
def test_fitted_algorithm_attribute(algorithm, n_components, resolved):
    model = _lda(n_components=n_components, algorithm=algorithm, max_iter=1).fit(_kjv()[:30])
    assert model.algorithm_ == resolved


def test_dense_held_out_likelihood_matches_sparse():
    train, test = _kjv_split()
    k = 20
    scores = {}
    for algorithm in ("dense", "sparse"):
        model = _lda(n_components=k, max_iter=100, algorithm=algorithm).fit(train)
        assert model.algorithm_ == algorithm
        scores[algorithm] = document_completion(
            test, model.components_, 1.0 / k, random_state=0
        ).per_token
    assert abs(scores["dense"] - scores["sparse"]) <= 0.02, scores


def test_dense_with_too_many_topics_is_refused_at_fit():
    with pytest.raises(ValueError, match="at most 1024 topics"):
        _lda(n_components=1025, algorithm="dense", max_iter=1).fit(_kjv()[:10])
    with pytest.raises(ValueError, match="at most 1024 topics"):
        _lda(n_components=1025, algorithm="dense").partial_fit(_kjv()[:10])


@pytest.mark.parametrize("learning_method", ["batch", "online"])
def test_dense_same_seed_same_model(learning_method):
    X = _kjv()[:250]
    kw = dict(n_components=9, algorithm="dense", max_iter=4, learning_method=learning_method,
              batch_size=100, random_state=3)
    a, b = _lda(**kw).fit(X), _lda(**kw).fit(X)
    np.testing.assert_array_equal(a.components_, b.components_)
    np.testing.assert_array_equal(a.transform(X[:20]), b.transform(X[:20]))
    assert a.bound_ == b.bound_
    # A different seed gives a different model.
    c = _lda(**{**kw, "random_state": 4}).fit(X)
    assert not np.array_equal(a.components_, c.components_)


def test_resolved_algorithm_is_kept_for_later_calls(monkeypatch):
    import sklearn_gpulda.estimator as est

    X = _kjv()[:200]
    model = _lda(n_components=6, algorithm="dense", max_iter=2).partial_fit(X[:100])
    seen = []
    real = est.make_engine

    def spy(device, *args):
        seen.append(args[-1])
        return real(device, *args)

    monkeypatch.setattr(est, "make_engine", spy)
    model.set_params(algorithm="sparse")  # a fitted model keeps its sampler
    model.partial_fit(X[100:])
    model.transform(X[:5])
    assert seen == ["dense", "dense"] and model.algorithm_ == "dense"
    model.fit(X)  # a new fit resolves the parameter again
    assert model.algorithm_ == "sparse" and seen[-1] == "sparse"


# -- the GPU engine ---------------------------------------------------------------------------------
def _dense_engine(n_topics, **kw):
    from sklearn_gpulda._engines.cuda_dense_engine import CudaDenseEngine

    return CudaDenseEngine(n_topics, ALPHA, BETA, SEED, **kw)


def _sparse_engine(n_topics):
    from sklearn_gpulda._engines.cuda_engine import CudaEngine

    return CudaEngine(n_topics, ALPHA, BETA, SEED)


@pytest.mark.gpu
@pytest.mark.parametrize("n_topics", [16, 33, 256])
@pytest.mark.parametrize("variant", ["transpose", "butterfly", "plain"])
def test_gpu_sweep_agrees_with_numpy_dense_engine(variant, n_topics):
    corpus = tokens_from_counts(_kjv())
    ref = NumpyEngine(n_topics, ALPHA, BETA, SEED, algorithm="dense")
    ref.initialize(corpus)
    for it in (1, 2):
        ref.sweep(it)
    eng = _dense_engine(n_topics, variant=variant)
    eng.set_topics(corpus, ref.topics())
    np.testing.assert_array_equal(eng.doc_topic_counts(), ref.doc_topic_counts())
    np.testing.assert_array_equal(eng.word_topic_counts(), ref.word_topic_counts())
    assert eng.log_likelihood() == pytest.approx(ref.log_likelihood(), rel=1e-6)
    ref.sweep(3)
    eng.sweep(3)
    agree = np.mean(eng.topics() == ref.topics())
    assert agree >= 0.999, (variant, n_topics, agree)
    eng.release()


@pytest.mark.gpu
@pytest.mark.parametrize("variant", ["transpose", "butterfly"])
def test_gpu_initial_topics_equal_numpy_engine(variant):
    corpus = tokens_from_counts(_kjv()[:300])
    eng = _dense_engine(37, variant=variant)
    eng.initialize(corpus)
    ref = NumpyEngine(37, ALPHA, BETA, SEED, algorithm="dense")
    ref.initialize(corpus)
    np.testing.assert_array_equal(eng.topics(), ref.topics())
    np.testing.assert_array_equal(eng.doc_topic_counts(), ref.doc_topic_counts())
    eng.release()


@pytest.mark.gpu
def test_gpu_count_invariants_every_iteration():
    # A few empty documents are kept: the master index skips them.
    X = sp.vstack([_kjv()[:200], sp.csr_matrix((3, _kjv().shape[1]), dtype=np.int64)]).tocsr()
    corpus = tokens_from_counts(X)
    k = 23
    eng = _dense_engine(k)
    eng.initialize(corpus)
    check_counts_every_sweep(eng, corpus, k)
    eng.release()


@pytest.mark.gpu
def test_gpu_weighted_tokens():
    X = _kjv()[:120].astype(np.float64)
    X.data = X.data * np.random.default_rng(0).uniform(0.3, 1.0, size=X.data.size)
    corpus = tokens_from_counts(X)
    k = 9
    eng = _dense_engine(k)
    check_weighted_counts(eng, corpus, k, NumpyEngine(k, ALPHA, BETA, SEED, algorithm="dense"),
                          atol_a=1e-4)
    eng.release()


@pytest.mark.gpu
def test_gpu_same_seed_same_model():
    corpus = tokens_from_counts(_kjv()[:400])
    check_same_seed_same_model(lambda: _dense_engine(31), corpus)


@pytest.mark.gpu
def test_gpu_fold_in_equals_sparse_engine():
    X = _kjv()[:80]
    k = 12
    components = np.random.default_rng(1).gamma(0.5, size=(k, X.shape[1])) + 0.01
    dense = _dense_engine(k).fold_in(X, components, 0.08, 100, 1e-3, return_loglik=True)
    sparse = _sparse_engine(k).fold_in(X, components, 0.08, 100, 1e-3, return_loglik=True)
    np.testing.assert_array_equal(dense[0], sparse[0])
    np.testing.assert_array_equal(dense[1], sparse[1])


@pytest.mark.gpu
@pytest.mark.parametrize("first", [True, False])
def test_gpu_batch_statistics(first):
    corpus = tokens_from_counts(_kjv()[:300])
    k = 10
    components = np.random.default_rng(2).gamma(1.0, size=(k, corpus.n_words)) + 0.1
    got = _dense_engine(k).batch_statistics(corpus, components, 4, 3, first)
    assert got.shape == (k, corpus.n_words)
    assert got.sum() == pytest.approx(corpus.n_tokens, rel=1e-9)
    ref = NumpyEngine(k, ALPHA, BETA, SEED, algorithm="dense").batch_statistics(
        corpus, components, 4, 3, first
    )
    # Same uniforms and the same rule: only draws at rounding boundaries (and what follows from
    # them) may differ.
    assert np.abs(got - ref).sum() <= 0.02 * corpus.n_tokens


@pytest.mark.gpu
def test_gpu_engine_choice_and_limits():
    from sklearn_gpulda._engines.cuda_dense_engine import CudaDenseEngine
    from sklearn_gpulda._engines.cuda_engine import CudaEngine

    assert isinstance(make_engine("cuda:0", 8, ALPHA, BETA, SEED, "dense"), CudaDenseEngine)
    assert isinstance(make_engine("cuda:0", 8, ALPHA, BETA, SEED, "sparse"), CudaEngine)
    with pytest.raises(ValueError, match="n_topics <= 1024"):
        _dense_engine(1025)
    with pytest.raises(ValueError, match="variant"):
        _dense_engine(8, variant="fast")


@pytest.mark.gpu
def test_gpu_memory_is_checked_before_allocating():
    from types import SimpleNamespace

    huge = SimpleNamespace(n_tokens=10**9, n_docs=10**8, n_words=10**5, weight=None)
    with pytest.raises(MemoryError, match="A of 100000000 documents x 1024 topics"):
        _dense_engine(1024)._check_memory(huge)


@pytest.mark.gpu
def test_gpu_estimator_dense_reaches_sparse_held_out_likelihood():
    train, test = _kjv_split()
    k = 20
    scores = {}
    for algorithm in ("dense", "sparse"):
        model = GPULatentDirichletAllocation(
            n_components=k, max_iter=100, algorithm=algorithm, device="cuda", random_state=0
        ).fit(train)
        assert model.algorithm_ == algorithm and model.device_ == "cuda:0"
        scores[algorithm] = document_completion(
            test, model.components_, 1.0 / k, random_state=0
        ).per_token
    assert abs(scores["dense"] - scores["sparse"]) <= 0.02, scores


@pytest.mark.gpu
@pytest.mark.parametrize("learning_method", ["batch", "online"])
def test_gpu_estimator_dense_same_seed_same_model(learning_method):
    X = _kjv()[:300]
    kw = dict(n_components=16, algorithm="dense", device="cuda", max_iter=5,
              learning_method=learning_method, batch_size=100, random_state=7)
    a = GPULatentDirichletAllocation(**kw).fit(X)
    b = GPULatentDirichletAllocation(**kw).fit(X)
    assert a.algorithm_ == "dense"
    np.testing.assert_array_equal(a.components_, b.components_)
    np.testing.assert_array_equal(a.transform(X[:10]), b.transform(X[:10]))
    # partial_fit and transform keep going through the dense engine's methods.
    a.partial_fit(X[:50])
    assert np.isfinite(a.components_).all() and a.algorithm_ == "dense"
