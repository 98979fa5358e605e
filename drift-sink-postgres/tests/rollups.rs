//! The statistics rollups of PostgreSQL (`drift_counts`, `drift_daily`, kept by triggers):
//! exact after an operator's own deletes, and when migration 0002 backfills them from an
//! existing history. Severity changes, retention and concurrent writers are cases of the shared
//! store suite (tests/conformance.rs).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use drift_core::DriftSink;
use drift_core::sink::{DriftFilter, DriftStore};
use drift_sink_postgres::{MIGRATOR, PostgresConfig, PostgresSink};

#[tokio::test]
async fn deletes_and_truncates_by_hand_keep_the_rollups_exact() {
    let server = server();
    let store = fresh(&server).await;
    let desired = [deployment("shop", "web"), deployment("shop", "api"), deployment("ops", "db")];
    let all = vec![replicas("shop", "web", 1), replicas("shop", "api", 1), replicas("ops", "db", 1)];
    store.record(&scan("s1", t(0), &desired, all)).await.unwrap();
    store.record(&scan("s2", t(60), &desired, vec![replicas("ops", "db", 1)])).await.unwrap();
    // An operator's own statement goes through the triggers too.
    sqlx::query("DELETE FROM drifts WHERE resource_name = 'web'").execute(store.pool()).await.unwrap();
    assert_rollups_match_rows(&store).await;
    let stats = store.stats(&DriftFilter::default(), t(60)).await.unwrap();
    assert_eq!((stats.by_status.get("open"), stats.by_status.get("resolved")), (Some(&1), Some(&1)));
    assert_eq!(stats.mean_time_to_resolve_seconds, Some(3600.0));
    sqlx::query("TRUNCATE drifts").execute(store.pool()).await.unwrap();
    assert_rollups_match_rows(&store).await;
    assert_eq!(
        store.stats(&DriftFilter::default(), t(60)).await.unwrap(),
        store.stats_from_rows(&DriftFilter::default(), t(60)).await.unwrap()
    );
}

/// A database at migration 0001 with a history: migration 0002 builds the rollups from it.
#[tokio::test]
async fn migration_0002_backfills_the_rollups_from_an_existing_history() {
    let server = server();
    let url = server.create_database().await.unwrap();
    let store =
        PostgresSink::from_config(&PostgresConfig { migrate: false, ..PostgresConfig::new(&url) }).await.unwrap();
    MIGRATOR.run_to(1, store.pool()).await.unwrap();
    // Today's writer also needs the columns of migration 0003 (which adds them if missing).
    sqlx::query("ALTER TABLE drifts ADD COLUMN resolution text, ADD COLUMN desired_digest text")
        .execute(store.pool())
        .await
        .unwrap();
    let desired = [deployment("shop", "web"), deployment("shop", "api"), deployment("ops", "db")];
    let mut next = sequence(7);
    for s in 0..12 {
        store.record(&scan(&format!("s{s}"), t(s * 300), &desired, random_drifts(&desired, &mut next))).await.unwrap();
    }
    store.migrate().await.unwrap();
    drift_testkit::store::check_backfill(&drift_sink_sql::testkit::Harness(Pg { server }), &store, t(3300)).await;
}
