"""Summing B over NCCL ranks by the cells each rank's counts changed, for ranks on several hosts.

NCCL's ring all-reduce has every rank send ``2 (N - 1) / N`` copies of the whole V x K table a
sweep, whatever the sweep changed. Near convergence a sweep changes a few percent of the cells
(``doc/dask.rst``), so across hosts, where the links are slow, each rank sends only its own
changes instead: ``(cell, change)`` pairs, 12 bytes each, gathered by every rank with NCCL's
all-gather and added to its copy of the corpus-wide B. Where some rank's list would move more
bytes than the ring, that sweep sums the whole table as the ring does. Either way B is the
ring's, bit for bit (integer counts in float32 add exactly in any order).

It costs two more V x K float32 tables per GPU: the rank's counts of the previous sweep and the
corpus-wide sum. Imported only where CuPy runs the chain.
"""

import numpy as np

from .. import kernels as _kernels

STEM = "exchange"
BLOCK = 256
#: Bytes a listed change takes: an int64 cell and a float32 change.
PAIR_BYTES = 12


def ring_bytes(n_cells, n_ranks):
    """Bytes a rank sends in NCCL's ring all-reduce of ``n_cells`` float32 values."""
    return 2 * (n_ranks - 1) * 4 * n_cells // max(n_ranks, 1)


def list_capacity(n_cells, n_ranks):
    """The longest list of changes worth gathering: past it the gather would send more bytes
    than the ring (``(N - 1) m * 12 >= 2 (N - 1) / N * 4 V K``), and lists are kept to an eighth
    of the table in memory."""
    return max(1, min(2 * n_cells // (3 * max(n_ranks, 1)), n_cells // 8))


def _copy(cp, target, source):
    """Copy a C-contiguous device array into another of its size on the current stream (a
    plain memory copy: CuPy's assignment would compile a kernel on first use)."""
    target.data.copy_from_device_async(source.data, source.nbytes,
                                       cp.cuda.get_current_stream())


def _copy_of(cp, source):
    target = cp.empty_like(source)
    _copy(cp, target, source)
    return target


class ChangeExchange:
    """One rank's sum of B by changed cells (see the module's docstring).

    Parameters
    ----------
    cp : module
        CuPy.
    rank : NcclRank
        This process's rank; its GPU is the current device when the methods run.
    n_ranks : int
    capacity : int, optional
        The longest list of changes gathered (default :func:`list_capacity`); a sweep with a
        longer list on any rank sums the whole table instead.
    """

    name = "changes"

    def __init__(self, cp, rank, n_ranks, capacity=None):
        self.cp = cp
        self.rank = rank
        self.n_ranks = int(n_ranks)
        self.capacity = None if capacity is None else max(1, int(capacity))
        self._before = self._sum = None
        self._cells = self._deltas = None
        #: Bytes this rank sent, one entry per sum since :meth:`start`.
        self.sent = []
        #: The longest list gathered, one entry per sum; None where the whole table was summed.
        self.lists = []

    def start(self, buffer):
        """The first sum (the initial topics'): the whole table, keeping this rank's counts and
        the sum for the next sweeps' changes. ``buffer`` holds this rank's counts and is summed
        in place."""
        cp = self.cp
        self._before = _copy_of(cp, buffer)
        self.rank.all_reduce(buffer)
        self._sum = _copy_of(cp, buffer)
        n = buffer.size
        capacity = self.capacity or list_capacity(n, self.n_ranks)
        self._cells = cp.empty(capacity, dtype=cp.int64)
        self._deltas = cp.empty(capacity, dtype=cp.float32)
        self.sent = [ring_bytes(n, self.n_ranks)]
        self.lists = [None]

    def sum(self, buffer):
        """Sum ``buffer`` (this rank's counts after a sweep, float32, C-contiguous) in place over
        the ranks, from the changes since the last sum."""
        cp = self.cp
        n = buffer.size
        capacity = self._cells.size
        n_changed = cp.zeros(1, dtype=cp.uint64)
        grid = max(1, min(-(-n // BLOCK), 65_535))
        _kernels.launch(STEM, "list_changes", grid, BLOCK, [
            (buffer, np.float32), (self._before, np.float32), (n, "i64"),
            (self._cells, np.int64), (self._deltas, np.float32), (n_changed, np.uint64),
            (capacity, "i64")])
        counts = cp.empty(self.n_ranks, dtype=cp.uint64)
        self.rank.all_gather(n_changed, counts, 1)
        longest = int(counts.get().max())
        if longest > capacity:
            # Every rank read the same counts, so every rank takes this branch together.
            self.rank.all_reduce(buffer)
            _copy(cp, self._sum, buffer)
            self.sent.append(ring_bytes(n, self.n_ranks))
            self.lists.append(None)
            return
        if longest:
            cells = cp.empty(self.n_ranks * longest, dtype=cp.int64)
            deltas = cp.empty(self.n_ranks * longest, dtype=cp.float32)
            self.rank.all_gather(self._cells[:longest], cells, longest)
            self.rank.all_gather(self._deltas[:longest], deltas, longest)
            total = self.n_ranks * longest
            _kernels.launch(STEM, "add_changes", max(1, min(-(-total // BLOCK), 65_535)),
                            BLOCK, [(self._sum, np.float32), (cells, np.int64),
                                    (deltas, np.float32), (counts, np.uint64),
                                    (self.n_ranks, "i32"), (longest, "i64")])
        _copy(cp, buffer, self._sum)
        self.sent.append((self.n_ranks - 1) * longest * PAIR_BYTES)
        self.lists.append(longest)

    def close(self):
        self._before = self._sum = self._cells = self._deltas = None
