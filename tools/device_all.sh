#!/usr/bin/env bash
# Everything GPU-side in one device call, most important first, each stage time-boxed:
# build (sm_90), every test marked gpu, the demo, scikit-learn's checks on the GPU path,
# compute-sanitizer on the dense kernels, then the dense-kernel benchmark with what time is left.
# Usage (repository root): bash tools/device_all.sh [bench budget seconds, default 60]
set -u -o pipefail
BUDGET=${1:-60}
source "$(dirname "$0")/_device_env.sh"
record_environment
build_kernels 240 25
stamp gpu-tests
timeout 300 python3 -m pytest -q -m gpu -p no:cacheprovider tests/ 2>&1 | tee "$OUT/pytest_gpu.log" | tail -25
stamp demo
timeout 90 python3 -m sklearn_gpulda demo 2>&1 | tee "$OUT/demo.log" | tail -30
stamp sklearn-checks-on-gpu
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/test_sklearn_compat.py -k "not online" 2>&1 \
  | tee "$OUT/compat_gpu.log" | tail -6
stamp sanitizer-dense
for tool in memcheck racecheck; do
  timeout 90 compute-sanitizer --tool $tool --error-exitcode 9 python3 tools/dense_small_run.py > "$OUT/sanitize_dense_$tool.log" 2>&1
  echo "compute-sanitizer $tool rc=$?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|small run" "$OUT/sanitize_dense_$tool.log" | tail -2
done
stamp bench-dense
timeout $((BUDGET + 60)) python3 benchmarks/bench_dense.py --scale 0.25 --reps 2 --budget-s "$BUDGET" --out "$OUT" \
  2>&1 | tee "$OUT/bench_dense.log" | tail -45
stamp done
grep -hE "passed|failed|error" "$OUT/pytest_gpu.log" "$OUT/compat_gpu.log" | tail -4
