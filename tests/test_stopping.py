"""``max_iter=None``: a batch fit stops when its training likelihood stops rising
(:mod:`sklearn_gpulda._fitting.stopping`, ``doc/algorithm.md``, "When a fit stops")."""

import math

import numpy as np
import pytest

from sklearn_gpulda import GPULatentDirichletAllocation
from sklearn_gpulda._fitting import loop, plan as _plan, stopping
from sklearn_gpulda._fitting.stopping import StoppingRule
from sklearn_gpulda._input.corpus import tokens
from sklearn_gpulda._runtime.device import CPU
from sklearn_gpulda.backends import choose_backend
from sklearn_gpulda.datasets import make_lda_corpus


@pytest.fixture(scope="module")
def corpus():
    return make_lda_corpus(n_docs=150, n_words=300, n_topics=5, doc_length=50,
                           random_state=2).data


def _lda(**kw):
    kw.setdefault("device", "cpu")
    kw.setdefault("random_state", 0)
    kw.setdefault("n_components", 5)
    return GPULatentDirichletAllocation(**kw)


def _spreads(history, rule, upto):
    """``{n: max - min of the likelihoods over the doubling ending at n}`` at the check points
    the history recorded, up to ``upto``, computed here from the history."""
    ll = dict(zip(history["iteration"].tolist(), history["train_loglik"].tolist()))
    points = rule.check_points()
    out = {}
    for i, n in enumerate(points):
        if 2 <= i and n <= upto:
            window = [ll[m] for m in points[i - 2:i + 1]]
            out[n] = max(window) - min(window)
    return out


# -- the rule ---------------------------------------------------------------------------------

def test_check_points_are_two_per_doubling_with_anchors_at_powers_of_two():
    rule = StoppingRule(floor=100, ceiling=800)
    assert rule.check_points() == [50, 71, 100, 141, 200, 283, 400, 566, 800]
    assert rule.anchors() == [50, 100, 200, 400, 800]
    assert rule.previous_doubling()[566] == 283 and rule.previous_doubling()[100] == 50


def test_the_defaults_keep_the_evaluations_within_three_percent_of_a_sweep_each():
    # An evaluation costs at most about one sweep (a third on the CPU engine): the rule's
    # evaluations up to any stop are at most 3% of the sweeps.
    rule = stopping.default_rule()
    points = rule.check_points()
    for i, n in enumerate(points):
        if n >= rule.floor:
            assert (i + 1) / n <= 0.03


@pytest.mark.parametrize("kw, match", [
    (dict(floor=5), "floor must be an even"),
    (dict(floor=0), "floor must be an even"),
    (dict(floor=100, ceiling=300), "ceiling must be floor=100 times a power of two"),
    (dict(floor=100, ceiling=50), "ceiling must be floor=100 times a power of two"),
    (dict(tol=math.nan), "tol must be a number"),
])
def test_bad_rules_are_refused(kw, match):
    with pytest.raises(ValueError, match=match):
        StoppingRule(**kw)


def test_replay_stops_at_the_first_small_gain_from_the_floor_on():
    rule = StoppingRule(tol=0.1, floor=4, ceiling=16)
    # A still doubling before the floor (at 3) does not count.
    ll = {2: -9.0, 3: -9.0, 4: -7.0, 6: -7.01, 8: -6.95, 11: -6.0, 16: -5.0}
    assert rule.replay(ll) == (8, "tolerance")
    rising = {n: float(n) for n in rule.check_points()}
    assert rule.replay(rising) == (16, "ceiling")
    # A rise and a fall back within one doubling is movement too, though the ends match.
    moving = {2: -9.0, 3: -9.0, 4: -8.0, 6: -7.5, 8: -8.02, 11: -7.99, 16: -7.98}
    assert rule.replay(moving) == (16, "tolerance")
    assert rule.replay({2: -9.0, 3: -8.0}) == (None, None)


# -- fits -------------------------------------------------------------------------------------

def test_a_converging_fit_stops_by_the_tolerance(corpus):
    rule = StoppingRule(tol=0.005, floor=8, ceiling=1024)
    with stopping.using(rule):
        lda = _lda().fit(corpus)
    h = lda.history_
    assert h["stopped_by"] == "tolerance" and "converged" in h["stop_reason"]
    assert rule.floor <= lda.n_iter_ < rule.ceiling and lda.n_iter_ in rule.check_points()
    # Every check point the rule judged was recorded, and it stopped at the first small gain.
    assert set(rule.check_points()) & set(range(lda.n_iter_ + 1)) == set(h["iteration"])
    spreads = _spreads(h, rule, lda.n_iter_)
    judged = [n for n in spreads if n >= rule.floor]
    assert spreads[lda.n_iter_] < rule.tol
    assert all(spreads[n] >= rule.tol for n in judged if n < lda.n_iter_)


