"""The fixed points of ``sklearn_gpulda.backends.priors`` were rewritten for speed (issue 35);
every model must stay the same bit for bit, so each rewritten function is compared with a
verbatim copy of the version before (``_old_*`` below) on real inputs, captured from CPU fits
of the KJV chapters, and on synthetic ones."""

import functools

import numpy as np
import pytest
from scipy import sparse
from scipy.special import digamma

from sklearn_gpulda import GPULatentDirichletAllocation
from sklearn_gpulda._fitting import batch
from sklearn_gpulda.backends import prior_learning as _learning
from sklearn_gpulda.backends.prior_learning import FLOOR
from sklearn_gpulda.backends.priors import CellPrior

# ---- verbatim copies of the functions before the rewrite (names prefixed with _old) ---------
# (MAX_ITERATIONS and TOLERANCE are read from the module, so both versions iterate alike.)


def _old_digamma_gain(counts, prior):
    return digamma(counts + prior) - digamma(prior)


@functools.lru_cache(maxsize=8)
def _old_steps(n):
    steps = np.arange(n, dtype=np.float64)
    steps.flags.writeable = False
    return steps


def _old_table_numerator(alpha, table):
    alpha = np.asarray(alpha, dtype=np.float64)
    if table.shape[1] == 0:
        return np.zeros(alpha.shape, dtype=np.float64)
    steps = _old_steps(table.shape[1])
    gain = np.add.accumulate(1.0 / (alpha[:, None] + steps[None, :]), axis=1)
    return np.add.accumulate(np.asarray(table, dtype=np.float64) * gain, axis=1)[:, -1]


def _old_update_alpha(alpha, table, rest, length, n_length, numerator=_old_table_numerator):
    alpha = np.asarray(alpha, dtype=np.float64).copy()
    n_topics = alpha.size
    topic, count, n_docs = (np.asarray(a, dtype=t) for a, t in
                            zip(rest, (np.int64, np.float64, np.float64)))
    length = np.asarray(length, dtype=np.float64)
    n_length = np.asarray(n_length, dtype=np.float64)
    if not n_length.sum():
        return alpha
    for _ in range(_learning.MAX_ITERATIONS):
        total = alpha.sum()
        denominator = np.dot(n_length, digamma(length + total) - digamma(total))
        gains = numerator(alpha, table)
        if topic.size:
            pair_gain = digamma(count + alpha[topic]) - digamma(alpha)[topic]
            gains += np.bincount(topic, weights=n_docs * pair_gain, minlength=n_topics)
        new = np.maximum(alpha * gains / denominator, FLOOR)
        done = (np.abs(new - alpha) / alpha).max() < _learning.TOLERANCE
        alpha = new
        if done:
            break
    return alpha


def _old_update_beta(beta, count, n_cells, topic_totals, n_words, cells=None, cell_counts=None):
    beta = float(beta)
    count = np.asarray(count, dtype=np.float64)
    n_cells = np.asarray(n_cells, dtype=np.float64)
    totals = np.asarray(topic_totals, dtype=np.float64)
    if not n_cells.sum():
        return beta
    if cells is not None:
        keep = cells.value != 0
        seeded = np.asarray(cell_counts, dtype=np.float64)[keep]
        extra = cells.value[keep]
    for _ in range(_learning.MAX_ITERATIONS):
        numerator = np.dot(n_cells, _old_digamma_gain(count, beta))
        sums = n_words * beta
        if cells is not None:
            numerator = (numerator - _old_digamma_gain(seeded, beta).sum()
                         + _old_digamma_gain(seeded, beta + extra).sum())
            sums = sums + cells.topic_sums
        denominator = n_words * _old_digamma_gain(totals, sums).sum()
        new = max(beta * numerator / denominator, FLOOR)
        done = abs(new - beta) / beta < _learning.TOLERANCE
        beta = new
        if done:
            break
    return beta

# ---- inputs ----------------------------------------------------------------------------------


