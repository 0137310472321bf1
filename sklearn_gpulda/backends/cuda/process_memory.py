"""What the process holds on its GPU besides CuPy's pool, so that ``max_device_memory`` bounds
the whole process and not only the arrays a chain allocates.

The memory plans count arrays; the GPU also holds the CUDA context, the loaded kernel modules,
the local memory (stack) the driver reserves for every thread the GPU can hold at once, and
whatever libraries allocate on their own. A budget that ignores them overruns a card of its size
(measured: a K = 32,768 fit with ``max_device_memory='8GB'`` kept CuPy's pool at 7,143 MiB but
the process at 8,639 MiB). This module measures them at run time, once the context exists and the
engine's modules are loaded, and turns a budget into the bytes a chain may allocate:

    room = limit - outside_pool - local_growth - HEADROOM_BYTES - pool_used

``outside_pool`` is ``(total - free) - pool_held`` from ``cudaMemGetInfo`` and CuPy's pool: what
the GPU has taken that the pool does not hold. The driver reports the whole GPU, so memory of
*other processes* on a shared GPU is counted too (a budget then leaves room for them as well; it
can only err towards a smaller plan). ``local_growth`` is the stack the engine's kernels will make
the driver add when first launched, beyond the reservation in place now; ``HEADROOM_BYTES`` covers
what grows after planning and is not measured: CuPy's run-time kernels loaded later, library and
NCCL workspaces, the driver's own bookkeeping. ``pool_used`` is every array of the process in the
pool, the chain's and the caller's alike. The arithmetic is pure (:func:`chain_room`,
:func:`local_growth`); :func:`measure` reads the device.

Planning counts the arrays in use, but CuPy's pool also keeps the blocks arrays gave back, and
a sweep's temporaries of changing sizes leave it holding more than it uses, which took a
PubMed-shaped fit past its budget (doc/performance.md, "PubMed shape within 8 GB"). So while a
chain with a budget is loaded, :class:`PoolCaps` also caps the pool's total (used and cached) at
the budget less what lies outside it; at the cap CuPy returns its wholly unused cached blocks to
the driver and tries again before it reports a shortage. (A cached block split among arrays still
in use cannot go back, so a pool near its cap can refuse what the plan, which counts arrays in
use, allowed.)
"""

import threading
from dataclasses import dataclass

from . import kernels

#: Bytes kept free beyond the measurement for what grows after the chain plans: CuPy's
#: element-wise and reduction kernels loaded at their first use (a module each), library
#: workspaces (the fit uses no cuBLAS; CuPy's sorts and scans take theirs from the pool), NCCL's
#: buffers of a fit over several GPUs, and the driver's allocations at first launches.
HEADROOM_BYTES = 64 << 20
#: ``cudaLimitStackSize`` of ``cudaDeviceGetLimit`` (the runtime's enum value).
_STACK_SIZE = 0


@dataclass(frozen=True)
class ProcessMemory:
    """One reading of the GPU (bytes).

    Attributes
    ----------
    total, free : int
        ``cudaMemGetInfo`` of the current GPU.
    pool_held, pool_used : int
        CuPy's default pool: every block it holds, and those in use by arrays.
    local_growth : int
        Local memory the engine's kernels will have the driver add (:func:`local_growth`).
    """

    total: int
    free: int
    pool_held: int
    pool_used: int
    local_growth: int = 0

    @property
    def outside_pool(self):
        """Bytes the GPU has taken outside CuPy's pool: context, modules, local memory, other
        allocators (and other processes, which the driver does not tell apart)."""
        return max(self.total - self.free - self.pool_held, 0)

    @property
    def fixed(self):
        """Bytes a budget gives up before any array: :attr:`outside_pool`, :attr:`local_growth`
        and :data:`HEADROOM_BYTES`."""
        return self.outside_pool + self.local_growth + HEADROOM_BYTES


def local_growth(per_thread, stack_now, threads_per_sm, n_sm):
    """Device bytes the driver adds to its local-memory reservation when a kernel needing
    ``per_thread`` bytes of local memory per thread first launches, where it holds
    ``stack_now`` bytes per thread already: it reserves for every thread the GPU can hold
    (``threads_per_sm`` x ``n_sm``), so 8 KiB a thread is about 2 GiB on a 132-SM GPU."""
    return max(int(per_thread) - int(stack_now), 0) * int(threads_per_sm) * int(n_sm)