def test_a_zero_tolerance_runs_to_the_ceiling(corpus):
    rule = StoppingRule(tol=0.0, floor=4, ceiling=16)
    with stopping.using(rule):
        lda = _lda().fit(corpus)
    assert lda.n_iter_ == 16 and lda.n_batch_iter_ == 17
    assert lda.history_["stopped_by"] == "ceiling"
    assert "ceiling of 16 sweeps reached" in lda.history_["stop_reason"]


def test_verbose_says_the_gains_and_why_it_stopped(corpus, capsys):
    with stopping.using(StoppingRule(tol=0.0, floor=4, ceiling=8)):
        _lda(verbose=1).fit(corpus)
    out = capsys.readouterr().out
    assert "iteration: 1 of at most 8" in out
    assert out.count("spread over the last doubling") == 3    # check points 4, 6 and 8
    assert "stopped: ceiling of 8 sweeps reached" in out


def test_an_integer_max_iter_is_untouched_by_the_rule(corpus):
    plain = _lda(max_iter=12).fit(corpus)
    with stopping.using(StoppingRule(tol=math.inf, floor=2, ceiling=4)):
        again = _lda(max_iter=12).fit(corpus)
    np.testing.assert_array_equal(plain.components_, again.components_)
    assert again.n_iter_ == 12 and again.history_["stopped_by"] == "max_iter"
    assert again.history_["iteration"].size == 0    # nothing evaluated along the way


def test_the_switch_gives_back_the_fixed_default(corpus, monkeypatch):
    monkeypatch.setattr(_plan, "NONE_STOPS_WHEN_CONVERGED", False)
    lda = _lda(n_averaged_sweeps=0).fit(corpus[:20])
    assert lda.n_iter_ == _plan.DEFAULT_ITERATIONS
    assert lda.history_["stopped_by"] == "max_iter"


def test_online_learning_keeps_a_fixed_number_of_passes():
    lda = _lda(n_components=4, learning_method="online")
    backend = choose_backend("auto", 4, CPU)
    online = _plan.plan_for(lda, backend, CPU, 0, method="online")
    assert online.iterations.stopping is None
    assert online.iterations.max_iter == _plan.DEFAULT_ITERATIONS
    assert _plan.plan_for(lda, backend, CPU, 0, method="batch").iterations.stopping


# -- averaging --------------------------------------------------------------------------------

def _samples(lda, k, corpus, n_iter):
    """The fit's chain by hand (fixed priors): the word-topic counts after each sweep."""
    engine = choose_backend(lda.algorithm_, k, CPU).make(
        k, lda.doc_topic_prior_, lda.topic_word_prior_, lda._seed, CPU)
    engine.load(tokens(corpus))
    engine.init_topics()
    out = []
    for i in range(1, n_iter + 1):
        engine.sweep(i)
        out.append(engine.word_topic_counts())
    engine.release()
    return out


def test_a_fit_stopped_at_the_ceiling_averages_its_last_half(corpus):
    with stopping.using(StoppingRule(tol=-math.inf, floor=4, ceiling=16)):
        lda = _lda(doc_topic_prior=0.2, topic_word_prior=0.1).fit(corpus)
    assert lda.n_iter_ == 16
    samples = _samples(lda, 5, corpus, 16)
    expected = np.mean(samples[8:], axis=0) + lda.topic_word_prior_     # sweeps 9..16
    np.testing.assert_allclose(lda.components_, expected, rtol=1e-13, atol=0)


def _ceiling_fit_is_the_fixed_fit(X, **params):
    """max_iter=None stopped at the ceiling 16 (windows restarted at the anchors 4 and 8)
    gives the model of max_iter=16, whose 'auto' averaging takes the same last 8 sweeps."""
    fixed = _lda(max_iter=16, **params).fit(X)
    with stopping.using(StoppingRule(tol=-math.inf, floor=4, ceiling=16)):
        ruled = _lda(**params).fit(X)
    assert ruled.n_iter_ == 16 and ruled.history_["stopped_by"] == "ceiling"
    np.testing.assert_array_equal(ruled.components_, fixed.components_)
    np.testing.assert_array_equal(ruled.doc_topic_prior_, fixed.doc_topic_prior_)
    assert ruled.topic_word_prior_ == fixed.topic_word_prior_
    assert ruled.bound_ == pytest.approx(fixed.bound_, rel=1e-12)


