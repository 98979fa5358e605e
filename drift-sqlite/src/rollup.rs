//! Upkeep of the rollups `drift_counts` and `drift_daily` (`migrations/0002_rollups.sql`), in
//! the transaction of each write, a few statements per report (never one per drift):
//!
//! - the upsert and the resolution know what they change (the store reads the old severity and
//!   detection time of the open rows a chunk updates, and the rows it resolves): they add up
//!   the changes in a [`Delta`], written at the end with one upsert per rollup;
//! - the retention delete and [`SqliteStore::rebuild_rollups`] go through [`adjust`], which
//!   subtracts (or adds) the contribution of a set of rows in SQL, one aggregated upsert per
//!   rollup.
//!
//! Correct because the writer holds SQLite's write lock (`BEGIN IMMEDIATE`) for the whole
//! transaction: nothing else changes `drifts` between the reads and the writes.

use std::collections::HashMap;

use sqlx::{QueryBuilder, Sqlite, SqliteConnection};

use drift_sql::{DIMENSIONS, SqlContext};

use crate::SqliteStore;
use crate::dialect::SqliteDialect;
use crate::error::SqliteError;

/// Microseconds in a day: the rollup's day number is `time / DAY_US`.
pub(crate) const DAY_US: i64 = 86_400_000_000;

/// A rollup key: cluster, repository, namespace, kind, drift type, severity, status.
pub(crate) type Dims = [String; 7];

/// Changes to the rollups, added up in memory.
#[derive(Debug, Default)]
pub(crate) struct Delta {
    /// (n, ttr_sum_ms) by key.
    counts: HashMap<Dims, (i64, i64)>,
    /// (opened, resolved) by (day, key).
    daily: HashMap<(i64, Dims), (i64, i64)>,
}

impl Delta {
    /// Adds `sign` (+1 or -1) times the contribution of one row: its key, the day it was
    /// detected and, once resolved, its time to resolve and the day it was resolved (µs).
    pub(crate) fn row(&mut self, dims: Dims, detected_at: i64, resolved_at: Option<i64>, sign: i64) {
        let ttr_ms = resolved_at.map_or(0, |r| (r - detected_at) / 1000);
        let c = self.counts.entry(dims.clone()).or_default();
        c.0 += sign;
        c.1 += sign * ttr_ms;
        if let Some(r) = resolved_at {
            self.daily.entry((r / DAY_US, dims.clone())).or_default().1 += sign;
        }
        self.daily.entry((detected_at / DAY_US, dims)).or_default().0 += sign;
    }

    /// Writes the keys whose change is not zero, one multi-row upsert per rollup and per
    /// 1,000 keys (SQLite's limit on parameters).
    pub(crate) async fn write(self, conn: &mut SqliteConnection) -> Result<(), SqliteError> {
        let mut counts: Vec<_> = self.counts.into_iter().filter(|(_, v)| *v != (0, 0)).collect();
        counts.sort();
        for chunk in counts.chunks(1000) {
            let mut q = QueryBuilder::<Sqlite>::new(format!("INSERT INTO drift_counts ({DIMENSIONS}, n, ttr_sum_ms) "));
            q.push_values(chunk, |mut row, (dims, (n, ttr))| {
                for d in dims {
                    row.push_bind(d.clone());
                }
                row.push_bind(*n).push_bind(*ttr);
            });
            q.push(format!(
                " ON CONFLICT ({DIMENSIONS}) DO UPDATE SET n = n + excluded.n, \
                 ttr_sum_ms = ttr_sum_ms + excluded.ttr_sum_ms"
            ));
            q.build().execute(&mut *conn).await.ctx("updating drift_counts")?;
        }
        let mut daily: Vec<_> = self.daily.into_iter().filter(|(_, v)| *v != (0, 0)).collect();
        daily.sort();
        for chunk in daily.chunks(1000) {
            let mut q =
                QueryBuilder::<Sqlite>::new(format!("INSERT INTO drift_daily (day, {DIMENSIONS}, opened, resolved) "));
            q.push_values(chunk, |mut row, ((day, dims), (opened, resolved))| {
                row.push_bind(*day);
                for d in dims {
                    row.push_bind(d.clone());
                }
                row.push_bind(*opened).push_bind(*resolved);
            });
            q.push(format!(
                " ON CONFLICT (day, {DIMENSIONS}) DO UPDATE SET opened = opened + excluded.opened, \
                 resolved = resolved + excluded.resolved"
            ));
            q.build().execute(&mut *conn).await.ctx("updating drift_daily")?;
        }
        Ok(())
    }
}

