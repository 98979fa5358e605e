//! Statistics: from the rollups (`drift_counts`, `drift_daily`, kept by triggers, see
//! `migrations/0002_rollups.sql`) or from the rows when the filter names `since`, through the
//! shared `Sql::stats_from_rollups` and `Sql::stats_from_rows` of `drift-sql`: what is
//! PostgreSQL's own is here.

use async_trait::async_trait;
use chrono::NaiveDate;
use drift_model::sink::{DriftFilter, DriftStats, TopPercentile};
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

    /// From `drifts` (`count(*)`), one pass with grouping sets; from the rollups (`sum(n)`), one
    /// such pass per rollup chosen by `rollup_for` (the narrow ones hold severity and namespace,
    /// type, or repository).
    async fn open_breakdown(
        &self,
        conn: &mut PgConnection,
        filter: &DriftFilter,
        stats: &mut DriftStats,
        from_rollup: bool,
    ) -> Result<(), PgError> {
        const TARGETS: [&str; 4] = ["severity", "drift_type", "namespace", "repository"];
        // The targets read from each source, in the order of TARGETS.
        let mut passes: Vec<(&'static str, Vec<&'static str>)> = Vec::new();
        for target in TARGETS {
            let source = if from_rollup { rollup_for(filter, &["status", target]) } else { "drifts" };
            match passes.iter_mut().find(|(s, _)| *s == source) {
                Some((_, targets)) => targets.push(target),
                None => passes.push((source, vec![target])),
            }
        }
        for (source, targets) in passes {
            let columns = targets.join(", ");
            let count = if from_rollup { "sum(n)::bigint" } else { "count(*)" };
            let sets = targets.iter().map(|t| format!("({t})")).collect::<Vec<_>>().join(", ");
            let mut q = QueryBuilder::<Postgres>::new(format!(
                "SELECT GROUPING({columns}) AS g, COALESCE({columns}) AS v, {count} AS c FROM {source}"
            ));
            if from_rollup {
                Sql::push_dimensions(&mut q, filter)
            } else {
                Sql::push_filter(&mut q, filter)
            }
            q.push(format!(" AND status = 'open' GROUP BY GROUPING SETS ({sets})"));
            if from_rollup {
                // Rollup keys whose rows are all gone stay with n = 0.
                q.push(" HAVING sum(n) > 0");
            }
            let rows: Vec<(i32, String, i64)> =
                q.build_query_as().fetch_all(&mut *conn).await.ctx("counting open drifts")?;
            // GROUPING(...) has a 0 bit for the column the row is grouped by (leftmost highest).
            let all = (1i32 << targets.len()) - 1;
            for (g, value, n) in rows {
                let Some(i) = (0..targets.len()).find(|i| g == all ^ (1 << (targets.len() - 1 - i))) else { continue };
                let target = match targets[i] {
                    "severity" => &mut stats.by_severity,
                    "drift_type" => &mut stats.by_type,
                    "namespace" => &mut stats.by_namespace,
                    _ => &mut stats.by_repository,
                };
                target.insert(value, n);
            }
        }
        Ok(())
    }

    fn counts_rollup(filter: &DriftFilter, columns: &[&str]) -> &'static str {
        rollup_for(filter, columns)
    }

    /// From `drift_ttr_buckets` when the filter names at most one dimension besides status: the
    /// bucket that holds the rank from the counts, then the exact values of that bucket from the
    /// `drifts_resolved_ttr` index. Other filters read the top of the index ([`Sql::p95`]).
    async fn p95_from_rollups(
        &self,
        conn: &mut PgConnection,
        filter: &DriftFilter,
        n: i64,
    ) -> Result<Option<Option<f64>>, PgError> {
        let Some(p95) = TopPercentile::p95(n) else { return Ok(Some(None)) };
        let dims: Vec<(&str, String)> = filter_columns(filter).into_iter().filter(|(c, _)| *c != "status").collect();
        let (dim, value) = match dims.as_slice() {
            [] => ("", String::new()),
            [(dim, value)] => (*dim, value.clone()),
            _ => return Ok(None),
        };
        // The values wanted are the skip-th to (skip + take - 1)-th largest (0-based): the
        // bucket is the highest whose count, with those of the buckets above it, reaches
        // skip + take, so both are in it or above it.
        let wanted = p95.skip() + p95.take();
        // A bucket has a row per cluster (the key ends with it): summed first.
        let found: Option<(i64, i64)> = sqlx::query_as(
            "SELECT bucket, through FROM ( \
               SELECT bucket, (sum(sum(n)) OVER (ORDER BY bucket DESC ROWS UNBOUNDED PRECEDING))::bigint AS through \
               FROM drift_ttr_buckets WHERE dim = $1 AND value = $2 GROUP BY bucket ORDER BY bucket DESC) AS b \
             WHERE through >= $3 ORDER BY bucket DESC LIMIT 1",
        )
        .bind(dim)
        .bind(&value)
        .bind(wanted)
        .fetch_optional(&mut *conn)
        .await
        .ctx("time to resolve")?;
        let Some((bucket, through)) = found else { return Ok(None) };
        // `through` values are >= bucket's lowest value: read the bucket upwards, from its
        // lowest value, to the wanted ones.
        let mut q = QueryBuilder::<Postgres>::new("SELECT ttr_ms FROM drifts");
        Sql::push_dimensions(&mut q, filter);
        q.push(" AND status = 'resolved' AND ttr_ms >= ").push_bind(bucket);
        q.push(" ORDER BY ttr_ms LIMIT ").push_bind(p95.take()).push(" OFFSET ").push_bind(through - wanted);
        let ascending: Vec<i64> = q.build_query_scalar().fetch_all(&mut *conn).await.ctx("time to resolve")?;
        if ascending.len() as i64 != p95.take() {
            return Ok(None);
        }
        let descending: Vec<f64> = ascending.iter().rev().map(|ms| *ms as f64 / 1000.0).collect();
        Ok(Some(p95.interpolate(&descending)))
    }

    async fn daily(
        &self,
        conn: &mut PgConnection,
        filter: &DriftFilter,
        first: NaiveDate,
        today: NaiveDate,
    ) -> Result<Vec<(NaiveDate, i64, i64)>, PgError> {
        let source = daily_for(filter);
        let mut q = QueryBuilder::<Postgres>::new(format!(
            "SELECT day, sum(opened)::bigint, sum(resolved)::bigint FROM {source}"
        ));
        Sql::push_dimensions(&mut q, filter);
        q.push(" AND day >= ").push_bind(first).push(" AND day <= ").push_bind(today).push(" GROUP BY day");
        q.build_query_as().fetch_all(&mut *conn).await.ctx("trend")
    }
}

