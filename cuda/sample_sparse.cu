// E-step of ESCA on one PDOW chunk (SaberLDA 3.1.4, 3.2, 3.4): a block owns one work item (a word,
// or a slice of a frequent word's tokens), builds that word's Bhat row and W-ary tree in shared
// memory, and its warps draw the item's tokens one warp per token. Work items are handed out by an
// atomic counter in decreasing word frequency, so the large items start first and small ones fill
// the tail. Also here: the initial draws (stream 0 / 2) and the training log-likelihood, which
// reuses the sampler's first pass.

#include "entry.cuh"
#include "philox.cuh"
#include "tree.cuh"
#include "warp.cuh"

namespace gpulda {

// Blocks of 256 threads (SaberLDA 4.2 found 256 best) while the word's table is small; the host
// launches 512 or 1,024 when the table's shared memory would leave fewer than 64 warps per SM,
// because the per-token gather of A rows needs many warps in flight to hide its latency.
constexpr int kSampleBlock = 256;
constexpr int kSampleBlockMax = 1024;
static_assert(kSampleBlock % kWarp == 0, "sampler block must be whole warps");
static_assert(kSampleBlock >= kWarp * 2, "tree build assumes several warps per block");

// One work item: tokens [begin, end) of the chunk's PDOW order, all of relabelled word `word`;
// `batch` numbers the item's first 32-token batch among all items (log-likelihood partials).
struct Item {
  int word, begin, end, batch;
};
static_assert(sizeof(Item) == 16, "Item must match the host's (n_items, 4) int32 array");

struct BhatSource {
  const float* counts;   // B, V x K (training), or nullptr
  const double* denom;   // n[k] + V * beta, K doubles
  const float* fixed;    // Bhat given (mini-batch with topics fixed), or nullptr
  double beta;
};

// Fills the leaves with Bhat[v, :]: Eq. (2) of SaberLDA divided in float64 and rounded once, as
// the oracle does, or copied from a fixed table.
__device__ __forceinline__ void load_bhat_row(float* leaf, const BhatSource& src, int v, int n_topics) {
  const size_t row = static_cast<size_t>(v) * n_topics;
  if (src.fixed != nullptr) {
    for (int k = threadIdx.x; k < n_topics; k += blockDim.x) leaf[k] = src.fixed[row + k];
  } else {
    for (int k = threadIdx.x; k < n_topics; k += blockDim.x)
      leaf[k] = static_cast<float>(__ddiv_rn(static_cast<double>(src.counts[row + k]) + src.beta, src.denom[k]));
  }
}

template <bool kPacked>
__device__ __forceinline__ float entry_mass(typename AEntry<kPacked>::T e, const float* leaf) {
  // __fmul_rn: the product must round on its own, as in the oracle's A * Bhat, never fused.
  return __fmul_rn(AEntry<kPacked>::count(e), leaf[AEntry<kPacked>::topic(e)]);
}

// First pass over A[d] (entries in the lane-segment layout of entry.cuh): lane l sums its
// segment (entries l*m .. l*m+m-1, m = ceil(len / 32)) in order with no shuffles, then one warp
// scan joins the segments. Returns S; `seg_end` is the running sum at the end of the lane's
// segment (a plain reduction per chunk would need a scan per 32 entries: ~5x the instructions,
// and the sampler is bound by instruction issue, not by the bytes of A).
template <bool kPacked>
__device__ __forceinline__ float sparse_mass(const typename AEntry<kPacked>::T* __restrict__ ent, int len,
                                             const float* leaf, float& seg_end) {
  using E = AEntry<kPacked>;
  const int lane = lane_id();
  const int m = segment_length(len);
  const int mine = max(0, min(m, len - lane * m));  // entries in this lane's segment
  float t = 0.0f;
  int j = 0;
  for (; j + 4 <= mine; j += 4) {
    const typename E::T e0 = ent[(j + 0) * kWarp + lane], e1 = ent[(j + 1) * kWarp + lane];
    const typename E::T e2 = ent[(j + 2) * kWarp + lane], e3 = ent[(j + 3) * kWarp + lane];
    t = __fadd_rn(t, entry_mass<kPacked>(e0, leaf));
    t = __fadd_rn(t, entry_mass<kPacked>(e1, leaf));
    t = __fadd_rn(t, entry_mass<kPacked>(e2, leaf));
    t = __fadd_rn(t, entry_mass<kPacked>(e3, leaf));
  }
  for (; j < mine; ++j) t = __fadd_rn(t, entry_mass<kPacked>(ent[j * kWarp + lane], leaf));
  seg_end = warp_inclusive_scan(t);
  return __shfl_sync(kFullMask, seg_end, kWarp - 1);
}

// The two-branch draw of doc/algorithm.md for one token; warp-uniform arguments.
// Running sums: segment ends from the first pass; inside the chosen segment, the segment's start
// plus a warp scan of its entries (windows of 32). Where rounding leaves no entry of the segment
// above x, the segment's last entry is taken, as the contract takes K - 1 at the top.
template <bool kPacked>
__device__ __forceinline__ int draw_one(const typename AEntry<kPacked>::T* __restrict__ ent, int len, float u,
                                        float alpha, const float* leaf, const WordTree& tree) {
  using E = AEntry<kPacked>;
  const int lane = lane_id();
  float seg_end;
  const float s = sparse_mass<kPacked>(ent, len, leaf, seg_end);
  const float x = __fmul_rn(u, __fadd_rn(s, __fmul_rn(alpha, tree.total())));
  if (!(x < s)) return tree.search(__fdiv_rn(__fsub_rn(x, s), alpha));
  // The first non-empty segment ending above x holds the draw. Scan rounding can lift an empty
  // trailing segment's end above its predecessor's, hence the guard and the fallback to the
  // last non-empty segment.
  const int m = segment_length(len);
  int l = warp_first(lane * m < len && seg_end > x);
  if (l < 0) l = (len - 1) / m;
  float base = __shfl_sync(kFullMask, seg_end, l > 0 ? l - 1 : 0);
  if (l == 0) base = 0.0f;
  const int n_here = min(m, len - l * m);
  for (int w = 0; w < n_here; w += kWarp) {
    const int j = w + lane;
    const typename E::T e = j < n_here ? ent[j * kWarp + l] : E::zero();
    const float run = __fadd_rn(base, warp_inclusive_scan(j < n_here ? entry_mass<kPacked>(e, leaf) : 0.0f));
    const int hit = warp_first(j < n_here && run > x);
    if (hit >= 0) return __shfl_sync(kFullMask, E::topic(e), hit);
    const int last = min(kWarp, n_here - w) - 1;
    if (w + kWarp >= n_here) return __shfl_sync(kFullMask, E::topic(e), last);
    base = __shfl_sync(kFullMask, run, kWarp - 1);
  }
  return 0;  // unreachable: n_here >= 1
}

struct ChunkTokens {
  const unsigned* tok;  // canonical index minus t0, PDOW order
  const int* doc;       // document minus the chunk's first document, PDOW order
  const int2* a_row;    // per document: (offset into a_ent, number of non-zeros)
  const void* a_ent;    // AEntry<kPacked> entries, rows sorted by topic
  long long t0;         // canonical index of the chunk's first token
};

// Persistent-block loop over work items. `Body(item, tree, leaf)` handles one item's tokens.
template <typename Body>
__device__ __forceinline__ void for_each_item(const Item* __restrict__ items, int n_items, int* counter,
                                              const BhatSource& src, int n_topics, Body body) {
  extern __shared__ float smem[];
  float* leaf = smem;
  float* l2 = leaf + n_topics;
  float* l1 = l2 + tree_tiles(n_topics);
  __shared__ int s_item;
  for (;;) {
    if (threadIdx.x == 0) s_item = atomicAdd(counter, 1);
    __syncthreads();
    const int it = s_item;
    if (it >= n_items) break;
    const Item item = items[it];
    load_bhat_row(leaf, src, item.word, n_topics);
    __syncthreads();
    const WordTree tree = build_tree(leaf, l2, l1, n_topics);
    body(item, tree, leaf);
    __syncthreads();  // the next item overwrites the table and s_item
  }
}

template <typename TopicT, bool kPacked>
__device__ __forceinline__ void sample_tokens_impl(const Item* __restrict__ items, int n_items, int* counter,
                                                   ChunkTokens ch, BhatSource src, int n_topics, float alpha,
                                                   unsigned seed, unsigned iteration, unsigned stream,
                                                   unsigned sweep, TopicT* __restrict__ z) {
  const int lane = lane_id();
  const int warp = threadIdx.x / kWarp;
  const int n_warps = blockDim.x / kWarp;
  const auto* ent = static_cast<const typename AEntry<kPacked>::T*>(ch.a_ent);
  for_each_item(items, n_items, counter, src, n_topics, [&](const Item& item, const WordTree& tree, const float* leaf) {
    for (int b = item.begin + warp * kWarp; b < item.end; b += n_warps * kWarp) {
      // Lane j stages token b + j: its uniform and its A row, all 32 loads in flight together.
      const int p = b + lane;
      const bool valid = p < item.end;
      const unsigned t = valid ? ch.tok[p] : 0u;
      const int d = valid ? ch.doc[p] : 0;
      const float u = bits_to_uniform(token_bits(seed, iteration, stream, ch.t0 + t, sweep));
      const int2 row = valid ? ch.a_row[d] : make_int2(0, 0);
      const int n = min(kWarp, item.end - b);
      int mine = 0;
      for (int j = 0; j < n; ++j) {
        const int off = __shfl_sync(kFullMask, row.x, j);
        const int len = __shfl_sync(kFullMask, row.y, j);
        const float uj = __shfl_sync(kFullMask, u, j);
        const int k = draw_one<kPacked>(ent + off, len, uj, alpha, leaf, tree);
        if (lane == j) mine = k;
      }
      // PDOW-order store, coalesced. Storing to the token's canonical slot instead (folding the
      // shuffle in) was measured 2.4 ms slower per iteration than the separate scatter pass.
      if (valid) z[p] = static_cast<TopicT>(mine);
    }
  });
}

}  // namespace gpulda

