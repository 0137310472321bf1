// The dense engine's M-step after a fused sweep (sample_dense.cu counts A and B as it draws), and
// the counts of a chain's first topics: the topic totals n[k] of B, then Bhat by Eq. (2) of
// SaberLDA, computed as the CuPy expression it replaces (sklearn_gpulda/backends/cuda/dense/
// sampler.py, _set_bhat of the bincount path), with a matrix prior's seeded cells as the NumPy
// engine adds them (doc/algorithm.md, "A matrix topic-word prior"):
//
//   denom = (float64(sum_v B[v, k]) + V * beta) + E[k]     (E[k] only with a matrix prior)
//   bhat  = float32((float64(B[v, k]) + beta) / denom)     (float64 add, float64 divide, round)
//   bhat  = float32(((float64(B[v, k]) + beta) + extra) / denom)   at a seeded cell
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

// dense_bhat: bhat and denom from B and its topic totals, as the formula at the top (seeded cells
// get the plain value here; dense_seed_bhat rewrites them after).
// Launch: any grid and block (grid-strided over the n_entries = V * K entries).
// [in]  B (V x K float32, integer values), totals (K uint64), beta and v_beta = V * beta (float64,
//       the product formed on the host as the CuPy path forms it), extra_sums (K float64: E[k]
//       of a matrix prior, added last; nullptr for a scalar prior); prior_word (nullable: 2
//       float64, beta and v_beta read in place of the arguments).
// [out] bhat (V x K float32), denom (K float64).
extern "C" __global__ void dense_bhat(const float* __restrict__ B,
                                      const unsigned long long* __restrict__ totals,
                                      long long n_entries, int n_topics, double beta_value,
                                      double v_beta_value, const double* __restrict__ extra_sums,
                                      float* __restrict__ bhat, double* __restrict__ denom,
                                      const double* __restrict__ prior_word) {
  // A sweep replayed as a CUDA graph reads beta and V * beta from a device word pair.
  const double beta = prior_word != nullptr ? prior_word[0] : beta_value;
  const double v_beta = prior_word != nullptr ? prior_word[1] : v_beta_value;
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n_entries;
       i += stride) {
    const int k = static_cast<int>(i % n_topics);
    double den = __dadd_rn(__ull2double_rn(totals[k]), v_beta);
    if (extra_sums != nullptr) den = __dadd_rn(den, extra_sums[k]);
    bhat[i] = __double2float_rn(__ddiv_rn(__dadd_rn(static_cast<double>(B[i]), beta), den));
    if (i < n_topics) denom[i] = den;
  }
}

// dense_seed_bhat: Bhat at a matrix prior's seeded cells, after dense_bhat (or the bincount path)
// wrote every cell and denom: bhat[cell] = float32(((float64(B) + beta) + extra[i]) / denom[k]),
// the NumPy engine's order (backends/numpy/tables.py, fill_tables). The cells are distinct.
// Launch: any grid and block (grid-strided over the n cells).
// [in]  B (V x K float32), rows, topics (n int32: the cell's word and topic), extra (n float64),
//       beta, denom (K float64, E[k] included).
// [out] bhat at the cells.
// NumPy: bhat[rows, topics] = (((B[rows, topics] + beta) + extra) / denom[topics]).astype(f32).
extern "C" __global__ void dense_seed_bhat(const float* __restrict__ B, int n_topics,
                                           const int* __restrict__ rows,
                                           const int* __restrict__ topics,
                                           const double* __restrict__ extra, long long n,
                                           double beta, const double* __restrict__ denom,
                                           float* __restrict__ bhat) {
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const int k = topics[i];
    const size_t cell = static_cast<size_t>(rows[i]) * n_topics + k;
    const double num = __dadd_rn(__dadd_rn(static_cast<double>(B[cell]), beta), extra[i]);
    bhat[cell] = __double2float_rn(__ddiv_rn(num, denom[k]));
  }
}

// dense_count_tokens: A[doc[t], z[t]] += 1 and B[word[t], z[t]] += 1 for every token t < n: the
// counts of a chain's first topics (init_topics, set_topics) or of B alone (A null) for a chain
// whose topic-word side is fixed. Only integer counts below 2^24 a row come here, which float32
// atomics add exactly in any order: the tables cupy.bincount gives, as the fused sweep's.
// Launch: any grid and block (grid-strided). The tables are zeroed by the caller.
// [in]  doc, word, z (n int32); [in/out] A (D x K float32, or nullptr), B (V x K, or nullptr).
extern "C" __global__ void dense_count_tokens(const int* __restrict__ doc,
                                              const int* __restrict__ word,
                                              const int* __restrict__ z, long long n, int n_topics,
                                              float* __restrict__ A, float* __restrict__ B) {
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long t = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; t < n;
       t += stride) {
    const int k = z[t];
    if (A != nullptr) atomicAdd(A + static_cast<size_t>(doc[t]) * n_topics + k, 1.0f);
    if (B != nullptr) atomicAdd(B + static_cast<size_t>(word[t]) * n_topics + k, 1.0f);
  }
}
