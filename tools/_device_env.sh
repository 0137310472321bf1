# Sourced by the tools/device_*.sh scripts (on the device machine): the output folder, the
# repository on PYTHONPATH, and the helpers every call begins with.
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit
export PYTHONUNBUFFERED=1
export PYTHONPATH=$ROOT${PYTHONPATH:+:$PYTHONPATH}

# A timestamped stage header.
stamp() { echo "== $(date -u +%H:%M:%S) $*"; }

# Date, GPU, driver and library versions, also into $OUT/env.log.
record_environment() {
  {
    date -u
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
    python3 -c "import numpy, scipy, sklearn, cupy; print('numpy', numpy.__version__, 'scipy', \
scipy.__version__, 'sklearn', sklearn.__version__, 'cupy', cupy.__version__)"
  } 2>&1 | tee "$OUT/env.log"
}

# The kernels for sm_90 within $1 seconds; the last $2 lines of the log (register table) shown.
build_kernels() {
  stamp build
  timeout "$1" python3 tools/build_kernels.py --arch 90 -j 16 > "$OUT/build.log" 2>&1
  echo "build rc=$?"
  tail -n "${2:-3}" "$OUT/build.log"
}
