//! Decisions, the audit trail, deliveries and the tokens that guard them, through the router,
//! over a real SQLite store.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeSet;
use std::sync::Arc;

use axum::http::{Method, StatusCode};
use chrono::{DateTime, Duration, Utc};
use common::*;
use drift_api::{ApiState, ApiToken, router};
use drift_model::{DriftSink, DriftType};
use drift_testkit::fixtures::{drift, key, report, t};
use serde_json::{Value, json};

const REPLICAS: &str = "spec.replicas";

fn decisions_uri(id: i64) -> String {
    format!("/drifts/{id}/decisions")
}

async fn decide(h: &SqliteHarness, id: i64, token: Option<&str>, body: Value) -> Answer {
    send(&h.app, Method::POST, &decisions_uri(id), token, &body.to_string()).await
}

fn time(v: &Value) -> DateTime<Utc> {
    v.as_str().unwrap().parse().unwrap()
}

#[tokio::test]
async fn a_decision_needs_a_write_token() {
    let h = sqlite_harness().await;
    let id = h.drift_id("web", REPLICAS).await;
    let body = json!({"action": "acknowledge"});
    let wrong = format!("{}X", &ALICE[..ALICE.len() - 1]);
    for token in [None, Some(wrong.as_str()), Some(READER), Some("")] {
        let a = decide(&h, id, token, body.clone()).await;
        assert_eq!(a.status, StatusCode::UNAUTHORIZED, "{token:?}: {}", a.text);
        assert_eq!(a.headers["www-authenticate"], "Bearer");
        assert!(!a.error().is_empty());
    }
    // The read token does not write, even when it is configured.
    let app = router(h.state.clone().with_read_token(Some(ApiToken::named("reader", READER).unwrap())));
    let a = send(&app, Method::POST, &decisions_uri(id), Some(READER), &body.to_string()).await;
    assert_eq!(a.status, StatusCode::UNAUTHORIZED);
    // Without any write token configured, writing is disabled.
    let app = router(h.state.clone().with_tokens(vec![]));
    let a = send(&app, Method::POST, &decisions_uri(id), Some(ALICE), &body.to_string()).await;
    assert_eq!(a.status, StatusCode::FORBIDDEN);
    assert!(a.error().contains("api.tokens"), "{}", a.text);
    // Nothing was decided.
    let audit = get(&h.app, "/audit?action=decision").await.json();
    assert_eq!(audit["items"], json!([]));
    assert_eq!(get(&h.app, &format!("/drifts/{id}")).await.json()["decisions"], json!([]));
}

#[tokio::test]
async fn an_accept_waives_the_drift_and_the_audit_names_the_token() {
    let h = sqlite_harness().await;
    let id = h.drift_id("web", REPLICAS).await;
    let open_medium = |stats: &Value| stats["by_severity"]["MEDIUM"].as_i64().unwrap_or(0);
    let before = get(&h.app, "/stats").await.json();

    let a = decide(&h, id, Some(ALICE), json!({"action": "accept", "comment": "hotfix for the sale"})).await;
    assert_eq!(a.status, StatusCode::CREATED, "{}", a.text);
    let d = a.json();
    assert_eq!(d["actor"], "alice");
    assert_eq!(d["action"], "accept");
    assert_eq!(d["drift_id"], id);
    assert_eq!(time(&d["decided_at"]), t(95));
    assert_eq!(time(&d["expires_at"]), t(95) + Duration::days(7), "a waiver lasts 7 days by default");

    let v = get(&h.app, &format!("/drifts/{id}")).await.json();
    assert_eq!(v["status"], "waived");
    assert_eq!(v["decision_source"], "human");
    assert_eq!(time(&v["waived_until"]), t(95) + Duration::days(7));
    assert_eq!(v["decisions"].as_array().unwrap().len(), 1);
    assert_eq!(v["decisions"][0]["actor"], "alice");
    assert_eq!(v["decisions"][0]["comment"], "hotfix for the sale");
    assert_eq!(v["resource_name"], "web", "the drift's own fields stay at the top level");

    // No longer open: out of the open counts, counted as waived.
    let after = get(&h.app, "/stats").await.json();
    assert_eq!(open_medium(&after), open_medium(&before) - 1);
    assert_eq!(after["by_status"]["waived"], 1);
    let waived = get(&h.app, "/drifts?status=waived").await.json();
    assert_eq!(waived["items"].as_array().unwrap().len(), 1);
    assert_eq!(waived["items"][0]["id"], id);

    let audit = get(&h.app, "/audit?action=decision").await.json();
    let items = audit["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{audit}");
    assert_eq!(items[0]["actor"], "alice");
    assert_eq!(items[0]["status"], "accept");
    assert_eq!(items[0]["drift_id"], id);
    assert_eq!(items[0]["detail"]["comment"], "hotfix for the sale");
    assert_eq!(get(&h.app, "/audit?action=decision&actor=alice").await.json()["items"].as_array().unwrap().len(), 1);
    assert_eq!(get(&h.app, "/audit?action=decision&actor=bob").await.json()["items"], json!([]));
}

