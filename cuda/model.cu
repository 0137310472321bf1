// The model read out of a chain: averaging's running sum of the word-topic counts, and blocks of
// topics of a word-major (V', K) table made topic-major for the copy to the host
// (sklearn_gpulda/backends/cuda/chain.py and transfer.py). The arithmetic is that of the CuPy
// expressions these kernels replace, operation for operation in IEEE float64, so the results are
// the same bit for bit; they are here so that no kernel is compiled at run time.

// Threads of a transpose tile: 32 x 32 entries, 8 rows of threads.
constexpr int kTile = 32;
constexpr int kTileRows = 8;

// ---------------------------------------------------------------------------------------------
// accumulate_sum: sum[i] = double(table[i]) when first != 0, else sum[i] + double(table[i]), for
// i < n. Launch: any grid and block (grid-strided). [in] table (n float32); [in,out] sum (n
// float64). Equivalent NumPy: sum = table.astype(np.float64) if first else sum + table.
// ---------------------------------------------------------------------------------------------
extern "C" __global__ void accumulate_sum(const float* __restrict__ table, long long n, int first,
                                          double* __restrict__ sum) {
  const long long step = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += step) {
    const double value = static_cast<double>(table[i]);
    sum[i] = first ? value : sum[i] + value;
  }
}

// ---------------------------------------------------------------------------------------------
// topic_major_<in>_<out>: out[k - lo, v] = OutT((double(table[r(v), k]) / divisor) + add) for
// lo <= k < hi and v < n_words, where r(v) = rows[v] (or v when rows is null), the division only
// when has_divisor and the addition only when has_add (each skipped, not done with 1 or 0).
// Launch: grid (ceil(n_words / 32), ceil((hi - lo) / 32)), block (32, 8): a 32 x 32 tile through
// shared memory, read along k and written along v. [in] table (V' x n_topics, C order), rows
// (n_words int32, or null); [out] out ((hi - lo) x n_words, C order).
// Equivalent NumPy: part = table[rows, lo:hi].T.astype(np.float64); part /= divisor;
// part += add; out[...] = part.astype(OutT).
// ---------------------------------------------------------------------------------------------
template <typename InT, typename OutT>
__device__ __forceinline__ void topic_major(const InT* __restrict__ table, int n_topics,
                                            const int* __restrict__ rows, long long n_words, int lo,
                                            int hi, int has_divisor, double divisor, int has_add,
                                            double add, OutT* __restrict__ out) {
  __shared__ double tile[kTile][kTile + 1];
  const long long v0 = static_cast<long long>(blockIdx.x) * kTile;
  const int k0 = lo + blockIdx.y * kTile;
  // Read: thread x walks topics, rows of threads walk words.
  for (int dy = threadIdx.y; dy < kTile; dy += kTileRows) {
    const long long v = v0 + dy;
    const int k = k0 + threadIdx.x;
    if (v < n_words && k < hi) {
      const long long r = rows == nullptr ? v : static_cast<long long>(rows[v]);
      tile[dy][threadIdx.x] = static_cast<double>(table[r * n_topics + k]);
    }
  }
  __syncthreads();
  // Write: thread x walks words, rows of threads walk topics.
  for (int dy = threadIdx.y; dy < kTile; dy += kTileRows) {
    const int k = k0 + dy;
    const long long v = v0 + threadIdx.x;
    if (v < n_words && k < hi) {
      double value = tile[threadIdx.x][dy];
      if (has_divisor) value = value / divisor;
      if (has_add) value = value + add;
      out[static_cast<long long>(k - lo) * n_words + v] = static_cast<OutT>(value);
    }
  }
}

#define GPULDA_TOPIC_MAJOR(SUFFIX, IN_T, OUT_T)                                                    \
  extern "C" __global__ void __launch_bounds__(kTile* kTileRows) topic_major_##SUFFIX(             \
      const IN_T* __restrict__ table, int n_topics, const int* __restrict__ rows,                  \
      long long n_words, int lo, int hi, int has_divisor, double divisor, int has_add, double add, \
      OUT_T* __restrict__ out) {                                                                   \
    topic_major<IN_T, OUT_T>(table, n_topics, rows, n_words, lo, hi, has_divisor, divisor,         \
                             has_add, add, out);                                                   \
  }
GPULDA_TOPIC_MAJOR(f32_f64, float, double)
GPULDA_TOPIC_MAJOR(f32_f32, float, float)
GPULDA_TOPIC_MAJOR(f64_f64, double, double)
GPULDA_TOPIC_MAJOR(f64_f32, double, float)
