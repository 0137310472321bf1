// Mini-batched sweeps (Moon, thesis ch. 2; doc/algorithm.md, "Mini-batched sweeps"): the tokens of
// one batch draw from the counts of the batch's start, then B and the topic totals take the
// batch's new topics before the next batch draws. Three kernels per batch, launched in turn on
// one stream so each sees the previous one's writes:
//   batch_doc_side  A rows and dnt = (A + alpha) / D of the batch's documents;
//   draw_batch      every token's new topic, into z_new (B, totals and z_can are only read);
//   apply_batch     B and the totals move each changed token's weight, z_can takes z_new.
// The batch's tokens are laid out in segmented CSR (vocabulary panel, then document, then
// canonical order: _corpus.segmented_csr), so the warps of a block read the B rows of one panel's
// words and the dnt rows of few documents.

#include "philox.cuh"
#include "warp.cuh"

namespace gpulda {

// Blocks of the three kernels (kBatchBlock, constants.cuh) are whole warps.
static_assert(kBatchBlock % kWarp == 0, "batch blocks are whole warps");

// p_k of the rule, k != z: float32(dnt * float32(B + beta32)), no fused multiply-add.
__device__ __forceinline__ float plain_term(const float* __restrict__ dnt_row,
                                            const float* __restrict__ b_row, int k, float beta32) {
  return __fmul_rn(dnt_row[k], __fadd_rn(b_row[k], beta32));
}

// p_z of the rule: the token's own weight out of A, B and D, in float64.
__device__ __forceinline__ float own_term(float a, float b, double alpha_z, double denom_z,
                                          double beta, float w) {
  const double wd = static_cast<double>(w);
  const double doc = __dadd_rn(__dsub_rn(static_cast<double>(a), wd), alpha_z);
  const double word = __dadd_rn(__dsub_rn(static_cast<double>(b), wd), beta);
  return __double2float_rn(__dmul_rn(__ddiv_rn(doc, __dsub_rn(denom_z, wd)), word));
}

template <typename TopicT>
__device__ __forceinline__ void draw_batch_impl(
    const unsigned* __restrict__ tok, const int* __restrict__ doc, const int* __restrict__ word,
    long long p0, long long p1, int d0, const float* __restrict__ weight, long long t0,
    const float* __restrict__ a_batch, const float* __restrict__ dnt, const float* __restrict__ B,
    const double* __restrict__ totals, const double* __restrict__ alpha, double beta, double v_beta,
    int n_topics, unsigned seed, unsigned iteration, unsigned stream, unsigned sweep,
    const TopicT* __restrict__ z_can, TopicT* __restrict__ z_new) {
  const int lane = lane_id();
  const long long warp = (static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp;
  const long long n_warps = static_cast<long long>(gridDim.x) * blockDim.x / kWarp;
  const float beta32 = __double2float_rn(beta);
  const int m = (n_topics + kWarp - 1) / kWarp;
  for (long long p = p0 + warp; p < p1; p += n_warps) {
    const unsigned t = tok[p];
    const int d = doc[p] - d0;
    const int v = word[p];
    const int z = static_cast<int>(z_can[t]);
    const float w = weight != nullptr ? weight[t] : 1.0f;
    const float* dnt_row = dnt + static_cast<size_t>(d) * n_topics;
    const float* b_row = B + static_cast<size_t>(v) * n_topics;
    const float own = own_term(a_batch[static_cast<size_t>(d) * n_topics + z], b_row[z], alpha[z],
                               __dadd_rn(totals[z], v_beta), beta, w);
    // Steps 1-2: this lane's topics summed in order, then the scan over lanes.
    float s = 0.0f;
    for (int j = 0; j < m; ++j) {
      const int k = j * kWarp + lane;
      if (k < n_topics) s = __fadd_rn(s, k == z ? own : plain_term(dnt_row, b_row, k, beta32));
    }
    const float c = warp_inclusive_scan(s);
    const float total = __shfl_sync(kFullMask, c, kWarp - 1);
    // Step 3.
    const float u =
        bits_to_uniform(token_bits(seed, iteration, stream, t0 + static_cast<long long>(t), sweep));
    const float x = __fmul_rn(u, total);
    // Step 4.
    int hit = warp_first(c > x);
    if (hit < 0) hit = kWarp - 1 - __clz(__ballot_sync(kFullMask, s > 0.0f));
    if (hit < 0) hit = kWarp - 1;
    const float before = __shfl_sync(kFullMask, c, hit > 0 ? hit - 1 : 0);
    // Step 5, on the chosen lane alone.
    if (lane == hit) {
      float run = hit > 0 ? before : 0.0f;
      int found = -1, last = -1;
      for (int j = 0; j < m; ++j) {
        const int k = j * kWarp + lane;
        if (k >= n_topics) break;
        const float term = k == z ? own : plain_term(dnt_row, b_row, k, beta32);
        run = __fadd_rn(run, term);
        if (term > 0.0f) last = k;
        if (run > x) {
          found = k;
          break;
        }
      }
      if (found < 0) found = last >= 0 ? last : n_topics - 1;
      z_new[t] = static_cast<TopicT>(found);
    }
  }
}

template <typename TopicT>
__device__ __forceinline__ void apply_batch_impl(const unsigned* __restrict__ tok,
                                                 const int* __restrict__ word, long long p0,
                                                 long long p1, const float* __restrict__ weight,
                                                 int n_topics, const TopicT* __restrict__ z_new,
                                                 TopicT* __restrict__ z_can, float* __restrict__ B,
                                                 double* __restrict__ totals) {
  extern __shared__ double s_delta[];
  for (int k = threadIdx.x; k < n_topics; k += blockDim.x) s_delta[k] = 0.0;
  __syncthreads();
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long p = p0 + static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; p < p1;
       p += stride) {
    const unsigned t = tok[p];
    const int now = static_cast<int>(z_new[t]);
    const int was = static_cast<int>(z_can[t]);
    if (now == was) continue;
    const float w = weight != nullptr ? weight[t] : 1.0f;
    float* row = B + static_cast<size_t>(word[p]) * n_topics;
    atomicAdd(row + was, -w);
    atomicAdd(row + now, w);
    atomicAdd(s_delta + was, -static_cast<double>(w));
    atomicAdd(s_delta + now, static_cast<double>(w));
    z_can[t] = static_cast<TopicT>(now);
  }
  __syncthreads();
  for (int k = threadIdx.x; k < n_topics; k += blockDim.x)
    if (s_delta[k] != 0.0) atomicAdd(totals + k, s_delta[k]);
}

}  // namespace gpulda