using gpulda::BhatSource;
using gpulda::ChunkTokens;
using gpulda::Item;

// ---------------------------------------------------------------------------------------------
// sample_tokens_{u16,i32}: one E-step over a chunk.
// Launch: grid = any number of blocks (persistent; a multiple of the SM count), block = a
//   multiple of 64 threads up to kSampleBlockMax, dynamic shared memory = tree_floats(K) * 4 bytes (raise the kernel's
//   limit above 48 KB). `counter` must be zero at launch.
// [in]  items (n_items x 4 int32), tok, doc, a_row, a_ent: the chunk; B (V x K float32) with
//       denom (K float64) in training, or bhat (V x K float32) with topics fixed (B = nullptr).
// [out] z: new topic per PDOW position; nothing else is written, so A and B stay the old state.
// NumPy: z = draw_topics(doc, word, token_uniform(seed, iteration, stream, t, sweep), A, tables, alpha)
// Float: sums use __fadd_rn/__fmul_rn (no FMA contraction) so S rounds identically in both passes.
// ---------------------------------------------------------------------------------------------
#define GPULDA_SAMPLE(SUFFIX, TOPIC_T, PACKED)                                                              \
  extern "C" __global__ void __launch_bounds__(gpulda::kSampleBlockMax) sample_tokens_##SUFFIX(              \
      const Item* __restrict__ items, int n_items, int* counter, const unsigned* __restrict__ tok,           \
      const int* __restrict__ doc, const int2* __restrict__ a_row, const void* __restrict__ a_ent,           \
      long long t0, const float* __restrict__ B, const double* __restrict__ denom, double beta,               \
      const float* __restrict__ bhat, int n_topics, float alpha, unsigned seed, unsigned iteration,          \
      unsigned stream, unsigned sweep, TOPIC_T* __restrict__ z) {                                            \
    gpulda::sample_tokens_impl<TOPIC_T, PACKED>(items, n_items, counter, ChunkTokens{tok, doc, a_row, a_ent, t0},   \
                                        BhatSource{B, denom, bhat, beta}, n_topics, alpha, seed, iteration, \
                                        stream, sweep, z);                                                  \
  }
