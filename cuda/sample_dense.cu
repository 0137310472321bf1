// Dense E-step for small K: every topic of p(k) = (A[d,k] - w [k = z] + alpha_k) * Bhat[v,k] is
// evaluated for every token (z its current topic, w its weight), with no sparsity (issue 4).
// Three kernels over the same inputs, after Steele and Tristan, "Using butterfly-patterned partial
// sums to draw from discrete distributions" (PPoPP'17):
//
//   sample_dense_butterfly  Alg. 7 (with Alg. 5, 8, 9, 10): transposed coalesced loads and a
//                           butterfly-patterned table of partial sums built with W-1 shuffles per
//                           32 x 32 block, from which the binary search derives the running sums
//                           it needs on the fly.
//   sample_dense_transpose  Alg. 4 with the register transposition of Fig. 2 ((W/2) log2 W
//                           shuffles per block), then a full running-sum table and Alg. 3.
//   sample_dense_plain      Alg. 1 with the binary search of Alg. 3: one thread per document,
//                           each reading its own rows (uncoalesced); the paper's baseline.
//   sample_dense_long       the transpose kernel's arithmetic with a warp (or a group of
//                           warps) per document, for long documents (see there).
//
// Each can also count the new topics into the next A and B (A_next, B_next): the fused M-step of
// the dense engine for integer counts (issue 35), finished by cuda/dense_mstep.cu.
//
// The draw rule (the dense oracle, sklearn_gpulda/backends/numpy/dense_rule.py): C is the running
// float32 sum over k = 0..K-1 of t_k = (A[d,k] + alpha_k) * Bhat[v,k], the token's own count
// included. Taking it out (the collapsed conditional) changes only the term of its topic z, to
// t'_z = (A[d,z] + alpha_z - w) * Bhat'[v,z] with Bhat'[v,z] = (B[v,z] - w + beta) / (n_z - w +
// V beta) divided in float64 (Bhat itself when the topic-word side is fixed), so every running
// sum from z on drops by delta = t_z - t'_z: the kernels search C'[k] = C[k] for k < z and
// max(C[k] - delta, C[z-1]) for k >= z (C[-1] = 0; the max keeps C' non-decreasing where the
// subtraction rounds below C[z-1]), with x = u * max(C[K-1] - delta, 0), and take the smallest k
// with C'[k] > x, or K-1 where rounding leaves none. The terms themselves
// are never adjusted, so the table build is the same as with the own count kept; only the search
// compares against C'. plain and transpose form C sequentially in topic order exactly as the
// oracle does, so they agree with it bit for bit. butterfly sums each 32-topic block as a tree
// (and subtracts delta without the max), so a draw moves where x lies within rounding of an
// interval end (the contract's 99.9% agreement, doc/algorithm.md).
//
// Work layout shared by the three kernels: thread e handles document doc_order[e]; a warp takes
// 32 consecutive entries. The host orders documents by decreasing length so a warp's documents
// are alike; the warp-cooperative kernels then step through tokens with the paper's "master
// index" (Sec. 5): every lane stays awake until the warp's longest document is done, a lane whose
// document is finished recomputes its last token (same uniform, same rows) and does not store.
//
// How this follows the paper, and where it departs:
// - theta = A[d] + alpha is cached per thread in local memory, transposed (Alg. 5), once per
//   warp: documents do not change along the master index. Held there, it is addressed by a
//   compile-time offset from the lane's base instead of 32 per-document row pointers, which
//   would cost 64 registers.
// - The remnant (K mod 32 topics) sits at the front of each row, as the paper puts it (Sec. 5), so
//   the blocks are topics [R + 32 b, R + 32 b + 32); the remnant is summed per lane with plain,
//   uncoalesced reads (Alg. 8 lines 6-8) and searched linearly (Alg. 9 lines 13-17).
// - W = 32 is fixed (kWarp). The table build is fully unrolled (the paper unrolled it by hand,
//   Sec. 7); the inner loop of the butterfly search is left rolled (register budget, see there).
// - The tables are float32, as the paper's 32-bit measurements (Fig. 7(a)); K <= 1,024 because
//   p' and theta are fixed-size local arrays (8 KB of stack per thread; the driver reserves it
//   for every thread the GPU can hold at once, gigabytes of device memory on a large GPU).

#include "philox.cuh"
#include "search.cuh"
#include "warp.cuh"

