//! `drift diff --cluster` as an operator runs it, against the test API server, with changes
//! made by the real kubectl: nothing after `kubectl apply`; each hand change afterwards with
//! its drift type and the kubectl manager that made it; unreadable parts as warnings, never as
//! missing objects; the server-side mode, its fallback, and what it leaves out: a field a
//! mutating webhook sets on admission.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::{ClusterHome, SHOP};

use drift_test_apiserver::{Admission, FaultAction, FaultMatch, FaultRule, Faults, Options};
use serde_json::Value;

struct Env(ClusterHome);

impl std::ops::Deref for Env {
    type Target = ClusterHome;
    fn deref(&self) -> &ClusterHome {
        &self.0
    }
}

impl Env {
    fn start() -> Env {
        Env::with(Options::default())
    }

    fn with(options: Options) -> Env {
        let env = Env(ClusterHome::start(options));
        for (name, text) in SHOP {
            env.write(&format!("desired/{name}"), text);
        }
        env
    }

    fn desired(&self) -> PathBuf {
        self.path("desired")
    }

    /// `drift diff --cluster -o json`: exit code and the document.
    fn diff(&self, extra: &[&str]) -> (i32, Value, String) {
        let desired = self.desired();
        let mut args = vec!["diff", "--desired", desired.to_str().unwrap(), "--cluster", "--kubeconfig"];
        args.push(self.server.kubeconfig_path().to_str().unwrap());
        args.extend(["--output", "json"]);
        args.extend(extra);
        let out = Command::new(env!("CARGO_BIN_EXE_drift"))
            .args(&args)
            .env("HOME", self.home.path())
            .env_remove("KUBECONFIG")
            .env("NO_COLOR", "1")
            .output()
            .unwrap();
        let stdout = String::from_utf8(out.stdout).unwrap();
        let stderr = String::from_utf8(out.stderr).unwrap();
        let doc = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}\n{stderr}"));
        (out.status.code().unwrap(), doc, stderr)
    }
}

