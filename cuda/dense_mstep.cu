// The dense engine's M-step after a fused sweep (sample_dense.cu counts A and B as it draws):
// the topic totals n[k] of B, then Bhat by Eq. (2) of SaberLDA, computed as the CuPy expression
// it replaces (sklearn_gpulda/backends/cuda/dense/sampler.py, _set_bhat of the bincount path):
//
//   denom = float64(sum_v B[v, k]) + V * beta        (one float64 add)
//   bhat  = float32((float64(B[v, k]) + beta) / denom)   (float64 add, float64 divide, round)
//
// Only integer counts come here, so the column sums are integers and exact in any order (the
// totals are summed as 64-bit integers); the add and the divide are _rn intrinsics, so nvcc cannot
// contract or reorder them, and the double-to-float rounding is round-to-nearest as CuPy's astype.

#include "constants.cuh"

// dense_topic_totals: totals[k] += sum over rows of B[row, k], as unsigned 64-bit integers.
// Launch: any grid, block = any number of threads; totals zeroed by the caller. A block's threads
// are laid out as `lanes` rows of min(K, blockDim.x) topics, so that a load of consecutive threads
// reads consecutive floats of B; each thread adds its column over the block's rows, then one
// atomic per (block, topic) (integer atomics: the same sum whatever their order).
// [in]  B (n_rows x K float32, row-major, non-negative integer values below 2^64).
// [out] totals (K uint64).
extern "C" __global__ void dense_topic_totals(const float* __restrict__ B, int n_rows, int n_topics,
                                              unsigned long long* totals) {
  const int width = min(n_topics, static_cast<int>(blockDim.x));
  const int lanes = blockDim.x / width;
  const int tk = threadIdx.x % width;
  const int tr = threadIdx.x / width;
  if (tr >= lanes) return;
  const long long stride = static_cast<long long>(gridDim.x) * lanes;
  for (int k = tk; k < n_topics; k += width) {
    unsigned long long s = 0;
    for (long long r = static_cast<long long>(blockIdx.x) * lanes + tr; r < n_rows; r += stride) {
      s += __float2ull_rn(B[r * n_topics + k]);
    }
    if (s != 0) atomicAdd(totals + k, s);
  }
}

// dense_bhat: bhat and denom from B and its topic totals, as the formula at the top.
// Launch: any grid and block (grid-strided over the n_entries = V * K entries).
// [in]  B (V x K float32, integer values), totals (K uint64), beta and v_beta = V * beta (float64,
//       the product formed on the host as the CuPy path forms it).
// [out] bhat (V x K float32), denom (K float64).
extern "C" __global__ void dense_bhat(const float* __restrict__ B,
                                      const unsigned long long* __restrict__ totals,
                                      long long n_entries, int n_topics, double beta, double v_beta,
                                      float* __restrict__ bhat, double* __restrict__ denom) {
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n_entries;
       i += stride) {
    const int k = static_cast<int>(i % n_topics);
    const double den = __dadd_rn(__ull2double_rn(totals[k]), v_beta);
    bhat[i] = __double2float_rn(__ddiv_rn(__dadd_rn(static_cast<double>(B[i]), beta), den));
    if (i < n_topics) denom[i] = den;
  }
}
