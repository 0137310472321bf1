// M-step of ESCA on one chunk: the word-topic counts B by atomics (SaberLDA 3.3, first paragraph),
// the sparse document-topic rows A rebuilt by shuffle and segmented count (SaberLDA 3.3, Fig. 8),
// and the topic totals n[k] in float64.
//
// Shuffle: PDOW position p holds canonical token t0 + doc_off[doc[p]] + place[p]; since
// canonical order is document-major, writing each topic to its canonical slot groups the
// tokens by document (coalesced reads, one scattered write per token). A row lives at the
// document's first canonical slot plus 31 per earlier document (entry.cuh).
// Segmented count: per document, sort (topic, position) keys in shared memory and run-length
// encode them, which yields the row already sorted by topic as the sampler requires.

#include "device_word.cuh"
#include "entry.cuh"
#include "rare_rows.cuh"
#include "search.cuh"
#include "tree.cuh"
#include "warp.cuh"

namespace gpulda {

// Short documents: one warp each, keys in shared memory. 10 bits of key hold the position.
constexpr int kShortDocBits = 10;
static_assert(kShortDocMax == 1 << kShortDocBits,
              "a short document's positions fill the key's low bits");
constexpr int kCountWarps = kCountBlock / kWarp;
static_assert(kCountBlock % kWarp == 0, "count block must be whole warps");
static_assert((kMaxTopics - 1) < (1u << (32 - kShortDocBits)),
              "topic and position must share one 32-bit key");
static_assert(kShortDocMax * kCountWarps * 4 <= 48 * 1024,
              "short-document keys must fit static shared memory");
// Resident blocks per SM the short-document kernel asks registers for (16 KB of keys per block).
constexpr int kCountBlocksPerSm = 12;

template <typename TopicT, bool kPacked>
__device__ __forceinline__ void rebuild_short(
    const int* __restrict__ docs, int n_docs, const int* __restrict__ doc_off,
    const int* __restrict__ doc_len, const int* __restrict__ row_off,
    const TopicT* __restrict__ z_can, const float* __restrict__ weight, int2* __restrict__ a_row,
    typename AEntry<kPacked>::T* __restrict__ a_ent) {
  __shared__ unsigned s_keys[kCountWarps][kShortDocMax];
  const int lane = lane_id();
  const int warp = threadIdx.x / kWarp;
  unsigned* keys = s_keys[warp];
  const int gw = blockIdx.x * kCountWarps + warp;
  const int n_warps = gridDim.x * kCountWarps;
  for (int i_doc = gw; i_doc < n_docs; i_doc += n_warps) {
    const int d = docs[i_doc];
    const int off = doc_off[d];
    const int n = doc_len[d];
    const int row = row_off[d];
    int n_pad = kWarp;
    while (n_pad < n) n_pad <<= 1;
    for (int i = lane; i < n_pad; i += kWarp)
      keys[i] = i < n ? (static_cast<unsigned>(z_can[off + i]) << kShortDocBits) |
                            static_cast<unsigned>(i)
                      : 0xffffffffu;
    __syncwarp();
    // Bitonic sort; keys are unique apart from the padding, which sorts last.
    for (int size = 2; size <= n_pad; size <<= 1) {
      for (int stride = size >> 1; stride > 0; stride >>= 1) {
        for (int i = lane; i < (n_pad >> 1); i += kWarp) {
          const int lo = (i / stride) * 2 * stride + (i % stride);
          const int hi = lo + stride;
          const bool ascending = (lo & size) == 0;
          const unsigned a = keys[lo], b = keys[hi];
          if ((a > b) == ascending) {
            keys[lo] = b;
            keys[hi] = a;
          }
        }
        __syncwarp();
      }
    }
    // Run-length encoding in two passes over the sorted keys, so that no second per-warp array
    // is needed (shared memory per warp bounds how many warps an SM holds). Pass 1 counts runs;
    // pass 2 walks chunks last to first, carrying the first run start after the chunk, so each
    // run's start lane knows its end and its rank.
    auto is_start = [&](int i) {
      return i < n && (i == 0 || (keys[i] >> kShortDocBits) != (keys[i - 1] >> kShortDocBits));
    };
    int n_runs = 0;
    for (int base = 0; base < n; base += kWarp)
      n_runs += __popc(__ballot_sync(kFullMask, is_start(base + lane)));
    int after = n, runs_after = 0;
    for (int base = ((n - 1) / kWarp) * kWarp; base >= 0; base -= kWarp) {
      const int i = base + lane;
      const bool start = is_start(i);
      const unsigned m = __ballot_sync(kFullMask, start);
      if (start) {
        const unsigned higher = m & ~((2u << lane) - 1u);
        const int en = higher ? base + __ffs(higher) - 1 : after;
        const int r = n_runs - runs_after - __popc(m >> lane);
        float count;
        if (weight != nullptr) {
          // Positions ascend within a run: the oracle's bincount order, in float64.
          double acc = 0.0;
          for (int q = i; q < en; ++q)
            acc += static_cast<double>(weight[off + (keys[q] & (kShortDocMax - 1))]);
          count = static_cast<float>(acc);
        } else {
          count = static_cast<float>(en - i);
        }
        a_ent[row + segment_slot(r, n_runs)] =
            AEntry<kPacked>::make(static_cast<int>(keys[i] >> kShortDocBits), count);
      }
      if (m) after = base + __ffs(m) - 1;
      runs_after += __popc(m);
    }
    if (lane == 0) a_row[d] = make_int2(row, n_runs);
    __syncwarp();  // the keys are reused by the next document
  }
}

// One document's histogram over the topic window [w0, w0 + wn) in shared memory. Whole block;
// ends with __syncthreads.
template <typename TopicT>
__device__ __forceinline__ void window_histogram(float* hist, const TopicT* __restrict__ z,
                                                 const float* __restrict__ weight, int n, int w0,
                                                 int wn) {
  for (int k = threadIdx.x; k < wn; k += blockDim.x) hist[k] = 0.0f;
  __syncthreads();
  if (weight != nullptr) {
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
      const int k = static_cast<int>(z[i]) - w0;
      if (static_cast<unsigned>(k) < static_cast<unsigned>(wn)) atomicAdd(&hist[k], weight[i]);
    }
  } else {
    // Integer counts: the lanes of a warp that hold one topic add their number once. A long
    // document's tokens crowd a few topics, and one-by-one atomics on a shared bin serialise
    // (a 12,000-token post at K = 20 took half a millisecond). Sums of whole numbers below 2^24
    // are exact in any grouping, so the histogram is the same.
    const int lane = lane_id();
    for (int base = static_cast<int>(threadIdx.x) - lane; base < n; base += blockDim.x) {
      const int i = base + lane;
      int k = i < n ? static_cast<int>(z[i]) - w0 : -1;
      if (static_cast<unsigned>(k) >= static_cast<unsigned>(wn)) k = -1;
      const unsigned peers = __match_any_sync(kFullMask, k);
      if (k >= 0 && lane == __ffs(peers) - 1)
        atomicAdd(&hist[k], static_cast<float>(__popc(peers)));
    }
  }
  __syncthreads();
}

