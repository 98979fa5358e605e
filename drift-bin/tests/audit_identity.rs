//! The person behind a change (issue 34, item 5), end to end: the test API server with named
//! users (a token file) writes a Kubernetes audit log; the real kubectl changes objects as
//! `alice` and `bob`; `drift serve` with `audit:` reads the log (or takes the same events
//! through `POST /audit/webhook`) and every drift shows who made it, in the API and in `drift
//! drifts get`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{GitRepo, Serve, get_json, http, post_json, script, wait_for};
use drift_test_apiserver::{AuditLevel, Options, StaticUser, TestApiServer};
use serde_json::{Value, json};

const TOKEN: &str = "audit-e2e-token-5d1b";

struct World {
    server: TestApiServer,
    home: tempfile::TempDir,
    config: PathBuf,
    audit_log: PathBuf,
}

impl World {
    /// `audit` is the `audit:` section of drift.yaml, given the audit log's path.
    fn start(audit: impl Fn(&Path) -> String) -> World {
        let home = tempfile::tempdir().unwrap();
        let audit_log = home.path().join("audit.log");
        let server = TestApiServer::start(Options {
            tls: true,
            // The first user's token goes into the kubeconfig: drift's own.
            users: vec![
                StaticUser::new("drift-sa-token", "system:serviceaccount:drift:drift", &["system:serviceaccounts"]),
                StaticUser::new("admin-token", "admin", &["system:masters"]),
                StaticUser::new("alice-token", "alice", &["dev", "oncall"]),
                StaticUser::new("bob-token", "bob", &["dev"]),
            ],
            audit_log: Some(audit_log.clone()),
            audit_level: AuditLevel::Request,
            ..Options::default()
        })
        .unwrap();
        let repo = GitRepo::shop(home.path().join("repo"));
        let config = home.path().join("drift.yaml");
        std::fs::write(
            &config,
            format!(
                "cluster: audit\ninterval: 1h\nwatch: false\ndatabase: sqlite://{db}\napi:\n  listen: 127.0.0.1:0\n  token_env: AUDIT_TOKEN\n\
                 repositories:\n  - name: shop\n    url: file://{repo}\n    ref: main\n    path: apps\n    cache_dir: {cache}\n\
                 live:\n  kubeconfig: {kubeconfig}\n{audit}",
                db = home.path().join("drift.db").display(),
                repo = repo.dir.display(),
                cache = home.path().join("cache").display(),
                kubeconfig = server.kubeconfig_path().display(),
                audit = audit(&audit_log),
            ),
        )
        .unwrap();
        let world = World { server, home, config, audit_log };
        world.kubectl("admin-token", &["apply", "-R", "-f", repo.dir.join("apps").to_str().unwrap()], None);
        world
    }

