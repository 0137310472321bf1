"""Prior learning (``sklearn_gpulda.backends.priors``): Minka's fixed point on histograms, and the
estimator's learned and per-topic priors."""

import pickle

import numpy as np
import pytest
from scipy.special import digamma

from sklearn_gpulda import GPULatentDirichletAllocation
from sklearn_gpulda.backends import prior_learning as _learning
from sklearn_gpulda.backends import priors as _priors
from sklearn_gpulda.backends.numpy.sampler import value_counts
from sklearn_gpulda.datasets import load_kjv_chapters, make_lda_corpus


def _dirichlet_multinomial_counts(alpha, lengths, rng):
    """Per-document topic counts drawn with theta_d ~ Dirichlet(alpha)."""
    theta = rng.dirichlet(alpha, size=lengths.size)
    return np.vstack([rng.multinomial(n, t) for n, t in zip(lengths, theta)])


def _alpha_histograms(counts):
    doc, topic = np.nonzero(counts)
    (topic, count), n_docs = value_counts(topic.astype(np.int64),
                                          counts[doc, topic].astype(np.float64))
    return (topic, count, n_docs), _learning.length_histogram(counts.sum(axis=1))


def _direct_alpha_step(alpha, counts):
    """One fixed-point step written from Minka's Eq. (55), document by document."""
    lengths = counts.sum(axis=1)
    den = np.sum(digamma(lengths + alpha.sum()) - digamma(alpha.sum()))
    num = np.sum(digamma(counts + alpha) - digamma(alpha), axis=0)
    return alpha * num / den


def _update_alpha(start, hist, lengths, n_counts=_learning.TABLE_COUNTS):
    table, rest = _learning.alpha_table(*hist, np.size(start), n_counts)
    return _learning.update_alpha(start, table, rest, *lengths)


@pytest.mark.parametrize("n_counts", [_learning.TABLE_COUNTS, 8, 1])
def test_one_histogram_step_equals_the_direct_sums(n_counts):
    # MAX_ITERATIONS = 1 makes update_alpha a single step of the iteration. Counts below
    # n_counts go through the table's running sums of reciprocals, the others through digamma:
    # all in the table, some in each, none in it.
    rng = np.random.default_rng(0)
    alpha = np.array([0.05, 0.2, 0.5, 1.0])
    counts = _dirichlet_multinomial_counts(alpha, rng.integers(5, 60, 300), rng)
    start = np.full(4, 0.3)
    (hist, lengths) = _alpha_histograms(counts)
    table, rest = _learning.alpha_table(*hist, 4, n_counts)
    assert table.sum() + rest[2].sum() == hist[2].sum()
    assert (rest[2].size == 0) == (n_counts == _learning.TABLE_COUNTS)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_learning, "MAX_ITERATIONS", 1)
        step = _update_alpha(start, hist, lengths, n_counts)
    np.testing.assert_allclose(step, _direct_alpha_step(start, counts), rtol=1e-12)


def _numerator_count_by_count(alpha, table):
    """The table's part of alpha's numerator, one count at a time: each addition rounded on
    its own, in the order the GPU kernel (``cuda/counts.cu``) adds."""
    gain = np.zeros(alpha.shape)
    numerator = np.zeros(alpha.shape)
    for c in range(table.shape[1]):
        gain = gain + 1.0 / (alpha + float(c))
        numerator = numerator + table[:, c] * gain
    return numerator


@pytest.mark.parametrize("n_topics,n_counts", [(1, 1), (7, 2), (20, 63), (300, 63), (3, 0)])
def test_table_numerator_is_the_count_by_count_sum_to_the_bit(n_topics, n_counts):
    rng = np.random.default_rng(n_topics + n_counts)
    alpha = rng.gamma(0.3, 1.0, n_topics) + _learning.FLOOR
    table = rng.integers(0, 5000, (n_topics, n_counts)).astype(np.float64)
    table[rng.random(table.shape) < 0.3] = 0.0
    got = _learning.table_numerator(alpha, table)
    want = _numerator_count_by_count(alpha, table)
    assert got.shape == (n_topics,)
    assert np.array_equal(got.view(np.int64), want.view(np.int64))


