// What the fit loop reads of a dense chain (sklearn_gpulda/backends/cuda/dense/reading.py): the
// histogram of A's counts that learning alpha reads, and the training log-likelihood of
// doc/algorithm.md. They stand for CuPy expressions (nonzero, unique, sums along rows) that CuPy
// would compile on a user's machine; the histogram gives the same numbers (integer counts), the
// log-likelihood the same sum in an order of its own (see dense_token_loglik).

#include "constants.cuh"

// The log-likelihood's block (constants.cuh) and the tokens one block scores: its partial sum is
// one number per tile of the corpus, whatever the GPU, so the total does not depend on the grid.
constexpr int kLoglikBlock = gpulda::kDenseLoglikBlock;
constexpr int kLoglikTokensPerThread = gpulda::kDenseLoglikTokens;
constexpr int kLoglikTile = kLoglikBlock * kLoglikTokensPerThread;
static_assert((kLoglikBlock & (kLoglikBlock - 1)) == 0, "the block's tree needs a power of two");

// ---------------------------------------------------------------------------------------------
// dense_topic_bins: A's non-zero counts, per topic. An integer count c in [1, n_bins) of topic k
// adds one to table[k, c]; any other non-zero count (c >= n_bins, or not a whole number) appends
// its key (uint64(k) << 32) | bits of the float c to overflow, through the counter n_overflow
// (keys past `capacity` are counted but not written: the caller sees n_overflow > capacity).
// Launch: grid (any, ceil(K / topics_per_pass)), block any, dynamic shared memory
// topics_per_pass * n_bins * 4 bytes: blockIdx.y takes topics [y * topics_per_pass, +width) and
// bins them in shared memory first (the counts 1 and 2 of every document land on a few bins),
// then adds its non-zero bins to the table.
// [in]  A (n_rows x K float32, non-negative); [in/out] table (K x n_bins uint64), overflow
// (capacity uint64), n_overflow (1 uint64), all zeroed or appended to by the caller.
// NumPy: for each (d, k) with A[d, k] != 0, as above.
// ---------------------------------------------------------------------------------------------
extern "C" __global__ void dense_topic_bins(const float* __restrict__ A, long long n_rows,
                                            int n_topics, int topics_per_pass, int n_bins,
                                            unsigned long long* __restrict__ table,
                                            unsigned long long* __restrict__ overflow,
                                            unsigned long long* __restrict__ n_overflow,
                                            long long capacity) {
  extern __shared__ unsigned bins[];
  const int k0 = blockIdx.y * topics_per_pass;
  const int width = min(topics_per_pass, n_topics - k0);
  const int n_local = width * n_bins;
  for (int i = threadIdx.x; i < n_local; i += blockDim.x) bins[i] = 0;
  __syncthreads();
  const long long n_cells = n_rows * width;
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n_cells;
       i += stride) {
    const long long r = i / width;
    const int kk = static_cast<int>(i - r * width);
    const float c = A[r * n_topics + k0 + kk];
    if (c == 0.0f) continue;
    if (c < static_cast<float>(n_bins) && c == floorf(c)) {
      atomicAdd(bins + kk * n_bins + static_cast<int>(c), 1u);
    } else {
      const unsigned long long slot = atomicAdd(n_overflow, 1ull);
      if (slot < static_cast<unsigned long long>(capacity)) {
        overflow[slot] = (static_cast<unsigned long long>(k0 + kk) << 32) | __float_as_uint(c);
      }
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < n_local; i += blockDim.x) {
    if (bins[i] != 0) {
      atomicAdd(table + static_cast<long long>(k0) * n_bins + i,
                static_cast<unsigned long long>(bins[i]));
    }
  }
}

// ---------------------------------------------------------------------------------------------
// dense_prior_mass: q[v] = sum_k float64(float32(Bhat[v, k] * alpha[k])), the prior's mass of each
// word, summed in topic order. Launch: any grid and block (grid-strided over the words).
// [in] bhat (V x K float32), alpha (K float32); [out] q (V float64).
// NumPy: (bhat * alpha).sum(axis=1, dtype=np.float64), added left to right.
// ---------------------------------------------------------------------------------------------
extern "C" __global__ void dense_prior_mass(const float* __restrict__ bhat,
                                            const float* __restrict__ alpha, long long n_words,
                                            int n_topics, double* __restrict__ q) {
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long v = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; v < n_words;
       v += stride) {
    const float* row = bhat + v * n_topics;
    double s = 0.0;
    for (int k = 0; k < n_topics; ++k) {
      s = __dadd_rn(s, static_cast<double>(__fmul_rn(row[k], alpha[k])));
    }
    q[v] = s;
  }
}

// ---------------------------------------------------------------------------------------------
// dense_token_loglik: partial[b] = the sum over the tokens t of tile b (kLoglikTile consecutive
// tokens) of w_t * (log(S_t + q[v_t]) - log(doc_norm[d_t])), S_t = sum_k float64(A[d_t, k]) *
// float64(Bhat[v_t, k]) added in topic order (doc/algorithm.md's training log-likelihood).
// Thread j of block b scores tokens b * kLoglikTile + j + i * kLoglikBlock (i < 4) in that order,
// then the block adds its threads' sums as a fixed tree: the result depends on the corpus alone,
// not on the GPU or the grid. Every operation is an _rn intrinsic (no contraction).
// Launch: grid ceil(n_tokens / kLoglikTile), block kLoglikBlock.
// [in] doc, word (n int32), weight (n float32, or nullptr for 1), A (D x K float32), bhat (V x K
// float32), q (V float64, dense_prior_mass), doc_norm (D float64: N_d + sum(alpha));
// [out] partial (grid float64).
// ---------------------------------------------------------------------------------------------
extern "C" __global__ void __launch_bounds__(kLoglikBlock)
    dense_token_loglik(const int* __restrict__ doc, const int* __restrict__ word,
                       const float* __restrict__ weight, const float* __restrict__ A,
                       const float* __restrict__ bhat, const double* __restrict__ q,
                       const double* __restrict__ doc_norm, long long n_tokens, int n_topics,
                       double* __restrict__ partial) {
  __shared__ double sums[kLoglikBlock];
  double own = 0.0;
  const long long base = static_cast<long long>(blockIdx.x) * kLoglikTile + threadIdx.x;
  for (int i = 0; i < kLoglikTokensPerThread; ++i) {
    const long long t = base + static_cast<long long>(i) * kLoglikBlock;
    if (t >= n_tokens) break;
    const int d = doc[t];
    const int v = word[t];
    const float* a_row = A + static_cast<long long>(d) * n_topics;
    const float* b_row = bhat + static_cast<long long>(v) * n_topics;
    double s = 0.0;
    for (int k = 0; k < n_topics; ++k) {
      s = __dadd_rn(s, __dmul_rn(static_cast<double>(a_row[k]), static_cast<double>(b_row[k])));
    }
    double term = __dsub_rn(log(__dadd_rn(s, q[v])), log(doc_norm[d]));
    if (weight != nullptr) term = __dmul_rn(term, static_cast<double>(weight[t]));
    own = __dadd_rn(own, term);
  }
  sums[threadIdx.x] = own;
  __syncthreads();
  for (int half = kLoglikBlock / 2; half > 0; half >>= 1) {
    if (threadIdx.x < half)
      sums[threadIdx.x] = __dadd_rn(sums[threadIdx.x], sums[threadIdx.x + half]);
    __syncthreads();
  }
  if (threadIdx.x == 0) partial[blockIdx.x] = sums[0];
}
