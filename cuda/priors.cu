// Minka's fixed points for the learned priors (sklearn_gpulda/backends/prior_learning.py), run
// on the chain's GPU: update_alpha and update_beta, bit for bit, each in one launch of one
// block, so that a prior update costs the host one copy in and one out instead of a fixed
// point of digammas while the GPU waits.
//
// Bit for bit: every value is computed by the host's operations in the host's order. The
// digammas are digamma_basic (digamma.cuh); every sum the host takes left to right
// (prior_learning.ordered_sum, and the per-topic sums of np.bincount) is taken here by one
// thread, left to right; only terms whose order does not matter (each its own value) are
// computed in parallel. The _rn intrinsics keep nvcc from fusing a multiply and an add.

#include "digamma.cuh"

namespace gpulda {

constexpr int kPriorBlock = 512;

// v[0] + v[1] + ... + v[n - 1], left to right (0.0 for none): prior_learning.ordered_sum.
__device__ double ordered_sum(const double* __restrict__ v, int n) {
  if (n == 0) return 0.0;
  double acc = v[0];
  for (int i = 1; i < n; ++i) acc = __dadd_rn(acc, v[i]);
  return acc;
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
// [scratch] n_pairs + n_lengths + K float64.
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
  __shared__ double s_total;
  __shared__ double s_denominator;
  __shared__ int s_more;
  const int tid = threadIdx.x;
  for (int iteration = 0; iteration < max_iterations; ++iteration) {
    if (tid == 0) s_total = ordered_sum(alpha, n_topics);
    __syncthreads();
    // Terms of their own, in parallel: each document length's and each pair's digamma gain.
    const double total = s_total;
    const double psi_total = digamma_basic(total);
    for (int j = tid; j < n_lengths; j += blockDim.x) {
      length_gain[j] =
          __dmul_rn(n_length[j], __dsub_rn(digamma_basic(__dadd_rn(length[j], total)), psi_total));
    }
    for (int i = tid; i < n_pairs; i += blockDim.x) {
      const double a = alpha[pair_topic[i]];
      pair_gain[i] = __dmul_rn(
          pair_docs[i], __dsub_rn(digamma_basic(__dadd_rn(pair_count[i], a)), digamma_basic(a)));
    }
    __syncthreads();
    // The sums, each by one thread in the host's order: the denominator over the lengths, and
    // per topic the table's running sums (table_numerator) plus its pairs (np.bincount).
    if (tid == 0) {
      s_denominator = ordered_sum(length_gain, n_lengths);
      s_more = 0;
    }
    for (int k = tid; k < n_topics; k += blockDim.x) {
      const double a = alpha[k];
      const double* row = table + static_cast<size_t>(k) * n_counts;
      double gain = 0.0;
      double numerator = 0.0;
      for (int c = 0; c < n_counts; ++c) {
        gain = __dadd_rn(gain, __ddiv_rn(1.0, __dadd_rn(a, static_cast<double>(c))));
        numerator = __dadd_rn(numerator, __dmul_rn(row[c], gain));
      }
      double pairs = 0.0;
      for (int i = pair_start[k]; i < pair_start[k + 1]; ++i)
        pairs = __dadd_rn(pairs, pair_gain[i]);
      gains[k] = __dadd_rn(numerator, pairs);
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
    // Two sums in two warps at once, each left to right.
    if (tid == 0) s_numerator = ordered_sum(cell_gain, n_values);
    if (tid == 32 || (blockDim.x <= 32 && tid == 0)) {
      s_total_sum = ordered_sum(total_gain, n_topics);
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
