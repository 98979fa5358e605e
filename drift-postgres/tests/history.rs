//! What only PostgreSQL can do to the drift history: writes interrupted or dropped mid-way, a
//! server restarted or stopped, migrations run from several processes. The behaviour both
//! stores share (lifecycle, coverage, races, retention, agreement with the reference store) is
//! the shared store suite (tests/conformance.rs).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use common::*;
use drift_model::{DriftSink, DriftStore};
use drift_postgres::{PostgresConfig, PostgresStore};
use sqlx::Connection;

#[tokio::test]
async fn a_report_interrupted_mid_write_leaves_no_partial_state() {
    let server = server();
    let url = server.create_database().await.unwrap();
    let store = PostgresStore::connect(&url).await.unwrap();
    let desired = [deployment("shop", "web"), deployment("shop", "api")];
    store.record(&scan("s1", t(0), &desired, vec![replicas("shop", "web", 5)])).await.unwrap();
    let before = rows(&store).await;

    // The next report opens a drift on api and resolves web's. Lock web's row from another
    // connection so the writer stops at the resolution, after its scan row and the new drift
    // are written; then kill its connection (each retry too).
    let mut holder = sqlx::PgConnection::connect(&url).await.unwrap();
    sqlx::query("BEGIN").execute(&mut holder).await.unwrap();
    sqlx::query("SELECT id FROM drifts FOR UPDATE").execute(&mut holder).await.unwrap();
    let holder_pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()").fetch_one(&mut holder).await.unwrap();
    // pg_stat_activity is a snapshot per transaction: watch from a connection outside one.
    let mut monitor = sqlx::PgConnection::connect(&url).await.unwrap();
    let writer = store.clone();
    let r2 = scan("s2", t(5), &desired, vec![replicas("shop", "api", 3)]);
    let task = tokio::spawn(async move { writer.record(&r2).await });
    let mut killed = 0;
    let deadline = Instant::now() + Duration::from_secs(60);
    while !task.is_finished() {
        assert!(Instant::now() < deadline, "the writer never finished ({killed} connections killed)");
        let pids: Vec<i32> = sqlx::query_scalar(
            "SELECT pid FROM pg_stat_activity WHERE application_name = 'drift' AND wait_event_type = 'Lock' \
             AND $1 = ANY(pg_blocking_pids(pid))",
        )
        .bind(holder_pid)
        .fetch_all(&mut monitor)
        .await
        .unwrap();
        for pid in pids {
            let done: bool =
                sqlx::query_scalar("SELECT pg_terminate_backend($1)").bind(pid).fetch_one(&mut monitor).await.unwrap();
            killed += usize::from(done);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let err = task.await.unwrap().unwrap_err();
    assert!(killed >= 1);
    assert_eq!(err.kind(), drift_model::ErrorKind::Unavailable, "{err}");
    assert!(err.is_temporary(), "a lost connection is worth retrying: {err}");
    sqlx::query("ROLLBACK").execute(&mut holder).await.unwrap();

    assert_eq!(rows(&store).await, before, "no drift opened, none resolved");
    let scans: Vec<String> = store.recent_scans(10).await.unwrap().into_iter().map(|s| s.scan_id).collect();
    assert_eq!(scans, ["s1"], "the interrupted scan is not recorded");

    // Written again, the report lands whole.
    let r2 = scan("s2", t(5), &desired, vec![replicas("shop", "api", 3)]);
    let o = store.record(&r2).await.unwrap();
    assert_eq!((o.opened, o.resolved, o.replayed), (1, 1, false));
}

#[tokio::test]
async fn a_dropped_write_leaves_no_partial_state() {
    let server = server();
    let url = server.create_database().await.unwrap();
    let store = PostgresStore::connect(&url).await.unwrap();
    let desired = [deployment("shop", "web"), deployment("shop", "api")];
    store.record(&scan("s1", t(0), &desired, vec![replicas("shop", "web", 5)])).await.unwrap();
    let before = rows(&store).await;

    let mut holder = sqlx::PgConnection::connect(&url).await.unwrap();
    sqlx::query("BEGIN").execute(&mut holder).await.unwrap();
    sqlx::query("SELECT id FROM drifts FOR UPDATE").execute(&mut holder).await.unwrap();
    let writer = store.clone();
    let r2 = scan("s2", t(5), &desired, vec![replicas("shop", "api", 3)]);
    let task = tokio::spawn(async move { writer.record(&r2).await });
    wait_for(
        &url,
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'drift' AND wait_event_type = 'Lock'",
        1,
    )
    .await;
    // The caller gives up (a timeout, a shutdown): the future is dropped mid-transaction.
    task.abort();
    assert!(task.await.unwrap_err().is_cancelled());
    sqlx::query("ROLLBACK").execute(&mut holder).await.unwrap();

    assert_eq!(rows(&store).await, before);
    assert_eq!(store.recent_scans(10).await.unwrap().len(), 1);
    let r2 = scan("s2", t(5), &desired, vec![replicas("shop", "api", 3)]);
    assert_eq!(store.record(&r2).await.unwrap().opened, 1, "the dropped scan was not recorded");
}

#[tokio::test]
async fn postgres_restarted_between_scans_the_next_scan_succeeds() {
    let server = server();
    let store = fresh(&server).await;
    let web = [deployment("shop", "web")];
    store.record(&scan("s1", t(0), &web, vec![replicas("shop", "web", 5)])).await.unwrap();
    server.restart().unwrap();
    let o = store.record(&scan("s2", t(5), &web, vec![replicas("shop", "web", 5)])).await.unwrap();
    assert_eq!(o.updated, 1);
    assert_eq!(rows(&store).await[0].occurrences, 2);
    store.ping().await.unwrap();
}

#[tokio::test]
async fn a_store_that_is_down_answers_unavailable() {
    let server = server();
    let mut config = PostgresConfig::new(server.create_database().await.unwrap());
    config.connect_timeout = Duration::from_secs(1);
    let store = PostgresStore::from_config(&config).await.unwrap();
    server.stop().unwrap();
    let err = store.ping().await.unwrap_err();
    assert_eq!(err.kind(), drift_model::ErrorKind::Unavailable, "{err}");
    assert!(err.is_temporary());
}

#[tokio::test]
async fn migrations_run_once_and_connecting_again_is_harmless() {
    let server = server();
    let url = server.create_database().await.unwrap();
    let one = PostgresStore::connect(&url).await.unwrap();
    let two = PostgresStore::connect(&url).await.unwrap();
    two.migrate().await.unwrap();
    let n: i64 = sqlx::query_scalar("SELECT count(*) FROM _sqlx_migrations").fetch_one(one.pool()).await.unwrap();
    assert_eq!(n, drift_postgres::MIGRATOR.iter().count() as i64);
}
