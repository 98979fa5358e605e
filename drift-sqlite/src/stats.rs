//! Statistics: from the rollups (`drift_counts`, `drift_daily`, kept by [`crate::rollup`])
//! or from the rows when the filter names `since`, through the shared `Sql::stats_from_rollups`
//! and `Sql::stats_from_rows` of `drift-sql`: what is SQLite's own is here.

use async_trait::async_trait;
use chrono::{DateTime, NaiveDate};
use drift_model::sink::{DriftFilter, DriftStats};
use drift_sql::{SqlContext, SqlStats};
use sqlx::{QueryBuilder, Sqlite, SqliteConnection, Transaction};

use crate::SqliteStore;
use crate::dialect::{Sql, SqliteDialect, micros};
use crate::error::SqliteError;
use crate::rollup::DAY_US;

/// Midnight UTC starting `day`, in µs.
fn day_start(day: NaiveDate) -> i64 {
    micros(day.and_hms_opt(0, 0, 0).unwrap_or_default().and_utc())
}

#[async_trait]
impl SqlStats for SqliteStore {
    type Dialect = SqliteDialect;

    /// The same expression as the first column of the `drifts_resolved_ttr` index.
    const TTR_MS: &'static str = "((resolved_at - detected_at) / 1000)";

    /// The planner would rather read every resolved row through another index and sort them;
    /// the walk from the top of this one stops after about 5% of it, whatever the filter. With
    /// `since` (last_seen is not in the index), the planner chooses.
    fn ttr_source(filter: &DriftFilter) -> &'static str {
        if filter.since.is_none() { "drifts INDEXED BY drifts_resolved_ttr" } else { "drifts" }
    }

    fn day_of(column: &str) -> String {
        format!("date({column} / 1000000, 'unixepoch')")
    }

    /// A read transaction on the read-only pool: one snapshot of the WAL.
    async fn begin_read(&self, _whole_rows: bool) -> Result<Transaction<'static, Sqlite>, SqliteError> {
        self.reader.begin().await.ctx("starting a read")
    }

    /// One `UNION ALL` of four aggregates over `drifts` (`count(*)`) or `drift_counts`
    /// (`sum(n)`): SQLite has no grouping sets.
    async fn open_breakdown(
        &self,
        conn: &mut SqliteConnection,
        filter: &DriftFilter,
        stats: &mut DriftStats,
        from_rollup: bool,
    ) -> Result<(), SqliteError> {
        let (count, source) = if from_rollup { ("sum(n)", "drift_counts") } else { ("count(*)", "drifts") };
        let mut q = QueryBuilder::<Sqlite>::new("");
        for (tag, column) in [(0, "severity"), (1, "drift_type"), (2, "namespace"), (3, "repository")] {
            if tag > 0 {
                q.push(" UNION ALL ");
            }
            q.push(format!("SELECT {tag}, {column}, {count} FROM {source}"));
            if from_rollup {
                Sql::push_dimensions(&mut q, filter)
            } else {
                Sql::push_filter(&mut q, filter)
            }
            // Rollup keys whose rows are all gone stay with n = 0.
            q.push(format!(" AND status = 'open' GROUP BY {column} HAVING {count} > 0"));
        }
        let rows: Vec<(i64, String, i64)> =
            q.build_query_as().fetch_all(&mut *conn).await.ctx("counting open drifts")?;
        for (tag, value, n) in rows {
            let target = match tag {
                0 => &mut stats.by_severity,
                1 => &mut stats.by_type,
                2 => &mut stats.by_namespace,
                _ => &mut stats.by_repository,
            };
            target.insert(value, n);
        }
        Ok(())
    }

    /// Day numbers (µs since the epoch / `DAY_US`) read back as dates.
    async fn daily(
        &self,
        conn: &mut SqliteConnection,
        filter: &DriftFilter,
        first: NaiveDate,
        today: NaiveDate,
    ) -> Result<Vec<(NaiveDate, i64, i64)>, SqliteError> {
        let mut q = QueryBuilder::<Sqlite>::new("SELECT day, sum(opened), sum(resolved) FROM drift_daily");
        Sql::push_dimensions(&mut q, filter);
        q.push(" AND day >= ").push_bind(day_start(first) / DAY_US);
        q.push(" AND day <= ").push_bind(day_start(today) / DAY_US).push(" GROUP BY day");
        let rows: Vec<(i64, i64, i64)> = q.build_query_as().fetch_all(&mut *conn).await.ctx("trend")?;
        rows.into_iter()
            .map(|(day, new, resolved)| {
                DateTime::from_timestamp_micros(day * DAY_US)
                    .map(|t| (t.date_naive(), new, resolved))
                    .ok_or_else(|| SqliteError::corrupt(0, "drift_daily.day", format!("{day} is out of range")))
            })
            .collect()
    }
}