// ---------------------------------------------------------------------------------------------
// batch_doc_side_{u16,i32}: one block per document of the batch (documents d0 + blockIdx.x).
// Launch: grid n_batch_docs, block kBatchBlock, dynamic shared memory n_topics * 4 bytes.
// [in] doc_off, doc_len (per document of the chunk: first canonical slot minus t0, tokens),
//      z_can (canonical minus t0), weight (canonical minus t0, or nullptr), totals (K float64),
//      alpha (K float64), v_beta = V * beta.
// [out] a_batch[i, k] = A[d0 + i, k] (float32),
//      dnt[i, k] = float32((A + alpha_k) / (totals_k + v_beta)).
// NumPy: sklearn_gpulda/backends/numpy/minibatch_rule.py:batch_doc_side of the rows
//        np.bincount(z_can[doc tokens], weight).
// Float: the histogram adds weights in arrival order: exact for integer counts, last-bit
//      order-dependent for fractional weights.
// ---------------------------------------------------------------------------------------------
// draw_batch_{u16,i32}: one warp per token of layout positions p0..p1 (grid-strided).
// Launch: grid any, block kBatchBlock, no dynamic shared memory.
// [in] tok (canonical index minus t0), doc (document), word (relabelled) per layout position;
//      a_batch, dnt (rows of documents d0..), B (V x K float32), totals, alpha, beta, v_beta,
//      z_can (current topics); the token's uniform is keyed by t0 + tok[p] (its canonical index).
// [out] z_new[tok[p]] = the drawn topic (only the batch's tokens are written).
// NumPy: sklearn_gpulda/backends/numpy/minibatch_rule.py:draw_batch, bit for bit (every float32
//        operation rounded as written).
// ---------------------------------------------------------------------------------------------
// apply_batch_{u16,i32}: thread per layout position p0..p1 (grid-strided).
// Launch: grid any, block kBatchBlock, dynamic shared memory n_topics * 8 bytes.
// [in] tok, word, weight, z_new. [in/out] z_can (takes z_new), B and totals (each changed token's
//      weight moved from its old topic to its new one; totals through a per-block float64 sum).
// NumPy: sklearn_gpulda/backends/numpy/minibatch.py:NumpyMinibatchSampler.sweep, its np.add.at
//        updates. Exact for integer counts.
// ---------------------------------------------------------------------------------------------
#define GPULDA_MINIBATCH(SUFFIX, TOPIC_T)                                                          \
  extern "C" __global__ void __launch_bounds__(gpulda::kBatchBlock) batch_doc_side_##SUFFIX(       \
      const int* __restrict__ doc_off, const int* __restrict__ doc_len, int d0,                    \
      const TOPIC_T* __restrict__ z_can, const float* __restrict__ weight,                         \
      const double* __restrict__ totals, const double* __restrict__ alpha, double v_beta,          \
      int n_topics, float* __restrict__ a_batch, float* __restrict__ dnt) {                        \
    extern __shared__ float s_hist[];                                                              \
    for (int k = threadIdx.x; k < n_topics; k += blockDim.x) s_hist[k] = 0.0f;                     \
    __syncthreads();                                                                               \
    const int d = d0 + static_cast<int>(blockIdx.x);                                               \
    const int off = doc_off[d], len = doc_len[d];                                                  \
    for (int i = threadIdx.x; i < len; i += blockDim.x)                                            \
      atomicAdd(s_hist + static_cast<int>(z_can[off + i]),                                         \
                weight != nullptr ? weight[off + i] : 1.0f);                                       \
    __syncthreads();                                                                               \
    const size_t row = static_cast<size_t>(blockIdx.x) * n_topics;                                 \
    for (int k = threadIdx.x; k < n_topics; k += blockDim.x) {                                     \
      const float a = s_hist[k];                                                                   \
      a_batch[row + k] = a;                                                                        \
      dnt[row + k] = __double2float_rn(                                                            \
          __ddiv_rn(__dadd_rn(static_cast<double>(a), alpha[k]), __dadd_rn(totals[k], v_beta)));   \
    }                                                                                              \
  }                                                                                                \
  extern "C" __global__ void __launch_bounds__(gpulda::kBatchBlock) draw_batch_##SUFFIX(           \
      const unsigned* __restrict__ tok, const int* __restrict__ doc, const int* __restrict__ word, \
      long long p0, long long p1, int d0, const float* __restrict__ weight, long long t0,          \
      const float* __restrict__ a_batch, const float* __restrict__ dnt,                            \
      const float* __restrict__ B, const double* __restrict__ totals,                              \
      const double* __restrict__ alpha, double beta, double v_beta, int n_topics, unsigned seed,   \
      unsigned iteration, unsigned stream, unsigned sweep, const TOPIC_T* __restrict__ z_can,      \
      TOPIC_T* __restrict__ z_new) {                                                               \
    gpulda::draw_batch_impl<TOPIC_T>(tok, doc, word, p0, p1, d0, weight, t0, a_batch, dnt, B,      \
                                     totals, alpha, beta, v_beta, n_topics, seed, iteration,       \
                                     stream, sweep, z_can, z_new);                                 \
  }                                                                                                \
  extern "C" __global__ void __launch_bounds__(gpulda::kBatchBlock) apply_batch_##SUFFIX(          \
      const unsigned* __restrict__ tok, const int* __restrict__ word, long long p0, long long p1,  \
      const float* __restrict__ weight, int n_topics, const TOPIC_T* __restrict__ z_new,           \
      TOPIC_T* __restrict__ z_can, float* __restrict__ B, double* __restrict__ totals) {           \
    gpulda::apply_batch_impl<TOPIC_T>(tok, word, p0, p1, weight, n_topics, z_new, z_can, B,        \
                                      totals);                                                     \
  }
GPULDA_MINIBATCH(u16, unsigned short)
GPULDA_MINIBATCH(i32, int)
