#!/usr/bin/env python3
"""Writes N desired/live pairs of real-sized workloads for whole-command benchmarks.

Deployments and StatefulSets in turn, each the size and shape of what a real cluster holds for
a production workload: two containers (an application and a sidecar) with ten environment
variables, probes, mounts, resources and a security context, affinity and tolerations; the
StatefulSet with a volume claim template. The desired side is block YAML as a repository holds
it (one file per object). The live side is JSON as `kubectl get -o json` writes it: the
API server's defaults, `status`, `managedFields` of the last `kubectl apply` (a fieldsV1 tree of
every field it set) and of the controller (status), and the
`kubectl.kubernetes.io/last-applied-configuration` annotation. About 8 pairs in 10 drift (a
scaled replica count, a changed image, an added environment variable, a label), the rest are in
sync. Every object is written by this script from the templates below (issue 15: "a generator
script for such pairs, from your own fixtures").

    benches/real-pairs.py N DIR      # writes DIR/desired/NNNNNN.yaml and DIR/live/NNNNNN.json
"""
import copy
import json
import os
import sys


def container(name, image, port, env_prefix):
    return {
        "name": name,
        "image": image,
        "args": [f"--listen=:{port}", "--log-format=json", f"--name={name}"],
        "ports": [{"name": "http", "containerPort": port}, {"name": "metrics", "containerPort": port + 1}],
        "env": [{"name": f"{env_prefix}_{k}", "value": f"value-{k}-{name}"} for k in range(8)]
        + [
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        ],
        "resources": {"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}},
        "readinessProbe": {"httpGet": {"path": "/ready", "port": port}, "periodSeconds": 5},
        "livenessProbe": {"httpGet": {"path": "/health", "port": port}, "initialDelaySeconds": 10},
        "volumeMounts": [
            {"name": "config", "mountPath": "/etc/app", "readOnly": True},
            {"name": "data", "mountPath": "/var/lib/app"},
        ],
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": 10001,
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        },
    }


def workload(i):
    kind = "Deployment" if i % 2 == 0 else "StatefulSet"
    name, ns = f"app-{i}", f"team-{i % 50}"
    labels = {"app.kubernetes.io/name": name, "app.kubernetes.io/part-of": f"shop-{i % 13}", "tier": "backend"}
    pod = {
        "metadata": {"labels": dict(labels), "annotations": {"prometheus.io/scrape": "true", "prometheus.io/port": "8081"}},
        "spec": {
            "serviceAccountName": name,
            "containers": [
                container("app", f"registry.example/shop/{name}:1.{i % 17}.0", 8080, "APP"),
                container("proxy", "registry.example/envoy:1.31.2", 9901, "PROXY"),
            ],
            "volumes": [{"name": "config", "configMap": {"name": f"{name}-config"}}]
            + ([{"name": "data", "emptyDir": {}}] if kind == "Deployment" else []),
            "affinity": {
                "podAntiAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "weight": 100,
                            "podAffinityTerm": {
                                "labelSelector": {"matchLabels": {"app.kubernetes.io/name": name}},
                                "topologyKey": "kubernetes.io/hostname",
                            },
                        }
                    ]
                }
            },
            "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "shop", "effect": "NoSchedule"}],
        },
    }
    spec = {"replicas": 3, "selector": {"matchLabels": {"app.kubernetes.io/name": name}}, "template": pod}
    if kind == "StatefulSet":
        spec["serviceName"] = name
        spec["volumeClaimTemplates"] = [
            {
                "metadata": {"name": "data"},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}},
            }
        ]
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "spec": spec,
    }