namespace gpulda {

// The running-sum tables live in a per-thread local array (the paper's "local array p'[K]",
// Alg. 7 line 8), so K has a compile-time ceiling. 1,024 is the top of the paper's sweep and of
// the range where the dense engine is meant to beat the sparse one.
constexpr int kDenseLogWarp = 5;
static_assert(kWarp == (1 << kDenseLogWarp), "the butterfly code is written for 32-lane warps");
static_assert(kDenseBlockMax % kWarp == 0, "blocks must be whole warps");
static_assert(kDenseMaxTopics % kWarp == 0, "the table ceiling must be whole blocks of topics");

// One term of the distribution, rounded exactly as the oracle's float32 NumPy expression
// (A[d] + alpha) * Bhat[v]: _rn intrinsics keep nvcc from fusing the add or the caller's running
// sum into an FMA.
__device__ __forceinline__ float dense_term(float a, float alpha, float b) {
  return __fmul_rn(__fadd_rn(a, alpha), b);
}

// Row `row` of a row-major matrix with n_topics columns; 32 x 32 -> 64-bit multiply (one
// IMAD.WIDE).
__device__ __forceinline__ const float* row_ptr(const float* base, int row, int n_topics) {
  return base + static_cast<unsigned long long>(static_cast<unsigned>(row)) *
                    static_cast<unsigned>(n_topics);
}

__device__ __forceinline__ int warp_max(int v) {
#pragma unroll
  for (int off = kWarp / 2; off > 0; off >>= 1) v = max(v, __shfl_xor_sync(kFullMask, v, off));
  return v;
}

// Where the word side of the own topic comes from: B and n + V beta in training, nothing (B =
// nullptr) when the topic-word side is fixed.
struct WordCounts {
  const float* B;       // V x K counts, or nullptr
  const double* denom;  // n[k] + V * beta
  double beta;
};

// The change of the own topic's term, t_z - t'_z (see the top of this file), for a token of
// current topic `own`, weight w, word row offset `b_off` (word * K) and document row `a_row`.
__device__ __forceinline__ float own_delta(const float* __restrict__ a_row,
                                           const float* __restrict__ alpha,
                                           const float* __restrict__ bhat, const WordCounts& wc,
                                           unsigned b_off, int own, float w) {
  const float theta = __fadd_rn(__ldg(a_row + own), __ldg(alpha + own));
  const float b_own = __ldg(bhat + b_off + own);
  float b_adj = b_own;
  if (wc.B != nullptr) {
    const double b = static_cast<double>(__ldg(wc.B + b_off + own));
    b_adj = static_cast<float>(
        __ddiv_rn(__dadd_rn(__dsub_rn(b, w), wc.beta), __dsub_rn(wc.denom[own], w)));
  }
  return __fsub_rn(__fmul_rn(theta, b_own), __fmul_rn(__fsub_rn(theta, w), b_adj));
}

// The token's own count taken out of the running sums C of its distribution (see the top of this
// file): C'[k] = C[k] below the own topic, max(C[k] - delta, C[own - 1]) from it on.
struct OwnCount {
  int topic;     // the token's current topic z
  float delta;   // t_z - t'_z
  float before;  // C[z - 1], 0 for z = 0

