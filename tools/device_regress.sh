#!/usr/bin/env bash
# Regression call after host-side refactors: every GPU-marked test, scikit-learn's checks on the
# GPU default path, the demo, and the 51-iteration sparse benchmark at K = 100 / 1,000 / 10,000. Each stage is time-boxed so the call ends within ~9 min.
# Usage (repository root, on the device machine): bash tools/device_regress.sh
set -u -o pipefail
source "$(dirname "$0")/_device_env.sh"
record_environment
build_kernels 150 3
stamp gpu-tests
timeout 290 python3 -m pytest -q -m gpu -p no:cacheprovider --durations=8 tests/ 2>&1 \
  | tee "$OUT/pytest_gpu.log" | tail -22
stamp sklearn-checks-on-gpu
timeout 60 python3 -m pytest -q -p no:cacheprovider tests/test_sklearn_compat.py -k "not online" 2>&1 \
  | tee "$OUT/compat_gpu.log" | tail -3
stamp demo
timeout 40 python3 -m sklearn_gpulda demo 2>&1 | tee "$OUT/demo.log" | tail -8
stamp bench-sparse
timeout 110 python3 benchmarks/bench_cuda.py --topics 100 1000 10000 --iters 51 --json "$OUT/bench_cuda.json" \
  2>&1 | tee "$OUT/bench_cuda.log" | tail -6
stamp done
