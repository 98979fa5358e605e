//! The real kubectl drives the server. Every expected object is written down from Kubernetes'
//! documented defaulting rules and kubectl's documented field managers, not copied from what
//! the server returns.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{BufRead as _, BufReader};
use std::process::Stdio;

use common::{Kubectl, fields_of, m, managers, poll, stable};
use serde_json::{Value, json};

const DEPLOYMENT: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: demo
  labels: {app: web}
spec:
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: nginx
        image: nginx:1.25
        ports:
        - containerPort: 80
        resources:
          limits: {cpu: 1000m, memory: 1024Mi}
"#;

/// What `kubectl apply` of DEPLOYMENT reads back from a real 1.32 API server: the defaults of
/// apps/v1 Deployment (replicas 1, RollingUpdate 25%/25%, revisionHistoryLimit 10,
/// progressDeadlineSeconds 600), of the pod template (restartPolicy Always, dnsPolicy
/// ClusterFirst, schedulerName default-scheduler, securityContext {}, grace period 30) and of
/// containers (IfNotPresent for a tagged image, /dev/termination-log, File, TCP), with
/// quantities in canonical form (1000m is 1, 1024Mi is 1Gi).
fn expected_deployment(image: &str, pull: &str) -> Value {
    let last_applied = format!(
        "{{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{{\"annotations\":{{}},\"labels\":{{\"app\":\"web\"}},\"name\":\"web\",\"namespace\":\"demo\"}},\"spec\":{{\"selector\":{{\"matchLabels\":{{\"app\":\"web\"}}}},\"template\":{{\"metadata\":{{\"labels\":{{\"app\":\"web\"}}}},\"spec\":{{\"containers\":[{{\"image\":\"{image}\",\"name\":\"nginx\",\"ports\":[{{\"containerPort\":80}}],\"resources\":{{\"limits\":{{\"cpu\":\"1000m\",\"memory\":\"1024Mi\"}}}}}}]}}}}}}}}\n"
    );
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": last_applied},
            "generation": 1,
            "labels": {"app": "web"},
            "name": "web",
            "namespace": "demo",
        },
        "spec": {
            "progressDeadlineSeconds": 600,
            "replicas": 1,
            "revisionHistoryLimit": 10,
            "selector": {"matchLabels": {"app": "web"}},
            "strategy": {"rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}, "type": "RollingUpdate"},
            "template": {
                "metadata": {"creationTimestamp": null, "labels": {"app": "web"}},
                "spec": {
                    "containers": [{
                        "image": image,
                        "imagePullPolicy": pull,
                        "name": "nginx",
                        "ports": [{"containerPort": 80, "protocol": "TCP"}],
                        "resources": {"limits": {"cpu": "1", "memory": "1Gi"}},
                        "terminationMessagePath": "/dev/termination-log",
                        "terminationMessagePolicy": "File",
                    }],
                    "dnsPolicy": "ClusterFirst",
                    "restartPolicy": "Always",
                    "schedulerName": "default-scheduler",
                    "securityContext": {},
                    "terminationGracePeriodSeconds": 30,
                },
            },
        },
        "status": {},
    })
}

/// The fields kubectl-client-side-apply owns after creating DEPLOYMENT: everything it sent and
/// everything defaulting added to it, with `.` on nodes the create added.
fn expected_create_fields() -> Value {
    json!({
        "f:metadata": {
            "f:annotations": {".": {}, "f:kubectl.kubernetes.io/last-applied-configuration": {}},
            "f:labels": {".": {}, "f:app": {}},
        },
        "f:spec": {
            "f:progressDeadlineSeconds": {},
            "f:replicas": {},
            "f:revisionHistoryLimit": {},
            "f:selector": {},
            "f:strategy": {
                "f:rollingUpdate": {".": {}, "f:maxSurge": {}, "f:maxUnavailable": {}},
                "f:type": {},
            },
            "f:template": {
                "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
                "f:spec": {
                    "f:containers": {
                        "k:{\"name\":\"nginx\"}": {
                            ".": {},
                            "f:image": {},
                            "f:imagePullPolicy": {},
                            "f:name": {},
                            "f:ports": {
                                ".": {},
                                "k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {
                                    ".": {}, "f:containerPort": {}, "f:protocol": {},
                                },
                            },
                            "f:resources": {".": {}, "f:limits": {".": {}, "f:cpu": {}, "f:memory": {}}},
                            "f:terminationMessagePath": {},
                            "f:terminationMessagePolicy": {},
                        },
                    },
                    "f:dnsPolicy": {},
                    "f:restartPolicy": {},
                    "f:schedulerName": {},
                    "f:securityContext": {},
                    "f:terminationGracePeriodSeconds": {},
                },
            },
        },
    })
}