def test_fixed_points_do_not_depend_on_the_blas_threads():
    # A Dask worker runs the updates with one BLAS thread where its driver has every core: the
    # priors learned must not depend on that. A BLAS dot product of 40,000 terms is split over
    # the threads it may use (and then rounds differently); NumPy's sums are not.
    threadpoolctl = pytest.importorskip("threadpoolctl")
    rng = np.random.default_rng(3)
    n = 40_000
    count = np.arange(1, n + 1, dtype=np.float64)
    # Many cells of small counts, few of large ones, as in a real B.
    n_cells = np.maximum(1.0, np.round(1e7 / count ** 1.5)) + rng.integers(0, 3, n)
    totals = np.full(300, (count * n_cells).sum() / 300)
    length = np.arange(1, n + 1, dtype=np.float64)
    n_length = rng.integers(1, 50, n).astype(np.float64)
    table = rng.integers(0, 500, (300, _learning.TABLE_COUNTS - 1)).astype(np.float64)
    empty = (np.zeros(0, np.int64), np.zeros(0), np.zeros(0))
    found = []
    for threads in (1, 4):
        with threadpoolctl.threadpool_limits(limits=threads):
            found.append((_learning.update_beta(0.01, count, n_cells, totals, n),
                          _learning.update_alpha(np.full(300, 0.05), table, empty, length,
                                                 n_length)))
    assert found[0][0] == found[1][0]
    np.testing.assert_array_equal(found[0][1], found[1][1])


def test_alpha_is_recovered_from_dirichlet_multinomial_counts():
    rng = np.random.default_rng(1)
    truth = np.array([0.02, 0.1, 0.3, 0.6, 1.5])
    counts = _dirichlet_multinomial_counts(truth, rng.integers(20, 200, 8000), rng)
    hist, lengths = _alpha_histograms(counts)
    learned = _update_alpha(np.full(5, 0.1), hist, lengths)
    np.testing.assert_allclose(learned, truth, rtol=0.08)


def test_beta_is_recovered_from_dirichlet_multinomial_counts():
    rng = np.random.default_rng(2)
    n_topics, n_words, beta = 30, 2000, 0.05
    phi = rng.dirichlet(np.full(n_words, beta), size=n_topics)
    counts = np.vstack([rng.multinomial(n, p) for n, p in
                        zip(rng.integers(5000, 20000, n_topics), phi)])
    (count,), n_cells = value_counts(counts[counts > 0].astype(np.float64))
    learned = _learning.update_beta(0.5, count, n_cells, counts.sum(axis=1), n_words)
    assert learned == pytest.approx(beta, rel=0.05)


def test_a_topic_nobody_uses_stops_at_the_floor():
    counts = np.array([[5, 0, 3], [2, 0, 7], [0, 0, 4]])
    hist, lengths = _alpha_histograms(counts)
    learned = _update_alpha(np.full(3, 0.5), hist, lengths)
    assert learned[1] == _learning.FLOOR and learned[0] > _learning.FLOOR


def test_weighted_counts_are_histogrammed_by_value():
    # Non-integer counts: the same fixed point, with every distinct value its own bin.
    rng = np.random.default_rng(3)
    counts = _dirichlet_multinomial_counts(np.array([0.2, 0.8]), rng.integers(5, 30, 500), rng)
    scaled = counts * 0.5
    hist, lengths = _alpha_histograms(scaled)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_learning, "MAX_ITERATIONS", 1)
        step = _update_alpha(np.array([0.3, 0.3]), hist, lengths)
    np.testing.assert_allclose(step, _direct_alpha_step(np.array([0.3, 0.3]), scaled), rtol=1e-12)


@pytest.mark.parametrize("param, value, learn", [
    (None, 0.25, False), (0.7, 0.7, False), ("auto", 0.25, True),
])
def test_resolve_prior_numbers_and_auto(param, value, learn):
    prior = _priors.resolve_prior(param, 0.25, 4)
    assert prior.value == value and prior.learn is learn


def test_resolve_prior_arrays():
    prior = _priors.resolve_prior([0.1, 0.2, 0.3], 0.5, 3)
    np.testing.assert_array_equal(prior.value, [0.1, 0.2, 0.3])
    with pytest.raises(ValueError, match=r"shape \(3,\)"):
        _priors.resolve_prior([0.1, 0.2], 0.5, 3)
    with pytest.raises(ValueError, match="finite and positive"):
        _priors.resolve_prior([0.1, 0.0, 0.3], 0.5, 3)
    with pytest.raises(ValueError, match="a number"):
        _priors.resolve_prior([0.1, 0.2, 0.3], 0.5, None, "topic_word_prior")


# -- through the estimator -----------------------------------------------------------------------
def _match_topics(components, truth):
    """The true topic of each learned topic, by largest overlap of the word distributions."""
    learned = components / components.sum(axis=1, keepdims=True)
    overlap = np.minimum(learned[:, None, :], truth[None, :, :]).sum(axis=2)
    return overlap.argmax(axis=1), overlap.max(axis=1)


