"""Runs of sweeps replayed as CUDA graphs (backends/cuda/sparse/sweep_graph.py): the switch,
where graphs may be used, the run logic over a stand-in chain (CPU), and on a GPU the same
model bit for bit with the switch on as off."""

from contextlib import contextmanager
from types import SimpleNamespace

import numpy as np
import pytest

from sklearn_gpulda.backends.cuda.sparse import sweep_graph
from sklearn_gpulda.backends.cuda.sparse.sweep_graph import ENV, SweepGraphs, fingerprint

ELIGIBLE = dict(subclass=False, streamed=False, online_batches=False, hybrid=False,
                seeded=False, fixed_topic_word=False, exact_totals=True, profile=False,
                shard=False, foreign_allocator=False)


# -- the switch and eligibility (CPU) -----------------------------------------------------------
def test_switch_forces_graphs_on_or_off_else_small_chains_replay():
    small, large = sweep_graph.AUTO_MAX_TOKENS, sweep_graph.AUTO_MAX_TOKENS + 1
    for n in (small, large, None):
        assert sweep_graph.enabled(n, {ENV: "1"})
        assert not sweep_graph.enabled(n, {ENV: "0"})
    for environ in ({}, {ENV: ""}, {ENV: "yes"}):
        assert sweep_graph.enabled(small, environ)
        assert sweep_graph.enabled(11_634, environ)
        assert not sweep_graph.enabled(large, environ)
        assert not sweep_graph.enabled(None, environ)


