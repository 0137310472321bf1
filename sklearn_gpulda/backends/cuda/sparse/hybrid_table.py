"""Hybrid word-topic storage (ezLDA, Sec. IV): frequent words' rows of B dense, rare words' rows as
small hash tables of (topic, count).

With words relabelled by decreasing frequency, a dense (V, K) table spends K cells on a word of a
handful of tokens. Here the words whose hash table would take at most half a dense row keep a
table instead; they are a suffix of the relabelled words, so rows ``0 .. n_dense - 1`` stay a dense
(n_dense, K) array and word ``v >= n_dense`` owns slots ``offsets[v - n_dense] ..
offsets[v - n_dense + 1]`` of one flat uint32 array.

A slot is 0 when empty, else ``(topic << 16) | count``. A rare word's row has
:data:`~.memory_plan.SLOTS_PER_TOKEN` slots per token (at least 2), so it never holds more
distinct topics than two thirds of its slots, and it has fewer than 2^16 tokens (the count field
never overflows): which words are rare, and the slots each gets, is the memory plan's choice
(:func:`~.memory_plan.split_rows`). A topic's probe sequence starts at its multiply-shift hash,
which maps onto a row of any size, and walks forward with wrap-around. (Rows were first a power
of two of at least twice the tokens: 2.9 slots per token on average against 1.5, which put the B
of the full PubMed shape at K = 32,768 at 2.70 GB against 1.87.)

The chain does not depend on where a topic lands in its row: the sampler scatters the row into its
Bhat table (cells of topics absent from the row take the prior's value, the same float the dense
row would give), so a hybrid chain is the dense chain bit for bit. This module holds the NumPy
statement of what the device's insertion and lookup do (``cuda/rare_rows.cuh``, whose hash it must
match), and the readers of a table that work on NumPy and CuPy arrays alike.
"""

import numpy as np

#: Multiplier of the topic hash (Knuth's 2^32 / golden ratio); ``cuda/rare_rows.cuh`` uses it too.
HASH_MULTIPLIER = 2654435761
#: Bits of a slot holding the count; the topic sits above them.
COUNT_BITS = 16
COUNT_MASK = (1 << COUNT_BITS) - 1
#: Largest count a slot holds.
MAX_RARE_TOKENS = COUNT_MASK


def home_slot(topic, cap):
    """First slot a topic probes in a row of ``cap`` slots: ``h * cap >> 32`` of its hash
    ``h = topic * HASH_MULTIPLIER mod 2^32`` (multiply-shift: uniform over any row size)."""
    return (((int(topic) * HASH_MULTIPLIER) & 0xFFFFFFFF) * int(cap)) >> 32


def next_slot(h, cap):
    """The slot probed after ``h`` (wrapping round)."""
    return 0 if h + 1 == cap else h + 1


def insert(slots, offsets, n_dense, words, topics):
    """Count each (word, topic) pair into the rare words' rows, one at a time (``slots`` in place;
    every word must be rare). The NumPy statement of the device's insertion: the probe sequence is
    the same, the order of insertion (hence which slot a topic takes after a collision) is not."""
    for v, k in zip(np.asarray(words).tolist(), np.asarray(topics).tolist()):
        r = v - n_dense
        lo, cap = int(offsets[r]), int(offsets[r + 1] - offsets[r])
        h = home_slot(k, cap)
        for _ in range(cap):
            s = int(slots[lo + h])
            if s == 0:
                slots[lo + h] = (k << COUNT_BITS) | 1
                break
            if s >> COUNT_BITS == k:
                slots[lo + h] = s + 1
                break
            h = next_slot(h, cap)
        else:
            raise ValueError(f"the row of word {v} is full")


def lookup(slots, offsets, n_dense, word, topic):
    """The count of ``topic`` in rare word ``word``'s row (0 if absent), by the probe sequence."""
    r = word - n_dense
    lo, cap = int(offsets[r]), int(offsets[r + 1] - offsets[r])
    if cap == 0:
        return 0
    h = home_slot(topic, cap)
    for _ in range(cap):
        s = int(slots[lo + h])
        if s == 0:
            return 0
        if s >> COUNT_BITS == topic:
            return s & COUNT_MASK
        h = next_slot(h, cap)
    return 0


def slot_counts(xp, slots):
    """Float32 counts of the slots, 0 where empty (the rare rows' part of a value histogram)."""
    return (slots & xp.uint32(COUNT_MASK)).astype(xp.float32)


#: Slots decoded at a time by :func:`entries`: bounds its scratch (about 24 bytes a slot).
ENTRY_PIECE_SLOTS = 1 << 25


