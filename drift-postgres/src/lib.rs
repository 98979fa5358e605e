//! # drift-postgres
//!
//! The PostgreSQL store of the drift detector (docs/storage.md): a [`DriftSink`] that records
//! scan reports into a `drifts` history table and a `scans` table, and the [`DriftStore`] read
//! side the API and the CLI use.
//!
//! - Migrations are embedded and run when connecting ([`PostgresStore::connect`]).
//! - One transaction per report, with batched statements (`UNNEST` arrays): thousands of drifts
//!   are a handful of round trips. A report is written whole or not at all.
//! - Recording is idempotent per scan id (the `scans` primary key); a write that lost its
//!   connection or hit a deadlock is written again.
//! - A partial unique index keeps at most one open row per fingerprint; the upsert goes through
//!   it (`ON CONFLICT (fingerprint, resolved_at) WHERE status <> 'resolved'`), so two scanners racing leave one open row.
//! - Reports of one cluster and repository are written one at a time (a transaction-level
//!   advisory lock before the upsert), so a writer always sees the rows an earlier one committed:
//!   a drift two writers find at once is opened, and announced, once.
//! - An open drift the report does not list is resolved only where
//!   [`ScanReport::may_resolve`](drift_model::ScanReport::may_resolve) allows.
//! - The history is partitioned by month of `resolved_at` (the live rows in the default
//!   partition `drifts_live`); the store creates the partitions ahead and drops whole months
//!   for retention ([`PostgresStore::maintain_history`]).
//! - Optional retention: resolved drifts and scans older than N days are deleted (the history
//!   by whole month partitions).
//! - Statistics come from rollup tables (`drift_counts`, `drift_daily`) that statement-level
//!   triggers keep in the transaction of every write, exact, in milliseconds whatever the
//!   history's size; a filter with `since` is computed from the rows
//!   ([`PostgresStore::stats_from_rows`]).
//!
//! What both SQL stores share (reads, filters, decoding, errors, the retry loop) lives in
//! `drift-sql`; this crate keeps its configuration, its write path, its rollups and its
//! migrations. See docs/storage.md for the schema column by column.
//!
//! ```no_run
//! use drift_model::{DriftSink, DriftStore, sink::{DriftFilter, PageRequest}};
//! use drift_postgres::PostgresStore;
//!
//! # async fn demo(report: drift_model::ScanReport) -> drift_model::Result<()> {
//! let store = PostgresStore::connect("postgres://drift@127.0.0.1:5432/drift").await?;
//! let outcome = store.record(&report).await?;
//! println!("{} new, {} seen again, {} resolved", outcome.opened, outcome.updated, outcome.resolved);
//! let page = store.list(&DriftFilter::default(), PageRequest::default()).await?;
//! for drift in page.items {
//!     println!("{} {} {}", drift.id, drift.severity, drift.path);
//! }
//! # Ok(()) }
//! ```
#![warn(missing_docs)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

mod config;
mod conninfo;
mod dialect;
mod error;
mod history;
mod sink;
mod stats;

use std::fmt;
use std::str::FromStr;

use drift_model::Result;
pub use drift_model::{DriftSink, DriftStore};
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};

pub use config::{PostgresConfig, redact_url};
pub use dialect::PgDialect;
pub use drift_sql::{PruneOutcome, SqlStats, SqlStore};
pub use history::{HistoryMaintenance, MONTHS_AHEAD};

use drift_sql::SqlContext;
use error::PgError;

/// The embedded migrations (`migrations/` of this crate).
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

/// The PostgreSQL store: a [`DriftSink`] and a [`DriftStore`] over one connection pool.
///
/// Cheap to clone (the pool is shared).
#[derive(Clone)]
pub struct PostgresStore {
    pool: PgPool,
    retention_days: Option<u32>,
    growth: std::sync::Arc<sink::Growth>,
}

drift_sql::impl_drift_store!(PostgresStore);

impl fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The connect options hold the password: show none of them.
        f.debug_struct("PostgresStore")
            .field("pool_size", &self.pool.size())
            .field("retention_days", &self.retention_days)
            .finish_non_exhaustive()
    }
}