def test_switch_reads_the_process_environment(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    assert sweep_graph.enabled(100) and not sweep_graph.enabled(10**6)
    monkeypatch.setenv(ENV, "1")
    assert sweep_graph.enabled(10**6)
    monkeypatch.setenv(ENV, "0")
    assert not sweep_graph.enabled(100)


def test_resident_dense_chain_may_replay_graphs():
    assert sweep_graph.graph_obstacle(**ELIGIBLE) is None


@pytest.mark.parametrize("name, value, words", [
    ("subclass", True, "subclass"),
    ("streamed", True, "streamed"),
    ("online_batches", True, "mini-batches"),
    ("hybrid", True, "hybrid"),
    ("seeded", True, "matrix"),
    ("fixed_topic_word", True, "fixed"),
    ("exact_totals", False, "topic totals"),
    ("profile", True, "profiles"),
    ("shard", True, "shard"),
    ("foreign_allocator", True, "allocator"),
])
def test_each_obstacle_keeps_todays_path(name, value, words):
    assert words in sweep_graph.graph_obstacle(**{**ELIGIBLE, name: value})


# -- CuPy's allocator (CPU, over a stand-in for CuPy) --------------------------------------------
class Pool:
    """Stands in for a CuPy memory pool: only its bound ``malloc`` matters here."""

    def malloc(self, size):
        return size


class BoundElsewhere:
    """A bound allocator whose equality is identity (as an extension type's may be), bound to
    ``owner`` under ``name``."""

    def __init__(self, owner, name):
        self.__self__, self.__name__ = owner, name

    def __call__(self, size):
        return size


def allocator_cupy(allocator, pool):
    cuda = SimpleNamespace(get_allocator=lambda: allocator)
    return SimpleNamespace(cuda=cuda, get_default_memory_pool=lambda: pool)


def test_default_pool_allocator_is_recognised():
    pool = Pool()
    # CuPy installs pool.malloc once; each attribute read makes a new bound method.
    installed = pool.malloc
    assert installed is not pool.malloc
    assert sweep_graph.default_pool_allocates(allocator_cupy(installed, pool))
    assert sweep_graph.default_pool_allocates(
        allocator_cupy(BoundElsewhere(pool, "malloc"), pool))


@pytest.mark.parametrize("other", ["another pool", "a function", "another method"])
def test_any_other_allocator_is_an_obstacle(other):
    pool = Pool()
    allocator = {"another pool": Pool().malloc, "a function": lambda size: size,
                 "another method": BoundElsewhere(pool, "free")}[other]
    assert not sweep_graph.default_pool_allocates(allocator_cupy(allocator, pool))


# -- the sampler's own eligibility (CPU: samplers made without __init__, no device) -----------
def _bare_sampler(cls, allocator_is_default=True):
    """A ``cls`` instance with just what :meth:`graph_obstacle` reads: an eligible resident
    chain of integer counts, B dense."""
    sampler = cls.__new__(cls)
    pool = Pool()
    sampler.cp = allocator_cupy(pool.malloc if allocator_is_default else Pool().malloc, pool)
    sampler.corpus = SimpleNamespace(integral=True)
    sampler.words = SimpleNamespace(rare=None, seeded=None, bhat_fixed=None)
    sampler._stream = sampler._batches = None
    sampler.profile, sampler.token_offset, sampler.word_frequencies = False, 0, None
    return sampler


def test_the_sparse_sampler_itself_may_replay_graphs():
    from sklearn_gpulda.backends.cuda.sparse.sampler import CudaSparseSampler

    assert _bare_sampler(CudaSparseSampler).graph_obstacle() is None
    assert "allocator" in _bare_sampler(CudaSparseSampler, False).graph_obstacle()


def test_subclasses_never_replay_graphs():
    # A capture records the sparse chain's sweep, _count_words, _topic_totals and _count_b:
    # DeviceShard (several GPUs, Dask) changes _topic_totals only, the mini-batch engine its
    # sweep, and even a subclass that changes nothing is kept on today's path.
    from sklearn_gpulda.backends.cuda.minibatch.sampler import CudaMinibatchSampler
    from sklearn_gpulda.backends.cuda.multi_gpu.shard import DeviceShard
    from sklearn_gpulda.backends.cuda.sparse.sampler import CudaSparseSampler

    class Same(CudaSparseSampler):
        pass

    for cls in (DeviceShard, CudaMinibatchSampler, Same):
        assert "subclass" in _bare_sampler(cls).graph_obstacle(), cls.__name__


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

    def __init__(self, graphs, log, allocate=False, unkeyed=()):
        self.graphs, self.log, self.allocate = graphs, log, allocate
        self.words = SimpleNamespace(B=FakeArray(100), beta=0.01, host=np.zeros(3))
        self.sum = None
        self.n_accumulated = 0
        self.adds = []
        self.unkeyed = unkeyed
        self.states = None  # alternate between two states after each sweep, as a dense chain
        self.state = 0
        self.after = 0

    def graph_inputs(self):
        return [self.words], (7, 0), self.unkeyed

    def graph_variant(self):
        return (self.state,)

    def after_graph_sweep(self):
        self.after += 1
        if self.states:
            self.state = 1 - self.state

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


def _setup(allocate=False, unkeyed=()):
    log = []
    graphs = SweepGraphs(fake_cupy(log), set_iteration=lambda word, v: log.append(("set", v)))
    return graphs, FakeChain(graphs, log, allocate, unkeyed), log


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


def test_a_number_read_from_a_device_word_keeps_the_graph():
    # The chain names beta unkeyed: its captured kernels read it from a device word that a
    # prior update writes in place, so a new value replays the same graph.
    graphs, chain, log = _setup(unkeyed=("beta",))
    graphs.run(chain, 1, 2)
    chain.words.beta = 0.02
    del log[:]
    graphs.run(chain, 3, 4)
    assert log == [("set", 3), ("replay", ("sweep",)), ("replay", ("sweep",))]
    chain.words.B = FakeArray(200)  # every other attribute is still keyed
    del log[:]
    graphs.run(chain, 5, 5)
    assert log == [("set", 5), ("capture", ("sweep",)), ("replay", ("sweep",))]


def test_unkeyed_names_leave_the_key_of_every_owner():
    cp = fake_cupy([])
    words, chunk = SimpleNamespace(beta=0.01, k=3), SimpleNamespace(beta=1.0, n=5)
    key, _ = fingerprint(cp, [words, chunk], (1,), ("beta",))
    words.beta, chunk.beta = 0.5, 2.0
    assert fingerprint(cp, [words, chunk], (1,), ("beta",))[0] == key
    assert fingerprint(cp, [words, chunk], (1,))[0] != key
    chunk.n = 6
    assert fingerprint(cp, [words, chunk], (1,), ("beta",))[0] != key


def _keyed_sparse_chain():
    """A :class:`CudaSparseSampler` made without a device, with what ``graph_inputs`` reads:
    a word side of stand-in arrays and no chunks."""
    from sklearn_gpulda.backends.cuda.sparse.sampler import CudaSparseSampler, WordSide

    chain = CudaSparseSampler.__new__(CudaSparseSampler)
    chain.seed, chain.token_offset, chain.n_topics = 3, 0, 4
    chain._n_sm, chain.large_k, chain._shape = 2, False, (4, 64, 256)
    f64 = np.float64
    chain.words = WordSide(
        n_topics=4, n_words=3, B=FakeArray(1, (3, 4)), totals=FakeArray(2, (4,), f64),
        denom=FakeArray(3, (4,), f64), partial=FakeArray(4, (1, 4), f64),
        counter=FakeArray(5, (1,), np.int32), alpha=FakeArray(6), beta=0.01,
        beta_word=FakeArray(7, (1,), f64))
    chain.chunks = []
    return chain


def test_the_sparse_chain_keys_beta_by_its_device_word_only():
    # A prior update writes alpha and beta's word in place and sets words.beta: the key of
    # the sparse chain's captured sweep stays, so its graph is replayed with the new values.
    chain = _keyed_sparse_chain()
    cp = fake_cupy([])
    key, held = fingerprint(cp, *chain.graph_inputs())
    assert chain.words.beta_word in held and chain.words.alpha in held
    chain.words.beta = 0.5
    assert fingerprint(cp, *chain.graph_inputs())[0] == key
    chain.words.beta_word = FakeArray(8, (1,), np.float64)
    assert fingerprint(cp, *chain.graph_inputs())[0] != key


def test_the_device_iteration_reads_beta_from_its_word_too():
    from sklearn_gpulda.backends.cuda.sparse import sample_sparse

    word = FakeArray(7, (1,), np.float64)
    words = SimpleNamespace(B=FakeArray(1), denom=FakeArray(2), beta=0.01, beta_word=word,
                            bhat_fixed=None, rare=None, prior=None, n_words=3)
    assert sample_sparse._word_side(words)[2] == (0.01, "f64")
    assert sample_sparse._word_side(words, beta_on_device=True)[2] == (word, np.float64)


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


def test_the_eager_sweep_adds_the_ordinary_way():
    # No graph yet: the first sweep runs kernel by kernel without the add, which the chain
    # then makes itself (the same kernel on the same B); later sweeps add inside their graph.
    graphs, chain, log = _setup()
    chain.sum = FakeArray(500, dtype=np.float64)
    graphs.run(chain, 1, 3, accumulate_from=1)
    assert log == [("set", 1), ("eager", "sweep"), ("capture", ("sweep+sum",)),
                   ("replay", ("sweep+sum",)), ("replay", ("sweep+sum",))]
    assert chain.adds == [True] and chain.n_accumulated == 3


def test_ordinary_adds_are_charged_to_averaging(monkeypatch):
    # As Sampler.sweeps charges them: each sweep to sampling, each add the chain makes itself
    # to averaging; an add inside a graph cannot be timed apart and stays under sampling.
    graphs, chain, log = _setup()
    names = []

    @contextmanager
    def stage(name):
        names.append(name)
        yield
        names.pop()

    monkeypatch.setattr(sweep_graph, "stage", stage)
    chain.sweep_from_device = lambda *a: log.append(("sweep", tuple(names)))
    graph = SimpleNamespace(launch=lambda: log.append(("replay", tuple(names))))
    graphs.stream.end_capture = lambda: graph

    def add():
        log.append(("add", tuple(names)))
        chain.sum = FakeArray(500, dtype=np.float64)
        chain.n_accumulated += 1

    chain.accumulate_word_topic = add
    graphs.run(chain, 1, 3, accumulate_from=1)
    sampling, averaging = ("sweeps: sampling",), ("sweeps: averaging",)
    assert log == [("set", 1), ("sweep", sampling), ("add", averaging),  # eager, first add
                   ("sweep", sampling),  # captured: the graph that adds
                   ("replay", sampling), ("replay", sampling)]
    assert chain.n_accumulated == 3


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


def _fit(monkeypatch, graphs, X, algorithm="sparse", **params):
    if graphs:
        monkeypatch.setenv(ENV, "1")
    else:
        monkeypatch.setenv(ENV, "0")
    from sklearn_gpulda import GPULatentDirichletAllocation

    sweep_graph.reset_stats()
    lda = GPULatentDirichletAllocation(n_components=20, random_state=0, device="cuda",
                                       algorithm=algorithm, **params).fit(X)
    return lda, dict(sweep_graph.STATS)


def _without_and_with_graphs(monkeypatch, run):
    """``run()`` (which makes, loads and sweeps a chain) with graphs off, then on: the two
    chains and what the graphs did in each."""
    chains, stats = [], []
    for graphs in (False, True):
        monkeypatch.setenv(ENV, "1" if graphs else "0")
        sweep_graph.reset_stats()
        chains.append(run())
        stats.append(dict(sweep_graph.STATS))
    return chains, stats


def _assert_same_chain(a, b):
    """Two samplers in the same state: topics and both count tables."""
    np.testing.assert_array_equal(a.topics(), b.topics())
    np.testing.assert_array_equal(a.word_topic_counts(), b.word_topic_counts())
    np.testing.assert_array_equal(a.doc_topic_counts(), b.doc_topic_counts())


def _assert_same_model(a, b):
    for name in FITTED:
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)


