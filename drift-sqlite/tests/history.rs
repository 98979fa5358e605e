//! What only SQLite does with the drift history: a write failing half-way inside the database,
//! the file created when missing and reopened in WAL mode. The behaviour both stores share
//! (lifecycle, coverage, concurrent writers, retention, agreement with the reference store) is
//! the shared store suite (tests/conformance.rs).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use drift_model::{DriftSink, DriftStore};
use drift_sqlite::SqliteStore;

#[tokio::test]
async fn a_write_that_fails_half_way_leaves_no_partial_state() {
    let harness = harness();
    let store = SqliteStore::open(&harness.0.url()).await.unwrap();
    let desired = [deployment("shop", "web"), deployment("shop", "api")];
    store.record(&scan("s1", t(0), &desired, vec![replicas("shop", "web", 5)])).await.unwrap();
    let before = rows(&store).await;
    // Make the resolution step fail, after the scan row and the new drift are written.
    sqlx::raw_sql(
        "CREATE TRIGGER fail_resolution BEFORE UPDATE OF status ON drifts BEGIN SELECT RAISE(ABORT, 'injected'); END",
    )
    .execute(store.pool())
    .await
    .unwrap();
    let r2 = scan("s2", t(5), &desired, vec![replicas("shop", "api", 3)]);
    let err = store.record(&r2).await.unwrap_err();
    assert!(err.to_string().contains("injected"), "{err}");
    assert_eq!(rows(&store).await, before, "no drift opened, none resolved");
    assert_eq!(store.recent_scans(10).await.unwrap().len(), 1, "the failed scan is not recorded");
    sqlx::raw_sql("DROP TRIGGER fail_resolution").execute(store.pool()).await.unwrap();
    let o = store.record(&r2).await.unwrap();
    assert_eq!((o.opened, o.resolved, o.replayed), (1, 1, false));
}

#[tokio::test]
async fn the_file_is_created_when_missing_and_history_survives_reopening() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nested-not-needed.db");
    assert!(!path.exists());
    let url = format!("sqlite://{}", path.display());
    let store = SqliteStore::open(&url).await.unwrap();
    store.record(&scan("s1", t(0), &[deployment("shop", "web")], vec![replicas("shop", "web", 1)])).await.unwrap();
    store.close().await;
    assert!(path.exists());
    let again = SqliteStore::open(&url).await.unwrap();
    assert_eq!(rows(&again).await.len(), 1);
    let mode: String = sqlx::query_scalar("PRAGMA journal_mode").fetch_one(again.pool()).await.unwrap();
    assert_eq!(mode, "wal");
}
