"""GPULatentDirichletAllocation: behaviour a scikit-learn user relies on, on real and planted
data."""

import io
import pickle
from contextlib import redirect_stdout
from pathlib import Path

import joblib
import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import linear_sum_assignment
from sklearn.decomposition import LatentDirichletAllocation
from sklearn.feature_extraction.text import CountVectorizer
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import Pipeline
from sklearn.utils._param_validation import InvalidParameterError

from sklearn_gpulda import GPULatentDirichletAllocation
from sklearn_gpulda.datasets import load_kjv_chapters, make_lda_corpus
from sklearn_gpulda.metrics import document_completion

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"


@pytest.fixture(scope="module")
def kjv():
    return load_kjv_chapters()


@pytest.fixture(scope="module")
def small_model(kjv):
    return GPULatentDirichletAllocation(8, max_iter=15, random_state=0,
                                        device="cpu").fit(kjv.data[:300])


def _lda(**kw):
    kw.setdefault("device", "cpu")
    kw.setdefault("random_state", 0)
    return GPULatentDirichletAllocation(**kw)


# -- what it learns -------------------------------------------------------------------------
def test_planted_topics_are_recovered():
    data = make_lda_corpus(n_docs=1000, n_words=400, n_topics=8, doc_length=120, alpha=0.1,
                           beta=0.05, random_state=3)
    model = _lda(n_components=8, max_iter=100, doc_topic_prior=0.1,
                 topic_word_prior=0.05).fit(data.data)
    learned = model.components_ / model.components_.sum(axis=1, keepdims=True)
    true = data.topic_word
    # Hellinger affinity (Bhattacharyya coefficient) between every true and learned topic.
    affinity = np.sqrt(true) @ np.sqrt(learned).T
    rows, cols = linear_sum_assignment(-affinity)
    assert affinity[rows, cols].min() > 0.98


def test_held_out_likelihood_not_worse_than_scikit_learn(kjv):
    X = kjv.data
    order = np.random.default_rng(0).permutation(X.shape[0])
    train, test = X[order[:1070]], X[order[1070:]]
    k = 20
    ours = _lda(n_components=k, max_iter=100).fit(train)
    theirs = LatentDirichletAllocation(n_components=k, learning_method="batch",
                                       random_state=0).fit(train)
    ours_dc = document_completion(test, ours.components_, 1.0 / k, random_state=0)
    theirs_dc = document_completion(test, theirs.components_, 1.0 / k, random_state=0)
    assert ours_dc.per_token >= theirs_dc.per_token


def test_more_iterations_lower_training_perplexity(kjv):
    short = _lda(n_components=10, max_iter=2).fit(kjv.data[:400])
    long = _lda(n_components=10, max_iter=30).fit(kjv.data[:400])
    assert long.bound_ < short.bound_


# -- the fitted model ---------------------------------------------------------------------------
def test_fitted_attributes(small_model, kjv):
    m = small_model
    assert m.components_.shape == (8, kjv.data.shape[1])
    assert m.exp_dirichlet_component_.shape == m.components_.shape
    assert m.n_features_in_ == kjv.data.shape[1]
    assert m.n_iter_ == 15
    assert m.n_batch_iter_ == 16
    # The defaults learn both priors: alpha per topic, beta one number.
    assert m.doc_topic_prior_.shape == (8,) and np.all(m.doc_topic_prior_ > 0)
    assert isinstance(m.topic_word_prior_, float) and m.topic_word_prior_ != 1 / 8
    assert m.device_ == "cpu"
    assert m.n_tokens_ == kjv.data[:300].sum()
    # components_ are the word-topic counts plus the prior: they add up to tokens + K V beta.
    np.testing.assert_allclose(m.components_.sum(),
                               m.n_tokens_ + 8 * kjv.data.shape[1] * m.topic_word_prior_)
    fixed = _lda(n_components=8, max_iter=2, doc_topic_prior=None,
                 topic_word_prior=None).fit(kjv.data[:50])
    assert fixed.doc_topic_prior_ == fixed.topic_word_prior_ == 1 / 8  # scikit-learn's None
    assert np.isfinite(m.bound_) and m.bound_ > 1


