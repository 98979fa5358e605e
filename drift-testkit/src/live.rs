//! Conformance of live sources, through a harness that loads the fixtures into the backend.

use async_trait::async_trait;
use drift_core::*;
use serde_json::Value;

/// Gives the suite a live source and a way to put objects into its backend.
#[async_trait]
pub trait LiveHarness: Send + Sync {
    /// The source under test.
    fn source(&self) -> &dyn LiveSource;
    /// Creates or replaces an object in the backend (a cluster: apply it; files: write them).
    async fn apply(&self, object: Value);
}

/// Runs every live-source case: loads [`crate::fixtures::live_objects`], then checks the
/// contract of [`LiveSource`].
pub async fn conformance(harness: &dyn LiveHarness) {
    for o in crate::fixtures::live_objects() {
        harness.apply(o).await;
    }
    let source = harness.source();
    let caps = source.capabilities();
    let fixtures = crate::fixtures::live_resources();

    // Everything in scope is read, and reported complete.
    let mut scope = Scope::default();
    for r in &fixtures {
        scope.insert(r.key.group_kind(), r.key.namespace.clone());
    }
    let snap = source.fetch(&scope).await.expect("[live] fetch of a readable scope");
    assert_eq!(snap.cluster, source.cluster(), "[live] snapshot names its cluster");
    for f in &fixtures {
        let got = snap.resources.iter().find(|r| r.key == f.key);
        let got = got.unwrap_or_else(|| panic!("[live] {} is read", f.key));
        assert!(
            got.object.pointer("/metadata/managedFields").and_then(Value::as_array).is_some_and(|m| !m.is_empty()),
            "[live] {} keeps managedFields",
            f.key
        );
        assert!(got.object.pointer("/metadata/resourceVersion").is_some(), "[live] {} is not normalised", f.key);
        assert_eq!(got.object.pointer("/metadata/labels/app"), Some(&Value::from("web")), "[live] {} content", f.key);
    }
    for (gk, ns) in scope.pairs() {
        assert!(snap.coverage.is_complete(&gk.group, &gk.kind, ns), "[live] {gk} in {ns:?} is reported complete");
    }

    // Only the scope is read: one namespace asked, nothing from the other.
    let mut narrow = Scope::default();
    narrow.insert(GroupKind::new("", "ConfigMap"), Some("billing".into()));
    let snap = source.fetch(&narrow).await.expect("[live] narrow fetch");
    assert!(
        snap.resources.iter().all(|r| r.key.namespace.as_deref() == Some("billing") && r.key.kind == "ConfigMap"),
        "[live] nothing outside the scope is returned"
    );
    assert_eq!(snap.resources.len(), 1, "[live] the one billing ConfigMap");

    // An empty namespace is complete and empty, not an error.
    let mut empty = Scope::default();
    empty.insert(GroupKind::new("", "ConfigMap"), Some("nothing-here".into()));
    let snap = source.fetch(&empty).await.expect("[live] empty namespace");
    assert!(snap.resources.is_empty(), "[live] an empty namespace has no objects");
    assert!(snap.coverage.is_complete("", "ConfigMap", Some("nothing-here")), "[live] an empty namespace is complete");

    if caps.discovery {
        let mut unknown = Scope::default();
        unknown.insert(GroupKind::new("example.invalid", "Nonexistent"), Some("shop".into()));
        let snap = source.fetch(&unknown).await.expect("[live] an unknown kind is coverage, not an error");
        assert!(
            matches!(
                snap.coverage.status("example.invalid", "Nonexistent", Some("shop")),
                Some(CoverageStatus::NotServed { .. })
            ),
            "[live] a kind the cluster does not serve is NotServed"
        );
    }
}
