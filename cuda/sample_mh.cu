// A Metropolis-Hastings E-step (issue 37, item 3): each token runs the short chain of
// sklearn_gpulda/backends/numpy/mh_rule.py (doc/algorithm.md, "A Metropolis-Hastings draw") from
// its current topic, and the kernels below rebuild the dense counts from the new topics. A GPU
// prototype of the O(1) sampler, to measure whether it reaches a likelihood sooner than the exact
// rule at large K; no estimator setting reaches it yet.
//
// Draws are the reference's bit for bit: the same Philox words (counter (token, kStreamMh, step),
// key (seed, iteration)), the same conversions of them to uniforms, indices and topics, and the
// same float64 arithmetic in the same order, written with _rn intrinsics so that nvcc cannot fuse
// a product and a sum into an FMA the NumPy reference does not have.
//
// The chain's target for a token of document d and word v with current topic z:
//   pi(k) = doc(k) * word(k)
//   doc(k)  = (A[d,k] - [k = z]) + alpha_k                                       (float64)
//   word(k) = float32((B[v,k] + beta) / denom[k])              for k != z        (Bhat)
//           = float32(((B[v,z] - 1) + beta) / (denom[z] - 1))  for k == z        (own_bhat)
//   prop(k) = (B[v,k] - [k = z]) + beta      the word proposal's weight          (float64)
// with denom[k] = n_k + V beta. A cycle is a document step (step 2c) and a word step (2c + 1).

#include "constants.cuh"
#include "philox.cuh"