def test_exp_dirichlet_component_is_derived_on_demand(kjv):
    from scipy.special import psi

    unfitted = _lda(n_components=4, max_iter=3)
    assert not hasattr(unfitted, "exp_dirichlet_component_")
    m = _lda(n_components=4, max_iter=3).fit(kjv.data[:120])
    # fit leaves it to the first access (it costs seconds at large K x V) ...
    assert "_exp_dirichlet_cache" not in vars(m)
    c = m.components_
    expected = np.exp(psi(c) - psi(c.sum(axis=1))[:, None])
    np.testing.assert_allclose(m.exp_dirichlet_component_, expected, rtol=1e-12)
    assert m.exp_dirichlet_component_ is m.exp_dirichlet_component_  # cached
    # ... follows a refit that replaces components_ ...
    m.set_params(max_iter=6).fit(kjv.data[120:240])
    c = m.components_
    np.testing.assert_allclose(m.exp_dirichlet_component_,
                               np.exp(psi(c) - psi(c.sum(axis=1))[:, None]), rtol=1e-12)
    # ... and is not pickled, but recomputed after loading.
    loaded = pickle.loads(pickle.dumps(m))
    assert "_exp_dirichlet_cache" not in vars(loaded)
    assert "_exp_dirichlet_cache" in vars(m), "pickling changed the live model"
    np.testing.assert_array_equal(loaded.exp_dirichlet_component_, m.exp_dirichlet_component_)


def test_components_pickle_under_their_public_name(small_model):
    # components_ is a property over private slots (the host array, or a model still on the
    # GPU after partial_fit); the pickle keeps the public name and a host array, so that pickles
    # of earlier versions load, and a model pickled on a GPU loads without one.
    state = small_model.__getstate__()
    assert "components_" in state
    assert not {"_components_host", "_components_device"} & set(state)
    np.testing.assert_array_equal(state["components_"], small_model.components_)
    old_style = dict(state)  # what a pickle of an earlier version holds
    loaded = GPULatentDirichletAllocation.__new__(GPULatentDirichletAllocation)
    loaded.__setstate__(old_style)
    np.testing.assert_array_equal(loaded.components_, small_model.components_)
    assert loaded._n_topics_fitted() == 8
    unfitted = _lda(n_components=4)
    assert not hasattr(unfitted, "components_")
    with pytest.raises(AttributeError, match="components_"):
        del unfitted.components_
    assigned = _lda(n_components=4)
    assigned.components_ = np.ones((4, 3))
    assert assigned.components_.shape == (4, 3) and "components_" in assigned.__getstate__()
    del assigned.components_
    assert not hasattr(assigned, "components_")


def test_transform_rows_are_distributions(small_model, kjv):
    theta = small_model.transform(kjv.data[300:340])
    assert theta.shape == (40, 8)
    np.testing.assert_allclose(theta.sum(axis=1), 1.0)
    assert (theta > 0).all()


def test_all_zero_documents_get_uniform_distribution(small_model, kjv):
    X = sp.vstack([kjv.data[:1], sp.csr_matrix((2, kjv.data.shape[1]))]).tocsr()
    theta = small_model.transform(X)
    np.testing.assert_array_equal(theta[1:], np.full((2, 8), 1 / 8))


def test_fit_on_all_zero_documents_is_allowed(kjv):
    X = sp.vstack([kjv.data[:20], sp.csr_matrix((5, kjv.data.shape[1]))]).tocsr()
    model = _lda(n_components=3, max_iter=3).fit(X)
    np.testing.assert_array_equal(model.transform(X[20:]), np.full((5, 3), 1 / 3))


def test_fit_transform_matches_fit_then_transform(kjv):
    X = kjv.data[:200]
    a = _lda(n_components=5, max_iter=5).fit_transform(X)
    b = _lda(n_components=5, max_iter=5).fit(X).transform(X)
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("normalize", [True, False])
def test_fit_transform_takes_normalize_as_scikit_learn_does(kjv, normalize):
    # scikit-learn 1.9's TransformerMixin.fit_transform would hand normalize to fit.
    X = kjv.data[:120]
    a = _lda(n_components=4, max_iter=4).fit_transform(X, normalize=normalize)
    b = _lda(n_components=4, max_iter=4).fit(X).transform(X, normalize=normalize)
    np.testing.assert_array_equal(a, b)
    sk = LatentDirichletAllocation(n_components=4, max_iter=2, random_state=0)
    assert sk.fit_transform(X, normalize=normalize).shape == a.shape


