// Warp-level building blocks: inclusive scans and votes over the 32 lanes (SaberLDA 3.2.3).
#pragma once
#include "constants.cuh"

namespace gpulda {

constexpr unsigned kFullMask = 0xffffffffu;

__device__ __forceinline__ int lane_id() { return threadIdx.x & (kWarp - 1); }

// Hillis-Steele inclusive scan. The additions are written with __fadd_rn so the compiler cannot
// fuse a caller's product into them: the sampler's running sums must round the same way in its
// first pass (S) and its second pass (search), and the association is fixed by this pattern.
__device__ __forceinline__ float warp_inclusive_scan(float v) {
  const int lane = lane_id();
#pragma unroll
  for (int off = 1; off < kWarp; off <<= 1) {
    const float o = __shfl_up_sync(kFullMask, v, off);
    if (lane >= off) v = __fadd_rn(v, o);
  }
  return v;
}

__device__ __forceinline__ int warp_inclusive_scan(int v) {
  const int lane = lane_id();
#pragma unroll
  for (int off = 1; off < kWarp; off <<= 1) {
    const int o = __shfl_up_sync(kFullMask, v, off);
    if (lane >= off) v += o;
  }
  return v;
}

// Fixed butterfly order, so every lane gets the same, reproducible double.
__device__ __forceinline__ double warp_sum(double v) {
#pragma unroll
  for (int off = kWarp / 2; off > 0; off >>= 1) v += __shfl_xor_sync(kFullMask, v, off);
  return v;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int off = kWarp / 2; off > 0; off >>= 1)
    v = __fadd_rn(v, __shfl_xor_sync(kFullMask, v, off));
  return v;
}

// Index of the first lane whose predicate holds, or -1 (SaberLDA's warp_vote: __ballot + __ffs).
__device__ __forceinline__ int warp_first(bool pred) {
  return __ffs(__ballot_sync(kFullMask, pred)) - 1;
}

}  // namespace gpulda
