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
            // The URL itself is not shown: another store's URL may hold a password.
            let scheme = self.url.split_once(':').map_or("", |(s, _)| s);
            let scheme =
                if scheme.chars().all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c)) { scheme } else { "?" };
            return Err(drift_model::Error::config(format!(
                "database url must start with sqlite:// (got a URL of scheme `{scheme}`)"
            )));
        }
        if has_user_info(&self.url) {
            return Err(drift_model::Error::config(
                "a SQLite URL names a file and takes no user or password (`user:password@`); a file name \
                 with a `@` before its first `/` is written with %40",
            ));
        }
        if let Some(key) = secret_key(&self.url) {
            return Err(drift_model::Error::config(format!(
                "a SQLite URL takes no secret: its setting `{key}` is refused (SQLite has no password)"
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

/// Whether the URL has user information: an `@` between `sqlite://` and the first `/`.
fn has_user_info(url: &str) -> bool {
    url.strip_prefix("sqlite://")
        .is_some_and(|rest| rest.split(['/', '?', '#']).next().is_some_and(|a| a.contains('@')))
}

/// The first query key that names a password, passphrase, secret or token (any letter case),
/// as an error may name it.
fn secret_key(url: &str) -> Option<String> {
    let query = url.split_once('?')?.1;
    query.split('&').map(|pair| pair.split_once('=').map_or(pair, |(k, _)| k)).find_map(|k| {
        let lower = k.to_ascii_lowercase();
        ["password", "passwd", "passphrase", "secret", "token", "pwd"]
            .iter()
            .any(|w| lower.contains(w))
            .then(|| k.chars().filter(|c| c.is_ascii_graphic()).take(40).collect())
    })
}

/// The URL as it may be shown: as written when it holds no user information and no secret
/// setting (what [`SqliteConfig::validate`] accepts), else its scheme only.
pub fn redact_url(url: &str) -> String {
    if url.starts_with("sqlite:") && !has_user_info(url) && secret_key(url).is_none() && !url.contains('#') {
        url.to_owned()
    } else {
        "sqlite://*** (user information or a secret setting, not shown)".to_owned()
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

    /// Issue 37: `sqlite://user:secret@...` was taken as a file name and printed as it was.
    #[test]
    fn user_information_and_secret_settings_are_refused_and_never_shown() {
        for url in [
            "sqlite://user:CANARY@host/x.db",
            "sqlite://user:CANARY@/tmp/x.db",
            "sqlite://:CANARY@x.db",
            "sqlite://x.db?password=CANARY",
            "sqlite://x.db?PassWord=CANARY",
            "sqlite://x.db?vfs=unix&token=CANARY",
            "postgres://u:CANARY@db/x",
        ] {
            let err = SqliteConfig::new(url).validate().unwrap_err();
            assert!(!err.to_string().contains("CANARY"), "{url}: {err}");
            assert!(!redact_url(url).contains("CANARY"), "{url}");
        }
        for url in ["sqlite://drift.db", "sqlite:///var/lib/a@b/drift.db", "sqlite://x%40y.db", "sqlite::memory:"] {
            SqliteConfig::new(url).validate().unwrap();
            assert_eq!(redact_url(url), url);
        }
    }

    #[test]
    fn unknown_keys_are_rejected() {
        let err = serde_saphyr::from_str::<SqliteConfig>("url: sqlite://x.db\nretention: 3\n").unwrap_err();
        assert!(err.to_string().contains("retention"), "{err}");
    }
}
