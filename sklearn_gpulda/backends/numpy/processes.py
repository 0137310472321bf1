"""Worker processes for the CPU engine, with the chain's arrays in shared memory.

Threads share arrays for free but not the interpreter: every NumPy call takes the GIL to start
and to finish. A draw makes some thirty calls per chunk of tokens, most of them on one value per
token, so calls on arrays of some thousands of elements gain nothing from more threads, and
``bincount`` holds the GIL throughout. So from
two jobs on the engine runs its tasks in processes instead (worker processes started once per
Python process and size, each serving rounds of tasks over a socket of its own:
:mod:`.worker_rounds`), and the arrays they read and write are
memory-mapped files in ``/dev/shm`` (a temporary folder where it has no room) that every worker
maps once and unmaps when the store deletes them.

A task is a module-level function called as ``task(item, **arguments)``; :meth:`run` sends an
array of the team's store as a small handle (arrays outside the store are copied into it, so
that nothing big is pickled per task), anything else by value.
"""

import atexit
import math
import multiprocessing
import os
import shutil
import tempfile
import threading
import uuid

import numpy as np

from ..._runtime.host import busy_elsewhere, usable_cores
from .threads import ThreadTeam
from .worker_rounds import SUPPORTED, RoundPool

#: Memory maps a worker keeps open (the store reuses its files, so a chain needs a few dozen).
_WORKER_CACHE_SIZE = 128
_worker_maps = {}


class SharedHandle:
    """How a worker finds an array of the store: file, dtype and shape."""

    __slots__ = ("path", "dtype", "shape")

    def __init__(self, path, dtype, shape):
        self.path, self.dtype, self.shape = path, dtype, shape

    def __reduce__(self):
        return SharedHandle, (self.path, self.dtype, self.shape)

    def open(self):
        """The array, mapped read-write (cached per process: the file's contents change, its
        place does not)."""
        key = (self.path, self.dtype, self.shape)
        arr = _worker_maps.get(key)
        if arr is None:
            if len(_worker_maps) >= _WORKER_CACHE_SIZE:
                _worker_maps.clear()
            if int(np.prod(self.shape)) == 0:
                arr = np.empty(self.shape, dtype=self.dtype)
            else:
                # A plain ndarray over the map (which its base keeps open): NumPy calls on the
                # np.memmap subclass wrap every result in it, a cost per call.
                arr = np.memmap(self.path, dtype=self.dtype, mode="r+",
                                shape=self.shape).view(np.ndarray)
            _worker_maps[key] = arr
        return arr


def _place(arr):
    """Where an array's data lie and how they read: equal for the store's array and any whole
    view of it."""
    if not arr.flags.c_contiguous:
        return None
    return (arr.__array_interface__["data"][0], arr.dtype.str, arr.shape)


#: Space left free in ``/dev/shm`` beside an array put there: a container's is often 64 MB,
#: and a process touching a page of a full tmpfs dies of SIGBUS.
SHM_MARGIN_BYTES = 256 << 20


def _shm_has_room(nbytes):
    try:
        st = os.statvfs("/dev/shm")
    except OSError:
        return False
    return os.access("/dev/shm", os.W_OK) and st.f_bavail * st.f_frsize >= nbytes + \
        SHM_MARGIN_BYTES