/// The narrow rollups of counts (migration 0014), fewest keys first, with the columns a figure
/// or a filter may use; each also has `n` and `ttr_sum_ms`, and `drift_counts_kinds` the cluster
/// last in its key, only to keep the writers of different clusters apart (not used to filter:
/// `drift_counts_scope` leads with it). Every read sums over the columns it does not group by.
/// `drift_counts` has every dimension.
const NARROW: [(&str, &[&str]); 4] = [
    ("drift_counts_kinds", &["status", "severity", "drift_type", "repository"]),
    ("drift_counts_scope", &["status", "cluster", "namespace", "severity"]),
    ("drift_counts_type", &["status", "cluster", "namespace", "severity", "drift_type"]),
    ("drift_counts_repo", &["status", "cluster", "namespace", "severity", "repository"]),
];

/// The narrowest rollup of counts with `columns` and the columns the filter names (every field
/// but `since`, which no rollup has: such filters read the rows).
pub(crate) fn rollup_for(filter: &DriftFilter, columns: &[&str]) -> &'static str {
    let named = filter_columns(filter);
    let needed = || columns.iter().copied().chain(named.iter().map(|(c, _)| *c));
    NARROW.iter().find(|(_, has)| needed().all(|c| has.contains(&c))).map_or("drift_counts", |(name, _)| name)
}

/// The narrowest rollup of the trend for a filter: `drift_daily_status` (day, status,
/// severity), `drift_daily_scope` (and cluster, namespace) or `drift_daily`.
fn daily_for(filter: &DriftFilter) -> &'static str {
    let named = filter_columns(filter);
    let within = |has: &[&str]| named.iter().all(|(c, _)| has.contains(c));
    if within(&["status", "severity"]) {
        "drift_daily_status"
    } else if within(&["status", "cluster", "namespace", "severity"]) {
        "drift_daily_scope"
    } else {
        "drift_daily"
    }
}

/// The rollup columns a filter names, with their values.
fn filter_columns(filter: &DriftFilter) -> Vec<(&'static str, String)> {
    [
        ("status", filter.status.map(|s| s.as_str().to_owned())),
        ("severity", filter.severity.map(|s| s.as_str().to_owned())),
        ("drift_type", filter.drift_type.map(|t| t.as_str().to_owned())),
        ("namespace", filter.namespace.clone()),
        ("repository", filter.repository.clone()),
        ("cluster", filter.cluster.clone()),
        ("resource_kind", filter.kind.clone()),
    ]
    .into_iter()
    .filter_map(|(c, v)| v.map(|v| (c, v)))
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use drift_model::Severity;
    use drift_model::sink::DriftStatus;

    #[test]
    fn a_statistic_reads_the_narrowest_rollup_with_its_columns_and_the_filters() {
        let none = DriftFilter::default();
        assert_eq!(rollup_for(&none, &["status"]), "drift_counts_kinds");
        assert_eq!(rollup_for(&none, &["status", "drift_type"]), "drift_counts_kinds");
        assert_eq!(rollup_for(&none, &["status", "repository"]), "drift_counts_kinds");
        assert_eq!(rollup_for(&none, &["status", "namespace"]), "drift_counts_scope");
        let cluster = DriftFilter { cluster: Some("c".into()), ..Default::default() };
        assert_eq!(rollup_for(&cluster, &["status", "severity"]), "drift_counts_scope");
        assert_eq!(rollup_for(&cluster, &["status", "drift_type"]), "drift_counts_type");
        assert_eq!(rollup_for(&cluster, &["status", "repository"]), "drift_counts_repo");
        assert_eq!(daily_for(&none), "drift_daily_status");
        assert_eq!(daily_for(&cluster), "drift_daily_scope");
        let scoped = DriftFilter {
            status: Some(DriftStatus::Open),
            cluster: Some("c".into()),
            namespace: Some("n".into()),
            severity: Some(Severity::High),
            ..Default::default()
        };
        assert_eq!(rollup_for(&scoped, &["status", "cluster", "namespace", "severity"]), "drift_counts_scope");
        let repo = DriftFilter { repository: Some("r".into()), ..Default::default() };
        assert_eq!(rollup_for(&repo, &["status"]), "drift_counts_kinds");
        assert_eq!(
            rollup_for(&repo, &["status", "drift_type", "namespace"]),
            "drift_counts",
            "no narrow rollup has all"
        );
        assert_eq!(daily_for(&repo), "drift_daily");
        let kind = DriftFilter { kind: Some("Deployment".into()), ..Default::default() };
        assert_eq!(rollup_for(&kind, &["status"]), "drift_counts");
    }
}
