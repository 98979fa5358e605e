//! The harness of the shared store suite and helpers of the SQLite-only tests: database files
//! in a temporary folder, the rollups checked against the rows.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicU32, Ordering};

use async_trait::async_trait;
use drift_sql::testkit::{Harness, SqlHarness};
use drift_sqlite::{SqliteConfig, SqliteStore};
use sqlx::sqlite::SqlitePool;

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
pub fn harness() -> Harness<Sqlite> {
    Harness(Sqlite { dir: tempfile::tempdir().unwrap(), files: AtomicU32::new(0) })
}

impl Sqlite {
    /// The URL of a new database file.
    pub fn url(&self) -> String {
        let n = self.files.fetch_add(1, Ordering::Relaxed);
        format!("sqlite://{}", self.dir.path().join(format!("drift-{n}.db")).display())
    }
}

#[async_trait]
impl SqlHarness for Sqlite {
    type Store = SqliteStore;
    const OPEN_ROW_CONSTRAINT: &'static str = "UNIQUE";

    async fn open(&self, retention_days: Option<u32>) -> SqliteStore {
        let config = SqliteConfig { retention_days, ..SqliteConfig::new(self.url()) };
        SqliteStore::from_config(&config).await.unwrap()
    }

    async fn reopen(&self, store: &SqliteStore) -> SqliteStore {
        let file = store.pool().connect_options().get_filename().to_owned();
        SqliteStore::open(&format!("sqlite://{}", file.display())).await.unwrap()
    }

    fn pool(store: &SqliteStore) -> &SqlitePool {
        store.pool()
    }

    async fn assert_rollups_match_rows(&self, store: &SqliteStore) {
        assert_rollups_match_rows(store).await;
    }
}

/// A rollup key and its figures, as read from a rollup table or recomputed from the rows.
type Counts = (String, String, String, String, String, String, String, i64, i64);
type Daily = (i64, String, String, String, String, String, String, String, i64, i64);

/// Checks that the rollups hold exactly what the rows of `drifts` add up to (keys that net to
/// zero aside), and that no count went negative.
pub async fn assert_rollups_match_rows(store: &SqliteStore) {
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
