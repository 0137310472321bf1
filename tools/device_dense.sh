#!/usr/bin/env bash
# Dense sampling kernels on the device machine in one call (issue 4): build sample_dense.cu for
# sm_90, the GPU tests of tests/test_dense_sampler.py, compute-sanitizer memcheck and racecheck on
# a small run of each kernel, then benchmarks/bench_dense.py. Every log lands in $OUT.
# Usage (repository root): bash tools/device_dense.sh [bench budget seconds, default 150]
# Each stage is time-boxed so that the whole script stays under the device tool's 600 s.
set -u -o pipefail
BUDGET=${1:-150}
source "$(dirname "$0")/_device_env.sh"

{
  date -u
  nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,clocks.max.mem --format=csv
  nvcc --version | tail -1
  python3 -c "import numpy, scipy, cupy; print('numpy', numpy.__version__, 'scipy', scipy.__version__, 'cupy', cupy.__version__)"
} > "$OUT/env.log" 2>&1
cat "$OUT/env.log"

# 1. Build: sample_dense.cu alone (with the shared headers) into the package's fatbin folder; the
#    other kernel files, needed by the sparse engine in the benchmark, in a second, non-fatal step.
stamp build
SRC=$(mktemp -d)
cp cuda/sample_dense.cu cuda/*.cuh "$SRC"/
timeout 240 python3 tools/build_kernels.py --src "$SRC" --out sklearn_gpulda/_fatbin --arch 90 --force \
  > "$OUT/build_dense.log" 2>&1
echo "build_kernels (sample_dense) rc=$?"
cat "$OUT/build_dense.log"
timeout 240 python3 tools/build_kernels.py --arch 90 > "$OUT/build_all.log" 2>&1
echo "build_kernels (all) rc=$?"; tail -12 "$OUT/build_all.log"

# The NVRTC fallback must compile the file too (used when no fatbin fits the GPU).
SKLEARN_GPULDA_NVRTC=1 timeout 120 python3 -c "
from sklearn_gpulda import _kernels
for v in ('butterfly', 'transpose', 'plain'):
    f = _kernels.get_function('sample_dense', 'sample_dense_' + v)
    print('nvrtc', v, 'regs', f.attributes['num_regs'], 'local bytes', f.attributes['local_size_bytes'])
" 2>&1 | tee "$OUT/nvrtc.log" | tail -5

# 2. Tests.
stamp pytest
timeout 300 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_dense_sampler.py 2>&1 \
  | tee "$OUT/pytest_dense.log" | tail -30

# 3. compute-sanitizer: every kernel over a small ragged corpus (empty documents, a partial last
#    warp, K below, at and above one warp), checked against the oracle so that a silent wrong
#    answer under the tool fails too.
stamp sanitizer
SMALL=tools/dense_small_run.py
for tool in memcheck racecheck; do
  timeout 120 compute-sanitizer --tool $tool --error-exitcode 9 python3 "$SMALL" > "$OUT/sanitize_$tool.log" 2>&1
  echo "compute-sanitizer $tool rc=$?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|small run|FAILED" "$OUT/sanitize_$tool.log" | tail -3
done

# 4. Benchmark (the sparse engine's points stop when the budget is spent).
stamp bench
timeout $((BUDGET + 90)) python3 benchmarks/bench_dense.py --scale 0.25 --reps 3 --budget-s "$BUDGET" --out "$OUT" \
  2>&1 | tee "$OUT/bench_dense.log" | tail -60
stamp done