// Long documents: one block each, a histogram of `window` bins in shared memory. When K exceeds
// the window (K > 32,768: 256 KB of bins at K = 65,536 is more than a block may have) the topics
// are counted one window at a time, twice: once for the row's length, which fixes its segment
// layout, and once to write it. With one window the histogram is made once.
template <typename TopicT, bool kPacked>
__device__ __forceinline__ void rebuild_long(
    const int* __restrict__ docs, int n_docs, const int* __restrict__ doc_off,
    const int* __restrict__ doc_len, const int* __restrict__ row_off,
    const TopicT* __restrict__ z_can, const float* __restrict__ weight, int n_topics, int window,
    int2* __restrict__ a_row, typename AEntry<kPacked>::T* __restrict__ a_ent) {
  extern __shared__ float hist[];
  __shared__ int s_warp_tot[kCountWarps];
  const int lane = lane_id();
  const int warp = threadIdx.x / kWarp;
  const bool one_window = window >= n_topics;
  for (int i_doc = blockIdx.x; i_doc < n_docs; i_doc += gridDim.x) {
    const int d = docs[i_doc];
    const int off = doc_off[d];
    const int n = doc_len[d];
    const float* w_doc = weight != nullptr ? weight + off : nullptr;
    int nnz = 0;
    for (int w0 = 0; w0 < n_topics; w0 += window) {
      const int wn = min(window, n_topics - w0);
      window_histogram(hist, z_can + off, w_doc, n, w0, wn);
      for (int k0 = 0; k0 < wn; k0 += blockDim.x) {
        const int k = k0 + threadIdx.x;
        nnz += __syncthreads_count(k < wn && hist[k] != 0.0f);
      }
    }
    const int row = row_off[d];
    // Compact the non-zero bins in topic order: block-wide exclusive scan of the flags per tile.
    int written = 0;
    for (int w0 = 0; w0 < n_topics; w0 += window) {
      const int wn = min(window, n_topics - w0);
      if (!one_window) window_histogram(hist, z_can + off, w_doc, n, w0, wn);
      for (int k0 = 0; k0 < wn; k0 += blockDim.x) {
        const int k = k0 + threadIdx.x;
        const float c = k < wn ? hist[k] : 0.0f;
        const int flag = c != 0.0f;
        const int incl = warp_inclusive_scan(flag);
        if (lane == kWarp - 1) s_warp_tot[warp] = incl;
        __syncthreads();
        int before = 0, tile = 0;
        for (int w = 0; w < kCountWarps; ++w) {
          before += w < warp ? s_warp_tot[w] : 0;
          tile += s_warp_tot[w];
        }
        if (flag)
          a_ent[row + segment_slot(written + before + incl - 1, nnz)] =
              AEntry<kPacked>::make(w0 + k, c);
        written += tile;
        __syncthreads();
      }
    }
    if (threadIdx.x == 0) a_row[d] = make_int2(row, written);
    __syncthreads();
  }
}

// Small K, integer counts: one warp per document with a K-bin histogram of its own in shared
// memory. O(n + K) per document instead of the sort's O(n log^2 n); the histogram's additions
// are of 1.0, exact in any order, so the result does not depend on scheduling.
static_assert(kHistMaxTopics * 4 * kCountWarps <= 48 * 1024,
              "per-warp histograms at the largest K must fit 48 KB of dynamic shared memory");