fn drifts(doc: &Value) -> Vec<(String, String, String, String)> {
    let mut out: Vec<_> = doc["drifts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["resource"]["kind"].as_str().unwrap().to_owned(),
                d["drift_type"].as_str().unwrap().to_owned(),
                d["path"].as_str().unwrap().to_owned(),
                d["changed_by"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    out.sort();
    out
}

fn d(kind: &str, t: &str, path: &str, by: &str) -> (String, String, String, String) {
    (kind.to_owned(), t.to_owned(), path.to_owned(), by.to_owned())
}

#[test]
fn kubectl_changes_after_apply_each_appear_with_type_and_manager() {
    let env = Env::start();
    env.kubectl(&["apply", "-R", "-f", env.desired().to_str().unwrap()]);
    let (code, doc, err) = env.diff(&[]);
    assert_eq!(code, 0, "nothing after kubectl apply: {doc} {err}");
    assert_eq!(doc["summary"]["resources_compared"], 4);
    assert!(drifts(&doc).is_empty());

    env.kubectl(&["scale", "deployment/web", "-n", "shop", "--replicas=5"]);
    env.kubectl(&["set", "image", "deployment/web", "-n", "shop", "web=nginx:1.28"]);
    env.kubectl(&["set", "resources", "deployment/web", "-n", "shop", "--limits=memory=512Mi"]);
    env.kubectl(&[
        "patch",
        "service",
        "web",
        "-n",
        "shop",
        "--type=json",
        "-p",
        r#"[{"op":"replace","path":"/spec/ports/0/targetPort","value":9090}]"#,
    ]);
    let editor = env.write("editor.sh", "#!/bin/sh\nsed -i 's/mode: fast/mode: slow/' \"$1\"\n");
    std::fs::set_permissions(&editor, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    env.kubectl_env(&["edit", "configmap", "settings", "-n", "shop"], &[("KUBE_EDITOR", &editor)]);
    env.kubectl(&["label", "deployment", "web", "-n", "shop", "owner=oncall"]);

    let (code, doc, err) = env.diff(&[]);
    assert_eq!(code, 1, "drift found: {err}");
    assert_eq!(
        drifts(&doc),
        vec![
            d("ConfigMap", "configmap_drift", "data.mode", "kubectl-edit"),
            d("Deployment", "image_tag_drift", "spec.template.spec.containers[name=web].image", "kubectl-set"),
            d("Deployment", "metadata_drift", "metadata.labels.owner", "kubectl-label"),
            d("Deployment", "replicas_drift", "spec.replicas", "kubectl"),
            d(
                "Deployment",
                "resource_limit_drift",
                "spec.template.spec.containers[name=web].resources.limits.memory",
                "kubectl-set"
            ),
            d("Service", "service_port_drift", "spec.ports[port=80].targetPort", "kubectl-patch"),
        ]
    );

    // Server-side mode keeps every one of them (none is a default or a webhook's doing), and
    // writes nothing.
    let rv = env.server.resource_version();
    let (code, doc2, err) = env.diff(&["--server-side"]);
    assert_eq!(code, 1, "{err}");
    assert_eq!(drifts(&doc2), drifts(&doc));
    assert_eq!(env.server.resource_version(), rv, "dry runs write nothing");
    let dry_runs: Vec<_> = env
        .server
        .requests()
        .into_iter()
        .filter(|r| r.method == "PATCH" && r.query.get("dryRun").map(String::as_str) == Some("All"))
        .collect();
    assert_eq!(dry_runs.len(), 3, "one dry run per drifted object: {dry_runs:?}");
    assert!(dry_runs.iter().all(|r| r.content_type.starts_with("application/apply-patch+yaml")
        && r.query.get("fieldManager").map(String::as_str) == Some("drift-detector")
        && r.query.get("force").map(String::as_str) == Some("true")));
}

/// A manifest in the forms of YAML 1.1 that charts and repositories write (`defaultMode: 0644`,
/// `readOnly: yes`, a hexadecimal and an exponent): kubectl applies what Kubernetes reads, and
/// drift reads the same (docs/sources.md, "How YAML is read"), so nothing differs until a hand
/// change.
#[test]
fn yaml_1_1_forms_give_no_drift_after_kubectl_apply_and_a_hand_change_gives_one() {
    let env = Env::start();
    env.write(
        "desired/z-files.yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: files, namespace: shop}\nspec:\n  replicas: 0x2\n  selector: {matchLabels: {app: files}}\n  template:\n    metadata: {labels: {app: files}}\n    spec:\n      automountServiceAccountToken: off\n      terminationGracePeriodSeconds: 3e1\n      containers:\n      - name: web\n        image: nginx:1.25\n        volumeMounts: [{name: conf, mountPath: /etc/conf, readOnly: yes}]\n      volumes:\n      - name: conf\n        configMap: {name: settings, defaultMode: 0644}\n",
    );
    env.kubectl(&["apply", "-R", "-f", env.desired().to_str().unwrap()]);
    let (code, doc, err) = env.diff(&[]);
    assert_eq!(code, 0, "nothing after kubectl apply: {doc} {err}");
    assert_eq!(doc["summary"]["resources_compared"], 5);

    env.kubectl(&[
        "patch",
        "deployment",
        "files",
        "-n",
        "shop",
        "--type=json",
        "-p",
        r#"[{"op":"replace","path":"/spec/template/spec/volumes/0/configMap/defaultMode","value":384}]"#,
    ]);
    let (code, doc, err) = env.diff(&[]);
    assert_eq!(code, 1, "{err}");
    let found = doc["drifts"].as_array().unwrap();
    assert_eq!(found.len(), 1, "{doc}");
    assert_eq!(found[0]["path"], "spec.template.spec.volumes[name=conf].configMap.defaultMode");
    assert_eq!(
        (&found[0]["git_value"], &found[0]["cluster_value"]),
        (&serde_json::json!(420), &serde_json::json!(384)),
        "{doc}"
    );
}

#[test]
fn server_side_failure_falls_back_to_the_client_side_result_with_a_warning() {
    let env = Env::start();
    env.kubectl(&["apply", "-R", "-f", env.desired().to_str().unwrap()]);
    env.kubectl(&["scale", "deployment/web", "-n", "shop", "--replicas=5"]);
    env.server.set_faults(Faults {
        faults: vec![FaultRule {
            matcher: FaultMatch { verb: Some("patch".into()), ..Default::default() },
            action: FaultAction::Error { code: 403, retry_after_seconds: None, message: None },
            times: None,
        }],
    });
    let (code, doc, err) = env.diff(&["--server-side"]);
    assert_eq!(code, 1, "drift, and the warning is not fatal: {err}");
    assert_eq!(drifts(&doc), vec![d("Deployment", "replicas_drift", "spec.replicas", "kubectl")]);
    let warnings = doc["warnings"].as_array().unwrap();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0]["message"].as_str().unwrap().contains("server-side dry run"), "{warnings:?}");
    assert_eq!(warnings[0]["fatal"], false);
}

#[test]
fn server_side_mode_leaves_out_what_a_mutating_webhook_sets_but_not_a_kubectl_change() {
    // A policy webhook that caps the CPU limit of Deployments in shop, which Git sets to 500m.
    let cap = "mutations:\n- name: cpu-cap\n  match: {resource: Deployment, namespace: shop}\n  set:\n  - {path: 'spec.template.spec.containers[*].resources.limits.cpu', value: 250m}\n";
    let env = Env::with(Options { admission: Admission::from_yaml(cap).unwrap(), ..Options::default() });
    env.kubectl(&["apply", "-R", "-f", env.desired().to_str().unwrap()]);
    let cpu = "spec.template.spec.containers[name=web].resources.limits.cpu";

    let (code, doc, err) = env.diff(&[]);
    assert_eq!(code, 1, "the client-side engine sees the webhook's value: {err}");
    assert_eq!(drifts(&doc), vec![d("Deployment", "resource_limit_drift", cpu, "kubectl-client-side-apply")]);
    let (code, doc, err) = env.diff(&["--server-side"]);
    assert_eq!(code, 0, "the API server would cap it again: no drift: {doc} {err}");
    assert!(drifts(&doc).is_empty());
    assert_eq!(doc["warnings"].as_array().map(Vec::len), Some(0));

    env.kubectl(&["set", "image", "deployment/web", "-n", "shop", "web=nginx:1.28"]);
    let image = "spec.template.spec.containers[name=web].image";
    let (code, doc, _) = env.diff(&[]);
    assert_eq!(code, 1);
    assert_eq!(
        drifts(&doc),
        vec![
            d("Deployment", "image_tag_drift", image, "kubectl-set"),
            d("Deployment", "resource_limit_drift", cpu, "kubectl-client-side-apply"),
        ]
    );
    let (code, doc, err) = env.diff(&["--server-side"]);
    assert_eq!(code, 1, "{err}");
    assert_eq!(drifts(&doc), vec![d("Deployment", "image_tag_drift", image, "kubectl-set")]);
}

#[test]
fn a_forbidden_namespace_and_an_unserved_kind_are_warnings_not_missing_objects() {
    let env = Env::start();
    env.kubectl(&["apply", "-R", "-f", env.desired().to_str().unwrap()]);
    env.write(
        "desired/team-a/configmap.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: team-a\ndata:\n  mode: x\n",
    );
    env.write(
        "desired/widgets/widget.yaml",
        "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\n  namespace: shop\nspec: {size: 1}\n",
    );
    env.server.set_faults(Faults {
        faults: vec![FaultRule {
            matcher: FaultMatch { verb: Some("list".into()), namespace: Some("team-a".into()), ..Default::default() },
            action: FaultAction::Error { code: 403, retry_after_seconds: None, message: None },
            times: None,
        }],
    });
    let (code, doc, err) = env.diff(&[]);
    assert_eq!(code, 2, "an incomplete read is an error exit: {err}");
    assert!(drifts(&doc).is_empty(), "nothing unreadable is reported missing: {doc}");
    let messages: Vec<&str> =
        doc["warnings"].as_array().unwrap().iter().map(|w| w["message"].as_str().unwrap()).collect();
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert!(messages.iter().any(|m| m.contains("ConfigMap in team-a") && m.contains("forbidden")), "{messages:?}");
    assert!(messages.iter().any(|m| m.contains("example.com/Widget") && m.contains("not_served")), "{messages:?}");
    assert_eq!(doc["summary"]["resources_compared"], 4, "the readable objects are still compared");
}

#[test]
fn an_unreachable_cluster_is_an_error_exit() {
    let env = Env::start();
    let kubeconfig =
        env.write("broken-kubeconfig", "apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n");
    let out = Command::new(env!("CARGO_BIN_EXE_drift"))
        .args(["diff", "--desired", env.desired().to_str().unwrap(), "--cluster", "--kubeconfig"])
        .arg(&kubeconfig)
        .env("HOME", env.home.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("kubernetes configuration"));
}

/// (side, kind, rule, path) of every policy finding of a document.
fn findings(doc: &Value) -> Vec<(String, String, String, String)> {
    doc["findings"]
        .as_array()
        .unwrap_or_else(|| panic!("no findings in {doc}"))
        .iter()
        .map(|f| {
            (
                f["side"].as_str().unwrap().to_owned(),
                f["resource"]["kind"].as_str().unwrap().to_owned(),
                f["rule"].as_str().unwrap().to_owned(),
                f["path"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// `drift diff --cluster --policies` (docs/policies.md): Git's objects and what the cluster runs
/// are both checked; a container made privileged by hand is a live finding only, next to its
/// drift; findings alone leave the exit code at 0.
#[test]
fn policies_check_git_and_the_cluster_and_leave_the_exit_code_to_drift() {
    let env = Env::start();
    env.kubectl(&["apply", "-R", "-f", env.desired().to_str().unwrap()]);
    let (code, doc, err) = env.diff(&["--policies"]);
    assert_eq!(code, 0, "findings alone do not change the exit code: {doc} {err}");
    assert!(drifts(&doc).is_empty());
    let c = "/spec/template/spec/containers/0";
    let f = |side: &str, rule: &str, path: String| (side.to_owned(), "Deployment".to_owned(), rule.to_owned(), path);
    let found = findings(&doc);
    for side in ["desired", "live"] {
        let root = f(side, "run-as-root", format!("{c}/securityContext/runAsNonRoot"));
        assert!(found.contains(&root), "{root:?} in {found:?}");
    }
    // Git sets limits and no requests.
    for resource in ["cpu", "memory"] {
        let request = f("desired", "resource-requests", format!("{c}/resources/requests/{resource}"));
        assert!(found.contains(&request), "{request:?} in {found:?}");
    }
    assert!(!found.iter().any(|x| x.2 == "privileged" || x.2 == "image-tag"), "{found:?}");
    assert_eq!(doc["summary"]["drifts"], 0, "findings are not drifts");

    env.kubectl(&[
        "patch",
        "deployment",
        "web",
        "-n",
        "shop",
        "--type=json",
        "-p",
        r#"[{"op":"add","path":"/spec/template/spec/containers/0/securityContext","value":{"privileged":true}}]"#,
    ]);
    let (code, doc, err) = env.diff(&["--policies"]);
    assert_eq!(code, 1, "the hand change is a drift: {err}");
    let privileged: Vec<_> = findings(&doc).into_iter().filter(|x| x.2 == "privileged").collect();
    assert_eq!(privileged, [f("live", "privileged", format!("{c}/securityContext/privileged"))], "only the cluster's");
    let (_, doc, _) = env.diff(&[]);
    assert!(doc.get("findings").is_none(), "no policies unless asked for: {doc}");
}
