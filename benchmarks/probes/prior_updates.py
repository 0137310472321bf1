"""Host time of the prior fixed points (``update_alpha``, ``table_numerator``, ``update_beta``)
before and after their rewrite for speed (issue 35), on the inputs of the last prior update of
default CPU fits of the KJV chapters.

The previous versions are the verbatim copies kept in ``tests/test_priors_speed.py``; every
result is checked to be the same bits before anything is timed. Old and new calls alternate,
so a busy host slows both alike; the minimum and the median of ``--reps`` calls are printed.

Usage::

    python benchmarks/probes/prior_updates.py --topics 20 100 1000 --max-iter 21 --reps 200

Output, one block per fit::

    K=20 docs=1189: 1053 pairs outside the table, 461 lengths, 24 iterations
      update_alpha     old   1406 us  new   1378 us  (min; 2% less) ...
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the checkout
sys.path.insert(0, str(ROOT / "tests"))

from sklearn_gpulda import GPULatentDirichletAllocation  # noqa: E402
from sklearn_gpulda._fitting import batch  # noqa: E402
from sklearn_gpulda.backends import prior_learning  # noqa: E402
from sklearn_gpulda.datasets import load_kjv_chapters  # noqa: E402
from test_priors_speed import (  # noqa: E402
    _old_table_numerator, _old_update_alpha, _old_update_beta)


def last_update(X, n_topics, max_iter):
    """The arguments of the last update_alpha and update_beta calls of a CPU fit of ``X``."""
    seen = {}
    alpha_fn, beta_fn = batch.update_alpha, batch.update_beta

    def alpha_spy(alpha, table, rest, length, n_length, numerator=None):
        seen["alpha"] = (np.array(alpha), np.array(table), tuple(map(np.array, rest)),
                         np.array(length), np.array(n_length))
        return alpha_fn(alpha, table, rest, length, n_length)

    def beta_spy(*args):
        seen["beta"] = args
        return beta_fn(*args)

    batch.update_alpha, batch.update_beta = alpha_spy, beta_spy
    try:
        GPULatentDirichletAllocation(n_components=n_topics, max_iter=max_iter, device="cpu",
                                     random_state=0).fit(X)
    finally:
        batch.update_alpha, batch.update_beta = alpha_fn, beta_fn
    return seen["alpha"], seen["beta"]


def alternate(old, new, reps):
    """Seconds per call of ``old`` and ``new``, called in turn: (min, median) of each."""
    times = ([], [])
    for r in range(reps):
        order = (0, 1) if r % 2 else (1, 0)
        for i in order:
            fn = (old, new)[i]
            t0 = time.perf_counter()
            fn()
            times[i].append(time.perf_counter() - t0)
    return [(min(t), float(np.median(t))) for t in times]


def report(name, old, new, reps, per=None):
    (old_min, old_med), (new_min, new_med) = alternate(old, new, reps)
    line = (f"  {name:15s} old {old_min * 1e6:8.1f} us  new {new_min * 1e6:8.1f} us  (min; "
            f"{1 - new_min / old_min:.0%} less)  median old {old_med * 1e6:8.1f} new "
            f"{new_med * 1e6:8.1f}")
    if per:
        line += f"  | per iteration old {old_min / per * 1e6:.1f} new {new_min / per * 1e6:.1f}"
    print(line, flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--topics", type=int, nargs="+", default=[20, 100, 1000])
    p.add_argument("--docs", type=int, default=None, help="first chapters only (default all)")
    p.add_argument("--max-iter", type=int, default=21)
    p.add_argument("--reps", type=int, default=200)
    args = p.parse_args()
    X = load_kjv_chapters().data[:args.docs]
    for k in args.topics:
        a, b = last_update(X, k, args.max_iter)
        alpha, table = a[:2]
        want = _old_update_alpha(*a)
        assert np.array_equal(prior_learning.update_alpha(*a), want), "update_alpha changed"
        assert np.array_equal(prior_learning.table_numerator(alpha, table),
                              _old_table_numerator(alpha, table)), "table_numerator changed"
        assert prior_learning.update_beta(*b) == _old_update_beta(*b), "update_beta changed"
        calls = []
        prior_learning.update_alpha(*a, numerator=lambda x, t: calls.append(1) or
                                    prior_learning.table_numerator(x, t))
        iters = len(calls)
        print(f"K={k} docs={X.shape[0]}: {a[2][0].size} pairs outside the table, "
              f"{a[3].size} lengths, {iters} iterations")
        reps = max(5, args.reps * 20 // max(k, 20))
        report("update_alpha", lambda: _old_update_alpha(*a),
               lambda: prior_learning.update_alpha(*a), reps, iters)
        report("table_numerator", lambda: _old_table_numerator(alpha, table),
               lambda: prior_learning.table_numerator(alpha, table), reps * 5)
        report("update_beta", lambda: _old_update_beta(*b), lambda: prior_learning.update_beta(*b),
               reps * 2)


if __name__ == "__main__":
    main()
