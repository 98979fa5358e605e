//! Statistics: from the rollups (`drift_counts`, `drift_daily`, kept by [`crate::rollup`]), or
//! from the rows when the filter names `since`.

use chrono::{DateTime, NaiveDate, Utc};
use drift_core::Result;
use drift_core::sink::{DriftFilter, DriftStats, TopPercentile, TrendDay};
use sqlx::{QueryBuilder, Sqlite, SqliteConnection};

use async_trait::async_trait;
use drift_sink_sql::{SqlContext, SqlStats};

use crate::SqliteSink;
use crate::dialect::{Sql, SqliteDialect, micros};
use crate::error::SqliteError;
use crate::rollup::DAY_US;

/// Time to resolve in whole milliseconds, truncated (as the reference store computes it). The
/// same expression as the first column of the `drifts_resolved_ttr` index, which the
/// percentile reads.
const TTR_MS: &str = "((resolved_at - detected_at) / 1000)";

/// Midnight UTC starting `day`, in µs.
fn day_start(day: NaiveDate) -> i64 {
    micros(day.and_hms_opt(0, 0, 0).unwrap_or_default().and_utc())
}

/// The continuous 95th percentile of the time to resolve of the `n` resolved rows the filter
/// keeps: the two order statistics around its rank, read from the top of the
/// `drifts_resolved_ttr` index (about 5% of it), interpolated.
async fn p95(conn: &mut SqliteConnection, filter: &DriftFilter, n: i64) -> Result<Option<f64>, SqliteError> {
    let Some(p95) = TopPercentile::p95(n) else { return Ok(None) };
    // The planner would rather read every resolved row through another index and sort them;
    // the walk from the top of this one stops after about 5% of it, whatever the filter. With
    // `since` (last_seen is not in the index), the planner chooses.
    let index = if filter.since.is_none() { " INDEXED BY drifts_resolved_ttr" } else { "" };
    let mut q = QueryBuilder::<Sqlite>::new(format!("SELECT {TTR_MS} AS ms FROM drifts{index}"));
    Sql::push_filter(&mut q, filter);
    q.push(" AND status = 'resolved' ORDER BY ms DESC LIMIT ").push_bind(p95.take());
    q.push(" OFFSET ").push_bind(p95.skip());
    let top: Vec<i64> = q.build_query_scalar().fetch_all(&mut *conn).await.ctx("time to resolve")?;
    Ok(p95.interpolate(&top.iter().map(|ms| *ms as f64 / 1000.0).collect::<Vec<_>>()))
}

