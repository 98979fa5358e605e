#!/bin/bash
# Benchmark of the release drift-test-apiserver: seed 10,000 ConfigMaps, list them.
# Usage: cargo build --release -p drift-test-apiserver && drift-test-apiserver/bench/list-10000.sh
# Needs curl, python3, bc and kubectl. Measures only; asserts nothing.
set -euo pipefail
BIN=${BIN:-${CARGO_TARGET_DIR:-target}/release/drift-test-apiserver}
dir=$(mktemp -d)
export HOME=$dir KUBECONFIG=$dir/kc
"$BIN" --listen 127.0.0.1:0 --kubeconfig "$dir/kc" > "$dir/out" &
pid=$!
trap 'kill $pid; rm -rf "$dir"' EXIT
for _ in $(seq 100); do grep -q listening "$dir/out" 2>/dev/null && break; sleep 0.05; done
addr=$(sed -n 's/^listening on //p' "$dir/out")
python3 - "$dir/objects.json" <<'PY'
import json, sys
items = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bulk"}}]
items += [{"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": f"cm-{i:05d}", "namespace": "bulk", "labels": {"mod": str(i % 7)}},
           "data": {"key": "x" * 64}} for i in range(10000)]
json.dump(items, open(sys.argv[1], "w"))
PY
# Wall time of the command, and CPU time the server spent meanwhile (utime+stime, 1/100 s):
# the machine is shared, so the server's own CPU time is the figure to compare.
cpu() { awk '{print $14+$15}' /proc/$pid/stat; }
t() { local s=$(date +%s.%N) c=$(cpu); "$@" > /dev/null; echo "wall $(echo "$(date +%s.%N) - $s" | bc | cut -c1-6) s, server CPU $(echo "($(cpu) - $c) / 100" | bc -l | cut -c1-5) s"; }
echo "seed 10,000 ConfigMaps (POST /_admin/objects): $(t curl -sf -X POST --data-binary @"$dir/objects.json" "http://$addr/_admin/objects")"
for i in 1 2 3; do
  echo "GET one list of 10,000 (curl), run $i: $(t curl -sf -o /dev/null "http://$addr/api/v1/namespaces/bulk/configmaps")"
done
for i in 1 2 3; do
  echo "20 pages of 500 (curl loop), run $i: $(t bash -c "tok=''; while :; do r=\$(curl -sf \"http://$addr/api/v1/namespaces/bulk/configmaps?limit=500&continue=\$tok\"); tok=\$(echo \"\$r\" | python3 -c 'import json,sys; print(json.load(sys.stdin)[\"metadata\"].get(\"continue\",\"\"))'); [ -z \"\$tok\" ] && break; done")"
done
kubectl get ns > /dev/null
for i in 1 2 3; do
  echo "kubectl get configmaps -n bulk -o name (chunk 500), run $i: $(t kubectl get configmaps -n bulk -o name --chunk-size=500)"
done
echo "label selector mod=3 (curl): $(t curl -sf -o /dev/null "http://$addr/api/v1/namespaces/bulk/configmaps?labelSelector=mod%3D3")"
