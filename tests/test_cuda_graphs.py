"""Runs of sweeps replayed as CUDA graphs (backends/cuda/sparse/sweep_graph.py): the switch,
where graphs may be used, the run logic over a stand-in chain (CPU), and on a GPU the same
model bit for bit with the switch on as off."""

from types import SimpleNamespace

import numpy as np
import pytest

from sklearn_gpulda.backends.cuda.sparse import sweep_graph
from sklearn_gpulda.backends.cuda.sparse.sweep_graph import ENV, SweepGraphs, fingerprint

ELIGIBLE = dict(own_sweep=True, streamed=False, online_batches=False, hybrid=False,
                seeded=False, fixed_topic_word=False, exact_totals=True, profile=False,
                shard=False)


# -- the switch and eligibility (CPU) -----------------------------------------------------------
def test_switch_is_on_only_for_1():
    assert sweep_graph.enabled({ENV: "1"})
    for value in ("0", "", "true", "yes"):
        assert not sweep_graph.enabled({ENV: value})
    assert not sweep_graph.enabled({})


def test_switch_reads_the_process_environment(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    assert not sweep_graph.enabled()
    monkeypatch.setenv(ENV, "1")
    assert sweep_graph.enabled()


def test_resident_dense_chain_may_replay_graphs():
    assert sweep_graph.graph_obstacle(**ELIGIBLE) is None


@pytest.mark.parametrize("name, value, words", [
    ("own_sweep", False, "sweeps otherwise"),
    ("streamed", True, "streamed"),
    ("online_batches", True, "mini-batches"),
    ("hybrid", True, "hybrid"),
    ("seeded", True, "matrix"),
    ("fixed_topic_word", True, "fixed"),
    ("exact_totals", False, "topic totals"),
    ("profile", True, "profiles"),
    ("shard", True, "shard"),
])
def test_each_obstacle_keeps_todays_path(name, value, words):
    assert words in sweep_graph.graph_obstacle(**{**ELIGIBLE, name: value})


# -- a stand-in for CuPy and for the chain (CPU) --------------------------------------------------
class FakeArray:
    """What fingerprint and SweepGraphs read of a CuPy array."""

    def __init__(self, ptr, shape=(4,), dtype=np.float32):
        self.data = SimpleNamespace(ptr=ptr)
        self.shape, self.dtype = shape, np.dtype(dtype)
        self.value = 0


class FakeHook:
    active = None

    def __enter__(self):
        FakeHook.active = self
        return self

    def __exit__(self, *exc):
        FakeHook.active = None


class FakeGraph:
    def __init__(self, log, calls):
        self.log, self.calls = log, calls

    def launch(self):
        self.log.append(("replay", tuple(self.calls)))


class FakeStream:
    def __init__(self, log, non_blocking):
        assert non_blocking
        self.log, self.capturing = log, None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass

    def begin_capture(self):
        self.capturing = []

    def end_capture(self):
        calls, self.capturing = self.capturing, None
        self.log.append(("capture", tuple(calls)))
        return FakeGraph(self.log, calls)


def fake_cupy(log):
    cuda = SimpleNamespace(MemoryHook=FakeHook,
                           Stream=lambda non_blocking: FakeStream(log, non_blocking))
    return SimpleNamespace(ndarray=FakeArray, uint32=np.uint32, cuda=cuda,
                           zeros=lambda n, dtype: FakeArray(1, (n,), dtype))


class FakeChain:
    """Records the sweeps it is asked to queue, eagerly or into the stream being captured."""

    def __init__(self, graphs, log, allocate=False):
        self.graphs, self.log, self.allocate = graphs, log, allocate
        self.words = SimpleNamespace(B=FakeArray(100), beta=0.01, host=np.zeros(3))
        self.sum = None
        self.n_accumulated = 0
        self.adds = []

    def graph_inputs(self):
        return [self.words], (7, 0)

    def running_sum(self):
        return self.sum

    def sweep_from_device(self, iteration, accumulate=False):
        call = ("sweep+sum" if accumulate else "sweep")
        if self.allocate and FakeHook.active is not None:
            FakeHook.active.malloc_preprocess(size=8)
        capturing = self.graphs.stream.capturing
        if capturing is None:
            self.log.append(("eager", call))
        else:
            capturing.append(call)

    def accumulate_word_topic(self):
        self.adds.append(True)
        self.n_accumulated += 1


def _setup(allocate=False):
    log = []
    graphs = SweepGraphs(fake_cupy(log), set_iteration=lambda word, v: log.append(("set", v)))
    return graphs, FakeChain(graphs, log, allocate), log


def test_first_run_sweeps_once_kernel_by_kernel_then_captures_and_replays():
    graphs, chain, log = _setup()
    graphs.run(chain, 1, 4)
    assert log == [("set", 1), ("eager", "sweep"), ("capture", ("sweep",)),
                   ("replay", ("sweep",)), ("replay", ("sweep",)), ("replay", ("sweep",))]


def test_next_run_replays_the_same_graph():
    graphs, chain, log = _setup()
    graphs.run(chain, 1, 3)
    del log[:]
    graphs.run(chain, 4, 6)
    assert log == [("set", 4)] + [("replay", ("sweep",))] * 3


@pytest.mark.parametrize("change", ["scalar", "address", "new array"])
def test_a_changed_input_captures_again(change):
    graphs, chain, log = _setup()
    graphs.run(chain, 1, 2)
    if change == "scalar":
        chain.words.beta = 0.02
    elif change == "address":
        chain.words.B = FakeArray(200)
    else:
        chain.words.extra = FakeArray(300)
    del log[:]
    graphs.run(chain, 3, 4)
    assert log == [("set", 3), ("capture", ("sweep",)), ("replay", ("sweep",)),
                   ("replay", ("sweep",))]


def test_host_arrays_do_not_enter_the_key():
    graphs, chain, log = _setup()
    graphs.run(chain, 1, 2)
    chain.words.host = np.ones(5)
    del log[:]
    graphs.run(chain, 3, 3)
    assert log == [("set", 3), ("replay", ("sweep",))]


def test_fingerprint_holds_what_its_key_names():
    cp = fake_cupy([])
    a, other = FakeArray(10), object()
    owner = SimpleNamespace(a=a, k=3, dtype=np.dtype(np.float32), other=other, host=np.zeros(2))
    key, held = fingerprint(cp, [owner], (1, 2))
    assert held == [a, other]
    assert key == fingerprint(cp, [owner], (1, 2))[0]
    assert key != fingerprint(cp, [owner], (1, 3))[0]
    owner.k = 4
    assert key != fingerprint(cp, [owner], (1, 2))[0]


def test_accumulating_sweeps_take_their_own_graph_once_the_sum_exists():
    graphs, chain, log = _setup()
    graphs.run(chain, 1, 2)
    # No running sum yet: the sweep's counts are added the ordinary way.
    del log[:]
    graphs.run(chain, 3, 3, accumulate_from=3)
    assert log == [("set", 3), ("replay", ("sweep",))] and chain.adds == [True]
    chain.sum = FakeArray(500, dtype=np.float64)
    del log[:]
    graphs.run(chain, 4, 6, accumulate_from=3)
    assert log == [("set", 4), ("capture", ("sweep+sum",))] + [("replay", ("sweep+sum",))] * 3
    assert chain.n_accumulated == 4 and chain.adds == [True]


def test_accumulation_from_mid_run():
    graphs, chain, log = _setup()
    chain.sum = FakeArray(500, dtype=np.float64)
    graphs.run(chain, 1, 4, accumulate_from=3)
    assert log == [("set", 1), ("eager", "sweep"), ("capture", ("sweep",)),
                   ("replay", ("sweep",)), ("capture", ("sweep+sum",)),
                   ("replay", ("sweep+sum",)), ("replay", ("sweep+sum",))]
    assert chain.n_accumulated == 2


def test_a_full_accumulation_names_its_sweep():
    graphs, chain, log = _setup()

    def full():
        raise MemoryError("no room")

    chain.accumulate_word_topic = full
    with pytest.raises(MemoryError, match="no room") as info:
        graphs.run(chain, 5, 8, accumulate_from=6)
    assert info.value.sweep == 6


def test_a_capture_that_allocates_raises():
    graphs, chain, log = _setup(allocate=True)
    graphs.run(chain, 1, 1)  # the eager sweep: no capture, nothing to check
    with pytest.raises(RuntimeError, match="must not allocate"):
        graphs.run(chain, 2, 2)
    assert not graphs.graphs  # nothing kept to replay


def test_forget_drops_graphs_and_warmth():
    graphs, chain, log = _setup()
    graphs.run(chain, 1, 2)
    graphs.forget()
    del log[:]
    graphs.run(chain, 3, 3)
    assert log == [("set", 3), ("eager", "sweep")]


# -- on a GPU -------------------------------------------------------------------------------------
FITTED = ("components_", "doc_topic_prior_", "topic_word_prior_", "n_iter_", "bound_")


def _kjv():
    from sklearn_gpulda.datasets import load_kjv_chapters

    return load_kjv_chapters().data


def _fit(monkeypatch, graphs, X, **params):
    if graphs:
        monkeypatch.setenv(ENV, "1")
    else:
        monkeypatch.delenv(ENV, raising=False)
    from sklearn_gpulda import GPULatentDirichletAllocation

    sweep_graph.reset_stats()
    lda = GPULatentDirichletAllocation(n_components=20, random_state=0, device="cuda",
                                       algorithm="sparse", **params).fit(X)
    return lda, dict(sweep_graph.STATS)


def _assert_same_model(a, b):
    for name in FITTED:
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)