def _default_fit_captures(n_iter, max_iter):
    """Captures of a default fit (learned priors, default averaging) of ``n_iter`` sweeps with
    graphs: prior updates keep the graphs (alpha and beta's word are written in place), so the
    plain sweep is captured once, and the accumulating sweep once per averaging window, since
    a window's new running sum is a new array. A fit of ``max_iter`` sweeps has one window
    (its last half); one that stops by the rule (``max_iter=None``) opens one after each
    anchor of the rule's grid that it goes past (_fitting/stopping.py)."""
    from sklearn_gpulda._fitting.plan import stopping_rule

    rule = stopping_rule(max_iter)
    if rule is None:
        return 2
    return 1 + sum(anchor < n_iter for anchor in rule.anchors())


@pytest.mark.gpu
@pytest.mark.parametrize("max_iter", [60, None])
def test_default_fit_is_the_same_with_graphs(monkeypatch, max_iter):
    # max_iter=60: runs 1-10 (sweep 1 eager, a capture at 2), 11-20, 21-30, 31 (its add makes
    # the running sum), 32-40 (a capture of the graph that adds), 41-50, 51-60; priors learned
    # after every tenth sweep, with no capture after any update: eager 1, captures 2,
    # replays 59.
    X = _kjv()
    off, off_stats = _fit(monkeypatch, False, X, max_iter=max_iter)
    on, on_stats = _fit(monkeypatch, True, X, max_iter=max_iter)
    _assert_same_model(off, on)
    assert off_stats == {"eager": 0, "captures": 0, "replays": 0}
    n_iter = on.n_iter_
    assert on_stats == {"eager": 1, "captures": _default_fit_captures(n_iter, max_iter),
                        "replays": n_iter - 1}
    if max_iter is not None:
        assert on_stats == {"eager": 1, "captures": 2, "replays": 59}


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

    def run():
        chain = CudaSparseSampler(32, 0.1, 0.01, 99, Device("cuda", (0,)),
                                  max_chunk_tokens=60_000)
        chain.load(corpus)
        assert len(chain.chunks) > 1
        chain.init_topics()
        chain.sweeps(1, 4)
        chain.accumulate_word_topic()
        chain.sweeps(5, 9, accumulate_from=5)
        return chain

    chains, stats = _without_and_with_graphs(monkeypatch, run)
    # Without graphs, none. With them, sweeps 1-4: sweep 1 eager, a capture at 2, replays 2-4;
    # sweeps 5-9 add to the running sum made after sweep 4: a capture of the graph with the
    # add, replays 5-9.
    assert stats == [{"eager": 0, "captures": 0, "replays": 0},
                     {"eager": 1, "captures": 2, "replays": 8}]
    off, on = chains
    _assert_same_chain(off, on)
    np.testing.assert_array_equal(off.mean_word_topic(), on.mean_word_topic())
    assert off.n_accumulated == on.n_accumulated == 6


