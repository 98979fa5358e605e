//! Reads under faults injected by the test API server: least privilege and pagination, 403 per
//! namespace, a kind not served, a 429 storm, a 5xx storm that outlasts the retries. Nothing in
//! covered scope is lost, and nothing outside it may be resolved.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use drift_core::scan::{ScanOptions, compare_snapshots};
use drift_core::{
    CoverageStatus, DesiredSnapshot, Engine, EngineConfig, GroupKind, LiveSource, Resource, ResourceKey, Scope,
};
use drift_kube::K8sConfig;
use drift_test_apiserver::{FaultAction, FaultMatch, FaultRule, Faults};
use serde_json::json;

fn rule(verb: &str, resource: &str, namespace: Option<&str>, action: FaultAction, times: Option<u32>) -> FaultRule {
    FaultRule {
        matcher: FaultMatch {
            verb: Some(verb.into()),
            resource: Some(resource.into()),
            namespace: namespace.map(Into::into),
            ..Default::default()
        },
        action,
        times,
    }
}

fn error(code: u16, retry_after_seconds: Option<u32>) -> FaultAction {
    FaultAction::Error { code, retry_after_seconds, message: None }
}

fn cm(ns: &str, name: &str) -> Resource {
    Resource::from_object(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns, "labels": {"app": "web"}}, "data": {"k": name}}))
    .unwrap()
}

fn configmaps_in(namespaces: &[&str]) -> Scope {
    let mut scope = Scope::default();
    for ns in namespaces {
        scope.insert(GroupKind::new("", "ConfigMap"), Some((*ns).into()));
    }
    scope
}

#[tokio::test]
async fn only_the_scope_is_listed_page_by_page() {
    let cluster = common::Cluster::start();
    for i in 0..1_200 {
        cluster.configmap("bulk", &format!("cm-{i:04}"));
    }
    cluster.configmap("other", "not-asked");
    let source = cluster.source_with(K8sConfig { page_size: 500, ..K8sConfig::default() }).await;
    let snap = source.fetch(&configmaps_in(&["bulk"])).await.unwrap();
    assert_eq!(snap.resources.len(), 1_200, "every page is read");
    assert!(snap.resources.iter().all(|r| r.key.namespace.as_deref() == Some("bulk")));
    assert!(snap.coverage.is_complete("", "ConfigMap", Some("bulk")));
    let lists: Vec<_> = cluster
        .server
        .requests()
        .into_iter()
        .filter(|r| r.method == "GET" && r.path.ends_with("/configmaps"))
        .collect();
    assert_eq!(lists.len(), 3, "1,200 objects in pages of 500");
    assert!(lists.iter().all(|r| r.path == "/api/v1/namespaces/bulk/configmaps"), "least privilege: {lists:?}");
    assert!(lists.iter().all(|r| r.query.get("limit").map(String::as_str) == Some("500")));
    assert_eq!(lists.iter().filter(|r| r.query.contains_key("continue")).count(), 2);
}