template <typename TopicT, bool kPacked>
__device__ __forceinline__ void rebuild_hist(const int* __restrict__ docs, int n_docs,
                                             const int* __restrict__ doc_off,
                                             const int* __restrict__ doc_len,
                                             const int* __restrict__ row_off,
                                             const TopicT* __restrict__ z_can, int n_topics,
                                             int2* __restrict__ a_row,
                                             typename AEntry<kPacked>::T* __restrict__ a_ent) {
  extern __shared__ float s_hist[];
  const int lane = lane_id();
  const int warp = threadIdx.x / kWarp;
  float* hist = s_hist + warp * n_topics;
  const int gw = blockIdx.x * kCountWarps + warp;
  const int n_warps = gridDim.x * kCountWarps;
  const unsigned lt_mask = (1u << lane) - 1u;
  for (int i_doc = gw; i_doc < n_docs; i_doc += n_warps) {
    const int d = docs[i_doc];
    const int off = doc_off[d];
    const int n = doc_len[d];
    const int row = row_off[d];
    for (int k = lane; k < n_topics; k += kWarp) hist[k] = 0.0f;
    __syncwarp();
    for (int i = lane; i < n; i += kWarp) atomicAdd(&hist[z_can[off + i]], 1.0f);
    __syncwarp();
    // The row's length fixes its segment layout: count the non-zero bins, then write them.
    int nnz = 0;
    for (int k0 = 0; k0 < n_topics; k0 += kWarp) {
      const int k = k0 + lane;
      nnz += __popc(__ballot_sync(kFullMask, k < n_topics && hist[k] != 0.0f));
    }
    int written = 0;
    for (int k0 = 0; k0 < n_topics; k0 += kWarp) {
      const int k = k0 + lane;
      const float c = k < n_topics ? hist[k] : 0.0f;
      const unsigned m = __ballot_sync(kFullMask, c != 0.0f);
      if (c != 0.0f)
        a_ent[row + segment_slot(written + __popc(m & lt_mask), nnz)] = AEntry<kPacked>::make(k, c);
      written += __popc(m);
    }
    if (lane == 0) a_row[d] = make_int2(row, nnz);
    __syncwarp();  // the histogram is reused by the next document
  }
}

// Large K, integer counts, short documents: a presence bitmap of the K topics instead of a K-bin
// histogram. Marking the tokens' topics, a scan of the bitmap words' popcounts, and one counter per
// present topic cost O(n + K / 32) per document, where the bitonic sort costs O(n log^2 n) and a
// full histogram O(K). The bitmap's word order is topic order, so walking it emits the row sorted.
// Counts are integers added with integer atomics: exact and independent of scheduling.
// At K = 32,768 a block's bitmaps, word prefixes and counters fit the 48 KB any GPU gives; above
// that the launcher raises the kernel's limit (80 KB at K = 65,536).
static_assert(kCountWarps * (2 * (32768 / 32) + kShortDocMax) * 4 <= 48 * 1024,
              "per-warp bitmap, word prefixes and counters at K = 32,768 must fit 48 KB");

template <typename TopicT, bool kPacked>
__device__ __forceinline__ void rebuild_bitmap(const int* __restrict__ docs, int n_docs,
                                               const int* __restrict__ doc_off,
                                               const int* __restrict__ doc_len,
                                               const int* __restrict__ row_off,
                                               const TopicT* __restrict__ z_can, int n_topics,
                                               int2* __restrict__ a_row,
                                               typename AEntry<kPacked>::T* __restrict__ a_ent) {
  extern __shared__ unsigned s_bitmap_area[];
  const int n_words = (n_topics + 31) >> 5;
  const int lane = lane_id();
  const int warp = threadIdx.x / kWarp;
  unsigned* bits = s_bitmap_area + warp * (2 * n_words + kShortDocMax);
  int* before = reinterpret_cast<int*>(bits + n_words);  // present topics in earlier words
  unsigned* count = bits + 2 * n_words;                  // one counter per present topic
  const int gw = blockIdx.x * kCountWarps + warp;
  const int n_warps = gridDim.x * kCountWarps;
  for (int i_doc = gw; i_doc < n_docs; i_doc += n_warps) {
    const int d = docs[i_doc];
    const int off = doc_off[d];
    const int n = doc_len[d];
    const int row = row_off[d];
    for (int j = lane; j < n_words; j += kWarp) bits[j] = 0u;
    __syncwarp();
    for (int i = lane; i < n; i += kWarp) {
      const int k = static_cast<int>(z_can[off + i]);
      atomicOr(&bits[k >> 5], 1u << (k & 31));
    }
    __syncwarp();
    int nnz = 0;
    for (int base = 0; base < n_words; base += kWarp) {
      const int j = base + lane;
      const int c = j < n_words ? __popc(bits[j]) : 0;
      const int incl = warp_inclusive_scan(c);
      if (j < n_words) before[j] = nnz + incl - c;
      nnz += __shfl_sync(kFullMask, incl, kWarp - 1);
    }
    for (int r = lane; r < nnz; r += kWarp) count[r] = 0u;
    __syncwarp();
    for (int i = lane; i < n; i += kWarp) {
      const int k = static_cast<int>(z_can[off + i]);
      const int r = before[k >> 5] + __popc(bits[k >> 5] & ((1u << (k & 31)) - 1u));
      atomicAdd(&count[r], 1u);
    }
    __syncwarp();
    // Each lane walks its own bitmap words; a word's present topics take consecutive ranks.
    for (int j = lane; j < n_words; j += kWarp) {
      unsigned w = bits[j];
      int r = before[j];
      while (w) {
        const int b = __ffs(w) - 1;
        a_ent[row + segment_slot(r, nnz)] =
            AEntry<kPacked>::make(j * 32 + b, static_cast<float>(count[r]));
        ++r;
        w &= w - 1u;
      }
    }
    if (lane == 0) a_row[d] = make_int2(row, nnz);
    __syncwarp();  // the bitmap is reused by the next document
  }
}

}  // namespace gpulda