/// Open rows by severity, type, namespace and repository, from `drift_counts` (`sum(n)`) or
/// from `drifts` (`count(*)`).
async fn open_breakdown(
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
    let rows: Vec<(i64, String, i64)> = q.build_query_as().fetch_all(&mut *conn).await.ctx("counting open drifts")?;
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

#[async_trait]
impl SqlStats for SqliteSink {
    type Dialect = SqliteDialect;

    /// Statistics computed from the rollups: a few small aggregates and one short index read,
    /// whatever the size of the history. Every filter field but `since` is a rollup dimension.
    async fn stats_from_rollups(&self, filter: &DriftFilter, now: DateTime<Utc>) -> Result<DriftStats, SqliteError> {
        debug_assert!(filter.since.is_none(), "the rollups do not keep last_seen");
        // One read transaction, so every figure comes from the same snapshot.
        let mut conn = self.reader.begin().await.ctx("starting a read")?;
        let mut stats = DriftStats::default();

        let mut q = QueryBuilder::<Sqlite>::new("SELECT status, sum(n), sum(ttr_sum_ms) FROM drift_counts");
        Sql::push_dimensions(&mut q, filter);
        q.push(" GROUP BY status HAVING sum(n) > 0");
        let rows: Vec<(String, i64, i64)> = q.build_query_as().fetch_all(&mut *conn).await.ctx("counting by status")?;
        let (mut resolved, mut ttr_sum_ms) = (0, 0);
        for (status, n, ttr) in rows {
            if status == "resolved" {
                (resolved, ttr_sum_ms) = (n, ttr);
            }
            stats.by_status.insert(status, n);
        }

        open_breakdown(&mut conn, filter, &mut stats, true).await?;

        let (first, today) = TrendDay::window(now);
        let mut q = QueryBuilder::<Sqlite>::new("SELECT day, sum(opened), sum(resolved) FROM drift_daily");
        Sql::push_dimensions(&mut q, filter);
        q.push(" AND day >= ").push_bind(day_start(first) / DAY_US);
        q.push(" AND day <= ").push_bind(day_start(today) / DAY_US).push(" GROUP BY day");
        let rows: Vec<(i64, i64, i64)> = q.build_query_as().fetch_all(&mut *conn).await.ctx("trend")?;
        let days = rows
            .into_iter()
            .map(|(day, new, resolved)| {
                DateTime::from_timestamp_micros(day * DAY_US)
                    .map(|t| (t.date_naive(), new, resolved))
                    .ok_or_else(|| SqliteError::corrupt(0, "drift_daily.day", format!("{day} is out of range")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        stats.trend = TrendDay::week(now, days);

        if resolved > 0 {
            stats.mean_time_to_resolve_seconds = Some(ttr_sum_ms as f64 / 1000.0 / resolved as f64);
        }
        stats.p95_time_to_resolve_seconds = p95(&mut conn, filter, resolved).await?;
        conn.rollback().await.ctx("ending a read")?;
        Ok(stats)
    }

    /// Statistics computed from the rows themselves ([`drift_sink_sql::SqlStore::stats_from_rows`]).
    async fn stats_from_rows(&self, filter: &DriftFilter, now: DateTime<Utc>) -> Result<DriftStats, SqliteError> {
        let mut conn = self.reader.begin().await.ctx("starting a read")?;
        let mut stats = DriftStats::default();

        let mut q = QueryBuilder::<Sqlite>::new("SELECT status, count(*) FROM drifts");
        Sql::push_filter(&mut q, filter);
        q.push(" GROUP BY status");
        let rows: Vec<(String, i64)> = q.build_query_as().fetch_all(&mut *conn).await.ctx("counting by status")?;
        stats.by_status = rows.into_iter().collect();

        open_breakdown(&mut conn, filter, &mut stats, false).await?;

        let (first, _) = TrendDay::window(now);
        let (start, end) = (day_start(first), day_start(first) + 7 * DAY_US);
        let mut days = Vec::new();
        for (column, new) in [("detected_at", true), ("resolved_at", false)] {
            let mut q = QueryBuilder::<Sqlite>::new(format!(
                "SELECT date({column} / 1000000, 'unixepoch') AS day, count(*) FROM drifts"
            ));
            Sql::push_filter(&mut q, filter);
            q.push(format!(" AND {column} >= ")).push_bind(start);
            q.push(format!(" AND {column} < ")).push_bind(end);
            q.push(" GROUP BY day");
            let rows: Vec<(String, i64)> = q.build_query_as().fetch_all(&mut *conn).await.ctx("trend")?;
            for (day, n) in rows {
                let day =
                    NaiveDate::parse_from_str(&day, "%Y-%m-%d").map_err(|e| SqliteError::corrupt(0, column, e))?;
                days.push(if new { (day, n, 0) } else { (day, 0, n) });
            }
        }
        stats.trend = TrendDay::week(now, days);

        let mut q = QueryBuilder::<Sqlite>::new(format!("SELECT count(*), COALESCE(sum({TTR_MS}), 0) FROM drifts"));
        Sql::push_filter(&mut q, filter);
        q.push(" AND status = 'resolved'");
        let (n, sum_ms): (i64, i64) = q.build_query_as().fetch_one(&mut *conn).await.ctx("time to resolve")?;
        if n > 0 {
            stats.mean_time_to_resolve_seconds = Some(sum_ms as f64 / 1000.0 / n as f64);
        }
        stats.p95_time_to_resolve_seconds = p95(&mut conn, filter, n).await?;
        conn.rollback().await.ctx("ending a read")?;
        Ok(stats)
    }
}
