#!/usr/bin/env bash
# The GPU-side work of the project in stages, for calls on the lent GPU machine: each stage is
# time-boxed, and a call runs the stages it names, in that order.
#
#   bash tools/gpu_stages.sh --list                       the stages, one line each
#   bash tools/gpu_stages.sh build tests bench-sparse     run these three, in this order
#   bash tools/gpu_stages.sh --deadline 570 build sanitizer bench-compare
#
# A stage runs under `timeout` for its box (seconds, in --list; BOX_<STAGE>=N overrides one, the
# stage name in capitals with '-' as '_', e.g. BOX_BENCH_SPARSE=200). The benchmarks are also
# given a budget a little inside their box, so they stop between points rather than be killed.
# With --deadline S no stage runs past S seconds from the start: a box is cut to what is left,
# and a stage with less than a minute left is skipped. A device call stops at 600 s, so the boxes
# of one call should add up to less (the script warns when they do not and no deadline is set).
#
# Output, under $OUT (default /tmp/out): env.log (date, GPU, driver, nvcc, Python and library
# versions, recorded once at the start), <stage>.log for each stage (also printed),
# summary.log (stage, exit status -- 124 when its box ran out -- and seconds), and what the
# benchmarks write, in a folder per stage. A device call returns at most 8 files: when there
# are more, the stage folders are packed into stages.tgz, and if that is not enough, the stage
# logs as well.
#
# Settings, from the environment:
#   ARCH          compute capability to build for, e.g. 90 (default: the GPU's, else 90)
#   TOPICS        K of bench-sparse and bench-compare (default "100 1000 10000")
#   TEST_PATHS    what the tests stage runs (default tests/)
#   HYBRID_TOPICS K of bench-hybrid (default "1000 10000 32768")
#   PUBMED_SCALE  fraction of the PubMed shape's 8.2 M documents in bench-pubmed (default 0.25)
#   PUBMED_PARTS  bench-pubmed draws its corpus as this many stacked parts in parallel (default 1)
#   PUBMED_TOPICS the K of bench-pubmed's fits (default 32768)
#   COMPARE_DIR   the other checkout bench-compare times (default .carry/old). Make it here
#                 with `mkdir -p .carry/old && git archive REV sklearn_gpulda cuda tools |
#                 tar -x -C .carry/old` and name .carry/old in the call's carry.
#   STREAM_STACK  copies of the NYTimes shape bench-streaming stacks (default 20: about 2 G tokens)
#   DASK_STACK    copies of the NYTimes shape bench-dask-gpu stacks (default 4: about 400 M tokens)
#   DASK_WORKERS  GPU workers of bench-dask-gpu (default: 2 and 4, those the host has)
#   DASK_FLAGS    more options of bench-dask-gpu, e.g. "--profile"
#   FINGERPRINTS  the models the models stage checks against, saved by
#                 `tools/model_fingerprints.py save DIR --device cuda` before a change (default
#                 .carry/fingerprints; name .carry in the call's carry)
#   GPUS          the GPUs of bench-multi-gpu's several-GPU fits (default 0,1)
#   MULTI_STACK   copies of the NYTimes shape bench-multi-gpu stacks (default "1 7")
#   ALGO_CORPORA  corpora of bench-algorithms besides the NYTimes shape and NIPS, e.g. "kos 20news
#                 kjv" (carry .carry/data); ALGO_TOPICS its K (default: the script's)
#   USER_CORPORA  corpora of bench-users (default "kjv kjv40 kos nips 20news"; carry .carry/data)
#   USER_TOPICS   K of bench-users (default "10 20 50 100")
#   USER_FLAGS    more options of bench-users (default --count; e.g. "--count --grid --first-fit")
#   CHOOSE_K_TREE checkout whose package bench-choose-k's plain loop imports (default: this one;
#                 e.g. .carry/old to time the old tree on the same machine)
#   CHOOSE_K_FLAGS more options of bench-choose-k, e.g. "--no-grid"
#   TEST_GPUS     GPU groups of tests-split, e.g. "0,1 1 2 3" (default: "0,1" then each GPU but
#                 GPU 0 alone); the first group runs the files that need several GPUs or Dask
#   HEAVY_TESTS   files tests-split runs on a GPU of their own where there are four groups
#                 (default tests/test_cuda_sparse.py)
#   STOP_CORPORA  corpora of bench-stopping (default "kjv kos nips 20news nytimes"; carry .carry/data)
#   STOP_TOPICS   K of bench-stopping (default "20 100 1000")
#   MB_CORPORA    corpora of bench-minibatch (default "nips kos 20news"; carry .carry/data)
#   MB_TOPICS     K of bench-minibatch (default "20 100 1000")
#   MB_BATCHES    batch sizes in tokens of bench-minibatch (default "16384 65536 262144")
#   PEERS         peers.py invocations for the peers stage, separated by ';', e.g.
#                 "--corpora kos --topics 20 --budget 8 --deadline 200; --corpora nips ..."
#                 (carry .whl and .carry/data: see benchmarks/run_peers_on_device.sh)
set -u -o pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit
OUT=${OUT:-/tmp/out}
export PYTHONUNBUFFERED=1
export PYTHONPATH=$ROOT${PYTHONPATH:+:$PYTHONPATH}
TOPICS=${TOPICS:-100 1000 10000}
COMPARE_DIR=${COMPARE_DIR:-.carry/old}
DASK_STACK=${DASK_STACK:-4}
GPUS=${GPUS:-0,1}
FINGERPRINTS=${FINGERPRINTS:-.carry/fingerprints}
MULTI_STACK=${MULTI_STACK:-1 7}
# NVLink multicast stays off wherever NCCL runs (the device notes say why).
export NCCL_NVLS_ENABLE=0
STREAM_STACK=${STREAM_STACK:-20}
MB_CORPORA=${MB_CORPORA:-nips kos 20news}
MB_TOPICS=${MB_TOPICS:-20 100 1000}
MB_BATCHES=${MB_BATCHES:-16384 65536 262144}
HYBRID_TOPICS=${HYBRID_TOPICS:-1000 10000 32768}
USER_CORPORA=${USER_CORPORA:-kjv kjv40 kos nips 20news}
USER_TOPICS=${USER_TOPICS:-10 20 50 100}
USER_FLAGS=${USER_FLAGS:---count}
PUBMED_SCALE=${PUBMED_SCALE:-0.25}
PUBMED_PARTS=${PUBMED_PARTS:-1}
PUBMED_TOPICS=${PUBMED_TOPICS:-32768}
STOP_CORPORA=${STOP_CORPORA:-kjv kos nips 20news nytimes}
STOP_TOPICS=${STOP_TOPICS:-20 100 1000}

