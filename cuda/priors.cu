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
      total_gain[k] = __dsub_rn(digamma_basic(__dadd_rn(totals[k], sums)), psi_sums);
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