def _prior_chain(graphs, monkeypatch, corpus, updates):
    """A chain of 20 topics over ``corpus``, swept in runs of five with the priors of
    ``updates`` set before the second and third runs (None: no change), and what its graphs
    did."""
    from sklearn_gpulda._runtime.device import Device
    from sklearn_gpulda.backends.cuda.sparse.sampler import CudaSparseSampler

    if graphs:
        monkeypatch.setenv(ENV, "1")
    else:
        monkeypatch.setenv(ENV, "0")
    sweep_graph.reset_stats()
    chain = CudaSparseSampler(20, 0.1, 0.01, 3, Device("cuda", (0,)))
    chain.load(corpus)
    chain.init_topics()
    chain.sweeps(1, 5)
    alpha_at, beta_at = chain.words.alpha.data.ptr, chain.words.beta_word.data.ptr
    for run, priors in enumerate(updates):
        if priors is not None:
            chain.set_priors(**priors)
        chain.sweeps(6 + 5 * run, 10 + 5 * run)
    # Written in place: the addresses a graph holds are still the chain's.
    assert (chain.words.alpha.data.ptr, chain.words.beta_word.data.ptr) == (alpha_at, beta_at)
    np.testing.assert_array_equal(chain.words.alpha.get(), chain.alpha.astype(np.float32))
    assert float(chain.words.beta_word.get()[0]) == chain.beta
    return chain, dict(sweep_graph.STATS)


