"""The CPU engine on several threads gives the model of one thread, bit for bit
(:mod:`sklearn_gpulda.backends.numpy.threads`)."""

import numpy as np
import pytest
from joblib import parallel_config

from sklearn_gpulda import GPULatentDirichletAllocation
from sklearn_gpulda._input.corpus import tokens
from sklearn_gpulda.backends.numpy import processes
from sklearn_gpulda.backends.numpy.sampler import NumpySampler
from sklearn_gpulda.backends.numpy.threads import (
    CHUNKS_PER_THREAD,
    ThreadTeam,
    chunks,
    resolve_n_jobs,
)
from sklearn_gpulda.datasets import load_kjv_chapters

from _engine_checks import check_chains_alike_every_sweep


@pytest.fixture(scope="module")
def kjv():
    return load_kjv_chapters().data[:400]


@pytest.fixture(autouse=True)
def several_workers(monkeypatch):
    """The test corpora are too small, and the test machine may be too small or busy, for the
    engine to start workers (processes.worker_count): here the jobs asked are the workers."""
    monkeypatch.setattr(processes, "usable_cores", lambda: 64)
    monkeypatch.setattr(processes, "busy_elsewhere", lambda cores=None: 0.0)
    monkeypatch.setattr(processes, "MIN_WORK_PER_WORKER", 1)


def _fit(X, n_jobs, **kw):
    kw = {"n_components": 12, "max_iter": 12, "random_state": 3, "device": "cpu", **kw}
    return GPULatentDirichletAllocation(n_jobs=n_jobs, **kw).fit(X)


def _same_model(a, b):
    np.testing.assert_array_equal(a.components_, b.components_)
    np.testing.assert_array_equal(a.doc_topic_prior_, b.doc_topic_prior_)
    assert a.topic_word_prior_ == b.topic_word_prior_
    assert a.bound_ == b.bound_


@pytest.mark.parametrize("algorithm", ["sparse", "dense"])
def test_batch_fit_does_not_depend_on_n_jobs(kjv, algorithm):
    # Learned priors and averaging on (the defaults), so every step of the fit loop is covered.
    one = _fit(kjv, 1, algorithm=algorithm)
    for n_jobs in (2, 3, -1):
        _same_model(one, _fit(kjv, n_jobs, algorithm=algorithm))


def test_weighted_tokens_do_not_depend_on_n_jobs(kjv):
    # Fractional counts make every count a float sum, whose value depends on the order of its
    # terms: the row-wise cuts keep that order.
    X = kjv.astype(np.float64) * 0.7
    _same_model(_fit(X, 1), _fit(X, 3))


def test_online_learning_does_not_depend_on_n_jobs(kjv):
    kw = dict(learning_method="online", batch_size=64, max_iter=2)
    _same_model(_fit(kjv, 1, **kw), _fit(kjv, 4, **kw))


def test_chain_state_matches_one_thread_after_every_sweep(kjv):
    chains = [NumpySampler(8, 0.1, 0.05, seed=11, n_jobs=n) for n in (1, 4)]
    try:
        check_chains_alike_every_sweep(chains, tokens(kjv.tocsr()))
    finally:
        for chain in chains:
            chain.release()


def test_n_jobs_is_read_as_scikit_learn_reads_it():
    assert resolve_n_jobs(1) == 1
    assert resolve_n_jobs(None) == 1
    assert resolve_n_jobs(-1) >= 1
    with parallel_config(n_jobs=3):
        assert resolve_n_jobs(None) == 3


def test_cuts_cover_every_token_and_row_once():
    team = ThreadTeam(4)
    try:
        for n, k in [(0, 5), (1, 5), (10_000, 7), (123_457, 1000)]:
            slices = [sl for r in team.token_ranges(n) for sl in chunks(*r, k)]
            covered = np.concatenate([np.arange(s.start, s.stop) for s in slices] or [[]])
            np.testing.assert_array_equal(covered, np.arange(n))
            assert len(team.token_ranges(n)) <= CHUNKS_PER_THREAD * 4
        ptr = np.array([0, 5, 5, 90, 91, 200, 400, 401])
        ranges = team.row_ranges(ptr)
        assert ranges[0][0] == 0 and ranges[-1][1] == len(ptr) - 1
        assert all(a[1] == b[0] and a[0] < a[1] for a, b in zip(ranges, ranges[1:]))
        # The work is spread: more than one range for several threads.
        assert len(ranges) > 1
        assert team.map(lambda x: x * x, range(20)) == [x * x for x in range(20)]
    finally:
        team.close()


def test_transform_and_score_do_not_depend_on_n_jobs(kjv):
    model = _fit(kjv[:200], 1, max_iter=5)
    X = kjv[200:]
    theta = model.transform(X)
    score = model.score(X)
    model.set_params(n_jobs=3)
    np.testing.assert_array_equal(model.transform(X), theta)
    assert model.score(X) == score
