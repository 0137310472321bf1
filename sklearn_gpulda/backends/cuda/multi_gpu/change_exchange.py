"""Summing B over NCCL ranks by the cells each rank's counts changed, for ranks on several hosts.

NCCL's ring all-reduce has every rank send ``2 (N - 1) / N`` copies of the whole V x K table a
sweep, whatever the sweep changed. Near convergence a sweep changes a few percent of the cells
(``doc/dask.rst``), so across hosts, where the links are slow, each rank sends only its own
changes instead: ``(cell, change)`` pairs, 12 bytes each, gathered by every rank with NCCL's
all-gather and added to its copy of the corpus-wide B. Where some rank's list is longer than
the buffers hold (:func:`list_capacity`, fewer bytes than the ring sends), that sweep
sums the whole table as the ring does. Either way B is the ring's, bit for bit, for integer
counts (float32 integers add exactly in any order); weighted counts would drift by rounding
from sweep to sweep, so they keep the ring.

Memory: about three more V x K tables per GPU (float32: the rank's counts of the previous sweep
and the corpus-wide sum; the gathered lists, 12 bytes x V K / 4), all allocated when the rank
joins, so that running out of memory fails the join (no collective is waiting then) rather
than a sweep. Imported only where CuPy runs the chain.
"""

import numpy as np

from .. import kernels as _kernels
from ..counts import clear

STEM = "exchange"
BLOCK = 256
#: Bytes a listed change takes: an int64 cell and a float32 change.
PAIR_BYTES = 12


def ring_bytes(n_cells, n_ranks):
    """Bytes a rank sends in NCCL's ring all-reduce of ``n_cells`` float32 values."""
    return 2 * (n_ranks - 1) * 4 * n_cells // max(n_ranks, 1)


def list_capacity(n_cells, n_ranks):
    """The longest list of changes a rank gathers: ``V K / (4 N)``, so that the N gathered lists
    take 3 bytes per cell whatever N. It is below the break-even with the ring
    (``(N - 1) m * 12 < 2 (N - 1) / N * 4 V K`` for ``m < 2 V K / (3 N)``), and a rank holds
    about 1 / N of the tokens, hence of the changes."""
    return max(1, n_cells // (4 * max(n_ranks, 1)))


def _copy(cp, target, source):
    """Copy a C-contiguous device array into another of its size on the current stream (a
    plain memory copy: CuPy's assignment would compile a kernel on first use)."""
    target.data.copy_from_device_async(source.data, source.nbytes,
                                       cp.cuda.get_current_stream())


def buffer_bytes(n_cells, n_ranks):
    """Device bytes a rank's :class:`ChangeExchange` allocates for a table of ``n_cells``:
    what a shard's memory plan keeps aside for it."""
    capacity = list_capacity(n_cells, n_ranks)
    return 8 * n_cells + PAIR_BYTES * capacity * (n_ranks + 1) + 8 * (n_ranks + 1)


class ChangeExchange:
    """One rank's sum of B by changed cells (see the module's docstring).

    Parameters
    ----------
    cp : module
        CuPy.
    rank : NcclRank
        This process's rank; its GPU is the current device when the methods run.
    n_ranks : int
    n_cells : int
        The table's size, V x K.
    capacity : int, optional
        The longest list of changes gathered (default :func:`list_capacity`); a sweep with a
        longer list on any rank sums the whole table instead.

    Raises
    ------
    cupy.cuda.memory.OutOfMemoryError
        Where the buffers do not fit the GPU.
    """

    name = "changes"

    def __init__(self, cp, rank, n_ranks, n_cells, capacity=None):
        self.cp = cp
        self.rank = rank
        self.n_ranks = int(n_ranks)
        n_cells = int(n_cells)
        capacity = list_capacity(n_cells, self.n_ranks) if capacity is None else capacity
        capacity = max(1, min(int(capacity), n_cells))
        self._before = cp.empty(n_cells, dtype=cp.float32)
        self._sum = cp.empty(n_cells, dtype=cp.float32)
        self._cells = cp.empty(capacity, dtype=cp.int64)
        self._deltas = cp.empty(capacity, dtype=cp.float32)
        self._all_cells = cp.empty(self.n_ranks * capacity, dtype=cp.int64)
        self._all_deltas = cp.empty(self.n_ranks * capacity, dtype=cp.float32)
        self._n_changed = cp.empty(1, dtype=cp.uint64)
        self._counts = cp.empty(self.n_ranks, dtype=cp.uint64)
        #: Bytes this rank sent, one entry per sum since :meth:`start`.
        self.sent = []
        #: The longest list gathered, one entry per sum; None where the whole table was summed.
        self.lists = []

    def start(self, buffer):
        """The first sum (the initial topics'): the whole table, keeping this rank's counts and
        the sum for the next sweeps' changes. ``buffer`` holds this rank's counts and is summed
        in place."""
        cp = self.cp
        self._check(buffer)
        _copy(cp, self._before, buffer)
        self.rank.all_reduce(buffer)
        _copy(cp, self._sum, buffer)
        self.sent = [ring_bytes(buffer.size, self.n_ranks)]
        self.lists = [None]

    def sum(self, buffer):
        """Sum ``buffer`` (this rank's counts after a sweep, float32, C-contiguous) in place over
        the ranks, from the changes since the last sum."""
        cp = self.cp
        self._check(buffer)
        n = buffer.size
        capacity = self._cells.size
        n_changed = self._n_changed
        clear(n_changed)
        grid = max(1, min(-(-n // BLOCK), 65_535))
        _kernels.launch(STEM, "list_changes", grid, BLOCK, [
            (buffer, np.float32), (self._before, np.float32), (n, "i64"),
            (self._cells, np.int64), (self._deltas, np.float32), (n_changed, np.uint64),
            (capacity, "i64")])
        counts = self._counts
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
            cells = self._all_cells[:self.n_ranks * longest]
            deltas = self._all_deltas[:self.n_ranks * longest]
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

    def _check(self, buffer):
        if buffer.size != self._sum.size or buffer.dtype != self._sum.dtype:
            raise ValueError(f"the exchange was made for {self._sum.size} float32 cells, got "
                             f"{buffer.size} of {buffer.dtype}")

    def close(self):
        self._before = self._sum = self._cells = self._deltas = None
        self._all_cells = self._all_deltas = self._n_changed = self._counts = None
