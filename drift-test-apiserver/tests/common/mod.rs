//! Helpers shared by the integration tests: running the real kubectl against a server, and
//! comparing objects without the values that differ on every run.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::io::Write as _;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use drift_test_apiserver::{Options, TestApiServer};
use serde_json::Value;

/// A server and a kubectl configured for it, with HOME in a temporary folder so that nothing
/// outside is read or written (kubectl's discovery cache included).
pub struct Kubectl {
    pub server: TestApiServer,
    pub home: tempfile::TempDir,
}

impl Kubectl {
    pub fn start() -> Kubectl {
        Kubectl::with(Options::default())
    }

    pub fn with(opts: Options) -> Kubectl {
        let server = TestApiServer::start(opts).expect("server starts");
        let home = tempfile::tempdir().unwrap();
        Kubectl { server, home }
    }

    pub fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new("kubectl");
        c.arg("--kubeconfig")
            .arg(self.server.kubeconfig_path())
            .args(args)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.home.path())
            .env("KUBECONFIG", self.server.kubeconfig_path())
            .stdin(Stdio::null());
        c
    }

    /// Run kubectl, which must succeed; returns stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.command(args).output().expect("kubectl runs");
        assert!(
            out.status.success(),
            "kubectl {args:?} failed: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// Run kubectl, which must fail; returns the output.
    pub fn fails(&self, args: &[&str]) -> Output {
        let out = self.command(args).output().expect("kubectl runs");
        assert!(!out.status.success(), "kubectl {args:?} succeeded: {}", String::from_utf8_lossy(&out.stdout));
        out
    }

    /// `kubectl apply -f -` (or other args taking `-f -`) with the document on stdin.
    pub fn stdin(&self, args: &[&str], input: &str) -> String {
        let mut child =
            self.command(args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "kubectl {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    }

    /// `kubectl get -o json --show-managed-fields`.
    pub fn get(&self, what: &str, namespace: &str) -> Value {
        let text = self.ok(&["get", what, "-n", namespace, "-o", "json", "--show-managed-fields"]);
        serde_json::from_str(&text).unwrap()
    }

    pub fn file(&self, name: &str, content: &str) -> PathBuf {
        let p = self.home.path().join(name);
        std::fs::write(&p, content).unwrap();
        p
    }
}

/// The object without the values that are new on every run (uid, times, resourceVersion) and
/// without managedFields, which tests check separately.
pub fn stable(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        for k in ["uid", "creationTimestamp", "resourceVersion", "managedFields"] {
            m.remove(k);
        }
    }
    v
}

/// (manager, operation, subresource) of each managedFields entry, sorted.
pub fn managers(v: &Value) -> Vec<(String, String, String)> {
    let mut out: Vec<(String, String, String)> = v["metadata"]["managedFields"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|e| {
                    (
                        e["manager"].as_str().unwrap_or("").to_owned(),
                        e["operation"].as_str().unwrap_or("").to_owned(),
                        e.get("subresource").and_then(Value::as_str).unwrap_or("").to_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

pub fn m(manager: &str, operation: &str, subresource: &str) -> (String, String, String) {
    (manager.to_owned(), operation.to_owned(), subresource.to_owned())
}

/// The fieldsV1 of one manager's entry.
pub fn fields_of(v: &Value, manager: &str, operation: &str) -> Value {
    v["metadata"]["managedFields"]
        .as_array()
        .and_then(|a| {
            a.iter().find(|e| e["manager"] == manager && e["operation"] == operation).map(|e| e["fieldsV1"].clone())
        })
        .unwrap_or(Value::Null)
}

/// Poll `f` until it returns Some, at most `tries` times with a short pause: for waiting on
/// another process (a watch that must be open before the change it should see).
pub fn poll<T>(tries: u32, mut f: impl FnMut() -> Option<T>) -> T {
    for _ in 0..tries {
        if let Some(v) = f() {
            return v;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    panic!("condition not met after {tries} tries");
}
