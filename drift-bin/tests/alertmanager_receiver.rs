//! Drift beside the alert (issue 34, item 6): the real Alertmanager (Debian's
//! prometheus-alertmanager 0.25) with a webhook receiver pointing at `drift serve`'s
//! `POST /alertmanager/webhook`. An alert posted to Alertmanager's `/api/v2/alerts` for a
//! namespace with drifts made by kubectl reaches drift, which answers with that namespace's
//! drifts and sends them to the notifiers whose route takes them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::PathBuf;
use std::time::Duration;

use common::{GitRepo, Receiver, Serve, get_json, http, kubectl, wait_for};

/// `POST path` with a JSON body: the status and the answer as JSON (the text when it is none).
fn post_json(addr: &str, path: &str, token: &str, body: &Value) -> (u16, Value) {
    let (status, text) = common::post_json(addr, path, token, body);
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}
use drift_test_apiserver::{Options, TestApiServer};
use drift_testkit::alertmanager::{Alertmanager, alertmanager_available};
use serde_json::{Value, json};

const TOKEN: &str = "alerts-e2e-token-93c1";

struct World {
    server: TestApiServer,
    home: tempfile::TempDir,
    config: PathBuf,
    hooks: Receiver,
}

impl World {
    fn start() -> World {
        let home = tempfile::tempdir().unwrap();
        let server = TestApiServer::start(Options::default()).unwrap();
        let repo = GitRepo::shop(home.path().join("repo"));
        let hooks = Receiver::start();
        let config = home.path().join("drift.yaml");
        // Two notifiers: one whose route takes namespace shop, one that takes only `other`.
        std::fs::write(
            &config,
            format!(
                "cluster: homelab\ninterval: 1h\nwatch: false\ndatabase: sqlite://{db}\napi:\n  listen: 127.0.0.1:0\n  token_env: ALERTS_TOKEN\n\
                 repositories:\n  - name: shop\n    url: file://{repo}\n    ref: main\n    path: apps\n    cache_dir: {cache}\n\
                 live:\n  kubeconfig: {kubeconfig}\n\
                 notify:\n  - name: shop-team\n    type: webhook\n    url: {hook}/shop\n    secret_env: HOOK_SECRET\n    route: {{namespaces: [shop]}}\n\
                 \x20 - name: other-team\n    type: webhook\n    url: {hook}/other\n    secret_env: HOOK_SECRET\n    route: {{namespaces: [other]}}\n\
                 alerts:\n  window: 1h\n",
                db = home.path().join("drift.db").display(),
                repo = repo.dir.display(),
                cache = home.path().join("cache").display(),
                kubeconfig = server.kubeconfig_path().display(),
                hook = hooks.url,
            ),
        )
        .unwrap();
        let world = World { server, home, config, hooks };
        world.kubectl(&["apply", "-R", "-f", repo.dir.join("apps").to_str().unwrap()]);
        world
    }

    fn kubectl(&self, args: &[&str]) -> String {
        kubectl(self.server.kubeconfig_path(), self.home.path(), args, &[])
    }

    fn serve(&self) -> Serve {
        Serve::start(&self.config, &[("ALERTS_TOKEN", TOKEN), ("HOOK_SECRET", "hook-secret")])
    }

    /// The events of the messages `path` received whose batch is an alert's.
    fn alert_events(&self, path: &str) -> Vec<Value> {
        self.hooks
            .received()
            .iter()
            .filter(|r| r.path == path)
            .flat_map(|r| r.json()["events"].as_array().cloned().unwrap_or_default())
            .filter(|e| e["batch"].as_str().is_some_and(|b| b.starts_with("alert:")))
            .collect()
    }
}

