#!/usr/bin/env bash
# Whole-command benchmark: `drift diff` over N desired/live pairs read from YAML files
# (default 10,000: Deployments, Services and ConfigMaps, 1 in 10 with a drift). Desired files are
# block YAML, live files JSON (as `kubectl get -o json` writes them).
# Usage: benches/diff-10k.sh [N]   (prints wall time and peak memory)
set -euo pipefail
cd "$(dirname "$0")/.."
N="${1:-10000}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/drift-target}"
DATA="${TMPDIR:-/var/tmp}/drift-bench-$N"
# The same packages as scripts/soak builds: another set unifies other features and rebuilds deps.
cargo build --quiet --release -p drift-bin -p drift-test-apiserver
if [ ! -f "$DATA/.done" ]; then
  rm -rf "$DATA"; mkdir -p "$DATA/desired" "$DATA/live"
  python3 - "$N" "$DATA" <<'PY'
import json, sys, os
n, root = int(sys.argv[1]), sys.argv[2]
def dep(i, live):
    d = {"apiVersion": "apps/v1", "kind": "Deployment",
         "metadata": {"name": f"app-{i}", "namespace": f"ns-{i % 50}", "labels": {"app": f"app-{i}"}},
         "spec": {"replicas": 2, "selector": {"matchLabels": {"app": f"app-{i}"}},
                  "template": {"metadata": {"labels": {"app": f"app-{i}"}},
                               "spec": {"containers": [{"name": "app", "image": f"registry.example/app:{i % 7}.0",
                                                        "ports": [{"containerPort": 8080}],
                                                        "env": [{"name": "MODE", "value": "prod"}],
                                                        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"},
                                                                      "limits": {"cpu": "1000m", "memory": "1024Mi"}}}]}}}}
    if live:
        d["metadata"].update({"uid": f"u-{i}", "resourceVersion": str(1000 + i), "generation": 1,
                              "creationTimestamp": "2026-11-01T00:00:00Z",
                              "managedFields": [{"manager": "kubectl-client-side-apply", "operation": "Update",
                                                 "time": "2026-11-01T00:00:00Z", "fieldsType": "FieldsV1",
                                                 "fieldsV1": {"f:spec": {"f:replicas": {}}}}]})
        s = d["spec"]; s.update({"revisionHistoryLimit": 10, "progressDeadlineSeconds": 600,
                                 "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}})
        c = s["template"]["spec"]["containers"][0]
        c.update({"imagePullPolicy": "IfNotPresent", "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"})
        c["ports"][0]["protocol"] = "TCP"
        c["resources"]["limits"] = {"cpu": "1", "memory": "1Gi"}
        s["template"]["spec"].update({"restartPolicy": "Always", "dnsPolicy": "ClusterFirst", "schedulerName": "default-scheduler",
                                      "securityContext": {}, "terminationGracePeriodSeconds": 30})
        d["status"] = {"replicas": 2, "readyReplicas": 2}
        if i % 10 == 0:
            s["replicas"] = 4
    return d
def svc(i, live):
    d = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": f"svc-{i}", "namespace": f"ns-{i % 50}"},
         "spec": {"selector": {"app": f"app-{i}"}, "ports": [{"port": 80, "targetPort": 8080}]}}
    if live:
        d["metadata"].update({"uid": f"s-{i}", "resourceVersion": str(i)})
        d["spec"].update({"type": "ClusterIP", "clusterIP": f"10.0.{i // 250 % 250}.{i % 250}", "sessionAffinity": "None"})
        d["spec"]["ports"][0]["protocol"] = "TCP"
        if i % 10 == 3:
            d["spec"]["ports"][0]["targetPort"] = 9090
    return d
def cm(i, live):
    d = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"cm-{i}", "namespace": f"ns-{i % 50}"},
         "data": {"a": "1", "b": "two", "c": "x" * 200}}
    if live:
        d["metadata"].update({"uid": f"c-{i}", "resourceVersion": str(i)})
        if i % 10 == 5:
            d["data"]["b"] = "three"
    return d
def yaml(v, indent=0):
    pad = "  " * indent
    if isinstance(v, dict):
        out = []
        for k, x in v.items():
            if isinstance(x, (dict, list)) and x:
                out.append(f"{pad}{k}:\n{yaml(x, indent + 1)}")
            else:
                out.append(f"{pad}{k}: {json.dumps(x)}")
        return "\n".join(out)
    if isinstance(v, list):
        out = []
        for x in v:
            body = yaml(x, indent + 1).lstrip() if isinstance(x, (dict, list)) else json.dumps(x)
            out.append(f"{pad}- {body}")
        return "\n".join(out)
    return pad + json.dumps(v)
makers = [dep, svc, cm]
for i in range(n):
    mk = makers[i % 3]
    for side, live in (("desired", False), ("live", True)):
        with open(os.path.join(root, side, f"{i:06d}.json" if side == "live" else f"{i:06d}.yaml"), "w") as f:
            if live:
                json.dump(mk(i, True), f)
            else:
                f.write(yaml(mk(i, False)) + "\n")
PY
  touch "$DATA/.done"
fi
echo "pairs: $N ($(du -sh "$DATA" | cut -f1) of files)"
set +e
/usr/bin/time -f "wall %e s, user %U s, sys %S s, peak RSS %M KiB" "$CARGO_TARGET_DIR/release/drift" diff --desired "$DATA/desired" --live "$DATA/live" -o json > "$DATA/out.json"
code=$?
set -e
echo "exit code $code; drifts: $(python3 -c "import json;print(json.load(open('$DATA/out.json'))['summary']['drifts'])" "$DATA")"
