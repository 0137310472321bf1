// Minka's fixed points for the learned priors (sklearn_gpulda/backends/prior_learning.py), run
// on the chain's GPU: update_alpha and update_beta, bit for bit, each in one launch of one
// block, so that a prior update costs the host a few copies instead of a fixed point of
// digammas while the GPU waits.
//
// Bit for bit: every value is computed by the host's operations in the host's order. The
// digammas are digamma_basic (digamma.cuh); the long sums are prior_learning.ordered_sum's
// (a warp: 32 lanes adding left to right, then folded in halves); a topic's table numerator
// and its pairs (np.bincount) are added left to right by one lane. Terms whose order does not
// matter (each its own value: digammas, reciprocals) are computed in parallel. The _rn
// intrinsics keep nvcc from fusing a multiply and an add.

#include "digamma.cuh"

namespace gpulda {

constexpr int kPriorBlock = 512;
constexpr int kPriorWarps = kPriorBlock / 32;
constexpr unsigned kAllLanes = 0xffffffffu;
// Counts of alpha's table a warp's lanes take reciprocals for at once (two per lane).
constexpr int kTableChunk = 64;

// prior_learning.ordered_sum of v[0 .. n), by the calling warp (every lane gets the sum): lane j
// adds v[j], v[j + 32], ... left to right (0.0 past the end, as the host pads), then the lanes
// fold in halves, lane i + lane i + 16, then + 8, ... (lane 0 holds the host's order).
__device__ double warp_ordered_sum(const double* __restrict__ v, int n) {
  if (n == 0) return 0.0;
  const int lane = threadIdx.x & 31;
  const int rows = (n + 31) / 32;
  double acc = lane < n ? v[lane] : 0.0;
  for (int r = 1; r < rows; ++r) {
    const int i = r * 32 + lane;
    acc = __dadd_rn(acc, i < n ? v[i] : 0.0);
  }
#pragma unroll
  for (int width = 16; width > 0; width >>= 1) {
    acc = __dadd_rn(acc, __shfl_down_sync(kAllLanes, acc, width));
  }
  return __shfl_sync(kAllLanes, acc, 0);
}

// The host's max(x, floor) and np.maximum(x, floor): x where it is NaN.
__device__ __forceinline__ double at_least(double x, double floor_value) {
  return floor_value > x ? floor_value : x;
}

// The iterations of update_alpha (see alpha_fixed_point below).
__device__ __forceinline__ void alpha_iterations(
    double* __restrict__ alpha, const double* __restrict__ table, int n_counts,
    const int* __restrict__ pair_start, const int* __restrict__ pair_topic,
    const double* __restrict__ pair_count, const double* __restrict__ pair_docs, int n_pairs,
    const double* __restrict__ length, const double* __restrict__ n_length, int n_lengths,
    int n_topics, int max_iterations, double tolerance, double floor_value,
    double* __restrict__ scratch) {
  double* pair_gain = scratch;
  double* length_gain = scratch + n_pairs;
  double* gains = length_gain + n_lengths;
  double* psi_alpha = gains + n_topics;
  __shared__ double s_recip[kPriorWarps][kTableChunk];
  __shared__ double s_total;
  __shared__ double s_denominator;
  __shared__ int s_more;
  const int tid = threadIdx.x;
  const int warp = tid >> 5;
  const int lane = tid & 31;
  for (int iteration = 0; iteration < max_iterations; ++iteration) {
    if (warp == 0) {
      const double total = warp_ordered_sum(alpha, n_topics);
      if (lane == 0) s_total = total;
    }
    // psi(alpha_k) once per topic, as the host computes it, for every pair of the topic: a
    // small argument's recurrence is the dearest digamma.
    for (int k = tid; k < n_topics; k += blockDim.x) psi_alpha[k] = digamma_basic(alpha[k]);
    __syncthreads();
    // Terms of their own, in parallel: each document length's and each pair's digamma gain.
    const double total = s_total;
    const double psi_total = digamma_basic(total);
    for (int j = tid; j < n_lengths; j += blockDim.x) {
      length_gain[j] =
          __dmul_rn(n_length[j], __dsub_rn(digamma_basic(__dadd_rn(length[j], total)), psi_total));
    }
    for (int i = tid; i < n_pairs; i += blockDim.x) {
      const int k = pair_topic[i];
      pair_gain[i] = __dmul_rn(
          pair_docs[i], __dsub_rn(digamma_basic(__dadd_rn(pair_count[i], alpha[k])), psi_alpha[k]));
    }
    __syncthreads();
    // The sums in the host's orders: warp 0 the denominator over the lengths; a warp per topic
    // its table numerator (the lanes take the reciprocals, lane 0 the running sums count by
    // count) plus its pairs, left to right.
    if (warp == 0) {
      const double denominator = warp_ordered_sum(length_gain, n_lengths);
      if (lane == 0) {
        s_denominator = denominator;
        s_more = 0;
      }
    }
    for (int k = warp; k < n_topics; k += kPriorWarps) {
      const double a = alpha[k];
      const double* row = table + static_cast<size_t>(k) * n_counts;
      double gain = 0.0;
      double numerator = 0.0;
      for (int c0 = 0; c0 < n_counts; c0 += kTableChunk) {
        for (int c = c0 + lane; c < c0 + kTableChunk && c < n_counts; c += 32) {
          s_recip[warp][c - c0] = __ddiv_rn(1.0, __dadd_rn(a, static_cast<double>(c)));
        }
        __syncwarp();
        if (lane == 0) {
          const int end = min(n_counts - c0, kTableChunk);
          for (int c = 0; c < end; ++c) {
            gain = __dadd_rn(gain, s_recip[warp][c]);
            numerator = __dadd_rn(numerator, __dmul_rn(row[c0 + c], gain));
          }
        }
        __syncwarp();
      }
      if (lane == 0) {
        double pairs = 0.0;
        for (int i = pair_start[k]; i < pair_start[k + 1]; ++i) {
          pairs = __dadd_rn(pairs, pair_gain[i]);
        }
        gains[k] = __dadd_rn(numerator, pairs);
      }
    }
    __syncthreads();
    const double denominator = s_denominator;
    bool more = false;
    for (int k = tid; k < n_topics; k += blockDim.x) {
      const double a = alpha[k];
      const double next = at_least(__ddiv_rn(__dmul_rn(a, gains[k]), denominator), floor_value);
      more |= !(__ddiv_rn(fabs(__dsub_rn(next, a)), a) < tolerance);
      alpha[k] = next;
    }
    if (more) s_more = 1;
    __syncthreads();
    if (!s_more) break;
  }
}

// The iterations of update_beta (see beta_fixed_point below); totals of any integer or float
// type (exact as doubles). count and n_cells are not __restrict__: beta_fixed_point_bins writes
// them in the same launch, and a restricted const pointer lets the compiler read through the
// non-coherent cache.
template <typename TotalT>
__device__ __forceinline__ void beta_iterations(double* __restrict__ beta, const double* count,
                                                const double* n_cells, int n_values,
                                                const TotalT* __restrict__ totals, int n_topics,
                                                double n_words, int max_iterations,
                                                double tolerance, double floor_value,
                                                double* __restrict__ scratch) {
  double* cell_gain = scratch;
  double* total_gain = scratch + n_values;
  __shared__ double s_beta;
  __shared__ double s_numerator;
  __shared__ double s_total_sum;
  __shared__ int s_more;
  const int tid = threadIdx.x;
  const int warp = tid >> 5;
  const int lane = tid & 31;
  if (tid == 0) s_beta = beta[0];
  __syncthreads();
  for (int iteration = 0; iteration < max_iterations; ++iteration) {
    const double b = s_beta;
    const double psi_b = digamma_basic(b);
    const double sums = __dmul_rn(n_words, b);
    const double psi_sums = digamma_basic(sums);
    for (int i = tid; i < n_values; i += blockDim.x) {
      cell_gain[i] = __dmul_rn(n_cells[i], __dsub_rn(digamma_basic(__dadd_rn(count[i], b)), psi_b));
    }
    for (int k = tid; k < n_topics; k += blockDim.x) {
      total_gain[k] =
          __dsub_rn(digamma_basic(__dadd_rn(static_cast<double>(totals[k]), sums)), psi_sums);
    }
    __syncthreads();
    // The two sums in two warps at once, each in ordered_sum's order.
    if (warp == 0) {
      const double sum = warp_ordered_sum(cell_gain, n_values);
      if (lane == 0) s_numerator = sum;
    } else if (warp == 1) {
      const double sum = warp_ordered_sum(total_gain, n_topics);
      if (lane == 0) s_total_sum = sum;
    }
    __syncthreads();
    if (tid == 0) {
      const double denominator = __dmul_rn(n_words, s_total_sum);
      const double next = at_least(__ddiv_rn(__dmul_rn(b, s_numerator), denominator), floor_value);
      s_more = !(__ddiv_rn(fabs(__dsub_rn(next, b)), b) < tolerance);
      s_beta = next;
    }
    __syncthreads();
    if (!s_more) break;
  }
  if (tid == 0) beta[0] = s_beta;
}

// Sort buf[0 .. m) ascending, m a power of two, by the whole block (bitonic; buf in shared or
// global memory: each pass ends at a barrier).
__device__ __forceinline__ void block_sort(unsigned long long* buf, int m) {
  for (int k = 2; k <= m; k <<= 1) {
    for (int j = k >> 1; j > 0; j >>= 1) {
      for (int i = threadIdx.x; i < m; i += blockDim.x) {
        const int partner = i ^ j;
        if (partner > i) {
          const unsigned long long a = buf[i];
          const unsigned long long b = buf[partner];
          if ((a > b) == ((i & k) == 0)) {
            buf[i] = b;
            buf[partner] = a;
          }
        }
      }
      __syncthreads();
    }
  }
}

// The positions i < n where flag(i) holds, in increasing order, into out[0 ..); returns how
// many (to every thread). The whole block calls it; blockDim.x is a multiple of 32.
template <typename Flag>
__device__ __forceinline__ int block_compact(int n, Flag flag, int* __restrict__ out) {
  __shared__ int s_base[kPriorWarps];
  __shared__ int s_found;
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  if (threadIdx.x == 0) s_found = 0;
  __syncthreads();
  for (int first = 0; first < n; first += blockDim.x) {
    const int i = first + threadIdx.x;
    const bool hit = i < n && flag(i);
    const unsigned ballot = __ballot_sync(kAllLanes, hit);
    if (lane == 0) s_base[warp] = __popc(ballot);
    __syncthreads();
    if (threadIdx.x == 0) {
      int run = s_found;
      for (int w = 0; w < static_cast<int>(blockDim.x >> 5); ++w) {
        const int c = s_base[w];
        s_base[w] = run;
        run += c;
      }
      s_found = run;
    }
    __syncthreads();
    if (hit) out[s_base[warp] + __popc(ballot & ((1u << lane) - 1u))] = i;
    __syncthreads();
  }
  const int found = s_found;
  __syncthreads();  // before a later call's thread 0 resets it
  return found;
}

// Keys sorted and counted: buf[0 .. n) (given in any order) sorted into buf (m: a power of two
// at least n, the rest padded with the largest key), each distinct key's first position into
// head[0 .. returned count).
__device__ __forceinline__ int sorted_runs(unsigned long long* buf, int n, int m,
                                           int* __restrict__ head) {
  for (int i = n + threadIdx.x; i < m; i += blockDim.x) buf[i] = ~0ull;
  __syncthreads();
  block_sort(buf, m);
  return block_compact(n, [=](int i) { return i == 0 || buf[i] != buf[i - 1]; }, head);
}

__device__ __forceinline__ int pow2_at_least(int n) {
  int m = 1;
  while (m < n) m <<= 1;
  return m;
}

// First i in [0, n) with v[i] >= key, else n. (v is not __restrict__: alpha_pairs writes it in
// the same launch.)
__device__ __forceinline__ int lower_bound(const int* v, int n, int key) {
  int lo = 0;
  int hi = n;
  while (lo < hi) {
    const int mid = (lo + hi) >> 1;
    if (v[mid] < key) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

// The pairs alpha_fixed_point reads, from the overflow keys of A's histogram (the first
// n_keys[0] of keys): sorted, counted and decoded as the host's np.unique and decode_keys do,
// with each topic's first pair. Returns how many.
__device__ __forceinline__ int alpha_pairs(
    const unsigned long long* __restrict__ keys, const unsigned long long* __restrict__ n_keys,
    int capacity, int n_topics, unsigned long long* __restrict__ sort, int* __restrict__ head,
    int* __restrict__ pair_topic, int* __restrict__ pair_start, double* __restrict__ pair_count,
    double* __restrict__ pair_docs) {
  const int n = static_cast<int>(min(n_keys[0], static_cast<unsigned long long>(capacity)));
  for (int i = threadIdx.x; i < n; i += blockDim.x) sort[i] = keys[i];
  const int n_pairs = sorted_runs(sort, n, pow2_at_least(n), head);
  for (int u = threadIdx.x; u < n_pairs; u += blockDim.x) {
    const int first = head[u];
    const int end = u + 1 < n_pairs ? head[u + 1] : n;
    const unsigned long long key = sort[first];
    pair_topic[u] = static_cast<int>(key >> 32);
    pair_count[u] = static_cast<double>(__uint_as_float(static_cast<unsigned>(key)));
    pair_docs[u] = static_cast<double>(end - first);
  }
  __syncthreads();
  for (int k = threadIdx.x; k <= n_topics; k += blockDim.x) {
    pair_start[k] = lower_bound(pair_topic, n_pairs, k);
  }
  __syncthreads();
  return n_pairs;
}

}  // namespace gpulda

using namespace gpulda;

// ---------------------------------------------------------------------------------------------
// alpha_fixed_point: prior_learning.update_alpha from the histograms of A.
// Launch: grid 1, block kPriorBlock.
// [in/out] alpha (K float64): where the iteration starts; the learned alpha.
// [in] table (K x n_counts float64, row-major; null when n_counts is 0): table[k, c - 1]
//      documents hold c tokens of topic k. pair_start (K + 1 int32): topic k's pairs are
//      pair_start[k] .. pair_start[k + 1] - 1, in the host's order; pair_topic, pair_count,
//      pair_docs (n_pairs each): n_docs documents hold count tokens of topic. length, n_length
//      (n_lengths float64): n_length[j] documents have length[j] tokens.
// [scratch] n_pairs + n_lengths + 2 K float64.
// ---------------------------------------------------------------------------------------------
extern "C" __global__ void __launch_bounds__(kPriorBlock)
    alpha_fixed_point(double* __restrict__ alpha, const double* __restrict__ table, int n_counts,
                      const int* __restrict__ pair_start, const int* __restrict__ pair_topic,
                      const double* __restrict__ pair_count, const double* __restrict__ pair_docs,
                      int n_pairs, const double* __restrict__ length,
                      const double* __restrict__ n_length, int n_lengths, int n_topics,
                      int max_iterations, double tolerance, double floor_value,
                      double* __restrict__ scratch) {
  alpha_iterations(alpha, table, n_counts, pair_start, pair_topic, pair_count, pair_docs, n_pairs,
                   length, n_length, n_lengths, n_topics, max_iterations, tolerance, floor_value,
                   scratch);
}

// ---------------------------------------------------------------------------------------------
// alpha_pairs_of_keys: the pairs alpha_fixed_point reads, from A's histogram as the device holds
// it (counts.cu's a_entry_histogram), with no trip through the host: the overflow's keys sorted,
// counted and decoded as the host's np.unique and decode_keys make them, and each topic's first
// pair. Launch: grid 1, block kPriorBlock.
// [in] bins (K x n_bins uint64): bins[k, c] documents hold c tokens of topic k (c >= 1); keys
// (capacity uint64): the other entries, (topic << 32) | float bits, the first n_keys[0] of them.
// [out] table (K x (n_bins - 1) float64), pair_topic, pair_count, pair_docs (capacity each),
// pair_start (K + 1), n_pairs (1). [scratch] sort (a power of two >= capacity uint64), head
// (capacity int32).
// ---------------------------------------------------------------------------------------------
extern "C" __global__ void __launch_bounds__(kPriorBlock)
    alpha_pairs_of_keys(const unsigned long long* __restrict__ bins, int n_bins,
                        const unsigned long long* __restrict__ keys,
                        const unsigned long long* __restrict__ n_keys, int capacity, int n_topics,
                        unsigned long long* __restrict__ sort, int* __restrict__ head,
                        double* __restrict__ table, int* __restrict__ pair_topic,
                        int* __restrict__ pair_start, double* __restrict__ pair_count,
                        double* __restrict__ pair_docs, int* __restrict__ n_pairs_out) {
  // The table as alpha_fixed_point reads it: counts 1 .. n_bins - 1, float64 (exact).
  const int n_counts = n_bins - 1;
  for (int i = threadIdx.x; i < n_topics * n_counts; i += blockDim.x) {
    table[i] = static_cast<double>(bins[(i / n_counts) * n_bins + i % n_counts + 1]);
  }
  const int n_pairs = alpha_pairs(keys, n_keys, capacity, n_topics, sort, head, pair_topic,
                                  pair_start, pair_count, pair_docs);
  if (threadIdx.x == 0) n_pairs_out[0] = n_pairs;
}

// ---------------------------------------------------------------------------------------------
// alpha_fixed_point_bins: alpha_fixed_point on alpha_pairs_of_keys' table and pairs (n_pairs
// read from the device). Launch: grid 1, block kPriorBlock. [scratch] capacity + n_lengths + 2 K
// float64.
// ---------------------------------------------------------------------------------------------
extern "C" __global__ void __launch_bounds__(kPriorBlock)
    alpha_fixed_point_bins(double* __restrict__ alpha, const double* __restrict__ table,
                           int n_counts, const int* __restrict__ pair_start,
                           const int* __restrict__ pair_topic,
                           const double* __restrict__ pair_count,
                           const double* __restrict__ pair_docs, const int* __restrict__ n_pairs,
                           const double* __restrict__ length, const double* __restrict__ n_length,
                           int n_lengths, int n_topics, int max_iterations, double tolerance,
                           double floor_value, double* __restrict__ scratch) {
  alpha_iterations(alpha, table, n_counts, pair_start, pair_topic, pair_count, pair_docs,
                   n_pairs[0], length, n_length, n_lengths, n_topics, max_iterations, tolerance,
                   floor_value, scratch);
}

// ---------------------------------------------------------------------------------------------
// beta_fixed_point: prior_learning.update_beta without seeded cells, from the histogram of B.
// Launch: grid 1, block kPriorBlock.
// [in/out] beta (1 float64). [in] count, n_cells (n_values float64): n_cells cells of B hold
// count tokens; totals (K float64): the topics' tokens; n_words: V.
// [scratch] n_values + K float64.
// ---------------------------------------------------------------------------------------------
extern "C" __global__ void __launch_bounds__(kPriorBlock)
    beta_fixed_point(double* __restrict__ beta, const double* __restrict__ count,
                     const double* __restrict__ n_cells, int n_values,
                     const double* __restrict__ totals, int n_topics, double n_words,
                     int max_iterations, double tolerance, double floor_value,
                     double* __restrict__ scratch) {
  beta_iterations(beta, count, n_cells, n_values, totals, n_topics, n_words, max_iterations,
                  tolerance, floor_value, scratch);
}

// ---------------------------------------------------------------------------------------------
// beta_fixed_point_bins: beta_fixed_point from B's histogram as the device holds it (counts.cu's
// value_histogram), with no trip through the host: the binned values in increasing order, then
// the overflow's values sorted and counted (the host's np.unique and merge; for integer counts
// every overflow value is at least n_bins).
// Launch: grid 1, block kPriorBlock.
// [in/out] beta (1 float64). [in] bins (n_bins uint64): bins[c] cells hold c tokens (c >= 1);
// values (capacity float32): the other non-zero cells, the first n_values_over[0] of them;
// totals_f64 or totals_u64 (the other null; K): the topics' tokens; n_words: V.
// [scratch] sort (a power of two >= capacity uint64), head (max(n_bins, capacity) int32), count
// and n_cells (n_bins + capacity float64 each), and beta_fixed_point's scratch for as many
// values.
// ---------------------------------------------------------------------------------------------
extern "C" __global__ void __launch_bounds__(kPriorBlock)
    beta_fixed_point_bins(double* __restrict__ beta, const unsigned long long* __restrict__ bins,
                          int n_bins, const float* __restrict__ values,
                          const unsigned long long* __restrict__ n_values_over, int capacity,
                          const double* __restrict__ totals_f64,
                          const unsigned long long* __restrict__ totals_u64, int n_topics,
                          double n_words, int max_iterations, double tolerance, double floor_value,
                          unsigned long long* __restrict__ sort, int* __restrict__ head,
                          double* __restrict__ count, double* __restrict__ n_cells,
                          double* __restrict__ scratch) {
  const int n_small = block_compact(n_bins, [=](int c) { return c > 0 && bins[c] != 0ull; }, head);
  for (int j = threadIdx.x; j < n_small; j += blockDim.x) {
    count[j] = static_cast<double>(head[j]);
    n_cells[j] = static_cast<double>(bins[head[j]]);
  }
  __syncthreads();
  const int n = static_cast<int>(min(n_values_over[0], static_cast<unsigned long long>(capacity)));
  for (int i = threadIdx.x; i < n; i += blockDim.x) sort[i] = __float_as_uint(values[i]);
  const int n_big = sorted_runs(sort, n, pow2_at_least(n), head);
  for (int u = threadIdx.x; u < n_big; u += blockDim.x) {
    const int first = head[u];
    const int end = u + 1 < n_big ? head[u + 1] : n;
    count[n_small + u] = static_cast<double>(__uint_as_float(static_cast<unsigned>(sort[first])));
    n_cells[n_small + u] = static_cast<double>(end - first);
  }
  __syncthreads();
  if (totals_f64 != nullptr) {
    beta_iterations(beta, count, n_cells, n_small + n_big, totals_f64, n_topics, n_words,
                    max_iterations, tolerance, floor_value, scratch);
  } else {
    beta_iterations(beta, count, n_cells, n_small + n_big, totals_u64, n_topics, n_words,
                    max_iterations, tolerance, floor_value, scratch);
  }
}

// ---------------------------------------------------------------------------------------------
// digamma_values: out[i] = digamma_basic(x[i]), for the tests that compare it with the host's.
// Launch: grid any (grid-strided), block any.
// ---------------------------------------------------------------------------------------------
extern "C" __global__ void digamma_values(const double* __restrict__ x, long long n,
                                          double* __restrict__ out) {
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += stride) {
    out[i] = digamma_basic(x[i]);
  }
}