  __device__ __forceinline__ float adjusted(float c, int k) const {
    return k < topic ? c : fmaxf(__fsub_rn(c, delta), before);
  }
};

// The own count of a token whose running sums p[0..K-1] are complete: x is drawn below the
// adjusted total, max(C[K-1] - delta, 0).
__device__ __forceinline__ OwnCount own_count(const float* p, float delta, int own) {
  OwnCount o;
  o.topic = own;
  o.delta = delta;
  o.before = own > 0 ? p[own - 1] : 0.0f;
  return o;
}

// Smallest k in [0, n) with x < C'[k], or n - 1 (Alg. 3). C' is non-decreasing: float sums of
// non-negative terms, lowered by a constant from the own topic on and clamped at C[own - 1].
__device__ __forceinline__ int binary_search(const float* p, int n, float x, const OwnCount& own) {
  int lo = 0, hi = n - 1;
  while (lo < hi) {
    const int mid = (lo + hi) >> 1;
    if (x < own.adjusted(p[mid], mid)) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return lo;
}

// What a lane of a warp-cooperative kernel knows about its document.
struct DenseLane {
  int doc;       // document id (lanes past n_order borrow lane 0's, so their loads stay valid)
  long long t0;  // canonical index of the document's first token
  int len;       // its number of tokens (0 for lanes past n_order)
  int n_steps;   // the warp's longest document: the master index runs to it
};

// Returns false for a warp that has no entry of doc_order at all (warp-uniform).
__device__ __forceinline__ bool dense_lane_setup(const int* __restrict__ doc_order, int n_order,
                                                 const long long* __restrict__ doc_ptr,
                                                 DenseLane& ln) {
  const long long e = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e - lane_id() >= n_order) return false;
  const bool in_range = e < n_order;
  ln.doc = in_range ? doc_order[e] : 0;
  ln.t0 = 0;
  ln.len = 0;
  if (in_range) {
    ln.t0 = doc_ptr[ln.doc];
    ln.len = static_cast<int>(doc_ptr[ln.doc + 1] - ln.t0);
  }
  const int doc0 = __shfl_sync(kFullMask, ln.doc, 0);
  if (!in_range) ln.doc = doc0;
  ln.n_steps = warp_max(ln.len);
  return true;
}

// Token of master step `step` for this lane (Alg. 4 lines 11-12): its last token once its
// document is exhausted; `store` is false then, and for lanes without tokens.
// A lane past its document's end re-reads a token whose topic it already overwrote; its draw is
// not stored, and nothing of it reaches the other lanes, so that is harmless.
struct DenseToken {
  long long t;
  int word;
  int own;  // current topic
  float w;  // weight
  float u;
  bool store;
};

__device__ __forceinline__ DenseToken dense_token(const DenseLane& ln, int step,
                                                  const int* __restrict__ word, const int* z,
                                                  const float* __restrict__ weight, unsigned seed,
                                                  unsigned iteration, unsigned stream,
                                                  unsigned sweep) {
  DenseToken tk;
  tk.store = step < ln.len;
  tk.t = ln.t0 + max(0, min(step, ln.len - 1));
  tk.word = ln.len > 0 ? word[tk.t] : 0;
  tk.own = ln.len > 0 ? z[tk.t] : 0;
  tk.w = (ln.len > 0 && weight != nullptr) ? weight[tk.t] : 1.0f;
  tk.u = bits_to_uniform(token_bits(seed, iteration, stream, tk.t, sweep));
  return tk;
}

// Alg. 5: this lane's copy of A[d_k] + alpha for the warp's 32 documents d_0..d_31, transposed
// like the loads of the Bhat rows: theta[j + k] of lane r is A[d_k, j + r] + alpha_{j+r} for the
// blocks, so every load reads 32 consecutive floats of one row; the remnant [0, R) is the lane's
// own row, untransposed. The copy lives in local memory, where a compile-time offset from the
// lane's base addresses it: no per-document pointers held in registers (those cost 64 registers).
__device__ __forceinline__ void cache_theta(float* theta, const float* __restrict__ A, int doc,
                                            int n_remnant, int n_topics,
                                            const float* __restrict__ alpha) {
  const float* own = row_ptr(A, doc, n_topics);
  for (int k = 0; k < n_remnant; ++k) theta[k] = __fadd_rn(__ldg(own + k), __ldg(alpha + k));
  const int lane = lane_id();
  for (int j = n_remnant; j < n_topics; j += kWarp) {
    // This lane's topic in every row of the block.
    const float alpha_here = __ldg(alpha + j + lane);
#pragma unroll
    for (int k = 0; k < kWarp; ++k) {
      const int doc_k = __shfl_sync(kFullMask, doc, k);
      theta[j + k] = __fadd_rn(__ldg(row_ptr(A, doc_k, n_topics) + j + lane), alpha_here);
    }
  }
}

// Remnant topics [0, R): each lane sums its own terms in order (Alg. 8 lines 6-8).
__device__ __forceinline__ float remnant_sums(const float* theta, const float* __restrict__ b_row,
                                              int n_remnant, float* p) {
  float sum = 0.0f;
  for (int k = 0; k < n_remnant; ++k) {
    sum = __fadd_rn(sum, __fmul_rn(theta[k], __ldg(b_row + k)));
    p[k] = sum;
  }
  return sum;
}

// This lane's word's row offset in Bhat, and every lane's in word_off (c_warp of Alg. 8 lines
// 3-4, as row offsets): what the butterfly and transpose kernels do first for each token.
__device__ __forceinline__ unsigned share_word_offsets(unsigned (&word_off)[kWarp], int word,
                                                       int n_topics) {
  const unsigned my_off = static_cast<unsigned>(word) * static_cast<unsigned>(n_topics);
#pragma unroll
  for (int k = 0; k < kWarp; ++k) word_off[k] = __shfl_sync(kFullMask, my_off, k);
  return my_off;
}

// Transposed, coalesced load of one 32 x 32 block (Alg. 8 lines 10-12): register k of lane r
// receives term j + r of lane k's distribution. word_off[k] = word of lane k times K (the host
// checks that V * K fits in 32 bits), so one IMAD.WIDE per load forms the address.
__device__ __forceinline__ void load_block_transposed(float (&a)[kWarp], const float* theta,
                                                      const float* __restrict__ bhat,
                                                      const unsigned (&word_off)[kWarp], int j) {
  const float* col = bhat + j + lane_id();
#pragma unroll
  for (int k = 0; k < kWarp; ++k) a[k] = __fmul_rn(theta[j + k], __ldg(col + word_off[k]));
}

// Fig. 2: stage `bit` swaps bit `bit` of the (lane, register) coordinates of every element whose
// lane and register differ in that bit; after five stages (lane r, register k) holds what (lane k,
// register r) held.
__device__ __forceinline__ void transpose_in_registers(float (&a)[kWarp], int lane) {
#pragma unroll
  for (int b = 0; b < kDenseLogWarp; ++b) {
    const int bit = 1 << b;
    const bool upper = (lane & bit) != 0;
#pragma unroll
    for (int k = 0; k < kWarp; ++k) {
      if (k & bit) continue;
      const float give = upper ? a[k] : a[k + bit];
      const float got = __shfl_xor_sync(kFullMask, give, bit);
      if (upper) {
        a[k] = got;
      } else {
        a[k + bit] = got;
      }
    }
  }
}

// The fused M-step's share of one draw: the token's new topic counted into the next A (row a_row,
// nullptr when not counting) and the next B (row offset b_off, nullptr when the topic-word side is
// fixed). Only integer counts come here: sums of integers below 2^24 are exact in float32 whatever
// order the atomics land in, so the tables are the same numbers every run. The return value is
// unused, so these compile to fire-and-forget reductions (RED), not round trips.
__device__ __forceinline__ void count_draw(float* a_row, float* B_next, unsigned b_off, int topic,
                                           float w) {
  if (a_row != nullptr) atomicAdd(a_row + topic, w);
  if (B_next != nullptr) atomicAdd(B_next + b_off + topic, w);
}

// Row `row` of the next A, or nullptr when the sweep does not count.
__device__ __forceinline__ float* next_row(float* A_next, int row, int n_topics) {
  return A_next == nullptr ? nullptr
                           : A_next + static_cast<unsigned long long>(static_cast<unsigned>(row)) *
                                          static_cast<unsigned>(n_topics);
}

}  // namespace gpulda

