//! Statistics: from the rollups (`drift_counts`, `drift_daily`, kept by triggers, see
//! `migrations/0002_rollups.sql`) through the shared [`Sql::stats_from_rollups`], or from the
//! rows when the filter names `since`.

use async_trait::async_trait;
use chrono::{DateTime, Duration, NaiveDate, Utc};
use drift_core::sink::{DriftFilter, DriftStats, TrendDay};
use drift_sink_sql::{SqlContext, SqlStats, mean_seconds};
use sqlx::{PgConnection, Postgres, QueryBuilder, Transaction};

use crate::PostgresSink;
use crate::dialect::{PgDialect, Sql};
use crate::error::PgError;

#[async_trait]
impl SqlStats for PostgresSink {
    type Dialect = PgDialect;

    /// The generated column `ttr_ms`, key of the `drifts_resolved_ttr` index.
    const TTR_MS: &'static str = "ttr_ms";

    fn ttr_source(_filter: &DriftFilter) -> &'static str {
        "drifts"
    }

    /// A read-only snapshot: the percentile's rank comes from the counts.
    async fn begin_read(&self) -> Result<Transaction<'static, Postgres>, PgError> {
        let mut tx = self.pool.begin().await.ctx("starting a read")?;
        sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            .execute(&mut *tx)
            .await
            .ctx("starting a read")?;
        Ok(tx)
    }

    /// One pass over `drifts` (`count(*)`) or `drift_counts` (`sum(n)`), with grouping sets.
    async fn open_breakdown(
        &self,
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
        let rows: Vec<(i32, String, i64)> =
            q.build_query_as().fetch_all(&mut *conn).await.ctx("counting open drifts")?;
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

    async fn daily(
        &self,
        conn: &mut PgConnection,
        filter: &DriftFilter,
        first: NaiveDate,
        today: NaiveDate,
    ) -> Result<Vec<(NaiveDate, i64, i64)>, PgError> {
        let mut q =
            QueryBuilder::<Postgres>::new("SELECT day, sum(opened)::bigint, sum(resolved)::bigint FROM drift_daily");
        Sql::push_dimensions(&mut q, filter);
        q.push(" AND day >= ").push_bind(first).push(" AND day <= ").push_bind(today).push(" GROUP BY day");
        q.build_query_as().fetch_all(&mut *conn).await.ctx("trend")
    }

    /// Computed with parallel workers (the pool turns them off for everything else).
    async fn stats_from_rows(&self, filter: &DriftFilter, now: DateTime<Utc>) -> Result<DriftStats, PgError> {
        let mut tx = self.begin_read().await?;
        // Aggregates over many rows: parallel workers pay off here (the pool turns them off).
        sqlx::query("SET LOCAL max_parallel_workers_per_gather = 2").execute(&mut *tx).await.ctx("starting a read")?;
        let mut stats = DriftStats::default();

        let mut q = QueryBuilder::<Postgres>::new("SELECT status, count(*) FROM drifts");
        Sql::push_filter(&mut q, filter);
        q.push(" GROUP BY status");
        let rows: Vec<(String, i64)> = q.build_query_as().fetch_all(&mut *tx).await.ctx("counting by status")?;
        stats.by_status = rows.into_iter().collect();

        self.open_breakdown(&mut tx, filter, &mut stats, false).await?;

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
        q.push(Self::TTR_MS).push("), 0)::bigint FROM drifts");
        Sql::push_filter(&mut q, filter);
        q.push(" AND status = 'resolved'");
        let (n, sum_ms): (i64, i64) = q.build_query_as().fetch_one(&mut *tx).await.ctx("time to resolve")?;
        stats.mean_time_to_resolve_seconds = mean_seconds(sum_ms, n);
        stats.p95_time_to_resolve_seconds = Sql::p95::<Self>(&mut tx, filter, n).await?;
        tx.commit().await.ctx("ending a read")?;
        Ok(stats)
    }
}