def _captured_updates(X, n_topics, max_iter, **params):
    """The arguments of every update_alpha and update_beta call of a CPU fit of ``X``."""
    calls = {"alpha": [], "beta": []}

    def alpha_spy(alpha, table, rest, length, n_length, numerator=None):
        calls["alpha"].append((np.array(alpha), np.array(table), tuple(map(np.array, rest)),
                               np.array(length), np.array(n_length)))
        return _learning.update_alpha(alpha, table, rest, length, n_length)

    def beta_spy(*args):
        calls["beta"].append(args)
        return _learning.update_beta(*args)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(batch, "update_alpha", alpha_spy)
        mp.setattr(batch, "update_beta", beta_spy)
        GPULatentDirichletAllocation(n_components=n_topics, max_iter=max_iter, device="cpu",
                                     random_state=0, **params).fit(X)
    assert calls["alpha"] and calls["beta"]
    return calls


@pytest.fixture(scope="module")
def kjv_updates(kjv):
    """Prior updates of default fits: the first 40 chapters at K = 20 (six updates), all of
    them at K = 20 (two) and the first 40 at K = 300, where table_numerator sums by column."""
    return [_captured_updates(kjv[:40], 20, 60), _captured_updates(kjv, 20, 21),
            _captured_updates(kjv[:40], 300, 21)]


def _synthetic_alpha_inputs(n_topics, weighted=False, with_rest=True, seed=0):
    """A random alpha histogram split by alpha_table, lengths, and a starting alpha."""
    rng = np.random.default_rng(seed)
    n_docs = 400
    counts = rng.poisson(rng.gamma(0.3, 40.0, (n_docs, n_topics))).astype(np.float64)
    counts[:, 0] += 1.0  # no empty document
    if weighted:
        counts *= rng.choice([0.5, 1.0, 1.7], counts.shape)
    if not with_rest:
        counts = np.minimum(counts, _learning.TABLE_COUNTS - 1.0)
    doc, topic = np.nonzero(counts)
    keys, n = np.unique(np.stack([topic, counts[doc, topic]]), axis=1, return_counts=True)
    table, rest = _learning.alpha_table(keys[0].astype(np.int64), keys[1], n, n_topics)
    length, n_length = _learning.length_histogram(counts.sum(axis=1))
    start = rng.gamma(0.5, 0.2, n_topics) + FLOOR
    return start, table, rest, length, n_length


def _assert_same_alpha(args):
    want = _old_update_alpha(*args)
    got = _learning.update_alpha(*args)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert np.array_equal(got.view(np.int64), want.view(np.int64))


def _assert_same_beta(args):
    want, got = _old_update_beta(*args), _learning.update_beta(*args)
    assert got == want and type(got) is type(want)
    assert np.float64(got).view(np.int64) == np.float64(want).view(np.int64)

# ---- tests -------------------------------------------------------------------------------------


@pytest.mark.parametrize("column_sums", [False, True])
def test_alpha_updates_of_kjv_fits_are_unchanged(kjv_updates, column_sums):
    with pytest.MonkeyPatch.context() as mp:
        if column_sums:  # every table summed by column, whatever its K
            mp.setattr(_learning, "COLUMN_SUM_TOPICS", 1)
        for calls in kjv_updates:
            for args in calls["alpha"]:
                _assert_same_alpha(args)
                alpha, table = args[:2]
                assert np.array_equal(_learning.table_numerator(alpha, table),
                                      _old_table_numerator(alpha, table))


def test_beta_updates_of_kjv_fits_are_unchanged(kjv_updates):
    for calls in kjv_updates:
        for args in calls["beta"]:
            _assert_same_beta(args)


def test_kjv_inputs_cover_both_parts_and_both_sum_orders(kjv_updates):
    # What the test above relies on: pairs outside the table, and K on both sides of the
    # column threshold.
    alpha_args = [args for calls in kjv_updates for args in calls["alpha"]]
    assert any(args[2][0].size for args in alpha_args)
    sizes = {args[0].size for args in alpha_args}
    assert min(sizes) < _learning.COLUMN_SUM_TOPICS <= max(sizes)


