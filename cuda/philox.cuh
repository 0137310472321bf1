// Philox4x32-10 (Salmon, Moraes, Dror, Shaw, "Parallel random numbers: as easy as 1, 2, 3", SC'11),
// the device twin of sklearn_gpulda/backends/random.py. Every draw is a pure function of
// (seed, iteration, stream, token, sweep), so any thread may draw any token's number and the
// CUDA engine reproduces the NumPy engine's numbers bit for bit.
#pragma once

namespace gpulda {

// Random123's round multipliers and Weyl key increments.
constexpr unsigned kPhiloxM0 = 0xD2511F53u;
constexpr unsigned kPhiloxM1 = 0xCD9E8D57u;
constexpr unsigned kPhiloxW0 = 0x9E3779B9u;
constexpr unsigned kPhiloxW1 = 0xBB67AE85u;

// Stream ids: the third counter word; must match random.STREAM_*.
constexpr unsigned kStreamInit = 0;
constexpr unsigned kStreamSample = 1;
constexpr unsigned kStreamBatchInit = 2;
constexpr unsigned kStreamBatchSample = 3;
// The Metropolis-Hastings steps of backends/numpy/mh_rule.py and cuda/sample_mh.cu; the step's
// number is the fourth counter word.
constexpr unsigned kStreamMh = 4;

struct Philox4 {
  unsigned x0, x1, x2, x3;
};

// Full block function; returns all four words (the tests pin them to the known-answer vectors).
__device__ __forceinline__ Philox4 philox4x32_10(unsigned c0, unsigned c1, unsigned c2, unsigned c3,
                                                 unsigned k0, unsigned k1) {
#pragma unroll
  for (int r = 0; r < 10; ++r) {
    if (r) {
      k0 += kPhiloxW0;
      k1 += kPhiloxW1;
    }
    const unsigned hi0 = __umulhi(kPhiloxM0, c0);
    const unsigned lo0 = kPhiloxM0 * c0;
    const unsigned hi1 = __umulhi(kPhiloxM1, c2);
    const unsigned lo1 = kPhiloxM1 * c2;
    const unsigned n0 = hi1 ^ c1 ^ k0;
    const unsigned n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
  }
  return Philox4{c0, c1, c2, c3};
}

// First output word for a token: key (seed, iteration), counter (t_lo, t_hi, stream, sweep).
__device__ __forceinline__ unsigned token_bits(unsigned seed, unsigned iteration, unsigned stream,
                                               long long token, unsigned sweep) {
  const unsigned long long t = static_cast<unsigned long long>(token);
  return philox4x32_10(static_cast<unsigned>(t), static_cast<unsigned>(t >> 32), stream, sweep,
                       seed, iteration)
      .x0;
}

// 24 random bits scaled by 2^-24: exact in float32, so it equals random.token_uniform bit for bit.
__device__ __forceinline__ float bits_to_uniform(unsigned bits) {
  return __uint2float_rn(bits >> 8) * 5.9604644775390625e-08f;
}

// floor(bits * K / 2^32): the high word of the 64-bit product, as random.token_topic.
__device__ __forceinline__ int bits_to_topic(unsigned bits, unsigned n_topics) {
  return static_cast<int>(__umulhi(bits, n_topics));
}

}  // namespace gpulda
