"""The whole-process device budget (``backends/cuda/process_memory.py``): its arithmetic on the
CPU, and on a GPU that a fit within ``max_device_memory`` keeps the process within it."""

import gc
from types import SimpleNamespace

import pytest

from sklearn_gpulda.backends.cuda import process_memory as pm

MIB = 1 << 20


def test_outside_pool_is_what_the_gpu_took_beyond_the_pool():
    reading = pm.ProcessMemory(total=1000 * MIB, free=600 * MIB, pool_held=150 * MIB,
                               pool_used=100 * MIB, local_growth=30 * MIB)
    assert reading.outside_pool == 250 * MIB
    assert reading.fixed == 250 * MIB + 30 * MIB + pm.HEADROOM_BYTES


def test_outside_pool_is_never_negative():
    # A pool block taken between the driver's reading and the pool's is not counted twice.
    reading = pm.ProcessMemory(total=100, free=50, pool_held=80, pool_used=80)
    assert reading.outside_pool == 0


def test_local_growth_counts_every_thread_the_gpu_holds():
    # 8 KiB a thread on 132 SMs of 2,048 threads (an H100): about 2 GiB, less what the
    # reservation of 1 KiB a thread holds already.
    assert pm.local_growth(8192, 1024, 2048, 132) == 7168 * 2048 * 132
    assert pm.local_growth(512, 1024, 2048, 132) == 0
    assert pm.local_growth(0, 0, 1536, 10) == 0


def test_room_is_the_budget_less_what_the_process_holds():
    fixed, used = 300 * MIB, 50 * MIB
    assert pm.chain_room(1024 * MIB, 10_000 * MIB, fixed, used) == 674 * MIB
    # The GPU's free memory bounds it still, and a process beyond its budget has none.
    assert pm.chain_room(1024 * MIB, 100 * MIB, fixed, used) == 100 * MIB
    assert pm.chain_room(200 * MIB, 10_000 * MIB, fixed, used) == 0
    # No budget: what the GPU has free, whatever the process holds.
    assert pm.chain_room(None, 100 * MIB, fixed, used) == 100 * MIB


class _FakeKernel:
    def __init__(self, local):
        self.local_size_bytes = local


def _fake_cupy(free, total, held, used, stack=1024, sms=4, threads=2048):
    runtime = SimpleNamespace(
        getDevice=lambda: 0, memGetInfo=lambda: (free, total),
        deviceGetLimit=lambda limit: stack if limit == 0 else pytest.fail("not the stack"),
        getDeviceProperties=lambda gpu: {"maxThreadsPerMultiProcessor": threads,
                                         "multiProcessorCount": sms})
    pool = SimpleNamespace(total_bytes=lambda: held, used_bytes=lambda: used)
    return SimpleNamespace(cuda=SimpleNamespace(runtime=runtime),
                           get_default_memory_pool=lambda: pool)


def test_measure_reads_the_driver_the_pool_and_the_kernels(monkeypatch):
    locals_ = {("a", "k1"): 0, ("a", "k2"): 4096, ("b", "k3"): 2048}
    loaded = []

    def get_function(stem, name):
        loaded.append((stem, name))
        return _FakeKernel(locals_[stem, name])

    monkeypatch.setattr(pm.kernels, "get_function", get_function)
    cp = _fake_cupy(free=700, total=1000, held=120, used=90)
    reading = pm.measure(cp, tuple(locals_))
    assert loaded == list(locals_)  # every module loaded before the driver is read
    assert (reading.total, reading.free, reading.pool_held, reading.pool_used) == (
        1000, 700, 120, 90)
    assert reading.local_growth == (4096 - 1024) * 2048 * 4
    assert pm.held_bytes(cp, tuple(locals_)) == reading.fixed + 90


class _FakePool:
    """What PoolCaps reads and writes of a CuPy pool: its limit, its total, its cache."""

    def __init__(self, limit=0, total=0):
        self.limit, self.total, self.freed = limit, total, 0

    def get_limit(self):
        return self.limit

    def set_limit(self, size):
        self.limit = size

    def total_bytes(self):
        return self.total

    def free_all_blocks(self):
        self.freed += 1
        self.total = 0


def test_pool_caps_apply_the_tightest_and_restore_the_callers_limit():
    caps, pool = pm.PoolCaps(), _FakePool()
    let_a = caps.hold(pool, 0, 300 * MIB)
    assert pool.limit == 300 * MIB
    let_b = caps.hold(pool, 0, 200 * MIB)
    assert pool.limit == 200 * MIB
    let_a()  # the tighter cap is still held
    assert pool.limit == 200 * MIB
    let_b()
    assert pool.limit == 0  # no limit, as the caller had it
    # A limit the caller set stays the bound where it is tighter, and comes back after.
    pool = _FakePool(limit=100 * MIB)
    let_go = caps.hold(pool, 0, 300 * MIB)
    assert pool.limit == 100 * MIB
    let_go()
    assert pool.limit == 100 * MIB


