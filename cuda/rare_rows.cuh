// Rare words' rows of B in hybrid storage (ezLDA IV; sklearn_gpulda/_hybrid_table.py says which
// words are rare and how their slots are laid out). A row is an open-addressing table of a power of
// two slots, at most half full; a slot is 0 when empty, else (topic << 16) | count. The probe
// sequence starts at the topic's multiplicative hash and walks forward with wrap-around; the host's
// _hybrid_table.home_slot / insert / lookup are the NumPy statement of the functions below.
#pragma once

namespace gpulda {

constexpr unsigned kRareHashMultiplier = 2654435761u;  // _hybrid_table.HASH_MULTIPLIER
constexpr int kRareCountBits = 16;                      // _hybrid_table.COUNT_BITS

__device__ __forceinline__ unsigned rare_home(unsigned topic, unsigned cap) {
  // cap is a power of two >= 2: the top log2(cap) bits of the product.
  return (topic * kRareHashMultiplier) >> (32 - (__ffs(cap) - 1));
}

// Count one token of `topic` into a row of `cap` slots. Concurrent inserts of one topic agree on
// its slot: the first to claim an empty slot by compare-and-swap owns it, the others see its key
// there and add. Counts never reach 2^16 (the host keeps rare words below that many tokens).
__device__ __forceinline__ void rare_insert(unsigned* row, unsigned cap, unsigned topic) {
  unsigned h = rare_home(topic, cap);
  const unsigned key = (topic << kRareCountBits) | 1u;
  for (unsigned probe = 0; probe < cap; ++probe) {
    unsigned s = row[h];
    if (s == 0u) {
      s = atomicCAS(row + h, 0u, key);
      if (s == 0u) return;
    }
    if ((s >> kRareCountBits) == topic) {
      atomicAdd(row + h, 1u);
      return;
    }
    h = (h + 1u) & (cap - 1u);
  }
}

// The count of `topic` in a row (0 when absent).
__device__ __forceinline__ unsigned rare_count(const unsigned* row, unsigned cap, unsigned topic) {
  if (cap == 0u) return 0u;
  unsigned h = rare_home(topic, cap);
  for (unsigned probe = 0; probe < cap; ++probe) {
    const unsigned s = row[h];
    if (s == 0u) return 0u;
    if ((s >> kRareCountBits) == topic) return s & ((1u << kRareCountBits) - 1u);
    h = (h + 1u) & (cap - 1u);
  }
  return 0u;
}

}  // namespace gpulda
