// Numbers the kernels and their Python launchers must agree on, written once: the launchers read
// this file (sklearn_gpulda/backends/cuda/constants.py turns every line of the form
// `constexpr int kName = <decimal>;` into an attribute), so keep each on one line, as a literal.
#pragma once

namespace gpulda {

// Threads of a warp; the sampler and the counting kernels are written for 32.
constexpr int kWarp = 32;
// Padding of a sparse A row in the lane-segment layout (entry.cuh): a row of len entries spans
// fewer than len + 32 slots.
constexpr int kRowPad = 31;
// Largest K of the sparse sampler: topics are 16-bit in PDOW and in packed A entries, and the
// three-level W-ary tree of tree.cuh (W = 32) searches its top level in up to two windows.
constexpr int kMaxTopics = 65536;
// Above this K (or when the word's table does not fit a block's shared memory) the sampler keeps
// the table's leaves in global memory and long documents count their topics window by window.
constexpr int kSharedMaxTopics = 32768;
// Sampler blocks: 128 threads while the word's table is small; up to 1,024 when the table's shared
// memory would leave too few warps per SM. SaberLDA (4.2) found 256 best, but a block's warps wait
// at a barrier for its work item's last token, and most items are words of a few dozen tokens:
// four warps instead of eight sampled 1.1-1.5x faster on an H200 (doc/performance.md).
constexpr int kSampleBlock = 128;
constexpr int kSampleBlockMax = 1024;
// Counting kernels (counts.cu): block size, the longest document a warp sorts in shared memory,
// and the largest K at which a warp keeps a K-bin histogram.
constexpr int kCountBlock = 128;
constexpr int kShortDocMax = 1024;
constexpr int kHistMaxTopics = 2048;
// Bins of the long-document histogram in shared memory (128 KB).
constexpr int kLongHistWindow = 32768;
// Fold-in (infer.cu): one block of this many threads per document.
constexpr int kInferBlock = 256;
// Dense sampler (sample_dense.cu): K ceiling of its per-thread tables, default and largest block.
constexpr int kDenseMaxTopics = 1024;
constexpr int kDenseBlock = 128;
constexpr int kDenseBlockMax = 256;
// Dense log-likelihood (dense_read.cu): threads of a block, and the tokens each scores (a block's
// tile of the corpus gives one partial sum).
constexpr int kDenseLoglikBlock = 256;
constexpr int kDenseLoglikTokens = 4;
// Mini-batched sweeps (sample_minibatch.cu): threads per block of its three kernels.
constexpr int kBatchBlock = 256;
// Metropolis-Hastings chains (sample_mh.cu): threads per block (a thread per token), and the
// largest K whose topic totals a block counts in shared memory before adding them to the global.
constexpr int kMhBlock = 256;
constexpr int kMhSharedTotals = 8192;

}  // namespace gpulda