fn with_deployment() -> Kubectl {
    let k = Kubectl::start();
    k.ok(&["create", "namespace", "demo"]);
    let out = k.stdin(&["apply", "-f", "-"], DEPLOYMENT);
    assert_eq!(out.trim(), "deployment.apps/web created");
    k
}

#[test]
fn create_namespace_has_documented_defaults() {
    let k = Kubectl::start();
    assert_eq!(k.ok(&["create", "namespace", "demo"]).trim(), "namespace/demo created");
    let ns: Value =
        serde_json::from_str(&k.ok(&["get", "namespace", "demo", "-o", "json", "--show-managed-fields"])).unwrap();
    assert_eq!(
        stable(&ns),
        json!({
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"labels": {"kubernetes.io/metadata.name": "demo"}, "name": "demo"},
            "spec": {"finalizers": ["kubernetes"]},
            "status": {"phase": "Active"},
        })
    );
    assert_eq!(managers(&ns), vec![m("kubectl-create", "Update", "")]);
    assert_eq!(
        fields_of(&ns, "kubectl-create", "Update"),
        json!({"f:metadata": {"f:labels": {".": {}, "f:kubernetes.io/metadata.name": {}}}})
    );
    let uid = ns["metadata"]["uid"].as_str().unwrap();
    assert_eq!(uid.len(), 36, "uid is a UUID: {uid}");
    assert!(ns["metadata"]["resourceVersion"].as_str().unwrap().parse::<u64>().is_ok());
    // Creating it again is AlreadyExists.
    let out = k.fails(&["create", "namespace", "demo"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("AlreadyExists"));
}

#[test]
fn apply_client_side_defaults_quantities_and_last_applied() {
    let k = with_deployment();
    let d = k.get("deployment/web", "demo");
    assert_eq!(stable(&d), expected_deployment("nginx:1.25", "IfNotPresent"));
    assert_eq!(managers(&d), vec![m("kubectl-client-side-apply", "Update", "")]);
    assert_eq!(fields_of(&d, "kubectl-client-side-apply", "Update"), expected_create_fields());
    let entry = &d["metadata"]["managedFields"][0];
    assert_eq!(entry["apiVersion"], "apps/v1");
    assert_eq!(entry["fieldsType"], "FieldsV1");
    assert!(entry["time"].as_str().unwrap().ends_with('Z'));

    // A second apply with a changed image is a three-way strategic merge patch.
    let changed = DEPLOYMENT.replace("nginx:1.25", "nginx");
    assert_eq!(k.stdin(&["apply", "-f", "-"], &changed).trim(), "deployment.apps/web configured");
    let d2 = k.get("deployment/web", "demo");
    let mut want = expected_deployment("nginx", "IfNotPresent");
    want["metadata"]["generation"] = json!(2);
    assert_eq!(stable(&d2), want, "the pull policy stays as defaulted at creation");
    assert!(
        d2["metadata"]["resourceVersion"].as_str().unwrap().parse::<u64>().unwrap()
            > d["metadata"]["resourceVersion"].as_str().unwrap().parse::<u64>().unwrap()
    );
    // Applying the same file again: kubectl still sends a patch (1000m differs from the stored
    // canonical 1, as against a real server, so it says "configured"), but the server finds
    // nothing to change and keeps the resourceVersion.
    assert_eq!(k.stdin(&["apply", "-f", "-"], &changed).trim(), "deployment.apps/web configured");
    let d3 = k.get("deployment/web", "demo");
    assert_eq!(d3["metadata"]["resourceVersion"], d2["metadata"]["resourceVersion"]);
}

