"""Hybrid word-topic storage on the device (ezLDA IV; the table's layout is in
:mod:`sklearn_gpulda.backends.cuda.sparse.hybrid_table`, the rule that picks the rare words and
whether B is stored so at all in :mod:`sklearn_gpulda.backends.cuda.sparse.memory_plan`, the
kernels' side in ``cuda/rare_rows.cuh``).

The sparse sampler keeps B as a dense (n_dense, K) array for its frequent words and a flat array
of hash-table slots for the rest (:class:`RareRows`). The kernels read both; the readers of the
state (``components_``, the prior updates' histograms, averaging) see a
:class:`~sklearn_gpulda.backends.cuda.sparse.hybrid_table.HybridTable`, made here from the slots,
or from the
averaging sum (:class:`HybridSum`), a whole (V, K) table where it fits and otherwise the dense
rows with the rare rows as sorted (word, topic) keys.
"""

import numpy as np

from .. import kernels as _kernels
from ..constants import WARP
from . import hybrid_table as _hybrid_table

STEM = "counts"

#: Bytes :meth:`HybridSum.add` may allocate per occupied slot of the B it adds: the decoded
#: entries (12), the keys, their order and the gathered keys and values (8 each), the decoding's
#: positions (8); an upper bound where NumPy's allocations are traced (tests/test_hybrid_table.py).
ADD_BYTES_PER_ENTRY = 56
#: ... and per key it already holds: one merged copy of the sum (16) and its index (16).
ADD_BYTES_PER_KEY = 32


class RareRows:
    """The rare words' slots on the device: ``slots`` (uint32), ``offsets`` (int64, with its
    host copy ``offsets_host``) and the first rare word ``n_dense``."""

    def __init__(self, cp, n_dense, offsets_host):
        self.n_dense = int(n_dense)
        self.offsets_host = offsets_host
        self.offsets = cp.asarray(offsets_host)
        self.slots = cp.zeros(int(offsets_host[-1]), dtype=cp.uint32)

    def twin(self, cp):
        """Rows of the same layout, not zeroed (a streamed sweep counts into a second B, and
        zeroes it first)."""
        other = RareRows.__new__(RareRows)
        other.n_dense, other.offsets_host, other.offsets = (self.n_dense, self.offsets_host,
                                                            self.offsets)
        other.slots = cp.empty_like(self.slots)
        return other


def zero(dense, rare):
    """Zero a B: its dense rows and, where it has them, its rare rows' slots."""
    from ..counts import clear

    clear(dense)
    if rare is not None:
        clear(rare.slots)