def chain_room(limit, free, fixed, pool_used):
    """Device bytes a chain may still allocate.

    Parameters
    ----------
    limit : int or None
        ``max_device_memory`` in bytes: what the whole process may hold on the GPU; None: no
        budget, and the room is ``free``.
    free : int
        What an allocation can use now: the driver's free memory plus the pool's cached blocks.
    fixed : int
        :attr:`ProcessMemory.fixed`.
    pool_used : int
        Bytes of every array of the process in CuPy's pool.

    Returns
    -------
    room : int
        0 where the process holds the whole budget already.
    """
    if limit is None:
        return int(free)
    return max(int(min(free, int(limit) - int(fixed) - int(pool_used))), 0)


def measure(cp, kernel_names=()):
    """A :class:`ProcessMemory` of the current GPU, read after the context exists and the
    modules of ``kernel_names`` (``(stem, name)`` pairs, see
    :func:`~.kernels.get_function`) are loaded; their largest local memory per thread gives
    :attr:`~ProcessMemory.local_growth`."""
    per_thread = 0
    for stem, name in kernel_names:
        per_thread = max(per_thread, int(kernels.get_function(stem, name).local_size_bytes))
    runtime = cp.cuda.runtime
    gpu = runtime.getDevice()
    props = runtime.getDeviceProperties(gpu)
    growth = local_growth(per_thread, runtime.deviceGetLimit(_STACK_SIZE),
                          props["maxThreadsPerMultiProcessor"], props["multiProcessorCount"])
    # The pool's figures after the driver's, so that a block the pool takes in between is
    # counted as the pool's rather than twice.
    free, total = runtime.memGetInfo()
    pool = cp.get_default_memory_pool()
    return ProcessMemory(total=int(total), free=int(free), pool_held=int(pool.total_bytes()),
                         pool_used=int(pool.used_bytes()), local_growth=growth)


def held_bytes(cp, kernel_names=()):
    """Bytes of the current GPU a budget counts as the process's before a chain allocates
    anything (:attr:`ProcessMemory.fixed` and every array in CuPy's pool): a
    ``max_device_memory`` of ``held_bytes(...) + n`` leaves a chain ``n`` bytes."""
    reading = measure(cp, kernel_names)
    return reading.fixed + reading.pool_used


class PoolCaps:
    """Caps on CuPy's pools (:meth:`~cupy.cuda.MemoryPool.set_limit`) held by the chains that
    have a budget, one pool per device: the tightest cap held applies, and the caller's own
    limit (read when the first cap is taken) comes back when the last is let go. Several chains
    may hold caps at once (a several-GPU fit, concurrent fits in threads); the pool is the
    process's, so its other users are capped meanwhile too."""

    def __init__(self):
        self._lock = threading.Lock()
        self._held = {}  # (pool id, device) -> [the caller's limit, {token: cap}]

    def hold(self, pool, device, nbytes):
        """Cap ``pool`` on ``device`` (the current device) at ``nbytes`` (at least 1: CuPy reads
        0 as no limit) until the returned function is called (once or more: later calls do
        nothing)."""
        key, nbytes, token = (id(pool), int(device)), max(int(nbytes), 1), object()
        with self._lock:
            entry = self._held.setdefault(key, [pool.get_limit(), {}])
            entry[1][token] = nbytes
            cap = self._tightest(entry)
            pool.set_limit(size=cap)
            # A cap limits what the pool takes from the driver; blocks it cached before are
            # reused without that check, so the unused ones go back now.
            if pool.total_bytes() > cap:
                pool.free_all_blocks()

        def let_go():
            with self._lock:
                if entry[1].pop(token, None) is None:
                    return
                pool.set_limit(size=self._tightest(entry))
                if not entry[1]:
                    del self._held[key]

        return let_go

    @staticmethod
    def _tightest(entry):
        caller, caps = entry
        if not caps:
            return caller
        return min(list(caps.values()) + ([caller] if caller else []))


#: The process's caps (a pool is the process's, so its caps are too).
POOL_CAPS = PoolCaps()
