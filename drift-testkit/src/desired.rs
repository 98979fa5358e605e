//! Conformance of desired sources.

use drift_core::*;

/// What the test knows about the repository behind the source.
#[derive(Debug, Clone, Default)]
pub struct DesiredExpectation {
    /// Keys of the objects the source must return (other objects may be present too).
    pub must_contain: Vec<ResourceKey>,
    /// Files that are broken on purpose: each must appear in a fatal warning with a line.
    pub broken_files: Vec<String>,
}

/// Runs every desired-source case against a source prepared by the caller.
pub async fn conformance(source: &dyn DesiredSource, expect: &DesiredExpectation) {
    let caps = source.capabilities();
    let first = source.fetch().await.expect("[desired] fetch must succeed on a readable repository");
    assert_eq!(first.repository, source.name(), "[desired] the snapshot names its repository");
    if caps.revisions {
        assert!(first.revision.as_deref().is_some_and(|r| !r.is_empty()), "[desired] a revision is reported");
    }
    for r in &first.resources {
        assert!(
            r.provenance.path.as_deref().is_some_and(|p| !p.is_empty()),
            "[desired] {} carries the file it came from",
            r.key
        );
        if caps.revisions {
            assert_eq!(r.provenance.revision, first.revision, "[desired] {} carries the revision", r.key);
        }
        assert!(
            r.object.get("status").is_none() || r.object["status"].is_object(),
            "[desired] objects are kept as read"
        );
        let fresh = Resource::from_object(r.object.clone()).expect("[desired] every resource is a valid object");
        assert_eq!(fresh.key.group, r.key.group, "[desired] key matches the object");
        assert_eq!(fresh.key.kind, r.key.kind);
        assert_eq!(fresh.key.name, r.key.name);
    }
    for key in &expect.must_contain {
        assert!(
            first.resources.iter().any(|r| r.key == *key
                || (r.key.namespace.is_none() && r.key.with_namespace(key.namespace.as_deref()) == *key)),
            "[desired] {key} is read"
        );
    }
    for file in &expect.broken_files {
        let w = first.warnings.iter().find(|w| w.path.as_deref() == Some(file.as_str()) && w.fatal);
        let w = w.unwrap_or_else(|| panic!("[desired] broken file {file} is reported as a warning, not dropped"));
        assert!(w.line.is_some(), "[desired] the warning for {file} has a line");
    }
    // Reading twice without a change gives the same snapshot.
    let second = source.fetch().await.expect("[desired] second fetch");
    assert_eq!(second.revision, first.revision, "[desired] stable revision");
    let keys = |s: &DesiredSnapshot| {
        let mut k: Vec<_> = s.resources.iter().map(|r| r.key.clone()).collect();
        k.sort();
        k
    };
    assert_eq!(keys(&second), keys(&first), "[desired] stable content");
}
