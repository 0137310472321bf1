"""The digamma function made of correctly rounded operations only, so that the host and a GPU
compute it alike.

The learned priors' fixed points (:mod:`.prior_learning`) run on the GPU that holds a chain
(``cuda/priors.cu``), and on the host where it stands in for GPUs (a Dask driver of GPU
workers). A GPU fit must learn the same priors wherever its fixed point runs: one GPU,
several, or Dask workers. Additions, subtractions, multiplications and divisions of IEEE
doubles are correctly rounded in NumPy and in CUDA (there with the ``_rn`` intrinsics, never
fused into a multiply-add), and ``frexp`` is exact, so a digamma built from them alone has one
value everywhere; SciPy's calls the C library's logarithm and the GPU's would be another's. The
NumPy engine, whose fits never meet a GPU's, keeps SciPy's, several times cheaper on the host.

The method: below 10, the recurrence ``psi(x) = psi(x + 1) - 1 / x`` up to 10; from there the
asymptotic series ``log(x) - 1 / (2x) - sum_k B_2k / (2k x^2k)`` (Bernoulli numbers, seven
terms: their error is below 1e-16 relative at 10), with the logarithm from
``x = m 2^e``: ``e log 2 + 2 atanh((m - 1) / (m + 1))`` for ``m`` in ``[sqrt(1/2), sqrt(2))``,
the atanh series to its twelfth term (``|s| <= 0.172``, so the first term left out is below
1e-19). From 10 up it equals SciPy's value bit for bit at 400,000 arguments drawn in
[10, 1e6); below 10 the recurrence's roundings leave it within a few units in the last place
of SciPy's, further only near psi's root at 1.4616, where the value itself is near zero
(``benchmarks/probes/ieee_digamma.py``; ``tests/test_digamma.py`` bounds the difference).

``cuda/digamma.cuh`` is the device twin: every operation here has its counterpart there, in
the same order.
"""

import numpy as np

#: log 2 split so that ``e * LN2_HIGH`` is exact for the exponent of any double.
LN2_HIGH = 0.693145751953125
LN2_LOW = 1.4286068203094173e-06
#: ``1 / k`` for the odd ``k`` of the atanh series, highest first (23 down to 3).
ATANH_TERMS = tuple(1.0 / k for k in range(23, 1, -2))
#: ``B_2k / (2k)`` for k = 1..7, the asymptotic series' coefficients.
ASYMPTOTIC = (1 / 12, -1 / 120, 1 / 252, -1 / 240, 1 / 132, -691 / 32760, 1 / 12)
#: Where the recurrence hands over to the asymptotic series.
ASYMPTOTIC_FROM = 10.0
#: ``sqrt(1/2)``: a mantissa below it is doubled, so that ``m`` lies in [sqrt(1/2), sqrt(2)).
HALF_SQRT2 = 0.7071067811865476


def log(x):
    """The natural logarithm of positive finite ``x`` (float64), from ``frexp`` and basic
    operations."""
    x = np.asarray(x, dtype=np.float64)
    m, e = np.frexp(x.reshape(-1))
    e = e.astype(np.float64)
    low = m < HALF_SQRT2
    m[low] *= 2.0  # exact
    e[low] -= 1.0
    s = (m - 1.0) / (m + 1.0)
    z = s * s
    # In place, one rounding per operation as written out: series * z, then + term.
    series = np.full_like(z, ATANH_TERMS[0])
    for term in ATANH_TERMS[1:]:
        series *= z
        series += term
    series *= z
    series += 1.0
    return (e * LN2_HIGH + ((2.0 * s) * series + e * LN2_LOW)).reshape(x.shape)


def digamma(x):
    """psi(x) for positive finite ``x``, elementwise, float64 (:mod:`this module
    <sklearn_gpulda.backends.digamma>` says why not SciPy's)."""
    shape = np.shape(x)
    s = np.array(x, dtype=np.float64).reshape(-1)  # a copy: the recurrence moves it
    shift = np.zeros_like(s)
    # The recurrence on the arguments still below 10 only, each step as written out.
    below = np.flatnonzero(s < ASYMPTOTIC_FROM)
    while below.size:
        moved = s[below]
        shift[below] += 1.0 / moved
        moved += 1.0
        s[below] = moved
        below = below[moved < ASYMPTOTIC_FROM]
    z = 1.0 / (s * s)
    tail = np.full_like(z, ASYMPTOTIC[-1])
    for c in ASYMPTOTIC[-2::-1]:
        tail *= z
        tail += c
    return (log(s) - 0.5 / s - z * tail - shift).reshape(shape)
