"""The CPU engine's worker processes and their shared arrays
(:mod:`sklearn_gpulda.backends.numpy.processes`): the chain is the one-thread chain, bit for bit,
whichever kind of team runs it."""

import os

import numpy as np
import pytest
from _engine_checks import check_chains_alike_every_sweep
from joblib import parallel_config

from sklearn_gpulda import GPULatentDirichletAllocation
from sklearn_gpulda._input.corpus import tokens
from sklearn_gpulda._runtime import host
from sklearn_gpulda.backends.numpy import processes, sampler as sampler_module
from sklearn_gpulda.backends.numpy.processes import ProcessTeam, SharedStore, make_team
from sklearn_gpulda.backends.numpy.sampler import NumpySampler
from sklearn_gpulda.backends.numpy.threads import ThreadTeam
from sklearn_gpulda.datasets import load_kjv_chapters


@pytest.fixture(scope="module")
def kjv():
    return load_kjv_chapters().data[:300]


@pytest.fixture(autouse=True)
def processes_for_any_corpus(monkeypatch):
    """Small test corpora would stay on threads (PROCESS_MIN_TOKENS), or in-process on a small
    or busy machine (worker_count): here they go to workers, as on an idle 8-core machine."""
    monkeypatch.setattr(sampler_module, "PROCESS_MIN_TOKENS", 0)
    _machine(monkeypatch, cores=8, busy=0.0)
    monkeypatch.setattr(processes, "MIN_WORK_PER_WORKER", 1)


def _machine(monkeypatch, cores, busy):
    monkeypatch.setattr(processes, "usable_cores", lambda: cores)
    monkeypatch.setattr(processes, "busy_elsewhere", lambda cores=None: busy)


def _scale_into(item, factor, values, out):
    """A task: ``out[a:b] = values[a:b] * factor`` for ``item = (a, b)``; returns the pid."""
    a, b = item
    out[a:b] = values[a:b] * factor
    return os.getpid()


def test_more_than_one_job_runs_in_processes_unless_told_otherwise():
    assert type(make_team(1)) is ThreadTeam
    team = make_team(2)
    try:
        assert isinstance(team, ProcessTeam)
    finally:
        team.close()
    assert type(make_team(2, processes=False)) is ThreadTeam
    with parallel_config(backend="threading"):
        assert type(make_team(2)) is ThreadTeam


def test_tasks_write_the_store_and_arrays_outside_it():
    team = ProcessTeam(2)
    try:
        values = team.share("values", np.arange(10_000, dtype=np.float64))
        out = team.empty("out", (10_000,), np.float64)
        pids = team.run(_scale_into, team.token_ranges(10_000), factor=3.0, values=values,
                        out=out)
        np.testing.assert_array_equal(out, np.arange(10_000) * 3.0)
        assert os.getpid() not in pids  # the work ran in the workers
        # An output the store does not hold is copied in, and back once the tasks are done.
        plain = np.zeros(10_000)
        team.run(_scale_into, team.token_ranges(10_000), factor=2.0, values=values, out=plain)
        np.testing.assert_array_equal(plain, np.arange(10_000) * 2.0)
    finally:
        team.close()


def test_store_reuses_an_array_per_key_and_deletes_its_files():
    store = SharedStore()
    a = store.array("a", (4, 5), np.float32)
    assert store.array("a", (4, 5), np.float32) is a
    assert store.handle(np.asarray(a)) is not None  # a whole view is the same array
    assert store.handle(a[1:]) is None
    b = store.array("a", (4, 6), np.float32)  # a new shape is a new array
    assert b is not a and store.handle(b).shape == (4, 6)
    (folder,) = store.folders
    assert len(os.listdir(folder)) == 1
    kept = store.hand_over(store.owned((3,), np.float64))
    kept[:] = 7.0  # the caller's now: still mapped, its file gone
    assert len(os.listdir(folder)) == 1 and kept.sum() == 21.0
    store.close()
    assert not os.path.exists(folder)


def test_chain_in_processes_is_the_one_thread_chain_after_every_sweep(kjv):
    chains = [NumpySampler(70, 0.1, 0.05, seed=5, n_jobs=n) for n in (1, 2)]
    try:
        check_chains_alike_every_sweep(chains, tokens(kjv.tocsr()))
        assert isinstance(chains[1].team, ProcessTeam)
        # Topics set from outside go into the team's arrays too.
        z = chains[0].topics()[::-1].copy()
        for chain in chains:
            chain.set_topics(z)
            chain.sweep(9)
        np.testing.assert_array_equal(chains[0].topics(), chains[1].topics())
    finally:
        for chain in chains:
            chain.release()