@pytest.mark.parametrize("n_topics", [1, 20, 1000])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("with_rest", [True, False])
def test_alpha_update_is_unchanged_on_synthetic_histograms(n_topics, weighted, with_rest):
    args = _synthetic_alpha_inputs(n_topics, weighted, with_rest, seed=n_topics)
    assert (args[2][0].size > 0) == (with_rest or weighted)
    _assert_same_alpha(args)


@pytest.mark.parametrize("n_topics", [1, 20, 300])
def test_table_numerator_is_unchanged_by_rows_and_by_columns(n_topics):
    alpha, table = _synthetic_alpha_inputs(n_topics, seed=7)[:2]
    want = _old_table_numerator(alpha, table)
    for threshold in (1, 10 ** 9):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(_learning, "COLUMN_SUM_TOPICS", threshold)
            assert np.array_equal(_learning.table_numerator(alpha, table), want)


def test_alpha_update_with_a_given_numerator_is_unchanged():
    # A sampler's numerator (a GPU's for a table on its device) is called as before, with the
    # current alpha; here a host one standing in for it.
    args = _synthetic_alpha_inputs(20, seed=3)
    seen = []

    def numerator(alpha, table):
        seen.append(np.array(alpha))
        return _old_table_numerator(alpha, table)

    want = _old_update_alpha(*args)
    got = _learning.update_alpha(*args, numerator=numerator)
    assert np.array_equal(got, want) and len(seen) > 1
    assert np.array_equal(seen[0], args[0])


def test_alpha_update_without_documents_returns_the_start():
    start, table, rest = _synthetic_alpha_inputs(5)[:3]
    got = _learning.update_alpha(start, table, rest, np.zeros(0), np.zeros(0))
    assert np.array_equal(got, start) and got is not start


@pytest.mark.parametrize("n_topics", [1, 20, 1000])
@pytest.mark.parametrize("weighted", [False, True])
def test_beta_update_is_unchanged_on_synthetic_histograms(n_topics, weighted):
    rng = np.random.default_rng(n_topics)
    n_words = 500
    b = rng.poisson(rng.gamma(0.1, 20.0, (n_words, n_topics))).astype(np.float64)
    if weighted:
        b *= rng.choice([0.5, 1.0, 2.5], b.shape)
    count, n_cells = np.unique(b[b > 0], return_counts=True)
    _assert_same_beta((0.3, count, n_cells, b.sum(axis=0), n_words))
    _assert_same_beta((0.3, np.zeros(0), np.zeros(0), b.sum(axis=0), n_words))


@pytest.mark.parametrize("n_topics", [1, 20, 1000])
def test_beta_update_with_seeded_cells_is_unchanged(n_topics):
    rng = np.random.default_rng(n_topics + 1)
    n_words = 300
    b = rng.poisson(0.4, (n_words, n_topics)).astype(np.float64)
    words = rng.choice(n_words, 40)
    topics = rng.integers(0, n_topics, 40)
    extra = rng.choice([0.0, 0.5, 3.0], 40)  # zeros among them: cells that add nothing
    cells = CellPrior(sparse.coo_matrix((extra, (topics, words)), shape=(n_topics, n_words)))
    b[cells.word, cells.topic] += 2.0
    count, n_cells = np.unique(b[b > 0], return_counts=True)
    _assert_same_beta((0.2, count, n_cells, b.sum(axis=0), n_words, cells,
                       b[cells.word, cells.topic]))


@pytest.mark.gpu
@pytest.mark.parametrize("n_topics", [20, 300, 1000])
def test_device_table_numerator_is_the_hosts(n_topics):
    # A GPU engine's table numerator and the host's, by rows or by columns, are the same bits
    # (a fit with the table on the device and one with it on the host learn the same alpha).
    cp = pytest.importorskip("cupy")
    from sklearn_gpulda.backends.cuda import counts

    alpha, table = _synthetic_alpha_inputs(n_topics, seed=11)[:2]
    got = counts.alpha_table_numerator(cp.asarray(alpha), cp.asarray(table)).get()
    for threshold in (1, 10 ** 9):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(_learning, "COLUMN_SUM_TOPICS", threshold)
            assert np.array_equal(got, _learning.table_numerator(alpha, table))
