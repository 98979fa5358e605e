//! Statistics: from the rollups (`drift_counts`, `drift_daily`, kept by triggers, see
//! `migrations/0002_rollups.sql`), or from the rows when the filter names `since`.

use chrono::{DateTime, Duration, NaiveDate, Utc};
use drift_core::Result;
use drift_core::sink::{DriftFilter, DriftStats, TopPercentile, TrendDay};
use sqlx::{PgConnection, Postgres, QueryBuilder};

use async_trait::async_trait;
use drift_sink_sql::{SqlContext, SqlStats};

use crate::PostgresSink;
use crate::dialect::{PgDialect, Sql};
use crate::error::PgError;

/// Time to resolve in whole milliseconds, truncated (as the reference store computes it): the
/// generated column `ttr_ms`, key of the `drifts_resolved_ttr` index the percentile reads.
const TTR_MS: &str = "ttr_ms";

/// The continuous 95th percentile of the time to resolve of the `n` resolved rows the filter
/// keeps: the two order statistics around its rank, read from the top of the
/// `drifts_resolved_ttr` index (about 5% of it), interpolated.
async fn p95(conn: &mut PgConnection, filter: &DriftFilter, n: i64) -> Result<Option<f64>, PgError> {
    let Some(p95) = TopPercentile::p95(n) else { return Ok(None) };
    let mut q = QueryBuilder::<Postgres>::new("SELECT ");
    q.push(TTR_MS).push(" AS ms FROM drifts");
    Sql::push_filter(&mut q, filter);
    q.push(" AND status = 'resolved' ORDER BY ms DESC OFFSET ").push_bind(p95.skip());
    q.push(" LIMIT ").push_bind(p95.take());
    let top: Vec<i64> = q.build_query_scalar().fetch_all(&mut *conn).await.ctx("time to resolve")?;
    Ok(p95.interpolate(&top.iter().map(|ms| *ms as f64 / 1000.0).collect::<Vec<_>>()))
}

/// Open rows by severity, type, namespace and repository, from `source` (`drifts` with
/// `count(*)`, or `drift_counts` with `sum(n)`), in one pass.
async fn open_breakdown(
    conn: &mut PgConnection,
    filter: &DriftFilter,
    stats: &mut DriftStats,
    from_rollup: bool,
) -> Result<(), PgError> {
    let (count, source) = if from_rollup { ("sum(n)::bigint", "drift_counts") } else { ("count(*)", "drifts") };
    let mut q = QueryBuilder::<Postgres>::new(format!(
        "SELECT GROUPING(severity, drift_type, namespace, repository) AS g, \
         COALESCE(severity, drift_type, namespace, repository) AS v, {count} AS c FROM {source}"
    ));
    if from_rollup {
        Sql::push_dimensions(&mut q, filter)
    } else {
        Sql::push_filter(&mut q, filter)
    }
    q.push(" AND status = 'open' GROUP BY GROUPING SETS ((severity), (drift_type), (namespace), (repository))");
    if from_rollup {
        // Rollup keys whose rows are all gone stay with n = 0.
        q.push(" HAVING sum(n) > 0");
    }
    let rows: Vec<(i32, String, i64)> = q.build_query_as().fetch_all(&mut *conn).await.ctx("counting open drifts")?;
    for (g, value, n) in rows {
        // GROUPING(...) has a 0 bit for the column the row is grouped by (leftmost = bit 3).
        let target = match g {
            0b0111 => &mut stats.by_severity,
            0b1011 => &mut stats.by_type,
            0b1101 => &mut stats.by_namespace,
            0b1110 => &mut stats.by_repository,
            _ => continue,
        };
        target.insert(value, n);
    }
    Ok(())
}

#[async_trait]
impl SqlStats for PostgresSink {
    type Dialect = PgDialect;

