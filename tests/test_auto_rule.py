"""What ``algorithm='auto'`` picks (``backends/auto_rule.py``): the dense GPU engine for batch
fits on one GPU at small K, the registry's order everywhere else."""

import numpy as np
import pytest

from sklearn_gpulda import GPULatentDirichletAllocation
from sklearn_gpulda._runtime.device import Device
from sklearn_gpulda.backends import auto_rule
from sklearn_gpulda.backends.auto_rule import FitShape, auto_picks_dense, dense_topic_bound

GPU = dict(device_kind="cuda", n_gpus=1, n_tokens=3e6)


@pytest.mark.parametrize("k", [1, 16, 64, 128])
def test_batch_fit_on_one_gpu_at_small_k_is_dense(k):
    assert auto_picks_dense(FitShape(n_topics=k, **GPU))


@pytest.mark.parametrize("n_tokens, bound", [
    (0, 0), (11_634, 0), (131_071, 0), (131_072, 128), (308_000, 128), (25e6, 128)])
def test_the_bound_on_k_grows_with_the_corpus(n_tokens, bound):
    # Measured: dense wins from the KJV chapters' first 400 (133 k tokens) to the NYTimes shape
    # at K <= 128; smaller corpora stay on the sparse engine, which replays CUDA graphs there.
    assert dense_topic_bound(n_tokens) == bound
    assert auto_picks_dense(FitShape(n_topics=max(bound, 1), **{**GPU, "n_tokens": n_tokens})) \
        == (bound > 0)


@pytest.mark.parametrize("change, failed", [
    (dict(n_topics=129), "small K for the corpus"),
    (dict(n_tokens=100_000), "small K for the corpus"),
    (dict(memory_budget=True), "no memory budget"),
    (dict(row_blocks=True), "one matrix"),
    (dict(device_kind="cpu", n_gpus=0), "on a GPU"),
    (dict(n_gpus=2), "one GPU"),
    (dict(method="online"), "batch learning"),
    (dict(method="partial"), "batch learning"),
    (dict(word_topic_storage="hybrid"), "dense word-topic storage"),
])
def test_each_condition_alone_keeps_auto_off_dense(change, failed):
    shape = FitShape(**{"n_topics": 16, **GPU, **change})
    assert not auto_picks_dense(shape)
    assert auto_rule.failed_conditions(shape) == [failed]


def test_the_bounds_are_the_one_table(monkeypatch):
    shape = FitShape(n_topics=256, **GPU)
    assert not auto_picks_dense(shape)
    monkeypatch.setattr(auto_rule, "AUTO_DENSE_BOUNDS", ((1_000_000, 256),))
    assert auto_picks_dense(shape)


def _resolved(device, n_tokens=3e6, row_blocks=False, **params):
    lda = GPULatentDirichletAllocation(**{"n_components": 16, **params})
    return lda._auto_algorithm(device, lda.learning_method, n_tokens, row_blocks)


def test_estimator_asks_the_rule_with_its_parameters():
    gpu = Device("cuda", (0,))
    assert _resolved(gpu) == "dense"
    assert _resolved(gpu, n_tokens=1e5) == "auto"
    assert _resolved(gpu, row_blocks=True) == "auto"
    assert _resolved(gpu, max_device_memory="8GB") == "auto"
    assert _resolved(gpu, word_topic_storage="dense", topic_word_prior=0.01) == "dense"
    assert _resolved(gpu, n_components=129) == "auto"
    assert _resolved(gpu, learning_method="online") == "auto"
    assert _resolved(gpu, word_topic_storage="hybrid") == "auto"
    # A matrix prior (seeded topics) samples on the dense engine too.
    assert _resolved(gpu, topic_word_prior=np.full((16, 30), 0.1)) == "dense"
    assert _resolved(Device("cuda", (0, 1))) == "auto"
    assert _resolved(Device("cpu")) == "auto"


def test_cpu_auto_fit_stays_on_the_sparse_rule():
    from sklearn_gpulda.datasets import load_kjv_chapters

    X = load_kjv_chapters().data[:60]
    lda = GPULatentDirichletAllocation(n_components=8, max_iter=2, device="cpu",
                                       random_state=0).fit(X)
    assert lda.algorithm_ == "sparse"


@pytest.mark.gpu
def test_gpu_auto_fit_at_small_k_is_the_dense_fit(monkeypatch):
    # 'auto' at K = 16 is the dense engine's model, bit for bit, and the fitted model works on:
    # transform, partial_fit through the dense engine, pickling. (The bounds are lowered: the
    # test's corpus is smaller than the measured ones.)
    import pickle

    from sklearn_gpulda.datasets import load_kjv_chapters

    monkeypatch.setattr(auto_rule, "AUTO_DENSE_BOUNDS", ((0, 64),))
    X = load_kjv_chapters().data[:400]
    kw = dict(n_components=16, max_iter=20, random_state=0, device="cuda")
    auto = GPULatentDirichletAllocation(**kw).fit(X)
    dense = GPULatentDirichletAllocation(algorithm="dense", **kw).fit(X)
    assert auto.algorithm_ == "dense"
    np.testing.assert_array_equal(auto.components_, dense.components_)
    np.testing.assert_array_equal(auto.doc_topic_prior_, dense.doc_topic_prior_)
    np.testing.assert_array_equal(auto.transform(X[:20]), dense.transform(X[:20]))
    again = pickle.loads(pickle.dumps(auto))
    np.testing.assert_array_equal(again.transform(X[:20]), auto.transform(X[:20]))
    auto.partial_fit(X[:50])
    assert auto.algorithm_ == "dense" and np.isfinite(auto.components_).all()
    big = GPULatentDirichletAllocation(**{**kw, "n_components": 65})
    assert big.fit(X).algorithm_ == "sparse"


@pytest.mark.gpu
def test_gpu_auto_falls_back_to_sparse_where_dense_does_not_fit(monkeypatch):
    # Where the dense chain would not fit the GPU, 'auto' fits with the sparse engine (which
    # streams) and the same seed: the explicit sparse fit's model.
    from sklearn_gpulda.backends.cuda.dense.sampler import CudaDenseSampler
    from sklearn_gpulda.datasets import load_kjv_chapters

    monkeypatch.setattr(auto_rule, "AUTO_DENSE_BOUNDS", ((0, 64),))
    monkeypatch.setattr(CudaDenseSampler, "fits", lambda self, corpus: False)
    X = load_kjv_chapters().data[:300]
    kw = dict(n_components=8, max_iter=15, random_state=0, device="cuda")
    auto = GPULatentDirichletAllocation(**kw).fit(X)
    sparse = GPULatentDirichletAllocation(algorithm="sparse", **kw).fit(X)
    assert auto.algorithm_ == "sparse"
    np.testing.assert_array_equal(auto.components_, sparse.components_)
