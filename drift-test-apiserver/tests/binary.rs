//! The `drift-test-apiserver` binary: flags, the `listening on ADDR` line, the kubeconfig it
//! writes, token authentication and a faults file, driven by the real kubectl.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead as _, BufReader};
use std::process::{Child, Command, Stdio};

struct Running {
    child: Child,
    addr: String,
    dir: tempfile::TempDir,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(extra: &[&str]) -> Running {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let mut child = Command::new(env!("CARGO_BIN_EXE_drift-test-apiserver"))
        .args(["--listen", "127.0.0.1:0", "--kubeconfig"])
        .arg(&kubeconfig)
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let addr = line.trim().strip_prefix("listening on ").unwrap_or_else(|| panic!("first line: {line:?}")).to_owned();
    assert!(addr.starts_with("127.0.0.1:") && !addr.ends_with(":0"), "{addr}");
    Running { child, addr, dir }
}

fn kubectl(r: &Running, args: &[&str]) -> std::process::Output {
    Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(r.dir.path().join("kubeconfig"))
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", r.dir.path())
        .output()
        .unwrap()
}

#[test]
fn prints_its_address_and_writes_a_kubeconfig() {
    let r = start(&[]);
    let kc = std::fs::read_to_string(r.dir.path().join("kubeconfig")).unwrap();
    assert!(kc.contains(&format!("server: http://{}", r.addr)), "{kc}");
    let out = kubectl(&r, &["get", "namespaces", "-o", "name"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "namespace/default\nnamespace/kube-node-lease\nnamespace/kube-public\nnamespace/kube-system\n"
    );
}

#[tokio::test]
async fn token_auth_with_kube_rs_and_kubectl() {
    let r = start(&["--token", "t0ken"]);
    let kc = kube::config::Kubeconfig::read_from(r.dir.path().join("kubeconfig")).unwrap();
    let cfg = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default()).await.unwrap();
    let api: kube::Api<k8s_openapi::api::core::v1::Namespace> = kube::Api::all(kube::Client::try_from(cfg).unwrap());
    let names: Vec<String> =
        api.list(&Default::default()).await.unwrap().items.into_iter().filter_map(|n| n.metadata.name).collect();
    assert_eq!(names, ["default", "kube-node-lease", "kube-public", "kube-system"]);
    // kubectl (client-go's clientcmd) reads user credentials only for TLS transports, so over
    // plain http it sends no token and gets the 401 a real server would give it.
    let out = kubectl(&r, &["get", "namespaces"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("the server has asked for the client to provide credentials"), "{err}");
}

#[tokio::test]
async fn token_auth_over_tls_with_kubectl_and_kube_rs() {
    let r = start(&["--token", "t0ken", "--tls"]);
    let kc = std::fs::read_to_string(r.dir.path().join("kubeconfig")).unwrap();
    assert!(kc.contains(&format!("server: https://{}", r.addr)), "{kc}");
    assert!(kc.contains("certificate-authority-data: "), "{kc}");
    let out = kubectl(&r, &["get", "namespaces", "-o", "name"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "namespace/default\nnamespace/kube-node-lease\nnamespace/kube-public\nnamespace/kube-system\n"
    );
    let kc = kube::config::Kubeconfig::read_from(r.dir.path().join("kubeconfig")).unwrap();
    let cfg = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default()).await.unwrap();
    let api: kube::Api<k8s_openapi::api::core::v1::Namespace> = kube::Api::all(kube::Client::try_from(cfg).unwrap());
    assert_eq!(api.list(&Default::default()).await.unwrap().items.len(), 4);
    // A wrong token over TLS is still 401.
    let out = kubectl(&r, &["--token", "wrong", "get", "namespaces"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("Unauthorized") || err.contains("provide credentials"), "{err}");
}

#[test]
fn applies_a_faults_file() {
    let dir = tempfile::tempdir().unwrap();
    let faults = dir.path().join("faults.yaml");
    std::fs::write(
        &faults,
        "faults:\n- match: {resource: secrets, namespace: default}\n  action: {type: error, code: 403, message: secrets are off limits}\n",
    )
    .unwrap();
    let r = start(&["--faults", faults.to_str().unwrap()]);
    let out = kubectl(&r, &["get", "secrets", "-n", "default"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("secrets are off limits"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = kubectl(&r, &["get", "configmaps", "-n", "default"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn refuses_a_bad_faults_file() {
    let dir = tempfile::tempdir().unwrap();
    let faults = dir.path().join("faults.yaml");
    std::fs::write(&faults, "faults:\n- action: {type: explode}\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_drift-test-apiserver"))
        .args(["--kubeconfig"])
        .arg(dir.path().join("kc"))
        .arg("--faults")
        .arg(&faults)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read faults"));
}

#[test]
fn applies_an_admission_file_and_refuses_a_bad_one() {
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("admission.yaml");
    std::fs::write(
        &rules,
        "mutations:\n- match: {resource: ConfigMap}\n  set: [{path: data.mutated, value: 'by admission'}]\n",
    )
    .unwrap();
    let r = start(&["--admission", rules.to_str().unwrap()]);
    let out = kubectl(&r, &["create", "configmap", "c", "-n", "default", "--from-literal=k=v", "-o", "json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let cm: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(cm["data"]["mutated"], "by admission");

    std::fs::write(&rules, "mutations:\n- set: [{path: 'data.', value: 1}]\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_drift-test-apiserver"))
        .args(["--kubeconfig"])
        .arg(dir.path().join("kc"))
        .arg("--admission")
        .arg(&rules)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read admission rules"));
}
