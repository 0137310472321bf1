"""The backend registry: how ``algorithm`` and ``device`` pick a sampler, and adding one."""

import dataclasses

import numpy as np
import pytest
from sklearn.utils._param_validation import InvalidParameterError

import sklearn_gpulda.backends as backends
from sklearn_gpulda import GPULatentDirichletAllocation
from sklearn_gpulda._runtime.device import CPU, Device
from sklearn_gpulda.backends import Backend, choose_backend
from sklearn_gpulda.backends.base import Sampler
from sklearn_gpulda.datasets import load_kjv_chapters
from sklearn_gpulda.metrics import document_completion

TOY = Backend("numpy-float64", "float64", "cpu", "_toy_backend:Float64Sampler",
              auto_max_topics=0)


def test_every_entry_names_a_sampler_class_and_a_unique_name():
    names = [b.name for b in backends.BACKENDS]
    assert len(set(names)) == len(names)
    for b in backends.BACKENDS:
        if b.device_kind == "cpu":  # the CUDA classes import CuPy
            assert issubclass(b.sampler_class(), Sampler)


def test_auto_reads_the_registry_in_order():
    assert choose_backend("auto", 50, CPU).name == "numpy-sparse"
    assert choose_backend("auto", 50, Device("cuda", (0,))).name == "cuda-sparse"
    assert choose_backend("auto", 70_000, CPU).name == "numpy-sparse"
    assert choose_backend("auto", 65_536, Device("cuda", (0,))).name == "cuda-sparse"
    with pytest.raises(ValueError, match="no backend on cuda:0 supports n_components=70000"):
        choose_backend("auto", 70_000, Device("cuda", (0,)))


def test_a_new_backend_is_one_registry_entry(monkeypatch):
    monkeypatch.setattr(backends, "BACKENDS", backends.BACKENDS + (TOY,))
    X = load_kjv_chapters().data
    train, test = X[:300], X[300:360]
    toy = GPULatentDirichletAllocation(n_components=6, algorithm="float64", max_iter=30,
                                       random_state=0, device="cpu").fit(train)
    assert toy.algorithm_ == "float64"
    ref = GPULatentDirichletAllocation(n_components=6, max_iter=30, random_state=0,
                                       device="cpu").fit(train)
    # The same chain up to float rounding: a model as good as the reference sampler's.
    score = {m: document_completion(test, m.components_, m.doc_topic_prior_, random_state=0)
             for m in (toy, ref)}
    assert abs(score[toy].per_token - score[ref].per_token) < 0.02
    # 'auto' does not pick it (auto_max_topics=0), and other devices do not have it.
    assert GPULatentDirichletAllocation(n_components=6, max_iter=1, device="cpu").fit(
        train).algorithm_ == "sparse"
    with pytest.raises(ValueError, match="algorithm must be one of"):
        choose_backend("float64", 6, Device("cuda", (0,)))


def test_unknown_algorithm_is_an_invalid_parameter():
    with pytest.raises(InvalidParameterError,
                       match="'algorithm' parameter .* 'dense', 'minibatch', 'sparse'"):
        GPULatentDirichletAllocation(algorithm="gibbs", device="cpu").fit(
            load_kjv_chapters().data[:10])


def test_topic_limit_comes_from_the_entry(monkeypatch):
    small = dataclasses.replace(TOY, max_topics=8, why_max_topics="a toy limit")
    monkeypatch.setattr(backends, "BACKENDS", backends.BACKENDS + (small,))
    with pytest.raises(ValueError, match=r"at most 8 topics \(a toy limit\)"):
        choose_backend("float64", 9, CPU)


def test_samplers_must_implement_the_whole_protocol():
    class Partial(Sampler):
        def load(self, corpus):
            pass

    with pytest.raises(TypeError, match="abstract"):
        Partial(4, 0.1, 0.1, 0, CPU)
    assert np.ndim(0.1) == 0


def test_an_entry_names_the_fit_settings_its_sampler_takes():
    settings = dict(n_jobs=None, max_device_memory=1 << 30, batch_tokens=None,
                    word_topic_storage="hybrid", averaging="none")
    sparse = choose_backend("sparse", 8, Device("cuda", (0,)))
    assert sparse.sampler_options(settings, Device("cuda", (0,))) == dict(
        max_device_memory=1 << 30, word_topic_storage="hybrid", averaging="none")
    # The chain spread over several GPUs stores B dense, and plans no room for averaging.
    assert sparse.sampler_options(settings, Device("cuda", (0, 1))) == dict(
        max_device_memory=1 << 30)
    minibatch = choose_backend("minibatch", 8, CPU)
    assert minibatch.sampler_options({**settings, "n_jobs": 2, "batch_tokens": 500}, CPU) == dict(
        n_jobs=2, batch_tokens=500)
    # None leaves the sampler's own default; an entry that names nothing is given nothing.
    assert minibatch.sampler_options(settings, CPU) == {}
    assert TOY.sampler_options({**settings, "n_jobs": 2}, CPU) == {}


def test_hybrid_storage_is_refused_where_the_sampler_does_not_take_it():
    X = load_kjv_chapters().data[:20]
    expected = ("word_topic_storage='hybrid' is a storage of the sparse engine on one GPU; this "
                "fit runs 'numpy-sparse' on cpu: use 'auto' or 'dense'")
    for method in ("fit", "partial_fit"):
        model = GPULatentDirichletAllocation(n_components=4, max_iter=1, device="cpu",
                                             word_topic_storage="hybrid")
        with pytest.raises(ValueError) as raised:
            getattr(model, method)(X)
        assert str(raised.value) == expected
