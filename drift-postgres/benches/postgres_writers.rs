//! Several writers at once on a throwaway PostgreSQL with durability on (fsync,
//! synchronous_commit and full_page_writes as in production): what each report's transaction
//! costs when the clusters of a fleet are written at the same time (docs/benchmarks.md, "History
//! at fleet size", "What 0014 costs each write").
//!
//! `cargo bench -p drift-postgres --bench postgres_writers` fills a history of `BENCH_ROWS` rows
//! (default 100,000; `benches/common/fill.rs`), then `BENCH_WRITERS` writers (default 4), each a
//! store of its own writing cluster `fleet-<i>`, record `BENCH_ROUNDS` reports (default 20) of
//! `BENCH_DRIFTS` drifts each (default 2,000) at the same time: the first all new, then each a 1%
//! churn (1% of the drifts fixed, 1% new, the rest seen again). It prints the time of each
//! `record` (median, p90, max over the writers' churn reports), the time of the first (all
//! new) reports, the wall time of the whole, and the deadlocks PostgreSQL counted meanwhile
//! (the store writes a transaction again after one).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use drift_model::DriftSink;
use drift_postgres::PostgresStore;
use drift_testkit::fixtures::report;
use drift_testkit::store::{deployment, replicas};
use drift_testkit::store_bench::now;
use drift_testkit_pg::PgServer;

#[path = "common/fill.rs"]
mod fill;

fn var(name: &str, default: usize) -> usize {
    std::env::var(name).ok().map_or(default, |v| v.parse().unwrap_or_else(|_| panic!("{name}: a number")))
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The value at quantile `q` of sorted durations (nearest rank).
fn at(sorted: &[Duration], q: f64) -> Duration {
    sorted[((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len()) - 1]
}

#[tokio::main]
async fn main() {
    let rows = var("BENCH_ROWS", 100_000);
    let writers = var("BENCH_WRITERS", 4);
    let rounds = var("BENCH_ROUNDS", 20);
    let drifts = var("BENCH_DRIFTS", 2_000);
    let churn = (drifts / 100).max(1);
    let settings = [("fsync", "on"), ("synchronous_commit", "on"), ("full_page_writes", "on")];
    let server = PgServer::start_with_settings(&settings).expect("start PostgreSQL");
    let url = server.create_database().await.unwrap();
    let store = PostgresStore::connect(&url).await.unwrap();
    fill::fill(store.pool(), rows as i64).await;
    sqlx::query("VACUUM ANALYZE").execute(store.pool()).await.unwrap();
    let deadlocks = || async {
        sqlx::query_scalar::<_, i64>("SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()")
            .fetch_one(store.pool())
            .await
            .unwrap()
    };
    let deadlocks_before = deadlocks().await;
    // Objects 0..drifts + churn * rounds; round r drifts the window [churn * r, churn * r + drifts).
    let objects: Vec<_> =
        (0..drifts + churn * rounds).map(|i| deployment(&format!("ns-{}", i % 50), &format!("app-{i}"))).collect();
    let start = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..writers {
        let url = url.clone();
        let objects = objects.clone();
        tasks.push(tokio::spawn(async move {
            let store = PostgresStore::connect(&url).await.unwrap();
            let mut times = Vec::new();
            for r in 0..rounds {
                let window = churn * r..churn * r + drifts;
                let drifted = objects[window.clone()]
                    .iter()
                    .map(|k| replicas(k.namespace.as_deref().unwrap(), &k.name, 1))
                    .collect();
                let mut scan = report(
                    &format!("fleet-{w}-{r}"),
                    now() + chrono::Duration::minutes(r as i64),
                    &objects[..window.end.min(objects.len())],
                    drifted,
                );
                scan.cluster = format!("fleet-{w}");
                let t0 = Instant::now();
                store.record(&scan).await.expect("recorded");
                times.push(t0.elapsed());
            }
            store.close().await;
            times
        }));
    }
    let mut first = Vec::new();
    let mut churned = Vec::new();
    for task in tasks {
        let times = task.await.unwrap();
        first.push(times[0]);
        churned.extend_from_slice(&times[1..]);
    }
    let wall = start.elapsed();
    // pg_stat_database is updated when a backend reports its counters (at the latest a second
    // after its transaction): wait for the writers' to arrive.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let deadlocks = deadlocks().await - deadlocks_before;
    first.sort();
    churned.sort();
    println!(
        "PostgreSQL, {writers} writers at once (clusters fleet-0..), {rounds} reports each of {drifts} drifts \
         ({churn} fixed and {churn} new a report after the first), over {rows} rows of history"
    );
    println!("| what | median | p90 | max |");
    println!("| --- | ---: | ---: | ---: |");
    println!(
        "| record, first report (all new), {} | {:.1} ms | {:.1} ms | {:.1} ms |",
        first.len(),
        ms(at(&first, 0.5)),
        ms(at(&first, 0.9)),
        ms(at(&first, 1.0))
    );
    println!(
        "| record, 1% churn, {} | {:.1} ms | {:.1} ms | {:.1} ms |",
        churned.len(),
        ms(at(&churned, 0.5)),
        ms(at(&churned, 0.9)),
        ms(at(&churned, 1.0))
    );
    println!("wall time {:.2} s; deadlocks counted by PostgreSQL: {deadlocks}", wall.as_secs_f64());
    store.close().await;
}