class SharedStore:
    """Arrays in memory-mapped files that worker processes open by name.

    :meth:`array` hands back the same array for the same key while its shape and dtype stay, so
    a chain rewrites its tables in place sweep after sweep instead of making new files.
    """

    def __init__(self):
        self._folders = {}  # in memory (True) or on disk (False) -> folder
        self._serial = 0
        self._arrays = {}   # key -> ndarray (a view of a memmap)
        self._handles = {}  # _place(array) -> SharedHandle

    def array(self, key, shape, dtype):
        """The store's array for ``key``, of ``shape`` and ``dtype`` (contents undefined when
        newly made)."""
        shape = tuple(int(n) for n in shape)
        dtype = np.dtype(dtype)
        arr = self._arrays.get(key)
        if arr is not None and arr.shape == shape and arr.dtype == dtype:
            return arr
        self._drop(key)
        nbytes = int(np.prod(shape)) * dtype.itemsize
        # In memory (tmpfs) where it has room, else a temporary folder on disk (the page
        # cache still serves it; the kernel writes it back at leisure).
        in_memory = _shm_has_room(nbytes)
        folder = self._folders.get(in_memory)
        if folder is None:
            folder = self._folders[in_memory] = tempfile.mkdtemp(
                prefix="sklearn-gpulda-", dir="/dev/shm" if in_memory else None)
            atexit.register(shutil.rmtree, folder, True)
        path = os.path.join(folder, f"{uuid.uuid4().hex}.bin")
        if nbytes == 0:
            arr = np.empty(shape, dtype=dtype)
        else:
            arr = np.memmap(path, dtype=dtype, mode="w+", shape=shape).view(np.ndarray)
        self._arrays[key] = arr
        self._handles[_place(arr)] = SharedHandle(path, dtype.str, shape)
        return arr

    def copy(self, key, values):
        """``values`` copied into the store's array for ``key``."""
        values = np.asarray(values)
        arr = self.array(key, values.shape, values.dtype)
        arr[...] = values
        return arr

    def handle(self, arr):
        """The handle of ``arr`` if it is one of the store's arrays, or a view of one that
        covers it whole with the same dtype and shape (as ``np.asarray`` makes)."""
        return self._handles.get(_place(arr))

    def _drop(self, key):
        arr = self._arrays.pop(key, None)
        if arr is None:
            return
        handle = self._handles.pop(_place(arr))
        del arr
        try:
            os.remove(handle.path)
        except OSError:
            pass

    def owned(self, shape, dtype):
        """A new array of the store, for :meth:`hand_over` once the workers have filled it."""
        self._serial += 1
        return self.array(f"owned:{self._serial}", shape, dtype)

    def hand_over(self, arr):
        """Forget ``arr`` and delete its file: the caller keeps the array (its memory stays
        mapped, and is freed with it)."""
        for key, held in list(self._arrays.items()):
            if held is arr:
                self._drop(key)
        return arr

    @property
    def folders(self):
        """The folders holding the store's files."""
        return list(self._folders.values())

    def close(self):
        """Delete every file (arrays still referenced elsewhere stay readable on POSIX)."""
        for key in list(self._arrays):
            self._drop(key)
        for folder in self._folders.values():
            shutil.rmtree(folder, ignore_errors=True)
        self._folders = {}


def _prune_maps():
    """Drop this worker's maps of files the store has deleted: a map keeps its memory, and a
    deleted file's pages are freed only once nothing maps them."""
    for key in [k for k in _worker_maps if not os.path.exists(k[0])]:
        del _worker_maps[key]


def _resolve(value):
    return value.open() if isinstance(value, SharedHandle) else value


_pools = {}
_pools_lock = threading.Lock()


def _pool(n_workers):
    """This process's pool of at least ``n_workers`` worker processes
    (:class:`~.worker_rounds.RoundPool`), started at first use and kept for later fits (their
    start-up, seconds for many workers, is paid once). A round runs on the first
    ``n_workers`` of the smallest pool large enough, so that a team made smaller by a loaded
    machine reuses the workers already started. None is shared with joblib's reusable
    executor, and a new one replaces a pool that broke (a worker died)."""
    with _pools_lock:
        for size, pool in sorted(_pools.items()):
            if size >= n_workers and pool.broken:
                del _pools[size]
            elif size >= n_workers:
                return pool
        pool = _pools[n_workers] = RoundPool(n_workers, _prune_maps, _resolve)
        return pool


class ProcessTeam(ThreadTeam):
    """Worker processes and the shared arrays they work on; cuts work as :class:`ThreadTeam`.

    Parameters
    ----------
    n_threads : int
        Worker processes (the name is the team interface's).
    """

    def __init__(self, n_threads):
        super().__init__(n_threads)
        self.store = SharedStore()

    def empty(self, key, shape, dtype):
        return self.store.array(key, shape, dtype)

    def share(self, key, values):
        return None if values is None else self.store.copy(key, values)

    def owned(self, shape, dtype):
        return self.store.owned(shape, dtype)

    def hand_over(self, arr):
        return self.store.hand_over(arr)

    def run(self, task, items, **arguments):
        """``[task(item, **arguments) for item in items]`` in the worker processes.

        Arrays of the store travel as handles. Any other array is copied into the store first
        and, if writable, copied back afterwards, so that a task writing into it is seen (the
        chain passes its own state as store arrays; this keeps other callers correct).
        """
        items = list(items)
        if not items:
            return []
        sent, copies = {}, []
        for name, value in arguments.items():
            if isinstance(value, np.ndarray):
                handle = self.store.handle(value)
                if handle is None:
                    copy = self.store.copy(f"argument:{name}", value)
                    handle = self.store.handle(copy)
                    if value.flags.writeable:
                        copies.append((value, copy))
                sent[name] = handle
            else:
                sent[name] = value
        results = _pool(self.n_threads).run(task, items, sent, n_workers=self.n_threads)
        for value, copy in copies:
            value[...] = copy
        return results

    def close(self):
        had_files = bool(self.store.folders)
        self.store.close()
        if not had_files:
            return
        for pool in list(_pools.values()):
            if pool.broken:
                continue
            # Let every worker unmap the deleted files now rather than at its next round (an
            # idle pool would otherwise hold a finished fit's tables).
            try:
                pool.each(_prune_maps)
            except Exception:  # noqa: BLE001 - a pool that broke meanwhile holds no maps
                pass