def test_random_state_is_set_where_scikit_learn_sets_it(kjv):
    X = kjv.data[:100]
    for random_state in (3, np.random.RandomState(3), None):
        ours = _lda(n_components=3, max_iter=2, random_state=random_state)
        theirs = LatentDirichletAllocation(n_components=3, max_iter=1,
                                           random_state=random_state)
        assert not hasattr(ours, "random_state_")
        ours.fit(X)
        theirs.fit(X)
        assert type(ours.random_state_) is type(theirs.random_state_) is np.random.RandomState
        if isinstance(random_state, np.random.RandomState):
            assert ours.random_state_ is random_state  # the caller's generator, as scikit-learn
    # partial_fit sets it on its first call only, as scikit-learn's does.
    model = _lda(n_components=3, random_state=5).partial_fit(X[:50])
    first = model.random_state_
    assert model.partial_fit(X[50:]).random_state_ is first


def test_random_state_leaves_the_model_and_its_pickle_working(kjv):
    # The seed is drawn from random_state_ as it was from check_random_state(random_state):
    # an int gives the model it gave before, and a pickled model transforms the same.
    X = kjv.data[:100]
    model = _lda(n_components=3, max_iter=3, random_state=9).fit(X)
    assert model._seed == int(np.random.RandomState(9).randint(np.iinfo(np.uint32).max))
    loaded = pickle.loads(pickle.dumps(model))
    assert isinstance(loaded.random_state_, np.random.RandomState)
    np.testing.assert_array_equal(loaded.transform(X[:5]), model.transform(X[:5]))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dtype_is_preserved(kjv, dtype):
    X = kjv.data[:100].astype(dtype)
    model = _lda(n_components=4, max_iter=3).fit(X)
    assert model.components_.dtype == dtype
    assert model.transform(X).dtype == dtype


def test_same_random_state_same_model(kjv):
    X = kjv.data[:150]
    a = _lda(n_components=6, max_iter=5, random_state=11).fit(X)
    b = _lda(n_components=6, max_iter=5, random_state=11).fit(X)
    c = _lda(n_components=6, max_iter=5, random_state=12).fit(X)
    np.testing.assert_array_equal(a.components_, b.components_)
    assert not np.array_equal(a.components_, c.components_)


def test_score_adds_up_across_folds(small_model, kjv):
    a, b = kjv.data[300:350], kjv.data[350:420]
    both = sp.vstack([a, b]).tocsr()
    assert (small_model.score(a) + small_model.score(b)
            == pytest.approx(small_model.score(both), rel=1e-12))


def test_perplexity_is_exp_of_minus_score_per_token(small_model, kjv):
    X = kjv.data[300:350]
    expected = np.exp(-small_model.score(X) / X.sum())
    assert small_model.perplexity(X) == pytest.approx(expected, rel=1e-12)


def test_perplexity_and_score_leave_n_features_in_alone(small_model, kjv):
    n = small_model.n_features_in_
    small_model.perplexity(kjv.data[:5])
    small_model.score(kjv.data[:5])
    assert small_model.n_features_in_ == n


def test_feature_names_out(small_model):
    names = small_model.get_feature_names_out()
    assert list(names) == [f"gpulatentdirichletallocation{i}" for i in range(8)]


def test_set_output_pandas(small_model, kjv):
    pd = pytest.importorskip("pandas")
    model = pickle.loads(pickle.dumps(small_model)).set_output(transform="pandas")
    out = model.transform(kjv.data[:3].toarray())
    assert (isinstance(out, pd.DataFrame)
            and list(out.columns) == list(model.get_feature_names_out()))


def _verbose_fit(X, callback=None, **params):
    """A verbose fit of ``X`` and the lines it printed."""
    buf = io.StringIO()
    with redirect_stdout(buf):
        model = _lda(verbose=1, **params).fit(X, callback=callback)
    return model, buf.getvalue().strip().splitlines()