#[test]
fn an_alert_sent_through_alertmanager_comes_back_with_the_drifts_of_its_namespace() {
    if !alertmanager_available("an_alert_sent_through_alertmanager_comes_back_with_the_drifts_of_its_namespace") {
        return;
    }
    let world = World::start();
    let serve = world.serve();
    wait_for(Duration::from_secs(60), "the first pass", || {
        (http(&serve.addr, "GET", "/ready", None).0 == 200).then_some(())
    });
    world.kubectl(&["scale", "deployment/web", "-n", "shop", "--replicas=5"]);
    world.kubectl(&["set", "image", "deployment/web", "-n", "shop", "web=nginx:1.28"]);
    let (status, body) = http(&serve.addr, "POST", "/scan?wait=true", Some(TOKEN));
    assert_eq!(status, 200, "{body}");
    let open = get_json(&serve.addr, "/drifts?status=open&namespace=shop");
    let mut shop_ids: Vec<i64> = open["items"].as_array().unwrap().iter().map(|d| d["id"].as_i64().unwrap()).collect();
    shop_ids.sort();
    assert_eq!(shop_ids.len(), 2, "{open}");

    // Alertmanager sends every group at once to drift, with the token, and to a recorder
    // (to replay its exact payload below).
    let am = Alertmanager::start_with(&format!(
        "route:\n  receiver: drift\n  group_by: ['...']\n  group_wait: 0s\n  group_interval: 1s\n  repeat_interval: 1h\n\
         receivers:\n  - name: drift\n    webhook_configs:\n\
         \x20     - url: 'http://{addr}/alertmanager/webhook'\n        http_config:\n          authorization:\n            credentials: '{TOKEN}'\n\
         \x20     - url: '{hook}/alertmanager-copy'\n",
        addr = serve.addr,
        hook = world.hooks.url,
    ));
    am.post_alerts(&json!([{
        "labels": {"alertname": "WebErrors", "namespace": "shop", "deployment": "web", "cluster": "homelab", "severity": "critical"},
        "annotations": {"summary": "5xx above 5%"},
    }]));

    // drift received it: the shop team's notifier gets the namespace's open drifts as one
    // message of the alert's batch; the other team's route does not take them.
    let events = wait_for(Duration::from_secs(60), "the alert's drifts at the shop team's notifier", || {
        let e = world.alert_events("/shop");
        (e.len() >= 2).then_some(e)
    });
    let mut sent: Vec<i64> = events.iter().map(|e| e["drift"]["id"].as_i64().unwrap()).collect();
    sent.sort();
    assert_eq!(sent, shop_ids);
    assert!(events.iter().all(|e| e["kind"] == "reminder" && e["drift"]["namespace"] == "shop"), "{events:?}");
    assert!(world.alert_events("/other").is_empty(), "routing keeps the alert's drifts from the other team");

    // The payload Alertmanager sent, replayed: the answer is the drifts of the namespace.
    let payload = wait_for(Duration::from_secs(30), "Alertmanager's payload", || {
        world.hooks.received().into_iter().find(|r| r.path == "/alertmanager-copy").map(|r| r.json())
    });
    assert_eq!(payload["version"], "4");
    let (status, answer) = post_json(&serve.addr, "/alertmanager/webhook", TOKEN, &payload);
    assert_eq!(status, 200, "{answer}");
    let alert = &answer["alerts"][0];
    assert_eq!(alert["alertname"], "WebErrors");
    assert_eq!(alert["scope"], json!({"cluster": "homelab", "namespace": "shop", "kind": "Deployment", "name": "web"}));
    let mut ids: Vec<i64> = alert["drifts"].as_array().unwrap().iter().map(|d| d["id"].as_i64().unwrap()).collect();
    ids.sort();
    assert_eq!(ids, shop_ids);
    let mut workload: Vec<i64> =
        alert["workload_drifts"].as_array().unwrap().iter().map(|v| v.as_i64().unwrap()).collect();
    workload.sort();
    assert_eq!(workload, shop_ids, "both drifts are the Deployment's");
    let mut hand: Vec<i64> = alert["hand_changes"].as_array().unwrap().iter().map(|v| v.as_i64().unwrap()).collect();
    hand.sort();
    assert_eq!(hand, shop_ids, "kubectl scale and set image, minutes before the alert");
    assert_eq!(answer["emitted"], 0, "the same alert again adds nothing to the outbox");

    // Another namespace, a resolved alert, an alert without a namespace: no drifts.
    let mut other = payload.clone();
    other["alerts"] = json!([
        {"status": "firing", "labels": {"alertname": "X", "namespace": "other"}, "startsAt": payload["alerts"][0]["startsAt"], "fingerprint": "a1"},
        {"status": "resolved", "labels": {"alertname": "Y", "namespace": "shop"}, "startsAt": payload["alerts"][0]["startsAt"], "fingerprint": "a2"},
        {"status": "firing", "labels": {"alertname": "Z"}, "startsAt": payload["alerts"][0]["startsAt"], "fingerprint": "a3"},
    ]);
    let (status, answer) = post_json(&serve.addr, "/alertmanager/webhook", TOKEN, &other);
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["alerts"].as_array().unwrap().len(), 1);
    assert_eq!(answer["alerts"][0]["drifts"], json!([]));
    assert_eq!(answer["skipped"].as_array().unwrap().len(), 2, "{answer}");
    // Without the token, or with another payload version: refused.
    assert_eq!(post_json(&serve.addr, "/alertmanager/webhook", "wrong", &payload).0, 401);
    let mut v3 = payload.clone();
    v3["version"] = json!("3");
    assert_eq!(post_json(&serve.addr, "/alertmanager/webhook", TOKEN, &v3).0, 400);
    serve.stop();
}
