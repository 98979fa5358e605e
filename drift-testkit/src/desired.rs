//! Conformance of desired sources.
//!
//! Each case is a public async function that takes a fresh harness; [`crate::desired_suite!`]
//! turns every case into a test of its own. The contract checked is the one written on
//! [`DesiredSource`] (see also `docs/sources.md`).

use std::future::Future;

use drift_model::*;

/// What the test knows about the repository behind the source.
#[derive(Debug, Clone, Default)]
pub struct DesiredExpectation {
    /// Keys of the objects the source must return (other objects may be present too).
    pub must_contain: Vec<ResourceKey>,
    /// Files that are broken on purpose: each must appear in a fatal warning with a line.
    pub broken_files: Vec<String>,
}

/// Gives the suite a desired source over content the test prepared, and what that content
/// holds.
pub trait DesiredHarness: Send + Sync {
    /// The source under test.
    fn source(&self) -> &dyn DesiredSource;
    /// What the repository behind it holds.
    fn expectation(&self) -> DesiredExpectation;
}

use crate::live::skip;

async fn fetch(harness: &dyn DesiredHarness, case: &str) -> DesiredSnapshot {
    harness
        .source()
        .fetch()
        .await
        .unwrap_or_else(|e| panic!("[{case}] fetch must succeed on a readable repository: {e}"))
}

/// The snapshot names its repository.
pub async fn fetch_names_the_repository(harness: &dyn DesiredHarness) {
    const CASE: &str = "fetch_names_the_repository";
    let snap = fetch(harness, CASE).await;
    assert_eq!(snap.repository, harness.source().name(), "[{CASE}] the snapshot names its repository");
}

/// A source with [`DesiredCapabilities::revisions`](drift_model::source::DesiredCapabilities::revisions) reports a revision, on the snapshot and on
/// every resource.
pub async fn reports_the_revision(harness: &dyn DesiredHarness) {
    const CASE: &str = "reports_the_revision";
    if !harness.source().capabilities().revisions {
        return skip(CASE, "the source has no revisions (DesiredCapabilities::revisions is false)");
    }
    let snap = fetch(harness, CASE).await;
    assert!(snap.revision.as_deref().is_some_and(|r| !r.is_empty()), "[{CASE}] a revision is reported");
    for r in &snap.resources {
        assert_eq!(r.provenance.revision, snap.revision, "[{CASE}] {} carries the revision", r.key);
    }
}

/// Every resource carries the file it came from.
pub async fn resources_carry_their_file(harness: &dyn DesiredHarness) {
    const CASE: &str = "resources_carry_their_file";
    let snap = fetch(harness, CASE).await;
    assert!(!snap.resources.is_empty(), "[{CASE}] the repository has objects");
    for r in &snap.resources {
        assert!(
            r.provenance.path.as_deref().is_some_and(|p| !p.is_empty()),
            "[{CASE}] {} carries the file it came from",
            r.key
        );
    }
}

/// Objects are kept as read: valid objects whose key matches their content.
pub async fn objects_are_kept_as_read(harness: &dyn DesiredHarness) {
    const CASE: &str = "objects_are_kept_as_read";
    let snap = fetch(harness, CASE).await;
    for r in &snap.resources {
        assert!(r.object.get("status").is_none() || r.object["status"].is_object(), "[{CASE}] {} as read", r.key);
        let fresh = Resource::from_object(r.object.clone())
            .unwrap_or_else(|e| panic!("[{CASE}] {} is a valid object: {e}", r.key));
        assert_eq!(fresh.key.group, r.key.group, "[{CASE}] the key of {} matches the object", r.key);
        assert_eq!(fresh.key.kind, r.key.kind, "[{CASE}] the key of {} matches the object", r.key);
        assert_eq!(fresh.key.name, r.key.name, "[{CASE}] the key of {} matches the object", r.key);
    }
}

