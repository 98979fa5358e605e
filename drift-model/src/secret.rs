//! A secret value in memory (a token, a password, a webhook URL whose path is its credential):
//! `Debug` and `Display` print `***`, so a secret held in a configuration or an error never
//! reaches a log by accident. The one place that uses it calls [`Secret::expose`].
//!
//! ```
//! let s = drift_model::secret::Secret::new("hunter2");
//! assert_eq!(format!("{s} {s:?}"), "*** Secret(***)");
//! assert_eq!(s.expose(), "hunter2");
//! ```

use std::fmt;

/// A secret value.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a value.
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    /// The value, for the one place that uses it (signing, authenticating, connecting).
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

/// Whether an object is a SOPS-encrypted manifest; see [`crate::sops::is_sops_encrypted`].
pub fn is_sops_encrypted(object: &serde_json::Value) -> bool {
    crate::sops::is_sops_encrypted(object)
}