// ---------------------------------------------------------------------------------------------
// scatter_topics_{u16_packed,u16_wide,i32_wide}: the shuffle. z_can[doc_off[doc[p]] + place[p]]
//      = z[p]. gather_topics_*: the other way, z[p] = z_can[doc_off[doc[p]] + place[p]].
// Launch: 1-D, >= n threads. [in] z or z_can, place (uint16 packed, uint32 wide) and doc (PDOW
//      order), doc_off (first canonical slot of each document minus t0); [out] the other.
// ---------------------------------------------------------------------------------------------
// rebuild_a_short_{u16_packed,u16_wide,i32_wide}: A rows of documents with at most 1,024 tokens.
// Launch: grid any (warp-strided over `docs`), block kCountBlock, no dynamic shared memory.
// [in] docs (indices of the short documents), doc_off (first canonical slot minus t0), doc_len,
//      row_off (first slot of the row in a_ent: doc_off[d] + 31 d), z_can, weight (canonical minus
//      t0, or nullptr).
// [out] a_row[d] = (row_off[d], nnz); entry e of the row (topic order) at a_ent[row_off[d] +
//       segment_slot(e, nnz)], in the AEntry format of the suffix (entry.cuh).
// NumPy: row = np.bincount(z_can[off:off+n], weights, minlength=K); nz = row.nonzero()[0].
// rebuild_a_long_*: the same for longer documents, one block each with a shared histogram of
//      `window` bins (min(K, kLongHistWindow); several windows in turn when K is larger):
//      dynamic shared memory window * 4 bytes. Float: the histogram adds weights in
//      arrival order, exact for integer counts (all sums below 2^24), last-bit order-dependent
//      for fractional weights.
// ---------------------------------------------------------------------------------------------
// count_b_{u16,i32}: B[word, z[p]] += w for every token of every work item (B zeroed before);
//      weight (canonical minus t0) or nullptr, with place (uint32: weighted chunks are wide),
//      doc and doc_off locating a token's weight (read only with weights);
//      the work items keep each word's tokens together, so a block's atomics hit one row.
//      Words from n_dense on are rare (hybrid storage, rare_rows.cuh): their tokens count into
//      their rows of `rare` (slots zeroed before; every weight 1), B holding n_dense rows.
// Launch: grid any (block-strided over items), block any. Exact for integer counts.
// ---------------------------------------------------------------------------------------------
namespace gpulda {
// Topic of PDOW position p between its PDOW array and its canonical one: src[p] to dst[t]
// (kToCanonical) or src[t] to dst[p], t = doc_off[doc[p]] + place[p].
template <bool kToCanonical, typename TopicT, typename PlaceT>
__device__ __forceinline__ void move_topics(const TopicT* __restrict__ src,
                                            const PlaceT* __restrict__ place,
                                            const int* __restrict__ doc,
                                            const int* __restrict__ doc_off, long long n,
                                            TopicT* __restrict__ dst) {
  const long long p = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (p >= n) return;
  const unsigned t = static_cast<unsigned>(doc_off[doc[p]]) + static_cast<unsigned>(place[p]);
  if (kToCanonical) {
    dst[t] = src[p];
  } else {
    dst[p] = src[t];
  }
}
}  // namespace gpulda

#define GPULDA_ORDER(SUFFIX, TOPIC_T, PLACE_T)                                                  \
  extern "C" __global__ void scatter_topics_##SUFFIX(const TOPIC_T* z, const PLACE_T* place,    \
                                                     const int* doc, const int* doc_off,        \
                                                     long long n, TOPIC_T* z_can) {             \
    gpulda::move_topics<true>(z, place, doc, doc_off, n, z_can);                                \
  }                                                                                             \
  extern "C" __global__ void gather_topics_##SUFFIX(const TOPIC_T* z_can, const PLACE_T* place, \
                                                    const int* doc, const int* doc_off,         \
                                                    long long n, TOPIC_T* z) {                  \
    gpulda::move_topics<false>(z_can, place, doc, doc_off, n, z);                               \
  }
GPULDA_ORDER(u16_packed, unsigned short, unsigned short)
GPULDA_ORDER(u16_wide, unsigned short, unsigned)
GPULDA_ORDER(i32_wide, int, unsigned)

#define GPULDA_COUNTS(SUFFIX, TOPIC_T)                                                          \
  extern "C" __global__ void count_b_##SUFFIX(                                                  \
      const int4* __restrict__ items, int n_items, const TOPIC_T* __restrict__ z,               \
      const unsigned* __restrict__ place, const int* __restrict__ doc,                          \
      const int* __restrict__ doc_off, const float* __restrict__ weight, int n_topics,          \
      float* __restrict__ B, int n_dense, unsigned* __restrict__ rare,                          \
      const long long* __restrict__ rare_off) {                                                 \
    for (int it = blockIdx.x; it < n_items; it += gridDim.x) {                                  \
      const int4 item = items[it];                                                              \
      if (item.x < n_dense) {                                                                   \
        float* row = B + static_cast<size_t>(item.x) * n_topics;                                \
        for (int p = item.y + threadIdx.x; p < item.z; p += blockDim.x)                         \
          atomicAdd(row + z[p], weight != nullptr ? weight[doc_off[doc[p]] + place[p]] : 1.0f); \
      } else {                                                                                  \
        long long o0;                                                                           \
        const unsigned cap = gpulda::rare_row(rare_off, item.x - n_dense, o0);                  \
        for (int p = item.y + threadIdx.x; p < item.z; p += blockDim.x)                         \
          gpulda::rare_insert(rare + o0, cap, static_cast<unsigned>(z[p]));                     \
      }                                                                                         \
    }                                                                                           \
  }
