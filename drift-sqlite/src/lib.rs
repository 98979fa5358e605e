//! # drift-sqlite
//!
//! The embedded default store of the drift detector: the same `drifts` and `scans` tables,
//! the same behaviour and the same read side as `drift-postgres`, in one SQLite file, so the
//! `drift` binary works without any server (docs/storage.md).
//!
//! - WAL mode with a single writer connection (scans are written one at a time, the API reads
//!   from a small pool of read-only connections meanwhile).
//! - Migrations are embedded and run when opening; the file is created when missing.
//! - One transaction per report, idempotent per scan id, batched multi-row statements.
//! - At most one open row per fingerprint, enforced by a partial unique index.
//! - An open drift the report does not list is resolved only where
//!   [`ScanReport::may_resolve`](drift_model::ScanReport::may_resolve) allows.
//! - Statistics come from rollup tables (`drift_counts`, `drift_daily`) the store keeps in the
//!   transaction of each write, exact, in milliseconds whatever the history's size; a filter
//!   with `since` is computed from the rows ([`SqliteStore::stats_from_rows`]). After writing
//!   `drifts` by hand, [`SqliteStore::rebuild_rollups`] counts them again.
//!
//! What both SQL stores share (reads, filters, decoding, errors, the retry loop) lives in
//! `drift-sql`; this crate keeps its configuration, its write path, its rollups and its
//! migrations.
//!
//! ```
//! use drift_model::{DriftSink, DriftStore, sink::{DriftFilter, PageRequest}};
//! use drift_sqlite::SqliteStore;
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let store = SqliteStore::open("sqlite::memory:").await?;
//! let report = drift_testkit::fixtures::report("scan-1", chrono::Utc::now(), &[], vec![]);
//! let outcome = store.record(&report).await?;
//! assert_eq!(outcome.opened, 0);
//! assert!(store.list(&DriftFilter::default(), PageRequest::default()).await?.items.is_empty());
//! # Ok::<(), drift_model::Error>(()) }).unwrap();
//! ```
#![warn(missing_docs)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

mod config;
mod dialect;
mod error;
mod rollup;
mod sink;
mod stats;

use std::fmt;
use std::str::FromStr;

use drift_model::Result;
pub use drift_model::{DriftSink, DriftStore};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous};

pub use config::{SqliteConfig, redact_url};
pub use dialect::SqliteDialect;
pub use drift_sql::{PruneOutcome, SqlStats, SqlStore};

use drift_sql::SqlContext;
use error::SqliteError;

/// The embedded migrations (`migrations/` of this crate).
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

/// The SQLite store: a [`DriftSink`] and a [`DriftStore`] over one database file.
///
/// Cheap to clone (the pools are shared).
#[derive(Clone)]
pub struct SqliteStore {
    writer: SqlitePool,
    reader: SqlitePool,
    retention_days: Option<u32>,
}

drift_sql::impl_drift_store!(SqliteStore);

impl fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqliteStore")
            .field("readers", &self.reader.size())
            .field("retention_days", &self.retention_days)
            .finish_non_exhaustive()
    }
}

impl SqliteStore {
    /// Opens (creating when missing) the database at `url` with defaults.
    pub async fn open(url: &str) -> Result<Self> {
        Self::from_config(&SqliteConfig::new(url)).await
    }

    /// Opens as configured and, unless `migrate: false`, brings the schema up to date.
    pub async fn from_config(config: &SqliteConfig) -> Result<Self> {
        config.validate()?;
        let options = SqliteConnectOptions::from_str(&config.url)
            .map_err(|e| SqliteError::config(format!("invalid database url {}: {e}", config.url)))?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(config.busy_timeout)
            .foreign_keys(true);
        // One writer: SQLite serialises writers anyway, and a single connection makes them wait
        // in the pool instead of failing with SQLITE_BUSY.
        let writer = SqlitePoolOptions::new()
            .max_connections(1)
            .min_connections(1)
            .idle_timeout(None)
            .max_lifetime(None)
            .connect_with(options.clone())
            .await
            .ctx::<SqliteDialect>("opening the database")?;
        let sink_writer = SqliteStore { writer: writer.clone(), reader: writer.clone(), retention_days: None };
        if config.migrate {
            sink_writer.migrate().await?;
        }
        let reader = if config.is_memory() {
            // An in-memory database lives in its one connection.
            writer.clone()
        } else {
            SqlitePoolOptions::new()
                .max_connections(config.read_connections)
                .connect_with(options.read_only(true))
                .await
                .ctx::<SqliteDialect>("opening the database for reading")?
        };
        Ok(SqliteStore { writer, reader, retention_days: config.retention_days })
    }

    /// Applies the embedded migrations that are not applied yet (`drift migrate`).
    pub async fn migrate(&self) -> Result<()> {
        MIGRATOR.run(&self.writer).await.map_err(SqliteError::from)?;
        Ok(())
    }

    /// The writer pool (one connection), for operators' own statements and tests.
    pub fn pool(&self) -> &SqlitePool {
        &self.writer
    }

    /// Closes both pools.
    pub async fn close(&self) {
        self.reader.close().await;
        self.writer.close().await;
    }
}

/// The examples of the crate's README.md, compiled and run as doctests so that it stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
