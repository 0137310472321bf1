"""Training on a Dask cluster (:mod:`sklearn_gpulda.dask`): the model of one process, bit for bit,
whatever the number of workers; a lost worker is an error, not a hang or a half-fitted model."""

import os
import pickle
import signal
from pathlib import Path

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")
da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")

from sklearn.base import clone  # noqa: E402

from sklearn_gpulda import GPULatentDirichletAllocation  # noqa: E402
from sklearn_gpulda._runtime.device import gpu_count  # noqa: E402
from sklearn_gpulda.dask import LatentDirichletAllocation, WorkerLost  # noqa: E402
from sklearn_gpulda.datasets import load_kjv_chapters, load_uci_bow  # noqa: E402

NIPS = (Path(__file__).resolve().parents[2] / "shared" / "data" / "nips_tmt"
        / "docword.nips_tmt.txt.gz")

# 'auto' priors (learnt every 10 sweeps) and averaging of the last half are the defaults, so
# 25 sweeps cover prior learning twice and 12 averaged sweeps.
PARAMS = dict(n_components=8, max_iter=25, random_state=0, device="cpu")


@pytest.fixture(scope="module")
def kjv():
    return load_kjv_chapters().data


@pytest.fixture(scope="module")
def reference(kjv):
    return GPULatentDirichletAllocation(**PARAMS).fit(kjv)


def _cluster(n_workers):
    cluster = distributed.LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                                       dashboard_address=None)
    return cluster, _client(cluster, n_workers)


def _client(cluster, n_workers):
    """A client of ``cluster`` once its ``n_workers`` workers are known to the scheduler: a fit
    cuts the counts among the workers it sees, and a worker process still registering (seen
    with the GPU suite's three pytest processes starting theirs at once) would leave it out."""
    client = distributed.Client(cluster)
    client.wait_for_workers(n_workers, timeout=120)
    return client


def _same_model(a, b):
    np.testing.assert_array_equal(a.components_, b.components_)
    np.testing.assert_array_equal(a.doc_topic_prior_, b.doc_topic_prior_)
    assert a.topic_word_prior_ == b.topic_word_prior_
    assert a.n_iter_ == b.n_iter_
    # The final training perplexity is summed over shards: equal up to rounding only.
    assert a.bound_ == pytest.approx(b.bound_, rel=1e-12)


@pytest.mark.parametrize("n_workers", [1, 2, 3])
def test_fit_equals_one_process_whatever_the_workers(kjv, reference, n_workers):
    cluster, client = _cluster(n_workers)
    with cluster, client:
        model = LatentDirichletAllocation(client=client, **PARAMS).fit(kjv)
        _same_model(model, reference)
        # A Dask array of uneven row blocks: more shards than workers, same model.
        X = da.from_array(kjv, chunks=((400, 1, 300, kjv.shape[0] - 701), kjv.shape[1]),
                          asarray=False)
        from_blocks = LatentDirichletAllocation(client=client, **PARAMS).fit(X)
        _same_model(from_blocks, reference)
        # Transform and score of a Dask array, block by block, match the plain model's.
        np.testing.assert_allclose(from_blocks.transform(X).compute(),
                                   reference.transform(kjv), rtol=1e-12)
        assert from_blocks.score(X) == pytest.approx(reference.score(kjv), rel=1e-12)
        assert from_blocks.perplexity(X) == pytest.approx(reference.perplexity(kjv), rel=1e-12)


@pytest.mark.skipif(not NIPS.exists(), reason="needs ../shared/data/nips_tmt")
def test_nips_sample_equals_one_process():
    X = load_uci_bow(NIPS).data[:300]
    params = dict(PARAMS, n_components=20, max_iter=12)
    one = GPULatentDirichletAllocation(**params).fit(X)
    cluster, client = _cluster(2)
    with cluster, client:
        _same_model(LatentDirichletAllocation(client=client, **params).fit(X), one)


def test_lost_worker_is_an_error_and_the_model_stays(kjv):
    cluster, client = _cluster(2)
    with cluster, client:
        model = LatentDirichletAllocation(client=client, **dict(PARAMS, max_iter=3)).fit(kjv)
        before = model.components_.copy()
        workers = sorted(client.scheduler_info()["workers"])
        pid = client.run(os.getpid, workers=[workers[1]])[workers[1]]

        def kill_at_sweep_3(iteration, info):
            if iteration == 3:
                os.kill(pid, signal.SIGKILL)

        model.set_params(max_iter=200)
        with pytest.raises(WorkerLost, match="lost during the fit"):
            model.fit(kjv, callback=kill_at_sweep_3)
        # The failed refit left the earlier model as it was.
        assert model.max_iter == 200 and model.n_iter_ == 3
        np.testing.assert_array_equal(model.components_, before)