using namespace gpulda;

// ---------------------------------------------------------------------------------------------
// Common to the three kernels:
// Launch: grid = ceil(n_order / blockDim.x), block = a multiple of 32 threads up to
//   kDenseBlockMax (128 by default), no shared memory. Thread e handles document doc_order[e].
// [in]  doc_order (n_order int32): document ids, each at most once, best by decreasing length
//       (the master index of Alg. 4; any order is correct, sorted is fast). Empty documents may
//       be listed or left out.
//       doc_ptr (n_docs + 1 int64): tokens of document d are [doc_ptr[d], doc_ptr[d+1]) in
//       canonical order. word (n_tokens int32): vocabulary id per canonical token.
//       weight (n_tokens float32, canonical) or nullptr when every weight is 1.
//       A (n_docs x K float32), bhat (V x K float32), row-major: held fixed, never written; A
//       holds the counts of the topics in z. alpha (K float32), every alpha_k > 0.
//       B (V x K float32, the counts bhat comes from) with denom (K float64, n + V beta) and beta,
//       for the word side of the own count; B = nullptr when bhat is fixed (mini-batch).
//       (seed, iteration) is the Philox key, stream / sweep the counter words (stream 1 and
//       sweep 0 for a training E-step).
// [in/out] z (n_tokens int32): the current topic of each token on entry; the new topic on
//       return, for the tokens of the listed documents only (each read, then written, by the
//       thread of its document).
//       A_next (n_docs x K float32) and B_next (V x K float32), the fused M-step's next tables,
//       or nullptr: each drawn token adds its weight at (its document, its new topic) of A_next
//       and (its word, its new topic) of B_next with atomics (A_next = nullptr: no counting;
//       B_next = nullptr alone: A only, for a fixed topic-word side). Meant for integer counts
//       (weight nullptr), whose sums below 2^24 are exact whatever the atomics' order; the
//       caller zeroes the tables first. No other memory is written.
// K = n_topics in [1, kDenseMaxTopics]; any other K returns without writing.
// NumPy: z[t] = draw_topics_dense(doc[t], word[t], z[t], weight[t], token_uniform(seed, iteration,
//        stream, t, sweep), A, bhat, alpha, (B, denom, beta))
//        (sklearn_gpulda/backends/numpy/dense_rule.py:draw_topics_dense).
// Float: every add and multiply is an _rn intrinsic (no FMA contraction). Terms are >= 0 for
//        finite non-negative A, Bhat and alpha > 0; a NaN or Inf term makes the comparisons false
//        and the search falls to the top of its range (K - 1 for the sequential kernels; NaN is
//        outside the oracle's contract). An all-zero distribution gives x = 0 and topic K - 1,
//        as the oracle. A topic with p = 0 is never drawn by the sequential kernels.
// ---------------------------------------------------------------------------------------------