#[tokio::test]
async fn acknowledge_then_reject_each_under_its_token_name() {
    let h = sqlite_harness().await;
    let id = h.drift_id("web", REPLICAS).await;
    let a = decide(&h, id, Some(BOB), json!({"action": "acknowledge", "comment": "looking"})).await;
    assert_eq!(a.status, StatusCode::CREATED, "{}", a.text);
    assert_eq!(a.json()["actor"], "bob");
    assert_eq!(a.json()["expires_at"], Value::Null, "an acknowledgement gets no default expiry");
    let v = get(&h.app, &format!("/drifts/{id}")).await.json();
    assert_eq!(v["status"], "open");
    assert_eq!(time(&v["acknowledged_at"]), t(95));

    // A waiver, then a rejection that ends it.
    h.clock.set(t(96));
    let expires = (t(96) + Duration::days(2)).to_rfc3339();
    let a = decide(&h, id, Some(ALICE), json!({"action": "accept", "comment": "ok", "expires_at": expires})).await;
    assert_eq!(a.status, StatusCode::CREATED, "{}", a.text);
    assert_eq!(time(&a.json()["expires_at"]), t(96) + Duration::days(2));
    assert_eq!(get(&h.app, &format!("/drifts/{id}")).await.json()["status"], "waived");
    h.clock.set(t(97));
    let a = decide(&h, id, Some(BOB), json!({"action": "reject", "comment": "revert it"})).await;
    assert_eq!(a.status, StatusCode::CREATED, "{}", a.text);
    let v = get(&h.app, &format!("/drifts/{id}")).await.json();
    assert_eq!(v["status"], "open");
    assert_eq!(v["waived_until"], Value::Null);
    assert_eq!(v["recommended_action"], "suggest_revert");
    let seen: Vec<(&str, &str)> = v["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| (d["action"].as_str().unwrap(), d["actor"].as_str().unwrap()))
        .collect();
    assert_eq!(seen, [("acknowledge", "bob"), ("accept", "alice"), ("reject", "bob")], "oldest first");
}

#[tokio::test]
async fn bad_decisions_are_400_unknown_drifts_404_resolved_ones_409() {
    let h = sqlite_harness().await;
    let id = h.drift_id("web", REPLICAS).await;
    let uri = decisions_uri(id);
    let in_days = |d: i64| (t(95) + Duration::days(d)).to_rfc3339();
    for (body, says) in [
        (json!({"action": "accept", "comment": "x", "actor": "mallory"}).to_string(), "unknown field"),
        (json!({"action": "approve"}).to_string(), "unknown variant"),
        (json!({"comment": "x"}).to_string(), "missing field"),
        (json!({"action": "accept"}).to_string(), "comment"),
        (json!({"action": "accept", "comment": "  "}).to_string(), "comment"),
        // Zero-width characters only are no reason either (issue 37, item 6).
        (json!({"action": "accept", "comment": "\u{200b}\u{200d}\u{2060}\u{feff}"}).to_string(), "comment"),
        (json!({"action": "accept", "comment": "x", "expires_at": in_days(-1)}).to_string(), "not in the future"),
        (json!({"action": "accept", "comment": "x", "expires_at": in_days(367)}).to_string(), "366"),
        (json!({"action": "accept", "comment": "x", "expires_at": "next week"}).to_string(), "expires_at"),
        (json!({"action": "reject", "comment": "x".repeat(2001)}).to_string(), "2000"),
        (String::new(), "JSON object"),
        ("[1]".to_owned(), "JSON object"),
    ] {
        let a = send(&h.app, Method::POST, &uri, Some(ALICE), &body).await;
        assert_eq!(a.status, StatusCode::BAD_REQUEST, "{body}: {}", a.text);
        assert!(a.error().contains(says), "{body}: {}", a.text);
    }
    let ok = json!({"action": "acknowledge"}).to_string();
    let a = send(&h.app, Method::POST, &format!("{uri}?as=bob"), Some(ALICE), &ok).await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST);
    let a = send(&h.app, Method::POST, "/drifts/web/decisions", Some(ALICE), &ok).await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST);
    assert_eq!(get(&h.app, &format!("/drifts/{id}")).await.json()["decisions"], json!([]), "nothing recorded");

    let a = send(&h.app, Method::POST, &decisions_uri(9999), Some(ALICE), &ok).await;
    assert_eq!(a.status, StatusCode::NOT_FOUND);
    // The billing ConfigMap was resolved by scan-2.
    let v = get(&h.app, "/drifts?status=resolved").await.json();
    let resolved_id = v["items"][0]["id"].as_i64().unwrap();
    assert_eq!(v["items"][0]["namespace"], "billing");
    let a = send(&h.app, Method::POST, &decisions_uri(resolved_id), Some(ALICE), &ok).await;
    assert_eq!(a.status, StatusCode::CONFLICT, "{}", a.text);
    assert!(a.error().contains("resolved"), "{}", a.text);
}