def test_letting_a_cap_go_twice_leaves_the_others_held():
    # Equal caps are told apart: a second let-go of one must not drop another chain's.
    caps, pool = pm.PoolCaps(), _FakePool()
    let_a, let_b = caps.hold(pool, 0, 100 * MIB), caps.hold(pool, 0, 100 * MIB)
    let_c = caps.hold(pool, 0, 50 * MIB)
    let_a()
    let_a()
    let_c()
    assert pool.limit == 100 * MIB  # b's cap, still held
    let_b()
    assert pool.limit == 0


def test_a_spent_budget_caps_the_pool_at_one_byte():
    # CuPy reads a limit of 0 as none: a process that holds its whole budget already must
    # still get a cap.
    caps, pool = pm.PoolCaps(), _FakePool()
    let_go = caps.hold(pool, 0, -5)
    assert pool.limit == 1
    let_go()
    assert pool.limit == 0


def test_pool_caps_return_cached_blocks_above_the_cap():
    # Blocks cached before the cap would be reused without the limit's check.
    caps, pool = pm.PoolCaps(), _FakePool(total=900 * MIB)
    caps.hold(pool, 0, 300 * MIB)()
    assert pool.freed == 1
    pool = _FakePool(total=100 * MIB)
    caps.hold(pool, 0, 300 * MIB)()
    assert pool.freed == 0


@pytest.mark.gpu
def test_cached_blocks_count_against_max_device_memory():
    # A pool that cached 1 GiB before the fit: with a budget of what the process uses plus
    # 8 MiB, the cache must go back to the driver rather than stay beside the chain, and the
    # caller's own pool limit comes back after the fit.
    import cupy

    from sklearn_gpulda import GPULatentDirichletAllocation
    from sklearn_gpulda.backends import choose_backend
    from sklearn_gpulda._runtime.device import Device
    from sklearn_gpulda.datasets import load_kjv_chapters

    X = load_kjv_chapters().data
    sampler = choose_backend("sparse", 20, Device("cuda", (0,))).sampler_class()
    with cupy.cuda.Device(0):
        gc.collect()
        pool = cupy.get_default_memory_pool()
        pool.free_all_blocks()
        limit = pm.held_bytes(cupy, sampler.budget_kernels) + 8 * MIB
        block = cupy.empty(1 << 30, dtype=cupy.uint8)
        del block  # cached by the pool, not used
        assert pool.total_bytes() >= 1 << 30
        total = cupy.cuda.runtime.memGetInfo()[1]
        used = []

        def watch(iteration, info):
            used.append(total - cupy.cuda.runtime.memGetInfo()[0])

        callers_limit = pool.get_limit()
        GPULatentDirichletAllocation(n_components=20, max_iter=5, random_state=0,
                                     device="cuda:0", algorithm="sparse",
                                     max_device_memory=limit).fit(X, callback=watch)
        assert pool.get_limit() == callers_limit
    assert len(used) == 5
    assert max(used) <= limit, (max(used) - limit) / MIB


@pytest.mark.gpu
@pytest.mark.parametrize("algorithm, budget", [("sparse", 8 * MIB), ("dense", 256 * MIB)])
def test_fit_keeps_the_process_within_max_device_memory(algorithm, budget):
    # The budget is what the process holds now plus ``budget``: at the end of every sweep and
    # after the fit (the pool's cached blocks still held) the GPU's used memory stays within
    # it, the context and the dense kernels' local memory included. KJV at K = 20 needs more
    # than 8 MiB beside the sparse model, so that fit streams its chunks.
    import cupy

    from sklearn_gpulda import GPULatentDirichletAllocation
    from sklearn_gpulda.backends import choose_backend
    from sklearn_gpulda._runtime.device import Device
    from sklearn_gpulda.datasets import load_kjv_chapters

    X = load_kjv_chapters().data
    sampler = choose_backend(algorithm, 20, Device("cuda", (0,))).sampler_class()
    with cupy.cuda.Device(0):
        gc.collect()
        cupy.get_default_memory_pool().free_all_blocks()
        limit = pm.held_bytes(cupy, sampler.budget_kernels) + budget
        total = cupy.cuda.runtime.memGetInfo()[1]
        used = []

        def watch(iteration, info):
            used.append(total - cupy.cuda.runtime.memGetInfo()[0])

        lda = GPULatentDirichletAllocation(n_components=20, max_iter=12, random_state=0,
                                           device="cuda:0", algorithm=algorithm,
                                           max_device_memory=limit)
        lda.fit(X, callback=watch)
        used.append(total - cupy.cuda.runtime.memGetInfo()[0])
    assert len(used) == 13
    assert max(used) <= limit, (max(used) - limit) / MIB
