//! The body of the stores' benchmark (docs/benchmarks.md, "Stores"), the same for every store:
//!
//! - recording a report of 10,000 drifts: all new, then all persistent, then 1% churn, each
//!   repetition on a fresh database;
//! - list and stats queries on a table of 1,000,000 rows (`BENCH_ROWS` changes the size),
//!   filled by the backend with its own SQL.
//!
//! It prints a Markdown table: median and slowest of the repetitions. Each store's bench is a
//! thin `main` that implements [`StoreBench`] and calls [`run`].

use std::time::{Duration, Instant};

use async_trait::async_trait;
use chrono::{DateTime, TimeZone, Utc};
use drift_model::sink::{DriftFilter, DriftStatus, PageRequest};
use drift_model::{Drift, DriftSink, DriftStore, DriftType, ResourceKey, ScanReport, Severity};

const DRIFTS: usize = 10_000;
const RECORD_REPS: usize = 5;
const QUERY_REPS: usize = 30;

/// What the benchmark needs of a store.
#[async_trait]
pub trait StoreBench: Send + Sync {
    /// The store measured.
    type Store: DriftSink + DriftStore;
    /// Its name, in the table's header.
    const NAME: &'static str;
    /// A new, empty store on a database of its own; `name` names the database where the
    /// backend names it (a file).
    async fn open(&self, name: &str) -> Self::Store;
    /// Fills the store with `rows` rows of history behind its back, as of [`now`] (a year: 2% of
    /// the rows open, the rest resolved after 1 minute to 7 days; 3 clusters, 10 repositories,
    /// 200 namespaces, 8 kinds, 10 types, 4 severities), and brings the statistics rollups and
    /// the planner's statistics up to date.
    async fn fill(&self, store: &Self::Store, rows: i64);
    /// Closes the store.
    async fn close(&self, store: Self::Store);
}

/// The time the benchmark's history ends at.
pub fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 30, 12, 0, 0).single().expect("valid date")
}

/// A drift as the engine makes them: one per Deployment, spread over 100 namespaces.
fn drift(i: usize) -> Drift {
    let mut d = crate::fixtures::drift(
        "Deployment",
        &format!("ns-{}", i % 100),
        &format!("app-{i}"),
        DriftType::ImageTagDrift,
        "spec.template.spec.containers[name=app].image",
        serde_json::json!(format!("registry.example/app:{}", i % 7)),
    );
    d.severity = Severity::High;
    d
}

fn report(id: &str, at: DateTime<Utc>, drifts: Vec<Drift>) -> ScanReport {
    let desired: Vec<ResourceKey> = drifts.iter().map(Drift::key).collect();
    crate::fixtures::report(id, at, &desired, drifts)
}

