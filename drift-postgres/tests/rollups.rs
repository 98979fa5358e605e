//! The statistics rollups of PostgreSQL (`drift_counts`, `drift_daily`, kept by triggers):
//! exact after an operator's own deletes, and when migration 0002 backfills them from an
//! existing history. Severity changes, retention and concurrent writers are cases of the shared
//! store suite (tests/conformance.rs).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use drift_model::DriftSink;
use drift_model::sink::{DriftFilter, DriftStore};
use drift_postgres::{MIGRATOR, PostgresConfig, PostgresStore};

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

/// A database at migration 0001 with a history: the later migrations (0002 builds the rollups)
/// keep it and count it. The history is written by today's writer in a database of its own and
/// copied, as rows of the 0001 table, into a database left at migration 0001.
#[tokio::test]
async fn migration_0002_backfills_the_rollups_from_an_existing_history() {
    let server = server();
    let writer = fresh(&server).await;
    let desired = [deployment("shop", "web"), deployment("shop", "api"), deployment("ops", "db")];
    let mut next = sequence(7);
    for s in 0..12 {
        writer.record(&scan(&format!("s{s}"), t(s * 300), &desired, random_drifts(&desired, &mut next))).await.unwrap();
    }
    let rows: serde_json::Value = sqlx::query_scalar(
        "SELECT jsonb_agg(to_jsonb(d) - 'ttr_ms' - 'resolution' - 'desired_digest' - 'waived_until' \
         - 'acknowledged_at') FROM drifts d",
    )
    .fetch_one(writer.pool())
    .await
    .unwrap();
    let url = server.create_database().await.unwrap();
    let store =
        PostgresStore::from_config(&PostgresConfig { migrate: false, ..PostgresConfig::new(&url) }).await.unwrap();
    MIGRATOR.run_to(1, store.pool()).await.unwrap();
    let copied = sqlx::query(
        "INSERT INTO drifts OVERRIDING SYSTEM VALUE SELECT * FROM jsonb_populate_recordset(NULL::drifts, $1)",
    )
    .bind(&rows)
    .execute(store.pool())
    .await
    .unwrap();
    assert!(copied.rows_affected() > 0, "a history to count");
    store.migrate().await.unwrap();
    drift_testkit::store::check_backfill(&drift_sql::testkit::Harness(Pg { server }), &store, t(3300)).await;
}
