// Summing the word-topic counts B over GPU workers by their changes instead of the whole table.
//
// Near convergence a sweep moves few tokens, so few cells of a worker's B change between two
// sweeps; each worker lists its changed cells (list_changes), every worker gathers all the lists
// and adds them to its copy of the corpus-wide B (add_changes). The counts are integers held in
// float32, exact below 2^24 in any order of addition, so the sum is the all-reduce's bit for bit
// although the lists come out in no fixed order.

// Launch: 1-D, any grid and block (grid-stride loop); n_changed zeroed before. Host:
// ChangeExchange.sum. NumPy: i = flatnonzero(now != before) listed in any order (the first
// `capacity` of them), n_changed = i.size, before[i] = now[i].
extern "C" __global__ void list_changes(const float* __restrict__ now, float* __restrict__ before,
                                        long long n, long long* __restrict__ cells,
                                        float* __restrict__ deltas,
                                        unsigned long long* __restrict__ n_changed,
                                        long long capacity) {
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const float x = now[i];
    const float d = x - before[i];
    if (d == 0.0f) continue;
    // Past the capacity the change is only counted: the caller then sums the whole table.
    const unsigned long long slot = atomicAdd(n_changed, 1ull);
    if (slot < static_cast<unsigned long long>(capacity)) {
      cells[slot] = i;
      deltas[slot] = d;
    }
    before[i] = x;
  }
}

// The gathered lists lie rank after rank, `per_rank` slots each, rank r's first counts[r] used.
// Launch: 1-D, any grid and block (grid-stride loop). NumPy: np.add.at(sum, cells[used],
// deltas[used]) over the used slots.
extern "C" __global__ void add_changes(float* __restrict__ sum, const long long* __restrict__ cells,
                                       const float* __restrict__ deltas,
                                       const unsigned long long* __restrict__ counts, int n_ranks,
                                       long long per_rank) {
  const long long total = per_rank * n_ranks;
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long j = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; j < total;
       j += stride) {
    const long long r = j / per_rank;
    if (j - r * per_rank >= static_cast<long long>(counts[r])) continue;
    atomicAdd(&sum[cells[j]], deltas[j]);
  }
}