def test_a_small_corpus_stays_on_threads(kjv, monkeypatch):
    corpus = tokens(kjv.tocsr())
    monkeypatch.setattr(sampler_module, "PROCESS_MIN_TOKENS", corpus.n_tokens + 1)
    chain = NumpySampler(5, 0.1, 0.05, seed=1, n_jobs=2)
    chain.load(corpus)
    try:
        assert type(chain.team) is ThreadTeam and chain.team.n_threads == 2
    finally:
        chain.release()


def test_threads_and_processes_fit_the_same_model(kjv):
    # Learnt priors every 3 sweeps and averaging: every step of the fit loop runs on workers.
    kw = dict(n_components=9, max_iter=12, prior_update_every=3, random_state=2, device="cpu",
              n_jobs=2)
    in_processes = GPULatentDirichletAllocation(**kw).fit(kjv)
    with parallel_config(backend="threading"):
        in_threads = GPULatentDirichletAllocation(**kw).fit(kjv)
    np.testing.assert_array_equal(in_processes.components_, in_threads.components_)
    np.testing.assert_array_equal(in_processes.doc_topic_prior_, in_threads.doc_topic_prior_)
    assert in_processes.topic_word_prior_ == in_threads.topic_word_prior_
    assert in_processes.bound_ == in_threads.bound_
    one = GPULatentDirichletAllocation(**{**kw, "n_jobs": 1}).fit(kjv)
    np.testing.assert_array_equal(one.components_, in_processes.components_)


def test_a_broken_pool_is_replaced():
    team = ProcessTeam(2)
    try:
        pool = processes._pool(2)
        pool.shutdown()
        values = team.share("values", np.ones(100))
        out = team.empty("out", (100,), np.float64)
        team.run(_scale_into, [(0, 100)], factor=5.0, values=values, out=out)
        np.testing.assert_array_equal(out, np.full(100, 5.0))
        assert processes._pool(2) is not pool
    finally:
        team.close()


@pytest.mark.parametrize("scale", [1.0, 0.7])
def test_word_topic_histogram_by_ranges_is_the_whole_tables(kjv, scale):
    # Merged from word ranges on two workers; the serial reading of B is the reference.
    X = kjv.astype(np.float64) * scale
    chain = NumpySampler(16, 0.1, 0.05, seed=4, n_jobs=2)
    chain.load(tokens(X.tocsr()))
    chain.init_topics()
    chain.sweep(1)
    try:
        b = chain.word_topic_counts().T
        nonzero = b[b != 0]
        values, freq = np.unique(nonzero, return_counts=True)
        got = chain.word_topic_histogram()
        np.testing.assert_array_equal(got[0], values)
        np.testing.assert_array_equal(got[1], freq)
        np.testing.assert_array_equal(got[2], b.sum(axis=0))
    finally:
        chain.release()


def _mapped_paths():
    """The files this worker maps."""
    return sorted({key[0] for key in processes._worker_maps})


def test_workers_unmap_the_files_of_a_closed_team():
    team = ProcessTeam(2)
    values = team.share("values", np.arange(50_000, dtype=np.float64))
    out = team.empty("out", (50_000,), np.float64)
    team.run(_scale_into, team.token_ranges(50_000), factor=1.0, values=values, out=out)
    folder = team.store.folders[0]
    team.close()
    seen = [p for paths in processes._pool(2).each(_mapped_paths) for p in paths]
    assert not [p for p in seen if p.startswith(folder)]


def test_a_chain_too_large_for_host_memory_is_refused_before_allocating(monkeypatch):
    # 40,000 words x 65,536 topics: about 63 GB of V x K tables, whatever the jobs.
    monkeypatch.setattr(sampler_module, "available_memory", lambda: 8 << 30)
    X = load_kjv_chapters().data[:20]
    import scipy.sparse as sp

    wide = sp.hstack([X, sp.csr_matrix((20, 40_000 - X.shape[1]))]).tocsr()
    chain = NumpySampler(65_536, 0.1, 0.05, seed=1, n_jobs=2)
    with pytest.raises(MemoryError, match="GiB of host memory"):
        chain.load(tokens(wide))
    assert chain.corpus is None and chain._tokens is None


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_topic_totals_from_the_count_tasks_are_every_token_counted(kjv, n_jobs):
    # The M-step's B tasks report their tokens per topic; summed, they must be the totals a
    # count of every token's topic gives, with or without worker processes.
    chain = NumpySampler(12, 0.1, 0.05, seed=7, n_jobs=n_jobs)
    chain.load(tokens(kjv.tocsr()))
    chain.init_topics()
    try:
        for it in range(1, 3):
            chain.sweep(it)
            totals = chain._topic_totals()
            assert totals.dtype == np.float64
            np.testing.assert_array_equal(totals, np.bincount(chain.topics(), minlength=12))
            np.testing.assert_array_equal(totals, chain.word_topic_counts().sum(axis=1))
    finally:
        chain.release()