/// Every object the test put in the repository is read (a namespace-less object matches the
/// key with a namespace, which the scanner gives it later).
pub async fn reads_the_expected_objects(harness: &dyn DesiredHarness) {
    const CASE: &str = "reads_the_expected_objects";
    let expect = harness.expectation();
    if expect.must_contain.is_empty() {
        return skip(CASE, "the harness names no object the repository must hold");
    }
    let snap = fetch(harness, CASE).await;
    for key in &expect.must_contain {
        assert!(
            snap.resources.iter().any(|r| r.key == *key
                || (r.key.namespace.is_none() && r.key.with_namespace(key.namespace.as_deref()) == *key)),
            "[{CASE}] {key} is read"
        );
    }
}

/// A broken file is a fatal warning with its path and line, not an error of the whole fetch.
pub async fn broken_files_are_warnings_with_a_line(harness: &dyn DesiredHarness) {
    const CASE: &str = "broken_files_are_warnings_with_a_line";
    let expect = harness.expectation();
    if expect.broken_files.is_empty() {
        return skip(CASE, "the harness's repository has no broken file");
    }
    let snap = fetch(harness, CASE).await;
    for file in &expect.broken_files {
        let w = snap.warnings.iter().find(|w| w.path.as_deref() == Some(file.as_str()) && w.fatal);
        let w = w.unwrap_or_else(|| panic!("[{CASE}] broken file {file} is reported as a warning, not dropped"));
        assert!(w.line.is_some(), "[{CASE}] the warning for {file} has a line");
    }
}

/// Reading twice without a change gives the same revision and the same objects.
pub async fn rereading_gives_the_same_snapshot(harness: &dyn DesiredHarness) {
    const CASE: &str = "rereading_gives_the_same_snapshot";
    let first = fetch(harness, CASE).await;
    let second = fetch(harness, CASE).await;
    assert_eq!(second.revision, first.revision, "[{CASE}] stable revision");
    let keys = |s: &DesiredSnapshot| {
        let mut k: Vec<_> = s.resources.iter().map(|r| r.key.clone()).collect();
        k.sort();
        k
    };
    assert_eq!(keys(&second), keys(&first), "[{CASE}] stable content");
}

/// Runs every case in order, each on a fresh harness from `fresh` (for callers outside a test
/// runner; tests use [`crate::desired_suite!`], which gives each case a test of its own).
pub async fn conformance<H, F, Fut>(fresh: F)
where
    H: DesiredHarness,
    F: Fn() -> Fut,
    Fut: Future<Output = H>,
{
    crate::__desired_cases!(__cases_in_sequence, desired, fresh);
}

/// One test per case of the desired-source suite, in a module `desired`:
/// `desired::reads_the_expected_objects` and so on. The argument is an expression that gives
/// a future of a fresh [`DesiredHarness`]; it is evaluated once per case. A case whose
/// capability the source lacks prints `skipped: <case>: <reason>` and passes.
///
/// ```
/// use drift_model::{DesiredSource, memory::MemoryDesiredSource};
/// use drift_testkit::desired::{DesiredExpectation, DesiredHarness};
///
/// struct Empty(MemoryDesiredSource);
///
/// impl DesiredHarness for Empty {
///     fn source(&self) -> &dyn DesiredSource {
///         &self.0
///     }
///     fn expectation(&self) -> DesiredExpectation {
///         DesiredExpectation::default()
///     }
/// }
///
/// // Tests `desired::fetch_names_the_repository`, `desired::reports_the_revision`, ...
/// drift_testkit::desired_suite!(async { Empty(MemoryDesiredSource::new("repo", vec![])) });
/// # fn main() {}
/// ```
#[macro_export]
macro_rules! desired_suite {
    ($harness:expr $(,)?) => {
        mod desired {
            #[allow(unused_imports)]
            use super::*;
            $crate::__desired_cases!(__case_tests, desired, $harness);
        }
    };
}

/// The cases of the desired suite, written once: calls `$crate::$then!` with them.
#[doc(hidden)]
#[macro_export]
macro_rules! __desired_cases {
    ($then:ident, $($args:tt)*) => {
        $crate::$then!(($($args)*)
            fetch_names_the_repository,
            reports_the_revision,
            resources_carry_their_file,
            objects_are_kept_as_read,
            reads_the_expected_objects,
            broken_files_are_warnings_with_a_line,
            rereading_gives_the_same_snapshot,
        );
    };
}
