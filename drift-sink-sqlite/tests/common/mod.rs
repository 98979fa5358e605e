//! The harness of the shared store suite and helpers of the SQLite-only tests: database files
//! in a temporary folder, the rollups checked against the rows.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use drift_core::sink::{DriftFilter, DriftStats};
use drift_sink_sqlite::{SqlStore, SqliteConfig, SqliteSink};
use drift_testkit::store::StoreHarness;

#[allow(unused_imports)]
pub use drift_testkit::fixtures::{report as scan, t};
#[allow(unused_imports)]
pub use drift_testkit::store::{deployment, random_drifts, replicas, rows, sequence, world};

/// The store suite's view of SQLite: a database file per store, in a folder of the test's own.
pub struct Sqlite {
    dir: tempfile::TempDir,
    files: AtomicU32,
}

/// A harness with a temporary folder of its own.
pub fn harness() -> Sqlite {
    Sqlite { dir: tempfile::tempdir().unwrap(), files: AtomicU32::new(0) }
}

impl Sqlite {
    /// The URL of a new database file.
    pub fn url(&self) -> String {
        let n = self.files.fetch_add(1, Ordering::Relaxed);
        format!("sqlite://{}", self.dir.path().join(format!("drift-{n}.db")).display())
    }
}

#[async_trait]
impl StoreHarness for Sqlite {
    type Store = SqliteSink;

    async fn fresh(&self) -> Arc<SqliteSink> {
        Arc::new(SqliteSink::open(&self.url()).await.unwrap())
    }

    async fn with_retention(&self, days: u32) -> Option<Arc<SqliteSink>> {
        let config = SqliteConfig::new(self.url()).with_retention_days(days);
        Some(Arc::new(SqliteSink::from_config(&config).await.unwrap()))
    }

    async fn reopen(&self, store: &Arc<SqliteSink>) -> Arc<SqliteSink> {
        let file = store.pool().connect_options().get_filename().to_owned();
        Arc::new(SqliteSink::open(&format!("sqlite://{}", file.display())).await.unwrap())
    }

    async fn count_rows(&self, store: &SqliteSink) -> Option<i64> {
        Some(sqlx::query_scalar("SELECT count(*) FROM drifts").fetch_one(store.pool()).await.unwrap())
    }

    async fn execute(&self, store: &SqliteSink, sql: &'static str) -> Option<Result<u64, String>> {
        let result = sqlx::query(sql).execute(store.pool()).await;
        Some(result.map(|r| r.rows_affected()).map_err(|e| e.to_string()))
    }

    fn open_row_constraint(&self) -> &'static str {
        "UNIQUE"
    }

    async fn check_rollups(&self, store: &SqliteSink) -> bool {
        assert_rollups_match_rows(store).await;
        true
    }

    async fn stats_from_rows(
        &self,
        store: &SqliteSink,
        filter: &DriftFilter,
        now: DateTime<Utc>,
    ) -> Option<DriftStats> {
        Some(store.stats_from_rows(filter, now).await.unwrap())
    }

    async fn prune(&self, store: &SqliteSink, now: DateTime<Utc>) -> Option<(u64, u64)> {
        let o = store.prune(now).await.unwrap();
        Some((o.drifts, o.scans))
    }
}

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
