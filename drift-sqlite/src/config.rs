//! Configuration of the SQLite store.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Where the database file is and how long to keep history.
///
/// ```
/// let config: drift_sqlite::SqliteConfig = serde_saphyr::from_str("url: sqlite:///var/lib/drift/drift.db\nretention_days: 90\n").unwrap();
/// config.validate().unwrap();
/// assert_eq!(config.read_connections, 4);
/// let default = drift_sqlite::SqliteConfig::default();
/// assert_eq!(default.url, "sqlite://drift.db");
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SqliteConfig {
    /// `sqlite://drift.db` (relative to the working directory, the default),
    /// `sqlite:///absolute/path.db`, or `sqlite::memory:` (tests and demos). The file is created
    /// when missing.
    #[serde(default = "default_url")]
    pub url: String,
    /// Read-only connections for the API next to the single writer (default 4). WAL mode lets
    /// them read while a scan is being written.
    #[serde(default = "default_read_connections")]
    pub read_connections: u32,
    /// How long a statement waits for a lock held by another process (default `5s`).
    #[serde(default = "default_busy_timeout", with = "humantime_serde")]
    pub busy_timeout: Duration,
    /// Delete resolved drifts and scan rows older than this many days (default: keep all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention_days: Option<u32>,
    /// Run the embedded migrations when opening (default true).
    #[serde(default = "default_true")]
    pub migrate: bool,
}

fn default_url() -> String {
    "sqlite://drift.db".to_owned()
}
fn default_read_connections() -> u32 {
    4
}
fn default_busy_timeout() -> Duration {
    Duration::from_secs(5)
}
fn default_true() -> bool {
    true
}

impl Default for SqliteConfig {
    fn default() -> Self {
        SqliteConfig::new(default_url())
    }
}

impl SqliteConfig {
    /// A configuration with defaults for this URL.
    pub fn new(url: impl Into<String>) -> Self {
        SqliteConfig {
            url: url.into(),
            read_connections: default_read_connections(),
            busy_timeout: default_busy_timeout(),
            retention_days: None,
            migrate: true,
        }
    }

    /// Sets the retention in days.
    pub fn with_retention_days(mut self, days: u32) -> Self {
        self.retention_days = Some(days);
        self
    }

    /// Whether the URL names an in-memory database.
    pub fn is_memory(&self) -> bool {
        self.url == "sqlite::memory:" || self.url == "sqlite://:memory:" || self.url.contains("mode=memory")
    }

    /// Checks the configuration without touching the file system.
    pub fn validate(&self) -> drift_model::Result<()> {
        if !self.url.starts_with("sqlite:") {
            return Err(drift_model::Error::config(format!(
                "database url must start with sqlite:// (got {:?})",
                self.url
            )));
        }
        if self.url == "sqlite://" || self.url == "sqlite:" {
            return Err(drift_model::Error::config("database url names no file (try sqlite://drift.db)"));
        }
        if self.read_connections == 0 || self.read_connections > 64 {
            return Err(drift_model::Error::config("read_connections must be between 1 and 64"));
        }
        if self.retention_days == Some(0) {
            return Err(drift_model::Error::config("retention_days must be at least 1 (omit it to keep everything)"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn defaults_and_validation() {
        let c: SqliteConfig = serde_saphyr::from_str("{}").unwrap();
        assert_eq!(c, SqliteConfig::default());
        c.validate().unwrap();
        assert!(SqliteConfig::new("postgres://x/y").validate().is_err());
        assert!(SqliteConfig::new("sqlite://").validate().is_err());
        assert!(SqliteConfig::new("sqlite::memory:").is_memory());
        assert!(SqliteConfig::default().with_retention_days(0).validate().is_err());
        let c: SqliteConfig = serde_saphyr::from_str("busy_timeout: 250ms\n").unwrap();
        assert_eq!(c.busy_timeout, Duration::from_millis(250));
    }

    #[test]
    fn unknown_keys_are_rejected() {
        let err = serde_saphyr::from_str::<SqliteConfig>("url: sqlite://x.db\nretention: 3\n").unwrap_err();
        assert!(err.to_string().contains("retention"), "{err}");
    }
}