#[test]
fn apply_server_side_conflicts_with_another_manager_until_forced() {
    let k = with_deployment();
    let ssa =
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: demo\nspec:\n  replicas: 4\n";
    let path = k.file("ssa.yaml", ssa);
    let p = path.to_str().unwrap();
    let out = k.fails(&["apply", "--server-side", "-f", p]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(r#"conflict with "kubectl-client-side-apply" using apps/v1: .spec.replicas"#), "{err}");
    assert_eq!(k.get("deployment/web", "demo")["spec"]["replicas"], 1);

    k.ok(&["apply", "--server-side", "--force-conflicts", "-f", p]);
    let d = k.get("deployment/web", "demo");
    assert_eq!(d["spec"]["replicas"], 4);
    assert_eq!(d["metadata"]["generation"], 2);
    assert!(managers(&d).contains(&m("kubectl", "Apply", "")));
    assert_eq!(fields_of(&d, "kubectl", "Apply"), json!({"f:spec": {"f:replicas": {}}}));
    let csa = fields_of(&d, "kubectl-client-side-apply", "Update");
    assert!(csa["f:spec"].get("f:replicas").is_none(), "forced apply took .spec.replicas");
    assert!(csa["f:spec"].get("f:revisionHistoryLimit").is_some());

    // Applying the same value as another owner is shared ownership, not a conflict.
    let same = ssa.replace("replicas: 4", "replicas: 4\n  revisionHistoryLimit: 10");
    k.stdin(&["apply", "--server-side", "--field-manager", "other", "-f", "-"], &same);
    let d = k.get("deployment/web", "demo");
    assert_eq!(fields_of(&d, "other", "Apply"), json!({"f:spec": {"f:replicas": {}, "f:revisionHistoryLimit": {}}}));
    assert_eq!(fields_of(&d, "kubectl", "Apply"), json!({"f:spec": {"f:replicas": {}}}));
}

#[test]
fn get_json_and_yaml_agree() {
    let k = with_deployment();
    let j: Value = serde_json::from_str(&k.ok(&["get", "deploy", "web", "-n", "demo", "-o", "json"])).unwrap();
    let y = k.ok(&["get", "deploy", "web", "-n", "demo", "-o", "yaml"]);
    let y: Value = serde_saphyr::from_str(&y).unwrap();
    assert_eq!(j, y);
    assert_eq!(stable(&j), expected_deployment("nginx:1.25", "IfNotPresent"));
    let names = k.ok(&["get", "deployments", "-A", "-o", "name"]);
    assert_eq!(names.trim(), "deployment.apps/web");
    let table = k.ok(&["get", "deploy", "-n", "demo"]);
    assert!(table.starts_with("NAME"), "{table}");
    assert!(table.contains("web"), "{table}");
}

#[test]
fn scale_goes_through_the_scale_subresource() {
    let k = with_deployment();
    assert_eq!(k.ok(&["scale", "-n", "demo", "deployment/web", "--replicas=3"]).trim(), "deployment.apps/web scaled");
    let d = k.get("deployment/web", "demo");
    assert_eq!(d["spec"]["replicas"], 3);
    assert_eq!(d["metadata"]["generation"], 2);
    // kubectl scale sends no fieldManager: the manager is the User-Agent's "kubectl".
    assert_eq!(managers(&d), vec![m("kubectl", "Update", "scale"), m("kubectl-client-side-apply", "Update", "")]);
    assert_eq!(fields_of(&d, "kubectl", "Update"), json!({"f:spec": {"f:replicas": {}}}));
    assert!(fields_of(&d, "kubectl-client-side-apply", "Update")["f:spec"].get("f:replicas").is_none());
}

#[test]
fn set_image_resources_and_env() {
    let k = with_deployment();
    k.ok(&["set", "image", "-n", "demo", "deployment/web", "nginx=nginx:1.26"]);
    k.ok(&["set", "resources", "-n", "demo", "deployment/web", "-c", "nginx", "--requests=cpu=0.25,memory=0.5Gi"]);
    k.ok(&["set", "env", "-n", "demo", "deployment/web", "MODE=prod"]);
    let d = k.get("deployment/web", "demo");
    let c = &d["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(c["image"], "nginx:1.26");
    assert_eq!(
        c["resources"],
        json!({"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "250m", "memory": "512Mi"}})
    );
    assert_eq!(c["env"], json!([{"name": "MODE", "value": "prod"}]));
    assert_eq!(d["metadata"]["generation"], 4);
    assert_eq!(managers(&d), vec![m("kubectl-client-side-apply", "Update", ""), m("kubectl-set", "Update", "")]);
    assert_eq!(
        fields_of(&d, "kubectl-set", "Update"),
        json!({"f:spec": {"f:template": {"f:spec": {"f:containers": {"k:{\"name\":\"nginx\"}": {
            "f:env": {".": {}, "k:{\"name\":\"MODE\"}": {".": {}, "f:name": {}, "f:value": {}}},
            "f:image": {},
            "f:resources": {"f:requests": {".": {}, "f:cpu": {}, "f:memory": {}}},
        }}}}}})
    );
}

#[test]
fn patch_json_merge_and_strategic() {
    let k = with_deployment();
    k.ok(&[
        "patch",
        "-n",
        "demo",
        "deployment/web",
        "--type=json",
        "-p",
        r#"[{"op":"replace","path":"/spec/revisionHistoryLimit","value":5}]"#,
    ]);
    k.ok(&["patch", "-n", "demo", "deployment/web", "--type=merge", "-p", r#"{"spec":{"minReadySeconds":3}}"#]);
    k.ok(&[
        "patch",
        "-n",
        "demo",
        "deployment/web",
        "--type=strategic",
        "-p",
        r#"{"spec":{"template":{"spec":{"containers":[{"name":"sidecar","image":"busybox"}]}}}}"#,
    ]);
    let d = k.get("deployment/web", "demo");
    assert_eq!(d["spec"]["revisionHistoryLimit"], 5);
    assert_eq!(d["spec"]["minReadySeconds"], 3);
    let containers = d["spec"]["template"]["spec"]["containers"].as_array().unwrap();
    assert_eq!(containers.len(), 2, "strategic merge keeps nginx and adds sidecar by name");
    assert_eq!(containers[0]["name"], "nginx");
    // The new container is defaulted: untagged image pulls Always.
    assert_eq!(
        containers[1],
        json!({"image": "busybox", "imagePullPolicy": "Always", "name": "sidecar", "resources": {},
            "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"})
    );
    assert_eq!(d["metadata"]["generation"], 4);
    assert_eq!(managers(&d), vec![m("kubectl-client-side-apply", "Update", ""), m("kubectl-patch", "Update", "")]);
    // A failing JSON patch test is rejected and changes nothing.
    let out = k.fails(&[
        "patch",
        "-n",
        "demo",
        "deployment/web",
        "--type=json",
        "-p",
        r#"[{"op":"test","path":"/spec/replicas","value":9}]"#,
    ]);
    assert!(!out.stderr.is_empty());
    assert_eq!(k.get("deployment/web", "demo")["metadata"]["resourceVersion"], d["metadata"]["resourceVersion"]);
}

#[test]
fn label_and_annotate_leave_generation_alone() {
    let k = with_deployment();
    k.ok(&["label", "-n", "demo", "deployment/web", "tier=front"]);
    k.ok(&["annotate", "-n", "demo", "deployment/web", "note=hello"]);
    let d = k.get("deployment/web", "demo");
    assert_eq!(d["metadata"]["labels"], json!({"app": "web", "tier": "front"}));
    assert_eq!(d["metadata"]["annotations"]["note"], "hello");
    assert_eq!(d["metadata"]["generation"], 1, "metadata changes do not bump generation");
    assert_eq!(fields_of(&d, "kubectl-label", "Update"), json!({"f:metadata": {"f:labels": {"f:tier": {}}}}));
    assert_eq!(fields_of(&d, "kubectl-annotate", "Update"), json!({"f:metadata": {"f:annotations": {"f:note": {}}}}));
    k.ok(&["label", "-n", "demo", "deployment/web", "tier-"]);
    let d = k.get("deployment/web", "demo");
    assert_eq!(d["metadata"]["labels"], json!({"app": "web"}));
    assert!(!managers(&d).contains(&m("kubectl-label", "Update", "")), "a manager with no fields left is dropped");
}

#[test]
fn edit_through_kube_editor() {
    let k = with_deployment();
    let script = k.file("editor.sh", "#!/bin/sh\nsed -i 's/replicas: 1/replicas: 2/' \"$1\"\n");
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let out = k.command(&["edit", "-n", "demo", "deployment/web"]).env("KUBE_EDITOR", &script).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let d = k.get("deployment/web", "demo");
    assert_eq!(d["spec"]["replicas"], 2);
    assert_eq!(fields_of(&d, "kubectl-edit", "Update"), json!({"f:spec": {"f:replicas": {}}}));
}

#[test]
fn delete_then_not_found() {
    let k = with_deployment();
    assert_eq!(k.ok(&["delete", "-n", "demo", "deployment/web"]).trim(), "deployment.apps \"web\" deleted");
    let out = k.fails(&["get", "-n", "demo", "deployment/web"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("NotFound"));
    // Deleting the namespace deletes what is in it.
    k.ok(&["create", "configmap", "-n", "demo", "c", "--from-literal=a=b"]);
    k.ok(&["delete", "namespace", "demo"]);
    assert!(k.server.object("", "configmaps", "demo", "c").is_none());
}

#[test]
fn get_watch_sees_changes() {
    let k = Kubectl::start();
    let mut child = k
        .command(&["get", "configmaps", "-n", "default", "-w", "-o", "name"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    // The change must come after the watch is open.
    poll(3000, || {
        k.server
            .requests()
            .iter()
            .any(|r| r.path.ends_with("/configmaps") && r.query.get("watch").is_some_and(|w| w == "true"))
            .then_some(())
    });
    k.ok(&["create", "configmap", "-n", "default", "seen", "--from-literal=a=b"]);
    k.ok(&["delete", "configmap", "-n", "default", "seen"]);
    let mut lines = BufReader::new(stdout).lines();
    let first = lines.next().unwrap().unwrap();
    let second = lines.next().unwrap().unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(first, "configmap/seen");
    assert_eq!(second, "configmap/seen");
}

#[test]
fn service_gets_a_cluster_ip_and_defaults() {
    let k = Kubectl::start();
    let svc = "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\nspec:\n  selector: {app: web}\n  ports:\n  - port: 80\n";
    k.stdin(&["apply", "-f", "-"], svc);
    let s = k.get("service/web", "default");
    let ip = s["spec"]["clusterIP"].as_str().unwrap().to_owned();
    assert!(ip.starts_with("10.96."), "{ip}");
    assert_eq!(
        stable(&s)["spec"],
        json!({
            "clusterIP": ip,
            "clusterIPs": [ip],
            "internalTrafficPolicy": "Cluster",
            "ipFamilies": ["IPv4"],
            "ipFamilyPolicy": "SingleStack",
            "ports": [{"port": 80, "protocol": "TCP", "targetPort": 80}],
            "selector": {"app": "web"},
            "sessionAffinity": "None",
            "type": "ClusterIP",
        })
    );
    assert_eq!(s["status"], json!({"loadBalancer": {}}));
    assert!(s["metadata"].get("generation").is_none(), "Services have no generation");
    // Allocated fields are set by the storage, after managedFields are recorded.
    let f = fields_of(&s, "kubectl-client-side-apply", "Update");
    assert!(f["f:spec"].get("f:clusterIP").is_none());
    assert!(f["f:spec"].get("f:sessionAffinity").is_some());
    // Another Service gets another IP.
    k.stdin(&["apply", "-f", "-"], &svc.replace("name: web", "name: api"));
    assert_ne!(k.get("service/api", "default")["spec"]["clusterIP"], json!(ip));
}

#[test]
fn custom_resources_after_their_crd() {
    let k = Kubectl::start();
    let crd = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wd]}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
"#;
    k.stdin(&["apply", "-f", "-"], crd);
    k.stdin(
        &["apply", "-f", "-"],
        "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w1\nspec:\n  size: 3\n",
    );
    let w = k.get("wd/w1", "default");
    assert_eq!(w["spec"], json!({"size": 3}));
    assert_eq!(w["metadata"]["generation"], 1);
    k.ok(&["patch", "widget", "w1", "--type=merge", "-p", r#"{"spec":{"size":4}}"#]);
    assert_eq!(k.get("widgets.example.com/w1", "default")["spec"]["size"], 4);
    k.ok(&["delete", "crd", "widgets.example.com"]);
    assert!(k.server.object("example.com", "widgets", "default", "w1").is_none());
}

#[test]
fn dry_run_server_stores_nothing() {
    let k = Kubectl::start();
    k.ok(&["create", "namespace", "demo"]);
    let out = k.stdin(&["apply", "--dry-run=server", "-o", "json", "-f", "-"], DEPLOYMENT);
    let d: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(d["spec"]["strategy"]["type"], "RollingUpdate", "the dry run is defaulted");
    assert!(k.server.object("apps", "deployments", "demo", "web").is_none());
}

/// The pod template every workload below reads back: the documented pod spec and container
/// defaults around `image`.
fn template(image: &str, pull: &str, restart: &str, labels: Value) -> Value {
    json!({
        "metadata": {"creationTimestamp": null, "labels": labels},
        "spec": {
            "containers": [{"image": image, "imagePullPolicy": pull, "name": "main", "resources": {},
                "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"}],
            "dnsPolicy": "ClusterFirst",
            "restartPolicy": restart,
            "schedulerName": "default-scheduler",
            "securityContext": {},
            "terminationGracePeriodSeconds": 30,
        },
    })
}

#[test]
fn workload_kinds_get_their_documented_defaults() {
    let k = Kubectl::start();
    let docs = r#"
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  serviceName: db
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      containers: [{name: main, image: "redis:7"}]
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      containers: [{name: main, image: agent}]
---
apiVersion: batch/v1
kind: CronJob
metadata: {name: nightly}
spec:
  schedule: "0 3 * * *"
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: OnFailure
          containers: [{name: main, image: "tool:2"}]
---
apiVersion: v1
kind: Secret
metadata: {name: creds}
stringData: {password: hunter2}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data}
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1024Mi}}
"#;
    k.stdin(&["apply", "-f", "-"], docs);

    let sts = k.get("statefulset/db", "default");
    assert_eq!(
        sts["spec"],
        json!({
            "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Retain", "whenScaled": "Retain"},
            "podManagementPolicy": "OrderedReady",
            "replicas": 1,
            "revisionHistoryLimit": 10,
            "selector": {"matchLabels": {"app": "db"}},
            "serviceName": "db",
            "template": template("redis:7", "IfNotPresent", "Always", json!({"app": "db"})),
            "updateStrategy": {"rollingUpdate": {"partition": 0}, "type": "RollingUpdate"},
        })
    );
    assert_eq!(sts["status"], json!({"availableReplicas": 0, "replicas": 0}));

    let ds = k.get("daemonset/agent", "default");
    assert_eq!(
        ds["spec"],
        json!({
            "revisionHistoryLimit": 10,
            "selector": {"matchLabels": {"app": "agent"}},
            "template": template("agent", "Always", "Always", json!({"app": "agent"})),
            "updateStrategy": {"rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}, "type": "RollingUpdate"},
        })
    );

    let cj = k.get("cronjob/nightly", "default");
    let mut job_template = template("tool:2", "IfNotPresent", "OnFailure", Value::Null);
    job_template["metadata"].as_object_mut().unwrap().remove("labels");
    assert_eq!(
        cj["spec"],
        json!({
            "concurrencyPolicy": "Allow",
            "failedJobsHistoryLimit": 1,
            "jobTemplate": {"metadata": {"creationTimestamp": null}, "spec": {"template": job_template}},
            "schedule": "0 3 * * *",
            "successfulJobsHistoryLimit": 3,
            "suspend": false,
        })
    );

    let secret = k.get("secret/creds", "default");
    assert_eq!(secret["data"], json!({"password": "aHVudGVyMg=="}));
    assert_eq!(secret["type"], "Opaque");
    assert!(secret.get("stringData").is_none());

    let pvc = k.get("pvc/data", "default");
    assert_eq!(
        pvc["spec"],
        json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}, "volumeMode": "Filesystem"})
    );
    assert_eq!(pvc["status"], json!({"phase": "Pending"}));
}

#[test]
fn job_selector_is_generated_from_its_uid() {
    let k = Kubectl::start();
    k.stdin(
        &["apply", "-f", "-"],
        "apiVersion: batch/v1\nkind: Job\nmetadata: {name: once}\nspec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers: [{name: main, image: \"busybox:1.36\", command: [\"true\"]}]\n",
    );
    let job = k.get("job/once", "default");
    let uid = job["metadata"]["uid"].as_str().unwrap();
    assert_eq!(job["spec"]["selector"], json!({"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}));
    assert_eq!(
        job["spec"]["template"]["metadata"]["labels"],
        json!({"batch.kubernetes.io/controller-uid": uid, "batch.kubernetes.io/job-name": "once",
            "controller-uid": uid, "job-name": "once"})
    );
    for (field, want) in [
        ("backoffLimit", json!(6)),
        ("completionMode", json!("NonIndexed")),
        ("completions", json!(1)),
        ("parallelism", json!(1)),
        ("podReplacementPolicy", json!("TerminatingOrFailed")),
        ("suspend", json!(false)),
    ] {
        assert_eq!(job["spec"][field], want, "{field}");
    }
    assert_eq!(managers(&job), vec![m("kubectl-client-side-apply", "Update", "")]);
    // The generated selector and labels are set by the storage, after managedFields.
    let f = fields_of(&job, "kubectl-client-side-apply", "Update");
    assert!(f["f:spec"].get("f:selector").is_none());
    assert!(f["f:spec"].get("f:backoffLimit").is_some());
}

#[test]
fn diff_client_side_and_server_side() {
    let k = with_deployment();
    let same = k.file("same.yaml", DEPLOYMENT);
    let out = k.command(&["diff", "-f", same.to_str().unwrap()]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "no drift: {}", String::from_utf8_lossy(&out.stdout));

    let changed = k.file("changed.yaml", &DEPLOYMENT.replace("nginx:1.25", "nginx:1.26"));
    for extra in [&[][..], &["--server-side", "--force-conflicts"][..]] {
        let mut args = vec!["diff", "-f", changed.to_str().unwrap()];
        args.extend_from_slice(extra);
        let out = k.command(&args).output().unwrap();
        let diff = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {diff}{}", String::from_utf8_lossy(&out.stderr));
        assert!(diff.contains("-      - image: nginx:1.25\n"), "{diff}");
        assert!(diff.contains("+      - image: nginx:1.26\n"), "{diff}");
        // Quantities are compared in canonical form: 1000m in the file is the stored 1.
        assert!(!diff.contains("cpu:"), "{diff}");
    }
    // A diff is a dry run: nothing changed.
    assert_eq!(k.get("deployment/web", "demo")["metadata"]["generation"], 1);
}

#[test]
fn custom_resources_are_pruned_and_defaulted_by_their_schema() {
    let k = Kubectl::start();
    let crd = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: gadgets, singular: gadget, kind: Gadget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer, default: 1}
              mode: {type: string}
"#;
    k.stdin(&["apply", "-f", "-"], crd);
    let gadget = k.file(
        "gadget.yaml",
        "apiVersion: example.com/v1\nkind: Gadget\nmetadata:\n  name: g\nspec:\n  mode: slow\n  colour: red\n",
    );
    // kubectl's default validation (Strict): a field the schema would prune is refused.
    let err = k.fails(&["apply", "-f", gadget.to_str().unwrap()]);
    assert!(
        String::from_utf8_lossy(&err.stderr).contains(
            "Gadget in version \"v1\" cannot be handled as a Gadget: strict decoding error: unknown field \"spec.colour\""
        ),
        "{}",
        String::from_utf8_lossy(&err.stderr)
    );
    let out = k
        .command(&["apply", "--validate=false", "-f", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write as _;
            c.stdin.take().unwrap().write_all(
                b"apiVersion: example.com/v1\nkind: Gadget\nmetadata:\n  name: g\nspec:\n  mode: slow\n  colour: red\n",
            )?;
            c.wait_with_output()
        })
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let g = k.get("gadget/g", "default");
    // --validate=false sends fieldValidation=Ignore: the unknown field is pruned silently.
    assert_eq!(g["spec"], json!({"mode": "slow", "size": 1}), "colour is pruned, size defaulted");
}