fn summary(mut times: Vec<Duration>) -> (Duration, Duration) {
    times.sort();
    (times[times.len() / 2], times[times.len() - 1])
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

/// Runs the benchmark and prints its table.
pub async fn run<B: StoreBench>(bench: &B) {
    println!("| {} | median | slowest |", B::NAME);
    println!("| --- | --- | --- |");

    // Recording: a fresh database per repetition.
    let (mut new, mut persistent, mut churn) = (Vec::new(), Vec::new(), Vec::new());
    for rep in 0..RECORD_REPS {
        let store = bench.open(&format!("record-{rep}")).await;
        let all: Vec<Drift> = (0..DRIFTS).map(drift).collect();
        let r1 = report(&format!("{rep}-new"), now(), all.clone());
        let t = Instant::now();
        let o = store.record(&r1).await.unwrap();
        new.push(t.elapsed());
        assert_eq!(o.opened, DRIFTS);
        let r2 = report(&format!("{rep}-persistent"), now() + chrono::Duration::minutes(5), all.clone());
        let t = Instant::now();
        let o = store.record(&r2).await.unwrap();
        persistent.push(t.elapsed());
        assert_eq!(o.updated, DRIFTS);
        // 1% churn: 100 drifts fixed, 100 new ones.
        let mut next: Vec<Drift> = all[DRIFTS / 100..].to_vec();
        next.extend((DRIFTS..DRIFTS + DRIFTS / 100).map(drift));
        let mut r3 = report(&format!("{rep}-churn"), now() + chrono::Duration::minutes(10), next);
        r3.desired.extend(all[..DRIFTS / 100].iter().map(Drift::key));
        r3.desired.sort();
        let t = Instant::now();
        let o = store.record(&r3).await.unwrap();
        churn.push(t.elapsed());
        assert_eq!((o.opened, o.updated, o.resolved), (DRIFTS / 100, DRIFTS - DRIFTS / 100, DRIFTS / 100));
        bench.close(store).await;
    }
    for (name, times) in [
        ("record 10,000 drifts, all new", new),
        ("record 10,000 drifts, all persistent", persistent),
        ("record 10,000 drifts, 1% churn", churn),
    ] {
        let (median, max) = summary(times);
        println!("| {name} | {} | {} |", ms(median), ms(max));
    }

    // Queries on a large table.
    let rows: i64 = std::env::var("BENCH_ROWS").ok().and_then(|v| v.parse().ok()).unwrap_or(1_000_000);
    let store = bench.open("large").await;
    let t = Instant::now();
    bench.fill(&store, rows).await;
    println!("| (fill {rows} rows and ANALYZE: {:.1} s) | | |", t.elapsed().as_secs_f64());
    let first = store.list(&DriftFilter::default(), PageRequest { limit: 100, after: None }).await.unwrap();
    let cursor = first.next.expect("more than one page");
    let queries: Vec<(String, DriftFilter, Option<i64>)> = vec![
        ("list, no filter, first page of 100".into(), DriftFilter::default(), None),
        ("list, no filter, next page (cursor)".into(), DriftFilter::default(), Some(cursor)),
        ("list, status=open".into(), DriftFilter { status: Some(DriftStatus::Open), ..Default::default() }, None),
        (
            "list, severity=CRITICAL".into(),
            DriftFilter { severity: Some(Severity::Critical), ..Default::default() },
            None,
        ),
        (
            "list, namespace=ns-50 and status=open".into(),
            DriftFilter { namespace: Some("ns-50".into()), status: Some(DriftStatus::Open), ..Default::default() },
            None,
        ),
        (
            "list, kind=Secret, since 1 day".into(),
            DriftFilter {
                kind: Some("Secret".into()),
                since: Some(now() - chrono::Duration::days(1)),
                ..Default::default()
            },
            None,
        ),
    ];
    for (name, filter, after) in &queries {
        let mut times = Vec::new();
        for _ in 0..QUERY_REPS {
            let t = Instant::now();
            let page = store.list(filter, PageRequest { limit: 100, after: *after }).await.unwrap();
            times.push(t.elapsed());
            assert!(!page.items.is_empty(), "{name}");
        }
        let (median, max) = summary(times);
        println!("| {name} | {} | {} |", ms(median), ms(max));
    }
    let stats_cases = [
        ("stats, no filter", DriftFilter::default()),
        ("stats, cluster=cluster-1", DriftFilter { cluster: Some("cluster-1".into()), ..Default::default() }),
        ("stats, namespace=ns-42", DriftFilter { namespace: Some("ns-42".into()), ..Default::default() }),
    ];
    for (name, filter) in &stats_cases {
        let mut times = Vec::new();
        for _ in 0..QUERY_REPS / 3 {
            let t = Instant::now();
            let stats = store.stats(filter, now()).await.unwrap();
            times.push(t.elapsed());
            assert!(stats.mean_time_to_resolve_seconds.is_some(), "{name}");
        }
        let (median, max) = summary(times);
        println!("| {name} | {} | {} |", ms(median), ms(max));
    }
    bench.close(store).await;
}
