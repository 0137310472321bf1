// The draw of one token from a sparse A row and a word's table (doc/algorithm.md, "One
// iteration"): the sampler of sample_sparse.cu and the test probes use these, so they live here.
#pragma once
#include "device_word.cuh"
#include "entry.cuh"
#include "rare_rows.cuh"
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
__device__ __forceinline__ float own_part(typename AEntry<kPacked>::T e, int own) {
  return AEntry<kPacked>::topic(e) == own ? AEntry<kPacked>::count(e) : 0.0f;
}

// First pass over A[d] (entries in the lane-segment layout of entry.cuh): lane l sums its
// segment (entries l*m .. l*m+m-1, m = ceil(len / 32)) in order with no shuffles, then one warp
// scan joins the segments. Returns S; `seg_end` is the running sum at the end of the lane's
// segment, `last_topic` the topic of its last entry (kNoTopic for a lane with no entries, which
// lies past every topic) and `own_count` the count of topic `own` if the lane's segment holds
// it (0 otherwise): the entries are in registers here, where a second look would be a load.
// A plain reduction per chunk would need a scan per 32 entries: ~5x the instructions, and the
// sampler is bound by instruction issue, not by the bytes of A.
template <bool kPacked>
__device__ __forceinline__ float sparse_mass(const typename AEntry<kPacked>::T* __restrict__ ent,
                                             int len, const float* leaf, int own, float& seg_end,
                                             int& last_topic, float& own_count) {
  using E = AEntry<kPacked>;
  const int lane = lane_id();
  const int m = segment_length(len);
  const int mine = max(0, min(m, len - lane * m));  // entries in this lane's segment
  float t = 0.0f, a = 0.0f;
  int j = 0;
  for (; j + 4 <= mine; j += 4) {
    const typename E::T e0 = ent[(j + 0) * kWarp + lane], e1 = ent[(j + 1) * kWarp + lane];
    const typename E::T e2 = ent[(j + 2) * kWarp + lane], e3 = ent[(j + 3) * kWarp + lane];
    t = __fadd_rn(t, entry_mass<kPacked>(e0, leaf));
    t = __fadd_rn(t, entry_mass<kPacked>(e1, leaf));
    t = __fadd_rn(t, entry_mass<kPacked>(e2, leaf));
    t = __fadd_rn(t, entry_mass<kPacked>(e3, leaf));
    a += own_part<kPacked>(e0, own) + own_part<kPacked>(e1, own) + own_part<kPacked>(e2, own) +
         own_part<kPacked>(e3, own);
  }
  for (; j < mine; ++j) {
    const typename E::T e = ent[j * kWarp + lane];
    t = __fadd_rn(t, entry_mass<kPacked>(e, leaf));
    a += own_part<kPacked>(e, own);
  }
  // Read again rather than carried through the loop: the line is in L1, and a live copy of the
  // entry costs a register the sampler's budget does not have.
  last_topic = mine > 0 ? E::topic(ent[(mine - 1) * kWarp + lane]) : kNoTopic;
  own_count = a;
  seg_end = warp_inclusive_scan(t);
  return __shfl_sync(kFullMask, seg_end, kWarp - 1);
}

// What the block reads Bhat from: B and the topic totals in training, or a fixed table. In
// hybrid storage (rare_rows.cuh) B holds the first n_dense words' rows and the others are rare
// rows, whose cells of count 0 take `prior` (beta / denom, the same float a dense row gives).
// BetaT: beta as a launch argument (double), or the device word a captured sweep reads it from
// (const double*, device_word.cuh); read through word_value either way.
template <typename BetaT>
struct BhatSourceOf {
  const float* counts;  // B, n_dense x K (training), or nullptr
  const double* denom;  // n[k] + V * beta, K doubles
  const float* fixed;   // Bhat given (mini-batch with topics fixed), or nullptr
  BetaT beta;
  const unsigned* rare;       // rare rows' slots, or nullptr (all dense)
  const long long* rare_off;  // first slot of each rare word's row, and the total
  const float* prior;         // beta / denom in float32 (K), for the rare rows, then its tree's
                              // levels (first_levels: tiles, tiles, groups floats)
  int n_dense;                // first rare word (V when all dense)
};
using BhatSource = BhatSourceOf<double>;

