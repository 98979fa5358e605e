//! deploy/kubernetes as an operator installs it: the kustomization builds, its embedded
//! configuration is valid, kubectl applies it to an API server, and the detector then finds its
//! own installation in sync with the manifests (and finds a hand change to it).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::process::Command;

use common::kubectl;
use drift_test_apiserver::{Options, TestApiServer};
use serde_json::Value;

fn drift(args: &[&str], home: &Path) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_drift"))
        .args(args)
        .env("HOME", home)
        .env_remove("KUBECONFIG")
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    (out.status.code().unwrap(), String::from_utf8(out.stdout).unwrap(), String::from_utf8(out.stderr).unwrap())
}

#[test]
fn the_kubernetes_manifests_apply_and_the_detector_finds_them_in_sync() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/kubernetes");
    let server = TestApiServer::start(Options::default()).unwrap();
    let home = tempfile::tempdir().unwrap();
    let kc = server.kubeconfig_path();

    // What `kubectl apply -k` will send, rendered once, is also the detector's desired state.
    let rendered = kubectl(kc, home.path(), &["kustomize", root.to_str().unwrap()], &[]);
    let desired = home.path().join("desired.yaml");
    std::fs::write(&desired, &rendered).unwrap();

    // The configuration inside the ConfigMap is valid.
    let objects: Vec<Value> =
        rendered.split("\n---\n").map(|doc| serde_saphyr::from_str::<Value>(doc).unwrap()).collect();
    let kinds: Vec<&str> = objects.iter().map(|o| o["kind"].as_str().unwrap()).collect();
    for kind in
        ["Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ConfigMap", "Deployment", "Service"]
    {
        assert!(kinds.contains(&kind), "{kind} in {kinds:?}");
    }
    let cm = objects.iter().find(|o| o["kind"] == "ConfigMap").unwrap();
    let config = home.path().join("drift.yaml");
    std::fs::write(&config, cm["data"]["drift.yaml"].as_str().unwrap()).unwrap();
    let (code, out, err) = drift(&["config", "check", config.to_str().unwrap()], home.path());
    assert_eq!(code, 0, "{out}{err}");

    // The role is read-only.
    let role = objects.iter().find(|o| o["kind"] == "ClusterRole").unwrap();
    for rule in role["rules"].as_array().unwrap() {
        let verbs: Vec<&str> = rule["verbs"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
        assert_eq!(verbs, ["get", "list", "watch"], "{rule}");
    }

    kubectl(kc, home.path(), &["apply", "-k", root.to_str().unwrap()], &[]);
    let diff = |home: &Path| {
        drift(
            &[
                "diff",
                "--desired",
                desired.to_str().unwrap(),
                "--cluster",
                "--kubeconfig",
                kc.to_str().unwrap(),
                "-o",
                "json",
            ],
            home,
        )
    };
    let (code, out, err) = diff(home.path());
    assert_eq!(code, 0, "the installation is in sync with its manifests: {out}{err}");
    let doc: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["summary"]["resources_compared"], objects.len());

    kubectl(
        kc,
        home.path(),
        &["set", "image", "deployment/drift-detector", "-n", "drift", "drift=drift-detector:dev"],
        &[],
    );
    let (code, out, _) = diff(home.path());
    assert_eq!(code, 1);
    let doc: Value = serde_json::from_str(&out).unwrap();
    let types: Vec<&str> =
        doc["drifts"].as_array().unwrap().iter().map(|d| d["drift_type"].as_str().unwrap()).collect();
    assert_eq!(types, ["image_tag_drift"]);
}
