#!/usr/bin/env bash
# Several peer-benchmark invocations in one device call (one machine start, one transfer).
# Each argument is one invocation's peers.py arguments, run in turn by
# benchmarks/run_peers_on_device.sh into its own folder; all folders come back as one archive,
# $OUT/peers.tgz (a call returns at most 8 files). Give each invocation a --deadline so that
# their sum stays inside the call's 10 minutes. Combine the folders afterwards with
#   python3 benchmarks/peers.py --merge <folders> --out <folder>
# Usage (repository root, on the device machine, carry [".whl", ".carry/data"]):
#   bash tools/device_peers.sh "--corpora kos --topics 20 --budget 8 --deadline 250" "..."
set -u -o pipefail
source "$(dirname "$0")/_device_env.sh"
work=$(mktemp -d)
i=0
for invocation in "$@"; do
    i=$((i + 1))
    echo "== $(date -u +%H:%M:%S) invocation $i: $invocation"
    # shellcheck disable=SC2086  # the invocation is a list of arguments on purpose
    OUT="$work/run$i" bash benchmarks/run_peers_on_device.sh $invocation > "$work/run$i.log" 2>&1
    echo "rc=$?"
    mv "$work/run$i.log" "$work/run$i/"
    grep -vE "^ +[a-z0-9]+ K=" "$work/run$i/peers.log" | tail -n 60
done
tar czf "$OUT/peers.tgz" -C "$work" .
echo "== $(date -u +%H:%M:%S) done"
