// Searches over ascending offset arrays shared by the kernels.
#pragma once

namespace gpulda {

// The last entry of an ascending array whose value is at most x: the r in [0, n) with
// ptr[r] <= x < ptr[r + 1], given ptr[0] <= x < ptr[n] (the row of x in a CSR-style pointer
// array, the document of a warp in a list of first warps). Binary search, log2(n) reads.
template <typename T>
__device__ __forceinline__ int last_at_most(const T* __restrict__ ptr, int n, long long x) {
  int lo = 0, hi = n;  // ptr[lo] <= x < ptr[hi]
  while (hi - lo > 1) {
    const int mid = lo + (hi - lo) / 2;
    if (ptr[mid] <= x)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

}  // namespace gpulda