GPULDA_COUNTS(u16, unsigned short)
GPULDA_COUNTS(i32, int)

#define GPULDA_REBUILD(SUFFIX, TOPIC_T, PACKED)                                                    \
  extern "C" __global__ void __launch_bounds__(gpulda::kCountBlock, gpulda::kCountBlocksPerSm)     \
      rebuild_a_short_##SUFFIX(const int* __restrict__ docs, int n_docs,                           \
                               const int* __restrict__ doc_off, const int* __restrict__ doc_len,   \
                               const int* __restrict__ row_off, const TOPIC_T* __restrict__ z_can, \
                               const float* __restrict__ weight, int2* __restrict__ a_row,         \
                               void* __restrict__ a_ent) {                                         \
    gpulda::rebuild_short<TOPIC_T, PACKED>(docs, n_docs, doc_off, doc_len, row_off, z_can, weight, \
                                           a_row, static_cast<gpulda::AEntry<PACKED>::T*>(a_ent)); \
  }                                                                                                \
  extern "C" __global__ void __launch_bounds__(gpulda::kCountBlock) rebuild_a_long_##SUFFIX(       \
      const int* __restrict__ docs, int n_docs, const int* __restrict__ doc_off,                   \
      const int* __restrict__ doc_len, const int* __restrict__ row_off,                            \
      const TOPIC_T* __restrict__ z_can, const float* __restrict__ weight, int n_topics,           \
      int window, int2* __restrict__ a_row, void* __restrict__ a_ent) {                            \
    gpulda::rebuild_long<TOPIC_T, PACKED>(docs, n_docs, doc_off, doc_len, row_off, z_can, weight,  \
                                          n_topics, window, a_row,                                 \
                                          static_cast<gpulda::AEntry<PACKED>::T*>(a_ent));         \
  }
// rebuild_a_hist_*: rebuild_a_short's result for every document, for K <= kHistMaxTopics and
//      integer counts (no weight array). Dynamic shared memory kCountWarps * K * 4 bytes.
// rebuild_a_bitmap_*: rebuild_a_short's result for documents of at most kShortDocMax tokens, for
//      K > kHistMaxTopics and integer counts (no weight array). Dynamic shared memory
//      kCountWarps * (2 * ceil(K / 32) + kShortDocMax) * 4 bytes.
// Both: grid any (warp-strided over `docs`), block kCountBlock.
#define GPULDA_REBUILD_INTEGER(KIND, SUFFIX, TOPIC_T, PACKED)                                    \
  extern "C" __global__ void __launch_bounds__(gpulda::kCountBlock) rebuild_a_##KIND##_##SUFFIX( \
      const int* __restrict__ docs, int n_docs, const int* __restrict__ doc_off,                 \
      const int* __restrict__ doc_len, const int* __restrict__ row_off,                          \
      const TOPIC_T* __restrict__ z_can, int n_topics, int2* __restrict__ a_row,                 \
      void* __restrict__ a_ent) {                                                                \
    gpulda::rebuild_##KIND<TOPIC_T, PACKED>(docs, n_docs, doc_off, doc_len, row_off, z_can,      \
                                            n_topics, a_row,                                     \
                                            static_cast<gpulda::AEntry<PACKED>::T*>(a_ent));     \
  }
GPULDA_REBUILD_INTEGER(bitmap, u16_packed, unsigned short, true)
GPULDA_REBUILD_INTEGER(bitmap, u16_wide, unsigned short, false)
GPULDA_REBUILD_INTEGER(hist, u16_packed, unsigned short, true)
GPULDA_REBUILD_INTEGER(hist, u16_wide, unsigned short, false)

GPULDA_REBUILD(u16_packed, unsigned short, true)
GPULDA_REBUILD(u16_wide, unsigned short, false)
GPULDA_REBUILD(i32_wide, int, false)

// ---------------------------------------------------------------------------------------------
// a_entry_keys_{packed,wide}: every non-zero of A as one 64-bit key, (topic << 32) | bits of its
// float count, for the histograms that learn alpha (the host sorts and counts the keys; counts
// are non-negative, so their bits sort as the values do).
// Launch: grid any (warp-strided over documents), block kCountBlock, no shared memory.
// [in] a_row (n_docs x (offset, nnz)), a_ent (AEntry format of the suffix), key_off (n_docs
//      int64): the first output slot of each document, the exclusive running sum of the nnz.
// [out] keys[key_off[d] + e] for the row's entries e = 0..nnz-1, in topic order.
// NumPy: d, k = A.nonzero(); keys = k << 32 | A[d, k].view(uint32).
// ---------------------------------------------------------------------------------------------
namespace gpulda {
template <bool kPacked>
__device__ __forceinline__ void entry_keys(const int2* __restrict__ a_row,
                                           const typename AEntry<kPacked>::T* __restrict__ a_ent,
                                           const long long* __restrict__ key_off, int n_docs,
                                           unsigned long long* __restrict__ keys) {
  const int lane = lane_id();
  const int gw = (blockIdx.x * blockDim.x + threadIdx.x) / kWarp;
  const int n_warps = gridDim.x * (blockDim.x / kWarp);
  for (int d = gw; d < n_docs; d += n_warps) {
    const int2 row = a_row[d];
    const long long out = key_off[d];
    for (int e = lane; e < row.y; e += kWarp) {
      const typename AEntry<kPacked>::T ent = a_ent[row.x + segment_slot(e, row.y)];
      const unsigned bits = __float_as_uint(AEntry<kPacked>::count(ent));
      keys[out + e] = (static_cast<unsigned long long>(AEntry<kPacked>::topic(ent)) << 32) | bits;
    }
  }
}
}  // namespace gpulda

