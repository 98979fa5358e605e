//! What the panels of the Grafana dashboard on PostgreSQL (deploy/grafana/drift-postgres.json)
//! cost on a large history: every target and variable query of the file, expanded as Grafana
//! expands them (the test's expansion, `tests/grafana/expand.rs`), run as the read-only role
//! of deploy/grafana/grafana-role.sql on a throwaway server with durability on, over a year of
//! history (`common/fill.rs`, 1,000,000 rows; `BENCH_ROWS` changes it).
//!
//! `cargo bench -p drift-postgres --bench grafana_panels` prints a Markdown table: per
//! query, the rows it returns and the median and slowest of 10 runs after one warm-up, for
//! the dashboard's default selection (every cluster and repository, the last 7 days,
//! `$__interval` = 1h) and for one cluster and one repository. `BENCH_EXPLAIN=1` prints each
//! panel query's plan (`EXPLAIN (ANALYZE, BUFFERS)`) for the default selection first.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use drift_postgres::PostgresStore;
use drift_testkit::store_bench::now;
use drift_testkit_pg::PgServer;
use sqlx::postgres::PgConnectOptions;
use sqlx::{ConnectOptions, Connection, PgConnection};

#[path = "common/fill.rs"]
mod fill;

#[allow(dead_code)]
#[path = "../tests/grafana/expand.rs"]
mod expand;

#[allow(dead_code)]
#[path = "../tests/grafana/frame.rs"]
mod frame;

use expand::{TimeRange, Value};

const REPS: usize = 10;

async fn time(
    conn: &mut PgConnection,
    sql: &str,
    vars: &BTreeMap<&str, Value>,
    range: TimeRange,
) -> (usize, Duration, Duration) {
    let sql = expand::interpolate(sql, vars, "1h").and_then(|s| expand::expand_macros(&s, range)).unwrap();
    let rows = frame::run(conn, &sql).await.unwrap_or_else(|e| panic!("{sql}: {e}")).rows.len();
    let mut runs = Vec::with_capacity(REPS);
    for _ in 0..REPS {
        let start = Instant::now();
        frame::run(conn, &sql).await.unwrap();
        runs.push(start.elapsed());
    }
    runs.sort();
    (rows, runs[REPS / 2], runs[REPS - 1])
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

#[tokio::main]
async fn main() {
    let rows: i64 = std::env::var("BENCH_ROWS").ok().and_then(|r| r.parse().ok()).unwrap_or(1_000_000);
    let settings = [("fsync", "on"), ("synchronous_commit", "on"), ("full_page_writes", "on")];
    let server = PgServer::start_with_settings(&settings).expect("start PostgreSQL");
    let url = server.create_database().await.unwrap();
    let store = PostgresStore::connect(&url).await.unwrap();
    fill::fill(store.pool(), rows).await;
    sqlx::query("VACUUM ANALYZE drifts").execute(store.pool()).await.unwrap();
    let role = std::fs::read_to_string(frame::deploy_file("grafana-role.sql")).unwrap();
    let mut admin = PgConnection::connect(&url).await.unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(role)).execute(&mut admin).await.unwrap();
    let options: PgConnectOptions = url.parse().unwrap();
    let mut conn = options.username("drift_grafana").connect().await.unwrap();

    let dashboard = frame::dashboard();
    let range = TimeRange { from: now() - chrono::Duration::days(7), to: now() };
    let variables = frame::variables(&dashboard);
    let mut all = BTreeMap::new();
    let mut one = BTreeMap::new();
    let mut lines = Vec::new();
    for v in &variables {
        let (n, median, slowest) = time(&mut conn, &v.sql, &all, range).await;
        lines.push(format!("| variable `{}` | {n} | {} | {} | | | |", v.name, ms(median), ms(slowest)));
        let options = frame::run(&mut conn, &expand::interpolate(&v.sql, &all, "1h").unwrap()).await.unwrap();
        let options: Vec<String> = options.rows.into_iter().map(|r| r[0].clone().unwrap()).collect();
        one.insert(v.name.as_str(), Value::Picked(vec![options[options.len() / 2].clone()]));
        all.insert(v.name.as_str(), Value::All(options));
    }
    let explain = std::env::var_os("BENCH_EXPLAIN").is_some();
    for t in frame::targets(&dashboard) {
        if explain {
            let sql = expand::interpolate(&t.sql, &all, "1h").and_then(|s| expand::expand_macros(&s, range)).unwrap();
            let plan = frame::run(&mut conn, &format!("EXPLAIN (ANALYZE, BUFFERS) {sql}")).await.unwrap();
            println!("{} ({}):", t.panel, t.ref_id);
            for line in plan.rows {
                println!("  {}", line[0].clone().unwrap_or_default());
            }
        }
        let (n, median, slowest) = time(&mut conn, &t.sql, &all, range).await;
        let (n1, median1, slowest1) = time(&mut conn, &t.sql, &one, range).await;
        lines.push(format!(
            "| {} ({}) | {n} | {} | {} | {n1} | {} | {} |",
            t.panel,
            t.ref_id,
            ms(median),
            ms(slowest),
            ms(median1),
            ms(slowest1)
        ));
    }
    println!("Grafana panels on {rows} rows; one cluster and repository: {:?}", one);
    println!("| query | rows, all | median, all | slowest, all | rows, one | median, one | slowest, one |");
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    for l in lines {
        println!("{l}");
    }
}
