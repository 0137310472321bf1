#!/usr/bin/env bash
# Run the peer benchmark (benchmarks/peers.py) on the lent GPU machine, which has no network.
#
# Here, first:  bash benchmarks/prepare_peers_carry.sh     (fills .whl/ and .carry/data/)
# Then one device call, from the repository root there:
#   command: bash benchmarks/run_peers_on_device.sh [peers.py arguments]
#   carry:   [".whl", ".carry/data"], plus "sklearn_gpulda/_fatbin" after
#            `python3 tools/build_kernels.py --arch 90` here, to skip the build there, and the
#            folder a --reference argument names (benchmarks/results/ is ignored by git)
# One call may run 10 minutes. Each (corpus, K, system) run takes about its --budget plus its
# scoring (every checkpoint) and its transform, and there are 6 systems. The first checkpoint of
# a system always runs whatever the budget (one scikit-learn online or gensim pass at K = 1000
# takes minutes), so give a call --hard-limit (per run) and --deadline (per call) too:
#   bash benchmarks/run_peers_on_device.sh --corpora kos nips --topics 20 --budget 10 \
#       --hard-limit 45 --deadline 530 --max-test-docs 500 --eval-iter 50 --transform-budget 5
# then combine the calls' folders with peers.py --merge.
#
# Installs the carried wheels (gensim, smart_open, tomotopy; numpy, scipy, scikit-learn,
# matplotlib and CuPy are in the image) into /tmp/site as the device README describes, makes the
# kernels' fatbins with nvcc (NVRTC at first use otherwise), runs peers.py with the corpora read
# from .carry/data, and leaves curves.csv, summary.csv, curves.png, table.md, environment.json and
# the log in $OUT (at most 8 files come back; this is 6).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-/tmp/peers-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1

if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl || exit
    # Inherited by peers.py's worker processes too.
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
else
    echo "no carried wheels (.whl/): gensim and tomotopy will be reported as skipped"
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
if [[ -d .carry/data ]]; then
    export SKLEARN_GPULDA_DATA=$PWD/.carry/data
else
    echo "no carried corpora (.carry/data/): only the synthetic nytimes corpus can run"
fi

{
    date -u
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
    nproc
    python3 -c "import sklearn, cupy, gensim, tomotopy; print('sklearn', sklearn.__version__, \
'cupy', cupy.__version__, 'gensim', gensim.__version__, 'tomotopy', tomotopy.__version__, \
tomotopy.isa)"
} 2>&1 | tee "$OUT/peers.log"

if ls sklearn_gpulda/_fatbin/*.fatbin >/dev/null 2>&1 && [[ -z "${PEERS_BUILD:-}" ]]; then
    # Carried from where they were built (name sklearn_gpulda/_fatbin in carry): a minute saved.
    echo "using the carried fatbins in sklearn_gpulda/_fatbin (PEERS_BUILD=1 rebuilds them)"
elif command -v nvcc >/dev/null 2>&1; then
    python3 tools/build_kernels.py --arch 90 > /tmp/build_kernels.log 2>&1 \
        || { echo "kernel build failed; falling back to NVRTC"; tail -20 /tmp/build_kernels.log; }
fi

python3 benchmarks/peers.py --out "$OUT" "$@" 2>&1 | tee -a "$OUT/peers.log"
rc=${PIPESTATUS[0]}
rm -f "$OUT"/corpus-*.npz
exit "$rc"
