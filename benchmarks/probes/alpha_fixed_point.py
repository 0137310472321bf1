"""Probe: how many steps alpha's fixed point takes, plain and extrapolated, and how near each
ends to the fixed point itself.

Alpha's update (``prior_learning.update_alpha``) repeats Minka's step until no topic's prior
moves by more than ``TOLERANCE`` (relative): a linear iteration, which on the inputs of a KJV
fit's last update at K = 20 takes 36 steps and stops about 1.4e-7 from where the steps would
end, since each step's move is smaller than the distance left. SQUAREM (Varadhan and Roland
2008, "Simple and globally convergent methods for accelerating the convergence of any EM
algorithm", Scand. J. Statist. 35: their scheme S3) takes two steps, extrapolates along them
and takes one more step from there. This prints, for each K, the steps each takes, their
distance to the fixed point (found by 2,000 plain steps) and their host time; the package is
not changed by it.

    python benchmarks/probes/alpha_fixed_point.py --topics 20 100 1000
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from scipy.special import digamma

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1]))

from prior_updates import last_alpha_update  # noqa: E402

from sklearn_gpulda.backends import prior_learning as _learning  # noqa: E402
from sklearn_gpulda.datasets import load_kjv_chapters  # noqa: E402


def stepper(table, rest, length, n_length):
    """Minka's step for these histograms, as ``update_alpha`` takes it."""
    topic, count, n_docs = rest

    def step(alpha):
        total = alpha.sum()
        denominator = np.sum(n_length * (digamma(length + total) - digamma(total)))
        gains = _learning.table_numerator(alpha, table)
        if topic.size:
            gains = gains + np.bincount(topic, weights=n_docs * (
                digamma(count + alpha[topic]) - digamma(alpha)[topic]), minlength=alpha.size)
        return np.maximum(alpha * gains / denominator, _learning.FLOOR)

    return step


def plain(step, alpha):
    for n in range(1, _learning.MAX_ITERATIONS + 1):
        new = step(alpha)
        done = (np.abs(new - alpha) / alpha).max() < _learning.TOLERANCE
        alpha = new
        if done:
            break
    return alpha, n


def squarem(step, alpha):
    n = 0
    while n < _learning.MAX_ITERATIONS:
        first = step(alpha)
        second = step(first)
        n += 2
        r, v = first - alpha, second - 2 * first + alpha
        norm_v = np.sqrt((v * v).sum())
        if norm_v == 0:
            return second, n
        s = -np.sqrt((r * r).sum()) / norm_v
        jumped = alpha - 2 * s * r + s * s * v
        if np.any(jumped <= 0):
            jumped = second  # the extrapolation left the domain: keep the plain steps
        new = step(jumped)
        n += 1
        done = (np.abs(new - alpha) / alpha).max() < _learning.TOLERANCE
        alpha = new
        if done:
            break
    return alpha, n


def timed(fn, *args, reps=50):
    fn(*args)
    tic = time.perf_counter()
    for _ in range(reps):
        fn(*args)
    return (time.perf_counter() - tic) / reps * 1e3


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--topics", type=int, nargs="+", default=[20, 100, 1000])
    p.add_argument("--max-iter", type=int, default=21)
    args = p.parse_args(argv)
    X = load_kjv_chapters().data
    print(f"{'K':>5} {'plain steps':>13} {'to fixed pt':>12} {'ms':>7} {'SQUAREM steps':>13} "
          f"{'to fixed pt':>12} {'ms':>7}")
    for k in args.topics:
        alpha, table, rest, length, n_length = last_alpha_update(X, k, args.max_iter)
        step = stepper(table, rest, length, n_length)
        truth = alpha.copy()
        for _ in range(2000):
            truth = step(truth)
        rows = []
        for method in (plain, squarem):
            found, n = method(step, alpha.copy())
            rows.append((n, (np.abs(found - truth) / truth).max(),
                         timed(method, step, alpha.copy())))
        print(f"{k:>5} " + " ".join(f"{n:>13d} {gap:>12.2e} {ms:>7.2f}" for n, gap, ms in rows))


if __name__ == "__main__":
    main()