@pytest.mark.parametrize("algorithm", ["sparse", "dense", "minibatch"])
def test_a_ceiling_stop_is_the_fixed_fit_of_as_many_sweeps(corpus, algorithm):
    _ceiling_fit_is_the_fixed_fit(corpus, algorithm=algorithm)


@pytest.mark.gpu
@pytest.mark.parametrize("algorithm, storage", [("sparse", "dense"), ("sparse", "hybrid"),
                                                ("dense", "auto"), ("minibatch", "auto")])
def test_on_a_gpu_a_ceiling_stop_is_the_fixed_fit_of_as_many_sweeps(corpus, algorithm, storage):
    _ceiling_fit_is_the_fixed_fit(corpus, algorithm=algorithm, word_topic_storage=storage,
                                  device="cuda", n_components=40)


@pytest.mark.gpu
def test_on_a_gpu_a_fit_stops_by_the_tolerance(corpus):
    rule = StoppingRule(tol=0.005, floor=8, ceiling=1024)
    with stopping.using(rule):
        lda = _lda(device="cuda").fit(corpus)
    assert lda.history_["stopped_by"] == "tolerance" and lda.n_iter_ < rule.ceiling
    spreads = _spreads(lda.history_, rule, lda.n_iter_)
    assert spreads[lda.n_iter_] < rule.tol
    assert all(spreads[n] >= rule.tol for n in spreads if rule.floor <= n < lda.n_iter_)


def test_a_stop_between_anchors_averages_the_sweeps_since_the_last_one(corpus):
    # Scripted likelihoods (an evaluation only reads the chain) make the rule stop at check
    # point 6, between the anchors 4 and 8: the window is sweeps 5 and 6.
    rule = StoppingRule(tol=0.01, floor=4, ceiling=16)
    script = iter([-10.0, -8.0, -8.0, -7.999])               # check points 2, 3, 4, 6
    lda = _lda(doc_topic_prior=0.2, topic_word_prior=0.1)
    lda.n_features_in_ = corpus.shape[1]
    with stopping.using(rule):
        plan = lda._plan(CPU, "auto", 11)
    sampler = plan.sampler()
    n_tokens = float(corpus.sum())
    sampler.log_likelihood = lambda: next(script) * n_tokens
    state = loop.fit_corpus(plan, tokens(corpus), sampler)
    assert state.n_iter == 6 and state.history["stopped_by"] == "tolerance"
    lda.algorithm_, lda._seed = plan.backend.algorithm, 11
    lda.doc_topic_prior_, lda.topic_word_prior_ = 0.2, 0.1
    samples = _samples(lda, 5, corpus, 6)
    expected = np.mean(samples[4:6], axis=0) + 0.1
    np.testing.assert_allclose(state.components, expected, rtol=1e-13, atol=0)


def test_no_averaging_keeps_the_last_sample_and_a_count_needs_an_integer_max_iter(corpus):
    with stopping.using(StoppingRule(tol=-math.inf, floor=4, ceiling=8)):
        lda = _lda(doc_topic_prior=0.2, topic_word_prior=0.1, n_averaged_sweeps=0).fit(corpus)
        np.testing.assert_allclose(lda.components_, _samples(lda, 5, corpus, 8)[-1] + 0.1,
                                   rtol=1e-13, atol=0)
        with pytest.raises(ValueError, match="n_averaged_sweeps=3 needs an integer max_iter"):
            _lda(n_averaged_sweeps=3).fit(corpus)


# -- a failed fit -----------------------------------------------------------------------------

def test_a_failed_refit_leaves_the_model_as_it_was(corpus):
    lda = _lda(max_iter=5).fit(corpus)
    components, n_iter, history = lda.components_.copy(), lda.n_iter_, dict(lda.history_)

    def fail(iteration, info):
        if info["log_likelihood"] is not None and iteration >= 4:
            raise RuntimeError("stopped by the user")

    with stopping.using(StoppingRule(tol=-math.inf, floor=4, ceiling=16)):
        lda.set_params(max_iter=None)
        with pytest.raises(RuntimeError, match="stopped by the user"):
            lda.fit(corpus, callback=fail)
        lda.set_params(n_averaged_sweeps=2)
        with pytest.raises(ValueError, match="needs an integer max_iter"):
            lda.fit(corpus)
    np.testing.assert_array_equal(lda.components_, components)
    assert lda.n_iter_ == n_iter == 5
    assert lda.history_["stopped_by"] == history["stopped_by"] == "max_iter"
    np.testing.assert_array_equal(lda.history_["iteration"], history["iteration"])
