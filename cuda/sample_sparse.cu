// E-step of ESCA on one PDOW chunk (SaberLDA 3.1.4, 3.2, 3.4): a block owns one work item (a word,
// or a slice of a frequent word's tokens), builds that word's Bhat row and W-ary tree in shared
// memory, and its warps draw the item's tokens one warp per token. Work items are handed out by an
// atomic counter in decreasing word frequency, so the large items start first and small ones fill
// the tail. Also here: the initial draws (stream 0 / 2) and the training log-likelihood, which
// reuses the sampler's first pass.

#include "device_word.cuh"
#include "entry.cuh"
#include "philox.cuh"
#include "sparse_draw.cuh"
#include "tree.cuh"
#include "warp.cuh"

namespace gpulda {

// Blocks of kSampleBlock threads while the word's table is small; the host launches larger ones
// (up to 1,024) when the table's shared memory would leave fewer warps per SM, because the
// per-token gather of A rows needs many warps in flight to hide its latency.
static_assert(kSampleBlock % kWarp == 0, "sampler block must be whole warps");
static_assert(kSampleBlock >= kWarp * 2, "tree build assumes several warps per block");
// One work item: tokens [begin, end) of the chunk's PDOW order, all of relabelled word `word`;
// `batch` numbers the item's first 32-token batch among all items (log-likelihood partials).
struct Item {
  int word, begin, end, batch;
};
static_assert(sizeof(Item) == 16, "Item must match the host's (n_items, 4) int32 array");

// Fills the leaves with Bhat[v, :]: Eq. (2) of SaberLDA divided in float64 and rounded once, as
// the oracle does, or copied from a fixed table. A dense row of B: a rare word's row (hybrid
// storage) is patched into the prior's row by for_each_item instead.
template <typename Source>
__device__ __forceinline__ void load_bhat_row(float* leaf, const Source& src, int v, int n_topics) {
  const size_t row = static_cast<size_t>(v) * n_topics;
  if (src.fixed != nullptr) {
    for (int k = threadIdx.x; k < n_topics; k += blockDim.x) leaf[k] = src.fixed[row + k];
  } else {
    for (int k = threadIdx.x; k < n_topics; k += blockDim.x)
      leaf[k] = static_cast<float>(
          __ddiv_rn(static_cast<double>(src.counts[row + k]) + word_value(src.beta), src.denom[k]));
  }
}

struct ChunkTokens {
  const void* place;    // TokenPos<kPacked>: the token's place in its document, PDOW order
  const int* doc;       // document minus the chunk's first document, PDOW order
  const int2* a_row;    // per document: (offset into a_ent, number of non-zeros)
  const void* a_ent;    // AEntry<kPacked> entries, rows sorted by topic
  const float* weight;  // token weight by canonical index minus t0, or nullptr (all 1)
  long long t0;         // canonical index of the chunk's first token
};

// A rare word's occupied topics (hybrid storage) written into a leaf row that holds the prior's
// values (restore = false), or the prior's values written back (restore = true); the tiles
// written are flagged in `touched` (bit t % 32 of word t / 32). Whole block, no barrier.
template <typename Source>
__device__ __forceinline__ void rare_leaves(float* leaf, const Source& src, int v,
                                            unsigned* touched, bool restore) {
  const long long o0 = src.rare_off[v - src.n_dense], o1 = src.rare_off[v - src.n_dense + 1];
  for (long long i = o0 + threadIdx.x; i < o1; i += blockDim.x) {
    const unsigned s = src.rare[i];
    if (s == 0u) continue;
    const int k = static_cast<int>(rare_slot_topic(s));
    if (restore) {
      leaf[k] = src.prior[k];
    } else {
      leaf[k] = static_cast<float>(
          __ddiv_rn(static_cast<double>(rare_slot_count(s)) + word_value(src.beta), src.denom[k]));
      atomicOr(touched + k / (kWarp * kWarp), 1u << ((k / kWarp) % kWarp));
    }
  }
}

// Persistent-block loop over work items. `Body(item, tree, leaf)` handles one item's tokens.
// kLargeK: the word's Bhat row (K floats: 256 KB at K = 65,536, more than a block's shared memory)
// goes to the block's own row of `leaf_scratch` (gridDim.x x K floats in global memory), where
// the per-token gathers find it in L1 or L2; levels 1-2 of the tree stay in shared memory, and
// level 1 may span several windows of 32 groups. Never read through the non-coherent path: the
// row is rewritten for every item.
// kHybrid: a rare word's row is the prior's row but for its few occupied topics, so the block
// keeps the prior's row between rare items and patches it: the occupied cells written, the tree
// redone only over their tiles from the prior's levels (patch_tree, the same floats as a full
// build), and the cells written back after the item. A rare item then costs about its slots
// and K / 32 tiles instead of K leaves (ezLDA's rare words are most of a large vocabulary);
// dense items, which come first (decreasing frequency), overwrite the row. The hybrid kernels
// read B, never a fixed Bhat (the host launches the dense ones for that: sample_sparse.py).
template <bool kLargeK, bool kHybrid, typename Source, typename Body>
__device__ __forceinline__ void for_each_item(const Item* __restrict__ items, int n_items,
                                              int* counter, const Source& src,
                                              const float* __restrict__ alpha, int n_topics,
                                              float* leaf_scratch, Body body) {
  extern __shared__ float smem[];
  float* leaf = kLargeK ? leaf_scratch + static_cast<size_t>(blockIdx.x) * n_topics : smem;
  float* l2 = kLargeK ? smem : leaf + n_topics;
  float* l1 = l2 + tree_tiles(n_topics);
  __shared__ int s_item;
  __shared__ unsigned touched[kHybrid ? kMaxTopics / (kWarp * kWarp) : 1];
  // Whether the row holds the prior's values. Every thread keeps its own copy, updated alike
  // (the block walks the same items): a flag one thread writes in shared memory could be read
  // by lanes of its own warp that independent thread scheduling has left behind a barrier.
  bool leaf_is_prior = false;
  if (kHybrid) {
    for (int i = threadIdx.x; i < tree_groups(n_topics); i += blockDim.x) touched[i] = 0u;
  }
  for (;;) {
    if (threadIdx.x == 0) s_item = atomicAdd(counter, 1);
    __syncwarp();  // warp 0 whole again before the barrier, so s_item is written when it opens
    __syncthreads();
    const int it = s_item;
    if (it >= n_items) break;
    const Item item = items[it];
    WordTreeT<kLargeK> tree;
    if (kHybrid && item.word >= src.n_dense) {
      if (!leaf_is_prior) {
        for (int k = threadIdx.x; k < n_topics; k += blockDim.x) leaf[k] = src.prior[k];
        __syncthreads();
        leaf_is_prior = true;
      }
      rare_leaves(leaf, src, item.word, touched, false);
      __syncthreads();
      const float* ref = src.prior + n_topics;
      const int n_tiles = tree_tiles(n_topics);
      tree = patch_tree<kLargeK>(leaf, l2, l1, alpha, n_topics, touched, ref, ref + n_tiles,
                                 ref + 2 * n_tiles);
    } else {
      load_bhat_row(leaf, src, item.word, n_topics);
      leaf_is_prior = false;
      __syncthreads();
      tree = build_tree<kLargeK>(leaf, l2, l1, alpha, n_topics);
    }
    body(item, tree, leaf);
    // (src.fixed is always null here, see above; testing it anyway is what lets ptxas fit the
    // packed sampler in 40 registers on sm_90 without a spill.)
    if (kHybrid && src.fixed == nullptr) {
      // The word again from memory rather than kept in a register through the token loop.
      const int v = items[s_item].word;
      if (v >= src.n_dense) {
        __syncthreads();
        rare_leaves(leaf, src, v, touched, true);
        for (int i = threadIdx.x; i < tree_groups(n_topics); i += blockDim.x) touched[i] = 0u;
      }
    }
    __syncthreads();  // the next item overwrites the table and s_item
  }
}

// The sampler's iteration (the second word of the Philox key) and beta (in `src`): launch
// arguments, or device words that a sweep replayed as a CUDA graph reads, since a graph holds its
// launch arguments fixed (device_word.cuh). Each is read where the draw needs it.
template <typename TopicT, bool kPacked, bool kLargeK, bool kHybrid, typename IterT,
          typename Source>
__device__ __forceinline__ void sample_tokens_impl(const Item* __restrict__ items, int n_items,
                                                   int* counter, ChunkTokens ch, Source src,
                                                   const float* __restrict__ alpha, int n_topics,
                                                   unsigned seed, IterT iteration, unsigned stream,
                                                   unsigned sweep, TopicT* __restrict__ z,
                                                   float* leaf_scratch) {
  const int lane = lane_id();
  const int warp = threadIdx.x / kWarp;
  const int n_warps = blockDim.x / kWarp;
  const auto* ent = static_cast<const typename AEntry<kPacked>::T*>(ch.a_ent);
  const auto* place = static_cast<const typename TokenPos<kPacked>::T*>(ch.place);
  for_each_item<kLargeK, kHybrid>(
      items, n_items, counter, src, alpha, n_topics, leaf_scratch,
      [&](const Item& item, const auto& tree, const float* leaf) {
        for (int b = item.begin + warp * kWarp; b < item.end; b += n_warps * kWarp) {
          // Lane j stages token b + j: its uniform, its A row and its own topic's word side Bhat'
          // (a division each lane does once, instead of every lane once per token below). z[p] is
          // overwritten only after the loop, by this lane, so it still holds the current topic.
          const int p = b + lane;
          const bool valid = p < item.end;
          const int d = valid ? ch.doc[p] : 0;
          const int2 row = valid ? ch.a_row[d] : make_int2(0, 0);
          const unsigned t = valid ? token_from_row(row.x, d, place[p]) : 0u;
          const int own = valid ? static_cast<int>(z[p]) : 0;
          // Packed rows exist only for integer counts: every weight is 1 there.
          const float w = (!kPacked && valid && ch.weight != nullptr) ? ch.weight[t] : 1.0f;
          const float b_adj = own_bhat<kHybrid>(src, item.word, own, w, leaf[own], n_topics);
          const float u =
              bits_to_uniform(token_bits(seed, word_value(iteration), stream, ch.t0 + t, sweep));
          const int n = min(kWarp, item.end - b);
          int mine = 0;
          for (int j = 0; j < n; ++j) {
            const int off = __shfl_sync(kFullMask, row.x, j);
            const int len = __shfl_sync(kFullMask, row.y, j);
            const float uj = __shfl_sync(kFullMask, u, j);
            const int own_j = __shfl_sync(kFullMask, own, j);
            const float w_j = kPacked ? 1.0f : __shfl_sync(kFullMask, w, j);
            const float b_j = __shfl_sync(kFullMask, b_adj, j);
            const int k = draw_one<kPacked>(ent + off, len, uj, own_j, w_j, b_j, leaf, tree);
            if (lane == j) mine = k;
          }
          // PDOW-order store, coalesced. Storing to the token's canonical slot instead (folding the
          // shuffle in) scatters the stores of the busiest kernel, and costs more than this
          // coalesced store and the separate scatter pass together.
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
//   multiple of 64 threads up to kSampleBlockMax, dynamic shared memory = tree_floats(K) * 4
//   bytes (raise the kernel's limit above 48 KB). `counter` must be zero at launch.
// [in]  items (n_items x 4 int32), place (each token's place in its document: uint16 for the
//       packed kernels, uint32 for the wide ones), doc, a_row, a_ent: the chunk, with A rebuilt
//       from z; token p's canonical index minus t0 is a_row[doc[p]].x - 31 doc[p] + place[p];
//       weight (canonical minus t0, or nullptr for all-1 weights); B (V x K float32) with denom
//       (K float64) in training, or bhat (V x K float32) with topics fixed (B = nullptr);
//       alpha (K float32), the per-topic document-topic prior. Hybrid storage (rare_rows.cuh):
//       B holds the first n_dense words' rows, rare (uint32 slots) and rare_off (V - n_dense + 1
//       int64) the others', prior = beta / denom (K float32, counts.cu prior_row) followed by
//       its tree's first levels (2 tree_tiles(K) + tree_groups(K) float32, counts.cu
//       prior_levels); with all words dense, n_dense = V and the three are nullptr.
// sample_tokens_*_large (K > 32,768, or a table too large for shared memory): the same, with
//       dynamic shared memory tree_upper_floats(K) * 4 bytes and leaf_scratch (gridDim.x x K
//       float32, contents ignored) holding each block's Bhat row; the others take nullptr.
// [in/out] z: the current topic per PDOW position on entry, the new one on return; each
//       position is read and then written by the same thread. Nothing else is written, so A and
//       B stay the old state.
// NumPy: z = draw_topics(doc, word, z, weight, token_uniform(seed, iteration, stream, t, sweep),
//        A, tables) (sklearn_gpulda/backends/numpy/sparse_rule.py:draw_topics).
// Float: sums use __fadd_rn/__fmul_rn (no FMA contraction) so S rounds identically in both passes.
// ---------------------------------------------------------------------------------------------
// Register caps of the sampler per architecture: the fewest registers with no spills, read off
// tools/build_kernels.py's report (-Xptxas -v), because resident warps hide the latency of the
// per-token gathers. sm_90 fits both samplers in 36 (registers are allocated 8 at a time, so 34
// would hold no more warps); sm_80 both in 40; sm_86 and sm_89 the packed one in 40 and the wide
// one in 48; sm_75 needs 56. Every cap leaves 1,024-thread blocks possible (56 x 1,024 <= 64 K).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define GPULDA_SAMPLE_REGS(PACKED) 36
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 800
#define GPULDA_SAMPLE_REGS(PACKED) 40
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ > 800
#define GPULDA_SAMPLE_REGS(PACKED) ((PACKED) ? 40 : 48)
#else
#define GPULDA_SAMPLE_REGS(PACKED) 56
#endif
// The large-K samplers take the same caps, except on sm_90: 40 for both (the wide one spills at
// 36).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define GPULDA_SAMPLE_LARGE_REGS(PACKED) 40
#else
#define GPULDA_SAMPLE_LARGE_REGS(PACKED) GPULDA_SAMPLE_REGS(PACKED)
#endif
// The hybrid-storage samplers (a rare word's own count found by probing its row, its tree patched
// from the prior's) take 40 for packed rows on sm_80 and sm_90 (36 spills on sm_90) and 48 on
// sm_86 and sm_89 (40 spills there); wide rows (documents of 65,536 tokens or more, rare) take
// 48 on sm_80, sm_86 and sm_89 and 56 on sm_90 (48 spills there); the large-K caps on older GPUs.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define GPULDA_SAMPLE_HYBRID_REGS(PACKED) ((PACKED) ? 40 : 56)
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 800
#define GPULDA_SAMPLE_HYBRID_REGS(PACKED) ((PACKED) ? 40 : 48)
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ > 800
#define GPULDA_SAMPLE_HYBRID_REGS(PACKED) 48
#else
#define GPULDA_SAMPLE_HYBRID_REGS(PACKED) GPULDA_SAMPLE_LARGE_REGS(PACKED)
#endif

// NAME's iteration is ITER_T and its beta BETA_T: `unsigned` and `double` for the launch
// arguments, `const unsigned*` and `const double*` for the device words of a graph's sweeps (the
// `_dev` kernels below); BETA is the BhatSourceOf type argument for BETA_T.
#define GPULDA_SAMPLE_AS(NAME, TOPIC_T, PACKED, LARGE, HYBRID, REGS, ITER_T, BETA_T, BETA)         \
  extern "C" __global__ void __maxnreg__(REGS) NAME(                                               \
      const Item* __restrict__ items, int n_items, int* counter, const void* __restrict__ place,   \
      const int* __restrict__ doc, const int2* __restrict__ a_row, const void* __restrict__ a_ent, \
      const float* __restrict__ weight, long long t0, const float* __restrict__ B,                 \
      const double* __restrict__ denom, BETA_T beta, const float* __restrict__ bhat,               \
      const unsigned* __restrict__ rare, const long long* __restrict__ rare_off,                   \
      const float* __restrict__ prior, int n_dense, const float* __restrict__ alpha, int n_topics, \
      unsigned seed, ITER_T iteration, unsigned stream, unsigned sweep, TOPIC_T* __restrict__ z,   \
      float* leaf_scratch) {                                                                       \
    gpulda::sample_tokens_impl<TOPIC_T, PACKED, LARGE, HYBRID>(                                    \
        items, n_items, counter, ChunkTokens{place, doc, a_row, a_ent, weight, t0},                \
        gpulda::BhatSourceOf<BETA>{B, denom, bhat, beta, rare, rare_off, prior, n_dense}, alpha,   \
        n_topics, seed, iteration, stream, sweep, z, leaf_scratch);                                \
  }
#define GPULDA_SAMPLE(SUFFIX, TOPIC_T, PACKED, LARGE, HYBRID, REGS)                                \
  GPULDA_SAMPLE_AS(sample_tokens_##SUFFIX, TOPIC_T, PACKED, LARGE, HYBRID, REGS, unsigned, double, \
                   double)
#define GPULDA_SAMPLE_DEV(SUFFIX, TOPIC_T, PACKED, LARGE, REGS)                       \
  GPULDA_SAMPLE_AS(sample_tokens_##SUFFIX##_dev, TOPIC_T, PACKED, LARGE, false, REGS, \
                   const unsigned* __restrict__, const double* __restrict__, const double*)
GPULDA_SAMPLE(u16_packed, unsigned short, true, false, false, GPULDA_SAMPLE_REGS(true))
GPULDA_SAMPLE(u16_wide, unsigned short, false, false, false, GPULDA_SAMPLE_REGS(false))
GPULDA_SAMPLE(i32_wide, int, false, false, false, GPULDA_SAMPLE_REGS(false))
GPULDA_SAMPLE(u16_packed_large, unsigned short, true, true, false, GPULDA_SAMPLE_LARGE_REGS(true))
GPULDA_SAMPLE(u16_wide_large, unsigned short, false, true, false, GPULDA_SAMPLE_LARGE_REGS(false))
// Hybrid storage takes integer counts only: packed rows, or wide ones for documents of 65,536
// tokens or more.
GPULDA_SAMPLE(u16_packed_hybrid, unsigned short, true, false, true, GPULDA_SAMPLE_HYBRID_REGS(true))
GPULDA_SAMPLE(u16_wide_hybrid, unsigned short, false, false, true, GPULDA_SAMPLE_HYBRID_REGS(false))
GPULDA_SAMPLE(u16_packed_large_hybrid, unsigned short, true, true, true,
              GPULDA_SAMPLE_HYBRID_REGS(true))
GPULDA_SAMPLE(u16_wide_large_hybrid, unsigned short, false, true, true,
              GPULDA_SAMPLE_HYBRID_REGS(false))

// sample_tokens_*_dev: the kernels above with B stored dense (no hybrid rows), reading the
// iteration and beta from device words instead of arguments, since a sweep captured in a CUDA
// graph replays its launch arguments unchanged. Same draws, same caps.
// [in] iteration: device uint32 (1,), written only by set_iteration / advance_iteration between
//      launches (the captured sweep's last node moves it on), never during one; every thread
//      reads the same value, which takes the place of the `unsigned iteration` argument above.
// [in] beta: device float64 (1,), the topic-word prior, written in place (stream-ordered) by a
//      prior update between launches; it takes the place of the `double beta` argument above,
//      the same double, so the same Bhat and draws.
// No i32_wide_dev: the sparse engine takes K <= kMaxTopics = 65,536, whose topics are always
// uint16 (layout.py topic_dtype), so nothing launches an i32 sampler with a device iteration.
GPULDA_SAMPLE_DEV(u16_packed, unsigned short, true, false, GPULDA_SAMPLE_REGS(true))
GPULDA_SAMPLE_DEV(u16_wide, unsigned short, false, false, GPULDA_SAMPLE_REGS(false))
// The large-K ones take the large-K caps except on sm_75, where the wide one spills at 56: 64 there
// (still one 1,024-thread block per SM, as at 56, so the large-K grid is the same).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define GPULDA_SAMPLE_DEV_LARGE_REGS(PACKED) 64
#else
#define GPULDA_SAMPLE_DEV_LARGE_REGS(PACKED) GPULDA_SAMPLE_LARGE_REGS(PACKED)
#endif
GPULDA_SAMPLE_DEV(u16_packed_large, unsigned short, true, true, GPULDA_SAMPLE_DEV_LARGE_REGS(true))
GPULDA_SAMPLE_DEV(u16_wide_large, unsigned short, false, true, GPULDA_SAMPLE_DEV_LARGE_REGS(false))

// ---------------------------------------------------------------------------------------------
// set_iteration: *iteration = value. advance_iteration: *iteration += 1 (the last node of a
// captured sweep, so that the next replay draws the next sweep's numbers).
// Launch: any grid; only thread 0 of block 0 writes, so either kernel writes the word exactly
// once whatever its shape (the host launches one block of one thread).
// [in/out] iteration: device uint32 (1,), the word the sample_tokens_*_dev kernels read.
// NumPy: iteration[0] = value; iteration[0] += 1.
// ---------------------------------------------------------------------------------------------
extern "C" __global__ void set_iteration(unsigned* iteration, unsigned value) {
  if (blockIdx.x == 0 && threadIdx.x == 0) *iteration = value;
}
extern "C" __global__ void advance_iteration(unsigned* iteration) {
  if (blockIdx.x == 0 && threadIdx.x == 0) *iteration += 1u;
}

// ---------------------------------------------------------------------------------------------
// token_loglik_{packed,wide}: per-batch partial sums of
// w_t * log((S_t + Q_v) / (N_d + sum_k alpha_k)), S_t = sum_k A[d,k] Bhat[v,k] and
// Q_v = sum_k alpha_k Bhat[v,k] (the word's tree total).
// Launch as sample_tokens (the _large ones as the large samplers). [out] partial[item.batch + i]
// for the item's i-th 32-token batch (every batch slot is written). `weight` (canonical, minus
// t0) may be nullptr; doc_norm[d] is N_d + sum_k alpha_k in float64; B with denom, or a fixed
// bhat (B = nullptr), and alpha (K float32) as for the sampler.
// NumPy: sklearn_gpulda/backends/numpy/sparse_rule.py:log_likelihood_terms, the per-token terms
//        these partial sums add up.
// ---------------------------------------------------------------------------------------------
namespace gpulda {
template <bool kPacked, bool kLargeK, bool kHybrid>
__device__ __forceinline__ void token_loglik_impl(
    const Item* __restrict__ items, int n_items, int* counter, const void* place_v,
    const int* __restrict__ doc, const int2* __restrict__ a_row, const void* a_ent_v,
    const float* __restrict__ weight, const double* __restrict__ doc_norm, const BhatSource& src,
    const float* __restrict__ alpha, int n_topics, double* __restrict__ partial,
    float* leaf_scratch) {
  const int lane = lane_id();
  const int warp = threadIdx.x / kWarp;
  const int n_warps = blockDim.x / kWarp;
  const auto* a_ent = static_cast<const typename AEntry<kPacked>::T*>(a_ent_v);
  const auto* place = static_cast<const typename TokenPos<kPacked>::T*>(place_v);
  for_each_item<kLargeK, kHybrid>(
      items, n_items, counter, src, alpha, n_topics, leaf_scratch,
      [&](const Item& item, const auto& tree, const float* leaf) {
        const double q = static_cast<double>(tree.total());
        for (int b = item.begin + warp * kWarp; b < item.end; b += n_warps * kWarp) {
          const int p = b + lane;
          const bool valid = p < item.end;
          const int d = valid ? doc[p] : 0;
          const int2 row = valid ? a_row[d] : make_int2(0, 0);
          const float w =
              (valid && weight != nullptr) ? weight[token_from_row(row.x, d, place[p])] : 1.0f;
          const int n = min(kWarp, item.end - b);
          double mine = 0.0;
          for (int j = 0; j < n; ++j) {
            const int off = __shfl_sync(kFullMask, row.x, j);
            const int len = __shfl_sync(kFullMask, row.y, j);
            float seg_end, own_count;
            int last_topic;
            const float s =
                sparse_mass<kPacked>(a_ent + off, len, leaf, -1, seg_end, last_topic, own_count);
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
#define GPULDA_LOGLIK(SUFFIX, PACKED, LARGE, HYBRID)                                               \
  extern "C" __global__ void __launch_bounds__(gpulda::kSampleBlockMax, 1) token_loglik_##SUFFIX(  \
      const Item* __restrict__ items, int n_items, int* counter, const void* __restrict__ place,   \
      const int* __restrict__ doc, const int2* __restrict__ a_row, const void* __restrict__ a_ent, \
      const float* __restrict__ weight, const double* __restrict__ doc_norm,                       \
      const float* __restrict__ B, const double* __restrict__ denom, double beta,                  \
      const float* __restrict__ bhat, const unsigned* __restrict__ rare,                           \
      const long long* __restrict__ rare_off, const float* __restrict__ prior, int n_dense,        \
      const float* __restrict__ alpha, int n_topics, double* __restrict__ partial,                 \
      float* leaf_scratch) {                                                                       \
    gpulda::token_loglik_impl<PACKED, LARGE, HYBRID>(                                              \
        items, n_items, counter, place, doc, a_row, a_ent, weight, doc_norm,                       \
        BhatSource{B, denom, bhat, beta, rare, rare_off, prior, n_dense}, alpha, n_topics,         \
        partial, leaf_scratch);                                                                    \
  }
GPULDA_LOGLIK(packed, true, false, false)
GPULDA_LOGLIK(wide, false, false, false)
GPULDA_LOGLIK(packed_large, true, true, false)
GPULDA_LOGLIK(wide_large, false, true, false)
GPULDA_LOGLIK(packed_hybrid, true, false, true)
GPULDA_LOGLIK(wide_hybrid, false, false, true)
GPULDA_LOGLIK(packed_large_hybrid, true, true, true)
GPULDA_LOGLIK(wide_large_hybrid, false, true, true)

// ---------------------------------------------------------------------------------------------
// init_topics_{u16,i32}: z[p] = uniform topic of canonical token t0 + p (stream 0, or 2 for a
// batch), in canonical order: a chunk gathers its PDOW copy from it (counts.cu gather_topics).
// Launch: 1-D, >= n threads. NumPy: random.token_topic(seed, iteration, stream, t, K, sweep).
// ---------------------------------------------------------------------------------------------
#define GPULDA_INIT(SUFFIX, TOPIC_T)                                                   \
  extern "C" __global__ void init_topics_##SUFFIX(                                     \
      long long n, long long t0, unsigned n_topics, unsigned seed, unsigned iteration, \
      unsigned stream, unsigned sweep, TOPIC_T* __restrict__ z) {                      \
    const long long p = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; \
    if (p >= n) return;                                                                \
    const unsigned bits = gpulda::token_bits(seed, iteration, stream, t0 + p, sweep);  \
    z[p] = static_cast<TOPIC_T>(gpulda::bits_to_topic(bits, n_topics));                \
  }
GPULDA_INIT(u16, unsigned short)
GPULDA_INIT(i32, int)