def entries(xp, slots, offsets, n_dense, piece=ENTRY_PIECE_SLOTS, n=None):
    """``(word, topic, count)`` of every occupied slot, in slot order (int32, int32, float32,
    exact: counts are below 2^16; NumPy or CuPy as ``xp``). Decoded ``piece`` slots at a time
    into arrays allocated once, so the scratch beyond the 12 bytes per entry returned is that
    of one piece. ``n``: the occupied slots, when the caller has counted them."""
    n = int(xp.count_nonzero(slots)) if n is None else int(n)
    word = xp.empty(n, dtype=xp.int32)
    topic = xp.empty(n, dtype=xp.int32)
    count = xp.empty(n, dtype=xp.float32)
    at = 0
    for lo in range(0, int(slots.size), piece):
        part = slots[lo : lo + piece]
        where = xp.flatnonzero(part)
        value = part[where]
        hi = at + int(where.size)
        word[at:hi] = xp.searchsorted(offsets, where + lo, side="right") + (n_dense - 1)
        topic[at:hi] = value >> COUNT_BITS
        count[at:hi] = value & COUNT_MASK
        at = hi
    return word, topic, count


class HybridTable:
    """A word-major (V, K) table read as dense blocks of topics: a dense part for the first
    ``dense.shape[0]`` words and ``(word, topic, value)`` entries for the others.

    Enough of an array for :func:`~sklearn_gpulda.backends.cuda.transfer.topic_major_to_host`
    (``shape``, ``table[:, lo:hi]``, ``table[rows, lo:hi]``) and for the readers that want it
    whole (:meth:`dense`). ``xp`` is NumPy or CuPy; the blocks are float64.
    """

    def __init__(self, xp, dense, word, topic, value, n_words):
        self.xp = xp
        self.dense_part = dense
        self.word, self.topic, self.value = word, topic, value
        self.shape = (int(n_words), int(dense.shape[1]))
        self.dtype = np.dtype(np.float64)
        self._by_topic = False

    def _sort_by_topic(self):
        """Order the entries by topic once, so that a block of topics is a contiguous run of
        them (K = 32,768 is read in hundreds of blocks)."""
        if not self._by_topic:
            order = self.xp.argsort(self.topic, kind="stable")
            # One array at a time, so that each old one is freed before the next is gathered.
            self.word = self.word[order]
            self.topic = self.topic[order]
            self.value = self.value[order]
            self._by_topic = True

    def block(self, lo, hi):
        """``(V, hi - lo)`` float64: the table's topics ``lo .. hi - 1``."""
        xp = self.xp
        self._sort_by_topic()
        out = xp.zeros((self.shape[0], hi - lo), dtype=xp.float64)
        out[: self.dense_part.shape[0]] = self.dense_part[:, lo:hi]
        a, b = (int(i) for i in xp.searchsorted(self.topic, xp.asarray([lo, hi])))
        # Each (word, topic) occurs once, so plain assignment is a sum.
        out[self.word[a:b], self.topic[a:b] - lo] = self.value[a:b]
        return out

    def __getitem__(self, key):
        rows, cols = key
        if not isinstance(cols, slice) or cols.step not in (None, 1):
            raise TypeError("a HybridTable is read by contiguous blocks of topics")
        lo, hi, _ = cols.indices(self.shape[1])
        made = self.block(lo, hi)
        return made if isinstance(rows, slice) and rows == slice(None) else made[rows]

    def dense(self):
        """The whole (V, K) table, float64."""
        return self.block(0, self.shape[1])


def add_entries(xp, n_topics, keys, sums, word, topic, value):
    """Sorted unique keys ``word * K + topic`` with their summed values, from a previous
    ``(keys, sums)`` (or None) and new entries (each (word, topic) at most once): the averaging
    sum of the rare rows. Every value is an integer count, so the float64 sums are exact in any
    order.

    Keys already present are added to in place (``sums`` is changed) and only the new keys are
    merged in, so the scratch is a few arrays of the new entries and one copy of the sum, rather
    than a sort of both (the union of a converged chain's sweeps grows little from one to the
    next). NumPy or CuPy as ``xp``.
    """
    new_keys = xp.multiply(word, n_topics, dtype=xp.int64)
    new_keys += topic  # in place: no int64 copies of word and topic beside the keys
    order = xp.argsort(new_keys)
    new_keys, value = new_keys[order], xp.asarray(value, dtype=xp.float64)[order]
    del order
    if keys is None or keys.size == 0:
        return new_keys, value
    pos = xp.searchsorted(keys, new_keys)
    found = keys[xp.minimum(pos, keys.size - 1)] == new_keys
    # Present keys are unique, so no index repeats and the fancy += is a sum.
    sums[pos[found]] += value[found]
    missing = ~found
    new_keys, value, pos = new_keys[missing], value[missing], pos[missing]
    if new_keys.size == 0:
        return keys, sums
    # The j-th new key lands at pos[j] + j of the merged order; the present keys fill the rest,
    # in their order.
    total = keys.size + new_keys.size
    at = pos + xp.arange(new_keys.size, dtype=pos.dtype)
    present = xp.ones(total, dtype=bool)
    present[at] = False
    merged_keys = xp.empty(total, dtype=xp.int64)
    merged_sums = xp.empty(total, dtype=xp.float64)
    merged_keys[at], merged_sums[at] = new_keys, value
    merged_keys[present], merged_sums[present] = keys, sums
    return merged_keys, merged_sums
