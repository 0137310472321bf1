"""Runs of sweeps (:mod:`sklearn_gpulda._fitting.runs`): where the fit loop lets a sampler sweep
on its own, and that a run gives the chain and the model of sweeps driven one by one."""

import warnings

import numpy as np
import pytest

from sklearn_gpulda import GPULatentDirichletAllocation
from sklearn_gpulda._fitting.runs import run_end
from sklearn_gpulda._input.corpus import tokens
from sklearn_gpulda.backends.numpy.sampler import NumpySampler

# Defaults otherwise: 'auto' priors learnt after sweeps 10 and 20, the last 12 sweeps averaged
# (the first averaged is sweep 14).
PARAMS = dict(n_components=6, max_iter=25, random_state=0, device="cpu")


def _every(n):
    return lambda i: i % n == 0


def test_a_run_ends_at_the_first_stop_or_at_the_end():
    assert run_end(1, 25, [_every(10)]) == 10
    assert run_end(10, 25, [_every(10)]) == 10  # a stop at the first sweep: a run of one
    assert run_end(11, 25, [_every(10), lambda i: i == 14]) == 14
    assert run_end(21, 25, [_every(10)]) == 25
    assert run_end(1, 25, []) == 25
    assert run_end(25, 25, []) == 25
    assert run_end(3, 25, [_every(10)], per_sweep=True) == 3


def test_a_run_cannot_start_past_the_end():
    with pytest.raises(ValueError, match="cannot start at sweep 26 of 25"):
        run_end(26, 25)


@pytest.fixture
def runs(monkeypatch):
    """The runs the fit loop hands to the NumPy sampler, as (first, last, accumulate_from)."""
    seen, real = [], NumpySampler.sweeps

    def sweeps(self, first, last, accumulate_from=None):
        seen.append((first, last, accumulate_from))
        return real(self, first, last, accumulate_from)

    monkeypatch.setattr(NumpySampler, "sweeps", sweeps)
    return seen


def test_runs_end_at_prior_updates_the_first_averaged_sweep_and_the_end(kjv, runs):
    GPULatentDirichletAllocation(**PARAMS).fit(kjv[:200])
    # Sweep 14's accumulation makes the running sum, in the loop; later runs accumulate.
    assert runs == [(1, 10, None), (11, 14, None), (15, 20, 14), (21, 25, 14)]


def test_runs_end_at_evaluations(kjv, runs):
    GPULatentDirichletAllocation(**PARAMS, evaluate_every=5, perp_tol=0.0).fit(kjv[:200])
    assert runs == [(1, 5, None), (6, 10, None), (11, 14, None), (15, 15, 14), (16, 20, 14),
                    (21, 25, 14)]


def test_without_averaging_or_prior_learning_one_run_is_the_fit(kjv, runs):
    GPULatentDirichletAllocation(**PARAMS, n_averaged_sweeps=0, doc_topic_prior=0.1,
                                 topic_word_prior=0.01).fit(kjv[:200])
    assert runs == [(1, 25, None)]


@pytest.mark.parametrize("per_sweep", [dict(callback=lambda i, info: None), dict(verbose=1)])
def test_a_callback_or_verbose_gets_every_sweep(kjv, runs, per_sweep, capsys):
    model = GPULatentDirichletAllocation(**PARAMS, **{k: v for k, v in per_sweep.items()
                                                      if k == "verbose"})
    model.fit(kjv[:200], **{k: v for k, v in per_sweep.items() if k == "callback"})
    assert runs == [(i, i, 14 if i > 14 else None) for i in range(1, 26)]


def test_runs_give_the_model_of_sweeps_one_by_one(kjv):
    # Without a callback the loop hands over runs; with one it drives every sweep on its own.
    X = kjv[:300]
    by_runs = GPULatentDirichletAllocation(**PARAMS).fit(X)
    by_sweeps = GPULatentDirichletAllocation(**PARAMS).fit(X, callback=lambda i, info: None)
    np.testing.assert_array_equal(by_runs.components_, by_sweeps.components_)
    np.testing.assert_array_equal(by_runs.doc_topic_prior_, by_sweeps.doc_topic_prior_)
    assert by_runs.topic_word_prior_ == by_sweeps.topic_word_prior_
    assert by_runs.bound_ == by_sweeps.bound_


def test_default_sweeps_is_sweep_then_accumulate(kjv):
    def chain():
        sampler = NumpySampler(6, 0.1, 0.01, 7)
        sampler.load(tokens(kjv[:200]))
        sampler.init_topics()
        return sampler

    one_by_one, run = chain(), chain()
    for it in range(1, 9):
        one_by_one.sweep(it)
        if it >= 5:
            one_by_one.accumulate_word_topic()
    run.sweeps(1, 4)
    run.sweeps(5, 8, accumulate_from=5)
    np.testing.assert_array_equal(run.topics(), one_by_one.topics())
    assert run.n_accumulated == one_by_one.n_accumulated == 4
    np.testing.assert_array_equal(run.mean_word_topic(), one_by_one.mean_word_topic())


def _averaging_fails_at(monkeypatch, n_done):
    """The NumPy sampler's accumulations fail with MemoryError once ``n_done`` have been made."""
    real = NumpySampler._accumulate

    def accumulate(self):
        if self.n_accumulated >= n_done:
            raise MemoryError("no room for the running sum (test)")
        real(self)

    monkeypatch.setattr(NumpySampler, "_accumulate", accumulate)


def test_default_averaging_out_of_memory_inside_a_run_goes_on_without_it(kjv, monkeypatch):
    # Sweep 16's accumulation (the third) fails inside the run 15-20: as when the loop drives
    # every sweep, the fit warns, drops the sum and goes on with the last sample.
    X = kjv[:200]
    _averaging_fails_at(monkeypatch, 2)
    with pytest.warns(RuntimeWarning, match="without averaging"):
        by_runs = GPULatentDirichletAllocation(**PARAMS).fit(X)
    with pytest.warns(RuntimeWarning, match="without averaging"):
        by_sweeps = GPULatentDirichletAllocation(**PARAMS).fit(X, callback=lambda i, info: None)
    monkeypatch.undo()
    unaveraged = GPULatentDirichletAllocation(**PARAMS, n_averaged_sweeps=0).fit(X)
    np.testing.assert_array_equal(by_runs.components_, by_sweeps.components_)
    np.testing.assert_array_equal(by_runs.components_, unaveraged.components_)
    assert by_runs.n_iter_ == 25


def test_asked_for_averaging_out_of_memory_inside_a_run_fails_the_fit(kjv, monkeypatch):
    model = GPULatentDirichletAllocation(**dict(PARAMS, max_iter=3)).fit(kjv[:200])
    before = model.components_.copy()
    _averaging_fails_at(monkeypatch, 2)
    model.set_params(n_averaged_sweeps=12, max_iter=25)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(MemoryError, match="no room"):
            model.fit(kjv[:200])
    np.testing.assert_array_equal(model.components_, before)
