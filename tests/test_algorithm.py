"""The ``algorithm`` parameter: the dense draw rule as a backend, the 'auto' rule, the estimator.

CPU tests cover the NumPy backend's dense rule, the registry's choice between the rules and the
estimator on the CPU; tests marked ``gpu`` pin :class:`CudaDenseSampler` to
``NumpySampler(rule='dense')`` and to the sparse CUDA backend.
"""

import functools

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.utils._param_validation import InvalidParameterError
from _engine_checks import (
    check_counts_every_sweep, check_held_batches_are_the_batches_loaded_alone,
    check_online_step_over_the_batch_words, check_same_seed_same_model,
    check_two_word_conditional, check_weighted_counts, initialised)

from sklearn_gpulda import GPULatentDirichletAllocation
from sklearn_gpulda._fitting import online as _fit_online
from sklearn_gpulda._fitting.plan import Online, Plan
from sklearn_gpulda.backends import random as _random
from sklearn_gpulda._input.corpus import tokens
from sklearn_gpulda._runtime.device import CPU, Device, to_host
from sklearn_gpulda.backends.priors import Prior
from sklearn_gpulda.backends import BACKENDS, choose_backend
from sklearn_gpulda.backends.numpy import NumpySampler
from sklearn_gpulda.backends.numpy.dense_rule import draw_topics_dense
from sklearn_gpulda.backends.numpy.sparse_rule import draw_topics
from sklearn_gpulda.datasets import load_kjv_chapters
from sklearn_gpulda.metrics import document_completion

GPU = Device("cuda", (0,))


def _numpy(n_topics, rule="sparse", alpha=None):
    return NumpySampler(n_topics, ALPHA if alpha is None else alpha, BETA, SEED, CPU, rule=rule)


def choose_algorithm(algorithm, n_topics, device):
    """The resolved algorithm of the registry's choice, as the estimator records it."""
    device = CPU if device == "cpu" else GPU
    return choose_backend(algorithm, n_topics, device).algorithm


def _statistics(sampler, corpus, components, n_sweeps, iteration):
    plan = Plan(backend=None, device=None, n_topics=sampler.n_topics, seed=SEED,
                alpha=Prior(ALPHA, False), beta=Prior(BETA, False),
                online=Online(n_batch_sweeps=n_sweeps))
    # A GPU chain's statistics stay on its device (online learning blends them there).
    sampler.load(corpus)
    return to_host(_fit_online._batch_statistics(plan, sampler, components, iteration,
                                                 False)[0])


ALPHA, BETA, SEED = 0.1, 0.01, 4321


@functools.lru_cache(maxsize=1)
def _kjv():
    return load_kjv_chapters().data


@functools.lru_cache(maxsize=1)
def _kjv_split():
    X = _kjv()
    order = np.random.default_rng(0).permutation(X.shape[0])
    return X[np.sort(order[:1070])], X[np.sort(order[1070:])]


# -- the NumPy backend's dense rule ---------------------------------------------------------------
@pytest.mark.parametrize("n_topics", [16, 33, 100])
def test_numpy_dense_sweep_matches_exact_distribution(n_topics):
    # Every token of a word with the same current topic draws from the same
    # p(k) ∝ (A[k] - [k = z] + alpha) Bhat'[v, k], the token's own count out of A, B and n.
    check_two_word_conditional(lambda n: _numpy(n_topics, "dense"), n_topics, ALPHA, BETA)