// Bhat[v, own] with the token's own weight taken out of B[v, own] and n[own]: the word side of
// the collapsed conditional, (B - w + beta) / (n - w + V beta) divided in float64 as the oracle
// does. With the topic-word side fixed the token is in neither, and Bhat is used as it is.
template <bool kHybrid, typename Source>
__device__ __forceinline__ float own_bhat(const Source& src, int v, int own, float w,
                                          float bhat_own, int n_topics) {
  if (src.counts == nullptr) return bhat_own;
  double b;
  if (!kHybrid || v < src.n_dense) {
    b = static_cast<double>(src.counts[static_cast<size_t>(v) * n_topics + own]);
  } else {
    long long o0;
    const unsigned cap = rare_row(src.rare_off, v - src.n_dense, o0);
    b = static_cast<double>(rare_count(src.rare + o0, cap, static_cast<unsigned>(own)));
  }
  return static_cast<float>(
      __ddiv_rn(__dadd_rn(__dsub_rn(b, w), word_value(src.beta)), __dsub_rn(src.denom[own], w)));
}

// The two-branch draw of doc/algorithm.md for one token of topic `own`, weight `own_w` and
// word-side Bhat'[v, own] = b_adj (own_bhat); warp-uniform arguments. The token's own weight
// leaves its topic's counts (the collapsed conditional): on the document side A[d, own] - w (the
// first pass picks A[d, own] up), on the word side Bhat' in place of Bhat. Only topic `own`
// changes, so
// - in the document branch its term goes from A[d,own] Bhat to (A[d,own] - w) Bhat': every
//   running sum at or after its entry drops by delta (S, the ends of the segments from the one
//   holding it on, and the running sums inside the chosen segment from it on). A lane knows from
//   its last topic whether its segment ends at or after the own entry;
// - in the prior branch its term goes from alpha Bhat to alpha Bhat': the tree's running sums
//   from `own` on drop by eps. A search of y that lands before `own` is unaffected; one that
//   lands at or after it is repeated for y + eps, which finds the first adjusted sum above y.
// Running sums: segment ends from the first pass; inside the chosen segment, the segment's start
// plus a warp scan of its entries (windows of 32). Where rounding leaves no entry of the segment
// above x, the segment's last entry is taken, as the contract takes K - 1 at the top.
template <bool kPacked, typename Tree>
__device__ __forceinline__ int draw_one(const typename AEntry<kPacked>::T* __restrict__ ent,
                                        int len, float u, int own, float own_w, float b_adj,
                                        const float* leaf, const Tree& tree) {
  using E = AEntry<kPacked>;
  const int lane = lane_id();
  float seg_end, own_part_here;
  int last_topic;
  const float s = sparse_mass<kPacked>(ent, len, leaf, own, seg_end, last_topic, own_part_here);
  const float b_own = leaf[own];
  // One lane's segment holds the own entry (a consistent state always has it).
  const int holder = warp_first(own_part_here != 0.0f);
  const float a_own = holder >= 0 ? __shfl_sync(kFullMask, own_part_here, holder) : 0.0f;
  const float delta =
      __fsub_rn(__fmul_rn(a_own, b_own), __fmul_rn(fmaxf(__fsub_rn(a_own, own_w), 0.0f), b_adj));
  const float alpha_own = __ldg(tree.alpha + own);
  const float eps = __fsub_rn(__fmul_rn(alpha_own, b_own), __fmul_rn(alpha_own, b_adj));
  const float s_own = fmaxf(__fsub_rn(s, delta), 0.0f);
  const float q_own = fmaxf(__fsub_rn(tree.total(), eps), 0.0f);
  const float x = __fmul_rn(u, __fadd_rn(s_own, q_own));
  if (!(x < s_own)) {
    const float y = __fsub_rn(x, s_own);
    const int k = tree.search(y);
    return k < own ? k : tree.search(__fadd_rn(y, eps));
  }
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
    const float run =
        __fadd_rn(base, warp_inclusive_scan(j < n_here ? entry_mass<kPacked>(e, leaf) : 0.0f));
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
