//! A waiver written in Git (the annotation [`WAIVERS_ANNOTATION`] of a desired object), as a
//! drift carries it ([`crate::Drift::waiver`]); reading and applying them is
//! `drift_engine::waiver`.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// The annotation of a desired object that lists its waivers (YAML or JSON).
pub const WAIVERS_ANNOTATION: &str = "drift-detector.io/waivers";

/// The longest a waiver in Git may run, from the scan that reads it.
pub const MAX_DAYS: i64 = 366;

/// A waiver of drift on a path of one object, written in Git.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Waiver {
    /// A drift path (`spec.replicas`), a prefix of one (`spec.template`), or `*` for every
    /// path of the object.
    pub path: String,
    /// Who answers for it.
    pub owner: String,
    /// Why.
    pub reason: String,
    /// When it stops applying.
    pub expires_at: DateTime<Utc>,
}

impl Waiver {
    /// Whether the waiver covers a drift at `path`: the same path, a path under it, or any
    /// path for `*`.
    pub fn covers(&self, path: &str) -> bool {
        self.path == "*"
            || path == self.path
            || path.strip_prefix(self.path.as_str()).is_some_and(|rest| rest.starts_with(['.', '[']))
    }
}