def test_plain_model_pickles_and_parameters_clone(kjv, reference):
    cluster, client = _cluster(1)
    with cluster, client:
        model = LatentDirichletAllocation(client=client, **PARAMS).fit(kjv[:200])
        local = model.to_local()
        assert type(local) is GPULatentDirichletAllocation
        np.testing.assert_array_equal(local.components_, model.components_)
        again = pickle.loads(pickle.dumps(local))
        np.testing.assert_array_equal(again.transform(kjv[:5]), model.transform(kjv[:5]))
        twin = clone(model)
        assert twin.get_params() == model.get_params() and twin.client is client
        # The distributed estimator pickles too, without its client.
        assert pickle.loads(pickle.dumps(model)).client is None


def test_unsupported_settings_are_clear_errors(kjv):
    cluster, client = _cluster(1)
    with cluster, client:
        with pytest.raises(ValueError, match="learning_method='online'"):
            LatentDirichletAllocation(client=client, learning_method="online",
                                      device="cpu").fit(kjv[:50])
        with pytest.raises(ValueError, match="its own first visible GPU"):
            LatentDirichletAllocation(client=client, device="cuda:1").fit(kjv[:50])
        if gpu_count() == 0:
            with pytest.raises(RuntimeError, match="see no GPU"):
                LatentDirichletAllocation(client=client, device="cuda").fit(kjv[:50])
            # 'auto' on workers without a GPU is their CPU engine.
            model = LatentDirichletAllocation(client=client, n_components=3, max_iter=2,
                                              random_state=0).fit(kjv[:50])
            assert model.device_ == "cpu"
        else:
            with pytest.raises(ValueError, match="does not run on GPU workers"):
                LatentDirichletAllocation(client=client, device="cuda",
                                          algorithm="dense").fit(kjv[:50])
        with pytest.raises(ValueError, match="Negative values in data"):
            bad = kjv[:50].toarray().astype(float)
            bad[0, 0] = -1
            LatentDirichletAllocation(client=client, device="cpu").fit(
                da.from_array(bad, chunks=(25, bad.shape[1])))


def test_without_a_client_the_error_says_what_to_do(kjv):
    with pytest.raises(ValueError, match="no Dask client"):
        LatentDirichletAllocation(device="cpu").fit(kjv[:50])


# -- GPU workers -------------------------------------------------------------------------------
# The sparse engine named: workers run it, while 'auto' on one GPU may take the dense engine
# (backends/auto_rule.py), whose model is its own.
GPU_PARAMS = dict(n_components=20, max_iter=25, random_state=0, device="cuda",
                  algorithm="sparse")


@pytest.fixture(scope="module")
def gpu_reference(kjv):
    return GPULatentDirichletAllocation(**GPU_PARAMS).fit(kjv)


def _spy_on_nccl(monkeypatch):
    """The list of NCCL communicators the driver asks the shards to make during the test."""
    from sklearn_gpulda.dask import _nccl_sampler

    joined, real = [], _nccl_sampler.NcclDaskSampler.join

    def join(self, exchange="ring"):
        joined.append(len(self.shards))
        real(self, exchange)

    monkeypatch.setattr(_nccl_sampler.NcclDaskSampler, "join", join)
    return joined


def test_which_shards_sum_in_place_and_how():
    from sklearn_gpulda.dask._estimator import _in_place_exchange as how

    one_host = [("a", "0000:1b:00.0"), ("a", "0000:1c:00.0")]
    two_hosts = [("a", "0000:1b:00.0"), ("b", "0000:1b:00.0")]  # the same bus id on each
    assert how(one_host) == how(one_host, integral=False) == "ring"
    assert how([("a", "0000:1b:00.0")]) == "ring"
    assert how(two_hosts, across_hosts=True) == "changes"
    assert how(two_hosts, integral=False, across_hosts=True) == "ring"  # would drift
    assert how(two_hosts, across_hosts=False) is None  # the client sums
    assert how([("a", "0000:1b:00.0"), ("a", "0000:1b:00.0")]) is None  # one GPU, two ranks
    assert how([("a", "0000:1b:00.0"), None]) is None                   # a CPU or no NCCL
    assert how([]) is None


def test_nccl_across_hosts_is_asked_for(monkeypatch):
    from sklearn_gpulda.dask._estimator import ACROSS_HOSTS_VARIABLE
    from sklearn_gpulda.dask._estimator import _in_place_exchange as how

    two_hosts = [("a", "0000:1b:00.0"), ("b", "0000:1c:00.0")]
    monkeypatch.delenv(ACROSS_HOSTS_VARIABLE, raising=False)
    assert how(two_hosts) is None
    monkeypatch.setenv(ACROSS_HOSTS_VARIABLE, "1")
    assert how(two_hosts) == "changes"