def test_learned_alpha_recovers_the_corpus_asymmetric_prior():
    truth = np.array([0.05, 0.1, 0.2, 0.4, 0.8])
    data = make_lda_corpus(n_docs=2000, n_words=600, n_topics=5, doc_length=120, alpha=truth,
                           beta=0.02, random_state=4)
    # 300 sweeps: the rarest topic (alpha 0.05) takes about that long to separate, so an average
    # over the last half would blur it; beta is the corpus's own: this is about alpha.
    lda = GPULatentDirichletAllocation(n_components=5, doc_topic_prior="auto",
                                       topic_word_prior=0.02, max_iter=300, n_averaged_sweeps=0,
                                       random_state=0, device="cpu").fit(data.data)
    which, overlap = _match_topics(lda.components_, data.topic_word)
    assert sorted(which) == list(range(5)) and overlap.min() > 0.8
    learned = np.empty(5)
    learned[which] = lda.doc_topic_prior_
    np.testing.assert_array_equal(np.argsort(learned), np.argsort(truth))
    np.testing.assert_allclose(learned, truth, rtol=0.3)


def test_learned_beta_is_the_prior_of_the_components():
    X = load_kjv_chapters().data[:300]
    lda = GPULatentDirichletAllocation(n_components=8, topic_word_prior="auto", max_iter=40,
                                       random_state=0, device="cpu").fit(X)
    assert isinstance(lda.topic_word_prior_, float) and lda.topic_word_prior_ != 1 / 8
    # components_ = counts + beta: a word no token of a topic has keeps exactly the prior.
    assert lda.components_.min() == pytest.approx(lda.topic_word_prior_, rel=1e-12)


@pytest.mark.parametrize("method", ["online", "partial_fit"])
def test_online_learning_keeps_the_starting_priors(method):
    # 'auto' is the default: online learning runs with it, keeping both priors at 1 / K.
    lda = GPULatentDirichletAllocation(n_components=4, learning_method="online", max_iter=2,
                                       batch_size=100, random_state=0, device="cpu")
    X = load_kjv_chapters().data[:200]
    lda = lda.fit(X) if method == "online" else lda.partial_fit(X)
    assert lda.topic_word_prior_ == 0.25 and lda.doc_topic_prior_ == 0.25


@pytest.mark.parametrize("prior", [0.3, [0.1, 0.2, 0.3, 0.4], "auto"])
@pytest.mark.parametrize("learning_method", ["batch", "online"])
def test_every_prior_form_pickles_and_transforms_without_a_gpu(prior, learning_method,
                                                               monkeypatch):
    import sklearn_gpulda._runtime.device as device

    X = load_kjv_chapters().data
    lda = GPULatentDirichletAllocation(n_components=4, doc_topic_prior=prior, max_iter=15,
                                       learning_method=learning_method, batch_size=100,
                                       random_state=0, device="cpu").fit(X[:200])
    expected = lda.transform(X[200:220])
    if isinstance(prior, float) or (prior == "auto" and learning_method == "online"):
        assert isinstance(lda.doc_topic_prior_, float)
    else:
        assert lda.doc_topic_prior_.shape == (4,) and lda.doc_topic_prior_.dtype == np.float64
    # As if trained on a GPU and loaded where none is.
    loaded = pickle.loads(pickle.dumps(lda))
    loaded.set_params(device="cuda")
    loaded.device_ = "cuda:0"
    monkeypatch.setattr(device, "import_cupy", lambda: (None, "no GPU in this test"))
    with pytest.warns(RuntimeWarning, match="not usable here"):
        np.testing.assert_array_equal(loaded.transform(X[200:220]), expected)
    assert type(loaded.doc_topic_prior_) is type(lda.doc_topic_prior_)
    # partial_fit goes on from the learned prior with the CPU.
    with pytest.warns(RuntimeWarning, match="not usable here"):
        loaded.partial_fit(X[220:320])
    assert np.isfinite(loaded.components_).all()


def test_learned_alpha_moves_over_the_fit_and_is_recorded():
    X = load_kjv_chapters().data[:300]
    lda = GPULatentDirichletAllocation(n_components=10, doc_topic_prior="auto", max_iter=60,
                                       evaluate_every=20, prior_burn_in=10,
                                       prior_update_every=5, random_state=0,
                                       device="cpu").fit(X)
    sums = lda.history_["alpha_sum"]
    assert sums[0] != pytest.approx(1.0) and len(set(np.round(sums, 9))) == 3
    assert lda.doc_topic_prior_.sum() == pytest.approx(sums[-1])
