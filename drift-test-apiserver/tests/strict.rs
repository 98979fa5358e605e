//! The test API server as strict as the real one where kubectl looks (issue 30, item 5):
//! kubectl validates with its default `--validate=strict` (server-side field validation through
//! OpenAPI v3, client-side validation of `kind: List` documents through OpenAPI v2), unknown
//! and duplicate fields are refused with the API server's errors, and the kinds a GitOps
//! repository holds read back with the API server's defaults. The expected objects are written
//! by hand from Kubernetes' defaulting functions (`pkg/apis/*/v1/defaults.go`), its Pod
//! strategy and its default admission plugins.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Kubectl, stable};
use serde_json::{Value, json};

const TYPO: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replica: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: nginx:1.27
        imagePullPolice: Always
"#;

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn unknown_fields_are_refused_as_the_api_server_refuses_them() {
    let k = Kubectl::start();
    let file = k.file("typo.yaml", TYPO);
    let f = file.to_str().unwrap();
    // kubectl sends fieldValidation=Strict: the strict decoding error of the create handler,
    // every unknown field with its path, in the order of the body kubectl sends (keys sorted).
    let strict = "Deployment in version \"v1\" cannot be handled as a Deployment: strict decoding error: \
        unknown field \"spec.replica\", unknown field \"spec.template.spec.containers[0].imagePullPolice\"";
    for verb in ["apply", "create"] {
        let err = stderr(&k.fails(&[verb, "-f", f]));
        assert!(err.contains("Error from server (BadRequest): error when creating"), "{verb}: {err}");
        assert!(err.contains(strict), "{verb}: {err}");
    }
    // Server-side apply converts the configuration to its typed form whatever the directive.
    for extra in [&[][..], &["--validate=false"][..]] {
        let mut args = vec!["apply", "--server-side", "-f", f];
        args.extend_from_slice(extra);
        let err = stderr(&k.fails(&args));
        assert!(
            err.contains(
                "Error from server: failed to create typed patch object (default/web; apps/v1, Kind=Deployment): \
                 .spec.replica: field not declared in schema"
            ),
            "{args:?}: {err}"
        );
    }
    let missing = stderr(&k.fails(&["get", "deployment", "web"]));
    assert!(missing.contains("NotFound"), "nothing was stored: {missing}");

    // Warn: served, with a warning per field, and the fields dropped as decoding drops them.
    let out = k.command(&["apply", "--validate=warn", "-f", f]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("Warning: unknown field \"spec.replica\""), "{err}");
    assert!(err.contains("Warning: unknown field \"spec.template.spec.containers[0].imagePullPolice\""), "{err}");
    let d = k.get("deployment/web", "default");
    assert!(d["spec"].get("replica").is_none());
    assert_eq!(d["spec"]["replicas"], 1, "defaulted, not read from the unknown field");
    assert_eq!(d["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"], "IfNotPresent");

    // Ignore (--validate=false): silently dropped.
    let out = k.command(&["apply", "--validate=false", "-f", f]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!stderr(&out).contains("Warning"), "{}", stderr(&out));
}

#[test]
fn duplicate_fields_are_refused_with_strict_and_warned_about_by_default() {
    let k = Kubectl::start();
    let file = k.file(
        "dup.json",
        r#"{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "d", "name": "d"}, "data": {"a": "1"}, "bogus": 1}"#,
    );
    let f = file.to_str().unwrap();
    let err =
        stderr(&k.fails(&["create", "--raw", "/api/v1/namespaces/default/configmaps?fieldValidation=Strict", "-f", f]));
    assert!(
        err.contains(
            "Error from server (BadRequest): ConfigMap in version \"v1\" cannot be handled as a ConfigMap: \
             strict decoding error: duplicate field \"metadata.name\", unknown field \"bogus\""
        ),
        "{err}"
    );
    // Without the parameter the API server warns (its default is Warn) and serves.
    let out = k.command(&["create", "--raw", "/api/v1/namespaces/default/configmaps", "-f", f]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("Warning: duplicate field \"metadata.name\""), "{}", stderr(&out));
    assert!(stderr(&out).contains("Warning: unknown field \"bogus\""), "{}", stderr(&out));
    let cm = k.get("configmap/d", "default");
    assert_eq!(cm["data"], json!({"a": "1"}));
    assert!(cm.get("bogus").is_none());
}

