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