// sample_dense_butterfly (Alg. 7): per master step, per 32-topic block, one transposed load,
// the butterfly table in 31 __shfl_xor (Alg. 8), stored with the lane's running sum at the block
// end; then a binary search over block ends (Alg. 9) and the butterfly search inside the chosen
// block, 2 x 31 shuffles (Alg. 10). Requires full warps executing together (blockDim % 32 == 0).
extern "C" __global__ void __launch_bounds__(kDenseBlockMax)
    sample_dense_butterfly(const int* __restrict__ doc_order, int n_order,
                           const long long* __restrict__ doc_ptr, const int* __restrict__ word,
                           const float* __restrict__ weight, const float* __restrict__ A,
                           const float* __restrict__ bhat, const float* __restrict__ alpha,
                           const float* __restrict__ B, const double* __restrict__ denom,
                           double beta, unsigned seed, unsigned iteration, unsigned stream,
                           unsigned sweep, int* z, int n_topics, float* A_next, float* B_next) {
  if (n_topics < 1 || n_topics > kDenseMaxTopics) return;
  DenseLane ln;
  if (!dense_lane_setup(doc_order, n_order, doc_ptr, ln)) return;
  const int lane = lane_id();
  const int n_remnant = n_topics % kWarp;
  const int n_blocks = n_topics / kWarp;
  float theta[kDenseMaxTopics];
  cache_theta(theta, A, ln.doc, n_remnant, n_topics, alpha);
  // p'[K] of Alg. 7: remnant running sums, then per block the butterfly rows 0..30 and, in row
  // 31, this lane's running sum at the block's end.
  float p[kDenseMaxTopics];

  for (int step = 0; step < ln.n_steps; ++step) {
    const DenseToken tk = dense_token(ln, step, word, z, weight, seed, iteration, stream, sweep);
    unsigned word_off[kWarp];
    const unsigned my_off = share_word_offsets(word_off, tk.word, n_topics);
    float sum = remnant_sums(theta, bhat + my_off, n_remnant, p);
    for (int j = n_remnant; j < n_topics; j += kWarp) {
      float a[kWarp];
      load_block_transposed(a, theta, bhat, word_off, j);
      // Alg. 8 lines 13-23. Stage `bit` pairs rows d and d + bit across lanes l and l ^ bit: the
      // lower lane keeps row d and puts its pair sum in row d + bit, the upper lane takes the
      // partner's row d + bit into row d and its own pair sum into row d + bit. Row d is final
      // after its stage. Row i, column l then holds the sum of terms [l & ~k, (l & ~k) + k] of
      // lane (i & ~m) | (l & m)'s distribution, m = i ^ (i + 1), k = m >> 1 (Sec. 3); row 31
      // holds column l's own block total.
#pragma unroll
      for (int b = 0; b < kDenseLogWarp; ++b) {
        const int bit = 1 << b;
        const bool upper = (lane & bit) != 0;
#pragma unroll
        for (int i = 0; i < kWarp / (2 * bit); ++i) {
          const int d = 2 * bit * i + bit - 1;
          const float give = upper ? a[d] : a[d + bit];
          const float got = __shfl_xor_sync(kFullMask, give, bit);
          if (upper) a[d] = a[d + bit];
          a[d + bit] = __fadd_rn(a[d], got);
          p[j + d] = a[d];
        }
      }
      sum = __fadd_rn(sum, a[kWarp - 1]);
      p[j + kWarp - 1] = sum;
    }
    // The own count: every running sum from the own topic on drops by delta (subtracted as each
    // sum is read, without the oracle's clamp: this kernel's sums are not the oracle's anyway).
    const int own = tk.own;
    const float delta = own_delta(row_ptr(A, ln.doc, n_topics), alpha, bhat,
                                  WordCounts{B, denom, beta}, my_off, own, tk.w);
    auto adjusted = [&](float c, int k) { return k < own ? c : __fsub_rn(c, delta); };
    const float x = __fmul_rn(tk.u, fmaxf(__fsub_rn(sum, delta), 0.0f));

    // Alg. 9: the block whose end is the first above x (the last block if none).
    int lo = 0, hi = n_blocks - 1;
    while (lo < hi) {
      const int mid = (lo + hi) >> 1;
      const int end = n_remnant + mid * kWarp + kWarp - 1;
      if (x < adjusted(p[end], end)) {
        hi = mid;
      } else {
        lo = mid + 1;
      }
    }
    const int block_base = n_remnant + lo * kWarp;
    int topic = n_topics - 1;
    if (n_blocks > 0) {
      // Alg. 10. Invariant: low and high are this lane's running sums just before and at the
      // end of the range still in play; `flip ^ lane` spells the bits decided so far. At stage
      // `bit` the lane needs the half-range sum held in row d = (lane & ~(2 bit - 1)) | (bit - 1)
      // of column lane ^ flip of its own block; the lane in that column reads row d of the block
      // of the lane that wants it (him) from its local table and the value crosses over in one
      // shuffle. A lane whose bit is set subtracts the upper half from high, otherwise it adds
      // the lower half to low; a half holding the own topic is lighter by delta.
      float low = block_base > 0 ? adjusted(p[block_base - 1], block_base - 1) : 0.0f;
      float high = adjusted(p[block_base + kWarp - 1], block_base + kWarp - 1);
      const int own_here = own - block_base;  // the own topic's offset in the block, if it is there
      int flip = 0;
#pragma unroll
      for (int s = 0; s < kDenseLogWarp; ++s) {
        const int bit = (kWarp / 2) >> s;
        const int mask = (kWarp - 1) & ~(2 * bit - 1);  // bits above `bit`: already decided
        float y = 0.0f;
        // Rolled on purpose: unrolled, the 31 table reads in flight lift the kernel from 128 to
        // ~170 registers (8 instead of 16 warps per SM at 128 threads a block), for a search that
        // runs once per token while the table build above runs K / 32 times.
#pragma unroll 1
        for (int i = 0; i < kWarp / (2 * bit); ++i) {
          const int d = bit - 1 + 2 * bit * i;
          const int him = (d & mask) | (lane & ~mask);
          const int his_base = __shfl_sync(kFullMask, block_base, him);
          const float t = __shfl_sync(kFullMask, p[his_base + d], lane ^ flip);
          if (((lane ^ d) & mask) == 0) y = t;
        }
        // The half this lane's y covers: [start, start + bit) with start the decided bits, plus
        // bit for the upper half.
        const int start = ((flip ^ lane) & mask) + (lane & bit);
        if (own_here >= start && own_here < start + bit) y = __fsub_rn(y, delta);
        const float mid = (lane & bit) ? __fsub_rn(high, y) : __fadd_rn(low, y);
        if (x < mid) {
          high = mid;
          flip ^= bit & lane;
        } else {
          low = mid;
          flip ^= bit & ~lane;
        }
      }
      topic = block_base + (flip ^ lane);
    }
    // Alg. 9 lines 13-17: x below the remnant's end (possible only when the first block was
    // chosen) or no block at all (K < 32): linear search of the remnant.
    if (n_remnant > 0 &&
        (n_blocks == 0 || (lo == 0 && x < adjusted(p[n_remnant - 1], n_remnant - 1)))) {
      int k = 0;
      while (k < n_remnant && !(x < adjusted(p[k], k))) ++k;
      topic = k < n_remnant ? k : n_topics - 1;
    }
    if (tk.store) {
      z[tk.t] = topic;
      count_draw(next_row(A_next, ln.doc, n_topics), B_next, my_off, topic, tk.w);
    }
  }
}