    /// Statistics computed from the rollups: a few small aggregates and one short index read,
    /// whatever the size of the history. Every filter field but `since` is a rollup dimension.
    async fn stats_from_rollups(&self, filter: &DriftFilter, now: DateTime<Utc>) -> Result<DriftStats, PgError> {
        debug_assert!(filter.since.is_none(), "the rollups do not keep last_seen");
        let mut tx = self.pool.begin().await.ctx("starting a read")?;
        // One snapshot: the percentile's rank comes from the counts.
        sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            .execute(&mut *tx)
            .await
            .ctx("starting a read")?;
        let mut stats = DriftStats::default();

        let mut q =
            QueryBuilder::<Postgres>::new("SELECT status, sum(n)::bigint, sum(ttr_sum_ms)::bigint FROM drift_counts");
        Sql::push_dimensions(&mut q, filter);
        q.push(" GROUP BY status HAVING sum(n) > 0");
        let rows: Vec<(String, i64, i64)> = q.build_query_as().fetch_all(&mut *tx).await.ctx("counting by status")?;
        let (mut resolved, mut ttr_sum_ms) = (0, 0);
        for (status, n, ttr) in rows {
            if status == "resolved" {
                (resolved, ttr_sum_ms) = (n, ttr);
            }
            stats.by_status.insert(status, n);
        }

        open_breakdown(&mut tx, filter, &mut stats, true).await?;

        let (first, today) = TrendDay::window(now);
        let mut q =
            QueryBuilder::<Postgres>::new("SELECT day, sum(opened)::bigint, sum(resolved)::bigint FROM drift_daily");
        Sql::push_dimensions(&mut q, filter);
        q.push(" AND day >= ").push_bind(first).push(" AND day <= ").push_bind(today).push(" GROUP BY day");
        let days: Vec<(NaiveDate, i64, i64)> = q.build_query_as().fetch_all(&mut *tx).await.ctx("trend")?;
        stats.trend = TrendDay::week(now, days);

        if resolved > 0 {
            stats.mean_time_to_resolve_seconds = Some(ttr_sum_ms as f64 / 1000.0 / resolved as f64);
        }
        stats.p95_time_to_resolve_seconds = p95(&mut tx, filter, resolved).await?;
        tx.commit().await.ctx("ending a read")?;
        Ok(stats)
    }

    /// Statistics computed from the rows themselves ([`drift_sink_sql::SqlStore::stats_from_rows`]).
    async fn stats_from_rows(&self, filter: &DriftFilter, now: DateTime<Utc>) -> Result<DriftStats, PgError> {
        let mut tx = self.pool.begin().await.ctx("starting a read")?;
        sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            .execute(&mut *tx)
            .await
            .ctx("starting a read")?;
        // Aggregates over many rows: parallel workers pay off here (the pool turns them off).
        sqlx::query("SET LOCAL max_parallel_workers_per_gather = 2").execute(&mut *tx).await.ctx("starting a read")?;
        let mut stats = DriftStats::default();

        let mut q = QueryBuilder::<Postgres>::new("SELECT status, count(*) FROM drifts");
        Sql::push_filter(&mut q, filter);
        q.push(" GROUP BY status");
        let rows: Vec<(String, i64)> = q.build_query_as().fetch_all(&mut *tx).await.ctx("counting by status")?;
        stats.by_status = rows.into_iter().collect();

        open_breakdown(&mut tx, filter, &mut stats, false).await?;

        let (first, _) = TrendDay::window(now);
        let start = first.and_hms_opt(0, 0, 0).unwrap_or_default().and_utc();
        let end = start + Duration::days(7);
        let mut days = Vec::new();
        for (column, new) in [("detected_at", true), ("resolved_at", false)] {
            let mut q = QueryBuilder::<Postgres>::new("SELECT (");
            q.push(column).push(" AT TIME ZONE 'UTC')::date AS day, count(*) FROM drifts");
            Sql::push_filter(&mut q, filter);
            q.push(" AND ").push(column).push(" >= ").push_bind(start);
            q.push(" AND ").push(column).push(" < ").push_bind(end);
            q.push(" GROUP BY day");
            let rows: Vec<(NaiveDate, i64)> = q.build_query_as().fetch_all(&mut *tx).await.ctx("trend")?;
            days.extend(rows.into_iter().map(|(day, n)| if new { (day, n, 0) } else { (day, 0, n) }));
        }
        stats.trend = TrendDay::week(now, days);

        let mut q = QueryBuilder::<Postgres>::new("SELECT count(*), COALESCE(sum(");
        q.push(TTR_MS).push("), 0)::bigint FROM drifts");
        Sql::push_filter(&mut q, filter);
        q.push(" AND status = 'resolved'");
        let (n, sum_ms): (i64, i64) = q.build_query_as().fetch_one(&mut *tx).await.ctx("time to resolve")?;
        if n > 0 {
            stats.mean_time_to_resolve_seconds = Some(sum_ms as f64 / 1000.0 / n as f64);
        }
        stats.p95_time_to_resolve_seconds = p95(&mut tx, filter, n).await?;
        tx.commit().await.ctx("ending a read")?;
        Ok(stats)
    }
}
