//! Upkeep of the rollups `drift_counts` and `drift_daily` (`migrations/0002_rollups.sql`).
//!
//! A write that changes rows of `drifts` is bracketed: [`adjust`] with `-1` over the rows it
//! will touch, the statement, [`adjust`] with `+1` over the same rows. Each call is two
//! aggregated upserts (one per rollup), whatever the number of rows. Correct because the
//! writer holds SQLite's write lock (`BEGIN IMMEDIATE`) for the whole transaction: nothing else
//! can change those rows in between.

use sqlx::{QueryBuilder, Sqlite, SqliteConnection};

use crate::SqliteSink;
use crate::error::{SqlContext, SqliteError};

/// The rows of `drifts` an adjustment covers.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Rows<'a> {
    /// The open rows with these fingerprints (a JSON array).
    OpenWithFingerprints(&'a str),
    /// The rows with these ids (a JSON array).
    Ids(&'a str),
    /// The resolved rows resolved before this time (µs), which retention deletes.
    ResolvedBefore(i64),
    /// Every row.
    All,
}

impl Rows<'_> {
    fn push(self, q: &mut QueryBuilder<Sqlite>) {
        match self {
            Rows::OpenWithFingerprints(json) => {
                q.push(" WHERE status = 'open' AND fingerprint IN (SELECT value FROM json_each(");
                q.push_bind(json.to_owned()).push("))");
            }
            Rows::Ids(json) => {
                q.push(" WHERE id IN (SELECT value FROM json_each(").push_bind(json.to_owned()).push("))");
            }
            Rows::ResolvedBefore(cutoff) => {
                q.push(" WHERE status = 'resolved' AND resolved_at < ").push_bind(cutoff);
            }
            Rows::All => {
                q.push(" WHERE true");
            }
        }
    }
}

const DIMENSIONS: &str = "cluster, repository, namespace, resource_kind, drift_type, severity, status";

/// Adds `sign` (+1 or -1) times the contribution of `rows` to both rollups.
pub(crate) async fn adjust(conn: &mut SqliteConnection, sign: i64, rows: Rows<'_>) -> Result<(), SqliteError> {
    let mut q = QueryBuilder::<Sqlite>::new(format!(
        "INSERT INTO drift_counts ({DIMENSIONS}, n, ttr_sum_ms) SELECT {DIMENSIONS}, "
    ));
    q.push_bind(sign).push(" * count(*), ").push_bind(sign);
    q.push(" * COALESCE(sum((resolved_at - detected_at) / 1000), 0) FROM drifts");
    rows.push(&mut q);
    q.push(format!(
        " GROUP BY {DIMENSIONS} ON CONFLICT ({DIMENSIONS}) DO UPDATE SET n = n + excluded.n, \
         ttr_sum_ms = ttr_sum_ms + excluded.ttr_sum_ms"
    ));
    q.build().execute(&mut *conn).await.ctx("updating drift_counts")?;

    let mut q = QueryBuilder::<Sqlite>::new(format!(
        "INSERT INTO drift_daily (day, {DIMENSIONS}, opened, resolved) \
         SELECT day, {DIMENSIONS}, sum(o), sum(x) FROM (SELECT detected_at / 86400000000 AS day, {DIMENSIONS}, "
    ));
    q.push_bind(sign).push(" AS o, 0 AS x FROM drifts");
    rows.push(&mut q);
    q.push(format!(" UNION ALL SELECT resolved_at / 86400000000, {DIMENSIONS}, 0, ")).push_bind(sign);
    q.push(" FROM drifts");
    rows.push(&mut q);
    // `WHERE true`: an upsert's SELECT needs a WHERE clause (SQLite's parsing ambiguity).
    q.push(format!(
        " AND resolved_at IS NOT NULL) WHERE true GROUP BY day, {DIMENSIONS} \
         ON CONFLICT (day, {DIMENSIONS}) DO UPDATE SET opened = opened + excluded.opened, \
         resolved = resolved + excluded.resolved"
    ));
    q.build().execute(&mut *conn).await.ctx("updating drift_daily")?;
    Ok(())
}

impl SqliteSink {
    /// Computes the rollups again from the rows, in one write transaction. Only needed after
    /// rows of `drifts` were written by hand (an operator's own `DELETE`, a bulk load): the
    /// store keeps them exact for every write it makes itself.
    pub async fn rebuild_rollups(&self) -> drift_core::Result<()> {
        let mut tx = self.writer.begin_with("BEGIN IMMEDIATE").await.ctx("starting the transaction")?;
        sqlx::query("DELETE FROM drift_counts").execute(&mut *tx).await.ctx("clearing drift_counts")?;
        sqlx::query("DELETE FROM drift_daily").execute(&mut *tx).await.ctx("clearing drift_daily")?;
        adjust(&mut tx, 1, Rows::All).await?;
        tx.commit().await.ctx("committing the rollups")?;
        Ok(())
    }
}