namespace gpulda {

static_assert(kMhBlock % kWarp == 0, "MH blocks must be whole warps");

// Philox word as the reference's float64 uniform: the float32 uniform widened (exact).
__device__ __forceinline__ double mh_uniform(unsigned bits) {
  return static_cast<double>(bits_to_uniform(bits));
}

// mh_rule._other: a uniform index among n_others items that skips own_rank. bits < 2^32, so
// bits % n equals bits for any n >= 2^32 and a 32-bit remainder serves every other n.
__device__ __forceinline__ long long mh_other(unsigned bits, long long n_others,
                                              long long own_rank) {
  long long j;
  if (n_others > 0xffffffffLL)
    j = bits;
  else
    j = bits % static_cast<unsigned>(n_others > 0 ? n_others : 1);
  return j + (j >= own_rank ? 1 : 0);
}

// np.searchsorted(cumsum, x, side='right') capped at n - 1: the first i with cumsum[i] > x.
__device__ __forceinline__ int mh_alpha_topic(const double* __restrict__ cumsum, int n, double x) {
  int lo = 0, hi = n;
  while (lo < hi) {
    const int mid = (lo + hi) >> 1;
    if (cumsum[mid] <= x)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < n - 1 ? lo : n - 1;
}

// What one token's chain reads of the frozen state, and pi's factors at a topic.
template <typename CountT>
struct MhTarget {
  const CountT* a_row;  // A[d]
  const float* b_row;   // B[v]
  const double* denom;
  const double* alpha;
  double beta;
  int z;
  double own;  // word(z)

  __device__ __forceinline__ double word(int k) const {
    if (k == z) return own;
    const double r = __ddiv_rn(__dadd_rn(static_cast<double>(b_row[k]), beta), denom[k]);
    return static_cast<double>(__double2float_rn(r));
  }
  __device__ __forceinline__ double doc(int k) const {
    const double a = __dsub_rn(static_cast<double>(a_row[k]), k == z ? 1.0 : 0.0);
    return __dadd_rn(a, alpha[k]);
  }
  __device__ __forceinline__ double proposal(int k) const {
    return __dadd_rn(__dsub_rn(static_cast<double>(b_row[k]), k == z ? 1.0 : 0.0), beta);
  }
};

// sample_mh_<topic>_<count>: every token's chain for n_cycles cycles.
//   grid: ceil(n_tokens / kMhBlock) blocks of kMhBlock threads (any grid works: grid-stride).
//   [in]  z_in (n_tokens,)       current topics, canonical (document-major) order; proposals
//                                read other tokens' topics here, so z_out must not alias it
//   [in]  doc, word (n_tokens,)  each token's document and word
//   [in]  doc_ptr (n_docs + 1,)  canonical offsets of the documents
//   [in]  by_word (n_tokens,)    canonical ids of the tokens sorted by word (stable)
//   [in]  word_ptr (V + 1,)      offsets of the words in by_word
//   [in]  word_rank (n_tokens,)  each token's place among its word's tokens in by_word
//   [in]  A (n_docs x K), B (V x K) dense counts of z_in; denom (K,) n_k + V beta (float64)
//   [in]  alpha (K,), alpha_cumsum (K,) np.cumsum(alpha) (float64); k_beta = K * beta
//   [out] z_out (n_tokens,)      new topics
//   t0: canonical index of token 0 (the Philox counter); seed, iteration: the Philox key.
// NumPy: mh_rule.draw_topics_mh(state, doc, word, seed, iteration, t0, n_cycles).
// Float: every operation is the reference's float64 one in its order; no FMA.
template <typename TopicT, typename CountT>
__device__ __forceinline__ void sample_mh(
    long long n_tokens, long long t0, int n_topics, int n_cycles, unsigned seed, unsigned iteration,
    const TopicT* __restrict__ z_in, const int* __restrict__ doc, const int* __restrict__ word,
    const long long* __restrict__ doc_ptr, const long long* __restrict__ by_word,
    const long long* __restrict__ word_ptr, const long long* __restrict__ word_rank,
    const CountT* __restrict__ A, const float* __restrict__ B, const double* __restrict__ denom,
    const double* __restrict__ alpha, const double* __restrict__ alpha_cumsum, double beta,
    double k_beta, TopicT* __restrict__ z_out) {
  const double alpha_sum = alpha_cumsum[n_topics - 1];
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long t = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; t < n_tokens;
       t += stride) {
    const int d = doc[t];
    const int v = word[t];
    const int z = static_cast<int>(z_in[t]);
    const long long d0 = doc_ptr[d];
    const long long doc_others = doc_ptr[d + 1] - d0 - 1;
    const long long w0 = word_ptr[v];
    const long long word_others = word_ptr[v + 1] - w0 - 1;
    const long long doc_rank = t - d0;
    const long long rank = word_rank[t];

    MhTarget<CountT> target;
    target.a_row = A + static_cast<size_t>(d) * static_cast<size_t>(n_topics);
    target.b_row = B + static_cast<size_t>(v) * static_cast<size_t>(n_topics);
    target.denom = denom;
    target.alpha = alpha;
    target.beta = beta;
    target.z = z;
    {
      const double num = __dadd_rn(__dsub_rn(static_cast<double>(target.b_row[z]), 1.0), beta);
      target.own = static_cast<double>(__double2float_rn(__ddiv_rn(num, __dsub_rn(denom[z], 1.0))));
    }

    const unsigned long long token = static_cast<unsigned long long>(t0 + t);
    const unsigned t_lo = static_cast<unsigned>(token);
    const unsigned t_hi = static_cast<unsigned>(token >> 32);
    // pi's factors and the word proposal at the chain's topic k, carried across steps.
    int k = z;
    double word_k = target.own;
    double doc_k = target.doc(k);
    double prop_k = target.proposal(k);
    const double doc_mass = __dadd_rn(static_cast<double>(doc_others), alpha_sum);
    const double word_mass = __dadd_rn(static_cast<double>(word_others), k_beta);
    for (int cycle = 0; cycle < n_cycles; ++cycle) {
      const unsigned step = 2u * static_cast<unsigned>(cycle);
      // Document step: another token's topic of the document, or a draw from alpha.
      Philox4 r = philox4x32_10(t_lo, t_hi, kStreamMh, step, seed, iteration);
      int p;
      if (__dmul_rn(mh_uniform(r.x0), doc_mass) < static_cast<double>(doc_others))
        p = static_cast<int>(z_in[d0 + mh_other(r.x1, doc_others, doc_rank)]);
      else
        p = mh_alpha_topic(alpha_cumsum, n_topics, __dmul_rn(mh_uniform(r.x3), alpha_sum));
      {
        const double word_p = target.word(p);
        if (mh_uniform(r.x2) < __ddiv_rn(word_p, word_k)) {
          k = p;
          word_k = word_p;
          doc_k = target.doc(p);
          prop_k = target.proposal(p);
        }
      }
      // Word step: another token's topic of the word, or a uniform topic.
      r = philox4x32_10(t_lo, t_hi, kStreamMh, step + 1u, seed, iteration);
      if (__dmul_rn(mh_uniform(r.x0), word_mass) < static_cast<double>(word_others))
        p = static_cast<int>(z_in[by_word[w0 + mh_other(r.x1, word_others, rank)]]);
      else
        p = bits_to_topic(r.x3, static_cast<unsigned>(n_topics));
      {
        const double doc_p = target.doc(p);
        const double word_p = target.word(p);
        const double prop_p = target.proposal(p);
        const double num = __dmul_rn(__dmul_rn(doc_p, word_p), prop_k);
        const double den = __dmul_rn(__dmul_rn(doc_k, word_k), prop_p);
        if (mh_uniform(r.x2) < __ddiv_rn(num, den)) {
          k = p;
          word_k = word_p;
          doc_k = doc_p;
          prop_k = prop_p;
        }
      }
    }
    z_out[t] = static_cast<TopicT>(k);
  }
}

// Count a dense table's increment: float32 counts stay exact below 2^24 per cell.
__device__ __forceinline__ void count_one(float* cell) { atomicAdd(cell, 1.0f); }
__device__ __forceinline__ void count_one(int* cell) { atomicAdd(cell, 1); }

// mh_count_<topic>_<count>: A[doc[t], z[t]] += 1, B[word[t], z[t]] += 1 and totals[z[t]] += 1
// for every token (integer counts: the order of the atomics changes nothing).
//   grid: any number of blocks of kMhBlock threads (grid-stride); dynamic shared memory
//   4 * min(K, kMhSharedTotals) bytes: where K <= kMhSharedTotals a block sums its totals there
//   first (a small K would otherwise make every token's atomic wait on the same few words).
//   [in]  z, doc, word (n_tokens,)
//   [in,out] A (n_docs x K), B (V x K), totals (K,): zeroed by the caller.
// NumPy: np.add.at(A, (doc, z), 1); np.add.at(B, (word, z), 1); totals = np.bincount(z, K).
template <typename TopicT, typename CountT>
__device__ __forceinline__ void mh_count(long long n_tokens, int n_topics,
                                         const TopicT* __restrict__ z, const int* __restrict__ doc,
                                         const int* __restrict__ word, CountT* __restrict__ A,
                                         float* __restrict__ B,
                                         unsigned long long* __restrict__ totals) {
  extern __shared__ unsigned s_totals[];
  const bool shared = n_topics <= kMhSharedTotals;
  if (shared) {
    for (int k = threadIdx.x; k < n_topics; k += blockDim.x) s_totals[k] = 0u;
    __syncthreads();
  }
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long t = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; t < n_tokens;
       t += stride) {
    const unsigned k = static_cast<unsigned>(z[t]);
    count_one(A + static_cast<size_t>(doc[t]) * static_cast<size_t>(n_topics) + k);
    count_one(B + static_cast<size_t>(word[t]) * static_cast<size_t>(n_topics) + k);
    if (shared)
      atomicAdd(s_totals + k, 1u);
    else
      atomicAdd(totals + k, 1ull);
  }
  if (shared) {
    __syncthreads();
    for (int k = threadIdx.x; k < n_topics; k += blockDim.x)
      if (s_totals[k]) atomicAdd(totals + k, static_cast<unsigned long long>(s_totals[k]));
  }
}

}  // namespace gpulda

