#!/usr/bin/env bash
# Whole-command benchmark on real-sized workloads: `drift diff` over N Deployment and StatefulSet
# pairs written by benches/real-pairs.py (desired block YAML of about 5 KB, live JSON as
# `kubectl get -o json` writes it, about 27 KB (13 KB without indentation) with defaults, status, managedFields and the
# last-applied annotation; 8 pairs in 10 drift). Prints wall time, CPU and peak memory.
# Usage: benches/diff-real.sh [N] [DRIFT_BINARY]   (default 10,000 and the release build)
set -euo pipefail
cd "$(dirname "$0")/.."
N="${1:-10000}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/drift-target}"
BIN="${2:-}"
if [ -z "$BIN" ]; then
  # The same packages as scripts/soak builds: another set unifies other features and rebuilds deps.
  cargo build --quiet --release -p drift-bin -p drift-test-apiserver
  BIN="$CARGO_TARGET_DIR/release/drift"
fi
DATA="${TMPDIR:-/var/tmp}/drift-real-$N"
if [ ! -f "$DATA/.done" ]; then
  rm -rf "$DATA"
  python3 benches/real-pairs.py "$N" "$DATA"
  touch "$DATA/.done"
fi
echo "pairs: $N ($(du -sh "$DATA" | cut -f1) of files); binary: $BIN; load: $(cut -d' ' -f1-3 /proc/loadavg)"
set +e
/usr/bin/time -f "wall %e s, user %U s, sys %S s, peak RSS %M KiB" "$BIN" diff --desired "$DATA/desired" --live "$DATA/live" -o json > "$DATA/out.json"
code=$?
set -e
echo "exit code $code; drifts: $(python3 -c "import json,sys;print(json.load(open(sys.argv[1]))['summary']['drifts'])" "$DATA/out.json")"
