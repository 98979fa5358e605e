//! The partitions of the drift history (`migrations/0012_partitioned_history.sql`,
//! docs/storage.md "Partitions of the history"): one per UTC month of `resolved_at`, created
//! ahead of time, dropped whole by retention.
//!
//! The work is the SQL functions of the migration; this module says when it runs: when the
//! store connects and then every hour, each time in a transaction of its own (never in the
//! transaction of a report, whose locks it would hold while it waits for its own).

use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::PgPool;

use drift_sql::SqlContext;

use crate::error::PgError;

/// How many months after the current one have their partition ready.
pub const MONTHS_AHEAD: i32 = 2;

/// How long the maintenance waits for a lock before it gives up until its next round (5 s):
/// creating a partition locks `drifts_live` for a moment, dropping one locks `drifts`.
const SET_LOCK_TIMEOUT: &str = "SET LOCAL lock_timeout = '5s'";

/// How often a connected store checks its partitions.
pub(crate) const EVERY: Duration = Duration::from_secs(3600);

/// What one maintenance round did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HistoryMaintenance {
    /// Month partitions created.
    pub created: u32,
    /// Resolved rows dropped with whole month partitions.
    pub dropped_rows: u64,
}

/// Creates the month partitions up to [`MONTHS_AHEAD`] months after `now`'s month and, with a
/// retention, drops those whose whole month was resolved before `now - retention_days`.
pub(crate) async fn maintain(
    pool: &PgPool,
    now: DateTime<Utc>,
    retention_days: Option<u32>,
) -> Result<HistoryMaintenance, PgError> {
    let mut tx = pool.begin().await.ctx("starting the history maintenance")?;
    sqlx::query(SET_LOCK_TIMEOUT).execute(&mut *tx).await.ctx("starting the history maintenance")?;
    let created: i32 = sqlx::query_scalar("SELECT drift_history_ensure($1, $2)")
        .bind(now)
        .bind(MONTHS_AHEAD)
        .fetch_one(&mut *tx)
        .await
        .ctx("creating the partitions of the history")?;
    let dropped_rows: i64 = match drift_sql::cutoff(retention_days, now) {
        Some(cutoff) => sqlx::query_scalar("SELECT drift_history_drop($1)")
            .bind(cutoff)
            .fetch_one(&mut *tx)
            .await
            .ctx("dropping expired partitions of the history")?,
        None => 0,
    };
    tx.commit().await.ctx("committing the history maintenance")?;
    let done = HistoryMaintenance {
        created: u32::try_from(created).unwrap_or_default(),
        dropped_rows: u64::try_from(dropped_rows).unwrap_or_default(),
    };
    if done != HistoryMaintenance::default() {
        tracing::info!(created = done.created, dropped_rows = done.dropped_rows, "history partitions maintained");
    }
    Ok(done)
}

/// Runs [`maintain`] every [`EVERY`] until the pool is closed. A round that fails (a lock not
/// granted in time, the server away) is logged and tried again at the next.
pub(crate) async fn keep(pool: PgPool, retention_days: Option<u32>) {
    loop {
        tokio::time::sleep(EVERY).await;
        if pool.is_closed() {
            return;
        }
        if let Err(e) = maintain(&pool, Utc::now(), retention_days).await {
            tracing::warn!(error = %e, "maintaining the partitions of the history failed; trying again in an hour");
        }
    }
}
