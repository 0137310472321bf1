"""Hybrid word-topic storage on the host: which words are rare (the memory plan's split), the rows'
hashing, and the readers of a hybrid table, against the dense counts of the same tokens (real
corpus: KJV chapters)."""

import tracemalloc

import numpy as np
import pytest

from sklearn_gpulda._input.layouts import frequency_relabel
from sklearn_gpulda.backends.cuda.sparse import hybrid, hybrid_table as ht, memory_plan as mp
from sklearn_gpulda.backends.cuda.sparse.hybrid import HybridSum
from sklearn_gpulda.backends.cuda.sparse.memory_plan import resolve_storage
from sklearn_gpulda.backends.cuda.transfer import topic_major_to_host


def test_capacity_is_one_and_a_half_slots_per_token_rounded_up_and_at_least_two():
    np.testing.assert_array_equal(mp.capacity([0, 1, 2, 3, 4, 5, 1000]),
                                  [0, 2, 3, 5, 6, 8, 1500])


def test_rare_words_are_the_suffix_whose_table_is_at_most_half_a_row():
    f = np.array([5000, 300, 171, 170, 64, 3, 1, 0])
    n_dense, offsets = mp.split_rows(f, 512)
    # 170 tokens take 255 slots <= K / 2 = 256; 171 take 257.
    assert n_dense == 3
    np.testing.assert_array_equal(np.diff(offsets), [255, 96, 5, 2, 0])
    assert mp.split_rows(f, 2)[0] == f.size - 1  # only the word with no tokens is rare
    with pytest.raises(ValueError, match="decreasing"):
        mp.split_rows(f[::-1], 512)
    assert mp.rows_bytes(n_dense, offsets, 512) == 3 * 512 * 4 + 358 * 4 + 6 * 8


@pytest.mark.parametrize("cap", [2, 3, 5, 1500, 65535])
def test_probe_sequences_start_inside_the_row_and_visit_every_slot(cap):
    homes = np.array([ht.home_slot(k, cap) for k in range(65536)])
    assert homes.min() >= 0 and homes.max() < cap
    # Multiply-shift spreads the topics evenly over a row of any size.
    per_slot, mean = np.bincount(homes, minlength=cap), 65536 / cap
    assert per_slot.max() <= 1.1 * mean + 2 and per_slot.min() >= 0.9 * mean - 2
    seen, h = set(), ht.home_slot(7, cap)
    for _ in range(cap):
        seen.add(h)
        h = ht.next_slot(h, cap)
    assert seen == set(range(cap))


def _kjv_tokens(kjv, n_topics, seed=0):
    """Words (relabelled by decreasing frequency) and random topics of the KJV tokens."""
    X = kjv.tocsr()
    freq = np.asarray(X.sum(axis=0)).ravel()
    new_of_old, _ = frequency_relabel(freq)
    coo = X.tocoo()
    word = np.repeat(new_of_old[coo.col], coo.data.astype(np.int64))
    topic = np.random.default_rng(seed).integers(0, n_topics, word.size)
    return -np.sort(-freq), word, topic


@pytest.mark.parametrize("n_topics", [64, 1000])
def test_rows_hold_the_dense_counts(kjv, n_topics):
    freq, word, topic = _kjv_tokens(kjv, n_topics)
    n_dense, offsets = mp.split_rows(freq, n_topics)
    assert 0 < n_dense < freq.size
    rare = word >= n_dense
    slots = np.zeros(int(offsets[-1]), dtype=np.uint32)
    ht.insert(slots, offsets, n_dense, word[rare], topic[rare])
    dense = np.zeros((freq.size, n_topics))
    np.add.at(dense, (word, topic), 1)
    # Every row at most two thirds full, every count found by its probe sequence.
    for r in range(offsets.size - 1):
        row = slots[offsets[r] : offsets[r + 1]]
        assert np.count_nonzero(row) * 3 <= row.size * 2
    for v in np.unique(word[rare])[:300]:
        for k in np.flatnonzero(dense[v]):
            assert ht.lookup(slots, offsets, n_dense, v, k) == dense[v, k]
        assert ht.lookup(slots, offsets, n_dense, v, int(np.argmin(dense[v]))) == 0
    w, k, c = ht.entries(np, slots, offsets, n_dense)
    # Decoded in pieces of a few slots, the same entries.
    for got, want in zip(ht.entries(np, slots, offsets, n_dense, piece=7), (w, k, c)):
        np.testing.assert_array_equal(got, want)
        assert got.dtype == want.dtype
    table = ht.HybridTable(np, dense[:n_dense].astype(np.float32), w, k, c, freq.size)
    np.testing.assert_array_equal(table.dense(), dense)
    # Read by blocks of topics, with the rows permuted, as components_ is made.
    rows = np.random.default_rng(1).permutation(freq.size)
    out = topic_major_to_host(np, table, rows, divisor=2.0, add=0.5, block_bytes=8 * 3 * freq.size)
    np.testing.assert_array_equal(out, (dense[rows] / 2.0 + 0.5).T)
    # The value histogram's inputs: the dense rows' cells and the slots' counts.
    values = np.concatenate([dense[:n_dense].ravel(), ht.slot_counts(np, slots)])
    np.testing.assert_array_equal(np.sort(values[values != 0]), np.sort(dense[dense != 0]))


def test_a_full_row_is_an_error():
    slots = np.zeros(2, dtype=np.uint32)
    offsets = np.array([0, 2])
    ht.insert(slots, offsets, 0, [0, 0], [3, 4])
    with pytest.raises(ValueError, match="full"):
        ht.insert(slots, offsets, 0, [0], [5])


