#!/usr/bin/env bash
# Build + tests + benchmark on the device machine in one call; logs land in $OUT.
# Usage: tools/device_check.sh [tests|bench|sanitize|all|ncu] [bench iterations] [topics...]
set -u -o pipefail
MODE=${1:-all}
ITERS=${2:-51}
shift 2 2>/dev/null || shift $#
TOPICS=${*:-100 1000 10000}
source "$(dirname "$0")/_device_env.sh"
{
  date -u
  nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem --format=csv
  python3 -c "import sklearn, cupy; print(sklearn.__version__, cupy.__version__)"
} 2>&1 | tee "$OUT/env.log"
python3 tools/build_kernels.py --arch 90 > "$OUT/build.log" 2>&1 || { echo "BUILD FAILED"; tail -30 "$OUT/build.log"; }
tail -15 "$OUT/build.log"
# The NVRTC fallback must compile too (used when no fatbin fits the GPU).
SKLEARN_GPULDA_NVRTC=1 python3 -c "
from sklearn_gpulda import _kernels
for stem, name in [('sample_sparse', 'sample_tokens_u16_packed'), ('counts', 'rebuild_a_short_u16_packed'), ('infer', 'fold_in_docs')]:
    _kernels.get_function(stem, name)
print('nvrtc fallback: ok')" 2>&1 | tail -5
if [[ $MODE == tests || $MODE == all ]]; then
  timeout 300 python3 -m pytest -q tests/test_cuda_engine.py -p no:cacheprovider 2>&1 | tee "$OUT/pytest.log" | tail -40
fi
if [[ $MODE == sanitize || $MODE == all ]]; then
  # memcheck and racecheck over a small end-to-end run (every kernel launched at least once).
  for tool in memcheck racecheck; do
    SKLEARN_GPULDA_NVRTC=0 compute-sanitizer --tool $tool --error-exitcode 9 \
      python3 -m pytest -q -x -p no:cacheprovider tests/test_cuda_engine.py \
      -k "philox or invariants or weighted or fold_in or batch_statistics or matches_exact and 50" \
      > "$OUT/sanitize_$tool.log" 2>&1
    echo "compute-sanitizer $tool rc=$?"; grep -E "ERROR SUMMARY|passed|failed" "$OUT/sanitize_$tool.log" | tail -3
  done
fi
if [[ $MODE == bench || $MODE == all ]]; then
  timeout 400 python3 benchmarks/bench_cuda.py --iters "$ITERS" --topics $TOPICS --json "$OUT/bench.json" 2>&1 | tee "$OUT/bench.log"
fi
if [[ $MODE == ncu ]]; then
  # Nsight Compute on one sampler launch and one A rebuild (K=1000, third iteration).
  timeout 500 ncu --clock-control none -k regex:"sample_tokens|rebuild_a_short" --launch-skip 4 --launch-count 2 \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy \
    --section MemoryWorkloadAnalysis --section LaunchStats \
    python3 benchmarks/bench_cuda.py --topics 1000 --iters 3 > "$OUT/ncu.log" 2>&1
  echo "ncu rc=$?"
  grep -E "sample_tokens|rebuild_a|Throughput|Duration|Warp Cycles Per Issued|Issued Ipc|Achieved Occupancy|Stall|L1/TEX Hit|L2 Hit|Registers|No Eligible|Active Warps" "$OUT/ncu.log" | head -60
fi
