//! The Alertmanager notifier against the real Alertmanager (Debian's prometheus-alertmanager,
//! started by drift-testkit on loopback): a drift that opens is a firing alert with the drift's
//! labels and values, and its resolution ends it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use chrono::Utc;
use drift_model::act::DriftEvent;
use drift_model::{EventKind, Severity};
use drift_notify::fixtures::drift;
use drift_notify::{Message, Notifier, NotifierConfig, build_with_env};
use drift_testkit::alertmanager::{Alertmanager, alertmanager_available};
use url::Url;

fn notifier(url: &str, extra: &str) -> Arc<dyn Notifier> {
    common::install_crypto_provider();
    let yaml = format!("type: alertmanager\nname: am\nurl: {url}\nlabels: {{ team: platform }}\n{extra}");
    let config: NotifierConfig = serde_saphyr::from_str(&yaml).unwrap();
    let env = |name: &str| (name == "AM_TOKEN").then(|| "am-secret-token".to_owned());
    drift_notify::validate(std::slice::from_ref(&config), &env).unwrap();
    build_with_env(&config, &env).unwrap()
}

/// Events of drifts detected ten minutes ago (Alertmanager compares with its own clock).
fn at_now(kind: EventKind, id: i64, name: &str, severity: Severity) -> DriftEvent {
    let now = Utc::now();
    let mut d = drift(id, "shop", name, severity);
    d.detected_at = now - chrono::Duration::minutes(10);
    d.changed_at = Some(now - chrono::Duration::minutes(11));
    if kind == EventKind::Resolved {
        d.resolved_at = Some(now - chrono::Duration::seconds(1));
    }
    DriftEvent::of_drift(kind, "scan-1", now, d)
}

#[tokio::test]
async fn a_drift_fires_in_the_real_alertmanager_and_its_resolution_ends_it() {
    if !alertmanager_available("a_drift_fires_in_the_real_alertmanager_and_its_resolution_ends_it") {
        return;
    }
    let am = Alertmanager::start();
    let n = notifier(&am.url(), "ends_after: 2h\n");
    let link = Some(Url::parse("https://drift.example.com/").unwrap());
    let opened = vec![
        at_now(EventKind::Opened, 1, "web", Severity::Critical),
        at_now(EventKind::Opened, 2, "api", Severity::Low),
    ];
    n.send(&Message::new("am", opened, link.clone())).await.unwrap();

    let alerts = am.alerts();
    assert_eq!(alerts.len(), 2, "{alerts:#?}\n{}", am.log());
    let web = alerts.iter().find(|a| a["labels"]["name"] == "web").unwrap();
    let labels = web["labels"].as_object().unwrap();
    let expected = [
        ("alertname", "GitOpsDrift"),
        ("cluster", "prod"),
        ("namespace", "shop"),
        ("kind", "Deployment"),
        ("name", "web"),
        ("path", "spec.replicas"),
        ("drift_type", "replicas_drift"),
        ("severity", "critical"),
        ("team", "platform"),
    ];
    assert_eq!(labels.len(), expected.len(), "{labels:?}");
    for (k, v) in expected {
        assert_eq!(labels[k], v, "label {k}");
    }
    let ann = &web["annotations"];
    assert_eq!((ann["git_value"].as_str(), ann["cluster_value"].as_str()), (Some("3"), Some("5")));
    assert_eq!(ann["changed_by"], "kubectl-edit");
    assert_eq!(ann["drift_id"], "1");
    assert_eq!(web["generatorURL"], "https://drift.example.com/drifts/1");
    assert_eq!(web["status"]["state"], "active", "{web}");
    let ends: chrono::DateTime<Utc> = web["endsAt"].as_str().unwrap().parse().unwrap();
    assert!(ends > Utc::now() + chrono::Duration::minutes(100), "firing for ends_after: {ends}");

    // The web drift resolves: its alert is gone from the active ones, the other stays.
    let resolved = vec![at_now(EventKind::Resolved, 1, "web", Severity::Critical)];
    n.send(&Message::new("am", resolved, link)).await.unwrap();
    let alerts = am.alerts();
    let names: Vec<&str> = alerts.iter().map(|a| a["labels"]["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["api"], "{alerts:#?}");

    // A digest alone posts nothing (and is not an error).
    n.send(&Message::new("am", vec![drift_notify::fixtures::digest_event("am")], None)).await.unwrap();
    assert_eq!(am.alerts().len(), 1);
}

#[tokio::test]
async fn alertmanager_down_is_retryable_and_its_token_never_shows() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let n = notifier(&format!("http://{closed}"), "token_env: AM_TOKEN\n");
    let m = Message::new("am", vec![at_now(EventKind::Opened, 1, "web", Severity::High)], None);
    let e = n.send(&m).await.unwrap_err();
    assert!(e.retryable, "{e}");
    assert!(e.message.contains("cannot connect"), "{e}");
    assert!(!e.message.contains("am-secret-token") && !format!("{n:?}").contains("am-secret-token"), "{e} {n:?}");
}