@pytest.mark.gpu
@pytest.mark.parametrize("max_iter", [60, None])
def test_default_fit_is_the_same_with_graphs(monkeypatch, max_iter):
    X = _kjv()
    off, off_stats = _fit(monkeypatch, False, X, max_iter=max_iter)
    on, on_stats = _fit(monkeypatch, True, X, max_iter=max_iter)
    _assert_same_model(off, on)
    assert off_stats == {"eager": 0, "captures": 0, "replays": 0}
    assert on_stats["eager"] == 1 and on_stats["captures"] >= 1
    assert on_stats["replays"] > on_stats["captures"]


@pytest.mark.gpu
def test_one_long_run_is_one_graph(monkeypatch):
    # Fixed priors, no averaging, no evaluation: the fit loop hands over sweeps 1 to 50 at once.
    X = _kjv()
    params = dict(max_iter=50, doc_topic_prior=0.1, topic_word_prior=0.01, n_averaged_sweeps=0)
    off, _ = _fit(monkeypatch, False, X, **params)
    on, stats = _fit(monkeypatch, True, X, **params)
    _assert_same_model(off, on)
    assert stats == {"eager": 1, "captures": 1, "replays": 49}


@pytest.mark.gpu
def test_graphs_keep_every_chunks_chain(monkeypatch):
    # Several resident chunks, sampled at the sampler's level: the same topics and counts.
    import scipy.sparse as sp

    from sklearn_gpulda._input.corpus import tokens
    from sklearn_gpulda._runtime.device import Device
    from sklearn_gpulda.backends.cuda.sparse.sampler import CudaSparseSampler

    corpus = tokens(sp.csr_matrix(_kjv()))
    chains = []
    for graphs in (False, True):
        if graphs:
            monkeypatch.setenv(ENV, "1")
        else:
            monkeypatch.delenv(ENV, raising=False)
        chain = CudaSparseSampler(32, 0.1, 0.01, 99, Device("cuda", (0,)),
                                  max_chunk_tokens=60_000)
        chain.load(corpus)
        assert len(chain.chunks) > 1
        chain.init_topics()
        chain.sweeps(1, 4)
        chain.accumulate_word_topic()
        chain.sweeps(5, 9, accumulate_from=5)
        chains.append(chain)
    off, on = chains
    np.testing.assert_array_equal(off.topics(), on.topics())
    np.testing.assert_array_equal(off.word_topic_counts(), on.word_topic_counts())
    np.testing.assert_array_equal(off.doc_topic_counts(), on.doc_topic_counts())
    np.testing.assert_array_equal(off.mean_word_topic(), on.mean_word_topic())
    assert off.n_accumulated == on.n_accumulated == 6