def test_verbose_prints_every_sweep_and_the_final_likelihood(kjv):
    model, lines = _verbose_fit(kjv.data[:50], n_components=3, max_iter=2)
    assert len(lines) == 3
    assert lines[0].startswith("iteration: 1 of max_iter: 2, ") and "Mtoken/s" in lines[1]
    # The model's own score closes the output; it is bound_, computed once.
    assert lines[2].startswith("stopped: max_iter=2 sweeps done; log-likelihood/token: ")
    assert lines[2].endswith(f"perplexity: {model.bound_:.4f}")


def test_verbose_evaluates_only_within_its_share_of_the_time(kjv):
    # Before any evaluation was timed one is guessed to cost a sweep, so with a 3% share the
    # first is due at sweep 34; later ones as their measured cost allows (tests/test_cadence.py).
    model, lines = _verbose_fit(kjv.data[:300], n_components=5, max_iter=60)
    assert len(lines) == 61
    scored = [int(line.split()[1]) for line in lines[:-1] if "log-likelihood/token" in line]
    assert scored and scored[0] >= 30 and len(scored) < 60 - 30
    np.testing.assert_array_equal(model.history_["iteration"], scored)


def test_evaluate_every_stops_early_on_perp_tol(kjv):
    seen = []
    model, lines = _verbose_fit(kjv.data[:50], lambda i, info: seen.append(i), n_components=3,
                                max_iter=50, evaluate_every=1, perp_tol=1e6)
    assert model.n_iter_ == 2
    # The reason is printed under verbose and kept in the history.
    reason = model.history_["stop_reason"]
    assert reason.startswith("perplexity changed by") and "perp_tol=1e+06 after 2 sweeps" in reason
    assert lines[-1].startswith(f"stopped: {reason}; ")
    np.testing.assert_array_equal(model.history_["iteration"], [1, 2])
    # The callback hears of every sweep done, the one that stopped the fit included.
    assert seen == [1, 2]


def test_non_integer_counts_are_weighted_tokens(kjv):
    X = kjv.data[:80].astype(np.float64) * 0.5
    model = _lda(n_components=4, max_iter=3).fit(X)
    assert model.n_tokens_ == pytest.approx(X.sum())
    np.testing.assert_allclose(model.components_.sum(), X.sum() + 4 * X.shape[1] * 0.25, rtol=1e-6)


# -- online learning -----------------------------------------------------------------------
def test_partial_fit_improves_held_out_perplexity(kjv):
    X = kjv.data
    order = np.random.default_rng(0).permutation(X.shape[0])
    train, test = X[order[:1000]], X[order[1000:]]
    model = _lda(n_components=10, batch_size=100, total_samples=1000)
    perplexities = []
    for epoch in range(3):
        model.partial_fit(train)
        perplexities.append(model.perplexity(test))
    assert model.n_batch_iter_ == 31
    assert perplexities[-1] < perplexities[0]


def test_online_fit_reaches_batch_quality_ballpark(kjv):
    X = kjv.data
    order = np.random.default_rng(1).permutation(X.shape[0])
    train, test = X[order[:1000]], X[order[1000:]]
    online = _lda(n_components=10, learning_method="online", max_iter=5, batch_size=200).fit(train)
    uniform = _lda(n_components=10, max_iter=0).fit(train)
    assert online.perplexity(test) < 0.8 * uniform.perplexity(test)


def test_partial_fit_after_fit_keeps_learning(small_model, kjv):
    model = pickle.loads(pickle.dumps(small_model))
    before = model.components_.copy()
    model.partial_fit(kjv.data[300:400])
    assert model.n_batch_iter_ == small_model.n_batch_iter_ + 1
    assert not np.array_equal(before, model.components_)


def test_online_verbose_prints_every_pass_and_why_it_stopped(kjv):
    model, lines = _verbose_fit(kjv.data[:100], n_components=3, learning_method="online",
                                max_iter=2, batch_size=50, evaluate_every=2)
    # The evaluation of the last pass is the model's bound_.
    assert lines == ["iteration: 1 of max_iter: 2",
                     f"iteration: 2 of max_iter: 2, perplexity: {model.bound_:.4f}",
                     "stopped: max_iter=2 passes done"]
    assert list(model.history_) == ["iteration", "seconds", "train_perplexity", "stop_reason",
                                    "stopped_by"]
    assert model.history_["stopped_by"] == "max_iter"