    /// kubectl as the user of `token`; with `editor`, as `KUBE_EDITOR`.
    fn kubectl(&self, token: &str, args: &[&str], editor: Option<&Path>) -> String {
        let mut c = Command::new("kubectl");
        c.arg("--kubeconfig")
            .arg(self.server.kubeconfig_path())
            .args(["--token", token])
            .args(args)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.home.path())
            .stdin(Stdio::null());
        if let Some(e) = editor {
            c.env("KUBE_EDITOR", e);
        }
        let out = c.output().unwrap();
        assert!(out.status.success(), "kubectl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    }

    /// `kubectl edit` of ConfigMap shop/settings as the user of `token` (manager kubectl-edit).
    fn edit_configmap(&self, token: &str, from: &str, to: &str) {
        let editor = self.home.path().join(format!("edit-{to}.sh"));
        script(&editor, &format!("#!/bin/sh\nsed -i 's/mode: {from}/mode: {to}/' \"$1\"\n"));
        self.kubectl(token, &["edit", "configmap", "settings", "-n", "shop"], Some(&editor));
    }

    fn serve(&self) -> Serve {
        Serve::start(&self.config, &[("AUDIT_TOKEN", TOKEN)])
    }

    fn drift(&self, args: &[&str]) -> String {
        let out = common::drift_command()
            .args(args)
            .arg("--config")
            .arg(&self.config)
            .env("NO_COLOR", "1")
            .env_remove("KUBECONFIG")
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
    }
}

fn scan(serve: &Serve) {
    let (status, body) = http(&serve.addr, "POST", "/scan?wait=true", Some(TOKEN));
    assert_eq!(status, 200, "{body}");
}

/// The open drift at `path`, once its `changed_by_user` is joined.
fn identified(serve: &Serve, path: &str) -> Value {
    wait_for(Duration::from_secs(30), &format!("the person behind the change of {path}"), || {
        let page = get_json(&serve.addr, "/drifts?status=open&limit=100");
        page["items"].as_array().unwrap().iter().find(|d| d["path"] == path && !d["changed_by_user"].is_null()).cloned()
    })
}

fn wait_ready(serve: &Serve) {
    wait_for(Duration::from_secs(60), "the first pass", || {
        (http(&serve.addr, "GET", "/ready", None).0 == 200).then_some(())
    });
}

#[test]
fn a_drift_made_by_kubectl_as_a_named_user_shows_that_user() {
    let world = World::start(|log| format!("audit:\n  log: {}\n  tick: 200ms\n", log.display()));
    let serve = world.serve();
    wait_ready(&serve);

    world.kubectl("alice-token", &["scale", "deployment/web", "-n", "shop", "--replicas=5"], None);
    world.edit_configmap("bob-token", "fast", "slow");
    scan(&serve);

    let replicas = identified(&serve, "spec.replicas");
    let alice = &replicas["changed_by_user"];
    assert_eq!(alice["username"], "alice", "{replicas}");
    assert_eq!(alice["groups"], json!(["dev", "oncall", "system:authenticated"]));
    assert_eq!(alice["source_ips"], json!(["127.0.0.1"]));
    assert!(alice["user_agent"].as_str().unwrap().starts_with("kubectl/"), "{alice}");
    assert_eq!(alice["verb"], "patch");
    assert_eq!(alice["changed_at"], replicas["changed_at"], "joined for the change the drift shows");

    let mode = identified(&serve, "data.mode");
    assert_eq!(mode["changed_by"], "kubectl-edit");
    assert_eq!(mode["changed_by_user"]["username"], "bob", "{mode}");
    assert_eq!(mode["changed_by_user"]["groups"], json!(["dev", "system:authenticated"]));
    // kubectl edit sends a patch with fieldManager=kubectl-edit: the audit event names it.
    let events = std::fs::read_to_string(&world.audit_log).unwrap();
    let audit_id = mode["changed_by_user"]["audit_id"].as_str().unwrap();
    let event: Value =
        events.lines().map(|l| serde_json::from_str::<Value>(l).unwrap()).find(|e| e["auditID"] == audit_id).unwrap();
    assert_eq!(event["user"]["username"], "bob");
    assert!(event["requestURI"].as_str().unwrap().contains("fieldManager=kubectl-edit"), "{event}");

    // `drift drifts get` shows it next to the field manager.
    let out = world.drift(&["drifts", "get", &replicas["id"].to_string()]);
    assert!(
        out.contains("changed by user: alice (dev, oncall, system:authenticated) from 127.0.0.1 with kubectl/"),
        "{out}"
    );

    // Alice changes the field again: the drift's change is hers again, joined anew for the
    // newer time; bob's edit of another object stays his.
    std::thread::sleep(Duration::from_millis(1100)); // managedFields times are whole seconds
    world.kubectl("bob-token", &["scale", "deployment/web", "-n", "shop", "--replicas=6"], None);
    scan(&serve);
    let again = wait_for(Duration::from_secs(30), "bob behind the second scale", || {
        let d = identified(&serve, "spec.replicas");
        (d["changed_by_user"]["username"] == "bob").then_some(d)
    });
    assert_eq!(again["changed_by_user"]["changed_at"], again["changed_at"]);
    assert_ne!(again["changed_at"], replicas["changed_at"]);
    serve.stop();
}

#[test]
fn the_audit_webhook_brings_the_same_events() {
    // No file: the events come only through the webhook endpoint, as kube-apiserver's webhook
    // backend sends them (an EventList).
    let world = World::start(|_| "audit:\n  tick: 200ms\n".to_owned());
    let serve = world.serve();
    wait_ready(&serve);
    world.edit_configmap("alice-token", "fast", "slow");
    scan(&serve);
    let page = get_json(&serve.addr, "/drifts?status=open");
    assert!(page["items"][0]["changed_by_user"].is_null(), "nothing joined before the events came: {page}");

    let items: Vec<Value> =
        std::fs::read_to_string(&world.audit_log).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let list = json!({"kind": "EventList", "apiVersion": "audit.k8s.io/v1", "metadata": {}, "items": items});
    assert_eq!(post_json(&serve.addr, "/audit/webhook", "wrong", &list).0, 401);
    let (status, body) = post_json(&serve.addr, "/audit/webhook", TOKEN, &json!({"kind": "Pod", "apiVersion": "v1"}));
    assert_eq!(status, 400, "{body}");
    let (status, body) = post_json(&serve.addr, "/audit/webhook", TOKEN, &list);
    assert_eq!(status, 200, "{body}");
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(answer["received"], items.len());
    assert!(answer["kept"].as_u64().unwrap() >= 1, "{answer}");

    let mode = identified(&serve, "data.mode");
    assert_eq!(mode["changed_by_user"]["username"], "alice", "{mode}");
    serve.stop();
}
