// Per-word sampling table for the prior (Q) branch: a three-level W-ary tree with W = 32
// (SaberLDA 3.2.4, Fig. 6-7), built by the block that owns the word: in shared memory, or with its
// leaves in a global scratch row of the block's own when K is too large for shared memory.
//
// The tree is over the terms q_k = alpha_k * Bhat[v, k] (alpha may differ per topic). Levels: the
// leaves are Bhat[v, 0..K-1] themselves (the S branch needs them too, so they are not overwritten
// by their prefix sums), and each q_k is formed on the fly from its leaf and alpha_k, which comes
// from global memory through the read-only cache (K floats, shared by every block); level 2 holds
// the running sum of q at the end of every 32-leaf tile; level 1 the running sum at the end of
// every 32-tile group. A query reads one level-1 word per lane, one level-2 cache line and one
// leaf cache line (with its alphas), and scans the terms on the fly. Above 32,768 topics level 1
// has more than one warp's worth of groups (64 at K = 65,536): it is scanned and searched one
// window of 32 groups at a time, which for K <= 32,768 is the single window of before.
// Each level's running sums are "upper level + local warp scan", a fixed association; the sampler
// contract allows any association (doc/algorithm.md), and where rounding leaves no hit inside the
// chosen node the query takes the node's last child, as the contract takes K - 1 at the top.
#pragma once
#include "warp.cuh"

namespace gpulda {

// Groups of 32 tiles of 32 leaves; level 1 holds one running sum per group, in whole windows of 32.
static_assert(kMaxTopics <= 2 * kWarp * kWarp * kWarp,
              "level 1 is searched in at most two windows");

__host__ __device__ constexpr int tree_tiles(int k) { return (k + kWarp - 1) / kWarp; }
__host__ __device__ constexpr int tree_groups(int k) { return (tree_tiles(k) + kWarp - 1) / kWarp; }
// Floats of level 1: the groups rounded up to whole windows of 32 (32 for any K <= 32,768).
__host__ __device__ constexpr int tree_level1(int k) {
  return (tree_groups(k) + kWarp - 1) / kWarp * kWarp;
}
// Floats of shared memory a table for k topics needs (leaves, level 2, level 1).
__host__ __device__ constexpr int tree_floats(int k) { return k + tree_tiles(k) + tree_level1(k); }
// The same with the leaves in global memory (kLargeK): levels 1 and 2 only.
__host__ __device__ constexpr int tree_upper_floats(int k) {
  return tree_tiles(k) + tree_level1(k);
}

// q_k = alpha_k * Bhat[v, k], rounded on its own (never fused into a running sum): the oracle's
// float32 product.
__device__ __forceinline__ float prior_term(const float* __restrict__ alpha, const float* leaf,
                                            int k) {
  return __fmul_rn(__ldg(alpha + k), leaf[k]);
}

// kWide: level 1 may span more than one window of 32 groups (K > 32,768). The narrow tree keeps
// the single-window search of the sampler's main path, whose register budget is tight.
template <bool kWide>
struct WordTreeT {
  const float* leaf;   // Bhat[v, :], K floats
  const float* l2;     // running sum of q at the end of each tile
  const float* l1;     // running sum of q at the end of each group
  const float* alpha;  // alpha_k, K floats (global memory)
  int n_topics;

  // Q_v = sum_k alpha_k Bhat[v, k].
  __device__ __forceinline__ float total() const { return l1[tree_groups(n_topics) - 1]; }