GPULDA_SAMPLE(u16_packed, unsigned short, true)
GPULDA_SAMPLE(u16_wide, unsigned short, false)
GPULDA_SAMPLE(i32_wide, int, false)

// ---------------------------------------------------------------------------------------------
// token_loglik_{packed,wide}: per-batch partial sums of w_t * log((S_t + alpha W[v]) / (N_d + K alpha)).
// Launch as sample_tokens. [out] partial[item.batch + i] for the item's i-th 32-token batch
// (every batch slot is written); alpha in float64 as the oracle's q. `weight` (canonical, minus t0) may be nullptr; doc_norm[d] is
// N_d + K * alpha in float64. NumPy: NumpyEngine.log_likelihood before the final sum.
// ---------------------------------------------------------------------------------------------
namespace gpulda {
template <bool kPacked>
__device__ __forceinline__ void token_loglik_impl(const Item* __restrict__ items, int n_items, int* counter,
                                                  const unsigned* __restrict__ tok, const int* __restrict__ doc,
                                                  const int2* __restrict__ a_row, const void* a_ent_v,
                                                  const float* __restrict__ weight, const double* __restrict__ doc_norm,
                                                  const BhatSource& src, int n_topics, double alpha,
                                                  double* __restrict__ partial) {
  const int lane = lane_id();
  const int warp = threadIdx.x / kWarp;
  const int n_warps = blockDim.x / kWarp;
  const auto* a_ent = static_cast<const typename AEntry<kPacked>::T*>(a_ent_v);
  for_each_item(items, n_items, counter, src, n_topics, [&](const Item& item, const WordTree& tree, const float* leaf) {
    const double q = alpha * static_cast<double>(tree.total());
    for (int b = item.begin + warp * kWarp; b < item.end; b += n_warps * kWarp) {
      const int p = b + lane;
      const bool valid = p < item.end;
      const int d = valid ? doc[p] : 0;
      const int2 row = valid ? a_row[d] : make_int2(0, 0);
      const float w = (valid && weight != nullptr) ? weight[tok[p]] : 1.0f;
      const int n = min(kWarp, item.end - b);
      double mine = 0.0;
      for (int j = 0; j < n; ++j) {
        const int off = __shfl_sync(kFullMask, row.x, j);
        const int len = __shfl_sync(kFullMask, row.y, j);
        float seg_end;
        const float s = sparse_mass<kPacked>(a_ent + off, len, leaf, seg_end);
        if (lane == j) mine = log(static_cast<double>(s) + q) - log(doc_norm[d]);
      }
      const double total = warp_sum(valid ? mine * static_cast<double>(w) : 0.0);
      if (lane == 0) partial[item.batch + (b - item.begin) / kWarp] = total;
    }
  });
}
}  // namespace gpulda