@pytest.mark.parametrize("cores", [1, 2, 3, 4, 7, 16, 64])
@pytest.mark.parametrize("busy", [0.0, 0.4, 0.6, 1.0, 2.5, 6.0, 100.0])
def test_workers_and_caller_never_outnumber_the_free_cores(cores, busy):
    for n_jobs in (1, 2, 3, 8, 64, 10_000):
        for work in (0, processes.MIN_WORK_PER_WORKER * 3, 10**15):
            n = processes.worker_count(n_jobs, work, cores=cores, busy=busy)
            assert 1 <= n <= n_jobs
            if n > 1:  # one worker is never a team: the caller runs the work itself
                assert n + 1 + round(busy) <= cores
                assert work // n >= processes.MIN_WORK_PER_WORKER


def test_cores_and_load_are_read_from_the_machine(monkeypatch):
    monkeypatch.undo()  # the real readers, on a mocked machine
    monkeypatch.setattr(host.os, "sched_getaffinity", lambda pid: set(range(4)),
                        raising=False)
    monkeypatch.setattr(host.os, "cpu_count", lambda: 4)
    monkeypatch.setattr(host, "_cgroup_cores", lambda: None)
    monkeypatch.setattr(host, "_runnable_now", lambda: 4)
    monkeypatch.setattr(host.os, "getloadavg", lambda: (2.2, 1.0, 1.0))
    big = 10**15
    assert host.usable_cores() == 4
    assert host.busy_elsewhere() == pytest.approx(2.2)
    assert processes.worker_count(64, big) == 1  # 4 cores, 2 busy, 1 caller
    monkeypatch.setattr(host.os, "getloadavg", lambda: (0.3, 1.0, 1.0))
    assert processes.worker_count(64, big) == 3
    # A load average that still counts this process's own finished fit, while nothing else
    # runs now, takes no core.
    monkeypatch.setattr(host.os, "getloadavg", lambda: (9.0, 1.0, 1.0))
    monkeypatch.setattr(host, "_runnable_now", lambda: 1)
    assert processes.worker_count(64, big) == 3
    # Half the machine's cores for this process: half its load.
    monkeypatch.setattr(host.os, "cpu_count", lambda: 8)
    monkeypatch.setattr(host, "_runnable_now", lambda: 5)
    monkeypatch.setattr(host.os, "getloadavg", lambda: (4.0, 1.0, 1.0))
    assert host.busy_elsewhere() == pytest.approx(2.0)
    # A CPU quota of two cores.
    monkeypatch.setattr(host, "_cgroup_cores", lambda: 2)
    assert host.usable_cores() == 2
    assert processes.worker_count(64, big) == 1


def test_small_work_and_small_machines_run_in_process(kjv, monkeypatch):
    monkeypatch.setattr(processes, "MIN_WORK_PER_WORKER", 6_000_000)
    assert processes.worker_count(16, 2 * 6_000_000 - 1, cores=64, busy=0) == 1
    assert processes.worker_count(16, 2 * 6_000_000, cores=64, busy=0) == 2
    corpus = tokens(kjv.tocsr())
    small = processes.sweep_work(corpus.n_tokens, 5) < 2 * processes.MIN_WORK_PER_WORKER
    assert small
    for cores, busy, k in [(64, 0.0, 5), (2, 0.0, 2000), (16, 15.0, 2000)]:
        _machine(monkeypatch, cores, busy)
        chain = NumpySampler(k, 0.1, 0.05, seed=1, n_jobs=64)
        chain.load(corpus)
        try:
            assert type(chain.team) is ThreadTeam and chain.team.n_threads == 1
        finally:
            chain.release()


def test_the_chosen_team_does_not_change_the_chain(kjv, monkeypatch):
    corpus = tokens(kjv.tocsr())
    monkeypatch.setattr(processes, "MIN_WORK_PER_WORKER", corpus.n_tokens * 30)
    seen, states = [], []
    # In-process, two and four worker processes, and threads where processes may not start.
    for cores, busy, backend in [(2, 0.0, None), (8, 5.0, None), (8, 0.0, None),
                                 (8, 0.0, "threading")]:
        _machine(monkeypatch, cores, busy)
        chain = NumpySampler(40, 0.1, 0.05, seed=6, n_jobs=16)
        try:
            with parallel_config(backend=backend or "loky"):
                chain.load(corpus)
                seen.append((type(chain.team).__name__, chain.team.n_threads))
                chain.init_topics()
                for it in range(3):
                    chain.sweep(it)
                states.append((chain.topics(), chain.word_topic_counts(),
                               chain.log_likelihood()))
        finally:
            chain.release()
    assert seen == [("ThreadTeam", 1), ("ProcessTeam", 2), ("ProcessTeam", 4),
                    ("ThreadTeam", 4)]
    for z, b, ll in states[1:]:
        np.testing.assert_array_equal(z, states[0][0])
        np.testing.assert_array_equal(b, states[0][1])
        assert ll == states[0][2]
