"""Alpha's table numerator sums across topics, one count at a time, from
``COLUMN_SUM_TOPICS`` topics on (the CPU engine's and a Dask driver's tables at large K) instead
of along each topic's row. Every model must stay the same bit for bit, so the numerator is
compared with a verbatim copy of the row form (``_old_table_numerator``) and alpha's fixed
point is run with either form, on inputs captured from CPU fits of the KJV chapters and on
synthetic ones."""

import functools

import numpy as np
import pytest

from sklearn_gpulda import GPULatentDirichletAllocation
from sklearn_gpulda.backends import prior_learning as _learning
from sklearn_gpulda.backends.prior_learning import FLOOR

# ---- a verbatim copy of the numerator's row form, before the column sums ---------------------


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

# ---- inputs ----------------------------------------------------------------------------------


def _captured_updates(X, n_topics, max_iter, **params):
    """The arguments of every update_alpha call of a CPU fit of ``X``."""
    calls = {"alpha": []}

    update_alpha = _learning.update_alpha

    def alpha_spy(alpha, table, rest, length, n_length, **kwargs):
        calls["alpha"].append((np.array(alpha), np.array(table), tuple(map(np.array, rest)),
                               np.array(length), np.array(n_length)))
        return update_alpha(alpha, table, rest, length, n_length, **kwargs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_learning, "update_alpha", alpha_spy)
        GPULatentDirichletAllocation(n_components=n_topics, max_iter=max_iter, device="cpu",
                                     random_state=0, **params).fit(X)
    assert calls["alpha"]
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


def _by_rows_and_by_columns(function, *args, **kwargs):
    """``function(*args, **kwargs)`` with every table numerator summed by rows, then by
    columns."""
    out = []
    for threshold in (10 ** 9, 1):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(_learning, "COLUMN_SUM_TOPICS", threshold)
            out.append(function(*args, **kwargs))
    return out


def _assert_same_alpha(args):
    rows, columns = _by_rows_and_by_columns(_learning.update_alpha, *args)
    assert columns.dtype == rows.dtype and columns.shape == rows.shape
    assert np.array_equal(columns.view(np.int64), rows.view(np.int64))


# ---- tests -------------------------------------------------------------------------------------


def test_alpha_updates_of_kjv_fits_are_the_same_by_rows_and_by_columns(kjv_updates):
    for calls in kjv_updates:
        for args in calls["alpha"]:
            _assert_same_alpha(args)
            alpha, table = args[:2]
            want = _old_table_numerator(alpha, table)
            for got in _by_rows_and_by_columns(_learning.table_numerator, alpha, table):
                assert np.array_equal(got, want)


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
def test_alpha_update_is_the_same_by_rows_and_by_columns(n_topics, weighted, with_rest):
    args = _synthetic_alpha_inputs(n_topics, weighted, with_rest, seed=n_topics)
    assert (args[2][0].size > 0) == (with_rest or weighted)
    _assert_same_alpha(args)


@pytest.mark.parametrize("n_topics", [1, 20, 300])
def test_table_numerator_is_unchanged_by_rows_and_by_columns(n_topics):
    alpha, table = _synthetic_alpha_inputs(n_topics, seed=7)[:2]
    want = _old_table_numerator(alpha, table)
    for got in _by_rows_and_by_columns(_learning.table_numerator, alpha, table):
        assert np.array_equal(got, want)


def test_a_table_without_counts_has_no_numerator():
    alpha = np.full(300, 0.1)
    for got in _by_rows_and_by_columns(_learning.table_numerator, alpha, np.zeros((300, 0))):
        assert np.array_equal(got, np.zeros(300))


def test_alpha_update_without_documents_returns_the_start():
    start, table, rest = _synthetic_alpha_inputs(5)[:3]
    got = _learning.update_alpha(start, table, rest, np.zeros(0), np.zeros(0))
    assert np.array_equal(got, start) and got is not start