#define GPULDA_ENTRY_KEYS(SUFFIX, PACKED)                                                         \
  extern "C" __global__ void __launch_bounds__(gpulda::kCountBlock) a_entry_keys_##SUFFIX(        \
      const int2* __restrict__ a_row, const void* __restrict__ a_ent,                             \
      const long long* __restrict__ key_off, int n_docs, unsigned long long* __restrict__ keys) { \
    gpulda::entry_keys<PACKED>(a_row, static_cast<const gpulda::AEntry<PACKED>::T*>(a_ent),       \
                               key_off, n_docs, keys);                                            \
  }
GPULDA_ENTRY_KEYS(packed, true)
GPULDA_ENTRY_KEYS(wide, false)

// ---------------------------------------------------------------------------------------------
// column_partials: partial[s, k] = sum of B[v, k] over rows v of slice s, in float64, in row order.
// Launch: grid (ceil(K / blockDim.x), n_slices), block any multiple of 32.
// [in] B (V x K float32); [out] partial (n_slices x K float64). The slices are summed in a fixed
// order (topic_totals, or CuPy's sum over axis 0), so n[k] is reproducible run to run.
// ---------------------------------------------------------------------------------------------
extern "C" __global__ void column_partials(const float* __restrict__ B, int n_rows, int n_topics,
                                           int rows_per_slice, double* __restrict__ partial) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k >= n_topics) return;
  const int v0 = blockIdx.y * rows_per_slice;
  const int v1 = min(n_rows, v0 + rows_per_slice);
  double acc = 0.0;
  for (int v = v0; v < v1; ++v)
    acc += static_cast<double>(B[static_cast<size_t>(v) * n_topics + k]);
  partial[static_cast<size_t>(blockIdx.y) * n_topics + k] = acc;
}

// ---------------------------------------------------------------------------------------------
// topic_totals: totals[k] = the sum of the slices' partial sums, then denom[k] = totals[k] +
// n_words * beta (that addition and product each rounded on its own, as the host's were), plus
// extra_sums[k] where a matrix prior's seeded cells add to topic k (rounded last, as the host
// adds CellPrior.topic_sums). With partial = nullptr the totals are kept and only denom is
// computed (after a prior update).
// Integer counts only: their partial sums are integers below 2^53, so the warp's tree of
// additions is exact, the same as any order (CuPy's sum over axis 0 included).
// Launch: one warp per topic (grid ceil(K * 32 / blockDim.x), block a multiple of 32).
// [in] partial (n_slices x K float64); extra_sums (K float64, or nullptr: a scalar prior);
// [out] totals (K float64, unless partial is nullptr), denom (K float64).
// NumPy: totals = partial.sum(axis=0); denom = (totals + n_words * beta) + extra_sums.
// topic_totals_dev: the same, beta read from a device word (float64 (1,), device_word.cuh) by the
// warps that add it, for a sweep captured in a CUDA graph: a prior update writes the word in place.
// ---------------------------------------------------------------------------------------------
namespace gpulda {
template <typename BetaT>
__device__ __forceinline__ void topic_totals_impl(const double* __restrict__ partial, int n_slices,
                                                  int n_topics, int n_words, BetaT beta,
                                                  const double* __restrict__ extra_sums,
                                                  double* __restrict__ totals,
                                                  double* __restrict__ denom) {
  const int k = (blockIdx.x * blockDim.x + threadIdx.x) / gpulda::kWarp;
  const int lane = threadIdx.x % gpulda::kWarp;
  if (k >= n_topics) return;
  double total;
  if (partial != nullptr) {
    double mine = 0.0;
    for (int s = lane; s < n_slices; s += gpulda::kWarp)
      mine += partial[static_cast<size_t>(s) * n_topics + k];
    total = gpulda::warp_sum(mine);
    if (lane == 0) totals[k] = total;
  } else {
    total = totals[k];
  }
  if (lane == 0) {
    const double d =
        __dadd_rn(total, __dmul_rn(static_cast<double>(n_words), gpulda::word_value(beta)));
    denom[k] = extra_sums != nullptr ? __dadd_rn(d, extra_sums[k]) : d;
  }
}
}  // namespace gpulda

extern "C" __global__ void topic_totals(const double* __restrict__ partial, int n_slices,
                                        int n_topics, int n_words, double beta,
                                        const double* __restrict__ extra_sums,
                                        double* __restrict__ totals, double* __restrict__ denom) {
  gpulda::topic_totals_impl(partial, n_slices, n_topics, n_words, beta, extra_sums, totals, denom);
}
extern "C" __global__ void topic_totals_dev(const double* __restrict__ partial, int n_slices,
                                            int n_topics, int n_words,
                                            const double* __restrict__ beta,
                                            const double* __restrict__ extra_sums,
                                            double* __restrict__ totals,
                                            double* __restrict__ denom) {
  gpulda::topic_totals_impl(partial, n_slices, n_topics, n_words, beta, extra_sums, totals, denom);
}

