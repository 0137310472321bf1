// Rare words' rows of B in hybrid storage (ezLDA IV; the host's hybrid_table.py, in
// sklearn_gpulda/backends/cuda/sparse/, says which words are rare and how their slots are laid
// out). A row is an open-addressing table of 1.5 slots
// per token (any size of at least 2), at most two thirds full; a slot is 0 when empty, else
// (topic << 16) | count. The probe sequence starts at the topic's multiply-shift hash and walks
// forward with wrap-around; the host's hybrid_table.home_slot / next_slot / insert / lookup are
// the NumPy statement of the functions below.
#pragma once

namespace gpulda {

constexpr unsigned kRareHashMultiplier = 2654435761u;  // hybrid_table.HASH_MULTIPLIER
constexpr int kRareCountBits = 16;                     // hybrid_table.COUNT_BITS
constexpr unsigned kRareCountMask = (1u << kRareCountBits) - 1u;

// A non-empty slot's topic and count.
__device__ __forceinline__ unsigned rare_slot_topic(unsigned s) { return s >> kRareCountBits; }
__device__ __forceinline__ unsigned rare_slot_count(unsigned s) { return s & kRareCountMask; }

// Rare row r (word n_dense + r) starts at slot `first` and has the returned number of slots.
__device__ __forceinline__ unsigned rare_row(const long long* rare_off, int r, long long& first) {
  first = rare_off[r];
  return static_cast<unsigned>(rare_off[r + 1] - first);
}

__device__ __forceinline__ unsigned rare_home(unsigned topic, unsigned cap) {
  // Multiply-shift: the high word of hash * cap lies in [0, cap) for any cap.
  return __umulhi(topic * kRareHashMultiplier, cap);
}

__device__ __forceinline__ unsigned rare_next(unsigned h, unsigned cap) {
  return h + 1u == cap ? 0u : h + 1u;
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
    if (rare_slot_topic(s) == topic) {
      atomicAdd(row + h, 1u);
      return;
    }
    h = rare_next(h, cap);
  }
}

// The count of `topic` in a row (0 when absent).
__device__ __forceinline__ unsigned rare_count(const unsigned* row, unsigned cap, unsigned topic) {
  if (cap == 0u) return 0u;
  unsigned h = rare_home(topic, cap);
  for (unsigned probe = 0; probe < cap; ++probe) {
    const unsigned s = row[h];
    if (s == 0u) return 0u;
    if (rare_slot_topic(s) == topic) return rare_slot_count(s);
    h = rare_next(h, cap);
  }
  return 0u;
}

}  // namespace gpulda
