// The draw of one token from a sparse A row and a word's table (doc/algorithm.md, "One
// iteration"): the sampler of sample_sparse.cu and the test probes use these, so they live here.
#pragma once
#include "entry.cuh"
#include "tree.cuh"
#include "warp.cuh"

namespace gpulda {

// Topic of a lane's last entry when its segment is empty: past every topic, so such a lane counts
// as ending after the token's own entry.
constexpr int kNoTopic = 0x7fffffff;

template <bool kPacked>
__device__ __forceinline__ float entry_mass(typename AEntry<kPacked>::T e, const float* leaf) {
  // __fmul_rn: the product must round on its own, as in the oracle's A * Bhat, never fused.
  return __fmul_rn(AEntry<kPacked>::count(e), leaf[AEntry<kPacked>::topic(e)]);
}

// First pass over A[d] (entries in the lane-segment layout of entry.cuh): lane l sums its
// segment (entries l*m .. l*m+m-1, m = ceil(len / 32)) in order with no shuffles, then one warp
// scan joins the segments. Returns S; `seg_end` is the running sum at the end of the lane's
// segment and `last_topic` the topic of its last entry (kNoTopic for a lane with no entries, which
// lies past every topic). A plain reduction per chunk would need a scan per 32 entries: ~5x the
// instructions, and the sampler is bound by instruction issue, not by the bytes of A.
template <bool kPacked>
__device__ __forceinline__ float sparse_mass(const typename AEntry<kPacked>::T* __restrict__ ent, int len,
                                             const float* leaf, float& seg_end, int& last_topic) {
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
  // Read again rather than carried through the loop: the line is in L1, and a live copy of the
  // entry costs the register the sampler's 32-register budget does not have.
  last_topic = mine > 0 ? E::topic(ent[(mine - 1) * kWarp + lane]) : kNoTopic;
  seg_end = warp_inclusive_scan(t);
  return __shfl_sync(kFullMask, seg_end, kWarp - 1);
}

// The two-branch draw of doc/algorithm.md for one token of topic `own` and weight `own_w`;
// warp-uniform arguments. The token's own weight leaves its topic's count (the collapsed
// conditional), so every running sum at or after its entry of A[d] drops by
// delta = own_w * Bhat[v, own]: S, the ends of the segments from the one holding that entry on,
// and the running sums inside the chosen segment from that entry on. The entry is in the row
// (A was rebuilt from the topics being resampled), so no search for it is needed: a lane knows
// from its last topic whether its segment ends at or after it.
// Running sums: segment ends from the first pass; inside the chosen segment, the segment's start
// plus a warp scan of its entries (windows of 32). Where rounding leaves no entry of the segment
// above x, the segment's last entry is taken, as the contract takes K - 1 at the top.
template <bool kPacked>
__device__ __forceinline__ int draw_one(const typename AEntry<kPacked>::T* __restrict__ ent, int len, float u,
                                        int own, float own_w, const float* leaf, const WordTree& tree) {
  using E = AEntry<kPacked>;
  const int lane = lane_id();
  float seg_end;
  int last_topic;
  const float s = sparse_mass<kPacked>(ent, len, leaf, seg_end, last_topic);
  const float delta = __fmul_rn(own_w, leaf[own]);
  const float s_own = fmaxf(__fsub_rn(s, delta), 0.0f);
  const float x = __fmul_rn(u, __fadd_rn(s_own, tree.total()));
  if (!(x < s_own)) return tree.search(__fsub_rn(x, s_own));
  // The first non-empty segment ending above x holds the draw. Scan rounding (and the subtraction)
  // can lift an empty trailing segment's end above its predecessor's, hence the guard and the
  // fallback to the last non-empty segment.
  const int m = segment_length(len);
  const float seg_end_own = last_topic >= own ? __fsub_rn(seg_end, delta) : seg_end;
  int l = warp_first(lane * m < len && seg_end_own > x);
  if (l < 0) l = (len - 1) / m;
  // Running sums are formed without the subtraction and adjusted entry by entry, so that the
  // segment's entries before the own one keep their exact sums.
  float base = __shfl_sync(kFullMask, seg_end, l > 0 ? l - 1 : 0);
  if (l == 0) base = 0.0f;
  const int n_here = min(m, len - l * m);
  for (int w = 0; w < n_here; w += kWarp) {
    const int j = w + lane;
    const typename E::T e = j < n_here ? ent[j * kWarp + l] : E::zero();
    const float run = __fadd_rn(base, warp_inclusive_scan(j < n_here ? entry_mass<kPacked>(e, leaf) : 0.0f));
    const float run_own = E::topic(e) >= own ? __fsub_rn(run, delta) : run;
    const int hit = warp_first(j < n_here && run_own > x);
    if (hit >= 0) return __shfl_sync(kFullMask, E::topic(e), hit);
    const int last = min(kWarp, n_here - w) - 1;
    if (w + kWarp >= n_here) return __shfl_sync(kFullMask, E::topic(e), last);
    base = __shfl_sync(kFullMask, run, kWarp - 1);
  }
  return 0;  // unreachable: n_here >= 1
}

}  // namespace gpulda