// ---------------------------------------------------------------------------------------------
// seed_cells: a matrix topic-word prior's seeded cells (doc/algorithm.md, "A matrix topic-word
// prior") as pseudo-counts of a dense word-major B, for the E-step and the log-likelihood: the
// samplers build Bhat[v, k] = (B[v, k] + beta) / denom[k] from B, so B[v, k] + extra[k, v] there
// gives the matrix prior's Bhat with no change to them. saved[i] = B at cell i (the count, for
// unseed_cells and for learning beta); with extra non-null, B[cell] = float32(double(B) +
// extra[i]). The cells are distinct, so no two threads touch one value.
// Launch: grid any (grid-strided), block any. [in] rows, topics (n int32: the cell's row of B and
// its topic), extra (n float64, or nullptr: only read the counts); [in/out] B (rows x K float32);
// [out] saved (n float32).
// NumPy: saved = B[rows, topics]; B[rows, topics] = (saved + extra).astype(float32).
// ---------------------------------------------------------------------------------------------
extern "C" __global__ void seed_cells(float* __restrict__ B, int n_topics,
                                      const int* __restrict__ rows, const int* __restrict__ topics,
                                      const double* __restrict__ extra, long long n,
                                      float* __restrict__ saved) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    const size_t cell = static_cast<size_t>(rows[i]) * n_topics + topics[i];
    const float b = B[cell];
    saved[i] = b;
    if (extra != nullptr) B[cell] = static_cast<float>(__dadd_rn(static_cast<double>(b), extra[i]));
  }
}

// ---------------------------------------------------------------------------------------------
// unseed_cells: B[cell i] = saved[i], the counts seed_cells kept (B exactly as counted again).
// Launch, rows and topics as seed_cells. [in] saved (n float32); [in/out] B.
// NumPy: B[rows, topics] = saved.
// ---------------------------------------------------------------------------------------------
extern "C" __global__ void unseed_cells(float* __restrict__ B, int n_topics,
                                        const int* __restrict__ rows,
                                        const int* __restrict__ topics,
                                        const float* __restrict__ saved, long long n) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    B[static_cast<size_t>(rows[i]) * n_topics + topics[i]] = saved[i];
  }
}

// ---------------------------------------------------------------------------------------------
// rare_topic_totals: totals[k] += the counts of topic k over every occupied slot of the rare rows
// (hybrid storage, rare_rows.cuh). Integer additions, so the result does not depend on order.
// Launch: grid any (grid-strided), block any. [in] slots (n uint32); [in/out] totals (K uint64).
// NumPy: hybrid_table.entries, then bincount(topic, weights=count, minlength=K).
// ---------------------------------------------------------------------------------------------
extern "C" __global__ void rare_topic_totals(const unsigned* __restrict__ slots, long long n,
                                             unsigned long long* __restrict__ totals) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    const unsigned s = slots[i];
    if (s != 0u) {
      atomicAdd(totals + gpulda::rare_slot_topic(s),
                static_cast<unsigned long long>(gpulda::rare_slot_count(s)));
    }
  }
}

// ---------------------------------------------------------------------------------------------
// rare_add_to_whole: whole[n_dense + r, k] += c for every occupied slot (k, c) of rare row r, the
// row found by binary search of the slot's index in offsets. Averaging's running sum of a hybrid
// B held as one (V, K) float64 table (hybrid.HybridSum): a (word, topic) occupies one slot of a B,
// so no two threads add to one cell and the sums are exact integers.
// Launch: grid any (grid-strided), block any. [in] slots (n uint32); [in] offsets (n_rare + 1
// int64, offsets[0] = 0, offsets[n_rare] = n); [in/out] whole ((n_dense + n_rare) x K float64).
// NumPy: word, topic, count = hybrid_table.entries(...); whole[word, topic] += count.
// ---------------------------------------------------------------------------------------------
extern "C" __global__ void rare_add_to_whole(const unsigned* __restrict__ slots, long long n,
                                             const long long* __restrict__ offsets, int n_rare,
                                             int n_dense, int n_topics,
                                             double* __restrict__ whole) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    const unsigned s = slots[i];
    if (s == 0u) continue;
    // The rare row r with offsets[r] <= i < offsets[r + 1].
    const int lo = gpulda::last_at_most(offsets, n_rare, i);
    const long long cell =
        static_cast<long long>(n_dense + lo) * n_topics + gpulda::rare_slot_topic(s);
    whole[cell] += static_cast<double>(gpulda::rare_slot_count(s));
  }
}

// ---------------------------------------------------------------------------------------------
// prior_row: prior[k] = beta / denom[k], divided in float64 and rounded once: the Bhat of a cell
// whose count is 0, exactly as the sampler's dense row load computes it (sample_sparse.cu), so a
// rare word's row built from it and its occupied slots equals its dense row bit for bit.
// Launch: 1-D, >= K threads. [in] denom (K float64); [out] prior (K float32).
// ---------------------------------------------------------------------------------------------
extern "C" __global__ void prior_row(const double* __restrict__ denom, double beta, int n_topics,
                                     float* __restrict__ prior) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n_topics) prior[k] = static_cast<float>(__ddiv_rn(__dadd_rn(0.0, beta), denom[k]));
}