@pytest.mark.gpu
def test_a_prior_update_between_runs_reaches_the_replayed_graph(monkeypatch):
    # Alpha (a vector, then a number) and beta set between runs: the graph captured in the
    # first run is replayed after each update and draws what the chain without graphs draws,
    # which differs from what the old priors would have drawn.
    import scipy.sparse as sp

    from sklearn_gpulda._input.corpus import tokens

    corpus = tokens(sp.csr_matrix(_kjv()[:300]))
    updates = [dict(alpha=np.linspace(0.02, 0.6, 20), beta=0.05), dict(alpha=0.3, beta=0.002)]
    off, off_stats = _prior_chain(False, monkeypatch, corpus, updates)
    on, on_stats = _prior_chain(True, monkeypatch, corpus, updates)
    kept, _ = _prior_chain(True, monkeypatch, corpus, [None, None])
    assert off_stats == {"eager": 0, "captures": 0, "replays": 0}
    assert on_stats == {"eager": 1, "captures": 1, "replays": 14}
    _assert_same_chain(off, on)
    np.testing.assert_array_equal(off.words.denom.get(), on.words.denom.get())
    assert off.log_likelihood() == on.log_likelihood()
    assert not np.array_equal(on.topics(), kept.topics())
    for chain in (off, on, kept):
        chain.release()


@pytest.mark.gpu
@pytest.mark.parametrize("from_partials", [True, False])
@pytest.mark.parametrize("with_extra", [False, True])
def test_topic_totals_read_beta_from_the_device_word_alike(from_partials, with_extra):
    # topic_totals_dev (beta from a device word, as a captured sweep runs it) gives the
    # argument kernel's totals and denominators, which are the contract's.
    import cupy as cp

    from sklearn_gpulda.backends.cuda import counts

    rng = np.random.default_rng(2)
    k, n_words, beta = 37, 1234, 0.0137
    parts = cp.asarray(rng.integers(0, 50, size=(5, k)).astype(np.float64))
    kept = rng.integers(0, 500, size=k).astype(np.float64)
    extra = cp.asarray(rng.random(k)) if with_extra else None
    results = []
    for value in (beta, cp.full(1, beta, dtype=cp.float64)):
        totals, denom = cp.asarray(kept), cp.empty(k, dtype=cp.float64)
        counts.topic_totals(parts if from_partials else None, totals, denom, n_words, value,
                            extra)
        results.append((totals.get(), denom.get()))
    (t_arg, d_arg), (t_dev, d_dev) = results
    np.testing.assert_array_equal(t_dev, t_arg)
    np.testing.assert_array_equal(d_dev, d_arg)
    t = parts.get().sum(axis=0) if from_partials else kept
    d = t + n_words * beta
    if with_extra:
        d = d + extra.get()
    np.testing.assert_array_equal(t_arg, t)
    np.testing.assert_array_equal(d_arg, d)