#[test]
fn list_documents_are_validated_on_the_client_with_openapi_v2() {
    let k = Kubectl::start();
    let list = |extra: &str| {
        format!(
            "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {{name: listed}}\n  data: {{a: \"1\"}}\n{extra}"
        )
    };
    // kubectl cannot validate a List on the server: it reads the v2 schemas (as protobuf).
    k.stdin(&["apply", "-f", "-"], &list(""));
    assert_eq!(k.get("configmap/listed", "default")["data"], json!({"a": "1"}));
    let file = k.file("bad-list.yaml", &list("  bogus: 2\n"));
    let err = stderr(&k.fails(&["apply", "-f", file.to_str().unwrap()]));
    assert!(
        err.contains("ValidationError(ConfigMap): unknown field \"bogus\" in io.k8s.api.core.v1.ConfigMap"),
        "{err}"
    );
    // And kubectl explain reads the v3 schemas.
    let explained = k.ok(&["explain", "pod.spec.containers.imagePullPolicy"]);
    assert!(explained.contains("Image pull policy"), "{explained}");
}

const GITOPS: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: web, labels: {app: web}}
spec:
  containers:
  - name: web
    image: nginx:1.27
    ports: [{containerPort: 80}]
    resources: {limits: {cpu: 250m, memory: 64Mi}}
    readinessProbe: {httpGet: {port: 80}}
---
apiVersion: batch/v1
kind: Job
metadata: {name: migrate}
spec:
  template:
    metadata: {labels: {app: migrate}}
    spec:
      restartPolicy: Never
      containers: [{name: m, image: "busybox:1.36", command: [sh, -c, "true"]}]
---
apiVersion: batch/v1
kind: CronJob
metadata: {name: backup}
spec:
  schedule: "0 3 * * *"
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: OnFailure
          containers: [{name: b, image: busybox}]
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      containers: [{name: a, image: "agent:2", volumeMounts: [{name: logs, mountPath: /var/log}]}]
      volumes: [{name: logs, hostPath: {path: /var/log}}, {name: scratch}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  serviceName: db
  selector: {matchLabels: {app: db}}
  updateStrategy: {type: RollingUpdate}
  template:
    metadata: {labels: {app: db}}
    spec:
      serviceAccountName: db
      containers: [{name: db, image: "postgres:16", ports: [{containerPort: 5432, name: pg}]}]
  volumeClaimTemplates:
  - metadata: {name: data}
    spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1024Mi}}}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: web}
spec:
  ingressClassName: nginx
  rules:
  - host: web.example.com
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: db}
spec:
  podSelector: {matchLabels: {app: db}}
  ingress: [{from: [{podSelector: {matchLabels: {app: web}}}], ports: [{port: 5432}]}]
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: cache}
spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 0.5Gi}}}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: web}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  maxReplicas: 5
  behavior: {scaleDown: {stabilizationWindowSeconds: 300}}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web}