def processes_allowed():
    """Whether this process may start worker processes: not when it is itself a daemonic worker
    (Dask's, multiprocessing's), nor under ``joblib.parallel_config(backend='threading')``, nor
    on a platform without Unix sockets and file locks (:mod:`.worker_rounds`)."""
    if not SUPPORTED or multiprocessing.current_process().daemon:
        return False
    try:
        from joblib.parallel import get_active_backend

        backend, _ = get_active_backend()
    except Exception:  # noqa: BLE001 - an older or newer joblib without it: processes
        return True
    return "Threading" not in type(backend).__name__


def make_team(n_jobs, processes=True):
    """Processes for more than one job where they may start (and ``processes``), else
    threads: exactly ``n_jobs`` of them (:func:`choose_team` picks how many)."""
    if n_jobs > 1 and processes and processes_allowed():
        return ProcessTeam(n_jobs)
    return ThreadTeam(n_jobs)


#: A sweep's cost per token that does not grow with K, in units of one token-topic pair: a
#: draw costs about ``a + b * K`` per token (its fixed NumPy calls, the uniform, the counts'
#: updates, and the K-long running sums), and the one-job sweeps of ``doc/performance.md``
#: (1 M tokens at K = 20 and 100) put ``a / b`` near 90.
TOKEN_COST_TOPICS = 90

#: Fewest units of work (tokens x (K + TOKEN_COST_TOPICS)) per worker and sweep. A team of
#: workers pays three rounds a sweep, each a message both ways per worker, plus the serial
#: parts the caller keeps; a worker's share must be large against them or the team loses to
#: one thread. At the cost per unit of the same measurements a share this size is several
#: times a sweep's round trips with many workers (``doc/history.md``), and at K = 20 two
#: workers need about the 100,000 tokens that ``PROCESS_MIN_TOKENS`` alone asked before.
MIN_WORK_PER_WORKER = 6_000_000


def sweep_work(n_tokens, n_topics):
    """Units of work of one sweep, for :func:`worker_count`: ``n_tokens * (n_topics +
    TOKEN_COST_TOPICS)``."""
    return int(n_tokens) * (max(1, int(n_topics)) + TOKEN_COST_TOPICS)


def worker_count(n_jobs, work, cores=None, busy=None):
    """How many workers a team should have for a sweep of ``work`` units; 1 means none (the
    caller runs every task itself, on one thread).

    Never more than ``n_jobs``; never more than the free cores less one for the caller, which
    waits on the team and runs the serial parts of a sweep, so that workers and caller are
    never more busy processes than cores; and never fewer than ``MIN_WORK_PER_WORKER`` units
    each. Fewer than two workers would only add round trips to one thread's work, so that
    case is 1. The model does not depend on the answer.

    Parameters
    ----------
    n_jobs : int
        The most workers asked (``n_jobs`` as :func:`~.threads.resolve_n_jobs` reads it).
    work : int
        Units of work of a sweep (:func:`sweep_work`).
    cores : int, optional
        Usable cores (default :func:`usable_cores`).
    busy : float, optional
        Cores busy with other work (default :func:`busy_elsewhere`), rounded to the nearest.

    Returns
    -------
    n_workers : int
    """
    cores = usable_cores() if cores is None else int(cores)
    busy = busy_elsewhere(cores) if busy is None else float(busy)
    free = cores - int(math.floor(busy + 0.5))
    n = min(int(n_jobs), free - 1, int(work) // MIN_WORK_PER_WORKER)
    return n if n >= 2 else 1


def choose_team(n_jobs, n_tokens, n_topics, processes=True):
    """The team for a chain of ``n_tokens`` tokens and ``n_topics`` topics with at most
    ``n_jobs`` workers: :func:`worker_count` of them, in processes where ``processes`` and
    :func:`processes_allowed` let them start, else threads (one thread below two workers)."""
    return make_team(worker_count(n_jobs, sweep_work(n_tokens, n_topics)), processes)