def add_rare_totals(rare, totals, n_sm):
    """``totals`` (K float64) plus each topic's counts over the rare rows (integer sums)."""
    import cupy as cp

    extra = cp.zeros(totals.shape[0], dtype=cp.uint64)
    n = int(rare.slots.size)
    if n:
        _kernels.launch(STEM, "rare_topic_totals", min(-(-n // 256), n_sm * 8), 256,
                        [(rare.slots, np.uint32), (n, "i64"), (extra, np.uint64)])
    totals += extra.astype(cp.float64)


def add_rare_to_whole(xp, rare, whole):
    """``whole`` ((V, K) float64) plus the counts in the rare rows' slots, in place: a kernel
    on the device (``counts.rare_add_to_whole``), the decoded entries on the host."""
    n = int(rare.slots.size)
    n_rare = int(rare.offsets.shape[0]) - 1
    if n == 0 or n_rare <= 0:
        return
    if xp is np:
        word, topic, count = _hybrid_table.entries(np, rare.slots, rare.offsets, rare.n_dense)
        whole[word, topic] += count  # each (word, topic) once in a B: the fancy += is a sum
        return
    _kernels.launch(STEM, "rare_add_to_whole", min(-(-n // 256), 65535), 256,
                    [(rare.slots, np.uint32), (n, "i64"), (rare.offsets, np.int64),
                     (n_rare, "i32"), (rare.n_dense, "i32"), (whole.shape[1], "i32"),
                     (whole, np.float64)])


def prior_floats(n_topics):
    """Floats of the prior's tables (:func:`prior_tables`): the row, then its tree's tile totals,
    their group-local running sums and the group totals (``cuda/tree.cuh``)."""
    tiles = -(-int(n_topics) // WARP)
    return int(n_topics) + 2 * tiles + -(-tiles // WARP)


def prior_tables(denom, beta, alpha, out):
    """``out[:K] = beta / denom`` in float32 (the Bhat of a count of 0), then the first levels
    of that row's tree over ``alpha * row``, from which the sampler patches each rare word's
    tree (``cuda/counts.cu``, ``prior_row`` and ``prior_levels``). ``out`` holds
    :func:`prior_floats` floats."""
    k = int(denom.shape[0])
    if k:
        _kernels.launch(STEM, "prior_row", -(-k // 256), 256,
                        [(denom, np.float64), (beta, "f64"), (k, "i32"), (out, np.float32)])
        _kernels.launch(STEM, "prior_levels", 1, 1024,
                        [(out, np.float32), (alpha, np.float32), (k, "i32"), (out[k:], np.float32)])


def table(cp, dense, rare, n_words):
    """The current B as a :class:`~sklearn_gpulda.backends.cuda.sparse.hybrid_table.HybridTable`
    (entries decoded
    from the slots: 12 bytes per occupied slot while it lives)."""
    word, topic, count = _hybrid_table.entries(cp, rare.slots, rare.offsets, rare.n_dense)
    return _hybrid_table.HybridTable(cp, dense, word, topic, count, n_words)


#: Averaging's sum of a hybrid B is a whole (V, K) float64 table where that table fits this
#: many times in the room left (so that the readers' scratch still fits beside it): adding a
#: sweep is then one scatter of the rare entries. Merging sorted keys instead took 5.4 ms an
#: averaged sweep at K = 10,000 on the NYTimes shape (H200), against 0.5 ms for the dense
#: table's sum at K = 1,000. Integer counts sum exactly either way, so the model is the same.
WHOLE_SUM_ROOM_FACTOR = 2


class HybridSum:
    """Averaging's running sum of a hybrid B: a whole (V, K) float64 table where it fits
    (:data:`WHOLE_SUM_ROOM_FACTOR`); else the dense rows in float64, and the rare rows as
    sorted keys ``word * K + topic`` with float64 sums (their union over the averaged sweeps)."""

    def __init__(self, cp, n_words, n_topics):
        self.cp, self.n_words, self.n_topics = cp, int(n_words), int(n_topics)
        self.whole = None
        self.dense = None
        self.keys = self.sums = None

    def bytes_to_add(self, dense, n_entries):
        """Bytes :meth:`add` may allocate for a B of ``dense`` rows and ``n_entries`` occupied
        slots, an upper estimate: the dense rows' float64 sum the first time, then
        :data:`ADD_BYTES_PER_ENTRY` per entry and :data:`ADD_BYTES_PER_KEY` per key held."""
        first = dense.size * 8 if self.dense is None else 0
        held = 0 if self.keys is None else int(self.keys.size)
        return first + ADD_BYTES_PER_ENTRY * int(n_entries) + ADD_BYTES_PER_KEY * held

    def _take_whole(self, check_room):
        """Whether the first add may make the whole table (``check_room`` raises when not)."""
        if self.dense is not None:
            return False  # the sum already holds keys
        need = WHOLE_SUM_ROOM_FACTOR * self.n_words * self.n_topics * 8
        try:
            if check_room is not None:
                check_room(need)
        except MemoryError:
            return False
        return True

    def add(self, dense, rare, check_room=None):
        """Add a B; ``check_room(bytes)``, if given, is asked first with :meth:`bytes_to_add`
        (and raises where they do not fit)."""
        cp = self.cp
        if self.whole is None and self._take_whole(check_room):
            self.whole = cp.zeros((self.n_words, self.n_topics), dtype=cp.float64)
        if self.whole is not None:
            self.whole[: dense.shape[0]] += dense
            add_rare_to_whole(cp, rare, self.whole)
            return
        n = int(cp.count_nonzero(rare.slots))
        if check_room is not None:
            check_room(self.bytes_to_add(dense, n))
        if self.dense is None:
            self.dense = dense.astype(cp.float64)
        else:
            self.dense += dense
        word, topic, count = _hybrid_table.entries(cp, rare.slots, rare.offsets, rare.n_dense,
                                                   n=n)
        self.keys, self.sums = _hybrid_table.add_entries(cp, self.n_topics, self.keys, self.sums,
                                                         word, topic, count)

    def table(self):
        """The sum as a word-major table: the whole array, or a
        :class:`~sklearn_gpulda.backends.cuda.sparse.hybrid_table.HybridTable`."""
        if self.whole is not None:
            return self.whole
        cp = self.cp
        k = self.n_topics
        return _hybrid_table.HybridTable(cp, self.dense, (self.keys // k).astype(cp.int32),
                                         (self.keys % k).astype(cp.int32), self.sums,
                                         self.n_words)