// Register note: __launch_bounds__(1024) alone makes ptxas budget 32 registers (two resident
// blocks), which fits the sampler exactly (8 x 256 threads x 32 = the SM's 64 K registers) but
// spills here; this kernel runs once per evaluation, so it takes 40 registers at lower occupancy.
#define GPULDA_LOGLIK(SUFFIX, PACKED)                                                                          \
  extern "C" __global__ void __launch_bounds__(gpulda::kSampleBlockMax, 1) token_loglik_##SUFFIX(                 \
      const Item* __restrict__ items, int n_items, int* counter, const unsigned* __restrict__ tok,               \
      const int* __restrict__ doc, const int2* __restrict__ a_row, const void* __restrict__ a_ent,               \
      const float* __restrict__ weight, const double* __restrict__ doc_norm, const float* __restrict__ B,        \
      const double* __restrict__ denom, double beta, int n_topics, double alpha, double* __restrict__ partial) { \
    gpulda::token_loglik_impl<PACKED>(items, n_items, counter, tok, doc, a_row, a_ent, weight, doc_norm,        \
                                      BhatSource{B, denom, nullptr, beta}, n_topics, alpha, partial);            \
  }
GPULDA_LOGLIK(packed, true)
GPULDA_LOGLIK(wide, false)

// ---------------------------------------------------------------------------------------------
// init_topics_{u16,i32}: z[p] = uniform topic of token t0 + tok[p] (stream 0, or 2 for a batch).
// Launch: 1-D, >= n threads. NumPy: _random.token_topic(seed, iteration, stream, t, K, sweep).
// ---------------------------------------------------------------------------------------------
#define GPULDA_INIT(SUFFIX, TOPIC_T)                                                                       \
  extern "C" __global__ void init_topics_##SUFFIX(const unsigned* __restrict__ tok, long long n,           \
                                                  long long t0, unsigned n_topics, unsigned seed,           \
                                                  unsigned iteration, unsigned stream, unsigned sweep,      \
                                                  TOPIC_T* __restrict__ z) {                                \
    const long long p = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;                     \
    if (p >= n) return;                                                                                     \
    const unsigned bits = gpulda::token_bits(seed, iteration, stream, t0 + tok[p], sweep);                  \
    z[p] = static_cast<TOPIC_T>(gpulda::bits_to_topic(bits, n_topics));                                     \
  }
