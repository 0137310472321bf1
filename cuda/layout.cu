// The PDOW layout of a chunk built on the device (sklearn_gpulda/backends/cuda/sparse/layout.py),
// and the per-document arrays the sampler derives from it, with no kernel compiled at run time.
//
// A chunk's tokens are sorted by (relabelled word, canonical index). A non-zero j of the CSR
// counts (document d, word w, reps tokens from canonical nz_ptr[j]) is reps consecutive tokens of
// word w, and the counts hold at most one non-zero per (d, w); so sorting the non-zeros by (w, j)
// and laying each one's tokens after those of the non-zeros sorted before it gives the token
// order. The host sorts the keys (w << 32) | j in place (CuPy's precompiled Thrust sort) and scans
// the sorted reps (CUB's precompiled device scan); the kernels here do the rest. Every kernel is
// grid-strided: any grid, any block size (the launchers use 256). Integer work only: results do
// not depend on the launch or on the order of atomics.

#include "search.cuh"

namespace {

__device__ __forceinline__ long long grid_start() {
  return static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
}

__device__ __forceinline__ long long grid_step() {
  return static_cast<long long>(gridDim.x) * blockDim.x;
}

// The relabelled word of a sort key, and its non-zero (numbered from the piece's first).
__device__ __forceinline__ int key_word(unsigned long long key) {
  return static_cast<int>(key >> 32);
}

__device__ __forceinline__ long long key_nonzero(unsigned long long key) {
  return static_cast<long long>(key & 0xffffffffull);
}

// The first token of sorted non-zero i within the piece (the scan's previous end).
__device__ __forceinline__ long long sorted_start(const long long* __restrict__ ends, long long i) {
  return i == 0 ? 0 : ends[i - 1];
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// word_tokens: count[new_of_old[indices[j]]] += nz_ptr[j + 1] - nz_ptr[j] for j < n_nz.
// Launch: any grid and block. [in] indices (n_nz int32, vocabulary ids), new_of_old (V int32),
// nz_ptr (n_nz + 1 int64, canonical first tokens); [in,out] count (V uint64, zeroed by the
// caller). Equivalent NumPy: np.add.at(count, new_of_old[indices], np.diff(nz_ptr)).
// ---------------------------------------------------------------------------------------------
extern "C" __global__ void word_tokens(const int* __restrict__ indices,
                                       const int* __restrict__ new_of_old,
                                       const long long* __restrict__ nz_ptr, long long n_nz,
                                       unsigned long long* __restrict__ count) {
  for (long long j = grid_start(); j < n_nz; j += grid_step()) {
    const long long reps = nz_ptr[j + 1] - nz_ptr[j];
    if (reps > 0) atomicAdd(count + new_of_old[indices[j]], static_cast<unsigned long long>(reps));
  }
}

// ---------------------------------------------------------------------------------------------
// nonzero_keys: keys[j] = (new_of_old[indices[j]] << 32) | j for the piece's n_nz < 2**32
// non-zeros. Launch: any grid and block. [in] indices (n_nz int32), new_of_old (V int32);
// [out] keys (n_nz uint64). Equivalent NumPy: (new_of_old[indices].astype(np.uint64) << 32) |
// np.arange(n_nz).
// ---------------------------------------------------------------------------------------------
extern "C" __global__ void nonzero_keys(const int* __restrict__ indices,
                                        const int* __restrict__ new_of_old, long long n_nz,
                                        unsigned long long* __restrict__ keys) {
  for (long long j = grid_start(); j < n_nz; j += grid_step())
    keys[j] = (static_cast<unsigned long long>(new_of_old[indices[j]]) << 32) |
              static_cast<unsigned long long>(j);
}

// ---------------------------------------------------------------------------------------------
// sorted_reps: ends[i] = tokens of the non-zero of sorted key i (an inclusive scan then makes
// them the ends of each non-zero's tokens in the piece's sorted order).
// Launch: any grid and block. [in] keys (n_nz uint64, sorted), nz_ptr (the piece's n_nz + 1
// int64); [out] ends (n_nz int64). Equivalent NumPy: np.diff(nz_ptr)[keys & 0xffffffff].
// ---------------------------------------------------------------------------------------------
extern "C" __global__ void sorted_reps(const unsigned long long* __restrict__ keys,
                                       const long long* __restrict__ nz_ptr, long long n_nz,
                                       long long* __restrict__ ends) {
  for (long long i = grid_start(); i < n_nz; i += grid_step()) {
    const long long j = key_nonzero(keys[i]);
    ends[i] = nz_ptr[j + 1] - nz_ptr[j];
  }
}

// ---------------------------------------------------------------------------------------------
// word_firsts: first[w] = the piece's first sorted token of word w, for each word w of the piece
// (other entries are left as they are). Launch: any grid and block. [in] keys (n_nz uint64,
// sorted), ends (n_nz int64, scanned); [out] first (V int64).
// ---------------------------------------------------------------------------------------------
extern "C" __global__ void word_firsts(const unsigned long long* __restrict__ keys,
                                       const long long* __restrict__ ends, long long n_nz,
                                       long long* __restrict__ first) {
  for (long long i = grid_start(); i < n_nz; i += grid_step()) {
    const int w = key_word(keys[i]);
    if (i == 0 || key_word(keys[i - 1]) != w) first[w] = sorted_start(ends, i);
  }
}

// ---------------------------------------------------------------------------------------------
// place_tokens_<u16|u32>: each token of the piece to its slot of the chunk. The r-th token of
// sorted non-zero i (word w, non-zero j0 + j of the counts, chunk-relative first token s =
// nz_ptr[j] - t0) goes to slot cursor[w] + ends[i - 1] - first[w] + r, with
//   place[slot] = s + r - doc_off[doc]   (its place in its document; PlaceT)
//   doc[slot]   = doc                    (its document within the chunk, int32),
// where doc is the counts' document holding non-zero j0 + j (the last d with indptr[d] <= j0 + j)
// less doc_base. Launch: any grid and block. [in] keys, ends (n_nz), first, cursor (V int64),
// nz_ptr (the piece's n_nz + 1 int64), indptr (n_docs + 1 int64, the counts' non-zero offsets),
// doc_off (the chunk's documents, int32); [out] place, doc (the chunk's tokens; each slot is
// written once over the chunk's pieces).
// ---------------------------------------------------------------------------------------------
template <typename PlaceT>
__device__ __forceinline__ void place_tokens(
    const unsigned long long* __restrict__ keys, const long long* __restrict__ ends,
    const long long* __restrict__ first, const long long* __restrict__ cursor,
    const long long* __restrict__ nz_ptr, const long long* __restrict__ indptr, int n_docs,
    long long j0, long long doc_base, long long t0, const int* __restrict__ doc_off, long long n_nz,
    PlaceT* __restrict__ place, int* __restrict__ doc) {
  for (long long i = grid_start(); i < n_nz; i += grid_step()) {
    const unsigned long long key = keys[i];
    const int w = key_word(key);
    const long long j = key_nonzero(key);
    const long long start = sorted_start(ends, i);
    const long long slot = cursor[w] + (start - first[w]);
    const long long n = ends[i] - start;
    // The document: the last d with indptr[d] <= j0 + j (indptr[0] = 0 <= every non-zero).
    const long long nz = j0 + j;
    const int lo = gpulda::last_at_most(indptr, n_docs, nz);
    const int d = static_cast<int>(lo - doc_base);
    const long long s = nz_ptr[j] - t0 - doc_off[d];
    for (long long r = 0; r < n; ++r) {
      place[slot + r] = static_cast<PlaceT>(s + r);
      doc[slot + r] = d;
    }
  }
}

#define GPULDA_PLACE_TOKENS(SUFFIX, PLACE_T)                                                   \
  extern "C" __global__ void place_tokens_##SUFFIX(                                            \
      const unsigned long long* __restrict__ keys, const long long* __restrict__ ends,         \
      const long long* __restrict__ first, const long long* __restrict__ cursor,               \
      const long long* __restrict__ nz_ptr, const long long* __restrict__ indptr, int n_docs,  \
      long long j0, long long doc_base, long long t0, const int* __restrict__ doc_off,         \
      long long n_nz, PLACE_T* __restrict__ place, int* __restrict__ doc) {                    \
    place_tokens<PLACE_T>(keys, ends, first, cursor, nz_ptr, indptr, n_docs, j0, doc_base, t0, \
                          doc_off, n_nz, place, doc);                                          \
  }
GPULDA_PLACE_TOKENS(u16, unsigned short)
GPULDA_PLACE_TOKENS(u32, unsigned)

// ---------------------------------------------------------------------------------------------
// advance_cursor: cursor[w] += tokens of word w in the piece, for each word w of the piece, after
// place_tokens read the cursor (the next piece's tokens of w go after these).
// Launch: any grid and block. [in] keys (n_nz uint64, sorted), ends (n_nz int64, scanned), first
// (V int64); [in,out] cursor (V int64).
// ---------------------------------------------------------------------------------------------
extern "C" __global__ void advance_cursor(const unsigned long long* __restrict__ keys,
                                          const long long* __restrict__ ends,
                                          const long long* __restrict__ first, long long n_nz,
                                          long long* __restrict__ cursor) {
  for (long long i = grid_start(); i < n_nz; i += grid_step()) {
    const int w = key_word(keys[i]);
    if (i == n_nz - 1 || key_word(keys[i + 1]) != w) cursor[w] += ends[i] - first[w];
  }
}

// ---------------------------------------------------------------------------------------------
// token_weights: weight[nz_ptr[j] - t0 + r] = nz_weight[j] for r < nz_ptr[j + 1] - nz_ptr[j]
// (the chunk's token weights in canonical order). Launch: any grid and block. [in] nz_ptr (n_nz
// + 1 int64), nz_weight (n_nz float32); [out] weight (the chunk's tokens, float32).
// Equivalent NumPy: weight[:] = np.repeat(nz_weight, np.diff(nz_ptr)).
// ---------------------------------------------------------------------------------------------
extern "C" __global__ void token_weights(const long long* __restrict__ nz_ptr,
                                         const float* __restrict__ nz_weight, long long n_nz,
                                         long long t0, float* __restrict__ weight) {
  for (long long j = grid_start(); j < n_nz; j += grid_step()) {
    const float value = nz_weight[j];
    for (long long t = nz_ptr[j]; t < nz_ptr[j + 1]; ++t) weight[t - t0] = value;
  }
}

// ---------------------------------------------------------------------------------------------
// document_norms: norm[d] = weight[d] + alpha_sum (N_d + sum(alpha), float64: the same IEEE
// addition as NumPy's). Launch: any grid and block. [in] weight (n_docs float64); [out] norm
// (n_docs float64).
// ---------------------------------------------------------------------------------------------
extern "C" __global__ void document_norms(const double* __restrict__ weight, double alpha_sum,
                                          long long n_docs, double* __restrict__ norm) {
  for (long long d = grid_start(); d < n_docs; d += grid_step()) norm[d] = weight[d] + alpha_sum;
}