@pytest.mark.parametrize("whole_fits", [False, True])
def test_running_sum_of_rare_rows_is_the_sum_of_dense_rows(kjv, whole_fits):
    # Where the whole (V, K) table fits the room, the sum is that table; else sorted keys.
    # Either way it is the sum of the dense tables.
    n_topics = 50
    freq, word, _ = _kjv_tokens(kjv, n_topics)
    n_dense, offsets = mp.split_rows(freq, n_topics)
    whole_bytes = hybrid.WHOLE_SUM_ROOM_FACTOR * freq.size * n_topics * 8
    total = np.zeros((freq.size, n_topics))
    acc = HybridSum(np, freq.size, n_topics)
    asked = []

    def check_room(need):
        asked.append(need)
        if need >= whole_bytes and not whole_fits:
            raise MemoryError("no room")

    # A repeated sweep adds to present keys only; the others merge new keys in as well.
    for seed in (0, 1, 1, 2):
        topic = np.random.default_rng(seed).integers(0, n_topics, word.size)
        dense = np.zeros((freq.size, n_topics), dtype=np.float32)
        np.add.at(dense, (word, topic), 1)
        total += dense
        rare = word >= n_dense
        rows = _Rows(offsets, n_dense)
        ht.insert(rows.slots, offsets, n_dense, word[rare], topic[rare])
        # What the sum asks room for bounds what it allocates (NumPy's allocations, traced;
        # pieces small enough that the decoding's scratch is not hidden in one large piece).
        asked.clear()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            acc.add(dense[:n_dense], rows, check_room)
            peak = tracemalloc.get_traced_memory()[1] - before
        finally:
            tracemalloc.stop()
        # The whole table's first request (twice its size) covers it and the first add (on the
        # device later adds allocate nothing: a kernel adds the slots in place); a refused
        # request allocates nothing.
        if not whole_fits:
            assert 0 < peak <= asked[-1]
        elif seed == 0:
            assert 0 < peak <= sum(asked)
    if whole_fits:
        assert acc.keys is None
        np.testing.assert_array_equal(acc.table(), total)
    else:
        assert acc.whole is None
        np.testing.assert_array_equal(acc.table().dense(), total)
        assert np.all(np.diff(acc.keys) > 0)


class _Rows:
    """Host stand-in of :class:`~sklearn_gpulda.backends.cuda.sparse.hybrid.RareRows`."""

    def __init__(self, offsets, n_dense):
        self.offsets, self.n_dense = offsets, n_dense
        self.slots = np.zeros(int(offsets[-1]), dtype=np.uint32)


def test_storage_choice():
    def never_asked():
        raise AssertionError("the memory plan was asked where the rule decides alone")

    assert resolve_storage("dense", True, 10**5, never_asked) is False
    assert resolve_storage("hybrid", True, 8, never_asked) is True
    assert resolve_storage("auto", True, 4096, never_asked) is True
    assert resolve_storage("auto", True, 1000, lambda: True) is False
    assert resolve_storage("auto", True, 1000, lambda: False) is True
    assert resolve_storage("auto", False, 10**5, never_asked) is False
    with pytest.raises(ValueError, match="integer counts"):
        resolve_storage("hybrid", False, 1000, never_asked)
    with pytest.raises(ValueError, match="word_topic_storage"):
        resolve_storage("sparse", True, 1000, never_asked)


def test_plan_of_a_real_corpus(kjv, monkeypatch):
    from sklearn_gpulda._input.corpus import tokens

    freq = np.asarray(kjv.sum(axis=0)).ravel()
    sizes = mp.corpus_sizes(tokens(kjv), freq)
    asked = []

    def fits(sizes, settings, dense, rows):
        asked.append((dense, rows))
        return True

    def plan(storage, k, sizes=sizes):
        return mp.table_plan(sizes, mp.ChainSettings(n_topics=k, budget=1 << 40,
                                                     storage=storage))

    monkeypatch.setattr(mp, "dense_preferred", fits)
    dense = plan("dense", 4096)
    assert (dense.hybrid, dense.n_dense, dense.offsets) == (False, kjv.shape[1], None)
    assert not asked
    rows = plan("hybrid", 4096)
    assert rows.hybrid and rows.nbytes < dense.nbytes / 2 and not asked
    # Dense rows for the words of more than 2,048 slots (K / 2) at 1.5 slots a token, whatever
    # the order the frequencies came in; 1.5 slots a token (at least 2) for the others.
    f = np.sort(freq.astype(np.int64))[::-1]
    slots = np.where(f > 0, np.maximum((3 * f + 1) // 2, 2), 0)
    assert rows.n_dense == np.count_nonzero(slots > 2048) > 0
    assert rows.offsets[-1] == slots[rows.n_dense:].sum()
    # 'auto' below 4,096 topics: hybrid only where the memory plan does not prefer the dense
    # table, which it decides from both plans.
    assert plan("auto", 100).hybrid is False
    (dense, rows), = asked
    assert (dense.n_dense, dense.offsets) == (kjv.shape[1], None)
    assert dense.nbytes > kjv.shape[1] * 100 * 4
    assert rows.n_dense < kjv.shape[1] and rows.offsets[-1] > 0 and rows.nbytes < dense.nbytes
    monkeypatch.setattr(mp, "dense_preferred", lambda *args: False)
    assert plan("auto", 100).hybrid is True
    assert plan("auto", 4096).hybrid is True
    fractional = mp.corpus_sizes(tokens(kjv * 0.5), freq)
    assert plan("auto", 8192, fractional).hybrid is False
