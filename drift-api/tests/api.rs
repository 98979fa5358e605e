//! Every endpoint through the router, over the in-memory reference store.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use axum::http::{Method, StatusCode};
use chrono::{DateTime, Utc};
use common::*;
use drift_api::{ApiState, ApiToken, Metrics, router};
use drift_model::DriftSink;
use drift_model::sink::{DriftFilter, DriftStore, PageRequest};
use drift_testkit::fixtures::{key, report, t};
use serde_json::Value;

fn ids(page: &Value) -> Vec<i64> {
    page["items"].as_array().unwrap().iter().map(|d| d["id"].as_i64().unwrap()).collect()
}

#[tokio::test]
async fn health_answers_ok() {
    let h = harness().await;
    let a = get(&h.app, "/health").await;
    assert_eq!(a.status, StatusCode::OK);
    assert_eq!(a.json()["status"], "ok");
    // Liveness does not depend on the store.
    let down = router(ApiState::new(Arc::new(DownStore), Arc::new(FakeTrigger::default())));
    assert_eq!(get(&down, "/health").await.status, StatusCode::OK);
}

#[tokio::test]
async fn ready_after_a_recent_successful_scan() {
    let h = harness().await;
    let a = get(&h.app, "/ready").await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    let v = a.json();
    assert_eq!(v["status"], "ready");
    let scans = v["scans"].as_array().unwrap();
    // The last scan of each (cluster, repository): scan-2 of test-repo, scan-3 of payments-repo.
    let mut last: Vec<(&str, i64)> =
        scans.iter().map(|s| (s["scan_id"].as_str().unwrap(), s["age_seconds"].as_i64().unwrap())).collect();
    last.sort();
    assert_eq!(last, vec![("scan-2", 35 * 60), ("scan-3", 5 * 60)]);
}

#[tokio::test]
async fn ready_says_when_the_watch_does_not_see_part_of_the_cluster() {
    let h = harness().await;
    let metrics = Metrics::new();
    let app = router(h.state.clone().with_metrics(metrics.clone()));
    let gauge = |text: &str| text.lines().find(|l| l.starts_with("drift_watch_out_of_sync ")).map(str::to_owned);
    assert_eq!(get(&app, "/ready").await.status, StatusCode::OK);
    assert_eq!(gauge(&get(&app, "/metrics").await.text).as_deref(), Some("drift_watch_out_of_sync 0"));
    // The API server went away between two passes: the scans are fine, the watch is not.
    metrics.set_watch_out_of_sync(3);
    let a = get(&app, "/ready").await;
    assert_eq!(a.status, StatusCode::SERVICE_UNAVAILABLE, "{}", a.text);
    assert!(a.json()["error"].as_str().unwrap().contains("does not see 3 (kind, namespace) pair(s)"), "{}", a.text);
    assert_eq!(a.json()["scans"].as_array().unwrap().len(), 2, "the scans are still shown");
    assert_eq!(gauge(&get(&app, "/metrics").await.text).as_deref(), Some("drift_watch_out_of_sync 3"));
    metrics.set_watch_out_of_sync(0);
    assert_eq!(get(&app, "/ready").await.status, StatusCode::OK);
}

#[tokio::test]
async fn ready_and_metrics_say_whether_this_replica_leads() {
    let h = harness().await;
    let metrics = Metrics::new();
    let app = router(h.state.clone().with_metrics(metrics.clone()));
    let leader_gauge = |text: &str| text.lines().find(|l| l.starts_with("drift_leader ")).map(str::to_owned);
    // Without leader election a replica leads.
    assert_eq!(get(&app, "/ready").await.json()["leader"], true);
    assert_eq!(leader_gauge(&get(&app, "/metrics").await.text).as_deref(), Some("drift_leader 1"));
    // A standby is still ready (the leader's scans are in the shared store) and says so.
    metrics.set_leader(false);
    let a = get(&app, "/ready").await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    assert_eq!(a.json()["leader"], false);
    assert_eq!(leader_gauge(&get(&app, "/metrics").await.text).as_deref(), Some("drift_leader 0"));
    // And the field is there when not ready too.
    let empty = ApiState::new(Arc::new(drift_model::memory::MemoryStore::new()), Arc::new(FakeTrigger::default()))
        .with_metrics(metrics.clone());
    let a = get(&router(empty), "/ready").await;
    assert_eq!((a.status, a.json()["leader"].clone()), (StatusCode::SERVICE_UNAVAILABLE, Value::Bool(false)));
}