GPULDA_INIT(u16, unsigned short)
GPULDA_INIT(i32, int)

// ---------------------------------------------------------------------------------------------
// philox_words: the four Philox4x32-10 output words for n counters (tests only).
// Launch: 1-D, >= n threads. [in] ctr (n x 4 uint32); [out] out (n x 4 uint32).
// ---------------------------------------------------------------------------------------------
extern "C" __global__ void philox_words(const uint4* __restrict__ ctr, long long n, unsigned k0, unsigned k1,
                                        uint4* __restrict__ out) {
  const long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const uint4 c = ctr[i];
  const gpulda::Philox4 r = gpulda::philox4x32_10(c.x, c.y, c.z, c.w, k0, k1);
  out[i] = make_uint4(r.x0, r.x1, r.x2, r.x3);
}

// ---------------------------------------------------------------------------------------------
// draw_fixed_row_{packed,wide}: the sampler on one fixed (A row, Bhat row) pair for n uniforms (chi-square
// tests). Launch: grid any, block kSampleBlock, dynamic shared tree_floats(K) * 4 bytes; one warp
// per uniform. [in] ent (len entries), bhat (K), u (n); [out] out (n).
// ---------------------------------------------------------------------------------------------
#define GPULDA_FIXED_ROW(SUFFIX, PACKED)                                                                      \
  extern "C" __global__ void __launch_bounds__(gpulda::kSampleBlock) draw_fixed_row_##SUFFIX(                  \
      const void* __restrict__ ent_v, int len, const float* __restrict__ bhat, int n_topics, float alpha,      \
      const float* __restrict__ u, long long n, int* __restrict__ out) {                                        \
    using namespace gpulda;                                                                                     \
    extern __shared__ float smem[];                                                                             \
    const auto* ent = static_cast<const typename AEntry<PACKED>::T*>(ent_v);                                    \
    float* leaf = smem;                                                                                         \
    float* l2 = leaf + n_topics;                                                                                \
    float* l1 = l2 + tree_tiles(n_topics);                                                                      \
    for (int k = threadIdx.x; k < n_topics; k += blockDim.x) leaf[k] = bhat[k];                                 \
    __syncthreads();                                                                                            \
    const WordTree tree = build_tree(leaf, l2, l1, n_topics);                                                   \
    const long long warps = static_cast<long long>(gridDim.x) * (blockDim.x / kWarp);                           \
    for (long long i = blockIdx.x * static_cast<long long>(blockDim.x / kWarp) + threadIdx.x / kWarp; i < n;    \
         i += warps) {                                                                                          \
      const int k = draw_one<PACKED>(ent, len, u[i], alpha, leaf, tree);                                        \
      if (lane_id() == 0) out[i] = k;                                                                           \
    }                                                                                                           \
  }
GPULDA_FIXED_ROW(packed, true)
GPULDA_FIXED_ROW(wide, false)
