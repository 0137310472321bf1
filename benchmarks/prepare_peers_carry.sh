#!/usr/bin/env bash
# Run HERE (a machine with network access), from anywhere: fills the two folders that
# benchmarks/run_peers_on_device.sh reads on the device machine, which has no network.
#
#   .whl/         wheels for CPython 3.12 manylinux x86-64 of what the device image lacks:
#                 gensim (its test data stripped: 22 of its 28 MB), smart_open (gensim's one
#                 missing dependency; numpy, scipy and wrapt are in the image) and tomotopy.
#   .carry/data/  the real corpora: 20 Newsgroups raw posts, NIPS and KOS bag-of-words.
#
# Both are ignored by git (.gitignore) and travel only when named in the device call's carry.
# Prints their sizes; with the working tree they must stay under the 64 MiB a call may carry.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DATA="${SKLEARN_GPULDA_DATA:-$ROOT/../shared/data}"
WHL="$ROOT/.whl"
CARRY="$ROOT/.carry/data"

GENSIM=gensim==4.4.0
SMART_OPEN=smart_open==9.0.2
TOMOTOPY=tomotopy==0.14.0

mkdir -p "$WHL" "$CARRY"
# Keep exactly one version of each package: two stop the whole install on the device.
rm -f "$WHL"/gensim-*.whl "$WHL"/smart_open-*.whl "$WHL"/tomotopy-*.whl
# The device README's command, verbatim apart from the package names.
python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform manylinux1_x86_64 -d "$WHL" "$GENSIM" "$SMART_OPEN" "$TOMOTOPY"

# gensim's wheel is mostly gensim/test/ (fixtures); drop it and its RECORD lines so that pip
# still installs the wheel as a consistent one.
python3 - "$WHL" <<'PY'
import sys, zipfile
from pathlib import Path

wheel = next(Path(sys.argv[1]).glob("gensim-*.whl"))
slim = wheel.with_suffix(".slim")
with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(slim, "w", zipfile.ZIP_DEFLATED) as dst:
    for info in src.infolist():
        if info.filename.startswith("gensim/test/"):
            continue
        data = src.read(info)
        if info.filename.endswith(".dist-info/RECORD"):
            lines = data.decode().splitlines(keepends=True)
            data = "".join(l for l in lines if not l.startswith("gensim/test/")).encode()
        dst.writestr(info, data)
slim.replace(wheel)
PY

copy() {  # copy SRC-relative files into .carry/data, keeping their folders
    for rel in "$@"; do
        if [[ -f "$DATA/$rel" ]]; then
            mkdir -p "$CARRY/$(dirname "$rel")"
            cp -p "$DATA/$rel" "$CARRY/$rel"
        else
            echo "not found, not carried: $DATA/$rel" >&2
        fi
    done
}
copy 20newsgroups_bydate/20news-bydate.tar.gz \
     nips_tmt/docword.nips_tmt.txt.gz nips_tmt/vocab.nips_tmt.txt \
     uci_kos/docword.kos.txt.gz uci_kos/vocab.kos.txt
chmod -R u+w "$CARRY"

ls -l "$WHL"
du -sh "$WHL" "$CARRY"
du -cb "$WHL"/*.whl $(find "$CARRY" -type f) | tail -1 | awk '{printf "carried in all: %.1f MiB\n", $1 / 2^20}'
