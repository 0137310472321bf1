// A number a kernel reads either as a launch argument or from a device word. A CUDA graph replays
// its launch arguments unchanged, so what a captured sweep must see change between replays (the
// sampler's iteration, the topic-word prior beta after an update) is read from device memory
// instead (sklearn_gpulda/backends/cuda/sparse/sweep_graph.py). The same template instantiated
// with the plain value type is the argument's kernel, with the same code as before.
#pragma once

namespace gpulda {

template <typename T>
__device__ __forceinline__ T word_value(T value) {
  return value;
}
template <typename T>
__device__ __forceinline__ T word_value(const T* __restrict__ word) {
  return *word;
}

}  // namespace gpulda
