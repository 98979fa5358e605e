//! A fetch told which objects the caller will compare (`Scope::only`, as
//! `DesiredSnapshot::scope` sets it) reads each (kind, namespace) whole, page by page, keeps
//! only those objects, and still reports the pair complete.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeSet;

use drift_core::{CoverageStatus, GroupKind, LiveSource, ResourceKey, Scope};
use drift_source_k8s::K8sConfig;

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
