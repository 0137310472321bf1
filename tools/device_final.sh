#!/usr/bin/env bash
# A short validation call for late changes, most important first, each stage time-boxed:
# kernels, the GPU tests of the dense engine, device input and the A rebuild paths, scikit-learn's
# checks on the GPU default path, then the sparse benchmark at K = 1,000 / 10,000 and the
# whole-iteration comparison of the sparse and dense engines.
set -u -o pipefail
source "$(dirname "$0")/_device_env.sh"
record_environment
build_kernels 120 0
stamp gpu-tests
timeout 170 python3 -m pytest -q -m gpu -p no:cacheprovider -s tests/test_algorithm.py tests/test_device_input.py \
  tests/test_cuda_engine.py -k "not test_cuda_engine or sweep_agrees or count_invariants" 2>&1 \
  | tee "$OUT/pytest_final.log" | grep -E "K=|passed|failed|Error|assert" | tail -25
stamp sklearn-checks-on-gpu
timeout 60 python3 -m pytest -q -p no:cacheprovider tests/test_sklearn_compat.py -k "not online" 2>&1 | tail -3
stamp bench-sparse
timeout 80 python3 benchmarks/bench_cuda.py --topics 1000 10000 --iters 11 2>&1 | tee "$OUT/bench_cuda.log" | tail -12
stamp bench-algorithms
timeout 100 python3 benchmarks/bench_algorithms.py --budget-s 60 --out "$OUT" 2>&1 | tee "$OUT/bench_algorithms.log" | tail -30
stamp done