# name|box in seconds|what it does
STAGES=(
  "build|300|kernels for \$ARCH (tools/build_kernels.py), then each cuda/*.cu through NVRTC"
  "tests|300|every pytest test marked gpu (alias: gpu-tests)"
  "tests-split|300|the same, in one pytest per GPU group of \$TEST_GPUS at once (multi-GPU files on the first group)"
  "sklearn-checks|300|scikit-learn's checks on the GPU default path (test_sklearn_compat.py; a long list of small fits, hence the box)"
  "demo|90|python -m sklearn_gpulda demo"
  "sanitizer|300|compute-sanitizer memcheck, then racecheck, over benchmarks/sanitizer_run.py"
  "bench-sparse|300|bench_cuda.py: K = \$TOPICS, 51 sweeps, alpha 50/K and 1/K"
  "bench-compare|420|bench_cuda.py --compare-with \$COMPARE_DIR: the same, before against after"
  "bench-dense|240|bench_dense.py --scale 0.25 --reps 2: dense kernels against the sparse backend"
  "bench-algorithms|150|bench_algorithms.py: both backends' whole sweeps, and what 'auto' picks"
  "bench-minibatch|540|bench_minibatch.py: 'sparse' against 'minibatch', held-out LL per sweep and per second, \$MB_CORPORA at K = \$MB_TOPICS"
  "bench-end-to-end|540|bench_end_to_end.py: whole fit calls at K = 100, 1000, 10000, 32768"
  "bench-pubmed|560|bench_hybrid_pubmed.py: K = \$PUBMED_TOPICS on the PubMed shape x \$PUBMED_SCALE within max_device_memory=8GB"
  "bench-hybrid|540|bench_end_to_end.py with dense, then hybrid word-topic storage: whole fits at K = \$HYBRID_TOPICS"
  "peers|540|benchmarks/run_peers_on_device.sh once per invocation in \$PEERS"
  "ncu|300|Nsight Compute on a sampling and an A-rebuild launch of bench_cuda.py, K = 1000"
  "cpu-threads|300|bench_cpu_threads.py on the host's cores: 1, 2, 4, 8, 16 threads, K = 20, 100, 1000"
  "bench-streaming|420|bench_streaming.py: held against streamed at a quarter of the memory, K = 1000, NYTimes x \$STREAM_STACK"
  "models|240|tools/model_fingerprints.py check \$FINGERPRINTS on one GPU, and on two where there are"
  "multi-gpu-tests|240|the multi-GPU chain's tests (tests/test_multi_gpu.py; two-GPU ones skip on one)"
  "bench-multi-gpu|560|bench_multi_gpu.py: one GPU against \$GPUS, K = 1000, NYTimes shape stacked \$MULTI_STACK"
  "bench-users|480|bench_users.py: what users fit (KJV, 40 chapters, KOS, NIPS, 20 Newsgroups at \$USER_TOPICS), \$USER_FLAGS"
  "host-profile|90|benchmarks/probes/host_profile.py: cProfile of fits of KJV and its first 40 chapters at K = 20, defaults"
  "bench-dask-gpu|400|bench_dask.py --gpu-compare: one GPU, cuda:0,..,n-1 and n Dask GPU workers (sweeps on the workers, NCCL), K = 1000, NYTimes shape stacked \$DASK_STACK"
  "bench-choose-k|240|bench_choose_k.py: choosing K in {10, 20, 50, 100, 200} on 20 Newsgroups, plain loop of default fits (of \$CHOOSE_K_TREE) against choose_n_components sequential and concurrent, and GridSearchCV 10 x 5"
  "bench-stopping|400|bench_stopping.py: where max_iter=None stops against 4x as long, \$STOP_CORPORA at K = \$STOP_TOPICS (carry .carry/data)"
)

