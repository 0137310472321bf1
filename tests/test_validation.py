"""CuPy and cupyx sparse input: validated and tokenised on the device, same model as host input."""

import numpy as np
import pytest
import scipy.sparse as sp

import sklearn_gpulda._input.corpus as corpus_module
from sklearn_gpulda import GPULatentDirichletAllocation
from sklearn_gpulda._input.corpus import tokens
from sklearn_gpulda.datasets import load_kjv_chapters

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def kjv():
    return load_kjv_chapters().data.astype(np.float64)


def _device_sparse(X):
    import cupyx.scipy.sparse as csp

    return csp.csr_matrix(X)


def _no_token_arrays(monkeypatch):
    """Fail the test if anything expands the counts into per-token arrays (host or device):
    the sparse CUDA engine lays its tokens out from the counts."""

    def refuse(*args):
        raise AssertionError("the counts were expanded into token arrays")

    monkeypatch.setattr(corpus_module, "expand_counts", refuse)


@pytest.mark.parametrize("fractional", [False, True])
def test_device_tokens_equal_host_tokens(kjv, fractional):
    X = kjv[:200].copy()
    if fractional:
        X.data = X.data * 0.75
    host = tokens(X)
    dev = tokens(_device_sparse(X))
    assert dev.on_device and not host.on_device
    np.testing.assert_array_equal(dev.doc_ptr, host.doc_ptr)
    np.testing.assert_array_equal(dev.doc.get(), host.doc)
    np.testing.assert_array_equal(dev.word.get(), host.word)
    np.testing.assert_array_equal(dev.doc_lengths(), host.doc_lengths())
    np.testing.assert_array_equal(dev.word_frequencies(), host.word_frequencies())
    if fractional:
        np.testing.assert_array_equal(dev.weight.get(), host.weight)
    else:
        assert dev.weight is None and host.weight is None


@pytest.mark.parametrize("algorithm", ["sparse", "dense"])
def test_fit_on_device_input_equals_fit_on_host_input(kjv, monkeypatch, algorithm):
    X = kjv[:400]
    if algorithm == "sparse":  # the dense engine reads per-token arrays
        _no_token_arrays(monkeypatch)
    kw = dict(max_iter=10, random_state=3, device="cuda", algorithm=algorithm)
    host = GPULatentDirichletAllocation(12, **kw).fit(X)
    dev = GPULatentDirichletAllocation(12, **kw).fit(_device_sparse(X))
    np.testing.assert_array_equal(dev.components_, host.components_)
    assert dev.n_features_in_ == X.shape[1]
    assert isinstance(dev.components_, np.ndarray)


def test_transform_and_score_on_device_input(kjv):
    import cupy

    model = GPULatentDirichletAllocation(8, max_iter=10, random_state=0,
                                         device="cuda").fit(kjv[:300])
    X = kjv[300:360]
    theta_host = model.transform(X)
    np.testing.assert_allclose(model.transform(_device_sparse(X)), theta_host, rtol=1e-12,
                               atol=1e-14)
    np.testing.assert_allclose(model.transform(cupy.asarray(X.toarray())), theta_host, rtol=1e-12,
                               atol=1e-14)
    assert model.score(_device_sparse(X)) == pytest.approx(model.score(X), rel=1e-12)
    assert model.perplexity(_device_sparse(X)) == pytest.approx(model.perplexity(X), rel=1e-12)


def test_online_fit_on_device_input(kjv, monkeypatch):
    X = kjv[:300]
    host = GPULatentDirichletAllocation(
        6, learning_method="online", max_iter=2, batch_size=100, random_state=1, device="cuda"
    ).fit(X)
    _no_token_arrays(monkeypatch)
    dev = GPULatentDirichletAllocation(
        6, learning_method="online", max_iter=2, batch_size=100, random_state=1, device="cuda"
    ).fit(_device_sparse(X))
    np.testing.assert_allclose(dev.components_, host.components_, rtol=1e-10)


@pytest.mark.parametrize("value, match",
                         [(-1.0, "Negative values"), (np.nan, "NaN"), (np.inf, "infinity")])
def test_bad_device_counts_are_rejected(kjv, value, match):
    import cupy

    X = cupy.asarray(kjv[:20].toarray())
    X[3, 5] = value
    with pytest.raises(ValueError, match=match):
        GPULatentDirichletAllocation(3, device="cuda").fit(X)


def test_device_input_with_wrong_columns_leaves_model_unchanged(kjv):
    model = GPULatentDirichletAllocation(4, max_iter=3, random_state=0,
                                         device="cuda").fit(kjv[:100])
    before = model.components_.copy()
    with pytest.raises(ValueError, match="X has 100 features"):
        model.transform(_device_sparse(kjv[:5, :100]))
    np.testing.assert_array_equal(model.components_, before)


def test_device_input_on_cpu_engine_is_copied_to_the_host(kjv):
    X = kjv[:100]
    host = GPULatentDirichletAllocation(4, max_iter=3, random_state=0, device="cpu").fit(X)
    dev = GPULatentDirichletAllocation(4, max_iter=3, random_state=0,
                                       device="cpu").fit(_device_sparse(X))
    np.testing.assert_array_equal(dev.components_, host.components_)
    assert sp.issparse(X)


def test_host_counts_fit_as_device_counts(kjv):
    # A batch fit on one GPU checks host counts on the host (no kernel to compile there) and
    # uploads what the layout reads; the model is the one device input gives.
    X = sp.csr_matrix(kjv[:300].astype(np.int64))
    dev = GPULatentDirichletAllocation(9, max_iter=8, random_state=5, device="cuda").fit(
        _device_sparse(X.astype(np.float64)))
    host = GPULatentDirichletAllocation(9, max_iter=8, random_state=5, device="cuda").fit(X)
    np.testing.assert_array_equal(host.components_, dev.components_)
    assert host.components_.dtype == np.float64
    bad = X.astype(np.float64)
    bad.data[7] = -1.0
    with pytest.raises(ValueError, match="Negative values in data passed to"):
        GPULatentDirichletAllocation(9, max_iter=2, device="cuda").fit(bad)
    bad.data[7] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        GPULatentDirichletAllocation(9, max_iter=2, device="cuda").fit(bad)


def test_float32_counts_give_float32_components_of_the_same_model(kjv):
    X = kjv[:300]
    wide = GPULatentDirichletAllocation(9, max_iter=8, random_state=5, device="cuda").fit(X)
    narrow = GPULatentDirichletAllocation(9, max_iter=8, random_state=5, device="cuda").fit(
        X.astype(np.float32))
    assert narrow.components_.dtype == np.float32
    np.testing.assert_array_equal(narrow.components_, wide.components_.astype(np.float32))
