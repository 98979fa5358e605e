//! Named users and the audit log, through the binary's flags (`--token-auth-file`,
//! `--audit-log-path`, `--audit-level`) and the real kubectl over TLS (kubectl sends a token
//! only over TLS). The expected events are written from the `audit.k8s.io/v1` `Event` schema.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead as _, BufReader};
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};

struct Running {
    child: Child,
    dir: tempfile::TempDir,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(level: &str) -> Running {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("tokens.csv"), "alice-token,alice,1001,\"dev,ops\"\nbob-token,bob,1002\n").unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_drift-test-apiserver"))
        .args(["--listen", "127.0.0.1:0", "--tls", "--audit-level", level, "--kubeconfig"])
        .arg(dir.path().join("kubeconfig"))
        .arg("--token-auth-file")
        .arg(dir.path().join("tokens.csv"))
        .arg("--audit-log-path")
        .arg(dir.path().join("audit.log"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    assert!(line.starts_with("listening on "), "{line}");
    Running { child, dir }
}

fn kubectl(r: &Running, token: &str, args: &[&str]) -> std::process::Output {
    Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(r.dir.path().join("kubeconfig"))
        .args(["--token", token])
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", r.dir.path())
        .output()
        .unwrap()
}

fn events(r: &Running) -> Vec<Value> {
    std::fs::read_to_string(r.dir.path().join("audit.log"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON line ({e}): {l}")))
        .collect()
}

const CM: &str =
    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: default}\ndata: {mode: fast}\n";

#[test]
fn kubectl_as_a_named_user_is_written_to_the_audit_log() {
    let r = start("Request");
    let file = r.dir.path().join("cm.yaml");
    std::fs::write(&file, CM).unwrap();
    let out = kubectl(&r, "alice-token", &["create", "-f", file.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = kubectl(&r, "bob-token", &["patch", "configmap", "settings", "-p", r#"{"data":{"mode":"slow"}}"#]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // An unknown token is refused, and the refusal is written too.
    let out = kubectl(&r, "mallory-token", &["get", "configmaps"]);
    assert!(!out.status.success());

    let all = events(&r);
    for e in &all {
        assert_eq!(e["kind"], "Event");
        assert_eq!(e["apiVersion"], "audit.k8s.io/v1");
        assert_eq!(e["level"], "Request");
        assert!(e["auditID"].as_str().is_some_and(|s| s.len() == 36), "{e}");
        assert!(matches!(e["stage"].as_str(), Some("ResponseComplete" | "ResponseStarted")), "{e}");
        assert_eq!(e["sourceIPs"], json!(["127.0.0.1"]));
        let received = chrono::DateTime::parse_from_rfc3339(e["requestReceivedTimestamp"].as_str().unwrap()).unwrap();
        let stage = chrono::DateTime::parse_from_rfc3339(e["stageTimestamp"].as_str().unwrap()).unwrap();
        assert!(received <= stage, "{e}");
        // MicroTime: six digits of fraction, UTC.
        assert_eq!(e["stageTimestamp"].as_str().unwrap().len(), "2026-12-06T10:00:00.123456Z".len(), "{e}");
    }
    let create = all.iter().find(|e| e["verb"] == "create").expect("a create event");
    assert_eq!(
        create["user"],
        json!({"username": "alice", "uid": "1001", "groups": ["dev", "ops", "system:authenticated"]})
    );
    assert_eq!(create["objectRef"], json!({"resource": "configmaps", "namespace": "default", "apiVersion": "v1"}));
    assert_eq!(create["responseStatus"]["code"], 201);
    assert_eq!(create["requestObject"]["data"]["mode"], "fast");
    assert!(create["userAgent"].as_str().unwrap().starts_with("kubectl/"), "{create}");

    let patch = all.iter().find(|e| e["verb"] == "patch").expect("a patch event");
    assert_eq!(patch["user"]["username"], "bob");
    assert_eq!(patch["user"]["groups"], json!(["system:authenticated"]));
    assert_eq!(patch["objectRef"]["name"], "settings");
    assert!(
        patch["requestURI"].as_str().unwrap().starts_with("/api/v1/namespaces/default/configmaps/settings?"),
        "{patch}"
    );
    assert!(patch["requestURI"].as_str().unwrap().contains("fieldManager=kubectl-patch"), "{patch}");
    assert_eq!(patch["requestObject"], json!({"data": {"mode": "slow"}}));
    assert_eq!(patch["responseStatus"]["code"], 200);

    let refused = all.iter().find(|e| e["responseStatus"]["code"] == 401).expect("a 401 event");
    assert_eq!(refused["user"]["username"], "");
    assert!(refused.get("annotations").is_none(), "{refused}");
}

#[test]
fn metadata_level_leaves_the_request_body_out() {
    let r = start("Metadata");
    let file = r.dir.path().join("cm.yaml");
    std::fs::write(&file, CM).unwrap();
    let out = kubectl(&r, "alice-token", &["apply", "-f", file.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let all = events(&r);
    let create = all.iter().find(|e| e["verb"] == "create").expect("a create event");
    assert_eq!(create["level"], "Metadata");
    assert!(create.get("requestObject").is_none(), "{create}");
    assert_eq!(create["user"]["username"], "alice");
}