def test_numpy_dense_sweep_uses_the_sparse_engines_uniforms():
    corpus = tokens(_kjv()[:200])
    k = 24
    dense = initialised(_numpy(k, "dense"), corpus)
    sparse = initialised(_numpy(k), corpus)
    np.testing.assert_array_equal(dense.topics(), sparse.topics())  # same stream 0
    a = dense.doc_topic_counts().astype(np.float32)
    tables = dense._tables  # the sweep replaces it
    z = dense.topics()
    t = np.arange(corpus.n_tokens)
    u = _random.token_uniform(SEED, 1, _random.STREAM_SAMPLE, t)
    dense.sweep(1)
    sparse.sweep(1)
    np.testing.assert_array_equal(
        dense.topics(),
        draw_topics_dense(corpus.doc, corpus.word, z, None, u, a, tables.bhat, ALPHA,
                          tables.word_side),
    )
    # The sparse rule is untouched by the other.
    np.testing.assert_array_equal(
        sparse.topics(), draw_topics(corpus.doc, corpus.word, z, None, u, a, tables)
    )


@pytest.mark.parametrize("first", [True, False])
def test_numpy_dense_batch_statistics(first):
    corpus = tokens(_kjv()[:150])
    k = 12
    components = (None if first
                  else np.random.default_rng(5).gamma(1.0, size=(k, corpus.n_words)) + 0.1)
    stats_dense = _statistics(_numpy(k, "dense"), corpus, components, 4, 3)
    assert stats_dense.shape == (k, corpus.n_words)
    assert stats_dense.sum() == pytest.approx(corpus.n_tokens, rel=1e-12)
    again = _statistics(_numpy(k, "dense"), corpus, components, 4, 3)
    np.testing.assert_array_equal(stats_dense, again)


def test_numpy_engine_rejects_unknown_rule():
    with pytest.raises(ValueError, match="rule must be one of"):
        NumpySampler(4, ALPHA, BETA, SEED, CPU, rule="auto")


# -- the choice -----------------------------------------------------------------------------------
def test_auto_rule_follows_the_measured_crossover(monkeypatch):
    import dataclasses

    import sklearn_gpulda.backends as backends

    gpu = "cuda:0"
    # Measured: the sparse engine was faster over whole iterations at every K in 16..1,024.
    dense = next(b for b in BACKENDS if b.name == "cuda-dense")
    assert dense.auto_max_topics == 0
    for k in (1, 16, 48, 1024, 10_000):
        assert choose_algorithm("auto", k, gpu) == "sparse"
    # The rule itself, at a crossover of 48.
    moved = tuple(dataclasses.replace(b, auto_max_topics=48) if b is dense else b
                  for b in BACKENDS)
    monkeypatch.setattr(backends, "BACKENDS", moved)
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
def test_registry_makes_the_cpu_samplers(algorithm):
    eng = choose_backend(algorithm, 7, CPU).make(7, ALPHA, BETA, SEED, CPU)
    assert isinstance(eng, NumpySampler) and eng.rule == algorithm
    assert choose_backend("auto", 7, CPU).make(7, ALPHA, BETA, SEED, CPU).rule == "sparse"


def test_several_gpus_take_the_sparse_backend_only():
    two = Device("cuda", (0, 1))
    with pytest.raises(ValueError, match="names 2 GPUs, but algorithm='dense' trains on one"):
        choose_backend("dense", 8, two)
    for algorithm in ("sparse", "auto"):
        backend = choose_backend(algorithm, 8, two)
        assert backend.name == "cuda-sparse"
        assert backend.sampler_class(2).__name__ == "MultiGpuSampler"
        assert backend.sampler_class(1).__name__ == "CudaSparseSampler"


@pytest.mark.parametrize("module", ["sklearn_gpulda.backends.cuda.multi_gpu.sampler",
                                    "sklearn_gpulda.backends.cuda.multi_gpu.all_reduce"])
