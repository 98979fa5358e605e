//! Benchmark of the SQLite store on a file in a temporary folder (WAL, synchronous=NORMAL, the
//! store's own settings): the body shared by the stores (`drift_testkit::store_bench`), with
//! SQLite's own fill of the query table.
//!
//! `cargo bench -p drift-sqlite --bench sqlite_store` prints a Markdown table
//! (median and slowest of the repetitions). `BENCH_ROWS` changes the table size.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use async_trait::async_trait;
use drift_sqlite::SqliteStore;
use drift_testkit::store_bench::{StoreBench, now, run};

struct Sqlite(tempfile::TempDir);

#[async_trait]
impl StoreBench for Sqlite {
    type Store = SqliteStore;
    const NAME: &'static str = "SQLite";

    async fn open(&self, name: &str) -> SqliteStore {
        SqliteStore::open(&format!("sqlite://{}", self.0.path().join(format!("{name}.db")).display())).await.unwrap()
    }

    /// A recursive CTE writes the rows, then the rollups are computed from them.
    async fn fill(&self, store: &SqliteStore, rows: i64) {
        let end = now().timestamp_micros();
        let year: i64 = 365 * 86_400 * 1_000_000;
        sqlx::query(
            "WITH RECURSIVE s(g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM s WHERE g < ?2), \
                  t(g, d) AS (SELECT g, ?1 - ?3 + ?3 / ?2 * g FROM s) \
             INSERT INTO drifts (detected_at, last_seen, occurrences, repository, namespace, resource_kind, \
               resource_name, drift_type, severity, git_value, cluster_value, status, resolved_at, decision_source, \
               recommended_action, cluster, api_group, path, fingerprint, changed_by, changed_at, classification) \
             SELECT d, d + 300000000 * (g % 12), 1 + g % 12, 'repo-' || (g % 10), 'ns-' || (g % 200), \
               json_extract('[\"Deployment\",\"Service\",\"ConfigMap\",\"Secret\",\"StatefulSet\",\"DaemonSet\",\"Ingress\",\"Job\"]', '$[' || (g % 8) || ']'), \
               'app-' || (g % 5000), \
               json_extract('[\"service_port_drift\",\"image_tag_drift\",\"resource_limit_drift\",\"resource_request_drift\",\"replicas_drift\",\"configmap_drift\",\"secret_drift\",\"missing_resource\",\"spec_drift\",\"metadata_drift\"]', '$[' || ((g / 8) % 10) || ']'), \
               json_extract('[\"LOW\",\"MEDIUM\",\"HIGH\",\"CRITICAL\"]', '$[' || ((g / 3) % 4) || ']'), '\"git\"', \
               CAST(g % 100 AS TEXT), \
               CASE WHEN g % 50 = 0 THEN 'open' ELSE 'resolved' END, \
               CASE WHEN g % 50 = 0 THEN NULL ELSE d + 60000000 * (1 + (g * 7919) % 10080) END, \
               'scanner', 'suggest_revert', 'cluster-' || (g % 3), 'apps', 'spec.replicas', \
               printf('%064d', g), 'kubectl-edit', d, 'manual_change' \
             FROM t WHERE true",
        )
        .bind(end)
        .bind(rows)
        .bind(year)
        .execute(store.pool())
        .await
        .unwrap();
        // The rows were written behind the store's back: compute its statistics rollups.
        store.rebuild_rollups().await.unwrap();
        sqlx::query("ANALYZE").execute(store.pool()).await.unwrap();
    }

    async fn close(&self, store: SqliteStore) {
        store.close().await;
    }
}

#[tokio::main]
async fn main() {
    run(&Sqlite(tempfile::tempdir().unwrap())).await;
}
