"""How the NumPy backend cuts a sweep's work, and the team of threads that runs it.

An ESCA sweep draws every token from counts fixed at the start of the sweep, and each token's
uniform is keyed by its canonical index, so the tokens of a sweep can be cut into ranges and the
ranges drawn in any order by any worker. The counts are cut by rows instead (documents for A,
words for B through a word-major permutation of the tokens), so every cell still sums its tokens'
weights in token order, as one ``bincount`` over the whole corpus does. The model is therefore
the same, bit for bit, whatever the number of workers; ``tests/test_numpy_threads.py`` and
``tests/test_numpy_processes.py`` check it.

:class:`ThreadTeam` runs the tasks on threads, which share the arrays for free but take turns at
the GIL at every NumPy call (and ``bincount`` holds it throughout): right for one job and for
small corpora. :class:`~.processes.ProcessTeam` runs the same tasks in worker processes.
"""

import math
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from joblib import effective_n_jobs

#: Elements of a (tokens x topics) temporary per chunk: 1 MB per float32 array, so that a chunk's
#: temporaries stay in the core's cache between the steps of a draw: chunks much larger spill
#: to memory, much smaller ones pay NumPy's per-call cost more often. Each thread works on chunks
#: of this size.
CHUNK_ELEMENTS = 1 << 18

#: Fewest tokens in a chunk (unless that would pass MAX_CHUNK_ELEMENTS): a draw makes some thirty
#: NumPy calls per chunk, and with fewer tokens their fixed cost, and with threads their turns at
#: the GIL, outweigh what small temporaries gain in the cache (a few hundred tokens per chunk
#: leave a second thread with nothing to gain).
MIN_CHUNK_TOKENS = 1024

#: Most elements of a (tokens x topics) temporary whatever the chunk (16 MB in float32).
MAX_CHUNK_ELEMENTS = 1 << 22

#: Ranges (tasks) per worker and step, so that a worker that finishes early takes another.
CHUNKS_PER_THREAD = 4


def resolve_n_jobs(n_jobs):
    """Number of threads for ``n_jobs`` as scikit-learn reads it: None means 1 unless a
    ``joblib.parallel_config`` context says otherwise, -1 all cores, -2 all but one."""
    return max(1, int(effective_n_jobs(n_jobs)))


class ThreadTeam:
    """A pool of threads and the way work is cut for it.

    Parameters
    ----------
    n_threads : int
        Threads to use; 1 runs everything on the calling thread.
    """

    def __init__(self, n_threads=1):
        self.n_threads = max(1, int(n_threads))
        self._pool = None

    def map(self, fn, items):
        """``[fn(item) for item in items]``, the calls spread over the threads, results in order."""
        items = list(items)
        if self.n_threads == 1 or len(items) <= 1:
            return [fn(item) for item in items]
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.n_threads, thread_name_prefix="sklearn-gpulda")
        return list(self._pool.map(fn, items))

    def run(self, task, items, **arguments):
        """``[task(item, **arguments) for item in items]`` on the team (:meth:`map`). A
        :class:`~.processes.ProcessTeam` runs the same calls in worker processes."""
        return self.map(lambda item: task(item, **arguments), items)

    def empty(self, key, shape, dtype):
        """A new array for a chain's state named ``key`` (a process team keeps one per key in
        shared memory and hands it back again)."""
        return np.empty(shape, dtype=dtype)

    def share(self, key, values):
        """``values`` where the team's workers can read them: as they are, for threads."""
        return values

    def owned(self, shape, dtype):
        """A new array for the workers to fill and the caller to keep (:meth:`hand_over`)."""
        return np.empty(shape, dtype=dtype)

    def hand_over(self, arr):
        """``arr``, filled, now the caller's alone."""
        return arr

    def token_ranges(self, n_tokens):
        """About ``CHUNKS_PER_THREAD`` ranges of tokens per thread, as (start, stop) pairs: one
        task each, which then walks its range in :func:`chunks` (one range for one thread)."""
        n_parts = 1 if self.n_threads == 1 else CHUNKS_PER_THREAD * self.n_threads
        step = max(1, math.ceil(n_tokens / n_parts))
        return [(s, min(n_tokens, s + step)) for s in range(0, n_tokens, step)]

    def row_ranges(self, row_ptr):
        """Cuts of the rows of a CSR-like index (``row_ptr`` of length n_rows + 1) into about
        ``CHUNKS_PER_THREAD`` ranges per thread of similar numbers of entries, as (first row,
        end row) pairs covering every row."""
        n_rows = len(row_ptr) - 1
        if self.n_threads == 1 or n_rows <= 1:
            return [(0, n_rows)]
        n_parts = min(n_rows, CHUNKS_PER_THREAD * self.n_threads)
        targets = np.linspace(0, row_ptr[-1], n_parts + 1)[1:-1]
        cuts = np.unique(np.concatenate(([0], np.searchsorted(row_ptr, targets), [n_rows])))
        return list(zip(cuts[:-1].tolist(), cuts[1:].tolist()))

    def close(self):
        """Stop the threads (a later :meth:`map` starts them again)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None


def chunks(start, stop, n_topics):
    """Slices of ``range(start, stop)`` for per-token work with (tokens x topics) temporaries:
    ``CHUNK_ELEMENTS`` elements each (1 MB per float32 temporary), or ``MIN_CHUNK_TOKENS``
    tokens at large K (at most ``MAX_CHUNK_ELEMENTS``). No result depends on where they fall."""
    k = max(1, n_topics)
    step = max(1, CHUNK_ELEMENTS // k, min(MIN_CHUNK_TOKENS, MAX_CHUNK_ELEMENTS // k))
    return [slice(s, min(stop, s + step)) for s in range(start, stop, step)]
