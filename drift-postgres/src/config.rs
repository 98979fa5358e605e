//! Configuration of the PostgreSQL store.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Where and how to connect, and how long to keep history.
///
/// ```
/// let yaml = "url: postgres://drift@127.0.0.1:5432/drift\npassword_env: DRIFT_DB_PASSWORD\nretention_days: 90\n";
/// let config: drift_postgres::PostgresConfig = serde_saphyr::from_str(yaml).unwrap();
/// config.validate().unwrap();
/// assert_eq!(config.max_connections, 5);
/// ```
///
/// A password never belongs in the configuration file: name the environment variable that holds
/// it in `password_env` (or pass a whole URL from the environment). `Debug` never shows it.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PostgresConfig {
    /// `postgres://user@host:port/database` (`postgresql://` also accepted; query parameters
    /// such as `sslmode` are passed to the driver).
    pub url: String,
    /// Name of the environment variable that holds the password, read when connecting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password_env: Option<String>,
    /// Connections in the pool (default 5).
    #[serde(default = "default_max_connections")]
    pub max_connections: u32,
    /// How long to wait for a connection (default `10s`).
    #[serde(default = "default_connect_timeout", with = "humantime_serde")]
    pub connect_timeout: Duration,
    /// Delete resolved drifts and scan rows older than this many days (default: keep all).
    /// Open drifts are never deleted. The drift history goes by whole month partitions: a
    /// month is dropped once it ended before the cutoff (`PostgresStore::maintain_history`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention_days: Option<u32>,
    /// Run the embedded migrations when connecting (default true).
    #[serde(default = "default_true")]
    pub migrate: bool,
}

fn default_max_connections() -> u32 {
    5
}
fn default_connect_timeout() -> Duration {
    Duration::from_secs(10)
}
fn default_true() -> bool {
    true
}

impl PostgresConfig {
    /// A configuration with defaults for this URL.
    pub fn new(url: impl Into<String>) -> Self {
        PostgresConfig {
            url: url.into(),
            password_env: None,
            max_connections: default_max_connections(),
            connect_timeout: default_connect_timeout(),
            retention_days: None,
            migrate: true,
        }
    }

    /// Sets the retention in days.
    pub fn with_retention_days(mut self, days: u32) -> Self {
        self.retention_days = Some(days);
        self
    }

    /// Checks the configuration without connecting. A secret setting the driver does not read
    /// (`sslpassword`, a key spelt `PASSWORD`, ...) and a `#fragment` are refused, the error
    /// naming the key and never a value.
    pub fn validate(&self) -> drift_model::Result<()> {
        let scheme_ok = self.url.starts_with("postgres://") || self.url.starts_with("postgresql://");
        if !scheme_ok {
            return Err(drift_model::Error::config(format!(
                "database url must start with postgres:// or postgresql:// (got {})",
                redact_url(&self.url)
            )));
        }
        if self.max_connections == 0 || self.max_connections > 1000 {
            return Err(drift_model::Error::config("max_connections must be between 1 and 1000"));
        }
        if self.connect_timeout.is_zero() {
            return Err(drift_model::Error::config("connect_timeout must be more than 0"));
        }
        if self.retention_days == Some(0) {
            return Err(drift_model::Error::config("retention_days must be at least 1 (omit it to keep everything)"));
        }
        crate::conninfo::check(&self.url).map_err(drift_model::Error::config)?;
        if self.password_env.as_deref().is_some_and(str::is_empty) {
            return Err(drift_model::Error::config("password_env must name an environment variable"));
        }
        Ok(())
    }
}

impl fmt::Debug for PostgresConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresConfig")
            .field("url", &redact_url(&self.url))
            .field("password_env", &self.password_env)
            .field("max_connections", &self.max_connections)
            .field("connect_timeout", &self.connect_timeout)
            .field("retention_days", &self.retention_days)
            .field("migrate", &self.migrate)
            .finish()
    }
}

/// The URL with every secret replaced by `***` (for logs and errors): the password of the user
/// information, the value of every key that names a password, passphrase, secret or token in any
/// letter case (`password`, `sslpassword`, `PASSWORD`, `options[password]`, ...), the value of
/// such a setting inside `options` (`-c password=...`), and any `#fragment`; read through a URL
/// parser. A URL that does not parse is shown as its scheme only.
pub fn redact_url(url: &str) -> String {
    crate::conninfo::redact_url(url)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn debug_never_shows_the_password() {
        let c = PostgresConfig::new("postgres://drift:s3cret@db:5432/drift?sslmode=require");
        let shown = format!("{c:?}");
        assert!(!shown.contains("s3cret"), "{shown}");
        assert!(shown.contains("postgres://drift:***@db:5432/drift?sslmode=require"), "{shown}");
    }

    #[test]
    fn passwords_are_hidden_wherever_the_url_holds_them() {
        for url in [
            "postgres://drift:canary-s3cret@db/drift",
            "postgres://drift:can/ary?s3cret@db/drift",
            "postgres://drift:can%2Fary@db:5432/drift?sslmode=require",
            "postgres://drift@db/drift?password=canary-s3cret&sslmode=require",
            "postgresql://drift@db/drift?sslmode=require&PASSWORD=canary-s3cret",
            "postgres://drift:canary@[::1",
        ] {
            let shown = redact_url(url);
            assert!(
                !shown.contains("canary") && !shown.contains("s3cret") && !shown.contains("ary"),
                "{url} -> {shown}"
            );
            assert!(shown.contains("***"), "{url} -> {shown}");
        }
        assert_eq!(
            redact_url("postgres://drift@db/drift?sslmode=require"),
            "postgres://drift@db/drift?sslmode=require"
        );
        assert_eq!(
            redact_url("postgres://drift@db/drift?password=x&sslmode=require"),
            "postgres://drift@db/drift?password=***&sslmode=require"
        );
    }

    #[test]
    fn unknown_keys_are_rejected() {
        let err = serde_saphyr::from_str::<PostgresConfig>("url: postgres://x/y\npasword_env: P\n").unwrap_err();
        assert!(err.to_string().contains("pasword_env"), "{err}");
    }

    #[test]
    fn validation() {
        assert!(PostgresConfig::new("postgres://h/db").validate().is_ok());
        assert!(PostgresConfig::new("postgresql://h/db").validate().is_ok());
        assert!(PostgresConfig::new("sqlite://drift.db").validate().is_err());
        assert!(PostgresConfig::new("postgres://h/db").with_retention_days(0).validate().is_err());
        let mut c = PostgresConfig::new("postgres://h/db");
        c.max_connections = 0;
        assert_eq!(c.validate().unwrap_err().kind(), drift_model::ErrorKind::ConfigInvalid);
        let c: PostgresConfig = serde_saphyr::from_str("url: postgres://h/db\nconnect_timeout: 3s\n").unwrap();
        assert_eq!(c.connect_timeout, Duration::from_secs(3));
        assert!(c.migrate);
    }
}