// Registers: on sm_80 to sm_89 this kernel sat at exactly 128 registers before the fused M-step's
// counting; its atomics lift it to 170 there (capped at 128 it spills), so 8 instead of 16 warps
// an SM at 128 threads a block. sm_75 and sm_90 (H100, H200) stay at 128.
// sample_dense_transpose (Alg. 4 with Fig. 2): the same transposed loads, then the block is
// transposed in registers, (W/2) log2 W = 80 __shfl_xor, so that lane r holds terms j..j+31 of
// its own distribution; the running sums go to a full table, searched with Alg. 3.
// Requires full warps executing together (blockDim % 32 == 0).
extern "C" __global__ void __launch_bounds__(kDenseBlockMax)
    sample_dense_transpose(const int* __restrict__ doc_order, int n_order,
                           const long long* __restrict__ doc_ptr, const int* __restrict__ word,
                           const float* __restrict__ weight, const float* __restrict__ A,
                           const float* __restrict__ bhat, const float* __restrict__ alpha,
                           const float* __restrict__ B, const double* __restrict__ denom,
                           double beta, unsigned seed, unsigned iteration, unsigned stream,
                           unsigned sweep, int* z, int n_topics, float* A_next, float* B_next) {
  if (n_topics < 1 || n_topics > kDenseMaxTopics) return;
  DenseLane ln;
  if (!dense_lane_setup(doc_order, n_order, doc_ptr, ln)) return;
  const int lane = lane_id();
  const int n_remnant = n_topics % kWarp;
  float theta[kDenseMaxTopics];
  cache_theta(theta, A, ln.doc, n_remnant, n_topics, alpha);
  float p[kDenseMaxTopics];  // running sums C[0..K-1]

  for (int step = 0; step < ln.n_steps; ++step) {
    const DenseToken tk = dense_token(ln, step, word, z, weight, seed, iteration, stream, sweep);
    // Before the table: it needs none of it, and then only one float stays live through the loop.
    const float delta =
        own_delta(row_ptr(A, ln.doc, n_topics), alpha, bhat, WordCounts{B, denom, beta},
                  static_cast<unsigned>(tk.word) * static_cast<unsigned>(n_topics), tk.own, tk.w);
    unsigned word_off[kWarp];
    const unsigned my_off = share_word_offsets(word_off, tk.word, n_topics);
    float sum = remnant_sums(theta, bhat + my_off, n_remnant, p);
    for (int j = n_remnant; j < n_topics; j += kWarp) {
      float a[kWarp];
      load_block_transposed(a, theta, bhat, word_off, j);
      transpose_in_registers(a, lane);
#pragma unroll
      for (int k = 0; k < kWarp; ++k) {
        sum = __fadd_rn(sum, a[k]);
        p[j + k] = sum;
      }
    }
    const OwnCount own = own_count(p, delta, tk.own);
    const float x = __fmul_rn(tk.u, fmaxf(__fsub_rn(sum, own.delta), 0.0f));
    const int topic = binary_search(p, n_topics, x, own);
    if (tk.store) {
      z[tk.t] = topic;
      count_draw(next_row(A_next, ln.doc, n_topics), B_next, my_off, topic, tk.w);
    }
  }
}