def test_imports_without_dask(module):
    # Several GPUs of one host need no Dask: the modules import with Dask's scheduler absent.
    import subprocess
    import sys

    code = ("import sys; sys.modules['distributed'] = None; sys.modules['dask'] = None; "
            f"import {module}")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_estimator_refuses_a_gpu_named_twice():
    X = sp.csr_matrix(np.ones((3, 4)))
    for device in ("cuda:0,0", [1, 1]):
        with pytest.raises(InvalidParameterError, match="distinct GPU numbers"):
            GPULatentDirichletAllocation(device=device).fit(X)


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
    real = est.choose_backend

    def spy(algorithm, n_topics, device):
        seen.append(algorithm)
        return real(algorithm, n_topics, device)

    monkeypatch.setattr(est, "choose_backend", spy)
    model.set_params(algorithm="sparse")  # a fitted model keeps its sampler
    model.partial_fit(X[100:])
    assert seen == ["dense"] and model.algorithm_ == "dense"
    model.fit(X)  # a new fit resolves the parameter again
    assert model.algorithm_ == "sparse" and seen[-1] == "sparse"


# -- the GPU engine ------------------------------------------------------------------------------
def _dense_engine(n_topics, alpha=ALPHA, **kw):
    from sklearn_gpulda.backends.cuda.dense.sampler import CudaDenseSampler

    return CudaDenseSampler(n_topics, alpha, BETA, SEED, GPU, **kw)


def _sparse_engine(n_topics):
    from sklearn_gpulda.backends.cuda.sparse.sampler import CudaSparseSampler

    return CudaSparseSampler(n_topics, ALPHA, BETA, SEED, GPU)


@pytest.mark.gpu
@pytest.mark.parametrize("n_topics", [16, 33, 256])
@pytest.mark.parametrize("variant", ["transpose", "butterfly", "plain"])
def test_gpu_sweep_agrees_with_numpy_dense_engine(variant, n_topics):
    corpus = tokens(_kjv())
    alpha = np.random.default_rng(n_topics).gamma(0.5, 0.2, n_topics) + 1e-3
    ref = initialised(_numpy(n_topics, "dense", alpha), corpus)
    for it in (1, 2):
        ref.sweep(it)
    eng = _dense_engine(n_topics, alpha, variant=variant)
    eng.load(corpus)
    eng.set_topics(ref.topics())
    np.testing.assert_array_equal(eng.doc_topic_counts(), ref.doc_topic_counts())
    np.testing.assert_array_equal(eng.word_topic_counts(), ref.word_topic_counts())
    assert eng.log_likelihood() == pytest.approx(ref.log_likelihood(), rel=1e-6)
    ref.sweep(3)
    eng.sweep(3)
    agree = np.mean(eng.topics() == ref.topics())
    assert agree >= 0.999, (variant, n_topics, agree)
    if variant != "butterfly":  # the sequential kernels follow the oracle bit for bit
        np.testing.assert_array_equal(eng.topics(), ref.topics())
    eng.release()


@pytest.mark.gpu
@pytest.mark.parametrize("variant", ["transpose", "butterfly"])
def test_gpu_initial_topics_equal_numpy_engine(variant):
    corpus = tokens(_kjv()[:300])
    eng = initialised(_dense_engine(37, variant=variant), corpus)
    ref = initialised(_numpy(37, "dense"), corpus)
    np.testing.assert_array_equal(eng.topics(), ref.topics())
    np.testing.assert_array_equal(eng.doc_topic_counts(), ref.doc_topic_counts())
    eng.release()


@pytest.mark.gpu
def test_gpu_count_invariants_every_iteration():
    # A few empty documents are kept: the master index skips them.
    X = sp.vstack([_kjv()[:200], sp.csr_matrix((3, _kjv().shape[1]), dtype=np.int64)]).tocsr()
    corpus = tokens(X)
    k = 23
    eng = initialised(_dense_engine(k), corpus)
    check_counts_every_sweep(eng, corpus, k)
    eng.release()


@pytest.mark.gpu
def test_gpu_weighted_tokens():
    X = _kjv()[:120].astype(np.float64)
    X.data = X.data * np.random.default_rng(0).uniform(0.3, 1.0, size=X.data.size)
    corpus = tokens(X)
    k = 9
    eng = _dense_engine(k)
    check_weighted_counts(eng, corpus, k, _numpy(k, "dense"), atol_a=1e-4)
    eng.release()


