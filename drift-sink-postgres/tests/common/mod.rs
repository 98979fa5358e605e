//! Helpers shared by the integration tests: a throwaway server, fresh stores, drifts and reports.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use chrono::{DateTime, Utc};
use drift_core::sink::{DriftFilter, DriftStatus, DriftStore, PageRequest, StoredDrift};
use drift_core::{Drift, DriftType, ResourceKey, ScanReport};
use drift_sink_postgres::{PostgresSink, SqlStore};
use drift_testkit_pg::PgServer;

#[allow(unused_imports)]
pub use drift_testkit::fixtures::{key, report, t};

/// Starts a server (one per test process).
pub fn server() -> PgServer {
    PgServer::start().expect("start a throwaway PostgreSQL (scripts/install-postgres.sh installs it)")
}

/// A store over a fresh database of `server`, migrations applied.
pub async fn fresh(server: &PgServer) -> PostgresSink {
    let url = server.create_database().await.expect("create a database");
    PostgresSink::connect(&url).await.expect("connect")
}

/// A replicas drift of a Deployment, with this live value.
pub fn replicas(namespace: &str, name: &str, live: i64) -> Drift {
    drift_testkit::fixtures::drift(
        "Deployment",
        namespace,
        name,
        DriftType::ReplicasDrift,
        "spec.replicas",
        live.into(),
    )
}

/// The key of a Deployment.
pub fn deployment(namespace: &str, name: &str) -> ResourceKey {
    key("Deployment", namespace, name)
}

/// A successful report at `at` over `desired` (complete coverage) listing `drifts`.
pub fn scan(id: &str, at: DateTime<Utc>, desired: &[ResourceKey], drifts: Vec<Drift>) -> ScanReport {
    report(id, at, desired, drifts)
}

/// Every row, newest first.
pub async fn rows(store: &dyn DriftStore) -> Vec<StoredDrift> {
    let mut out = Vec::new();
    let mut after = None;
    loop {
        let page = store.list(&DriftFilter::default(), PageRequest { limit: 1000, after }).await.unwrap();
        out.extend(page.items);
        match page.next {
            Some(n) => after = Some(n),
            None => return out,
        }
    }
}

/// Open rows, newest first.
pub async fn open(store: &dyn DriftStore) -> Vec<StoredDrift> {
    rows(store).await.into_iter().filter(|r| r.status == DriftStatus::Open).collect()
}

/// A rollup key and its figures, as read from a rollup table or recomputed from the rows.
type Counts = (String, String, String, String, String, String, String, i64, i64);
type Daily = (String, String, String, String, String, String, String, String, i64, i64);

/// Checks that the rollups hold exactly what the rows of `drifts` add up to (keys that net to
/// zero aside), and that no count went negative. (A sum of times to resolve may: racing
/// scanners can resolve a drift with a scan that finished before the one that opened it.)
pub async fn assert_rollups_match_rows(store: &PostgresSink) {
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
    let negative: Vec<String> = sqlx::query_scalar(
        "SELECT c::text FROM drift_counts AS c WHERE n < 0 \
         UNION ALL SELECT d::text FROM drift_daily AS d WHERE opened < 0 OR resolved < 0",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    assert!(negative.is_empty(), "negative rollup figures: {negative:?}");
}

/// Stats of `store` for `filter` (from the rollups unless it names `since`) equal the stats
/// computed from its rows.
pub async fn assert_stats_match_rows(store: &PostgresSink, filter: &DriftFilter, now: DateTime<Utc>) {
    let a = store.stats(filter, now).await.unwrap();
    let b = store.stats_from_rows(filter, now).await.unwrap();
    assert_eq!(a, b, "{filter:?} at {now}");
}
