//! Benchmark of the PostgreSQL store on a throwaway server with durability on (fsync,
//! synchronous_commit and full_page_writes as in production): the body shared by the stores
//! (`drift_testkit::store_bench`), with PostgreSQL's own fill of the query table.
//!
//! `cargo bench -p drift-postgres --bench postgres_store` prints a Markdown table
//! (median and slowest of the repetitions). `BENCH_ROWS` changes the table size; `BENCH_LOG=1`
//! prints every statement's duration, `BENCH_EXPLAIN=1` the plans of the slower ones.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use async_trait::async_trait;
use drift_postgres::PostgresStore;
use drift_testkit::store_bench::{StoreBench, run};
use drift_testkit_pg::PgServer;

#[path = "common/fill.rs"]
mod fill;

struct Postgres(PgServer);

#[async_trait]
impl StoreBench for Postgres {
    type Store = PostgresStore;
    const NAME: &'static str = "PostgreSQL";

    async fn open(&self, _name: &str) -> PostgresStore {
        PostgresStore::connect(&self.0.create_database().await.unwrap()).await.unwrap()
    }

    /// `generate_series` writes the rows; the triggers keep the rollups.
    async fn fill(&self, store: &PostgresStore, rows: i64) {
        fill::fill(store.pool(), rows).await;
        sqlx::query("VACUUM ANALYZE drifts").execute(store.pool()).await.unwrap();
    }

    async fn close(&self, store: PostgresStore) {
        store.close().await;
    }
}

#[tokio::main]
async fn main() {
    let mut settings = vec![("fsync", "on"), ("synchronous_commit", "on"), ("full_page_writes", "on")];
    // BENCH_LOG=1: log every statement's duration and print the server log at the end.
    let log = std::env::var_os("BENCH_LOG").is_some();
    if log {
        settings.push(("log_min_duration_statement", "0"));
    }
    // BENCH_EXPLAIN=1: log the plan of every statement slower than 5 ms and print the log.
    let explain = std::env::var_os("BENCH_EXPLAIN").is_some();
    if explain {
        settings.extend([
            ("shared_preload_libraries", "auto_explain"),
            ("auto_explain.log_min_duration", "5ms"),
            ("auto_explain.log_analyze", "on"),
            ("auto_explain.log_buffers", "on"),
        ]);
    }
    let server = Postgres(PgServer::start_with_settings(&settings).expect("start PostgreSQL"));
    run(&server).await;
    if log {
        for line in server.0.log().lines().filter(|l| l.contains("duration")) {
            println!("{}", &line[..line.len().min(200)]);
        }
    }
    if explain {
        println!("{}", server.0.log());
    }
}