def test_partial_fit_is_one_silent_pass_that_keeps_the_fit_history(kjv):
    model, _ = _verbose_fit(kjv.data[:60], n_components=3, max_iter=2)
    history = model.history_
    buf = io.StringIO()
    with redirect_stdout(buf):
        model.partial_fit(kjv.data[60:120])
    assert buf.getvalue() == ""
    assert model.history_ is history and model.n_iter_ == 2 and model.n_batch_iter_ == 4


def test_partial_fit_rejects_other_vocabulary(small_model, kjv):
    model = pickle.loads(pickle.dumps(small_model))
    with pytest.raises(ValueError, match="features"):
        model.partial_fit(kjv.data[:10, :100])


# -- scikit-learn integration ---------------------------------------------------------------
def _kjv_texts(kjv, n_docs):
    """Raw text rebuilt from the real corpus: each chapter's words repeated by their counts."""
    names = np.asarray(kjv.feature_names)
    X = kjv.data[:n_docs].tocsr()
    texts = []
    for d in range(n_docs):
        row = X[d]
        texts.append(" ".join(np.repeat(names[row.indices], row.data.astype(int))))
    return texts


def test_pipeline_after_count_vectorizer(kjv):
    texts = _kjv_texts(kjv, 150)
    pipe = Pipeline([("counts", CountVectorizer()), ("lda", _lda(n_components=5, max_iter=10))])
    theta = pipe.fit_transform(texts)
    assert theta.shape == (150, 5)
    np.testing.assert_allclose(theta.sum(axis=1), 1.0)
    assert pipe.transform(["lord god israel"]).shape == (1, 5)


def test_pipeline_on_20_newsgroups_raw_text():
    archive = SHARED / "20newsgroups_bydate" / "20news-bydate.tar.gz"
    if not archive.exists():
        pytest.skip("../shared/data/20newsgroups_bydate is absent")
    import tarfile

    texts = []
    with tarfile.open(archive) as tar:
        for member in tar:
            if member.isfile() and "20news-bydate-train/sci.space/" in member.name:
                texts.append(tar.extractfile(member).read().decode("latin-1"))
            if len(texts) == 200:
                break
    pipe = Pipeline([
        ("counts", CountVectorizer(stop_words="english", min_df=2)),
        ("lda", _lda(n_components=5, max_iter=20)),
    ])
    pipe.fit(texts)
    words = pipe[0].get_feature_names_out()
    top = {words[i] for row in pipe[1].components_ for i in np.argsort(row)[-10:]}
    assert {"space", "nasa"} & top


def test_grid_search_over_components_and_priors(kjv):
    search = GridSearchCV(
        _lda(max_iter=5),
        {"n_components": [3, 6], "doc_topic_prior": [0.1, 0.5]},
        cv=3,
    )
    search.fit(kjv.data[:240])
    assert np.isfinite(search.cv_results_["mean_test_score"]).all()
    assert search.best_estimator_.components_.shape[0] == search.best_params_["n_components"]


def test_joblib_round_trip_read_only(small_model, kjv, tmp_path):
    path = tmp_path / "model.joblib"
    joblib.dump(small_model, path)
    loaded = joblib.load(path, mmap_mode="r")
    np.testing.assert_array_equal(loaded.transform(kjv.data[300:320]),
                                  small_model.transform(kjv.data[300:320]))


def test_model_trained_on_gpu_transforms_without_one(small_model, kjv, monkeypatch):
    import sklearn_gpulda._runtime.device as device

    monkeypatch.setattr(device, "import_cupy", lambda: (None, "no GPU in this test"))
    model = pickle.loads(pickle.dumps(small_model))
    model.device_ = "cuda:0"
    model.device = "cuda"
    with pytest.warns(RuntimeWarning, match="not usable here"):
        theta = model.transform(kjv.data[300:310])
    np.testing.assert_array_equal(theta, small_model.transform(kjv.data[300:310]))
    model.device = "auto"  # 'auto' picks the CPU quietly
    np.testing.assert_array_equal(model.transform(kjv.data[300:310]), theta)


