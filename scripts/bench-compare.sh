#!/usr/bin/env bash
# Side by side in one run, on one machine: `drift diff` (one or more builds) and kubediff (with
# libyaml and as shipped) over N real-sized pairs of benches/real-pairs.py (issue 33; the table
# "Against kubediff" in docs/benchmarks.md).
#
#   scripts/bench-compare.sh N ROUNDS DRIFT_BINARY [DRIFT_BINARY ...]
#
# Each round runs every drift binary, then kubediff with libyaml, alternating, and prints one
# line per command: wall, user and system time and peak RSS (`/usr/bin/time`), the load average
# before it, and what it found. Then hyperfine times the drift binaries against each other
# (warm-up 1, ROUNDS runs each). kubediff as shipped (pure-Python YAML, about ten times slower
# than with libyaml) runs once, at the end, only with KUBEDIFF_SHIPPED=1.
# kubediff is measured when KUBEDIFF_DIR names a checkout of github.com/weaveworks/kubediff (see
# scripts/bench-kubediff.py); its requirements (pyyaml attrs future) are installed in a venv
# under /var/tmp the first time. The pairs are written once into /var/tmp/drift-real-N.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 3 ] || { sed -n '2,16p' "$0"; exit 2; }
N="$1"; ROUNDS="$2"; shift 2
DATA="${TMPDIR:-/var/tmp}/drift-real-$N"
if [ ! -f "$DATA/.done" ]; then
  rm -rf "$DATA"
  python3 benches/real-pairs.py "$N" "$DATA"
  touch "$DATA/.done"
fi
PY=""
if [ -n "${KUBEDIFF_DIR:-}" ]; then
  VENV="${TMPDIR:-/var/tmp}/drift-kubediff-venv"
  if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet pyyaml attrs future
  fi
  PY="$VENV/bin/python"
fi
echo "pairs: $N ($(du -sh "$DATA/desired" | cut -f1) desired YAML, $(du -sh "$DATA/live" | cut -f1) live JSON); $(nproc) cores; $(date -u +%FT%TZ)"
measure() {  # measure LABEL COMMAND...
  local label="$1"; shift
  local load; load="$(cut -d' ' -f1 /proc/loadavg)"
  local out; out="$(mktemp)"
  set +e
  /usr/bin/time -f "%e %U %S %M" -o "$out.time" "$@" > "$out" 2>/dev/null
  set -e
  read -r wall user sys rss < <(tail -n 1 "$out.time")
  local found
  if [[ "$label" == drift* ]]; then
    found="$(python3 -c "import json,sys;print(json.load(open(sys.argv[1]))['summary']['drifts'], 'drifts')" "$out")"
  else
    found="$(cat "$out")"
  fi
  printf '%-28s wall %6.2f s  user %6.2f s  sys %5.2f s  peak %5d MiB  load %s  %s\n' \
    "$label" "$wall" "$user" "$sys" "$((rss / 1024))" "$load" "$found"
  rm -f "$out" "$out.time"
}
for round in $(seq "$ROUNDS"); do
  echo "round $round"
  for bin in "$@"; do
    measure "drift $(basename "$(dirname "$bin")")/$(basename "$bin")" \
      "$bin" diff --desired "$DATA/desired" --live "$DATA/live" -o json
  done
  if [ -n "$PY" ]; then
    measure "kubediff (libyaml)" "$PY" scripts/bench-kubediff.py "$KUBEDIFF_DIR" "$DATA" --libyaml
  fi
done
if command -v hyperfine > /dev/null; then
  cmds=()
  for bin in "$@"; do cmds+=("$bin diff --desired $DATA/desired --live $DATA/live -o json > /dev/null"); done
  hyperfine --warmup 1 --runs "$ROUNDS" -i "${cmds[@]}"
fi
if [ -n "$PY" ] && [ "${KUBEDIFF_SHIPPED:-0}" = 1 ]; then
  measure "kubediff (as shipped)" "$PY" scripts/bench-kubediff.py "$KUBEDIFF_DIR" "$DATA"
fi