#[tokio::test]
async fn forbidden_namespace_and_unserved_kind_are_coverage_and_nothing_there_resolves() {
    let cluster = common::Cluster::start();
    cluster.configmap("team-a", "settings");
    cluster.configmap("team-b", "settings");
    cluster
        .server
        .set_faults(Faults { faults: vec![rule("list", "configmaps", Some("team-a"), error(403, None), None)] });
    let source = cluster.source().await;
    let mut scope = configmaps_in(&["team-a", "team-b"]);
    scope.insert(GroupKind::new("example.com", "Widget"), Some("team-b".into()));
    let snap = source.fetch(&scope).await.unwrap();
    assert!(matches!(snap.coverage.status("", "ConfigMap", Some("team-a")), Some(CoverageStatus::Forbidden { .. })));
    assert!(matches!(
        snap.coverage.status("example.com", "Widget", Some("team-b")),
        Some(CoverageStatus::NotServed { .. })
    ));
    assert!(snap.coverage.is_complete("", "ConfigMap", Some("team-b")));
    assert_eq!(snap.resources.len(), 1, "team-b is read");

    // The scan: team-a's ConfigMap and the Widget are not missing, and may not be resolved.
    let widget = Resource::from_object(json!({"apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "w", "namespace": "team-b"}}))
    .unwrap();
    let desired = DesiredSnapshot {
        repository: "git".into(),
        revision: None,
        resources: vec![cm("team-a", "settings"), cm("team-b", "settings"), widget],
        warnings: vec![],
    };
    let engine = Engine::new(&EngineConfig::default()).unwrap();
    let report = compare_snapshots(desired, snap, &engine, &ScanOptions::new("s1"));
    assert!(report.drifts.is_empty(), "nothing unreadable is reported missing: {:?}", report.drifts);
    assert!(!report.may_resolve(&ResourceKey::new("", "ConfigMap", Some("team-a"), "settings")));
    assert!(!report.may_resolve(&ResourceKey::new("example.com", "Widget", Some("team-b"), "w")));
    assert!(report.may_resolve(&ResourceKey::new("", "ConfigMap", Some("team-b"), "settings")));
    assert_eq!(report.warnings.iter().filter(|w| w.fatal).count(), 2, "{:?}", report.warnings);
}

#[tokio::test]
async fn a_429_storm_is_retried_honouring_retry_after() {
    let cluster = common::Cluster::start();
    cluster.configmap("busy", "settings");
    cluster
        .server
        .set_faults(Faults { faults: vec![rule("list", "configmaps", Some("busy"), error(429, Some(1)), Some(2))] });
    let source = cluster.source().await;
    let started = Instant::now();
    let snap = source.fetch(&configmaps_in(&["busy"])).await.unwrap();
    assert!(snap.coverage.is_complete("", "ConfigMap", Some("busy")));
    assert_eq!(snap.resources.len(), 1);
    let lists = cluster.server.requests().into_iter().filter(|r| r.path.ends_with("/busy/configmaps")).count();
    assert_eq!(lists, 3, "two 429s, then the list");
    // Retry-After (1 s, twice) was waited, not the 20 ms backoff of the test configuration.
    assert!(started.elapsed() >= Duration::from_secs(2), "Retry-After honoured");
}

#[tokio::test]
async fn a_storm_outlasting_the_retries_fails_its_pair_only() {
    let cluster = common::Cluster::start();
    cluster.configmap("down", "settings");
    cluster.configmap("up", "settings");
    cluster
        .server
        .set_faults(Faults { faults: vec![rule("list", "configmaps", Some("down"), error(500, None), None)] });
    let source = cluster.source_with(K8sConfig { retries: 2, ..K8sConfig::default() }).await;
    let snap = source.fetch(&configmaps_in(&["down", "up"])).await.unwrap();
    assert!(matches!(snap.coverage.status("", "ConfigMap", Some("down")), Some(CoverageStatus::Failed { .. })));
    assert!(snap.coverage.is_complete("", "ConfigMap", Some("up")));
    let attempts = cluster.server.requests().into_iter().filter(|r| r.path.ends_with("/down/configmaps")).count();
    assert_eq!(attempts, 3, "one attempt and two retries");
    let desired = DesiredSnapshot {
        repository: "git".into(),
        revision: None,
        resources: vec![cm("down", "settings"), cm("up", "settings")],
        warnings: vec![],
    };
    let engine = Engine::new(&EngineConfig::default()).unwrap();
    let report = compare_snapshots(desired, snap, &engine, &ScanOptions::new("s1"));
    assert!(report.drifts.is_empty());
    assert!(!report.may_resolve(&ResourceKey::new("", "ConfigMap", Some("down"), "settings")));
    assert!(report.may_resolve(&ResourceKey::new("", "ConfigMap", Some("up"), "settings")));
}

#[tokio::test]
async fn a_cluster_down_is_failed_coverage_not_an_empty_cluster() {
    let cluster = common::Cluster::start();
    let source = cluster.source_with(K8sConfig { retries: 1, ..K8sConfig::default() }).await;
    cluster.server.shutdown();
    let snap = source.fetch(&configmaps_in(&["shop"])).await.unwrap();
    assert!(snap.resources.is_empty());
    assert!(matches!(snap.coverage.status("", "ConfigMap", Some("shop")), Some(CoverageStatus::Failed { .. })));
}
