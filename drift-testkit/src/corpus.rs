//! Where the shared corpus of real objects and GitOps repositories is: the folder named by the
//! environment variable [`VAR`] (`DRIFT_CORPUS`).
//!
//! The corpus is not part of the repository, so a clone of the repository alone has none: a test
//! (or a bench case) that needs it asks [`dir`], which prints one line saying that the test is
//! skipped and why when the variable is not set. `.ci/run` sets the variable whenever the corpus
//! is there, and then nothing can skip: a variable that names a missing or empty folder, or a
//! corpus without the sub-folder a test reads, fails the test.
//!
//! ```
//! // With DRIFT_CORPUS unset this prints "skipped example: DRIFT_CORPUS is not set ..."
//! // and returns None.
//! if let Some(pairs) = drift_testkit::corpus::dir("example", "pairs") {
//!     assert!(pairs.is_dir());
//! }
//! ```

use std::path::PathBuf;

/// The environment variable that names the corpus folder (an absolute path, or a path relative
/// to the test's working folder, which is the crate's folder under cargo).
pub const VAR: &str = "DRIFT_CORPUS";

/// The sub-folder `sub` of the corpus (`pairs`, `repos/podinfo`, or `""` for the corpus itself)
/// for the test or bench case named `test`.
///
/// Returns `None`, after printing `skipped <test>: DRIFT_CORPUS is not set ...` on standard
/// error, when the variable is unset or empty.
///
/// # Panics
///
/// When the variable is set but the corpus folder is missing or empty, or has no `sub`: a
/// corpus that CI promised must not be skipped silently.
pub fn dir(test: &str, sub: &str) -> Option<PathBuf> {
    let root = match std::env::var_os(VAR) {
        Some(v) if !v.is_empty() => PathBuf::from(v),
        _ => {
            eprintln!(
                "skipped {test}: {VAR} is not set (it names the shared corpus folder, \
                 for example ../shared/corpus; .ci/run sets it when that folder exists)"
            );
            return None;
        }
    };
    let entries =
        std::fs::read_dir(&root).unwrap_or_else(|e| panic!("{VAR}={} is set but cannot be read: {e}", root.display()));
    assert!(entries.flatten().next().is_some(), "{VAR}={} is set but the folder is empty", root.display());
    let path = root.join(sub);
    assert!(path.is_dir(), "{VAR}={} has no folder `{sub}` (needed by {test})", root.display());
    Some(path)
}
