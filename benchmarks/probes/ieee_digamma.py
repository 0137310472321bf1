"""Can alpha's fixed point run on the GPU with the host's bits? A digamma made of IEEE basic
operations only, compared with SciPy's bit by bit, and timed.

The learned priors' fixed points (``backends/prior_learning.py``) called SciPy's digamma on
the host, while the GPU waited: at small corpora that was as long as the sweeps between two
updates (``doc/performance.md``, "Warps for every document"). A device fixed point needs a digamma
whose every value is the host's. Additions, subtractions, multiplications and divisions are
correctly rounded in NumPy and in CUDA (``__dadd_rn`` and friends, no FMA contraction), and
``frexp`` is exact, so a digamma built from them alone gives one result on both; this probe
measures how far that digamma is from SciPy's, by range of the argument, and what it costs on
the host.

The digamma here: below 10, the recurrence ``psi(x) = psi(x + 1) - 1 / x`` up to 10; from
there ``log(x) - 1 / (2x) - sum_k B_2k / (2k x^2k)`` (Bernoulli numbers, seven terms), with
the logarithm as ``e log 2 + 2 atanh((m - 1) / (m + 1))`` for ``x = m 2^e``, ``m`` in
``[sqrt(1/2), sqrt(2))``, the atanh series to its twelfth term. It was the prototype of
``backends/digamma.py``, which the package now uses on the host and ``cuda/digamma.cuh`` on the
GPU.

Usage::

    python benchmarks/probes/ieee_digamma.py --samples 200000
"""

import argparse
import time

import numpy as np
from scipy.special import digamma

#: log 2 split so that ``e * LN2_HIGH`` is exact for the exponents of a double.
LN2_HIGH = 0.693145751953125
LN2_LOW = 1.4286068203094173e-06
#: B_2k / (2k) for k = 1..7, the asymptotic series' coefficients.
ASYMPTOTIC = (1 / 12, -1 / 120, 1 / 252, -1 / 240, 1 / 132, -691 / 32760, 1 / 12)


def log_basic(x):
    """The natural logarithm of positive finite ``x`` from frexp and basic operations."""
    m, e = np.frexp(x)
    low = m < 0.7071067811865476
    m = np.where(low, m * 2.0, m)  # exact
    e = np.where(low, e - 1, e).astype(np.float64)
    s = (m - 1.0) / (m + 1.0)  # |s| <= 0.172
    z = s * s
    series = 1.0 / 23.0
    for k in (21, 19, 17, 15, 13, 11, 9, 7, 5, 3):
        series = series * z + 1.0 / k
    series = series * z + 1.0
    return e * LN2_HIGH + ((2.0 * s) * series + e * LN2_LOW)


def digamma_basic(x):
    """Digamma of positive ``x`` from basic operations and :func:`log_basic`."""
    s = np.asarray(x, dtype=np.float64).copy()
    shift = np.zeros_like(s)
    while True:
        below = s < 10.0
        if not below.any():
            break
        shift = np.where(below, shift + 1.0 / s, shift)
        s = np.where(below, s + 1.0, s)
    z = 1.0 / (s * s)
    tail = ASYMPTOTIC[-1]
    for c in ASYMPTOTIC[-2::-1]:
        tail = tail * z + c
    return log_basic(s) - 0.5 / s - z * tail - shift


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--samples", type=int, default=200_000)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    rng = np.random.default_rng(args.seed)
    print("| arguments | equal to SciPy's | largest difference (ulp) |")
    print("|---|---:|---:|")
    for low, high in ((1e-5, 1.0), (1.0, 10.0), (10.0, 1e3), (1e3, 1e6)):
        x = np.exp(rng.uniform(np.log(low), np.log(high), args.samples))
        ref, got = digamma(x), digamma_basic(x)
        ulp = np.abs(ref - got) / np.spacing(np.abs(ref))
        print(f"| [{low:g}, {high:g}), log-uniform | {np.mean(ref == got):.4f} | "
              f"{ulp.max():.0f} |")
    # What one iteration of alpha's fixed point asks at 20 Newsgroups' size: 2,500 values.
    x = rng.uniform(64, 3000, 2500)
    for name, fn in (("SciPy", digamma), ("basic operations", digamma_basic)) * 2:
        tic = time.perf_counter()
        for _ in range(1000):
            fn(x)
        print(f"{name}: {(time.perf_counter() - tic) * 1e3:.1f} us for 2,500 values")


if __name__ == "__main__":
    main()