#[tokio::test]
async fn a_drift_shows_its_notifications_and_what_similar_decisions_teach() {
    let h = sqlite_harness().await;
    // Another Deployment of the shop namespace, its replicas changed by the same manager in the
    // same band of the day: similar to web's.
    let mut other = report(
        "scan-4",
        t(92),
        &[key("Deployment", "shop", "cart")],
        vec![drift("Deployment", "shop", "cart", DriftType::ReplicasDrift, REPLICAS, json!(9))],
    );
    other.repository = "cart-repo".to_owned();
    h.store.record(&other).await.unwrap();
    let web = h.drift_id("web", REPLICAS).await;
    let cart = h.drift_id("cart", REPLICAS).await;
    assert_eq!(get(&h.app, &format!("/drifts/{cart}")).await.json()["learned"], Value::Null, "nothing learned yet");

    let a = decide(&h, web, Some(ALICE), json!({"action": "accept", "comment": "scaled for the sale"})).await;
    assert_eq!(a.status, StatusCode::CREATED);
    let v = get(&h.app, &format!("/drifts/{cart}")).await.json();
    assert_eq!(v["learned"]["accepted"], 1);
    assert_eq!(v["learned"]["rejected"], 0);
    assert!((v["learned"]["intentional"].as_f64().unwrap() - 2.0 / 3.0).abs() < 1e-9);
    assert_eq!(v["learned"]["explanation"], "likely intentional (67%, 1 of 1 similar changes accepted)");
    // A drift's own decisions are left out.
    assert_eq!(get(&h.app, &format!("/drifts/{web}")).await.json()["learned"], Value::Null);

    // The classifier learned from web's accept (and a reject of web's port): cart is predicted
    // accept, with the evidence; web's own decision is not its evidence. Without `classify:`
    // settings it is shown, not used.
    let port = h.drift_id("web", "spec.ports[port=80].targetPort").await;
    let a = decide(&h, port, Some(ALICE), json!({"action": "reject", "comment": "put it back"})).await;
    assert_eq!(a.status, StatusCode::CREATED);
    let p = get(&h.app, &format!("/drifts/{cart}")).await.json()["prediction"].clone();
    assert_eq!(
        (&p["intent"], &p["examples"], &p["used"], &p["min_confidence"]),
        (&json!("accept"), &json!(2), &json!(false), &Value::Null),
        "{p}"
    );
    let sum = ["accept", "revert", "ignore"].iter().map(|k| p["probabilities"][k].as_f64().unwrap()).sum::<f64>();
    assert!((sum - 1.0).abs() < 1e-9, "{p}");
    assert_eq!(p["confidence"], p["probabilities"]["accept"]);
    let reasons: Vec<&str> = p["reasons"].as_array().unwrap().iter().map(|r| r["text"].as_str().unwrap()).collect();
    assert!(reasons.contains(&"path spec.replicas: 1 of 1 such decisions were accept"), "{p}");
    assert!(p["explanation"].as_str().unwrap().starts_with("accept ("), "{p}");
    let own = get(&h.app, &format!("/drifts/{web}")).await.json()["prediction"].clone();
    assert_eq!((&own["intent"], &own["examples"]), (&json!("revert"), &json!(1)), "only the reject: {own}");
    // With settings: used at or above the confidence and the number of decided drifts set.
    let settings = |min_confidence, min_examples| drift_engine::classify::ClassifySettings {
        min_confidence,
        min_examples,
        quiet_intended: true,
    };
    for (s, used) in [(settings(0.5, 2), true), (settings(0.5, 3), false), (settings(0.9999, 1), false)] {
        let app = router(h.state.clone().with_predictor(Arc::new(drift_engine::classify::Classifier::new(Some(s)))));
        let p = get(&app, &format!("/drifts/{cart}")).await.json()["prediction"].clone();
        assert_eq!((&p["used"], &p["min_confidence"]), (&json!(used), &json!(s.min_confidence)), "{s:?}: {p}");
    }
    // An API given no predictor (an integrator's, on the model alone) shows none.
    let bare = router(ApiState::new(h.store.clone(), h.trigger.clone()).with_act(h.store.clone()));
    let v = get(&bare, &format!("/drifts/{cart}")).await.json();
    assert_eq!((&v["prediction"], &v["learned"]["accepted"]), (&Value::Null, &json!(1)), "{v}");

    // Every drift of scan-1 was announced to the hook: one sent or parked delivery each.
    let v = get(&h.app, &format!("/drifts/{web}")).await.json();
    let n = v["notifications"].as_array().unwrap();
    assert!(!n.is_empty(), "{v}");
    assert!(n.iter().all(|d| d["notifier"] == HOOK && d["drift_id"] == web && d["kind"] == "opened"), "{v}");
    let mut all_statuses = BTreeSet::new();
    for name_path in [("web", REPLICAS), ("web", "spec.ports[port=80].targetPort")] {
        let id = h.drift_id(name_path.0, name_path.1).await;
        for d in get(&h.app, &format!("/drifts/{id}")).await.json()["notifications"].as_array().unwrap() {
            all_statuses.insert(d["status"].as_str().unwrap().to_owned());
        }
    }
    assert!(all_statuses.iter().all(|s| ["sent", "parked"].contains(&s.as_str())), "{all_statuses:?}");
}