  // Smallest k whose running sum exceeds y; K - 1 when rounding leaves none. Warp-uniform y.
  __device__ __forceinline__ int search(float y) const {
    const int lane = lane_id();
    const int n_tiles = tree_tiles(n_topics);
    const int n_groups = tree_groups(n_topics);
    int g = warp_first(lane < n_groups && l1[lane] > y);
    if (kWide) {
      for (int g0 = kWarp; g < 0 && g0 < n_groups; g0 += kWarp) {
        const int hit = warp_first(g0 + lane < n_groups && l1[g0 + lane] > y);
        if (hit >= 0) g = g0 + hit;
      }
    }
    if (g < 0) return n_topics - 1;
    const int tile0 = g * kWarp;
    const int tiles_here = min(kWarp, n_tiles - tile0);
    int jl = warp_first(lane < tiles_here && l2[tile0 + lane] > y);
    if (jl < 0) jl = tiles_here - 1;
    const int j = tile0 + jl;
    const float base = j > 0 ? l2[j - 1] : 0.0f;
    const int k = j * kWarp + lane;
    const bool valid = k < n_topics;
    const float run =
        __fadd_rn(base, warp_inclusive_scan(valid ? prior_term(alpha, leaf, k) : 0.0f));
    int kl = warp_first(valid && run > y);
    if (kl < 0) kl = min(kWarp, n_topics - j * kWarp) - 1;
    return j * kWarp + kl;
  }
};
using WordTree = WordTreeT<false>;

// Warp: tile j's total, the scan of its terms that the query repeats (every lane gets it).
__device__ __forceinline__ float tile_total(const float* leaf, const float* __restrict__ alpha,
                                            int n_topics, int j) {
  const int k = j * kWarp + lane_id();
  const float s = warp_inclusive_scan(k < n_topics ? prior_term(alpha, leaf, k) : 0.0f);
  return __shfl_sync(kFullMask, s, kWarp - 1);
}

// Warp: group g's running sums of the tile totals in `tiles`, written to `local` (which may be
// `tiles`); returns the group's total (every lane).
__device__ __forceinline__ float group_scan(const float* tiles, float* local, int n_tiles, int g) {
  const int j = g * kWarp + lane_id();
  const float s = warp_inclusive_scan(j < n_tiles ? tiles[j] : 0.0f);
  __syncwarp();
  if (j < n_tiles) local[j] = s;
  return __shfl_sync(kFullMask, s, kWarp - 1);
}

// Levels 1-2 from the group-local running sums in l2 and the group totals in l1 (made visible
// by the caller's __syncthreads): level 1 scanned, level 2 offset by the groups before. Whole
// block; ends with __syncthreads.
template <bool kWide>
__device__ __forceinline__ WordTreeT<kWide> finish_tree(const float* leaf, float* l2, float* l1,
                                                        const float* __restrict__ alpha,
                                                        int n_topics) {
  const int lane = lane_id();
  const int warp = threadIdx.x / kWarp;
  const int n_tiles = tree_tiles(n_topics);
  const int n_groups = tree_groups(n_topics);
  if (warp == 0) {
    // Window by window, the previous windows' total carried in; the narrow tree has one window.
    float carry = 0.0f;
    for (int g0 = 0; g0 < (kWide ? n_groups : 1); g0 += kWarp) {
      const int g = g0 + lane;
      float s = warp_inclusive_scan(g < n_groups ? l1[g] : 0.0f);
      if (kWide) s = __fadd_rn(carry, s);
      __syncwarp();
      l1[g] = s;  // slots past n_groups hold the total; the query masks them anyway
      carry = __shfl_sync(kFullMask, s, kWarp - 1);
    }
  }
  __syncthreads();
  for (int j = threadIdx.x; j < n_tiles; j += blockDim.x) {
    const int g = j / kWarp;
    if (g > 0) l2[j] = __fadd_rn(l1[g - 1], l2[j]);
  }
  __syncthreads();
  return WordTreeT<kWide>{leaf, l2, l1, alpha, n_topics};
}

// The first two levels of a row's tree: tile totals into `tiles`, their running sums within
// each group of 32 tiles into `local` (which may be `tiles`), group totals into `groups`. Whole
// block; leaves made visible by the caller's __syncthreads; ends with __syncthreads. The
// sampler's build_tree writes them in place; counts.cu's prior_levels keeps the prior row's
// apart, for patch_tree.
__device__ __forceinline__ void first_levels(const float* leaf, const float* __restrict__ alpha,
                                             int n_topics, float* tiles, float* local,
                                             float* groups) {
  const int lane = lane_id();
  const int warp = threadIdx.x / kWarp;
  const int n_warps = blockDim.x / kWarp;
  const int n_tiles = tree_tiles(n_topics);
  for (int j = warp; j < n_tiles; j += n_warps) {
    const float t = tile_total(leaf, alpha, n_topics, j);
    if (lane == 0) tiles[j] = t;
  }
  __syncthreads();
  for (int g = warp; g < tree_groups(n_topics); g += n_warps) {
    const float t = group_scan(tiles, local, n_tiles, g);
    if (lane == 0) groups[g] = t;
  }
  __syncthreads();
}

// Builds levels 1-2 over leaves already written (shared memory, or the block's global row, made
// visible by the caller's __syncthreads). Whole block; ends with __syncthreads. `l2` receives
// level 2 (tree_tiles(K) floats), `l1` level 1 (tree_level1(K) floats); `alpha` is K floats.
template <bool kWide = false>
__device__ __forceinline__ WordTreeT<kWide> build_tree(const float* leaf, float* l2, float* l1,
                                                       const float* __restrict__ alpha,
                                                       int n_topics) {
  first_levels(leaf, alpha, n_topics, l2, l2, l1);
  return finish_tree<kWide>(leaf, l2, l1, alpha, n_topics);
}

// build_tree's result, bit for bit, over leaves that equal the reference row's (whose levels
// first_levels gave) except in the tiles flagged in `touched` (bit t % 32 of word t / 32,
// so word g flags group g's tiles): only the flagged tiles are scanned again and only their
// groups' running sums redone; the other groups' are copied. Same floats, same order: every
// value is computed from the same inputs by the same code as in build_tree. Whole block;
// `touched` visible (the caller's __syncthreads); ends with __syncthreads.
template <bool kWide = false>
__device__ __forceinline__ WordTreeT<kWide> patch_tree(const float* leaf, float* l2, float* l1,
                                                       const float* __restrict__ alpha,
                                                       int n_topics, const unsigned* touched,
                                                       const float* __restrict__ ref_tiles,
                                                       const float* __restrict__ ref_local,
                                                       const float* __restrict__ ref_groups) {
  const int lane = lane_id();
  const int warp = threadIdx.x / kWarp;
  const int n_warps = blockDim.x / kWarp;
  const int n_tiles = tree_tiles(n_topics);
  const int n_groups = tree_groups(n_topics);
  // Tile totals of the touched groups only (the others' running sums are copied below).
  for (int j = warp; j < n_tiles; j += n_warps) {
    const unsigned flags = touched[j / kWarp];
    if (flags == 0u) continue;  // warp-uniform
    if ((flags >> (j % kWarp)) & 1u) {
      const float t = tile_total(leaf, alpha, n_topics, j);
      if (lane == 0) l2[j] = t;
    } else if (lane == 0) {
      l2[j] = ref_tiles[j];
    }
  }
  __syncthreads();
  for (int g = warp; g < n_groups; g += n_warps) {
    if (touched[g] != 0u) {
      const float t = group_scan(l2, l2, n_tiles, g);
      if (lane == 0) l1[g] = t;
    } else {
      const int j = g * kWarp + lane;
      if (j < n_tiles) l2[j] = ref_local[j];
      if (lane == 0) l1[g] = ref_groups[g];
    }
  }
  __syncthreads();
  return finish_tree<kWide>(leaf, l2, l1, alpha, n_topics);
}

}  // namespace gpulda
