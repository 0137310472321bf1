"""The fit loop as a transaction: a fit that raises leaves the estimator exactly as it was."""

import os
import pickle
import signal
import threading
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.exceptions import NotFittedError

from sklearn_gpulda import GPULatentDirichletAllocation
from sklearn_gpulda.datasets import load_kjv_chapters


@pytest.fixture(scope="module")
def kjv():
    return load_kjv_chapters().data


def _fitted(kjv, **kw):
    kw = {"n_components": 5, "max_iter": 5, "random_state": 0, "device": "cpu", **kw}
    return GPULatentDirichletAllocation(**kw).fit(kjv[:150])


def _interrupt_after(seconds):
    """Send this process SIGINT after ``seconds``: Python raises KeyboardInterrupt in the main
    thread, as Ctrl-C does."""
    timer = threading.Timer(seconds, os.kill, args=(os.getpid(), signal.SIGINT))
    timer.start()
    return timer


@pytest.mark.parametrize("method", ["fit", "partial_fit"])
def test_refit_with_bad_input_leaves_the_pickle_unchanged(kjv, method):
    model = _fitted(kjv, doc_topic_prior="auto")
    model.exp_dirichlet_component_  # a cached derived value is part of the state too
    before = pickle.dumps(model)
    X = kjv[:30].toarray().astype(np.float64)
    X[4, 7] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        getattr(model, method)(X)
    assert pickle.dumps(model) == before


def test_refit_with_new_columns_that_fails_keeps_the_old_feature_count(kjv):
    model = _fitted(kjv)
    before = pickle.dumps(model)
    X = sp.csr_matrix(np.full((3, 40), -1.0))  # new width, then rejected as negative
    with pytest.raises(ValueError, match="Negative values"):
        model.fit(X)
    assert model.n_features_in_ == kjv.shape[1]
    assert pickle.dumps(model) == before


def test_refit_out_of_memory_leaves_the_pickle_unchanged(kjv):
    model = _fitted(kjv)
    model.set_params(n_components=10**8)  # the CPU engine's memory check refuses this
    before = pickle.dumps(model)
    with pytest.raises(MemoryError, match="n_components=100000000"):
        model.fit(kjv[:50])
    assert pickle.dumps(model) == before
    assert model.components_.shape[0] == 5 and model.doc_topic_prior_.shape == (5,)


def test_interrupted_refit_leaves_the_pickle_unchanged(kjv):
    model = _fitted(kjv)
    model.set_params(n_components=30, max_iter=100_000, random_state=7)
    before = pickle.dumps(model)
    timer = _interrupt_after(1.0)
    try:
        with pytest.raises(KeyboardInterrupt):
            model.fit(kjv)
    finally:
        timer.cancel()
    assert pickle.dumps(model) == before
    assert model.components_.shape[0] == 5 and model.n_iter_ == 5


def test_interrupted_first_fit_leaves_the_model_unfitted(kjv):
    model = GPULatentDirichletAllocation(n_components=30, max_iter=100_000, device="cpu")
    timer = _interrupt_after(1.0)
    try:
        with pytest.raises(KeyboardInterrupt):
            model.fit(kjv)
    finally:
        timer.cancel()
    assert not any(k.endswith("_") and not k.startswith("__") for k in vars(model))
    with pytest.raises(NotFittedError):
        model.transform(kjv[:3])


def _warned_here(call, match):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call()
    ours = [w for w in caught if match in str(w.message)]
    assert len(ours) == 1, [(w.filename, w.message) for w in caught]
    return ours[0].filename == __file__


def test_warnings_point_at_the_caller(kjv, monkeypatch):
    import sklearn_gpulda._runtime.device as device

    empty = sp.csr_matrix((4, 6))
    model = GPULatentDirichletAllocation(n_components=2, max_iter=2, device="cpu")
    assert _warned_here(lambda: model.fit(empty), "holds no tokens")
    assert _warned_here(lambda: model.partial_fit(empty), "holds no tokens")
    fitted = _fitted(kjv)
    fitted.set_params(device="cuda")
    monkeypatch.setattr(device, "import_cupy", lambda: (None, "no GPU in this test"))
    for method in ("transform", "score", "perplexity"):
        assert _warned_here(lambda: getattr(fitted, method)(kjv[:3]), "not usable here")


def test_all_zero_input_warns_and_keeps_the_prior(kjv):
    with pytest.warns(RuntimeWarning, match="holds no tokens"):
        model = GPULatentDirichletAllocation(n_components=3, max_iter=2, device="cpu").fit(
            np.zeros((5, 8)))
    np.testing.assert_allclose(model.components_, 1 / 3)
    assert np.isnan(model.bound_)