spec: {minAvailable: 1, selector: {matchLabels: {app: web}}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: reader}
rules: [{apiGroups: [""], resources: [configmaps], verbs: [get, list]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: reader}
roleRef: {kind: Role, name: reader}
subjects: [{kind: ServiceAccount, name: db}, {kind: User, name: jane}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: drift-test-reader}
rules: [{apiGroups: [apps], resources: [deployments], verbs: [get]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: drift-test-reader}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: drift-test-reader}
subjects: [{kind: Group, name: ops}]
"#;

/// The object without what changes on every run and without its metadata but labels: the
/// fields the API server defaults.
fn defaulted(v: &Value) -> Value {
    let mut v = stable(v);
    let labels = v["metadata"].get("labels").cloned();
    let m = v.as_object_mut().unwrap();
    m.remove("metadata");
    m.remove("apiVersion");
    m.remove("kind");
    if let Some(l) = labels {
        m.insert("labels".into(), l);
    }
    v
}

/// A container with the defaults every container gets, and `extra`.
fn container(extra: Value) -> Value {
    let mut c =
        json!({"resources": {}, "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"});
    for (k, v) in extra.as_object().unwrap() {
        c[k] = v.clone();
    }
    c
}

/// A pod spec with the defaults of `SetDefaults_PodSpec`, and `extra`.
fn pod_spec(restart: &str, extra: Value) -> Value {
    let mut s = json!({"dnsPolicy": "ClusterFirst", "restartPolicy": restart, "schedulerName": "default-scheduler",
        "securityContext": {}, "terminationGracePeriodSeconds": 30});
    for (k, v) in extra.as_object().unwrap() {
        s[k] = v.clone();
    }
    s
}

#[test]
fn the_kinds_of_a_gitops_repository_apply_with_validation_and_read_back_the_api_servers_defaults() {
    let k = Kubectl::start();
    // kubectl's default validation: fieldValidation=Strict on every object.
    let out = k.stdin(&["apply", "-f", "-"], GITOPS);
    assert_eq!(out.lines().count(), 14, "{out}");
    assert!(
        k.server
            .requests()
            .iter()
            .filter(|r| r.method == "POST")
            .all(|r| r.query.get("fieldValidation").is_some_and(|v| v == "Strict"))
    );

    // Pod: SetDefaults_Pod (requests from limits, enableServiceLinks), the pod spec's and the
    // containers' defaults, and on create the ServiceAccount, Priority and
    // DefaultTolerationSeconds admission plugins and the status of PrepareForCreate.
    let pod = k.get("pod/web", "default");
    let volume = pod["spec"]["volumes"][0]["name"].as_str().unwrap().to_owned();
    assert!(volume.starts_with("kube-api-access-") && volume.len() == "kube-api-access-".len() + 5, "{volume}");
    let toleration =
        |key: &str| json!({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300});
    assert_eq!(
        defaulted(&pod),
        json!({
            "labels": {"app": "web"},
            "spec": pod_spec("Always", json!({
                "containers": [container(json!({"name": "web", "image": "nginx:1.27", "imagePullPolicy": "IfNotPresent",
                    "ports": [{"containerPort": 80, "protocol": "TCP"}],
                    "resources": {"limits": {"cpu": "250m", "memory": "64Mi"}, "requests": {"cpu": "250m", "memory": "64Mi"}},
                    "readinessProbe": {"httpGet": {"path": "/", "port": 80, "scheme": "HTTP"}, "timeoutSeconds": 1,
                        "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3},
                    "volumeMounts": [{"name": volume, "readOnly": true,
                        "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}]}))],
                "enableServiceLinks": true,
                "preemptionPolicy": "PreemptLowerPriority",
                "priority": 0,
                "serviceAccount": "default",
                "serviceAccountName": "default",
                "tolerations": [toleration("node.kubernetes.io/not-ready"), toleration("node.kubernetes.io/unreachable")],
                "volumes": [{"name": volume, "projected": {"defaultMode": 420, "sources": [
                    {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                    {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                    {"downwardAPI": {"items": [{"path": "namespace",
                        "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}]}}],
            })),
            "status": {"phase": "Pending", "qosClass": "Guaranteed"},
        })
    );

    // Job: SetDefaults_Job (its labels from the template's), then the selector and labels of
    // its uid.
    let job = k.get("job/migrate", "default");
    let uid = job["metadata"]["uid"].clone();
    assert_eq!(
        defaulted(&job),
        json!({
            "labels": {"app": "migrate"},
            "spec": {"backoffLimit": 6, "completionMode": "NonIndexed", "completions": 1, "parallelism": 1,
                "podReplacementPolicy": "TerminatingOrFailed", "suspend": false,
                "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}},
                "template": {
                    "metadata": {"creationTimestamp": null, "labels": {"app": "migrate",
                        "batch.kubernetes.io/controller-uid": uid, "batch.kubernetes.io/job-name": "migrate",
                        "controller-uid": uid, "job-name": "migrate"}},
                    "spec": pod_spec("Never", json!({"containers": [container(json!({"name": "m", "image": "busybox:1.36",
                        "imagePullPolicy": "IfNotPresent", "command": ["sh", "-c", "true"]}))]})),
                }},
            "status": {},
        })
    );

    // CronJob: SetDefaults_CronJob; the job template gets the pod defaults, not the Job's.
    assert_eq!(
        defaulted(&k.get("cronjob/backup", "default")),
        json!({
            "spec": {"concurrencyPolicy": "Allow", "failedJobsHistoryLimit": 1, "schedule": "0 3 * * *",
                "successfulJobsHistoryLimit": 3, "suspend": false,
                "jobTemplate": {"metadata": {"creationTimestamp": null}, "spec": {"template": {
                    "metadata": {"creationTimestamp": null},
                    "spec": pod_spec("OnFailure", json!({"containers": [container(json!({"name": "b", "image": "busybox",
                        "imagePullPolicy": "Always"}))]})),
                }}}},
            "status": {},
        })
    );

    // DaemonSet: SetDefaults_DaemonSet; a volume without a source is an emptyDir.
    assert_eq!(
        defaulted(&k.get("daemonset/agent", "default")),
        json!({
            "spec": {"revisionHistoryLimit": 10, "selector": {"matchLabels": {"app": "agent"}},
                "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}},
                "template": {"metadata": {"creationTimestamp": null, "labels": {"app": "agent"}},
                    "spec": pod_spec("Always", json!({
                        "containers": [container(json!({"name": "a", "image": "agent:2", "imagePullPolicy": "IfNotPresent",
                            "volumeMounts": [{"name": "logs", "mountPath": "/var/log"}]}))],
                        "volumes": [{"name": "logs", "hostPath": {"path": "/var/log", "type": ""}},
                            {"name": "scratch", "emptyDir": {}}],
                    }))}},
            "status": {"currentNumberScheduled": 0, "desiredNumberScheduled": 0, "numberMisscheduled": 0,
                "numberReady": 0},
        })
    );

    // StatefulSet: a strategy given as RollingUpdate without rollingUpdate gets no partition;
    // serviceAccount is written as the alias of serviceAccountName; claim templates are PVCs.
    assert_eq!(
        defaulted(&k.get("statefulset/db", "default")),
        json!({
            "spec": {"persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Retain", "whenScaled": "Retain"},
                "podManagementPolicy": "OrderedReady", "replicas": 1, "revisionHistoryLimit": 10,
                "selector": {"matchLabels": {"app": "db"}}, "serviceName": "db",
                "updateStrategy": {"type": "RollingUpdate"},
                "template": {"metadata": {"creationTimestamp": null, "labels": {"app": "db"}},
                    "spec": pod_spec("Always", json!({
                        "containers": [container(json!({"name": "db", "image": "postgres:16", "imagePullPolicy": "IfNotPresent",
                            "ports": [{"containerPort": 5432, "name": "pg", "protocol": "TCP"}]}))],
                        "serviceAccount": "db", "serviceAccountName": "db",
                    }))},
                "volumeClaimTemplates": [{"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                    "metadata": {"creationTimestamp": null, "name": "data"},
                    "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}},
                        "volumeMode": "Filesystem"},
                    "status": {"phase": "Pending"}}]},
            "status": {"availableReplicas": 0, "replicas": 0},
        })
    );

    // Ingress: nothing defaulted; an empty load balancer status.
    let ingress = defaulted(&k.get("ingress/web", "default"));
    assert_eq!(ingress["status"], json!({"loadBalancer": {}}));
    assert_eq!(ingress["spec"]["rules"][0]["http"]["paths"][0]["pathType"], "Prefix");

    // NetworkPolicy: policyTypes from the rules, ports TCP.
    assert_eq!(
        defaulted(&k.get("networkpolicy/db", "default")),
        json!({"spec": {"podSelector": {"matchLabels": {"app": "db"}}, "policyTypes": ["Ingress"],
            "ingress": [{"from": [{"podSelector": {"matchLabels": {"app": "web"}}}],
                "ports": [{"port": 5432, "protocol": "TCP"}]}]}})
    );

    // PersistentVolumeClaim: volumeMode, Pending, the canonical quantity.
    assert_eq!(
        defaulted(&k.get("persistentvolumeclaim/cache", "default")),
        json!({"spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "512Mi"}},
            "volumeMode": "Filesystem"}, "status": {"phase": "Pending"}})
    );

    // HorizontalPodAutoscaler: minReplicas, the CPU metric, and a behavior filled in.
    assert_eq!(
        defaulted(&k.get("horizontalpodautoscaler/web", "default")),
        json!({
            "spec": {"maxReplicas": 5, "minReplicas": 1,
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                "metrics": [{"type": "Resource", "resource": {"name": "cpu",
                    "target": {"type": "Utilization", "averageUtilization": 80}}}],
                "behavior": {
                    "scaleDown": {"stabilizationWindowSeconds": 300, "selectPolicy": "Max",
                        "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]},
                    "scaleUp": {"stabilizationWindowSeconds": 0, "selectPolicy": "Max",
                        "policies": [{"type": "Pods", "value": 4, "periodSeconds": 15},
                            {"type": "Percent", "value": 100, "periodSeconds": 15}]}}},
            "status": {"desiredReplicas": 0},
        })
    );

    // PodDisruptionBudget: the status of no disruption controller.
    assert_eq!(
        defaulted(&k.get("poddisruptionbudget/web", "default")),
        json!({"spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}},
            "status": {"currentHealthy": 0, "desiredHealthy": 0, "disruptionsAllowed": 0, "expectedPods": 0}})
    );

    // RBAC: roleRef's apiGroup; subjects' apiGroup by kind ("" for a ServiceAccount, not written).
    assert_eq!(
        defaulted(&k.get("role/reader", "default")),
        json!({"rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]})
    );
    assert_eq!(
        defaulted(&k.get("rolebinding/reader", "default")),
        json!({"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"},
            "subjects": [{"kind": "ServiceAccount", "name": "db"},
                {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "jane"}]})
    );
    let text = k.ok(&["get", "clusterrolebinding/drift-test-reader", "-o", "json"]);
    assert_eq!(
        defaulted(&serde_json::from_str(&text).unwrap()),
        json!({"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "drift-test-reader"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "ops"}]})
    );

    // Applying the same files again changes nothing. kubectl still sends a patch where a list
    // without merge key, or a quantity, differs from the live object only by the server's
    // defaults or canonical form ("configured"), as against a real server; the patch changes
    // nothing, so no object gets a new resourceVersion.
    let before = k.server.resource_version();
    let again = k.stdin(&["apply", "-f", "-"], GITOPS);
    assert!(again.contains("pod/web unchanged"), "{again}");
    assert!(again.contains("rolebinding.rbac.authorization.k8s.io/reader configured"), "{again}");
    assert_eq!(k.server.resource_version(), before, "{again}");
}

#[test]
fn pods_are_admitted_as_the_api_servers_plugins_admit_them() {
    let k = Kubectl::start();
    let pod = |name: &str, spec: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  containers: [{{name: c, image: x}}]\n{spec}"
        )
    };
    // A ServiceAccount other than default must exist; its automount setting and image pull
    // secrets are read.
    let file = k.file("sa.yaml", &pod("a", "  serviceAccountName: robot\n"));
    let err = stderr(&k.fails(&["apply", "-f", file.to_str().unwrap()]));
    assert!(
        err.contains(
            "pods \"a\" is forbidden: error looking up service account default/robot: serviceaccount \"robot\" not found"
        ),
        "{err}"
    );
    k.stdin(
        &["apply", "-f", "-"],
        "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: robot}\nautomountServiceAccountToken: false\n\
         imagePullSecrets: [{name: registry}]\n",
    );
    k.stdin(&["apply", "-f", "-"], &pod("a", "  serviceAccountName: robot\n"));
    let a = k.get("pod/a", "default");
    assert!(a["spec"].get("volumes").is_none(), "no token: {}", a["spec"]);
    assert!(a["spec"]["containers"][0].get("volumeMounts").is_none());
    assert_eq!(a["spec"]["imagePullSecrets"], json!([{"name": "registry"}]));
    assert_eq!(a["status"]["qosClass"], "BestEffort");

    // A toleration of every NoExecute taint leaves the defaults out; burstable resources.
    k.stdin(
        &["apply", "-f", "-"],
        &pod(
            "b",
            "  tolerations: [{operator: Exists, effect: NoExecute}]\n  hostNetwork: true\n  schedulingGates: [{name: wait}]\n",
        )
        .replace("image: x}", "image: x, ports: [{containerPort: 8080}], resources: {requests: {cpu: 100m}}}"),
    );
    let b = k.get("pod/b", "default");
    assert_eq!(b["spec"]["tolerations"], json!([{"operator": "Exists", "effect": "NoExecute"}]));
    assert_eq!(b["spec"]["containers"][0]["ports"][0]["hostPort"], 8080, "host network: host ports");
    assert_eq!(b["status"]["qosClass"], "Burstable");
    assert_eq!(b["status"]["conditions"][0]["reason"], "SchedulingGated");

    // Priority: no default class, so a priority of its own is refused.
    let file = k.file("prio.yaml", &pod("c", "  priority: 5\n"));
    let err = stderr(&k.fails(&["apply", "-f", file.to_str().unwrap()]));
    assert!(err.contains("the integer value of priority (5) must not be provided in pod spec"), "{err}");
}
