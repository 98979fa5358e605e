//! The statistics rollups of SQLite (`drift_counts`, `drift_daily`, kept by the store's own
//! writes): built by migration 0002 from an existing history, and counted again by
//! `rebuild_rollups` after an operator's own deletes. Severity changes, retention and
//! concurrent writers are cases of the shared store suite (tests/conformance.rs).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use drift_model::sink::DriftFilter;
use drift_model::{DriftSink, DriftStore};
use drift_sqlite::SqliteStore;

/// A database with a history and without migration 0002 (taken back by hand: this store
/// cannot write without its rollups): migration 0002 builds the rollups from the rows.
#[tokio::test]
async fn migration_0002_backfills_the_rollups_from_an_existing_history() {
    let harness = harness();
    let store = SqliteStore::open(&harness.0.url()).await.unwrap();
    let desired = world(6);
    let mut next = sequence(7);
    for s in 0..12 {
        store.record(&scan(&format!("s{s}"), t(s * 300), &desired, random_drifts(&desired, &mut next))).await.unwrap();
    }
    for undo in [
        "DROP TABLE drift_counts",
        "DROP TABLE drift_daily",
        "DROP INDEX drifts_resolved_ttr",
        "DELETE FROM _sqlx_migrations WHERE version = 2",
    ] {
        sqlx::query(undo).execute(store.pool()).await.unwrap();
    }
    store.migrate().await.unwrap();
    drift_testkit::store::check_backfill(&harness, &store, t(3300)).await;
}

#[tokio::test]
async fn rows_deleted_by_hand_are_counted_again_by_rebuild_rollups() {
    let harness = harness();
    let store = SqliteStore::open(&harness.0.url()).await.unwrap();
    let desired = world(6);
    let mut next = sequence(3);
    for s in 0..6 {
        store.record(&scan(&format!("s{s}"), t(s * 60), &desired, random_drifts(&desired, &mut next))).await.unwrap();
    }
    sqlx::query("DELETE FROM drifts WHERE namespace = 'shop'").execute(store.pool()).await.unwrap();
    let everything = DriftFilter::default();
    assert_ne!(
        store.stats(&everything, t(300)).await.unwrap(),
        store.stats_from_rows(&everything, t(300)).await.unwrap(),
        "a statement of the operator's own bypasses the rollups"
    );
    store.rebuild_rollups().await.unwrap();
    assert_rollups_match_rows(&store).await;
    assert_eq!(
        store.stats(&everything, t(300)).await.unwrap(),
        store.stats_from_rows(&everything, t(300)).await.unwrap()
    );
}
