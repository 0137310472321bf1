// psi(x) from correctly rounded operations only: the device twin of
// sklearn_gpulda/backends/digamma.py, operation for operation and in the same order, so that a
// fixed point on the GPU learns the host's priors bit for bit (that module says why and how).
// Every operation is an _rn intrinsic: nvcc would otherwise fuse a multiply and an add into one
// rounding, which the host does not.
#pragma once

namespace gpulda {

// log 2 split so that e * kLn2High is exact for the exponent of any double.
constexpr double kLn2High = 0.693145751953125;
constexpr double kLn2Low = 1.4286068203094173e-06;
constexpr double kHalfSqrt2 = 0.7071067811865476;
// 1 / k for k = 23, 21, ..., 3: the atanh series, highest term first.
constexpr int kAtanhTerms = 11;
__device__ constexpr double kAtanh[kAtanhTerms] = {0.043478260869565216, 0.047619047619047616,
                                                   0.05263157894736842,  0.058823529411764705,
                                                   0.06666666666666667,  0.07692307692307693,
                                                   0.09090909090909091,  0.1111111111111111,
                                                   0.14285714285714285,  0.2,
                                                   0.3333333333333333};
// B_2k / (2k) for k = 1..7: the asymptotic series of psi.
constexpr int kAsymptoticTerms = 7;
__device__ constexpr double kAsymptotic[kAsymptoticTerms] = {
    0.08333333333333333,  -0.008333333333333333, 0.003968253968253968, -0.004166666666666667,
    0.007575757575757576, -0.021092796092796094, 0.08333333333333333};
constexpr double kAsymptoticFrom = 10.0;

// Natural logarithm of a positive finite double: x = m 2^e, log x = e log 2 + 2 atanh(s) with
// s = (m - 1) / (m + 1), m in [sqrt(1/2), sqrt(2)).
__device__ __forceinline__ double log_basic(double x) {
  int exponent;
  double m = frexp(x, &exponent);
  if (m < kHalfSqrt2) {
    m = __dmul_rn(m, 2.0);
    exponent -= 1;
  }
  const double e = static_cast<double>(exponent);
  const double s = __ddiv_rn(__dsub_rn(m, 1.0), __dadd_rn(m, 1.0));
  const double z = __dmul_rn(s, s);
  double series = kAtanh[0];
#pragma unroll
  for (int i = 1; i < kAtanhTerms; ++i) series = __dadd_rn(__dmul_rn(series, z), kAtanh[i]);
  series = __dadd_rn(__dmul_rn(series, z), 1.0);
  return __dadd_rn(__dmul_rn(e, kLn2High),
                   __dadd_rn(__dmul_rn(__dmul_rn(2.0, s), series), __dmul_rn(e, kLn2Low)));
}

// psi(x) for positive finite x: the recurrence psi(x) = psi(x + 1) - 1 / x up to 10, then the
// asymptotic series.
__device__ __forceinline__ double digamma_basic(double x) {
  double s = x;
  double shift = 0.0;
  while (s < kAsymptoticFrom) {
    shift = __dadd_rn(shift, __ddiv_rn(1.0, s));
    s = __dadd_rn(s, 1.0);
  }
  const double z = __ddiv_rn(1.0, __dmul_rn(s, s));
  double tail = kAsymptotic[kAsymptoticTerms - 1];
#pragma unroll
  for (int i = kAsymptoticTerms - 2; i >= 0; --i) {
    tail = __dadd_rn(__dmul_rn(tail, z), kAsymptotic[i]);
  }
  return __dsub_rn(__dsub_rn(__dsub_rn(log_basic(s), __ddiv_rn(0.5, s)), __dmul_rn(z, tail)),
                   shift);
}

}  // namespace gpulda