#[tokio::test]
async fn the_audit_trail_filters_and_pages() {
    let h = sqlite_harness().await;
    let id = h.drift_id("web", REPLICAS).await;
    decide(&h, id, Some(ALICE), json!({"action": "acknowledge"})).await;
    let all = get(&h.app, "/audit?limit=1000").await.json();
    let items = all["items"].as_array().unwrap();
    let actions: BTreeSet<&str> = items.iter().map(|e| e["action"].as_str().unwrap()).collect();
    assert_eq!(actions, BTreeSet::from(["decision", "notification", "scan"]), "{all}");
    assert_eq!(all["next"], Value::Null);
    let ids: Vec<i64> = items.iter().map(|e| e["id"].as_i64().unwrap()).collect();
    assert!(ids.windows(2).all(|w| w[0] > w[1]), "newest first: {ids:?}");

    // Walking pages of 2 sees every entry once.
    assert_eq!(walk(&h.app, "/audit?limit=2", "id").await, ids);

    let parked = get(&h.app, "/audit?action=notification&status=parked").await.json();
    let parked = parked["items"].as_array().unwrap();
    assert_eq!(parked.len(), 1);
    assert_eq!(parked[0]["notifier"], HOOK);
    assert_eq!(parked[0]["event_id"], h.parked.as_str());
    assert_eq!(parked[0]["attempts"], 1);
    let scans = get(&h.app, "/audit?action=scan&actor=scanner").await.json();
    assert_eq!(scans["items"].as_array().unwrap().len(), 3, "one per report");
    let by_notifier = get(&h.app, &format!("/audit?notifier={HOOK}")).await.json();
    assert!(by_notifier["items"].as_array().unwrap().iter().all(|e| e["notifier"] == HOOK));
    let of_drift = get(&h.app, &format!("/audit?drift_id={id}")).await.json();
    assert!(of_drift["items"].as_array().unwrap().iter().any(|e| e["action"] == "decision"), "{of_drift}");
    assert!(of_drift["items"].as_array().unwrap().iter().all(|e| e["drift_id"] == id));
    let since = (t(95) + Duration::seconds(1)).to_rfc3339().replace('+', "%2B");
    assert_eq!(get(&h.app, &format!("/audit?since={since}")).await.json()["items"], json!([]));

    for q in
        ["action=vote", "drift_id=0", "since=today", "limit=0", "actor=", "action=scan&action=decision", "sevrity=1"]
    {
        let a = get(&h.app, &format!("/audit?{q}")).await;
        assert_eq!(a.status, StatusCode::BAD_REQUEST, "{q}");
        assert!(!a.error().is_empty());
    }
}

