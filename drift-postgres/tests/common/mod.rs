//! The harness of the shared store suite and helpers of the PostgreSQL-only tests: a
//! throwaway server, fresh stores, the rollups checked against the rows.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use async_trait::async_trait;
use drift_model::sink::RecordOutcome;
use drift_model::{DriftSink, ScanReport};
use drift_postgres::{PostgresConfig, PostgresStore};
use drift_sql::testkit::{Harness, SqlHarness};
use drift_testkit_pg::PgServer;
use sqlx::Connection;
use sqlx::postgres::PgPool;

#[allow(unused_imports)]
pub use drift_testkit::fixtures::{report as scan, stats_filters, t};
#[allow(unused_imports)]
pub use drift_testkit::store::{deployment, open, random_drifts, replicas, rows, sequence, world};

/// Starts a server (one per test process).
pub fn server() -> PgServer {
    PgServer::start().expect("start a throwaway PostgreSQL (scripts/install-postgres.sh installs it)")
}

/// A store over a fresh database of `server`, migrations applied.
pub async fn fresh(server: &PgServer) -> PostgresStore {
    let url = server.create_database().await.expect("create a database");
    PostgresStore::connect(&url).await.expect("connect")
}

/// The store suite's view of PostgreSQL: one server per test, a database per store.
pub struct Pg {
    pub server: PgServer,
}

/// A harness with a server of its own.
pub fn harness() -> Harness<Pg> {
    Harness(Pg { server: server() })
}

#[async_trait]
impl SqlHarness for Pg {
    type Store = PostgresStore;
    const OPEN_ROW_CONSTRAINT: &'static str = "drifts_live_fingerprint";

    async fn open(&self, retention_days: Option<u32>) -> PostgresStore {
        let url = self.server.create_database().await.unwrap();
        let config = PostgresConfig { retention_days, ..PostgresConfig::new(&url) };
        PostgresStore::from_config(&config).await.unwrap()
    }

    async fn reopen(&self, store: &PostgresStore) -> PostgresStore {
        let options = store.pool().connect_options().as_ref().clone();
        let pool = sqlx::postgres::PgPoolOptions::new().max_connections(5).connect_with(options).await.unwrap();
        PostgresStore::from_pool(pool, None)
    }

    fn pool(store: &PostgresStore) -> &PgPool {
        store.pool()
    }

    async fn assert_rollups_match_rows(&self, store: &PostgresStore) {
        assert_rollups_match_rows(store).await;
    }

    /// Both writers are held at their first statement by a lock on `scans`, then let go
    /// together.
    async fn race(&self, a: &ScanReport, b: &ScanReport) -> Option<(RecordOutcome, RecordOutcome, PostgresStore)> {
        let url = self.server.create_database().await.unwrap();
        let (wa, wb) = (PostgresStore::connect(&url).await.unwrap(), PostgresStore::connect(&url).await.unwrap());
        let mut gate = sqlx::PgConnection::connect(&url).await.unwrap();
        sqlx::query("BEGIN").execute(&mut gate).await.unwrap();
        sqlx::query("LOCK TABLE scans IN EXCLUSIVE MODE").execute(&mut gate).await.unwrap();
        let (a, b) = (a.clone(), b.clone());
        let (ta, tb) =
            (tokio::spawn(async move { wa.record(&a).await }), tokio::spawn(async move { wb.record(&b).await }));
        let waiting =
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'drift' AND wait_event_type = 'Lock'";
        wait_for(&url, waiting, 2).await;
        sqlx::query("COMMIT").execute(&mut gate).await.unwrap();
        let (oa, ob) = (ta.await.unwrap().unwrap(), tb.await.unwrap().unwrap());
        Some((oa, ob, PostgresStore::connect(&url).await.unwrap()))
    }
}

