//! The harness against the real binaries: start, a database per test, restart, stop.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use drift_testkit_pg::PgServer;
use sqlx::Connection;

async fn one(url: &str, sql: &'static str) -> i64 {
    let mut c = sqlx::PgConnection::connect(url).await.unwrap();
    let v: i64 = sqlx::query_scalar(sql).fetch_one(&mut c).await.unwrap();
    c.close().await.unwrap();
    v
}

#[tokio::test]
async fn fresh_databases_are_separate_and_survive_a_restart() {
    let server = PgServer::start().unwrap();
    let a = server.create_database().await.unwrap();
    let b = server.create_database().await.unwrap();
    assert_ne!(a, b);
    let mut c = sqlx::PgConnection::connect(&a).await.unwrap();
    sqlx::raw_sql("CREATE TABLE t (x bigint); INSERT INTO t VALUES (1), (2)").execute(&mut c).await.unwrap();
    c.close().await.unwrap();
    assert_eq!(one(&a, "SELECT count(*) FROM t").await, 2);
    assert_eq!(one(&b, "SELECT count(*) FROM pg_tables WHERE tablename = 't'").await, 0);

    let port = server.port();
    server.restart().unwrap();
    assert_eq!(server.port(), port);
    assert_eq!(one(&a, "SELECT count(*) FROM t").await, 2);

    let dir = server.dir().to_path_buf();
    drop(server);
    assert!(!dir.exists(), "the temporary folder is removed");
    assert!(sqlx::PgConnection::connect(&a).await.is_err(), "the server is stopped");
}

#[test]
fn two_servers_run_side_by_side() {
    let one = PgServer::start().unwrap();
    let two = PgServer::start().unwrap();
    assert_ne!(one.port(), two.port());
    assert_ne!(one.dir(), two.dir());
}