#[tokio::test]
async fn notifications_list_and_a_parked_one_is_requeued_by_a_named_token() {
    let h = sqlite_harness().await;
    let parked = get(&h.app, "/notifications?status=parked").await.json();
    assert_eq!(parked["items"].as_array().unwrap().len(), 1, "{parked}");
    assert_eq!(parked["items"][0]["event_id"], h.parked.as_str());
    assert_eq!(parked["items"][0]["last_error"], "the receiver answered 400");
    assert_eq!(parked["items"][0]["park_reason"], "refused", "{parked}");
    let pending = get(&h.app, "/notifications?status=pending").await.json();
    assert!(!pending["items"].as_array().unwrap().is_empty(), "later batches wait");
    assert!(pending["items"].as_array().unwrap().iter().all(|d| d["status"] == "pending"));

    // Pages of one walk every delivery once, newest event first.
    let all = get(&h.app, "/notifications?limit=1000").await.json();
    let all: Vec<i64> = all["items"].as_array().unwrap().iter().map(|d| d["seq"].as_i64().unwrap()).collect();
    assert!(all.windows(2).all(|w| w[0] > w[1]), "{all:?}");
    assert_eq!(walk(&h.app, "/notifications?limit=1", "seq").await, all);
    let web = h.drift_id("web", REPLICAS).await;
    let of_web = get(&h.app, &format!("/notifications?drift_id={web}")).await.json();
    assert!(of_web["items"].as_array().unwrap().iter().all(|d| d["drift_id"] == web));
    for q in ["status=lost", "drift_id=x", "limit=1001", "notifier=hook"] {
        assert_eq!(get(&h.app, &format!("/notifications?{q}")).await.status, StatusCode::BAD_REQUEST, "{q}");
    }

    let uri = format!("/notifications/{}/requeue?notifier={HOOK}", h.parked);
    assert_eq!(send(&h.app, Method::POST, &uri, None, "").await.status, StatusCode::UNAUTHORIZED);
    let a = send(&h.app, Method::POST, &format!("/notifications/{}/requeue", h.parked), Some(BOB), "").await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST);
    assert!(a.error().contains("notifier"));
    let a =
        send(&h.app, Method::POST, &format!("/notifications/{}/requeue?notifier=mail", h.parked), Some(BOB), "").await;
    assert_eq!(a.status, StatusCode::NOT_FOUND);
    let a = send(&h.app, Method::POST, &uri, Some(BOB), "").await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    assert_eq!(a.json(), json!({"status": "pending", "event_id": h.parked, "notifier": HOOK}));
    assert_eq!(get(&h.app, "/notifications?status=parked").await.json()["items"], json!([]));
    let audit = get(&h.app, "/audit?action=requeue").await.json();
    assert_eq!(audit["items"][0]["actor"], "bob");
    assert_eq!(audit["items"][0]["event_id"], h.parked.as_str());
    // Only a parked delivery is requeued.
    assert_eq!(send(&h.app, Method::POST, &uri, Some(BOB), "").await.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_read_token_guards_every_read_but_health_ready_and_metrics() {
    let h = sqlite_harness().await;
    let app = router(h.state.clone().with_read_token(Some(ApiToken::named("reader", READER).unwrap())));
    let id = h.drift_id("web", REPLICAS).await;
    let guarded = [
        "/drifts".to_owned(),
        format!("/drifts/{id}"),
        "/stats".to_owned(),
        "/audit".to_owned(),
        "/notifications".to_owned(),
        "/openapi.json".to_owned(),
    ];
    let wrong = format!("Bearer {READER}x");
    let reader = format!("Bearer {READER}");
    let alice = format!("Bearer {ALICE}");
    for uri in &guarded {
        let a = get(&app, uri).await;
        assert_eq!(a.status, StatusCode::UNAUTHORIZED, "{uri}");
        assert_eq!(a.headers["www-authenticate"], "Bearer");
        let a = call(&app, Method::GET, uri, &[("authorization", wrong.as_str())]).await;
        assert_eq!(a.status, StatusCode::UNAUTHORIZED, "{uri}");
        for ok in [&reader, &alice] {
            let a = call(&app, Method::GET, uri, &[("authorization", ok.as_str())]).await;
            assert_eq!(a.status, StatusCode::OK, "{uri}: {}", a.text);
        }
        // Without a read token, reads stay open.
        assert_eq!(get(&h.app, uri).await.status, StatusCode::OK, "{uri}");
    }
    for uri in ["/health", "/metrics"] {
        assert_eq!(get(&app, uri).await.status, StatusCode::OK, "{uri}");
    }
    assert_ne!(get(&app, "/ready").await.status, StatusCode::UNAUTHORIZED);
    // A wrong method is still 405, whoever asks.
    assert_eq!(call(&app, Method::PUT, "/drifts", &[]).await.status, StatusCode::METHOD_NOT_ALLOWED);
}

#[tokio::test]
async fn a_store_that_keeps_no_decisions_answers_501_and_shows_none() {
    let store = filled_store().await;
    let app =
        router(ApiState::new(store, Arc::new(FakeTrigger::default())).with_token(Some(ApiToken::new(TOKEN).unwrap())));
    let bearer = format!("Bearer {TOKEN}");
    let a = send(&app, Method::POST, "/drifts/1/decisions", Some(TOKEN), r#"{"action": "acknowledge"}"#).await;
    assert_eq!(a.status, StatusCode::NOT_IMPLEMENTED);
    assert_eq!(a.error(), "this store keeps no decisions; use sqlite or postgres");
    for uri in ["/audit", "/notifications"] {
        let a = call(&app, Method::GET, uri, &[("authorization", bearer.as_str())]).await;
        assert_eq!(a.status, StatusCode::NOT_IMPLEMENTED, "{uri}");
        assert_eq!(a.error(), drift_api::NO_ACT_STORE);
    }
    let a = send(&app, Method::POST, "/notifications/e1/requeue?notifier=hook", Some(TOKEN), "").await;
    assert_eq!(a.status, StatusCode::NOT_IMPLEMENTED);
    let v = get(&app, "/drifts/1").await.json();
    assert_eq!((&v["decisions"], &v["notifications"], &v["learned"]), (&json!([]), &json!([]), &Value::Null));
    assert_eq!(v["id"], 1);
    // The unnamed token acts as "api".
    assert_eq!(format!("{:?}", ApiToken::new(TOKEN).unwrap()), r#"ApiToken { name: "api", value: <redacted> }"#);
}

#[tokio::test]
async fn metrics_count_waivers_and_pending_and_parked_deliveries() {
    let h = sqlite_harness().await;
    let value = |text: &str, series: &str| -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(series).and_then(|rest| rest.strip_prefix(' ')))
            .unwrap_or_else(|| panic!("no {series} in\n{text}"))
            .parse()
            .unwrap()
    };
    let before = get(&h.app, "/metrics").await.text;
    assert_eq!(value(&before, "drift_waived_drifts"), 0.0);
    assert_eq!(value(&before, r#"drift_deliveries{notifier="hook",status="parked"}"#), 1.0);
    let pending = get(&h.app, "/notifications?status=pending&limit=1000").await.json();
    assert_eq!(
        value(&before, r#"drift_deliveries{notifier="hook",status="pending"}"#),
        pending["items"].as_array().unwrap().len() as f64
    );
    let medium = r#"drift_open_drifts_by_severity{severity="MEDIUM"}"#;
    let id = h.drift_id("web", REPLICAS).await;
    decide(&h, id, Some(ALICE), json!({"action": "accept", "comment": "intended"})).await;
    h.state.metrics().record_notification(HOOK, "sent", 3);
    h.state.metrics().record_notification(HOOK, "retry", 1);
    h.state.metrics().observe_notification_latency(HOOK, 0.3);
    let after = get(&h.app, "/metrics").await.text;
    assert_eq!(value(&after, "drift_waived_drifts"), 1.0);
    assert_eq!(value(&after, medium), value(&before, medium) - 1.0, "a waived drift is not open");
    assert_eq!(value(&after, r#"drift_notifications_total{notifier="hook",outcome="sent"}"#), 3.0);
    assert_eq!(value(&after, r#"drift_notifications_total{notifier="hook",outcome="retry"}"#), 1.0);
    assert_eq!(value(&after, r#"drift_notification_latency_seconds_count{notifier="hook"}"#), 1.0);
    assert_eq!(value(&after, r#"drift_notification_latency_seconds_bucket{le="0.5",notifier="hook"}"#), 1.0);
}

#[tokio::test]
async fn named_tokens_never_appear_in_logs_or_answers() {
    let (logs, _guard) = Captured::start();
    let h = sqlite_harness().await;
    let state = h.state.clone().with_read_token(Some(ApiToken::named("reader", READER).unwrap()));
    let app = router(state.clone());
    let id = h.drift_id("web", REPLICAS).await;
    let mut answers = String::new();
    for token in [ALICE, "wrong-token-value", BOB] {
        let a = send(&app, Method::POST, &decisions_uri(id), Some(token), r#"{"action":"acknowledge"}"#).await;
        answers.push_str(&a.text);
    }
    for token in [READER, "wrong-read-value"] {
        let bearer = format!("Bearer {token}");
        answers.push_str(&call(&app, Method::GET, "/audit", &[("authorization", bearer.as_str())]).await.text);
    }
    tracing::info!(state = ?state, "state as the binary might log it");
    let logs = logs.text();
    assert!(logs.contains("decision recorded") && logs.contains("actor=alice") && logs.contains("actor=bob"), "{logs}");
    assert!(logs.contains("wrong bearer token"), "{logs}");
    assert!(logs.contains(r#"tokens: ["alice", "bob"]"#), "{logs}");
    for secret in [ALICE, BOB, READER, "wrong-token-value", "wrong-read-value"] {
        assert!(!logs.contains(secret), "token in logs: {logs}");
        assert!(!answers.contains(secret), "token in answers: {answers}");
    }
}

/// A decision body over axum's 2 MiB limit answers 413 as a JSON error, like every other error.
#[tokio::test]
async fn an_oversized_decision_body_is_a_json_413() {
    let h = sqlite_harness().await;
    let id = h.drift_id("web", REPLICAS).await;
    let body = format!(r#"{{"action": "accept", "comment": "{}"}}"#, "x".repeat(3 << 20));
    let a = send(&h.app, Method::POST, &decisions_uri(id), Some(ALICE), &body).await;
    assert_eq!(a.status, StatusCode::PAYLOAD_TOO_LARGE, "{}", a.text);
    assert!(a.headers["content-type"].to_str().unwrap().starts_with("application/json"));
    assert!(a.error().contains("length limit"), "{}", a.text);
}
