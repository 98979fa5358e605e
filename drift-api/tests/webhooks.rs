//! The two receivers of issue 34 at the API level: `POST /audit/webhook` without an audit log
//! join configured, and `POST /alertmanager/webhook` with odd payloads (a memory store without
//! an outbox: answers only, nothing sent).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use axum::http::{Method, StatusCode};
use common::*;
use drift_model::DriftStore as _;
use serde_json::json;

#[tokio::test]
async fn the_audit_webhook_answers_501_without_audit_and_refuses_what_is_not_an_event_list() {
    let h = harness().await;
    let list = json!({"kind": "EventList", "apiVersion": "audit.k8s.io/v1", "items": []}).to_string();
    assert_eq!(send(&h.app, Method::POST, "/audit/webhook", None, &list).await.status, StatusCode::UNAUTHORIZED);
    let a = send(&h.app, Method::POST, "/audit/webhook", Some(TOKEN), &list).await;
    assert_eq!(a.status, StatusCode::NOT_IMPLEMENTED, "{}", a.text);
    assert!(a.error().contains("audit"), "{}", a.text);
}

#[tokio::test]
async fn an_alert_answers_the_drifts_of_its_namespace_and_odd_alerts_are_skipped() {
    let h = harness().await;
    let namespace = h.store.list(&Default::default(), Default::default()).await.unwrap().items[0].namespace.clone();
    let now = chrono::Utc::now().to_rfc3339();
    let payload = |alerts: serde_json::Value| {
        json!({"version": "4", "receiver": "drift", "status": "firing", "groupLabels": {}, "commonLabels": {},
            "commonAnnotations": {}, "externalURL": "http://am", "groupKey": "{}:{}", "truncatedAlerts": 0,
            "alerts": alerts})
        .to_string()
    };
    let body = payload(json!([
        {"status": "firing", "labels": {"alertname": "A", "namespace": namespace}, "annotations": {},
            "startsAt": now, "endsAt": "0001-01-01T00:00:00Z", "generatorURL": "", "fingerprint": "f1"},
        {"status": "firing", "labels": {"alertname": "B", "namespace": namespace}, "annotations": {},
            "startsAt": "-262143-01-01T00:00:00Z", "fingerprint": "f2"},
        {"status": "firing", "labels": {"alertname": "C"}, "startsAt": now, "fingerprint": "f3"},
    ]));
    let a = send(&h.app, Method::POST, "/alertmanager/webhook", Some(TOKEN), &body).await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    let v = a.json();
    assert_eq!(v["alerts"].as_array().unwrap().len(), 1, "{v}");
    assert_eq!(v["alerts"][0]["scope"]["namespace"], json!(namespace));
    assert_eq!(v["alerts"][0]["notified"], 0, "no outbox: nothing sent");
    assert_eq!(v["emitted"], 0);
    let reasons: Vec<&str> = v["skipped"].as_array().unwrap().iter().map(|s| s["reason"].as_str().unwrap()).collect();
    assert_eq!(reasons, ["startsAt out of range", "no namespace label"]);
    let bad = send(&h.app, Method::POST, "/alertmanager/webhook", Some(TOKEN), "{\"version\": \"4\"}").await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST, "{}", bad.text);
}