// sample_dense_plain (Alg. 1 + Alg. 3): each thread walks its document's tokens alone, reading
// its own A row and the token's Bhat row sequentially (32 unrelated rows per warp load), building
// the running sums and searching them. No shuffles, so lanes may finish at different times.
extern "C" __global__ void __launch_bounds__(kDenseBlockMax)
    sample_dense_plain(const int* __restrict__ doc_order, int n_order,
                       const long long* __restrict__ doc_ptr, const int* __restrict__ word,
                       const float* __restrict__ weight, const float* __restrict__ A,
                       const float* __restrict__ bhat, const float* __restrict__ alpha,
                       const float* __restrict__ B, const double* __restrict__ denom, double beta,
                       unsigned seed, unsigned iteration, unsigned stream, unsigned sweep, int* z,
                       int n_topics, float* A_next, float* B_next) {
  if (n_topics < 1 || n_topics > kDenseMaxTopics) return;
  const long long e = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= n_order) return;
  const int doc = doc_order[e];
  const long long t0 = doc_ptr[doc], t1 = doc_ptr[doc + 1];
  const float* a_row = row_ptr(A, doc, n_topics);
  float* const a_next = next_row(A_next, doc, n_topics);
  float p[kDenseMaxTopics];
  for (long long t = t0; t < t1; ++t) {
    const float* b_row = row_ptr(bhat, word[t], n_topics);
    float sum = 0.0f;
    for (int k = 0; k < n_topics; ++k) {
      sum = __fadd_rn(sum, dense_term(__ldg(a_row + k), __ldg(alpha + k), __ldg(b_row + k)));
      p[k] = sum;
    }
    const int own_topic = z[t];
    const unsigned b_off = static_cast<unsigned>(word[t]) * static_cast<unsigned>(n_topics);
    const float w = weight != nullptr ? weight[t] : 1.0f;
    const OwnCount own =
        own_count(p, own_delta(a_row, alpha, bhat, WordCounts{B, denom, beta}, b_off, own_topic, w),
                  own_topic);
    const float u = bits_to_uniform(token_bits(seed, iteration, stream, t, sweep));
    const int topic =
        binary_search(p, n_topics, __fmul_rn(u, fmaxf(__fsub_rn(sum, own.delta), 0.0f)), own);
    z[t] = topic;
    count_draw(a_next, B_next, b_off, topic, w);
  }
}

