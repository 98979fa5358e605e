//! A fetch told which objects the caller will compare (`Scope::only`, as
//! `DesiredSnapshot::scope` sets it) reads each (kind, namespace) whole, page by page, keeps
//! only those objects, and still reports the pair complete.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeSet;

use drift_core::{CoverageStatus, GroupKind, LiveSource, ResourceKey, Scope};
use drift_kube::K8sConfig;

#[tokio::test]
async fn only_the_named_objects_are_kept_and_the_pair_is_complete() {
    let cluster = common::Cluster::start();
    for i in 0..60 {
        cluster.configmap("apps", &format!("cm-{i:02}"));
    }
    cluster.configmap("other", "cm-00");
    // Pages of 7: the kept objects are spread over several pages.
    let source = cluster.source_with(K8sConfig { page_size: 7, ..K8sConfig::default() }).await;
    let cm = GroupKind::new("", "ConfigMap");
    let key = |ns: &str, name: &str| ResourceKey::new("", "ConfigMap", Some(ns), name);

    let mut scope = Scope::default();
    scope.insert(cm.clone(), Some("apps".into()));
    let wanted: BTreeSet<ResourceKey> =
        [key("apps", "cm-03"), key("apps", "cm-41"), key("apps", "absent"), key("other", "cm-00")].into();
    scope.only = Some(wanted);
    let snapshot = source.fetch(&scope).await.unwrap();
    let names: Vec<String> = snapshot.resources.iter().map(|r| r.key.to_string()).collect();
    assert_eq!(names, [key("apps", "cm-03").to_string(), key("apps", "cm-41").to_string()]);
    assert_eq!(snapshot.coverage.status("", "ConfigMap", Some("apps")), Some(&CoverageStatus::Complete));

    // Without `only`, every object of the pair.
    scope.only = None;
    assert_eq!(source.fetch(&scope).await.unwrap().resources.len(), 60);
}

#[tokio::test]
async fn fetch_parts_hands_over_each_pair_once_read_whole_and_together_what_fetch_reads() {
    let cluster = common::Cluster::start();
    for i in 0..30 {
        cluster.configmap("apps", &format!("cm-{i:02}"));
    }
    cluster.configmap("other", "cm-00");
    cluster.namespace("empty");
    let source = cluster.source_with(K8sConfig { page_size: 7, ..K8sConfig::default() }).await;
    let cm = GroupKind::new("", "ConfigMap");
    let mut scope = Scope::default();
    for ns in ["apps", "other", "empty"] {
        scope.insert(cm.clone(), Some(ns.into()));
    }
    // A kind the cluster does not serve: its pair is handed over too, not complete.
    scope.insert(GroupKind::new("example.com", "Widget"), Some("apps".into()));
    let key = |ns: &str, name: &str| ResourceKey::new("", "ConfigMap", Some(ns), name);
    scope.only = Some([key("apps", "cm-03"), key("apps", "cm-29"), key("other", "cm-00")].into());

    let whole = source.fetch(&scope).await.unwrap();
    let mut parts = Vec::new();
    source.fetch_parts(&scope, &mut |part| parts.push(part)).await.unwrap();
    assert_eq!(parts.len(), 4, "one part per pair");
    assert!(parts.iter().all(|p| p.coverage.entries.len() == 1));
    let mut resources: Vec<_> = parts.iter().flat_map(|p| p.resources.clone()).collect();
    resources.sort_by(|a, b| a.key.cmp(&b.key));
    assert_eq!(resources, whole.resources);
    let mut coverage = drift_core::Coverage::default();
    for e in parts.iter().flat_map(|p| p.coverage.entries.iter()) {
        coverage.set(&GroupKind::new(&e.group, &e.kind), e.namespace.as_deref(), e.status.clone());
    }
    assert_eq!(coverage, whole.coverage);
    assert_eq!(coverage.status("", "ConfigMap", Some("empty")), Some(&CoverageStatus::Complete));
    assert!(!coverage.is_complete("example.com", "Widget", Some("apps")), "{coverage:?}");
}