using gpulda::mh_count;
using gpulda::sample_mh;

#define GPULDA_MH_KERNELS(SUFFIX, TopicT, CountT)                                                 \
  extern "C" __global__ void __launch_bounds__(gpulda::kMhBlock)                                  \
      sample_mh_##SUFFIX(long long n_tokens, long long t0, int n_topics, int n_cycles,            \
                         unsigned seed, unsigned iteration, const TopicT* z_in, const int* doc,   \
                         const int* word, const long long* doc_ptr, const long long* by_word,     \
                         const long long* word_ptr, const long long* word_rank, const CountT* A,  \
                         const float* B, const double* denom, const double* alpha,                \
                         const double* alpha_cumsum, double beta, double k_beta, TopicT* z_out) { \
    sample_mh<TopicT, CountT>(n_tokens, t0, n_topics, n_cycles, seed, iteration, z_in, doc, word, \
                              doc_ptr, by_word, word_ptr, word_rank, A, B, denom, alpha,          \
                              alpha_cumsum, beta, k_beta, z_out);                                 \
  }                                                                                               \
  extern "C" __global__ void __launch_bounds__(gpulda::kMhBlock)                                  \
      mh_count_##SUFFIX(long long n_tokens, int n_topics, const TopicT* z, const int* doc,        \
                        const int* word, CountT* A, float* B, unsigned long long* totals) {       \
    mh_count<TopicT, CountT>(n_tokens, n_topics, z, doc, word, A, B, totals);                     \
  }

GPULDA_MH_KERNELS(u16_f32, unsigned short, float)
GPULDA_MH_KERNELS(u16_i32, unsigned short, int)
GPULDA_MH_KERNELS(i32_f32, int, float)
GPULDA_MH_KERNELS(i32_i32, int, int)

// mh_denominators: denom[k] = n_k + V beta in float64, as WordTables.from_counts adds them
// (v_beta = V * beta, formed on the host as the reference forms it).
//   grid: ceil(K / kMhBlock) blocks of kMhBlock threads.
//   [in] totals (K,)   [out] denom (K,)
extern "C" __global__ void __launch_bounds__(gpulda::kMhBlock)
    mh_denominators(int n_topics, const unsigned long long* totals, double v_beta, double* denom) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n_topics) denom[k] = __dadd_rn(static_cast<double>(totals[k]), v_beta);
}
