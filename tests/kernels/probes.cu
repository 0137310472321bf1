// Kernels for the GPU tests only: they expose device functions of cuda/ to the tests, so they are
// not in the package's fatbins. tests/_gpu_probes.py compiles this file with NVRTC (include path
// cuda/) the first time a test needs it.

#include "philox.cuh"
#include "sparse_draw.cuh"
#include "tree.cuh"

// ---------------------------------------------------------------------------------------------
// philox_words: the four Philox4x32-10 output words for n counters (tests only).
// Launch: 1-D, >= n threads. [in] ctr (n x 4 uint32); [out] out (n x 4 uint32).
// ---------------------------------------------------------------------------------------------
extern "C" __global__ void philox_words(const uint4* __restrict__ ctr, long long n, unsigned k0, unsigned k1,
                                        uint4* __restrict__ out) {
  const long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const uint4 c = ctr[i];
  const gpulda::Philox4 r = gpulda::philox4x32_10(c.x, c.y, c.z, c.w, k0, k1);
  out[i] = make_uint4(r.x0, r.x1, r.x2, r.x3);
}

// ---------------------------------------------------------------------------------------------
// draw_fixed_row_{packed,wide}: the sampler on one fixed (A row, Bhat row, own topic and weight)
// for n uniforms (chi-square tests). Launch: grid any, block kSampleBlock, dynamic shared
// tree_floats(K) * 4 bytes; one warp per uniform. [in] ent (len entries, including own's),
// bhat (K), alpha (K), and the word's counts b_row (K) with denom (K) and beta for the word side
// of the collapsed conditional (b_row = nullptr: Bhat fixed), u (n); [out] out (n).
// draw_fixed_row_*_large: the large-K sampler's table (leaves in leaf_rows, gridDim.x x K floats
// of global memory; dynamic shared memory tree_upper_floats(K) * 4 bytes); the others ignore
// leaf_rows.
// ---------------------------------------------------------------------------------------------
#define GPULDA_FIXED_ROW(SUFFIX, PACKED, LARGE)                                                               \
  extern "C" __global__ void __launch_bounds__(gpulda::kSampleBlock) draw_fixed_row_##SUFFIX(                  \
      const void* __restrict__ ent_v, int len, const float* __restrict__ bhat, const float* __restrict__ alpha, \
      const float* __restrict__ b_row, const double* __restrict__ denom, double beta, int n_topics, int own,    \
      float own_w, const float* __restrict__ u, long long n, int* __restrict__ out, float* leaf_rows) {          \
    using namespace gpulda;                                                                                     \
    extern __shared__ float smem[];                                                                             \
    const auto* ent = static_cast<const typename AEntry<PACKED>::T*>(ent_v);                                    \
    float* leaf = LARGE ? leaf_rows + static_cast<size_t>(blockIdx.x) * n_topics : smem;                        \
    float* l2 = LARGE ? smem : leaf + n_topics;                                                                 \
    float* l1 = l2 + tree_tiles(n_topics);                                                                      \
    for (int k = threadIdx.x; k < n_topics; k += blockDim.x) leaf[k] = bhat[k];                                 \
    __syncthreads();                                                                                            \
    const auto tree = build_tree<LARGE>(leaf, l2, l1, alpha, n_topics);                                         \
    const BhatSource src{b_row, denom, b_row == nullptr ? bhat : nullptr, beta};                                 \
    const long long warps = static_cast<long long>(gridDim.x) * (blockDim.x / kWarp);                           \
    for (long long i = blockIdx.x * static_cast<long long>(blockDim.x / kWarp) + threadIdx.x / kWarp; i < n;    \
         i += warps) {                                                                                          \
      const float b_adj = own_bhat<false>(src, 0, own, own_w, leaf[own], n_topics);                                \
      const int k = draw_one<PACKED>(ent, len, u[i], own, own_w, b_adj, leaf, tree);                            \
      if (lane_id() == 0) out[i] = k;                                                                           \
    }                                                                                                           \
  }
GPULDA_FIXED_ROW(packed, true, false)
GPULDA_FIXED_ROW(wide, false, false)
GPULDA_FIXED_ROW(packed_large, true, true)
GPULDA_FIXED_ROW(wide_large, false, true)