def fields(value):
    """The fieldsV1 tree of a value as an applier owns it (lists of named items keyed by name)."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if isinstance(v, list) and v and all(isinstance(x, dict) and "name" in x for x in v):
                out[f"f:{k}"] = {f'k:{{"name":"{x["name"]}"}}': {".": {}, **fields(x)} for x in v}
            elif isinstance(v, dict) and v:
                out[f"f:{k}"] = {".": {}, **fields(v)} if k not in ("metadata",) else fields(v)
            else:
                out[f"f:{k}"] = {}
        return out
    return {}


def live(desired, i, drift):
    obj = copy.deepcopy(desired)
    applied = json.dumps(desired, separators=(",", ":"), sort_keys=True)
    meta = obj["metadata"]
    meta.update(
        {
            "uid": f"5f1c2b7e-0000-4000-8000-{i:012d}",
            "resourceVersion": str(184_000 + i),
            "generation": 2 if drift else 1,
            "creationTimestamp": "2026-11-20T08:00:00Z",
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": applied + "\n"},
            "managedFields": [
                {
                    "manager": "kubectl-client-side-apply",
                    "operation": "Update",
                    "apiVersion": "apps/v1",
                    "time": "2026-11-20T08:00:00Z",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {
                        "f:metadata": {
                            "f:annotations": {".": {}, "f:kubectl.kubernetes.io/last-applied-configuration": {}},
                            **fields({"labels": desired["metadata"]["labels"]}),
                        },
                        "f:spec": fields(desired["spec"]),
                    },
                },
                {
                    "manager": "kube-controller-manager",
                    "operation": "Update",
                    "apiVersion": "apps/v1",
                    "time": "2026-11-20T08:00:05Z",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:status": {"f:replicas": {}, "f:readyReplicas": {}, "f:observedGeneration": {}}},
                    "subresource": "status",
                },
            ],
        }
    )
    spec = obj["spec"]
    spec["revisionHistoryLimit"] = 10
    if obj["kind"] == "Deployment":
        spec["progressDeadlineSeconds"] = 600
        spec["strategy"] = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}
    else:
        spec["podManagementPolicy"] = "OrderedReady"
        spec["updateStrategy"] = {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}
        spec["persistentVolumeClaimRetentionPolicy"] = {"whenDeleted": "Retain", "whenScaled": "Retain"}
        for t in spec["volumeClaimTemplates"]:
            t.update({"apiVersion": "v1", "kind": "PersistentVolumeClaim"})
            t["spec"]["volumeMode"] = "Filesystem"
            t["status"] = {"phase": "Pending"}
    pod = spec["template"]["spec"]
    pod.update(
        {
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "securityContext": {},
            "schedulerName": "default-scheduler",
            "serviceAccount": pod["serviceAccountName"],
        }
    )
    for v in pod["volumes"]:
        if "configMap" in v:
            v["configMap"]["defaultMode"] = 420
    for c in pod["containers"]:
        c.update(
            {
                "imagePullPolicy": "IfNotPresent",
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File",
            }
        )
        for p in c["ports"]:
            p["protocol"] = "TCP"
        for env in c["env"]:
            if "valueFrom" in env:
                env["valueFrom"]["fieldRef"]["apiVersion"] = "v1"
        for probe in ("readinessProbe", "livenessProbe"):
            c[probe]["httpGet"]["scheme"] = "HTTP"
            c[probe].update({"timeoutSeconds": 1, "successThreshold": 1, "failureThreshold": 3})
            c[probe].setdefault("periodSeconds", 10)
    if drift:
        # A person's change, with the manager kubectl records for it.
        change = i % 4
        if change == 0:
            spec["replicas"] = 5
            manager, owned = "kubectl-scale", {"f:spec": {"f:replicas": {}}}
        elif change == 1:
            pod["containers"][0]["image"] = pod["containers"][0]["image"].replace(":1.", ":2.")
            owned = {'k:{"name":"app"}': {"f:image": {}}}
            manager, owned = "kubectl-set", {"f:spec": {"f:template": {"f:spec": {"f:containers": owned}}}}
        elif change == 2:
            pod["containers"][0]["env"].append({"name": "DEBUG", "value": "true"})
            env = {'k:{"name":"DEBUG"}': {".": {}, "f:name": {}, "f:value": {}}}
            owned = {'k:{"name":"app"}': {"f:env": env}}
            manager, owned = "kubectl-edit", {"f:spec": {"f:template": {"f:spec": {"f:containers": owned}}}}
        else:
            meta["labels"]["hotfix"] = "2026-11-28"
            manager, owned = "kubectl-label", {"f:metadata": {"f:labels": {"f:hotfix": {}}}}
        meta["managedFields"].append(
            {
                "manager": manager,
                "operation": "Update",
                "apiVersion": "apps/v1",
                "time": "2026-11-28T14:12:09Z",
                "fieldsType": "FieldsV1",
                "fieldsV1": owned,
            }
        )
    obj["status"] = {
        "observedGeneration": meta["generation"],
        "replicas": spec["replicas"],
        "readyReplicas": spec["replicas"],
        "availableReplicas": spec["replicas"],
        "conditions": [
            {
                "type": "Available",
                "status": "True",
                "lastUpdateTime": "2026-11-20T08:00:30Z",
                "lastTransitionTime": "2026-11-20T08:00:30Z",
                "reason": "MinimumReplicasAvailable",
                "message": "Deployment has minimum availability.",
            }
        ],
    }
    return obj


def yaml(v, indent=0):
    """Block YAML of plain JSON data (strings quoted as JSON, which YAML reads the same)."""
    pad = "  " * indent
    if isinstance(v, dict):
        out = []
        for k, x in v.items():
            key = json.dumps(k) if any(ch in k for ch in ":#{}[]") else k
            if isinstance(x, (dict, list)) and x:
                out.append(f"{pad}{key}:\n{yaml(x, indent + 1)}")
            else:
                out.append(f"{pad}{key}: {json.dumps(x)}")
        return "\n".join(out)
    if isinstance(v, list):
        out = []
        for x in v:
            body = yaml(x, indent + 1).lstrip() if isinstance(x, (dict, list)) and x else json.dumps(x)
            out.append(f"{pad}- {body}")
        return "\n".join(out)
    return pad + json.dumps(v)


def main():
    n, root = int(sys.argv[1]), sys.argv[2]
    for side in ("desired", "live"):
        os.makedirs(os.path.join(root, side), exist_ok=True)
    for i in range(n):
        desired = workload(i)
        drift = i % 10 < 8
        with open(os.path.join(root, "desired", f"{i:06d}.yaml"), "w") as f:
            f.write(yaml(desired) + "\n")
        with open(os.path.join(root, "live", f"{i:06d}.json"), "w") as f:
            json.dump(live(desired, i, drift), f, indent=2)
            f.write("\n")


if __name__ == "__main__":
    main()