#[tokio::test]
async fn ready_is_503_before_any_scan() {
    let state = ApiState::new(Arc::new(drift_model::memory::MemoryStore::new()), Arc::new(FakeTrigger::default()));
    let a = get(&router(state), "/ready").await;
    assert_eq!(a.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(a.json()["status"], "not_ready");
    assert!(a.error().contains("no scan"), "{}", a.text);
}

#[tokio::test]
async fn ready_is_503_when_the_last_scan_failed() {
    let h = harness().await;
    let mut failed = report("scan-4", t(92), &[], vec![]);
    failed.outcome = drift_model::ScanOutcome::Failed;
    h.store.record(&failed).await.unwrap();
    let a = get(&h.app, "/ready").await;
    assert_eq!(a.status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(a.error().contains("test-repo") && a.error().contains("failed"), "{}", a.text);
    // A later success of the same repository makes it ready again.
    h.store.record(&report("scan-5", t(93), &[], vec![])).await.unwrap();
    assert_eq!(get(&h.app, "/ready").await.status, StatusCode::OK);
}

#[tokio::test]
async fn ready_judges_several_clusters_one_by_one() {
    #[derive(Debug)]
    struct View(std::collections::BTreeMap<String, usize>);
    impl drift_api::ClusterGaps for View {
        fn clusters(&self) -> Vec<String> {
            vec!["test-cluster".to_owned(), "edge".to_owned()]
        }
        fn out_of_sync(&self) -> std::collections::BTreeMap<String, usize> {
            self.0.clone()
        }
    }
    let view = |gaps: &[(&str, usize)]| Arc::new(View(gaps.iter().map(|(c, n)| ((*c).to_owned(), *n)).collect()));
    let h = harness().await;
    let edge = |id: &str, at, outcome| {
        let mut r = report(id, at, &[], vec![]);
        r.cluster = "edge".to_owned();
        r.outcome = outcome;
        r
    };
    h.store.record(&report("home-1", t(93), &[], vec![])).await.unwrap();
    h.store.record(&edge("edge-1", t(92), drift_model::ScanOutcome::Failed)).await.unwrap();
    // A detector that names no clusters (or one): any failed scan of the store, as before.
    let a = get(&h.app, "/ready").await;
    assert_eq!(a.status, StatusCode::SERVICE_UNAVAILABLE, "{}", a.text);
    // The detector of test-cluster and edge: test-cluster is fine, edge's last scan failed:
    // ready, edge degraded.
    let app = router(h.state.clone().with_cluster_gaps(view(&[])));
    let a = get(&app, "/ready").await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    assert_eq!(
        a.json()["degraded"],
        serde_json::json!([{"cluster": "edge", "reason": "the last scan of repository \"test-repo\" in cluster \"edge\" failed"}])
    );
    // test-cluster's watch lost sync as well: every cluster is degraded, not ready.
    let app = router(h.state.clone().with_cluster_gaps(view(&[("test-cluster", 3)])));
    let a = get(&app, "/ready").await;
    assert_eq!(a.status, StatusCode::SERVICE_UNAVAILABLE, "{}", a.text);
    assert!(a.error().contains("cluster \"edge\" failed"), "{}", a.text);
    // edge scans again: ready, test-cluster's watch named as degraded.
    h.store.record(&edge("edge-2", t(94), drift_model::ScanOutcome::Success)).await.unwrap();
    let a = get(&app, "/ready").await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    let degraded = a.json()["degraded"].clone();
    assert_eq!(degraded[0]["cluster"], "test-cluster", "{degraded}");
    assert!(degraded[0]["reason"].as_str().unwrap().contains("does not see 3 (kind, namespace) pair(s)"), "{degraded}");
    // A gap of a cluster that is not the detector's is not counted.
    let app = router(h.state.clone().with_cluster_gaps(view(&[("gone", 2)])));
    let a = get(&app, "/ready").await;
    assert_eq!((a.status, &a.json()["degraded"]), (StatusCode::OK, &Value::Null), "{}", a.text);
}

#[tokio::test]
async fn ready_ignores_the_old_failure_of_a_repository_no_longer_scanned() {
    let h = harness().await;
    let mut failed = report("scan-old", t(70), &[], vec![]);
    failed.outcome = drift_model::ScanOutcome::Failed;
    failed.repository = "removed-repo".to_owned();
    h.store.record(&failed).await.unwrap();
    // 25 minutes old at t(95): more than the 15-minute limit.
    let a = get(&h.app, "/ready").await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    // Within the limit it counts.
    let app = router(h.state.clone().with_max_scan_age(Duration::from_secs(30 * 60)));
    let a = get(&app, "/ready").await;
    assert_eq!(a.status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(a.error().contains("removed-repo"), "{}", a.text);
}

#[tokio::test]
async fn ready_is_503_when_the_newest_scan_is_too_old() {
    let h = harness().await;
    // The newest scan finished at t(90); the default limit is 15 minutes.
    h.clock.set(t(105));
    assert_eq!(get(&h.app, "/ready").await.status, StatusCode::OK);
    h.clock.set(t(106));
    let a = get(&h.app, "/ready").await;
    assert_eq!(a.status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(a.error().contains("960s ago"), "{}", a.text);
    // A larger limit.
    let app = router(h.state.clone().with_max_scan_age(Duration::from_secs(3600)));
    assert_eq!(get(&app, "/ready").await.status, StatusCode::OK);
}

#[tokio::test]
async fn store_down_is_503_without_secrets() {
    let app = router(
        ApiState::new(Arc::new(DownStore), Arc::new(FakeTrigger::default()))
            .with_token(Some(ApiToken::new(TOKEN).unwrap())),
    );
    for uri in ["/ready", "/drifts", "/drifts?severity=HIGH", "/drifts/1", "/stats", "/findings"] {
        let a = get(&app, uri).await;
        assert_eq!(a.status, StatusCode::SERVICE_UNAVAILABLE, "{uri}");
        assert!(!a.error().is_empty(), "{uri}");
        assert!(!a.text.contains(DOWN_SECRET) && !a.text.contains("postgres://"), "{uri}: {}", a.text);
    }
    // Metrics still answer, saying the store is down.
    let a = get(&app, "/metrics").await;
    assert_eq!(a.status, StatusCode::OK);
    assert!(a.text.lines().any(|l| l == "drift_store_up 0"), "{}", a.text);
    assert!(!a.text.contains("drift_open_drifts_by_severity{"), "no stale open-drift series: {}", a.text);
}

/// Paused tokio time: the timeout fires as soon as every task waits, with no real waiting.
#[tokio::test(start_paused = true)]
async fn a_store_that_hangs_is_503_after_the_timeout() {
    let app = router(
        ApiState::new(Arc::new(HangingStore), Arc::new(FakeTrigger::default()))
            .with_store_timeout(Duration::from_secs(3)),
    );
    for uri in ["/ready", "/drifts", "/drifts/1", "/stats", "/findings"] {
        let started = tokio::time::Instant::now();
        let a = get(&app, uri).await;
        assert_eq!(a.status, StatusCode::SERVICE_UNAVAILABLE, "{uri}");
        assert_eq!(started.elapsed(), Duration::from_secs(3), "{uri}");
    }
    let a = get(&app, "/metrics").await;
    assert_eq!(a.status, StatusCode::OK);
    assert!(a.text.lines().any(|l| l == "drift_store_up 0"), "{}", a.text);
}

#[tokio::test]
async fn drifts_lists_everything_newest_first() {
    let h = harness().await;
    let a = get(&h.app, "/drifts").await;
    assert_eq!(a.status, StatusCode::OK);
    let v = a.json();
    assert_eq!(ids(&v), vec![7, 6, 5, 4, 3, 2, 1]);
    assert_eq!(v["next"], Value::Null);
    // The items are the store's rows, as the store serialises them.
    let stored = h.store.list(&DriftFilter::default(), PageRequest::default()).await.unwrap();
    assert_eq!(v["items"], serde_json::to_value(&stored.items).unwrap());
}

/// Each filter against a predicate written independently over the JSON rows.
#[tokio::test]
async fn drifts_every_filter() {
    let h = harness().await;
    let all = get(&h.app, "/drifts").await.json()["items"].as_array().unwrap().clone();
    type Pred = fn(&Value) -> bool;
    let cases: Vec<(&str, Pred, usize)> = vec![
        ("status=open", |d| d["status"] == "open", 6),
        ("status=resolved", |d| d["status"] == "resolved", 1),
        ("severity=CRITICAL", |d| d["severity"] == "CRITICAL", 2),
        ("severity=medium", |d| d["severity"] == "MEDIUM", 2),
        ("drift_type=configmap_drift", |d| d["drift_type"] == "configmap_drift", 2),
        ("drift_type=replicas_drift", |d| d["drift_type"] == "replicas_drift", 2),
        ("namespace=billing", |d| d["namespace"] == "billing", 1),
        ("namespace=shop", |d| d["namespace"] == "shop", 5),
        ("namespace=", |d| d["namespace"] == "", 0),
        ("repository=payments-repo", |d| d["repository"] == "payments-repo", 1),
        ("cluster=test-cluster", |d| d["cluster"] == "test-cluster", 6),
        ("kind=ConfigMap", |d| d["resource_kind"] == "ConfigMap", 2),
        ("kind=Service", |d| d["resource_kind"] == "Service", 1),
        // last_seen: scan-1 rows seen again at t(60) except billing (t(0)); scan-3 at t(90).
        ("since=2026-11-02T13:00:00Z", |d| d["last_seen"].as_str().unwrap() >= "2026-11-02T13:00:00Z", 6),
        ("since=2026-11-02T14:00:00%2B01:00", |d| d["last_seen"].as_str().unwrap() >= "2026-11-02T13:00:00Z", 6),
        ("since=2026-11-02T13:30:00Z", |d| d["repository"] == "payments-repo", 1),
        ("status=open&severity=CRITICAL&cluster=edge", |d| d["cluster"] == "edge", 1),
        (
            "status=open&namespace=shop&kind=Deployment",
            |d| d["status"] == "open" && d["resource_kind"] == "Deployment" && d["namespace"] == "shop",
            3,
        ),
    ];
    for (q, pred, n) in cases {
        let a = get(&h.app, &format!("/drifts?{q}")).await;
        assert_eq!(a.status, StatusCode::OK, "{q}: {}", a.text);
        let got = a.json()["items"].as_array().unwrap().clone();
        let want: Vec<Value> = all.iter().filter(|d| pred(d)).cloned().collect();
        assert_eq!(got.len(), n, "{q}");
        assert_eq!(got, want, "{q}");
    }
}

#[tokio::test]
async fn drifts_pagination_walks_every_row_once() {
    let h = harness().await;
    for limit in [1, 2, 3, 6, 7, 1000] {
        let mut seen = Vec::new();
        let mut uri = format!("/drifts?limit={limit}");
        let mut pages = 0;
        loop {
            let v = get(&h.app, &uri).await.json();
            let page = ids(&v);
            assert!(page.len() <= limit);
            seen.extend(page);
            pages += 1;
            match v["next"].as_i64() {
                Some(next) => uri = format!("/drifts?limit={limit}&after={next}"),
                None => break,
            }
        }
        assert_eq!(seen, vec![7, 6, 5, 4, 3, 2, 1], "limit {limit}");
        assert_eq!(pages, 7usize.div_ceil(limit), "limit {limit}");
    }
    // Pagination composes with filters.
    let v = get(&h.app, "/drifts?status=open&limit=4").await.json();
    assert_eq!(ids(&v), vec![7, 5, 4, 3]);
    assert_eq!(v["next"], 3);
    let v = get(&h.app, "/drifts?status=open&limit=4&after=3").await.json();
    assert_eq!(ids(&v), vec![2, 1]);
    assert_eq!(v["next"], Value::Null);
}

#[tokio::test]
async fn bad_parameters_are_400_with_a_message() {
    let h = harness().await;
    let cases = [
        ("/drifts?severity=urgent", "urgent"),
        ("/drifts?status=closed", "closed"),
        ("/drifts?drift_type=replica", "replica"),
        ("/drifts?since=yesterday", "RFC 3339"),
        ("/drifts?since=2026-11-02T12:00:00+01:00", "RFC 3339"),
        ("/drifts?limit=0", "limit"),
        ("/drifts?limit=1001", "limit"),
        ("/drifts?limit=ten", "limit"),
        ("/drifts?after=abc", "after"),
        ("/drifts?after=0", "after"),
        ("/drifts?kind=", "kind"),
        ("/drifts?sevrity=LOW", "sevrity"),
        ("/drifts?limit=1&limit=2", "more than once"),
        ("/drifts?namespace=%FF", "UTF-8"),
        ("/drifts/abc", "abc"),
        ("/drifts/0", "from 1 to 9223372036854775807"),
        ("/drifts/-3", "from 1 to"),
        ("/drifts/99999999999999999999", "from 1 to"),
        ("/drifts/1?verbose=true", "verbose"),
        ("/stats?severity=urgent", "urgent"),
        ("/stats?limit=5", "limit"),
        ("/health?x=1", "x"),
        ("/ready?x=1", "x"),
        ("/metrics?x=1", "x"),
        ("/openapi.json?x=1", "x"),
    ];
    for (uri, needle) in cases {
        let a = get(&h.app, uri).await;
        assert_eq!(a.status, StatusCode::BAD_REQUEST, "{uri}: {}", a.text);
        assert!(a.headers["content-type"].to_str().unwrap().starts_with("application/json"), "{uri}");
        assert!(a.error().contains(needle), "{uri}: {}", a.text);
    }
}

#[tokio::test]
async fn drift_by_id_and_404() {
    let h = harness().await;
    let list = get(&h.app, "/drifts").await.json();
    for item in list["items"].as_array().unwrap() {
        let id = item["id"].as_i64().unwrap();
        let a = get(&h.app, &format!("/drifts/{id}")).await;
        assert_eq!(a.status, StatusCode::OK);
        let mut v = a.json();
        // The drift's own fields as listed, and what a store without decisions adds.
        let added = v.as_object_mut().unwrap();
        assert_eq!(added.remove("decisions"), Some(Value::Array(vec![])));
        assert_eq!(added.remove("notifications"), Some(Value::Array(vec![])));
        assert_eq!(added.remove("learned"), Some(Value::Null));
        assert_eq!(added.remove("prediction"), Some(Value::Null));
        assert_eq!(&v, item);
    }
    let a = get(&h.app, "/drifts/42").await;
    assert_eq!(a.status, StatusCode::NOT_FOUND);
    assert_eq!(a.error(), "no drift with id 42");
}

#[tokio::test]
async fn unknown_paths_and_methods_answer_json() {
    let h = harness().await;
    let a = get(&h.app, "/nope").await;
    assert_eq!(a.status, StatusCode::NOT_FOUND);
    assert!(a.error().contains("openapi"));
    for (method, uri) in [(Method::GET, "/scan"), (Method::DELETE, "/drifts"), (Method::POST, "/drifts/1")] {
        let a = call(&h.app, method.clone(), uri, &[]).await;
        assert_eq!(a.status, StatusCode::METHOD_NOT_ALLOWED, "{method} {uri}");
        assert!(a.error().contains("method not allowed"), "{method} {uri}");
    }
}

#[tokio::test]
async fn stats_counts_and_filters() {
    let h = harness().await;
    let a = get(&h.app, "/stats").await;
    assert_eq!(a.status, StatusCode::OK);
    let v = a.json();
    assert_eq!(v["by_status"]["open"], 6);
    assert_eq!(v["by_status"]["resolved"], 1);
    assert_eq!(v["by_severity"]["CRITICAL"], 2);
    assert_eq!(v["by_severity"]["LOW"], 1);
    assert_eq!(v["by_type"]["configmap_drift"], 1);
    assert_eq!(v["by_namespace"]["shop"], 5);
    assert_eq!(v["by_repository"]["payments-repo"], 1);
    let trend = v["trend"].as_array().unwrap();
    assert_eq!(trend.len(), 7);
    // The trend ends on the API clock's day.
    assert_eq!(trend[6]["day"], "2026-11-02");
    assert_eq!(trend[6]["new"], 7);
    assert_eq!(trend[6]["resolved"], 1);
    assert_eq!(v["mean_time_to_resolve_seconds"], 3600.0);
    // Same as the store says for the same instant.
    let direct = h.store.stats(&DriftFilter::default(), t(95)).await.unwrap();
    assert_eq!(v, serde_json::to_value(direct).unwrap());

    let v = get(&h.app, "/stats?repository=payments-repo").await.json();
    assert_eq!(v["by_status"]["open"], 1);
    assert_eq!(v["by_severity"]["CRITICAL"], 1);
    assert!(v["by_status"].get("resolved").is_none());
    let v = get(&h.app, "/stats?status=resolved&namespace=billing").await.json();
    assert_eq!(v["by_status"]["resolved"], 1);
    assert_eq!(v["mean_time_to_resolve_seconds"], 3600.0);
}

#[tokio::test]
async fn scan_without_a_configured_token_is_403_and_says_how_to_set_one() {
    let trigger = Arc::new(FakeTrigger::default());
    let app = router(ApiState::new(Arc::new(drift_model::memory::MemoryStore::new()), trigger.clone()));
    for headers in [vec![], vec![("authorization", "Bearer anything")]] {
        let a = call(&app, Method::POST, "/scan", &headers).await;
        assert_eq!(a.status, StatusCode::FORBIDDEN);
        assert!(a.error().contains("DRIFT_API_TOKEN") && a.error().contains("token_env"), "{}", a.text);
    }
    assert_eq!(trigger.calls.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn scan_needs_the_right_bearer_token() {
    let h = harness().await;
    let bearer = format!("Bearer {TOKEN}");
    let wrong_last = format!("Bearer {}X", &TOKEN[..TOKEN.len() - 1]);
    let longer = format!("Bearer {TOKEN}0");
    let basic = format!("Basic {TOKEN}");
    let lower = format!("bearer {TOKEN}");
    for headers in [
        vec![],
        vec![("authorization", wrong_last.as_str())],
        vec![("authorization", longer.as_str())],
        vec![("authorization", basic.as_str())],
        vec![("authorization", "Bearer")],
        vec![("x-api-token", bearer.as_str())],
    ] {
        let a = call(&h.app, Method::POST, "/scan", &headers).await;
        assert_eq!(a.status, StatusCode::UNAUTHORIZED, "{headers:?}");
        assert_eq!(a.headers["www-authenticate"], "Bearer");
        assert!(!a.error().is_empty());
    }
    assert_eq!(h.trigger.calls.load(Ordering::SeqCst), 0, "no scan without the token");

    let a = call(&h.app, Method::POST, "/scan", &[("authorization", bearer.as_str())]).await;
    assert_eq!(a.status, StatusCode::ACCEPTED, "{}", a.text);
    assert_eq!(a.json()["status"], "started");
    assert_eq!(a.json()["scan_id"], "api-1");

    // One at a time: while api-1 runs, another request is 409 and names it.
    let a = call(&h.app, Method::POST, "/scan", &[("authorization", lower.as_str())]).await;
    assert_eq!(a.status, StatusCode::CONFLICT);
    assert_eq!(a.json()["scan_id"], "api-1");
    assert!(a.error().contains("already running"));
    let a = call(&h.app, Method::POST, "/scan?wait=true", &[("authorization", bearer.as_str())]).await;
    assert_eq!(a.status, StatusCode::CONFLICT);

    // Once it finished, wait=true answers with the reports.
    h.trigger.finish();
    let a = call(&h.app, Method::POST, "/scan?wait=true", &[("authorization", bearer.as_str())]).await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    let v = a.json();
    assert_eq!(v["status"], "finished");
    assert_eq!(v["scan_id"], "api-4");
    assert_eq!(v["reports"][0]["scan_id"], "api-4");
    assert_eq!(v["reports"][0]["outcome"], "success");

    let a = call(&h.app, Method::POST, "/scan?wait=later", &[("authorization", bearer.as_str())]).await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST);
    let a = call(&h.app, Method::POST, "/scan?force=true", &[("authorization", bearer.as_str())]).await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST);
    // Without the token, parameters are not even looked at.
    let a = call(&h.app, Method::POST, "/scan?force=true", &[]).await;
    assert_eq!(a.status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn scan_that_cannot_start_is_503() {
    let h = harness().await;
    *h.trigger.fail_with.lock().unwrap() = Some(drift_model::Error::unavailable("shutting down"));
    let bearer = format!("Bearer {TOKEN}");
    let a = call(&h.app, Method::POST, "/scan", &[("authorization", bearer.as_str())]).await;
    assert_eq!(a.status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(a.error().contains("could not be started"));
}

#[tokio::test]
async fn tokens_never_appear_in_logs_or_answers() {
    let (logs, _guard) = Captured::start();

    let h = harness().await;
    let wrong = "Wrong-token-7c1d9e0";
    let mut answers = String::new();
    for token in [wrong, TOKEN, TOKEN] {
        let header = format!("Bearer {token}");
        let a = call(&h.app, Method::POST, "/scan", &[("authorization", header.as_str())]).await;
        answers.push_str(&a.text);
    }
    tracing::info!(state = ?h.state, "state as the binary might log it");
    let logs = logs.text();
    // The requests were logged (so the check below looks at real log lines).
    assert!(logs.contains("wrong bearer token"), "{logs}");
    assert!(logs.contains("method=POST path=\"/scan\" status=401"), "{logs}");
    assert!(logs.contains("method=POST path=\"/scan\" status=202"), "{logs}");
    assert!(logs.contains("scan started through the API"), "{logs}");
    assert!(logs.contains("tokens: [\"api\"]"), "{logs}");
    // Nor the store: a store's Debug may hold its connection string.
    assert!(!logs.contains("MemoryStore"), "{logs}");
    for secret in [TOKEN, wrong] {
        assert!(!logs.contains(secret), "token in logs: {logs}");
        assert!(!answers.contains(secret), "token in answers: {answers}");
    }
}

/// Every sample line of the exposition: (name, labels, value).
fn samples(text: &str) -> Vec<(String, String, f64)> {
    let mut out = Vec::new();
    for line in text.lines() {
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        let (series, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("no value: {line}"));
        let value: f64 = value.parse().unwrap_or_else(|_| panic!("bad value: {line}"));
        let (name, labels) = match series.split_once('{') {
            Some((n, rest)) => (n, rest.strip_suffix('}').unwrap_or_else(|| panic!("unclosed labels: {line}"))),
            None => (series, ""),
        };
        assert!(name.chars().all(|c| c.is_ascii_lowercase() || c == '_'), "bad name: {line}");
        for label in labels.split(',').filter(|l| !l.is_empty()) {
            let (k, v) = label.split_once('=').unwrap_or_else(|| panic!("bad label: {line}"));
            assert!(k.chars().all(|c| c.is_ascii_lowercase() || c == '_'), "bad label name: {line}");
            assert!(v.starts_with('"') && v.ends_with('"') && v.len() >= 2, "bad label value: {line}");
        }
        out.push((name.to_owned(), labels.to_owned(), value));
    }
    out
}

#[tokio::test]
async fn metrics_text_parses_and_follows_the_store() {
    let metrics = Metrics::new();
    let store = filled_store().await;
    let app = router(
        ApiState::new(store.clone(), Arc::new(FakeTrigger::default()))
            .with_metrics(metrics.clone())
            .with_clock(Arc::new(drift_api::ManualClock::new(t(95)))),
    );
    for r in reports() {
        metrics.record_scan(&r, Duration::from_millis(800));
    }
    metrics.record_source_error(drift_model::ErrorKind::PermissionDenied);
    metrics.observe_watch_lag(Duration::from_millis(420));

    let a = get(&app, "/metrics").await;
    assert_eq!(a.status, StatusCode::OK);
    assert!(a.headers["content-type"].to_str().unwrap().starts_with("application/openmetrics-text"));
    assert!(a.text.ends_with("# EOF\n"));
    let s = samples(&a.text);
    let value = |name: &str, labels: &str| {
        s.iter().find(|(n, l, _)| n == name && l == labels).map(|x| x.2).unwrap_or_else(|| panic!("{name}{{{labels}}}"))
    };
    assert_eq!(value("drift_open_drifts_by_severity", r#"severity="CRITICAL""#), 2.0);
    assert_eq!(value("drift_open_drifts_by_severity", r#"severity="HIGH""#), 1.0);
    assert_eq!(value("drift_open_drifts_by_type", r#"drift_type="replicas_drift""#), 2.0);
    assert_eq!(value("drift_open_drifts_by_namespace", r#"namespace="shop""#), 5.0);
    assert_eq!(value("drift_open_drifts_by_repository", r#"repository="payments-repo""#), 1.0);
    assert_eq!(value("drift_store_up", ""), 1.0);
    assert_eq!(value("drift_scans_total", r#"repository="test-repo",outcome="success""#), 2.0);
    assert_eq!(value("drift_scan_duration_seconds_count", ""), 3.0);
    assert_eq!(value("drift_scan_duration_seconds_bucket", r#"le="1.0""#), 3.0);
    assert_eq!(value("drift_scan_duration_seconds_bucket", r#"le="0.5""#), 0.0);
    let t90: DateTime<Utc> = t(90);
    assert_eq!(
        value("drift_last_successful_scan_timestamp_seconds", r#"repository="payments-repo""#),
        t90.timestamp() as f64
    );
    assert_eq!(value("drift_source_errors_total", r#"kind="permission_denied""#), 1.0);
    assert_eq!(value("drift_watch_lag_seconds_sum", ""), 0.42);
    assert_eq!(value("drift_watch_lag_seconds_bucket", r#"le="0.25""#), 0.0);
    assert_eq!(value("drift_watch_lag_seconds_bucket", r#"le="0.5""#), 1.0);
    // Every series belongs to a documented family.
    for (name, _, _) in &s {
        let family = ["_bucket", "_sum", "_count", "_created"]
            .iter()
            .find_map(|suffix| name.strip_suffix(suffix).filter(|base| drift_api::metrics::METRIC_NAMES.contains(base)))
            .unwrap_or(name);
        assert!(drift_api::metrics::METRIC_NAMES.contains(&family), "undocumented series {name}");
    }

    // Resolving a drift moves the gauges at the next scrape.
    store.record(&report("scan-9", t(94), &[key("Service", "shop", "web")], vec![])).await.unwrap();
    let s = samples(&get(&app, "/metrics").await.text);
    let critical = s.iter().find(|(n, l, _)| n == "drift_open_drifts_by_severity" && l == r#"severity="CRITICAL""#);
    assert_eq!(critical.unwrap().2, 1.0);
}

async fn raw_http(addr: std::net::SocketAddr, request: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut out = String::new();
    stream.read_to_string(&mut out).await.unwrap();
    out
}

/// The router served by `drift_api::server::serve` on a real loopback socket, as `drift serve` does.
#[tokio::test]
async fn served_on_a_real_listener() {
    let h = harness().await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(drift_api::server::serve(
        listener,
        h.app,
        drift_api::server::ServerLimits::default(),
        std::future::pending(),
    ));

    let answer =
        raw_http(addr, "GET /drifts?severity=CRITICAL&limit=1 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").await;
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
    assert!(answer.contains("content-type: application/json"), "{answer}");
    let body = answer.split_once("\r\n\r\n").unwrap().1;
    let v: Value = serde_json::from_str(body).unwrap();
    assert_eq!(ids(&v), vec![7]);
    assert_eq!(v["next"], 7);
    let answer = raw_http(
        addr,
        "GET /drifts?severity=CRITICAL&limit=1&after=7 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    )
    .await;
    let v: Value = serde_json::from_str(answer.split_once("\r\n\r\n").unwrap().1).unwrap();
    assert_eq!(ids(&v), vec![4]);

    let request = format!(
        "POST /scan HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {TOKEN}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    );
    let answer = raw_http(addr, &request).await;
    assert!(answer.starts_with("HTTP/1.1 202 Accepted\r\n"), "{answer}");
    let answer =
        raw_http(addr, "POST /scan HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").await;
    assert!(answer.starts_with("HTTP/1.1 401 Unauthorized\r\n"), "{answer}");
    assert!(answer.contains("www-authenticate: Bearer"), "{answer}");
    server.abort();
}

/// The contract found broken by schemathesis (issue 16): `wait` is `true` or `false`, never
/// empty; ids up to 2^63-1 are taken and larger ones refused, as the document's `maximum` says.
#[tokio::test]
async fn flags_and_ids_answer_as_the_openapi_document_says() {
    let h = harness().await;
    let bearer = format!("Bearer {TOKEN}");
    for q in ["wait=", "wait", "wait=1", "wait=0", "wait=TRUE"] {
        let a = call(&h.app, Method::POST, &format!("/scan?{q}"), &[("authorization", bearer.as_str())]).await;
        assert_eq!(a.status, StatusCode::BAD_REQUEST, "{q}: {}", a.text);
        assert!(a.error().contains("wait"), "{q}: {}", a.text);
    }
    let max = i64::MAX;
    assert_eq!(get(&h.app, &format!("/drifts/{max}")).await.status, StatusCode::NOT_FOUND);
    let a = get(&h.app, &format!("/drifts?after={max}")).await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    assert_eq!(ids(&a.json()), ids(&get(&h.app, "/drifts").await.json()));
    for path in ["/drifts/9223372036854775808", "/drifts?after=9223372036854775808"] {
        let a = get(&h.app, path).await;
        assert_eq!(a.status, StatusCode::BAD_REQUEST, "{path}: {}", a.text);
        assert!(a.error().contains("9223372036854775807"), "{path}: {}", a.text);
    }
    let doc = get(&h.app, "/openapi.json").await.json();
    let id = doc["paths"]["/drifts/{id}"]["get"]["parameters"][0]["schema"].clone();
    assert_eq!(id["maximum"], max, "{id}");
}

fn head_and_body(answer: &str) -> (&str, &str) {
    answer.split_once("\r\n\r\n").unwrap()
}

/// A URI over 8 KiB answers 414 and headers over the limits 431, as JSON errors, through the
/// real server; beyond hyper's own limits (a 64 KiB request target) hyper answers before the
/// router, with the status and no body, as docs/api.md says.
#[tokio::test]
async fn oversized_requests_answer_json_414_and_431() {
    let h = harness().await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(drift_api::server::serve(
        listener,
        h.app,
        drift_api::server::ServerLimits::default(),
        std::future::pending(),
    ));
    let json_error = |answer: &str, status: &str| {
        assert!(answer.starts_with(&format!("HTTP/1.1 {status}\r\n")), "{}", &answer[..answer.len().min(300)]);
        let (head, body) = head_and_body(answer);
        assert!(head.contains("content-type: application/json"), "{head}");
        let v: Value = serde_json::from_str(body).unwrap();
        v["error"].as_str().unwrap().to_owned()
    };

    let near = format!("/drifts?kind={}", "K".repeat(8 * 1024 - 13));
    assert_eq!(near.len(), 8 * 1024);
    let answer = raw_http(addr, &format!("GET {near} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")).await;
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{}", &answer[..200]);
    let long = format!("{near}K");
    let answer = raw_http(addr, &format!("GET {long} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")).await;
    assert!(json_error(&answer, "414 URI Too Long").contains("8193 bytes"), "{answer}");
    // Also on a path no route serves and for a write endpoint without a token.
    let answer = raw_http(
        addr,
        &format!(
            "POST /scan?{} HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            "w".repeat(9000)
        ),
    )
    .await;
    json_error(&answer, "414 URI Too Long");

    let big = format!("X-Big: {}\r\n", "v".repeat(17 * 1024));
    let answer = raw_http(addr, &format!("GET /health HTTP/1.1\r\nHost: t\r\n{big}Connection: close\r\n\r\n")).await;
    assert!(json_error(&answer, "431 Request Header Fields Too Large").contains("bytes"), "{answer}");
    let many: String = (0..70).map(|i| format!("X-H{i}: v\r\n")).collect();
    let answer = raw_http(addr, &format!("GET /health HTTP/1.1\r\nHost: t\r\n{many}Connection: close\r\n\r\n")).await;
    assert!(json_error(&answer, "431 Request Header Fields Too Large").contains("header fields"), "{answer}");
    let few: String = (0..60).map(|i| format!("X-H{i}: v\r\n")).collect();
    let answer = raw_http(addr, &format!("GET /health HTTP/1.1\r\nHost: t\r\n{few}Connection: close\r\n\r\n")).await;
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");

    // hyper's own limit, before any middleware: the status without a body (documented).
    let huge = format!("/health?{}", "h".repeat(70 * 1024));
    let answer = raw_http(addr, &format!("GET {huge} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")).await;
    assert!(answer.starts_with("HTTP/1.1 414 URI Too Long\r\n"), "{}", &answer[..answer.len().min(200)]);
    server.abort();
}

/// `GET /findings` with each filter against a predicate written independently over the JSON
/// rows, and its pages, over the reference store and over SQLite.
#[tokio::test]
async fn findings_every_filter_and_pages_on_both_stores() {
    let memory = harness().await;
    let sqlite = sqlite_harness().await;
    for (app, store) in
        [(&memory.app, &*memory.store as &dyn DriftStore), (&sqlite.app, &*sqlite.store as &dyn DriftStore)]
    {
        let a = get(app, "/findings").await;
        assert_eq!(a.status, StatusCode::OK, "{}", a.text);
        let all = a.json()["items"].as_array().unwrap().clone();
        assert_eq!(all.len(), 4, "scan-1 found four, scan-2 resolved one");
        let stored = store.findings(&Default::default(), PageRequest::default()).await.unwrap();
        assert_eq!(Value::Array(all.clone()), serde_json::to_value(&stored.items).unwrap(), "the store's rows");
        assert!(all.iter().all(|f| f["finding_type"] == "policy_violation"));
        type Pred = fn(&Value) -> bool;
        let cases: Vec<(&str, Pred, usize)> = vec![
            ("status=open", |f| f["status"] == "open", 3),
            ("status=resolved", |f| f["status"] == "resolved" && f["resolved_at"].is_string(), 1),
            ("rule=image-tag", |f| f["rule"] == "image-tag", 2),
            ("rule=required-labels", |f| f["rule"] == "required-labels", 1),
            ("rule=privileged", |f| f["rule"] == "privileged", 0),
            ("severity=high", |f| f["severity"] == "HIGH", 1),
            ("severity=LOW", |f| f["severity"] == "LOW", 1),
            ("side=live", |f| f["side"] == "live", 2),
            ("side=desired", |f| f["side"] == "desired", 2),
            ("namespace=billing", |f| f["namespace"] == "billing", 1),
            ("namespace=", |f| f["namespace"] == "", 0),
            ("kind=Deployment", |f| f["resource_kind"] == "Deployment", 3),
            ("repository=test-repo", |f| f["repository"] == "test-repo", 4),
            ("cluster=edge", |f| f["cluster"] == "edge", 0),
            ("status=open&side=live&rule=image-tag", |f| f["side"] == "live" && f["rule"] == "image-tag", 1),
        ];
        for (q, pred, n) in cases {
            let a = get(app, &format!("/findings?{q}")).await;
            assert_eq!(a.status, StatusCode::OK, "{q}: {}", a.text);
            let got = a.json()["items"].as_array().unwrap().clone();
            let want: Vec<Value> = all.iter().filter(|f| pred(f)).cloned().collect();
            assert_eq!(got.len(), n, "{q}");
            assert_eq!(got, want, "{q}");
        }
        let every: Vec<i64> = all.iter().map(|f| f["id"].as_i64().unwrap()).collect();
        assert!(every.windows(2).all(|w| w[0] > w[1]), "newest first");
        for limit in [1, 3, 4] {
            assert_eq!(walk(app, &format!("/findings?limit={limit}"), "id").await, every, "limit {limit}");
        }
        for q in [
            "rule=latest",
            "rule=image_tag",
            "side=cluster",
            "status=waived",
            "severity=urgent",
            "kind=",
            "sevrity=LOW",
            "limit=0",
            "after=0",
            "drift_type=replicas_drift",
        ] {
            let a = get(app, &format!("/findings?{q}")).await;
            assert_eq!(a.status, StatusCode::BAD_REQUEST, "{q}: {}", a.text);
            assert!(!a.error().is_empty());
        }
        // Findings are not drifts: the drift listing and statistics do not count them.
        assert_eq!(get(app, "/drifts").await.json()["items"].as_array().unwrap().len(), 7);
        let metrics = get(app, "/metrics").await.text;
        for line in [
            r#"drift_policy_findings{rule="image-tag",severity="MEDIUM"} 2"#,
            r#"drift_policy_findings{rule="run-as-root",severity="HIGH"} 1"#,
        ] {
            assert!(metrics.lines().any(|l| l == line), "{line} in {metrics}");
        }
        assert!(!metrics.contains(r#"rule="required-labels""#), "a resolved finding is not open: {metrics}");
    }
}

/// A store that keeps no findings (the trait's default) answers 501, and exports no findings
/// series.
#[tokio::test]
async fn findings_of_a_store_that_keeps_none_are_501() {
    #[derive(Debug)]
    struct DriftsOnly(Arc<drift_model::memory::MemoryStore>);
    #[async_trait::async_trait]
    impl DriftStore for DriftsOnly {
        async fn list(&self, f: &DriftFilter, p: PageRequest) -> drift_model::Result<drift_model::sink::DriftPage> {
            self.0.list(f, p).await
        }
        async fn get(&self, id: i64) -> drift_model::Result<drift_model::sink::StoredDrift> {
            self.0.get(id).await
        }
        async fn stats(
            &self,
            f: &DriftFilter,
            now: DateTime<Utc>,
        ) -> drift_model::Result<drift_model::sink::DriftStats> {
            self.0.stats(f, now).await
        }
        async fn recent_scans(&self, limit: u32) -> drift_model::Result<Vec<drift_model::sink::ScanRecord>> {
            self.0.recent_scans(limit).await
        }
        async fn ping(&self) -> drift_model::Result<()> {
            Ok(())
        }
    }
    let app = router(ApiState::new(Arc::new(DriftsOnly(filled_store().await)), Arc::new(FakeTrigger::default())));
    let a = get(&app, "/findings").await;
    assert_eq!(a.status, StatusCode::NOT_IMPLEMENTED, "{}", a.text);
    assert_eq!(a.error(), "this store keeps no policy findings");
    let metrics = get(&app, "/metrics").await.text;
    assert!(metrics.lines().any(|l| l == "drift_store_up 1"));
    assert!(!metrics.contains("drift_policy_findings{"), "{metrics}");
}