/// Polls a count until it reaches `want` (a condition, not a delay), for at most a minute.
pub async fn wait_for(url: &str, sql: &'static str, want: i64) {
    let mut c = sqlx::PgConnection::connect(url).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let n: i64 = sqlx::query_scalar(sql).fetch_one(&mut c).await.unwrap();
        if n >= want {
            return;
        }
        assert!(Instant::now() < deadline, "condition not reached: {sql}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A rollup key and its figures, as read from a rollup table or recomputed from the rows.
type Counts = (String, String, String, String, String, String, String, i64, i64);
type Daily = (String, String, String, String, String, String, String, String, i64, i64);

/// Checks that the rollups hold exactly what the rows of `drifts` add up to (keys that net to
/// zero aside), and that no count went negative. (A sum of times to resolve may: racing
/// scanners can resolve a drift with a scan that finished before the one that opened it.)
pub async fn assert_rollups_match_rows(store: &PostgresStore) {
    let pool = store.pool();
    let stored: Vec<Counts> = sqlx::query_as(
        "SELECT cluster, repository, namespace, resource_kind, drift_type, severity, status, n, ttr_sum_ms \
         FROM drift_counts WHERE n <> 0 OR ttr_sum_ms <> 0 ORDER BY 1, 2, 3, 4, 5, 6, 7",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    let rows: Vec<Counts> = sqlx::query_as(
        "SELECT cluster, repository, namespace, resource_kind, drift_type, severity, status, count(*), \
         COALESCE(sum(trunc(extract(epoch FROM resolved_at - detected_at) * 1000)::bigint), 0)::bigint \
         FROM drifts GROUP BY 1, 2, 3, 4, 5, 6, 7 ORDER BY 1, 2, 3, 4, 5, 6, 7",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    assert_eq!(stored, rows, "drift_counts against the rows");
    let stored: Vec<Daily> = sqlx::query_as(
        "SELECT day::text, cluster, repository, namespace, resource_kind, drift_type, severity, status, opened, \
         resolved FROM drift_daily WHERE opened <> 0 OR resolved <> 0 ORDER BY 1, 2, 3, 4, 5, 6, 7, 8",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    let rows: Vec<Daily> = sqlx::query_as(
        "SELECT day::text, cluster, repository, namespace, resource_kind, drift_type, severity, status, \
         sum(o)::bigint, sum(x)::bigint FROM ( \
           SELECT (detected_at AT TIME ZONE 'UTC')::date AS day, cluster, repository, namespace, resource_kind, \
             drift_type, severity, status, 1 AS o, 0 AS x FROM drifts \
           UNION ALL \
           SELECT (resolved_at AT TIME ZONE 'UTC')::date, cluster, repository, namespace, resource_kind, \
             drift_type, severity, status, 0, 1 FROM drifts WHERE resolved_at IS NOT NULL) AS e \
         GROUP BY 1, 2, 3, 4, 5, 6, 7, 8 ORDER BY 1, 2, 3, 4, 5, 6, 7, 8",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    assert_eq!(stored, rows, "drift_daily against the rows");
    // The narrow rollups of migration 0014, each against a recount of the rows.
    for (table, keys) in [
        ("drift_counts_kinds", "status, severity, drift_type, repository, cluster"),
        ("drift_counts_scope", "status, cluster, namespace, severity"),
        ("drift_counts_type", "status, cluster, namespace, severity, drift_type"),
        ("drift_counts_repo", "status, cluster, namespace, severity, repository"),
    ] {
        let stored: Vec<(String, i64, i64)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT concat_ws('/', {keys}), n, ttr_sum_ms FROM {table} WHERE n <> 0 OR ttr_sum_ms <> 0 ORDER BY 1"
        )))
        .fetch_all(pool)
        .await
        .unwrap();
        let rows: Vec<(String, i64, i64)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT concat_ws('/', {keys}), count(*), \
             COALESCE(sum(trunc(extract(epoch FROM resolved_at - detected_at) * 1000)::bigint), 0)::bigint \
             FROM drifts GROUP BY {keys} ORDER BY 1"
        )))
        .fetch_all(pool)
        .await
        .unwrap();
        assert_eq!(stored, rows, "{table} against the rows");
    }
    for (table, keys) in [
        ("drift_daily_status", "status, severity, cluster"),
        ("drift_daily_scope", "status, cluster, namespace, severity"),
    ] {
        let stored: Vec<(String, i64, i64)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT concat_ws('/', day, {keys}), opened, resolved FROM {table} \
             WHERE opened <> 0 OR resolved <> 0 ORDER BY 1"
        )))
        .fetch_all(pool)
        .await
        .unwrap();
        let rows: Vec<(String, i64, i64)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT concat_ws('/', day, {keys}), sum(o)::bigint, sum(x)::bigint FROM ( \
               SELECT (detected_at AT TIME ZONE 'UTC')::date AS day, {keys}, 1 AS o, 0 AS x FROM drifts \
               UNION ALL \
               SELECT (resolved_at AT TIME ZONE 'UTC')::date, {keys}, 0, 1 FROM drifts \
               WHERE resolved_at IS NOT NULL) AS e \
             GROUP BY day, {keys} ORDER BY 1"
        )))
        .fetch_all(pool)
        .await
        .unwrap();
        assert_eq!(stored, rows, "{table} against the rows");
    }
    // The buckets of the times to resolve: the recount takes each resolved row's bucket as
    // `ttr_bucket` computes it here, not as the database does.
    let stored: Vec<(String, String, i64, String, i64)> =
        sqlx::query_as("SELECT dim, value, bucket, cluster, n FROM drift_ttr_buckets WHERE n <> 0 ORDER BY 1, 2, 3, 4")
            .fetch_all(pool)
            .await
            .unwrap();
    let resolved: Vec<(i64, String, String, String, String, String, String)> = sqlx::query_as(
        "SELECT trunc(extract(epoch FROM resolved_at - detected_at) * 1000)::bigint, cluster, namespace, severity, \
         repository, drift_type, resource_kind FROM drifts WHERE status = 'resolved'",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    let mut recount = std::collections::BTreeMap::<(String, String, i64, String), i64>::new();
    for (ms, cluster, namespace, severity, repository, drift_type, kind) in resolved {
        let bucket = ttr_bucket(ms);
        for (dim, value) in [
            ("", String::new()),
            ("cluster", cluster.clone()),
            ("namespace", namespace),
            ("severity", severity),
            ("repository", repository),
            ("drift_type", drift_type),
            ("resource_kind", kind),
        ] {
            *recount.entry((dim.to_owned(), value, bucket, cluster.clone())).or_default() += 1;
        }
    }
    let rows: Vec<(String, String, i64, String, i64)> =
        recount.into_iter().map(|((d, v, b, c), n)| (d, v, b, c, n)).collect();
    // Same order as the database's (text in the C collation of the test server, or not: sort).
    let mut stored_sorted = stored.clone();
    stored_sorted.sort();
    assert_eq!(stored_sorted, rows, "drift_ttr_buckets against the rows");
    let negative: Vec<String> = sqlx::query_scalar(
        "SELECT c::text FROM drift_counts AS c WHERE n < 0 \
         UNION ALL SELECT d::text FROM drift_daily AS d WHERE opened < 0 OR resolved < 0 \
         UNION ALL SELECT c::text FROM drift_counts_kinds AS c WHERE n < 0 \
         UNION ALL SELECT c::text FROM drift_counts_scope AS c WHERE n < 0 \
         UNION ALL SELECT c::text FROM drift_counts_type AS c WHERE n < 0 \
         UNION ALL SELECT c::text FROM drift_counts_repo AS c WHERE n < 0 \
         UNION ALL SELECT d::text FROM drift_daily_status AS d WHERE opened < 0 OR resolved < 0 \
         UNION ALL SELECT d::text FROM drift_daily_scope AS d WHERE opened < 0 OR resolved < 0 \
         UNION ALL SELECT b::text FROM drift_ttr_buckets AS b WHERE n < 0",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    assert!(negative.is_empty(), "negative rollup figures: {negative:?}");
}

/// The bucket of a time to resolve in milliseconds, as migration 0014 defines it: the value
/// below 512, else the value with all but its 9 most significant bits cleared.
pub fn ttr_bucket(ms: i64) -> i64 {
    if ms < 512 {
        return ms;
    }
    let cleared = 64 - ms.leading_zeros() - 9;
    (ms >> cleared) << cleared
}