def test_device_cpu_on_a_gpu_trained_model_runs_inference_on_the_cpu(small_model, kjv, monkeypatch):
    import sklearn_gpulda._runtime.device as device

    def no_gpu(*args, **kwargs):
        raise AssertionError("the GPU was asked for")

    model = pickle.loads(pickle.dumps(small_model))
    model.device_ = "cuda:0"
    monkeypatch.setattr(device, "import_cupy", no_gpu)
    model.set_params(device="cpu")
    np.testing.assert_array_equal(model.transform(kjv.data[300:310]),
                                  small_model.transform(kjv.data[300:310]))


# -- bad input ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "value, match", [(-1.0, "Negative values"), (np.nan, "NaN"), (np.inf, "infinity")]
)
@pytest.mark.parametrize("method", ["fit", "partial_fit", "transform", "score", "perplexity"])
def test_bad_counts_are_rejected(small_model, kjv, value, match, method):
    X = kjv.data[:20].toarray().astype(np.float64)
    X[3, 5] = value
    model = pickle.loads(pickle.dumps(small_model)) if method != "fit" else _lda(n_components=3)
    before = getattr(model, "components_", None)
    before = None if before is None else before.copy()
    with pytest.raises(ValueError, match=match):
        getattr(model, method)(X)
    if before is not None:
        np.testing.assert_array_equal(model.components_, before)


@pytest.mark.parametrize("method", ["transform", "score", "perplexity", "partial_fit"])
def test_wrong_number_of_columns_leaves_model_unchanged(small_model, kjv, method):
    model = pickle.loads(pickle.dumps(small_model))
    before = model.components_.copy()
    with pytest.raises(ValueError,
                       match=f"X has 100 features, but .* is expecting {kjv.data.shape[1]}"):
        getattr(model, method)(kjv.data[:5, :100])
    np.testing.assert_array_equal(model.components_, before)
    assert model.n_features_in_ == kjv.data.shape[1]


@pytest.mark.parametrize(
    "X, match",
    [
        (np.arange(5.0), "Expected 2D"),
        (np.zeros((0, 5)), "0 sample"),
        (np.zeros((5, 0)), "0 feature"),
    ],
)
def test_degenerate_shapes_are_rejected(X, match):
    with pytest.raises(ValueError, match=match):
        _lda(n_components=2).fit(X)


@pytest.mark.parametrize(
    "params, match",
    [
        ({"n_components": 0}, "n_components"),
        ({"doc_topic_prior": -0.1}, "doc_topic_prior"),
        ({"topic_word_prior": 0.0}, "topic_word_prior"),
        ({"learning_method": "gibbs"}, "learning_method"),
        ({"device": "tpu"}, "device"),
        ({"n_batch_sweeps": 0}, "n_batch_sweeps"),
    ],
)
def test_parameters_out_of_range(params, match, kjv):
    with pytest.raises(InvalidParameterError, match=match):
        _lda(**params).fit(kjv.data[:10])


def test_too_many_topics_for_memory_is_refused_before_allocating(kjv):
    with pytest.raises(MemoryError, match="n_components=2000000000"):
        _lda(n_components=2_000_000_000, max_iter=1).fit(kjv.data[:10])


def test_explicit_gpu_without_one_says_so(kjv, monkeypatch):
    import sklearn_gpulda._runtime.device as device

    monkeypatch.setattr(device, "import_cupy", lambda: (None, "CuPy does not import (test)"))
    with pytest.raises(RuntimeError, match="needs CuPy and a CUDA GPU"):
        _lda(n_components=2, device="cuda").fit(kjv.data[:10])


# -- scikit-learn's keyword arguments and partial_fit's attributes ---------------------------------
def test_transform_unnormalised_is_the_posterior_dirichlet_parameter(small_model, kjv):
    X = kjv.data[300:320]
    theta = small_model.transform(X)
    gamma = small_model.transform(X, normalize=False)
    np.testing.assert_allclose(gamma / gamma.sum(axis=1, keepdims=True), theta, rtol=1e-12)
    # gamma = alpha + expected counts: each row adds up to the document's length plus sum(alpha).
    lengths = np.asarray(X.sum(axis=1)).ravel()
    np.testing.assert_allclose(gamma.sum(axis=1), lengths + small_model.doc_topic_prior_.sum(),
                               rtol=1e-10)