stage_field() {  # stage_field NAME FIELD(1 box, 2 description); empty for an unknown stage
  local entry name rest
  for entry in "${STAGES[@]}"; do
    name=${entry%%|*}
    rest=${entry#*|}
    if [[ $name == "$1" ]]; then
      if [[ $2 == 1 ]]; then echo "${rest%%|*}"; else echo "${rest#*|}"; fi
      return
    fi
  done
}

stage_box() {  # the box of a stage, or its BOX_<STAGE> override
  local var=BOX_${1//-/_}
  var=${var^^}
  echo "${!var:-$(stage_field "$1" 1)}"
}

list_stages() {
  local entry name
  for entry in "${STAGES[@]}"; do
    name=${entry%%|*}
    printf '%-17s %4s s  %s\n' "$name" "$(stage_box "$name")" "$(stage_field "$name" 2)"
  done
}

# -- helpers the stages use ------------------------------------------------------------------
now() { date +%s; }
left() { echo $((STAGE_END - $(now))); }  # seconds left in the running stage's box

boxed() {  # boxed CMD...: run CMD for the rest of the stage's box
  local secs
  secs=$(left)
  ((secs > 0)) || { echo "no time left in the box for: $*"; return 124; }
  timeout -k 10 "$secs" "$@"
}

boxed_for() {  # boxed_for SECS CMD...: at most SECS seconds, and never past the stage's box
  local secs=$1
  shift
  (($(left) < secs)) && secs=$(left)
  ((secs > 0)) || { echo "no time left in the box for: $*"; return 124; }
  timeout -k 10 "$secs" "$@"
}

budget() {  # budget MARGIN [SECS]: seconds a benchmark may plan for, MARGIN inside the box (or SECS)
  local b=$((${2:-$(left)} - $1))
  ((b < 30)) && b=30
  echo "$b"
}

record_environment() {
  {
    date -u
    nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,clocks.max.mem \
      --format=csv,noheader
    nvcc --version 2>/dev/null | tail -1 || echo "no nvcc"
    echo "build arch: $ARCH"
    git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo "no git checkout (a copy of the tree)"
    python3 -c "import sys, numpy, scipy, sklearn, cupy; print('python', sys.version.split()[0], \
'numpy', numpy.__version__, 'scipy', scipy.__version__, 'sklearn', sklearn.__version__, \
'cupy', cupy.__version__)"
  } > "$OUT/env.log" 2>&1
  cat "$OUT/env.log"
}

# -- the stages: stage_<name with '_' for '-'>, run with STAGE_END and DIR set; each returns ---
# -- the worst exit status of its steps --------------------------------------------------------
stage_build() {
  local rc
  boxed_for $(($(left) - 60)) python3 tools/build_kernels.py --arch "$ARCH" -j "$(nproc)"
  rc=$?
  echo "build_kernels rc=$rc"
  # The NVRTC fallback must compile every kernel file too (used when no fatbin fits the GPU).
  SKLEARN_GPULDA_NVRTC=1 boxed python3 - <<'PY' || rc=$((rc ? rc : $?))
from pathlib import Path
from sklearn_gpulda.backends.cuda import kernels as _kernels
for path in sorted(Path("cuda").glob("*.cu")):
    _kernels._compile(path.stem).compile()
    print("nvrtc", path.stem, "ok")
PY
  return "$rc"
}

stage_tests() {
  # shellcheck disable=SC2086  # TEST_PATHS is a list of paths
  boxed python3 -m pytest -q -m gpu -p no:cacheprovider --durations=8 ${TEST_PATHS:-tests/}
}

stage_tests_split() {
  # One pytest per group of GPUs in TEST_GPUS (default: "0,1" and then each GPU but the first),
  # all at once: the files that need several GPUs run on the first group, the others are dealt
  # round-robin to the rest. Each group's log is <group>.log in the stage's folder; a failing
  # test's name is on a FAILED line there (-rfE).
  local groups=() n_gpus multi=() single=() f i rc=0 pids=()
  n_gpus=$(nvidia-smi -L | grep -c '^GPU')
  if [[ -n ${TEST_GPUS:-} ]]; then
    read -r -a groups <<<"$TEST_GPUS"
  elif ((n_gpus >= 3)); then
    groups=("0,1")
    for ((i = 1; i < n_gpus; i++)); do groups+=("$i"); done
  else
    stage_tests
    return
  fi
  # The slowest file (its NumPy oracle runs long) has a group of its own where there are four.
  local heavy=${HEAVY_TESTS:-tests/test_cuda_sparse.py} first=1 lists=()
  for f in tests/test_*.py; do
    if grep -q "multi_gpu\|n_gpus\|gpu_count\|dask" "$f"; then
      multi+=("$f")
    elif [[ " $heavy " != *" $f "* ]] || ((${#groups[@]} < 4)); then
      single+=("$f")
    fi
  done
  lists[0]="${multi[*]}"
  if ((${#groups[@]} >= 4)); then
    lists[1]=$heavy
    first=2
  fi
  for ((i = 0; i < ${#single[@]}; i++)); do
    local g=$((first + i % (${#groups[@]} - first)))
    lists[g]="${lists[g]:-} ${single[i]}"
  done
  for ((i = 0; i < ${#groups[@]}; i++)); do
    # shellcheck disable=SC2086  # the list is of paths
    CUDA_VISIBLE_DEVICES=${groups[i]} boxed python3 -m pytest -q -m gpu -p no:cacheprovider \
      -rfE --durations=5 ${lists[i]} >"$DIR/gpus_${groups[i]//,/_}.log" 2>&1 &
    pids+=($!)
  done
  for ((i = 0; i < ${#pids[@]}; i++)); do
    wait "${pids[i]}" || rc=$?
    echo "== GPUs ${groups[i]}: $(tail -1 "$DIR/gpus_${groups[i]//,/_}.log")"
    grep -E "^(FAILED|ERROR)" "$DIR/gpus_${groups[i]//,/_}.log"
  done
  return "$rc"
}

stage_sklearn_checks() {
  boxed python3 -m pytest -q -p no:cacheprovider tests/test_sklearn_compat.py -k "not online"
}

stage_demo() {
  boxed python3 -m sklearn_gpulda demo
}

stage_sanitizer() {
  local tool status rc=0 half=$(($(left) / 2))
  for tool in memcheck racecheck; do
    boxed_for "$half" compute-sanitizer --tool "$tool" --error-exitcode 9 \
      python3 benchmarks/sanitizer_run.py > "$DIR/$tool.log" 2>&1
    status=$?
    ((rc)) || rc=$status
    echo "compute-sanitizer $tool rc=$status (log in $DIR/$tool.log)"
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY|FAILED|small run" "$DIR/$tool.log" | tail -6
  done
  return "$rc"
}

stage_bench_sparse() {
  # shellcheck disable=SC2086  # TOPICS is a list
  boxed python3 benchmarks/bench_cuda.py --topics $TOPICS --iters 51 --alpha 50/K 1/K \
    --budget-s "$(budget 40)" --json "$DIR/bench_cuda.json"
}

stage_bench_compare() {
  if [[ ! -d $COMPARE_DIR/sklearn_gpulda ]]; then
    echo "no checkout at COMPARE_DIR=$COMPARE_DIR (see the settings at the top of $0)"
    return 2
  fi
  if ! ls "$COMPARE_DIR"/sklearn_gpulda/_fatbin/*.fatbin >/dev/null 2>&1; then
    # Its own build tool, sources and output folder; NVRTC at its first run if this fails.
    if [[ -f $COMPARE_DIR/tools/build_kernels.py ]]; then
      boxed_for 120 python3 "$COMPARE_DIR/tools/build_kernels.py" --arch "$ARCH" -j "$(nproc)" \
        > "$DIR/build_old.log" 2>&1
      echo "old checkout's kernels: build rc=$? (log in $DIR/build_old.log)"
    fi
  fi
  # shellcheck disable=SC2086  # TOPICS is a list
  boxed python3 benchmarks/bench_cuda.py --compare-with "$COMPARE_DIR" --topics $TOPICS \
    --alpha 50/K 1/K --iters 51 --budget-s "$(budget 20)" --out "$DIR"
  local rc=$?
  rm -f "$DIR/bench_cuda_corpus.npz"  # left behind only when the box ran out
  return "$rc"
}

stage_bench_dense() {
  boxed python3 benchmarks/bench_dense.py --scale 0.25 --reps 2 --budget-s "$(budget 90)" \
    --out "$DIR"
}

stage_bench_streaming() {
  boxed python3 benchmarks/bench_streaming.py --stack "$STREAM_STACK" --topics 1000 \
    --sweeps 12 --fraction 0.25 --json "$DIR/bench_streaming.json"
}

stage_models() {
  local n_gpus rc
  n_gpus=$(nvidia-smi -L | grep -c '^GPU')
  boxed python3 tools/model_fingerprints.py check "$FINGERPRINTS" --device cuda
  rc=$?
  if ((n_gpus > 1)); then
    boxed python3 tools/model_fingerprints.py check "$FINGERPRINTS" --device cuda:0,1 || rc=$?
  fi
  return "$rc"
}

stage_multi_gpu_tests() {
  boxed python3 -m pytest -q -m gpu -p no:cacheprovider -rs tests/test_multi_gpu.py \
    tests/test_dask.py
}

stage_bench_multi_gpu() {
  # shellcheck disable=SC2086  # MULTI_STACK is a list
  boxed python3 benchmarks/bench_multi_gpu.py --gpus "$GPUS" --stack $MULTI_STACK \
    --budget-s "$(budget 90)" --json "$DIR/bench_multi_gpu.json"
}

stage_bench_dask_gpu() {
  # Needs dask[distributed] (carry its wheels in .whl and install them first); dask-cuda is used
  # where it imports, else one nanny-supervised worker per GPU (sklearn_gpulda/dask/_cluster.py).
  if ! python3 -c "import distributed, dask.array" 2>/dev/null; then
    echo "distributed does not import: carry the wheels in .whl and install them with"
    echo "  python3 -m pip install --no-index --find-links .whl distributed dask (not pip: another Python)"
    return 2
  fi
  local n_gpus workers
  n_gpus=$(python3 -c "from sklearn_gpulda._runtime.device import gpu_count; print(gpu_count())")
  workers=${DASK_WORKERS:-$( ((n_gpus >= 4)) && echo "2 4" || echo 2)}
  if ((n_gpus < 2)); then
    echo "bench-dask-gpu needs 2 GPUs or more; this host has $n_gpus"
    return 2
  fi
  # shellcheck disable=SC2086  # workers is a list
  boxed python3 benchmarks/bench_dask.py --gpu-compare --topics 1000 --stack "$DASK_STACK" \
    --workers $workers --sweeps2 10 30 --json "$DIR/bench_dask.json" ${DASK_FLAGS:-}
}

stage_cpu_threads() {
  # The host's CPU, not the GPU: the CPU engine's Mtoken/s against its threads, and whether the
  # model stays the same (issue 12 asks for 1 to 16 threads).
  boxed python3 benchmarks/bench_cpu_threads.py --threads 1 2 4 8 16 --topics 20 100 1000 \
    --scale 0.003 --sweeps 4 --out "$DIR"
}

stage_bench_algorithms() {
  if [[ -d .carry/data ]]; then export SKLEARN_GPULDA_DATA=$ROOT/.carry/data; fi
  # shellcheck disable=SC2086
  boxed python3 benchmarks/bench_algorithms.py --budget-s "$(budget 60)" --out "$DIR" \
    ${ALGO_CORPORA:+--corpora $ALGO_CORPORA} ${ALGO_TOPICS:+--topics $ALGO_TOPICS}
}

stage_bench_users() {
  if [[ -d .carry/data ]]; then export SKLEARN_GPULDA_DATA=$ROOT/.carry/data; fi
  # shellcheck disable=SC2086
  boxed python3 benchmarks/bench_users.py --corpora $USER_CORPORA --topics $USER_TOPICS \
    $USER_FLAGS --budget-s "$(budget 60)" --json "$DIR/bench_users.json"
}

stage_bench_choose_k() {
  if [[ -d .carry/data ]]; then export SKLEARN_GPULDA_DATA=$ROOT/.carry/data; fi
  boxed python3 benchmarks/bench_choose_k.py --tree "${CHOOSE_K_TREE:-$ROOT}" \
    --json "$DIR/bench_choose_k.json" ${CHOOSE_K_FLAGS:-}
}

stage_host_profile() {
  local rc=0
  boxed_for $(($(left) / 2)) python3 benchmarks/probes/host_profile.py --max-iter 300 || rc=$?
  echo "== the first 40 chapters"
  boxed python3 benchmarks/probes/host_profile.py --max-iter 300 --docs 40 || rc=$?
  return "$rc"
}

stage_bench_minibatch() {
  if [[ -d .carry/data ]]; then export SKLEARN_GPULDA_DATA=$ROOT/.carry/data; fi
  # shellcheck disable=SC2086
  boxed python3 benchmarks/bench_minibatch.py --corpora $MB_CORPORA --topics $MB_TOPICS \
    --batch-tokens $MB_BATCHES --budget-s "$(budget 30)" --out "$DIR"
}

stage_bench_stopping() {
  if [[ -d .carry/data ]]; then export SKLEARN_GPULDA_DATA=$ROOT/.carry/data; fi
  boxed python3 benchmarks/bench_stopping.py --corpora $STOP_CORPORA --topics $STOP_TOPICS \
    --budget-s "$(budget 30)" --out "$DIR"
}

stage_bench_end_to_end() {
  boxed python3 benchmarks/bench_end_to_end.py --budget-s "$(budget 60)" \
    --json "$DIR/bench_end_to_end.json"
}

stage_bench_pubmed() {
  # shellcheck disable=SC2086 -- PUBMED_TOPICS is a list of K
  boxed python3 benchmarks/bench_hybrid_pubmed.py --scale "$PUBMED_SCALE" --parts "$PUBMED_PARTS" \
    --topics $PUBMED_TOPICS --sweeps 8 --budget 8GB --json "$DIR/bench_hybrid_pubmed.json"
}

stage_bench_hybrid() {
  # Half of the box each; the benchmark stops between points within its budget.
  local half storage rc=0
  for storage in dense hybrid; do
    echo "== storage=$storage"
    if [[ $storage == dense ]]; then half=$(($(left) / 2)); else half=$(left); fi
    # shellcheck disable=SC2086  # HYBRID_TOPICS is a list of K
    boxed_for "$half" python3 benchmarks/bench_end_to_end.py --topics $HYBRID_TOPICS \
      --sweeps 2 22 --storage "$storage" --budget-s "$(budget 40 "$half")" \
      --json "$DIR/hybrid_${storage}.json" || rc=$?
  done
  return "$rc"
}

stage_peers() {
  local i=0 invocation status rc=0
  if [[ -z ${PEERS:-} ]]; then
    echo "PEERS is empty: nothing to run (see the settings at the top of $0)"
    return 2
  fi
  IFS=';' read -ra invocations <<< "$PEERS"
  for invocation in "${invocations[@]}"; do
    i=$((i + 1))
    echo "== invocation $i: $invocation"
    # shellcheck disable=SC2086  # an invocation is a list of arguments
    OUT="$DIR/run$i" boxed bash benchmarks/run_peers_on_device.sh $invocation
    status=$?
    ((rc)) || rc=$status
    rm -f "$DIR/run$i"/corpus-*.npz  # left behind only when the box ran out
    echo "invocation $i rc=$status"
  done
  echo "combine the folders with: python3 benchmarks/peers.py --merge <folders> --out <folder>"
  return "$rc"
}

stage_ncu() {
  boxed ncu --clock-control none -k regex:"sample_tokens|rebuild_a" --launch-skip 4 \
    --launch-count 2 --section SpeedOfLight --section WarpStateStats --section SchedulerStats \
    --section Occupancy --section MemoryWorkloadAnalysis --section LaunchStats \
    python3 benchmarks/bench_cuda.py --topics 1000 --iters 3 > "$DIR/ncu.log" 2>&1
  local rc=$?
  echo "ncu rc=$rc (report in $DIR/ncu.log)"
  grep -E "sample_tokens|rebuild_a|Throughput|Duration|Warp Cycles Per Issued|Issued Ipc|\
Achieved Occupancy|Stall|L1/TEX Hit|L2 Hit|Registers|No Eligible|Active Warps" "$DIR/ncu.log" \
    | head -60
  return "$rc"
}

pack_outputs() {  # keep what comes back from a device call within its 8 files
  local n
  n=$(find "$OUT" -type f | wc -l)
  ((n <= 8)) && return
  local folders=()
  mapfile -t folders < <(find "$OUT" -mindepth 1 -maxdepth 1 -type d -printf '%f\n')
  if ((${#folders[@]})); then
    tar czf "$OUT/stages.tgz" -C "$OUT" "${folders[@]}" && (cd "$OUT" && rm -rf "${folders[@]}")
  fi
  n=$(find "$OUT" -type f | wc -l)
  ((n <= 8)) && return
  local logs=()
  mapfile -t logs < <(cd "$OUT" && ls -- *.log | grep -vxE "env.log|summary.log")
  tar czf "$OUT/logs.tgz" -C "$OUT" "${logs[@]}" && (cd "$OUT" && rm -f "${logs[@]}")
}

# -- arguments -------------------------------------------------------------------------------
DEADLINE=
SELECTED=()
while (($#)); do
  case $1 in
    --list) list_stages; exit 0 ;;
    -h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; echo; list_stages; exit 0 ;;
    --deadline) DEADLINE=${2:?--deadline needs seconds}; shift ;;
    gpu-tests) SELECTED+=(tests) ;;
    -*) echo "unknown option $1 (--list, --deadline S)" >&2; exit 2 ;;
    *)
      if [[ -z $(stage_field "$1" 1) ]]; then
        echo "unknown stage '$1'; the stages are:" >&2
        list_stages >&2
        exit 2
      fi
      SELECTED+=("$1") ;;
  esac
  shift
done
if ((${#SELECTED[@]} == 0)); then
  echo "name the stages to run; the stages are:" >&2
  list_stages >&2
  exit 2
fi

START=$(now)
mkdir -p "$OUT"
ARCH=${ARCH:-$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 \
  | tr -d .)}
ARCH=${ARCH:-90}
total=0
for name in "${SELECTED[@]}"; do total=$((total + $(stage_box "$name"))); done
if [[ -z $DEADLINE ]] && ((total > 590)); then
  echo "note: the boxes add up to $total s, more than a 600 s device call; --deadline cuts them"
fi
record_environment
: > "$OUT/summary.log"
for name in "${SELECTED[@]}"; do
  box=$(stage_box "$name")
  if [[ -n $DEADLINE ]]; then
    rest=$((START + DEADLINE - $(now)))
    ((rest < box)) && box=$rest
  fi
  if ((box < 60)); then
    echo "== $(date -u +%H:%M:%S) $name: skipped, $box s left before the deadline"
    printf '%-17s skipped (deadline)\n' "$name" >> "$OUT/summary.log"
    continue
  fi
  DIR=$OUT/$name
  mkdir -p "$DIR"
  STAGE_END=$(($(now) + box))
  t0=$(now)
  echo "== $(date -u +%H:%M:%S) $name (box $box s)"
  "stage_${name//-/_}" 2>&1 | tee "$OUT/$name.log"
  rc=${PIPESTATUS[0]}
  printf '%-17s rc=%-4s %5d s\n' "$name" "$rc" $(($(now) - t0)) | tee -a "$OUT/summary.log"
  rmdir "$DIR" 2>/dev/null  # nothing written there
done
echo "== $(date -u +%H:%M:%S) done in $(($(now) - START)) s"
cat "$OUT/summary.log"
pack_outputs