impl PostgresStore {
    /// Connects with defaults (pool of 5, migrations run, no retention).
    pub async fn connect(url: &str) -> Result<Self> {
        Self::from_config(&PostgresConfig::new(url)).await
    }

    /// Connects as configured and, unless `migrate: false`, brings the schema up to date.
    pub async fn from_config(config: &PostgresConfig) -> Result<Self> {
        config.validate()?;
        // Only the settings the driver reads reach it: it logs any other key with its value.
        let (url, dropped) = conninfo::driver_url(&config.url);
        if !dropped.is_empty() {
            tracing::warn!(keys = ?dropped, "settings of the database URL that the driver does not read are ignored");
        }
        let mut options = PgConnectOptions::from_str(&url)
            .map_err(|e| PgError::config(format!("invalid database url {}: {e}", redact_url(&config.url))))?
            .application_name("drift")
            // Listings read a page through an index: starting parallel workers costs them more
            // (tens of milliseconds) than the scan itself. The statistics computed from the
            // rows turn parallelism back on for their transaction.
            .options([("max_parallel_workers_per_gather", "0")]);
        if let Some(var) = &config.password_env {
            let password = std::env::var(var).map_err(|_| {
                PgError::config(format!("environment variable {var} (password_env) is not set or not UTF-8"))
            })?;
            options = options.password(&password);
        }
        let pool = PgPoolOptions::new()
            .max_connections(config.max_connections)
            .acquire_timeout(config.connect_timeout)
            // A pooled connection may have died with a server restart: check it before use.
            .test_before_acquire(true)
            .connect_with(options)
            .await
            .ctx::<dialect::PgDialect>("connecting")?;
        let sink = PostgresStore { pool, retention_days: config.retention_days, growth: Default::default() };
        if config.migrate {
            sink.migrate().await?;
        }
        // The partitions of the history: now, then every hour (a failed round is logged, never
        // an error of the connection: rows of a month without partition wait in drifts_live).
        if let Err(e) = sink.maintain_history(chrono::Utc::now()).await {
            tracing::warn!(error = %e, "maintaining the partitions of the history failed; trying again in an hour");
        }
        tokio::spawn(history::keep(sink.pool.clone(), sink.retention_days));
        Ok(sink)
    }

    /// Wraps an existing pool (no migration is run; call [`PostgresStore::migrate`]).
    pub fn from_pool(pool: PgPool, retention_days: Option<u32>) -> Self {
        PostgresStore { pool, retention_days, growth: Default::default() }
    }

    /// Applies the embedded migrations that are not applied yet (`drift migrate`). Safe to run
    /// from several processes at once (the migrator takes an advisory lock).
    pub async fn migrate(&self) -> Result<()> {
        MIGRATOR.run(&self.pool).await.map_err(PgError::from)?;
        Ok(())
    }

    /// Keeps the month partitions of the history (docs/storage.md, "Partitions of the
    /// history"): creates those of `now`'s month and the [`MONTHS_AHEAD`] next ones (moving into
    /// them the rows that waited in `drifts_live`) and, with a retention, drops the months whose
    /// every row was resolved before the cutoff. Runs in a transaction of its own; the store
    /// calls it when it connects and every hour.
    pub async fn maintain_history(&self, now: chrono::DateTime<chrono::Utc>) -> Result<HistoryMaintenance> {
        Ok(history::maintain(&self.pool, now, self.retention_days).await?)
    }

    /// Waits for the store's own upkeep started by the writes so far to end: the refresh of the
    /// planner's statistics that a write which opened many rows starts beside the next ones
    /// (docs/storage.md). For tests and benchmarks that read plans.
    pub async fn settled(&self) {
        let running = self.growth.running.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
        if let Some(task) = running {
            // A task that panicked or was cancelled has nothing left to wait for.
            let _ = task.await;
        }
    }

    /// The connection pool (for operators' own queries and tests).
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Closes the pool.
    pub async fn close(&self) {
        self.pool.close().await;
    }
}

/// The examples of the crate's README.md, compiled and run as doctests so that it stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