@pytest.mark.gpu
def test_gpu_same_seed_same_model():
    corpus = tokens(_kjv()[:400])
    check_same_seed_same_model(lambda: _dense_engine(31), corpus)


@pytest.mark.gpu
def test_gpu_histograms_equal_numpy_engine():
    corpus = tokens(_kjv()[:300])
    k = 21
    ref = initialised(_numpy(k, "dense"), corpus)
    ref.sweep(1)
    eng = _dense_engine(k)
    eng.load(corpus)
    eng.set_topics(ref.topics())
    for got, want in zip(eng.doc_topic_histogram(), ref.doc_topic_histogram()):
        np.testing.assert_array_equal(got, want)
    for got, want in zip(eng.word_topic_histogram(), ref.word_topic_histogram()):
        np.testing.assert_array_equal(got, want)
    eng.release()


@pytest.mark.gpu
@pytest.mark.parametrize("first", [True, False])
def test_gpu_batch_statistics(first):
    corpus = tokens(_kjv()[:300])
    k = 10
    components = (None if first
                  else np.random.default_rng(2).gamma(1.0, size=(k, corpus.n_words)) + 0.1)
    got = _statistics(_dense_engine(k), corpus, components, 4, 3)
    assert got.shape == (k, corpus.n_words)
    assert got.sum() == pytest.approx(corpus.n_tokens, rel=1e-9)
    ref = _statistics(_numpy(k, "dense"), corpus, components, 4, 3)
    # Same uniforms and the same rule: only draws at rounding boundaries (and what follows from
    # them) may differ.
    assert np.abs(got - ref).sum() <= 0.02 * corpus.n_tokens


@pytest.mark.gpu
def test_gpu_engine_choice_and_limits():
    from sklearn_gpulda.backends.cuda.dense.sampler import CudaDenseSampler
    from sklearn_gpulda.backends.cuda.sparse.sampler import CudaSparseSampler

    assert isinstance(choose_backend("dense", 8, GPU).make(8, ALPHA, BETA, SEED, GPU),
                      CudaDenseSampler)
    assert isinstance(choose_backend("sparse", 8, GPU).make(8, ALPHA, BETA, SEED, GPU),
                      CudaSparseSampler)
    with pytest.raises(ValueError, match="n_topics <= 1024"):
        _dense_engine(1025)
    with pytest.raises(ValueError, match="variant"):
        _dense_engine(8, variant="fast")


@pytest.mark.gpu
def test_gpu_memory_is_checked_before_allocating():
    from types import SimpleNamespace

    huge = SimpleNamespace(n_tokens=10**9, n_docs=10**8, n_words=10**5, weighted=False)
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


@pytest.mark.gpu
def test_gpu_dense_online_step_over_the_batch_words_is_the_whole_vocabulary_step():
    X = _kjv()
    plan = Plan(backend=None, device=None, n_topics=24, seed=SEED, alpha=Prior(ALPHA, False),
                beta=Prior(BETA, False), online=Online(n_batch_sweeps=4))
    batches = [slice(0, 30), slice(30, 45), slice(200, 230), slice(30, 45)]
    check_online_step_over_the_batch_words(plan, _dense_engine(24), X, batches,
                                           float(X.shape[0]))


@pytest.mark.gpu
def test_gpu_dense_held_batches_are_the_batches_loaded_alone():
    X = _kjv()
    plan = Plan(backend=None, device=None, n_topics=24, seed=SEED, alpha=Prior(ALPHA, False),
                beta=Prior(BETA, False), online=Online(n_batch_sweeps=4))
    check_held_batches_are_the_batches_loaded_alone(
        plan, _dense_engine(24), _dense_engine(24), X, [(0, 30), (30, 45), (45, 90)],
        float(X.shape[0]))
