// Storage formats of one non-zero of a sparse document-topic row A[d].
//
// Wide: int2 (topic, float bits of the count); any weights. Packed: one 32-bit word, topic in the
// high 16 bits and an integer count in the low 16, for integer counts below 65,536 and K <= 65,536.
// The sampler is bound by reading A rows (one per token, SaberLDA 3.1.3), so halving the entry
// halves its main traffic.
//
// Row layout ("lane segments"): a row of len entries in topic order is split into 32 contiguous
// segments of m = ceil(len / 32) entries, segment l for warp lane l; entry e = l * m + j is stored
// at slot j * 32 + l. A warp then reads its lanes' segments with coalesced loads, and each lane
// sums a run of consecutive topics without shuffles. Slots reach up to 32 * m - 1 < len + 31, so
// a row's storage is the document's token count plus 31.
#pragma once
#include "constants.cuh"

namespace gpulda {

static_assert(kRowPad == kWarp - 1, "a row's segments pad it by at most one warp less one slot");

__host__ __device__ __forceinline__ int segment_length(int len) { return (len + 31) >> 5; }
// Storage slot of entry e of a row of len entries.
__host__ __device__ __forceinline__ int segment_slot(int e, int len) {
  const int m = segment_length(len);
  return (e % m) * 32 + e / m;
}

template <bool kPacked>
struct AEntry;

template <>
struct AEntry<false> {
  using T = int2;
  static __device__ __forceinline__ int topic(T e) { return e.x; }
  static __device__ __forceinline__ float count(T e) { return __int_as_float(e.y); }
  static __device__ __forceinline__ T zero() { return make_int2(0, 0); }
  static __device__ __forceinline__ T make(int k, float c) {
    return make_int2(k, __float_as_int(c));
  }
};

template <>
struct AEntry<true> {
  using T = unsigned;
  static __device__ __forceinline__ int topic(T e) { return static_cast<int>(e >> 16); }
  // The count as a float, exactly: OR-ing an integer below 2^23 into the mantissa of 2^23 and
  // subtracting 2^23 gives it with a logic op and a full-rate add, where an int-to-float
  // conversion issues at a fraction of that rate and the sampler is issue-bound.
  static __device__ __forceinline__ float count(T e) {
    return __fsub_rn(__int_as_float(0x4B000000 | static_cast<int>(e & 0xffffu)), 8388608.0f);
  }
  static __device__ __forceinline__ T zero() { return 0u; }
  static __device__ __forceinline__ T make(int k, float c) {
    return (static_cast<unsigned>(k) << 16) | static_cast<unsigned>(c);
  }
};

// A token's place in its document, the layout's per-token index (SaberLDA's PDOW stores the
// token's canonical index instead): 16 bits in packed chunks, whose documents are all shorter
// than 65,536 tokens, else 32. The canonical index minus the chunk's first token is the
// document's first slot plus this place, which saves 2 bytes per token of a packed chunk.
template <bool kPacked>
struct TokenPos {
  using T = unsigned;
};
template <>
struct TokenPos<true> {
  using T = unsigned short;
};

// The canonical index minus the chunk's first token, from the document's A row header: a row
// starts kRowPad slots per earlier document after the document's first token (row_off[d] =
// doc_off[d] + kRowPad d, layout.py), so a kernel that reads the header needs no doc_off.
__device__ __forceinline__ unsigned token_from_row(int row_off, int d, unsigned place) {
  return static_cast<unsigned>(row_off - kRowPad * d) + place;
}

}  // namespace gpulda
