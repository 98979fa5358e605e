//! Checks of the statistics rollups shared by the integration tests.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use chrono::{DateTime, Utc};
use drift_core::sink::{DriftFilter, DriftStore};
use drift_sink_sqlite::{SqlStore, SqliteSink};

/// A rollup key and its figures, as read from a rollup table or recomputed from the rows.
type Counts = (String, String, String, String, String, String, String, i64, i64);
type Daily = (i64, String, String, String, String, String, String, String, i64, i64);

/// Checks that the rollups hold exactly what the rows of `drifts` add up to (keys that net to
/// zero aside), and that no count went negative.
pub async fn assert_rollups_match_rows(store: &SqliteSink) {
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
         COALESCE(sum((resolved_at - detected_at) / 1000), 0) \
         FROM drifts GROUP BY 1, 2, 3, 4, 5, 6, 7 ORDER BY 1, 2, 3, 4, 5, 6, 7",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    assert_eq!(stored, rows, "drift_counts against the rows");
    let stored: Vec<Daily> = sqlx::query_as(
        "SELECT day, cluster, repository, namespace, resource_kind, drift_type, severity, status, opened, \
         resolved FROM drift_daily WHERE opened <> 0 OR resolved <> 0 ORDER BY 1, 2, 3, 4, 5, 6, 7, 8",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    let rows: Vec<Daily> = sqlx::query_as(
        "SELECT day, cluster, repository, namespace, resource_kind, drift_type, severity, status, sum(o), sum(x) \
         FROM (SELECT detected_at / 86400000000 AS day, cluster, repository, namespace, resource_kind, drift_type, \
             severity, status, 1 AS o, 0 AS x FROM drifts \
           UNION ALL \
           SELECT resolved_at / 86400000000, cluster, repository, namespace, resource_kind, drift_type, severity, \
             status, 0, 1 FROM drifts WHERE resolved_at IS NOT NULL) \
         GROUP BY 1, 2, 3, 4, 5, 6, 7, 8 ORDER BY 1, 2, 3, 4, 5, 6, 7, 8",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    assert_eq!(stored, rows, "drift_daily against the rows");
    let negative: i64 = sqlx::query_scalar(
        "SELECT (SELECT count(*) FROM drift_counts WHERE n < 0) \
         + (SELECT count(*) FROM drift_daily WHERE opened < 0 OR resolved < 0)",
    )
    .fetch_one(pool)
    .await
    .unwrap();
    assert_eq!(negative, 0, "no negative rollup count");
}

/// Stats of `store` for `filter` (from the rollups unless it names `since`) equal the stats
/// computed from its rows.
pub async fn assert_stats_match_rows(store: &SqliteSink, filter: &DriftFilter, now: DateTime<Utc>) {
    let a = store.stats(filter, now).await.unwrap();
    let b = store.stats_from_rows(filter, now).await.unwrap();
    assert_eq!(a, b, "{filter:?} at {now}");
}