def _long_document():
    """One document of 70,000 tokens (65,536 or more: wide A entries and 32-bit places) and
    twenty short ones, over 300 words."""
    import scipy.sparse as sp

    rng = np.random.default_rng(11)
    rows = [np.bincount(rng.integers(0, 300, size=70_000), minlength=300)]
    rows += [np.bincount(rng.integers(0, 300, size=40), minlength=300) for _ in range(20)]
    return sp.csr_matrix(np.array(rows, dtype=np.int64))


# Every _dev sampler there is. No i32_wide_dev: the sparse engine takes K <= 65,536
# (constants.MAX_TOPICS), whose topics are always uint16 (layout.topic_dtype), so no chunk ever
# asks for an i32 sampler; cuda/sample_sparse.cu does not build one with a device iteration.
# K = 33,000 (above 32,768) takes the large-K kernels; B is then (V, K) float32 per chain, about
# 0.4 GB on the 200 KJV chapters' 3,117 words, 40 MB on the long document's 300.
@pytest.mark.gpu
@pytest.mark.parametrize("kernel, corpus_of, n_topics", [
    ("sample_tokens_u16_packed_dev", "kjv200", 20),
    ("sample_tokens_u16_packed_large_dev", "kjv200", 33_000),
    ("sample_tokens_u16_wide_dev", "long_document", 20),
    ("sample_tokens_u16_wide_large_dev", "long_document", 33_000),
])
def test_device_iteration_draws_what_the_argument_draws(monkeypatch, kernel, corpus_of,
                                                        n_topics):
    import cupy as cp
    import scipy.sparse as sp

    from sklearn_gpulda._input.corpus import tokens
    from sklearn_gpulda._runtime.device import Device
    from sklearn_gpulda.backends.cuda import kernels
    from sklearn_gpulda.backends.cuda.sparse.sampler import CudaSparseSampler

    launched = []
    launch = kernels.launch

    def recorded(stem, name, *args, **kwargs):
        launched.append(name)
        return launch(stem, name, *args, **kwargs)

    monkeypatch.setattr(kernels, "launch", recorded)
    X = sp.csr_matrix(_kjv()[:200]) if corpus_of == "kjv200" else _long_document()
    corpus = tokens(X)
    chains = [CudaSparseSampler(n_topics, 0.1, 0.01, 5, Device("cuda", (0,)))
              for _ in range(2)]
    for chain in chains:
        chain.load(corpus)
        chain.init_topics()
    del launched[:]
    chains[0].sweep(7)
    assert kernel[: -len("_dev")] in launched and kernel not in launched
    del launched[:]
    word = cp.full(1, 7, dtype=cp.uint32)
    chains[1].sweep_from_device(word)
    assert kernel in launched
    np.testing.assert_array_equal(chains[0].topics(), chains[1].topics())
    assert int(word.get()[0]) == 8
    for chain in chains:
        chain.release()


@pytest.mark.gpu
def test_hybrid_storage_keeps_todays_path(monkeypatch):
    X = _kjv()
    params = dict(max_iter=20, word_topic_storage="hybrid")
    off, _ = _fit(monkeypatch, False, X, **params)
    on, stats = _fit(monkeypatch, True, X, **params)
    _assert_same_model(off, on)
    assert stats == {"eager": 0, "captures": 0, "replays": 0}


