// Deterministic fold-in with topics fixed (doc/algorithm.md, "Fold-in"): one block per document,
// float64 throughout. Each block touches only its own document's rows and reduces in a fixed
// order, so a document's theta does not depend on the batch it came in.

#include "warp.cuh"

namespace gpulda {

constexpr int kInferWarps = kInferBlock / kWarp;
static_assert(kInferBlock % kWarp == 0 && kInferWarps <= kWarp,
              "block reduction assumes <= 32 whole warps");

// Block-wide sum in a fixed order (thread-local, butterfly per warp, warps in index order).
// Every thread gets the result. Uses `red` (kInferWarps doubles) and two barriers.
__device__ __forceinline__ double block_sum(double v, double* red) {
  v = warp_sum(v);
  if (lane_id() == 0) red[threadIdx.x / kWarp] = v;
  __syncthreads();
  double total = 0.0;
  for (int w = 0; w < kInferWarps; ++w) total += red[w];
  __syncthreads();
  return total;
}

}  // namespace gpulda

// ---------------------------------------------------------------------------------------------
// fold_in_docs: theta and log-likelihood of documents [doc0, doc0 + gridDim.x) with phi fixed.
// Launch: grid = number of documents in this launch, block kInferBlock, no dynamic shared memory.
// [in]  indptr (int64, n_docs + 1), indices (int32 word ids), data (float64 counts): CSR rows;
//       phi_t (V x K float64): phi transposed, phi[k, v] = components[k, v] / components[k].sum();
//       alpha (K float64): the document-topic prior of each topic.
// [out] theta (launch docs x K float64, row b for document doc0 + b), gamma (same shape, scratch),
//       loglik (launch docs float64).
// NumPy: sklearn_gpulda/backends/numpy/fold_in.py:fold_in. Empty documents: theta = 1/K,
//        loglik = 0.
// Float: every sum is float64 in a fixed order; den > 0 because phi > 0 wherever beta > 0.
// ---------------------------------------------------------------------------------------------
extern "C" __global__ void __launch_bounds__(gpulda::kInferBlock)
    fold_in_docs(const long long* __restrict__ indptr, const int* __restrict__ indices,
                 const double* __restrict__ data, const double* __restrict__ phi_t, int n_topics,
                 const double* __restrict__ alpha, int max_iter, double tol, long long doc0,
                 double* __restrict__ theta, double* __restrict__ gamma,
                 double* __restrict__ loglik) {
  using namespace gpulda;
  __shared__ double red[kInferWarps];
  const long long d = doc0 + blockIdx.x;
  const long long j0 = indptr[d], j1 = indptr[d + 1];
  double* th = theta + static_cast<size_t>(blockIdx.x) * n_topics;
  double* ga = gamma + static_cast<size_t>(blockIdx.x) * n_topics;
  const double inv_k = 1.0 / n_topics;
  for (int k = threadIdx.x; k < n_topics; k += blockDim.x) th[k] = inv_k;
  if (j0 == j1) {
    if (threadIdx.x == 0) loglik[blockIdx.x] = 0.0;
    return;
  }
  for (int it = 0; it < max_iter; ++it) {
    for (int k = threadIdx.x; k < n_topics; k += blockDim.x) ga[k] = 0.0;
    for (long long j = j0; j < j1; ++j) {
      const double* row = phi_t + static_cast<size_t>(indices[j]) * n_topics;
      double part = 0.0;
      for (int k = threadIdx.x; k < n_topics; k += blockDim.x) part += th[k] * row[k];
      const double r = data[j] / block_sum(part, red);
      for (int k = threadIdx.x; k < n_topics; k += blockDim.x) ga[k] += (th[k] * row[k]) * r;
    }
    double part = 0.0;
    for (int k = threadIdx.x; k < n_topics; k += blockDim.x) {
      ga[k] += alpha[k];
      part += ga[k];
    }
    const double gsum = block_sum(part, red);
    double change = 0.0;
    for (int k = threadIdx.x; k < n_topics; k += blockDim.x) {
      const double nk = ga[k] / gsum;
      change += fabs(nk - th[k]);
      th[k] = nk;
    }
    // Each thread only rewrites its own th[k], so no barrier is needed before the sum's own.
    if (block_sum(change, red) / n_topics < tol) break;
  }
  double ll = 0.0;
  for (long long j = j0; j < j1; ++j) {
    const double* row = phi_t + static_cast<size_t>(indices[j]) * n_topics;
    double part = 0.0;
    for (int k = threadIdx.x; k < n_topics; k += blockDim.x) part += th[k] * row[k];
    ll += data[j] * log(block_sum(part, red));
  }
  if (threadIdx.x == 0) loglik[blockIdx.x] = ll;
}