@pytest.mark.gpu
def test_device_iteration_draws_what_the_argument_draws():
    import cupy as cp
    import scipy.sparse as sp

    from sklearn_gpulda._input.corpus import tokens
    from sklearn_gpulda._runtime.device import Device
    from sklearn_gpulda.backends.cuda.sparse.sampler import CudaSparseSampler

    corpus = tokens(sp.csr_matrix(_kjv()[:200]))
    chains = [CudaSparseSampler(20, 0.1, 0.01, 5, Device("cuda", (0,))) for _ in range(2)]
    for chain in chains:
        chain.load(corpus)
        chain.init_topics()
    chains[0].sweep(7)
    word = cp.full(1, 7, dtype=cp.uint32)
    chains[1].sweep_from_device(word)
    np.testing.assert_array_equal(chains[0].topics(), chains[1].topics())
    assert int(word.get()[0]) == 8


@pytest.mark.gpu
def test_hybrid_storage_keeps_todays_path(monkeypatch):
    X = _kjv()
    params = dict(max_iter=20, word_topic_storage="hybrid")
    off, _ = _fit(monkeypatch, False, X, **params)
    on, stats = _fit(monkeypatch, True, X, **params)
    _assert_same_model(off, on)
    assert stats == {"eager": 0, "captures": 0, "replays": 0}