def test_perplexity_takes_sub_sampling_and_ignores_it(small_model, kjv):
    X = kjv.data[300:340]
    assert small_model.perplexity(X, sub_sampling=True) == small_model.perplexity(X)


def test_partial_fit_sets_bound_time_and_tokens(kjv):
    X = kjv.data[:200]
    model = _lda(n_components=4, batch_size=50, total_samples=200).partial_fit(X)
    assert model.n_tokens_ == X.sum()
    assert model.fit_time_ > 0
    # The training perplexity of the last mini-batch's chain: finite, and far below the
    # vocabulary size a uniform model would score.
    assert 1 < model.bound_ < X.shape[1]


# -- a number of topics too large for memory ------------------------------------------------------
def _huge_k_input():
    return np.random.RandomState(0).poisson(1.0, (60, 40)).astype(np.float64)


@pytest.mark.parametrize("how", ["fit", "online", "partial_fit"])
def test_absurd_k_is_refused_before_allocating_and_keeps_the_model(how):
    # 10**9 topics on 60 x 40 counts need about 1.8 TB on the CPU engine: refused at once,
    # naming the bytes, and a model fitted before keeps its state and its pickle.
    import time

    X = _huge_k_input()
    model = _lda(n_components=3, max_iter=2, learning_method="online" if how == "online"
                 else "batch")
    if how != "partial_fit":  # partial_fit continues a model of the same K: start unfitted
        model.fit(X)
    before = pickle.dumps(model)
    model.set_params(n_components=10**9)
    tic = time.perf_counter()
    with pytest.raises(MemoryError, match=r"n_components=1000000000 .* needs about "
                                          r"1,760,000,\d{3},\d{3} bytes.* [\d,]+ bytes"):
        model.partial_fit(X) if how == "partial_fit" else model.fit(X)
    assert time.perf_counter() - tic < 1.0
    model.set_params(n_components=3)
    assert pickle.dumps(model) == before


def test_k_beyond_the_memory_this_process_may_use_is_refused(monkeypatch):
    # The case: 10 million topics fit a large machine's memory but not a process
    # limited to 1 GiB (a container, ulimit -v), which MemAvailable alone does not show.
    from sklearn_gpulda.backends.numpy import sampler as sampler_module

    monkeypatch.setattr(sampler_module, "available_memory", lambda: 1 << 30)
    with pytest.raises(MemoryError, match=r"17,600,\d{3},\d{3} bytes.*1,073,741,824 bytes"):
        _lda(n_components=10_000_000, max_iter=2).fit(_huge_k_input())


def test_available_memory_counts_an_address_space_limit():
    import subprocess
    import sys

    code = (
        "import resource\n"
        "hard = resource.getrlimit(resource.RLIMIT_AS)[1]\n"
        "resource.setrlimit(resource.RLIMIT_AS, (6 << 30, hard))\n"
        "from sklearn_gpulda._runtime import host\n"
        "print(host.available_memory() <= 6 << 30)\n"
    )
    root = str(Path(__file__).resolve().parents[1])
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={"PYTHONPATH": root, "PATH": ""}, timeout=120)
    assert out.stdout.strip() == "True", out.stderr[-2000:]


def test_gpu_memory_plan_names_the_bytes_a_k_needs(kjv):
    # The sparse GPU engine's plan is plain arithmetic: its MemoryError names n_components and
    # the least budget that holds this K, which indeed suffices.
    from sklearn_gpulda._input.corpus import tokens
    from sklearn_gpulda.backends.cuda.sparse import memory_plan

    sizes = memory_plan.corpus_sizes(tokens(kjv.data))
    with pytest.raises(MemoryError, match=r"n_components=5000 needs about ([\d,]+) bytes") as err:
        memory_plan.streamed_chunk_tokens(sizes, 5000, 100 << 20)
    need = int(str(err.value).split("needs about ")[1].split(" bytes")[0].replace(",", ""))
    assert "104,857,600 bytes" in str(err.value)
    assert memory_plan.streamed_chunk_tokens(sizes, 5000, need)[0] >= memory_plan.MIN_STREAM_CHUNK
    with pytest.raises(MemoryError):
        memory_plan.streamed_chunk_tokens(sizes, 5000, int(need * 0.99))