@pytest.mark.gpu
@pytest.mark.parametrize("n_workers", [1, 2])
def test_gpu_workers_equal_one_gpu_fit(kjv, gpu_reference, n_workers, monkeypatch):
    # Worker processes of a plain cluster share GPU 0: two shards, each keyed by its tokens'
    # places in the whole corpus, with B summed on the driver, give the one-GPU chain. One
    # worker sums B in place (NCCL on one rank) where its CuPy has NCCL.
    from sklearn_gpulda.backends.cuda.multi_gpu.all_reduce import nccl_module

    joined = _spy_on_nccl(monkeypatch)
    cluster, client = _cluster(n_workers)
    with cluster, client:
        model = LatentDirichletAllocation(client=client, **GPU_PARAMS).fit(kjv)
        assert joined == ([1] if n_workers == 1 and nccl_module() is not None else [])
        _same_model(model, gpu_reference)
        assert model.device_ == "cuda:0"
        X = da.from_array(kjv, chunks=((500, 1, kjv.shape[0] - 501), kjv.shape[1]),
                          asarray=False)
        auto = LatentDirichletAllocation(client=client, **dict(GPU_PARAMS, device="auto"))
        _same_model(auto.fit(X), gpu_reference)


@pytest.mark.gpu
def test_one_dask_cuda_worker_equals_one_gpu_fit(kjv, gpu_reference):
    dask_cuda = pytest.importorskip("dask_cuda")
    with dask_cuda.LocalCUDACluster(n_workers=1, dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        model = LatentDirichletAllocation(client=client, **GPU_PARAMS).fit(kjv)
        _same_model(model, gpu_reference)


@pytest.mark.gpu
@pytest.mark.skipif(gpu_count() < 2, reason="needs two GPUs")
def test_two_dask_cuda_workers_sum_in_place(kjv, gpu_reference, monkeypatch):
    dask_cuda = pytest.importorskip("dask_cuda")
    joined = _spy_on_nccl(monkeypatch)
    with dask_cuda.LocalCUDACluster(n_workers=2, dashboard_address=None) as cluster, \
            _client(cluster, 2) as client:
        model = LatentDirichletAllocation(client=client, **GPU_PARAMS).fit(kjv)
        _same_model(model, gpu_reference)
    assert joined == [2]


@pytest.mark.gpu
@pytest.mark.skipif(gpu_count() < 2, reason="needs two GPUs")
@pytest.mark.parametrize("capacity", ["table", 1])
def test_workers_summing_changed_cells_give_the_one_gpu_model(kjv, gpu_reference,
                                                              capacity, monkeypatch):
    # The exchange of hosts apart, forced on one host. With room for every cell each sweep's
    # changes are gathered; with room for one change nearly every sweep sums the whole table.
    # (With the default capacity a small corpus's early sweeps change too many cells to be
    # worth listing, so the default would test a mix of the two.)
    from sklearn_gpulda.backends.cuda.multi_gpu.all_reduce import nccl_module
    from sklearn_gpulda.dask import _nccl_sampler
    from sklearn_gpulda.dask._cluster import local_gpu_cluster

    if nccl_module() is None:
        pytest.skip("CuPy has no NCCL here")
    n_cells = kjv.shape[1] * GPU_PARAMS["n_components"]
    monkeypatch.setattr(_nccl_sampler.NcclDaskSampler, "exchange", "changes")
    monkeypatch.setattr(_nccl_sampler.NcclDaskSampler, "exchange_capacity",
                        n_cells if capacity == "table" else capacity)
    records = []
    real = _nccl_sampler.NcclDaskSampler.sweeps

    def sweeps(self, first, last, accumulate_from=None):
        real(self, first, last, accumulate_from)
        records[:] = self.exchange_records()

    monkeypatch.setattr(_nccl_sampler.NcclDaskSampler, "sweeps", sweeps)
    with local_gpu_cluster(2) as cluster, _client(cluster, 2) as client:
        model = LatentDirichletAllocation(client=client, **GPU_PARAMS).fit(kjv)
    _same_model(model, gpu_reference)
    n_sweeps = GPU_PARAMS["max_iter"]
    ring = 4 * n_cells  # what each of two ranks sends in NCCL's ring all-reduce
    assert len(records) == 2
    for record in records:
        sent, lists = record["sent"], record["lists"]
        assert len(sent) == len(lists) == n_sweeps + 1
        assert lists[0] is None and sent[0] == ring  # the initial topics: the whole table
        for listed, n_bytes in zip(lists[1:], sent[1:]):
            assert n_bytes == (ring if listed is None else 12 * listed)
        gathered = [m for m in lists[1:] if m is not None]
        if capacity == "table":
            assert len(gathered) == n_sweeps and all(m > 0 for m in gathered)
        else:
            assert len(gathered) <= 2


def test_errors_a_dying_worker_causes_are_told_apart():
    from distributed import KilledWorker
    from distributed.client import FutureCancelledError
    from distributed.comm.core import CommClosedError

    from sklearn_gpulda.dask._sampler import _could_be_worker_loss

    assert _could_be_worker_loss(FutureCancelledError("shard-1", "lost dependencies"))
    assert _could_be_worker_loss(CommClosedError("in <TCP>: Stream is closed"))
    assert _could_be_worker_loss(KilledWorker("shard-1", "tcp://w", 3))
    assert _could_be_worker_loss(ConnectionResetError())
    try:  # the error a shard call raised, from a closed connection
        try:
            raise ConnectionResetError()
        except OSError as exc:
            raise RuntimeError("call failed") from exc
    except RuntimeError as exc:
        assert _could_be_worker_loss(exc)
    assert not _could_be_worker_loss(ValueError("bad counts"))


class _Alive:
    """A stand-in for the cluster's liveness check: reports the loss from its ``lost_at``-th
    call on (never, for None)."""

    def __init__(self, lost_at):
        self.lost_at, self.calls = lost_at, 0

    def __call__(self):
        from sklearn_gpulda.dask._sampler import WorkerLost

        self.calls += 1
        if self.lost_at is not None and self.calls >= self.lost_at:
            raise WorkerLost("a worker holding a shard left")


def test_a_loss_reported_late_is_still_told_as_worker_lost(monkeypatch):
    # The scheduler may cancel a call before it drops the dead worker: after a cancelled call
    # the check is repeated until the loss is reported (or the grace time ends); after any
    # other error it is made once.
    from distributed.client import FutureCancelledError

    from sklearn_gpulda.dask import _sampler

    monkeypatch.setattr(_sampler, "LOSS_GRACE_S", 2.0)
    fake = type("Fake", (), {})()
    fake.check_alive = _Alive(lost_at=3)
    with pytest.raises(_sampler.WorkerLost):
        _sampler.DaskSampler._check_alive_after(fake, FutureCancelledError("k", "lost"))
    assert fake.check_alive.calls == 3
    fake.check_alive = _Alive(lost_at=None)
    _sampler.DaskSampler._check_alive_after(fake, ValueError("bad counts"))
    assert fake.check_alive.calls == 1
    monkeypatch.setattr(_sampler, "LOSS_GRACE_S", 0.3)
    _sampler.DaskSampler._check_alive_after(fake, FutureCancelledError("k", "lost"))
    assert fake.check_alive.calls > 2  # retried through the grace time, then passed on


def test_hybrid_storage_is_refused_on_a_cluster_and_the_model_stays(kjv):
    cluster, client = _cluster(1)
    with cluster, client:
        model = LatentDirichletAllocation(client=client, **dict(PARAMS, max_iter=3))
        model.fit(kjv[:50])
        before = model.components_.copy()
        model.set_params(word_topic_storage="hybrid", random_state=1)
        with pytest.raises(ValueError, match="does not run on a Dask cluster"):
            model.fit(kjv[:50])
        np.testing.assert_array_equal(model.components_, before)


# -- the sweep loop on the workers ----------------------------------------------------------------
class _Done:
    """A finished call, as an actor's future."""

    def __init__(self, value):
        self.value = value

    def result(self, timeout=None):
        return self.value


class _RecordingShard:
    """Stands in for a GPU shard's actor: records the calls, answers sweeps_summed with the
    changed cells it is told to count."""

    def __init__(self, calls, rank):
        self.calls, self.rank = calls, rank

    def sweeps_summed(self, first, last, accumulate_from, count_changes, priors=None, fetch=(),
                      updates=None):
        self.calls.append((self.rank, first, last, accumulate_from, count_changes))
        if priors is not None or fetch:
            self.calls.append((self.rank, "priors", priors, "fetch", fetch))
        out = {"changes": list(range(first, last + 1)) if count_changes else None}
        if updates is not None:
            # The sweeps the run updated the priors after, and what it learned.
            due = [i for i in range(first, last + 1) if updates.due(i)]
            self.calls.append((self.rank, "updates", due))
            out["priors"] = (np.full(4, 0.5 + last), 0.01 * last)
        if "doc" in fetch:  # one document holding `rank + 1` tokens of topic 0
            out["doc"] = (np.array([0]), np.array([float(self.rank + 1)]), np.array([1]))
        if "word" in fetch:
            out["word"] = (np.array([1.0]), np.array([4]), np.array([4.0, 0, 0, 0]))
        return _Done(out)

    def set_priors(self, alpha, beta):
        self.calls.append((self.rank, "set_priors", alpha, beta))
        return _Done(None)

    def log_likelihood(self):
        self.calls.append((self.rank, "log_likelihood"))
        return _Done(-1.0)


def _recording_nccl_sampler(n_shards, calls):
    from sklearn_gpulda._runtime.device import Device
    from sklearn_gpulda.dask._nccl_sampler import NcclDaskSampler

    shards = [_RecordingShard(calls, rank) for rank in range(n_shards)]
    return NcclDaskSampler(shards, 4, 0.25, 0.01, 0, Device("cuda", (0,)), lambda: None)


def test_a_run_is_one_call_per_shard_and_the_first_accumulates(monkeypatch):
    calls = []
    sampler = _recording_nccl_sampler(3, calls)
    sampler.sweeps(1, 9)
    sampler.sweeps(10, 14, accumulate_from=12)
    assert calls == [(0, 1, 9, None, False), (1, 1, 9, None, False), (2, 1, 9, None, False),
                     (0, 10, 14, 12, False), (1, 10, 14, None, False),
                     (2, 10, 14, None, False)]
    assert sampler.n_accumulated == 3  # sweeps 12, 13, 14
    log = []
    monkeypatch.setattr(type(sampler), "change_log", log)
    calls.clear()
    sampler.sweeps(15, 16, accumulate_from=12)
    assert calls[0] == (0, 15, 16, 12, True) and calls[1] == (1, 15, 16, None, False)
    assert log == [15, 16] and sampler.n_accumulated == 5


def test_averaging_out_of_memory_on_the_first_shard_ends_the_run_in_step():
    # The first shard's accumulation fails at sweep 12: every shard has sampled the whole run
    # (their sums stay in step), the driver counts sweeps 10 and 11 as averaged and raises the
    # MemoryError the fit loop steps over, naming the run's last sweep as where the chain is.
    class OutOfMemory(_RecordingShard):
        def sweeps_summed(self, *args, **kwargs):
            out = super().sweeps_summed(*args, **kwargs).result()
            if self.rank == 0:
                out["averaging_failed"] = (12, "out of memory (a test's)")
            return _Done(out)

    calls = []
    sampler = _recording_nccl_sampler(2, calls)
    sampler.shards = [OutOfMemory(calls, rank) for rank in range(2)]
    with pytest.raises(MemoryError, match="at sweep 12: out of memory") as caught:
        sampler.sweeps(10, 14, accumulate_from=10)
    assert caught.value.sweep == 14 and sampler.n_accumulated == 2
    assert calls == [(0, 10, 14, 10, False), (1, 10, 14, None, False)]


def test_a_shard_whose_averaging_runs_out_of_memory_keeps_sampling_in_step():
    from sklearn_gpulda.dask._shard import Shard

    log = []

    class Chain:
        last = None

        def sweep(self, iteration):
            self.last = iteration
            log.append(("sweep", iteration))

        def accumulate_word_topic(self):
            if self.last == 12:
                raise MemoryError("averaging needs more (a test's)")
            log.append("accumulated")

    shard = Shard.__new__(Shard)
    shard.chain, shard.iteration, shard._previous = Chain(), 9, None
    shard._summed = lambda: log.append("summed")
    out = shard.sweeps_summed(10, 14, accumulate_from=10)
    assert out["averaging_failed"] == (12, "averaging needs more (a test's)")
    assert log == [("sweep", 10), "summed", "accumulated", ("sweep", 11), "summed",
                   "accumulated", ("sweep", 12), "summed", ("sweep", 13), "summed",
                   ("sweep", 14), "summed"]
    assert shard.iteration == 14
    assert shard.sweeps_summed(15, 15, accumulate_from=10)["averaging_failed"] is None


def test_prior_updates_travel_with_the_runs():
    # A prior update between two runs reads the histograms the first run brought back, and its
    # priors go out with the second run's call: one round trip per run.
    calls = []
    sampler = _recording_nccl_sampler(2, calls)
    sampler.load(object())  # a corpus: set_priors now reaches the shards
    sampler.prefetch = ("doc", "word")
    sampler.sweeps(1, 10)
    assert calls[1] == (0, "priors", None, "fetch", ("doc", "word"))
    assert calls[3] == (1, "priors", None, "fetch", ("doc",))
    calls.clear()
    topic, count, n_docs = sampler.doc_topic_histogram()
    assert topic.tolist() == [0, 0] and count.tolist() == [1.0, 2.0] and n_docs.tolist() == [1, 1]
    assert sampler.word_topic_histogram()[1].tolist() == [4]
    sampler.set_priors(alpha=np.array([0.1, 0.2, 0.3, 0.4]), beta=0.02)
    assert calls == []  # nothing sent yet
    sampler.sweeps(11, 20)
    sent = [c for c in calls if c[1] == "priors"]
    assert len(sent) == 2 and all(c[2][1] == 0.02 for c in sent)
    assert sent[0][2][0].tolist() == [0.1, 0.2, 0.3, 0.4]
    assert not [c for c in calls if c[1] == "set_priors"]
    # Priors set before any other call go out first, in a call of their own.
    calls.clear()
    sampler.set_priors(beta=0.03)
    sampler.log_likelihood()
    assert calls[:2] == [(0, "set_priors", sampler._alpha, 0.03),
                         (1, "set_priors", sampler._alpha, 0.03)]
    assert calls[2:] == [(0, "log_likelihood"), (1, "log_likelihood")]
    # A sweep makes the fetched histograms stale.
    sampler.prefetch = ()
    sampler.sweeps(21, 22)
    assert "doc" not in sampler._fetched and "word" not in sampler._fetched


def test_prior_updates_run_on_the_shards_inside_the_runs():
    # With integer counts the shards make the updates themselves: the driver passes the fit's
    # updates with each run that holds one, sends no priors and fetches no histograms, and
    # reads the priors the run learned from the first shard's answer.
    from sklearn_gpulda._fitting.batch import PriorUpdates
    from sklearn_gpulda.backends.priors import Prior

    corpus = type("Corpus", (), dict(n_words=7, doc_lengths=lambda self: np.array([3.0, 4.0])))()
    updates = PriorUpdates(Prior(0.25, True), Prior(0.01, True), 5, 10, corpus)
    calls = []
    sampler = _recording_nccl_sampler(2, calls)
    sampler.load(object())
    sampler.prefetch = ("doc", "word")
    assert not sampler.run_prior_updates(updates)  # counts not known to be integers
    sampler.integral = True
    assert sampler.run_prior_updates(updates) and sampler.prefetch == ()
    sampler.sweeps(1, 4)  # no update due: none sent
    assert calls == [(0, 1, 4, None, False), (1, 1, 4, None, False)]
    calls.clear()
    sampler.sweeps(5, 30)
    assert calls == [(0, 5, 30, None, False), (0, "updates", [15, 25]),
                     (1, 5, 30, None, False), (1, "updates", [15, 25])]
    assert sampler.alpha.tolist() == [30.5] * 4 and sampler.beta == 0.3
    # The shards hold them already: nothing goes out before the next call.
    calls.clear()
    sampler.log_likelihood()
    assert calls == [(0, "log_likelihood"), (1, "log_likelihood")]


def test_shards_that_learn_different_priors_stop_the_fit():
    # Every shard must hold the priors one process learns; a shard whose differ (other builds of
    # NumPy or SciPy on another host) would sample another chain, so the fit stops.
    from sklearn_gpulda._fitting.batch import PriorUpdates
    from sklearn_gpulda.backends.priors import Prior

    class Drifting(_RecordingShard):
        def sweeps_summed(self, *args, **kwargs):
            out = super().sweeps_summed(*args, **kwargs).result()
            if self.rank == 1 and "priors" in out:
                out["priors"] = (out["priors"][0], np.nextafter(out["priors"][1], 1.0))
            return _Done(out)

    corpus = type("Corpus", (), dict(n_words=7, doc_lengths=lambda self: np.array([3.0])))()
    calls = []
    sampler = _recording_nccl_sampler(2, calls)
    sampler.shards = [Drifting(calls, rank) for rank in range(2)]
    sampler.integral = True
    sampler.run_prior_updates(PriorUpdates(Prior(0.25, True), Prior(0.01, True), 0, 10, corpus))
    sampler.sweeps(1, 9)  # no update: nothing to compare
    with pytest.raises(RuntimeError, match="different priors"):
        sampler.sweeps(10, 12)


def test_gpu_cluster_gives_each_worker_its_own_gpu_first():
    from sklearn_gpulda.dask._cluster import local_gpu_cluster

    def visible():
        import os

        return os.environ.get("CUDA_VISIBLE_DEVICES")

    # GPUs 3 and 5 need not exist: the workers only read their CUDA_VISIBLE_DEVICES. Where
    # pynvml is installed, distributed's NVML monitor would look them up and fail the worker's
    # start on a host with fewer GPUs, so it is off for this cluster (the nanny hands the
    # workers this config).
    with dask.config.set({"distributed.diagnostics.nvml": False}), \
            local_gpu_cluster(2, use_dask_cuda=False, gpus=["3", "5"]) as cluster, \
            _client(cluster, 2) as client:
        assert sorted(client.run(visible).values()) == ["3,5", "5,3"]
    with pytest.raises(ValueError, match="3 GPU workers asked for, 2 GPU"):
        local_gpu_cluster(3, gpus=["0", "1"])


def _count_shard_calls(monkeypatch):
    """Counts of the driver's calls to the shards during the test, by method."""
    from collections import Counter

    from sklearn_gpulda.dask import _sampler

    counts, real = Counter(), _sampler.DaskSampler.call_each

    def call_each(self, method, args, shards=None):
        counts[method] += 1
        return real(self, method, args, shards)

    monkeypatch.setattr(_sampler.DaskSampler, "call_each", call_each)
    return counts


@pytest.mark.gpu
@pytest.mark.skipif(gpu_count() < 2, reason="needs two GPUs")
@pytest.mark.parametrize("n_topics", [20, 200])
def test_two_gpu_workers_run_the_sweeps_themselves(kjv, gpu_reference, n_topics, monkeypatch):
    # One worker per GPU (dask-cuda, or one process per GPU without it), B summed over NCCL:
    # the one-GPU model, and the driver calls the shards once per run, not once per sweep.
    # The shards make the prior updates (after sweeps 10 and 20) inside the runs, alpha's
    # table summed among them (on the host at K = 20, on the GPU at K = 200): the runs are
    # 1-14 (sweep 14 is the first averaged) and 15-25.
    from sklearn_gpulda.backends.cuda.multi_gpu.all_reduce import nccl_module
    from sklearn_gpulda.dask._cluster import local_gpu_cluster

    if nccl_module() is None:
        pytest.skip("CuPy has no NCCL here")
    params = dict(GPU_PARAMS, n_components=n_topics)
    reference = (gpu_reference if n_topics == GPU_PARAMS["n_components"]
                 else GPULatentDirichletAllocation(**params).fit(kjv))
    joined = _spy_on_nccl(monkeypatch)
    counts = _count_shard_calls(monkeypatch)
    with local_gpu_cluster(2) as cluster, _client(cluster, 2) as client:
        model = LatentDirichletAllocation(client=client, **params).fit(kjv)
    _same_model(model, reference)
    assert joined == [2]
    assert counts["sweeps_summed"] == 2 and counts["sweep_summed"] == 0
    # No call of their own for the updates: no histograms read, no priors sent.
    assert not {"doc_topic_histogram", "word_topic_histogram", "set_priors"} & set(counts)
    # The loop's own accumulation is the first averaged sweep's; the runs do the others.
    assert counts["accumulate_word_topic"] == 1


@pytest.mark.gpu
@pytest.mark.skipif(gpu_count() < 2, reason="needs two GPUs")
def test_a_worker_lost_inside_a_run_fails_the_fit_and_the_model_stays(kjv, monkeypatch):
    # No callback: the sweeps go in runs on the workers, and a worker dies inside one.
    import threading

    from sklearn_gpulda.backends.cuda.multi_gpu.all_reduce import nccl_module
    from sklearn_gpulda.dask import _nccl_sampler
    from sklearn_gpulda.dask._cluster import local_gpu_cluster

    if nccl_module() is None:
        pytest.skip("CuPy has no NCCL here")
    with local_gpu_cluster(2) as cluster, _client(cluster, 2) as client:
        model = LatentDirichletAllocation(client=client, **dict(GPU_PARAMS, max_iter=3)).fit(kjv)
        before = model.components_.copy()
        workers = sorted(client.scheduler_info()["workers"])
        pid = client.run(os.getpid, workers=[workers[1]])[workers[1]]
        # Fixed priors, no averaging: the whole fit is one run of many sweeps.
        model.set_params(max_iter=100_000, n_averaged_sweeps=0, doc_topic_prior=0.1,
                         topic_word_prior=0.01)
        killed = []

        def kill():
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

        killer = threading.Timer(2.0, kill)
        real = _nccl_sampler.NcclDaskSampler.sweeps

        def sweeps(self, first, last, accumulate_from=None):
            if not killed and not killer.is_alive():
                killer.start()  # the kill comes 2 s into the run (of 100,000 sweeps)
            return real(self, first, last, accumulate_from)

        monkeypatch.setattr(_nccl_sampler.NcclDaskSampler, "sweeps", sweeps)
        try:
            with pytest.raises(WorkerLost, match="lost during the fit"):
                model.fit(kjv)
        finally:
            killer.cancel()
        assert killed == [pid]
        assert model.max_iter == 100_000 and model.n_iter_ == 3
        np.testing.assert_array_equal(model.components_, before)


# -- a matrix topic-word prior (seeded topics) ----------------------------------------------------
def _seeded_prior(X, n_topics, strength=20.0):
    """A learned base plus three seeded words per topic, chosen at random from X's words."""
    from scipy import sparse

    rng = np.random.default_rng(1)
    words = rng.choice(X.shape[1], size=(n_topics, 3), replace=False)
    topics = np.repeat(np.arange(n_topics), 3)
    additions = sparse.csr_matrix((np.full(3 * n_topics, strength), (topics, words.ravel())),
                                  shape=(n_topics, X.shape[1]))
    return "auto", additions


def _same_seeded_model(a, b):
    _same_model(a, b)
    np.testing.assert_array_equal(a.topic_word_prior_cells_.toarray(),
                                  b.topic_word_prior_cells_.toarray())


def test_seeded_fit_equals_one_process(kjv, reference):
    # The defaults learn the base beta (reading B at the seeded cells from the summed B on the
    # driver) and average: the one-process model, bit for bit, on uneven shards.
    params = dict(PARAMS, topic_word_prior=_seeded_prior(kjv, PARAMS["n_components"]))
    one = GPULatentDirichletAllocation(**params).fit(kjv)
    # The seeds change the model: this test would catch a cluster that dropped them.
    assert not np.array_equal(one.components_, reference.components_)
    cluster, client = _cluster(2)
    with cluster, client:
        X = da.from_array(kjv, chunks=((400, 1, 300, kjv.shape[0] - 701), kjv.shape[1]),
                          asarray=False)
        model = LatentDirichletAllocation(client=client, **params).fit(X)
    _same_seeded_model(model, one)
    # The plain model pickles as NumPy and SciPy data and transforms without Dask.
    local = pickle.loads(pickle.dumps(model.to_local()))
    assert isinstance(local.topic_word_prior_, float)
    assert type(local.topic_word_prior_cells_).__module__.startswith("scipy.sparse")
    np.testing.assert_array_equal(local.transform(kjv[:5]), one.transform(kjv[:5]))


@pytest.mark.gpu
@pytest.mark.skipif(gpu_count() < 2, reason="needs two GPUs")
@pytest.mark.parametrize("cluster_kind", ["shared-gpu", "gpu-per-worker"])
def test_seeded_gpu_workers_equal_one_gpu_fit(kjv, cluster_kind, monkeypatch):
    # Two plain workers sharing GPU 0 (B summed on the driver, which reads the seeded cells'
    # counts there), and one worker per GPU (B summed over NCCL, the cells' counts read from
    # the first shard's GPU): both the one-GPU model.
    from sklearn_gpulda.backends.cuda.multi_gpu.all_reduce import nccl_module
    from sklearn_gpulda.dask._cluster import local_gpu_cluster

    params = dict(GPU_PARAMS, topic_word_prior=_seeded_prior(kjv, GPU_PARAMS["n_components"]))
    one = GPULatentDirichletAllocation(**params).fit(kjv)
    joined = _spy_on_nccl(monkeypatch)
    if cluster_kind == "shared-gpu":
        cluster, client = _cluster(2)
    else:
        if nccl_module() is None:
            pytest.skip("CuPy has no NCCL here")
        cluster = local_gpu_cluster(2)
        client = _client(cluster, 2)
    with cluster, client:
        model = LatentDirichletAllocation(client=client, **params).fit(kjv)
    assert joined == ([] if cluster_kind == "shared-gpu" else [2])
    _same_seeded_model(model, one)


# -- max_iter=None: the stopping rule and its averaging windows on shards ----------------------
def _stopping_fits(kjv, client, params):
    """The local and the Dask fit under a small rule whose averaging window restarts at the
    anchors 4 and 8 and ends at the ceiling 16 (its sum dropped where the shards keep it)."""
    import math

    from sklearn_gpulda._fitting import stopping

    params = dict(params, max_iter=None)
    with stopping.using(stopping.StoppingRule(tol=-math.inf, floor=4, ceiling=16)):
        local = GPULatentDirichletAllocation(**params).fit(kjv)
        sharded = LatentDirichletAllocation(client=client, **params).fit(kjv)
    assert local.n_iter_ == sharded.n_iter_ == 16
    assert sharded.history_["stopped_by"] == "ceiling"
    return local, sharded


def test_the_stopping_rule_on_workers_gives_the_one_process_model(kjv):
    cluster, client = _cluster(2)
    with cluster, client:
        local, sharded = _stopping_fits(kjv, client, PARAMS)
    _same_model(sharded, local)


@pytest.mark.gpu
def test_the_stopping_rule_on_a_gpu_worker_gives_the_one_gpu_model(kjv):
    # One worker sums B in place where CuPy has NCCL: the averaging sum then lives on that
    # shard, and each restarted window must drop it there.
    cluster, client = _cluster(1)
    with cluster, client:
        local, sharded = _stopping_fits(kjv, client, GPU_PARAMS)
    _same_model(sharded, local)