def test_a_chain_of_two_states_replays_a_graph_for_each():
    # A chain whose sweeps alternate between two states (the dense chain's swapped tables):
    # the first sweep eager, a capture for each state, then replays, never a capture again.
    graphs, chain, log = _setup()
    chain.states = True
    graphs.run(chain, 1, 8)
    captures = [entry for entry in log if entry[0] == "capture"]
    assert len(captures) == 2 and chain.after == 8
    assert sorted(slot[1] for slot in graphs.graphs) == [(0,), (1,)]
    graphs.run(chain, 9, 12)
    assert len([entry for entry in log if entry[0] == "capture"]) == 2 and chain.after == 12
    graphs.forget(accumulate=False)
    assert not graphs.graphs


# -- the dense chain ------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("max_iter", [60, None])
def test_dense_default_fit_is_the_same_with_graphs(monkeypatch, max_iter):
    # The dense chain alternates between two states (its counted tables change places every
    # sweep), each with its graph: captured at sweeps 2 and 3 of a run without adds, then
    # replayed; the adds of averaging capture two more. Learned priors (alpha and beta written
    # in place) never force a capture.
    X = _kjv()
    off, off_stats = _fit(monkeypatch, False, X, "dense", max_iter=max_iter)
    on, on_stats = _fit(monkeypatch, True, X, "dense", max_iter=max_iter)
    _assert_same_model(off, on)
    np.testing.assert_array_equal(off.transform(X[:30]), on.transform(X[:30]))
    assert off_stats == {"eager": 0, "captures": 0, "replays": 0}
    n_iter = on.n_iter_
    assert on_stats["eager"] == 1 and on_stats["replays"] == n_iter - 1
    assert on_stats["captures"] == 2 * _default_fit_captures(n_iter, max_iter)


@pytest.mark.gpu
def test_dense_prior_updates_reach_the_replayed_graphs(monkeypatch):
    # Priors set between runs at the sampler's level: the replayed graphs draw what the chain
    # without graphs draws, and alpha and beta keep their device addresses.
    import scipy.sparse as sp

    from sklearn_gpulda._input.corpus import tokens
    from sklearn_gpulda._runtime.device import Device
    from sklearn_gpulda.backends.cuda.dense.sampler import CudaDenseSampler

    corpus = tokens(sp.csr_matrix(_kjv()[:300]))

    def run():
        chain = CudaDenseSampler(20, 0.1, 0.01, 3, Device("cuda", (0,)))
        chain.load(corpus)
        chain.init_topics()
        chain.sweeps(1, 5)
        at = (chain._st.alpha.data.ptr, chain._st.prior_word.data.ptr)
        chain.set_priors(alpha=np.linspace(0.02, 0.6, 20), beta=0.05)
        chain.sweeps(6, 10)
        chain.set_priors(alpha=0.3, beta=0.002)
        chain.sweeps(11, 15)
        assert (chain._st.alpha.data.ptr, chain._st.prior_word.data.ptr) == at
        return chain

    chains, stats = _without_and_with_graphs(monkeypatch, run)
    assert stats == [{"eager": 0, "captures": 0, "replays": 0},
                     {"eager": 1, "captures": 2, "replays": 14}]
    off, on = chains
    _assert_same_chain(off, on)


def test_dense_graph_obstacles():
    # What keeps a dense chain's sweeps kernel by kernel, read from its state (no GPU needed).
    from types import SimpleNamespace

    from sklearn_gpulda.backends.cuda.dense.graph_replay import DenseGraphReplay

    class Chain(DenseGraphReplay):
        profile = False
        cp = None

        def _require_state(self):
            return self._st

    chain = Chain()
    base = dict(fused=True, n_long=5, order=np.zeros(5), seeded=None, fixed=False)
    for change, reason in [(dict(fused=False), "fused"), (dict(n_long=4), "thread each"),
                           (dict(seeded=object()), "matrix"), (dict(fixed=True), "fixed")]:
        chain._st = SimpleNamespace(**{**base, **change})
        assert reason in chain.graph_obstacle()
    chain._st, chain.profile = SimpleNamespace(**base), True
    assert "profiles" in chain.graph_obstacle()
