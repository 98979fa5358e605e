//! Statistics: from the rollups (`drift_counts`, `drift_daily`, kept by triggers, see
//! `migrations/0002_rollups.sql`) or from the rows when the filter names `since`, through the
//! shared `Sql::stats_from_rollups` and `Sql::stats_from_rows` of `drift-sql`: what is
//! PostgreSQL's own is here.

use async_trait::async_trait;
use chrono::NaiveDate;
use drift_model::sink::{DriftFilter, DriftStats};
use drift_sql::{SqlContext, SqlStats};
use sqlx::{PgConnection, Postgres, QueryBuilder, Transaction};

use crate::PostgresStore;
use crate::dialect::{PgDialect, Sql};
use crate::error::PgError;

#[async_trait]
impl SqlStats for PostgresStore {
    type Dialect = PgDialect;

    /// The generated column `ttr_ms`, key of the `drifts_resolved_ttr` index.
    const TTR_MS: &'static str = "ttr_ms";

    fn ttr_source(_filter: &DriftFilter) -> &'static str {
        "drifts"
    }

    fn day_of(column: &str) -> String {
        format!("CAST(({column} AT TIME ZONE 'UTC')::date AS text)")
    }

    /// A read-only snapshot: the percentile's rank comes from the counts. Aggregates over many
    /// rows get parallel workers back (the pool turns them off for the listings).
    async fn begin_read(&self, whole_rows: bool) -> Result<Transaction<'static, Postgres>, PgError> {
        let mut tx = self.pool.begin().await.ctx("starting a read")?;
        sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            .execute(&mut *tx)
            .await
            .ctx("starting a read")?;
        if whole_rows {
            sqlx::query("SET LOCAL max_parallel_workers_per_gather = 2")
                .execute(&mut *tx)
                .await
                .ctx("starting a read")?;
        }
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
}