// ---------------------------------------------------------------------------------------------
// prior_levels: the first levels of the prior row's tree over alpha_k * prior[k] (tree.cuh,
// first_levels), which the hybrid sampler patches for each rare word instead of building
// its tree over all K leaves: tile totals, their group-local running sums, group totals.
// Launch: one block of a multiple of 32 threads (1,024). [in] prior (K float32), alpha (K
// float32); [out] levels (2 tree_tiles(K) + tree_groups(K) float32), in that order.
// ---------------------------------------------------------------------------------------------
extern "C" __global__ void prior_levels(const float* __restrict__ prior,
                                        const float* __restrict__ alpha, int n_topics,
                                        float* __restrict__ levels) {
  const int n_tiles = gpulda::tree_tiles(n_topics);
  gpulda::first_levels(prior, alpha, n_topics, levels, levels + n_tiles, levels + 2 * n_tiles);
}

// ---------------------------------------------------------------------------------------------
// value_histogram: how many entries of a float array hold each integer value 1 .. n_bins - 1
// (the beta histogram of B); every other non-zero entry (a larger or a fractional value) is
// appended to the overflow list, in no particular order.
// Launch: grid any (grid-strided), block any, shared memory n_bins * 4 bytes.
// [in] values (n floats, non-negative); [in/out] table (n_bins uint64, zeroed by the caller, bin
// 0 unused), n_overflow (1 uint64, zeroed); [out] overflow[0 .. min(n_overflow, capacity)).
// NumPy: v = values[values != 0]; small = (v < n_bins) & (v == floor(v));
//        table = bincount(v[small]); overflow = v[~small].
// ---------------------------------------------------------------------------------------------
extern "C" __global__ void value_histogram(const float* __restrict__ values, long long n,
                                           int n_bins, unsigned long long* __restrict__ table,
                                           float* __restrict__ overflow,
                                           unsigned long long* __restrict__ n_overflow,
                                           long long capacity) {
  extern __shared__ unsigned int bins[];
  for (int i = threadIdx.x; i < n_bins; i += blockDim.x) bins[i] = 0u;
  __syncthreads();
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const float x = values[i];
    if (x == 0.0f) continue;
    if (x < static_cast<float>(n_bins) && x == floorf(x)) {
      atomicAdd(&bins[static_cast<int>(x)], 1u);
    } else {
      const unsigned long long slot = atomicAdd(n_overflow, 1ull);
      if (slot < static_cast<unsigned long long>(capacity)) overflow[slot] = x;
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < n_bins; i += blockDim.x) {
    if (bins[i]) atomicAdd(&table[i], static_cast<unsigned long long>(bins[i]));
  }
}

// ---------------------------------------------------------------------------------------------
// a_entry_histogram_{packed,wide}: the alpha histogram straight from A's rows, without listing
// its keys: table[topic * n_bins + c] counts the entries of an integer count c in
// 1 .. n_bins - 1; every other entry is appended to the overflow list as its key
// ((topic << 32) | float bits of the count, as a_entry_keys makes it), in no particular order.
// Launch: grid any (warp-strided over documents), block kCountBlock, no shared memory.
// [in] a_row, a_ent (AEntry format of the suffix); [in/out] table (n_topics x n_bins uint64,
// zeroed by the caller), n_overflow (1 uint64, zeroed); [out] overflow[0 .. min(n_overflow,
// capacity)).
// ---------------------------------------------------------------------------------------------
namespace gpulda {
template <bool kPacked>
__device__ __forceinline__ void entry_histogram(
    const int2* __restrict__ a_row, const typename AEntry<kPacked>::T* __restrict__ a_ent,
    int n_docs, int n_bins, unsigned long long* __restrict__ table,
    unsigned long long* __restrict__ overflow, unsigned long long* __restrict__ n_overflow,
    long long capacity) {
  const int lane = lane_id();
  const int gw = (blockIdx.x * blockDim.x + threadIdx.x) / kWarp;
  const int n_warps = gridDim.x * (blockDim.x / kWarp);
  for (int d = gw; d < n_docs; d += n_warps) {
    const int2 row = a_row[d];
    for (int e = lane; e < row.y; e += kWarp) {
      const typename AEntry<kPacked>::T ent = a_ent[row.x + segment_slot(e, row.y)];
      const float x = AEntry<kPacked>::count(ent);
      const unsigned long long topic = static_cast<unsigned long long>(AEntry<kPacked>::topic(ent));
      if (x < static_cast<float>(n_bins) && x == floorf(x)) {
        atomicAdd(&table[topic * static_cast<unsigned long long>(n_bins) + static_cast<int>(x)],
                  1ull);
      } else {
        const unsigned long long slot = atomicAdd(n_overflow, 1ull);
        if (slot < static_cast<unsigned long long>(capacity))
          overflow[slot] = (topic << 32) | __float_as_uint(x);
      }
    }
  }
}
}  // namespace gpulda

#define GPULDA_ENTRY_HISTOGRAM(SUFFIX, PACKED)                                                   \
  extern "C" __global__ void __launch_bounds__(gpulda::kCountBlock) a_entry_histogram_##SUFFIX(  \
      const int2* __restrict__ a_row, const void* __restrict__ a_ent, int n_docs, int n_bins,    \
      unsigned long long* __restrict__ table, unsigned long long* __restrict__ overflow,         \
      unsigned long long* __restrict__ n_overflow, long long capacity) {                         \
    gpulda::entry_histogram<PACKED>(a_row, static_cast<const gpulda::AEntry<PACKED>::T*>(a_ent), \
                                    n_docs, n_bins, table, overflow, n_overflow, capacity);      \
  }
GPULDA_ENTRY_HISTOGRAM(packed, true)
GPULDA_ENTRY_HISTOGRAM(wide, false)
