"""Host time of alpha's fixed point (``update_alpha``) and of its table numerator summed along
each topic's row against across topics (``prior_learning.COLUMN_SUM_TOPICS``), on the inputs of
the last prior update of default CPU fits of the KJV chapters.

Both sums are checked to give the same bits before anything is timed. The two forms alternate,
so a busy host slows both alike; the minimum and the median of ``--reps`` calls are printed.

Usage::

    python benchmarks/probes/prior_updates.py --topics 20 100 1000 --max-iter 21 --reps 200
"""

import argparse
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the checkout

from sklearn_gpulda import GPULatentDirichletAllocation  # noqa: E402
from sklearn_gpulda.backends import prior_learning  # noqa: E402
from sklearn_gpulda.datasets import load_kjv_chapters  # noqa: E402


def last_alpha_update(X, n_topics, max_iter):
    """The arguments of the last update_alpha call of a CPU fit of ``X``."""
    seen = {}
    real = prior_learning.update_alpha

    def spy(alpha, table, rest, length, n_length, **kwargs):
        seen["alpha"] = (np.array(alpha), np.array(table), tuple(map(np.array, rest)),
                         np.array(length), np.array(n_length))
        return real(alpha, table, rest, length, n_length, **kwargs)

    prior_learning.update_alpha = spy
    try:
        GPULatentDirichletAllocation(n_components=n_topics, max_iter=max_iter, device="cpu",
                                     random_state=0).fit(X)
    finally:
        prior_learning.update_alpha = real
    return seen["alpha"]


@contextmanager
def summed(by):
    """Every table numerator summed ``by`` 'rows' or 'columns' inside the block."""
    saved = prior_learning.COLUMN_SUM_TOPICS
    prior_learning.COLUMN_SUM_TOPICS = 10 ** 9 if by == "rows" else 1
    try:
        yield
    finally:
        prior_learning.COLUMN_SUM_TOPICS = saved


def timed(by, fn):
    with summed(by):
        t0 = time.perf_counter()
        fn()
        return time.perf_counter() - t0


def report(name, fn, reps):
    """Seconds per call of ``fn`` by rows and by columns, called in turn."""
    times = {"rows": [], "columns": []}
    for r in range(reps):
        for by in (("rows", "columns") if r % 2 else ("columns", "rows")):
            times[by].append(timed(by, fn))
    (rows_min, rows_med), (cols_min, cols_med) = [
        (min(times[by]), float(np.median(times[by]))) for by in ("rows", "columns")]
    print(f"  {name:15s} rows {rows_min * 1e6:8.1f} us  columns {cols_min * 1e6:8.1f} us  "
          f"(min)  median rows {rows_med * 1e6:8.1f} columns {cols_med * 1e6:8.1f}", flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--topics", type=int, nargs="+", default=[20, 100, 1000])
    p.add_argument("--docs", type=int, default=None, help="first chapters only (default all)")
    p.add_argument("--max-iter", type=int, default=21)
    p.add_argument("--reps", type=int, default=200)
    args = p.parse_args()
    X = load_kjv_chapters().data[:args.docs]
    for k in args.topics:
        a = last_alpha_update(X, k, args.max_iter)
        alpha, table = a[:2]
        results = {}
        for by in ("rows", "columns"):
            with summed(by):
                results[by] = (prior_learning.table_numerator(alpha, table),
                               prior_learning.update_alpha(*a))
        assert all(np.array_equal(r, c) for r, c in zip(results["rows"], results["columns"])), \
            "the sums by rows and by columns differ"
        print(f"K={k} docs={X.shape[0]}: {a[2][0].size} pairs outside the table, "
              f"{a[3].size} lengths; the default sums by "
              f"{'columns' if k >= prior_learning.COLUMN_SUM_TOPICS else 'rows'}")
        reps = max(5, args.reps * 20 // max(k, 20))
        report("update_alpha", lambda: prior_learning.update_alpha(*a), reps)
        report("table_numerator", lambda: prior_learning.table_numerator(alpha, table), reps * 5)


if __name__ == "__main__":
    main()