// sample_dense_long: the transpose kernel's arithmetic with the work turned around for long
// documents. A group of consecutive warps takes one document: warps warp_ptr[e] ..
// warp_ptr[e + 1] - 1 (n_order + 1 ascending offsets, warp_ptr[0] = 0) take doc_order[e], so a
// document's group follows its own length: one uniform group sized by the mean length leaves
// the longest document of a skewed corpus (20 Newsgroups) a critical path of hundreds of chunks.
// Each warp walks the document 32 tokens at a time, lane r taking token 32 c + r of chunk c, for
// the chunks c = part, part + group, ... (part: the warp's place in its group). All lanes share
// the document, so theta = A[d] + alpha is one row per warp in shared memory, read as
// theta[j + lane] where the thread-per-document kernel reads its transposed copy: the same
// float32 values in the same operations, hence the same draw for every token (the oracle's, bit
// for bit) whichever thread draws it. Lanes past the document's end redo its last token and do
// not store.
// Why: a thread per document runs a warp as long as its longest document, so a corpus of a few
// thousand long documents (NIPS: 1,500) fills a fraction of the GPU; a warp per document gives
// it 32 times the threads, and a group of several warps more again.
// Launch: block = a multiple of 32 threads up to kDenseBlockMax, grid = ceil(warp_ptr[n_order] /
//   warps per block); dynamic shared memory 2 * K floats per warp (theta, then the warp's count
//   of its document's new topics). Arguments otherwise as the kernels above; with A_next the
//   warp's counts go to A_next[d] with one atomic per non-zero topic at its end (several warps
//   may share a document), so the per-token atomics on one row stay in shared memory.
//   iteration_word, beta_word (nullable): device words read instead of iteration and beta.
extern "C" __global__ void __launch_bounds__(kDenseBlockMax) sample_dense_long(
    const int* __restrict__ doc_order, int n_order, const int* __restrict__ warp_ptr,
    const long long* __restrict__ doc_ptr, const int* __restrict__ word,
    const float* __restrict__ weight, const float* __restrict__ A, const float* __restrict__ bhat,
    const float* __restrict__ alpha, const float* __restrict__ B, const double* __restrict__ denom,
    double beta_value, unsigned seed, unsigned iteration_value, unsigned stream, unsigned sweep,
    int* z, int n_topics, float* A_next, float* B_next, const unsigned* __restrict__ iteration_word,
    const double* __restrict__ beta_word) {
  if (n_topics < 1 || n_topics > kDenseMaxTopics) return;
  // A sweep replayed as a CUDA graph reads the iteration and beta from device words, which the
  // host moves on between replays (sklearn_gpulda/backends/cuda/sparse/sweep_graph.py).
  const unsigned iteration = iteration_word != nullptr ? *iteration_word : iteration_value;
  const double beta = beta_word != nullptr ? *beta_word : beta_value;
  extern __shared__ float dense_long_shared[];
  const int lane = lane_id();
  float* const theta = dense_long_shared + 2 * (threadIdx.x / kWarp) * n_topics;
  float* const counts = theta + n_topics;
  const long long warp = (static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp;
  if (warp >= warp_ptr[n_order]) return;  // warp-uniform
  // The entry whose warps hold this one (every document has at least one warp).
  const int e = gpulda::last_at_most(warp_ptr, n_order, warp);
  const int part = static_cast<int>(warp - warp_ptr[e]);
  const int group = warp_ptr[e + 1] - warp_ptr[e];
  const int doc = doc_order[e];
  const long long t0 = doc_ptr[doc];
  const long long len = doc_ptr[doc + 1] - t0;
  const float* a_row = row_ptr(A, doc, n_topics);
  for (int k = lane; k < n_topics; k += kWarp) {
    theta[k] = __fadd_rn(__ldg(a_row + k), __ldg(alpha + k));
    counts[k] = 0.0f;
  }
  __syncwarp();
  const int n_remnant = n_topics % kWarp;
  float p[kDenseMaxTopics];  // running sums C[0..K-1]
  const long long n_chunks = (len + kWarp - 1) / kWarp;
  for (long long c = part; c < n_chunks; c += group) {
    const long long i = c * kWarp + lane;
    const bool store = i < len;
    const long long t = t0 + (store ? i : len - 1);
    const int w_id = word[t];
    const int own_topic = z[t];
    const float w = weight != nullptr ? weight[t] : 1.0f;
    const float u = bits_to_uniform(token_bits(seed, iteration, stream, t, sweep));
    const float delta =
        own_delta(a_row, alpha, bhat, WordCounts{B, denom, beta},
                  static_cast<unsigned>(w_id) * static_cast<unsigned>(n_topics), own_topic, w);
    unsigned word_off[kWarp];
    const unsigned my_off = share_word_offsets(word_off, w_id, n_topics);
    float sum = remnant_sums(theta, bhat + my_off, n_remnant, p);
    for (int j = n_remnant; j < n_topics; j += kWarp) {
      // load_block_transposed with every lane's document the same: register k of lane r is
      // theta[j + r] * Bhat[word of lane k, j + r].
      const float theta_here = theta[j + lane];
      const float* col = bhat + j + lane;
      float a[kWarp];
#pragma unroll
      for (int k = 0; k < kWarp; ++k) a[k] = __fmul_rn(theta_here, __ldg(col + word_off[k]));
      transpose_in_registers(a, lane);
#pragma unroll
      for (int k = 0; k < kWarp; ++k) {
        sum = __fadd_rn(sum, a[k]);
        p[j + k] = sum;
      }
    }
    const OwnCount own = own_count(p, delta, own_topic);
    const float x = __fmul_rn(u, fmaxf(__fsub_rn(sum, own.delta), 0.0f));
    const int topic = binary_search(p, n_topics, x, own);
    if (store) {
      z[t] = topic;
      count_draw(A_next == nullptr ? nullptr : counts, B_next, my_off, topic, w);
    }
  }
  if (A_next == nullptr) return;
  __syncwarp();
  float* const out = next_row(A_next, doc, n_topics);
  for (int k = lane; k < n_topics; k += kWarp) {
    const float v = counts[k];
    if (v != 0.0f) atomicAdd(out + k, v);
  }
}