/// The rows of `drifts` an [`adjust`] covers.
#[derive(Debug, Clone)]
pub(crate) enum Rows {
    /// The resolved rows resolved before this time (µs), which retention deletes.
    ResolvedBefore(i64),
    /// Every row.
    All,
    /// These rows.
    Ids(Vec<i64>),
}

impl Rows {
    /// Appends ` FROM drifts WHERE ...` selecting these rows.
    fn push_from(&self, q: &mut QueryBuilder<Sqlite>) {
        match self {
            Rows::ResolvedBefore(cutoff) => {
                q.push(" FROM drifts WHERE status = 'resolved' AND resolved_at < ").push_bind(*cutoff);
            }
            Rows::All => {
                q.push(" FROM drifts WHERE true");
            }
            Rows::Ids(ids) => {
                q.push(" FROM drifts WHERE id IN (SELECT value FROM json_each(")
                    .push_bind(sqlx::types::Json(ids.clone()))
                    .push("))");
            }
        }
    }
}

/// Adds `sign` (+1 or -1) times the contribution of `rows` to both rollups.
pub(crate) async fn adjust(conn: &mut SqliteConnection, sign: i64, rows: Rows) -> Result<(), SqliteError> {
    let mut q = QueryBuilder::<Sqlite>::new(format!(
        "INSERT INTO drift_counts ({DIMENSIONS}, n, ttr_sum_ms) SELECT {DIMENSIONS}, "
    ));
    q.push_bind(sign).push(" * count(*), ").push_bind(sign);
    q.push(" * COALESCE(sum((resolved_at - detected_at) / 1000), 0)");
    rows.push_from(&mut q);
    q.push(format!(
        " GROUP BY {DIMENSIONS} ON CONFLICT ({DIMENSIONS}) DO UPDATE SET n = n + excluded.n, \
         ttr_sum_ms = ttr_sum_ms + excluded.ttr_sum_ms"
    ));
    q.build().execute(&mut *conn).await.ctx("updating drift_counts")?;

    let mut q = QueryBuilder::<Sqlite>::new(format!(
        "INSERT INTO drift_daily (day, {DIMENSIONS}, opened, resolved) \
         SELECT day, {DIMENSIONS}, sum(o), sum(x) FROM (SELECT detected_at / {DAY_US} AS day, {DIMENSIONS}, "
    ));
    q.push_bind(sign).push(" AS o, 0 AS x");
    rows.push_from(&mut q);
    q.push(format!(" UNION ALL SELECT resolved_at / {DAY_US}, {DIMENSIONS}, 0, ")).push_bind(sign);
    rows.push_from(&mut q);
    // `WHERE true`: an upsert's SELECT needs a WHERE clause (SQLite's parsing ambiguity).
    q.push(format!(
        " AND resolved_at IS NOT NULL) WHERE true GROUP BY day, {DIMENSIONS} \
         ON CONFLICT (day, {DIMENSIONS}) DO UPDATE SET opened = opened + excluded.opened, \
         resolved = resolved + excluded.resolved"
    ));
    q.build().execute(&mut *conn).await.ctx("updating drift_daily")?;
    Ok(())
}

impl SqliteStore {
    /// Computes the rollups again from the rows, in one write transaction. Only needed after
    /// rows of `drifts` were written by hand (an operator's own `DELETE`, a bulk load): the
    /// store keeps them exact for every write it makes itself.
    pub async fn rebuild_rollups(&self) -> drift_model::Result<()> {
        let mut tx =
            self.writer.begin_with("BEGIN IMMEDIATE").await.ctx::<SqliteDialect>("starting the transaction")?;
        sqlx::query("DELETE FROM drift_counts")
            .execute(&mut *tx)
            .await
            .ctx::<SqliteDialect>("clearing drift_counts")?;
        sqlx::query("DELETE FROM drift_daily").execute(&mut *tx).await.ctx::<SqliteDialect>("clearing drift_daily")?;
        adjust(&mut tx, 1, Rows::All).await?;
        tx.commit().await.ctx::<SqliteDialect>("committing the rollups")?;
        Ok(())
    }
}
