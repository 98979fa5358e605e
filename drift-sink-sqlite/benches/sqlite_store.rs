//! Benchmark of the SQLite store on a file in a temporary folder (WAL, synchronous=NORMAL, the
//! store's own settings):
//!
//! - recording a report of 10,000 drifts: all new, then all persistent, then 1% churn;
//! - list and stats queries on a table of 1,000,000 rows.
//!
//! `cargo bench -p drift-sink-sqlite --bench sqlite_store` prints a Markdown table
//! (median and slowest of the repetitions). `BENCH_ROWS` changes the table size.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use chrono::{DateTime, TimeZone, Utc};
use drift_core::sink::{DriftFilter, DriftStatus, DriftStore, PageRequest};
use drift_core::*;
use drift_sink_sqlite::SqliteSink;

const DRIFTS: usize = 10_000;
const RECORD_REPS: usize = 5;
const QUERY_REPS: usize = 30;

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 30, 12, 0, 0).single().expect("valid date")
}

/// A drift as the engine makes them: one per Deployment, spread over 100 namespaces.
fn drift(i: usize) -> Drift {
    let mut d = drift_testkit::fixtures::drift(
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
    drift_testkit::fixtures::report(id, at, &desired, drifts)
}

fn summary(mut times: Vec<Duration>) -> (Duration, Duration) {
    times.sort();
    (times[times.len() / 2], times[times.len() - 1])
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

#[tokio::main]
async fn main() {
    let dir = tempfile::tempdir().unwrap();
    let url = |name: &str| format!("sqlite://{}", dir.path().join(name).display());
    println!("| SQLite | median | slowest |");
    println!("| --- | --- | --- |");

    // Recording: a fresh database per repetition.
    let (mut new, mut persistent, mut churn) = (Vec::new(), Vec::new(), Vec::new());
    for rep in 0..RECORD_REPS {
        let store = SqliteSink::open(&url(&format!("record-{rep}.db"))).await.unwrap();
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
        store.close().await;
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
    let store = SqliteSink::open(&url("large.db")).await.unwrap();
    let t = Instant::now();
    fill(&store, rows).await;
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
    store.close().await;
}

/// A year of history: 2% of the rows open, the rest resolved after 1 minute to 7 days; 3
/// clusters, 10 repositories, 200 namespaces, 8 kinds, 10 types, 4 severities (as in the
/// PostgreSQL benchmark).
async fn fill(store: &SqliteSink, rows: i64) {
    let end = now().timestamp_micros();
    let year: i64 = 365 * 86_400 * 1_000_000;
    sqlx::query(
        "WITH RECURSIVE s(g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM s WHERE g < ?2), \
              t(g, d) AS (SELECT g, ?1 - ?3 + ?3 / ?2 * g FROM s) \
         INSERT INTO drifts (detected_at, last_seen, occurrences, repository, namespace, resource_kind, \
           resource_name, drift_type, severity, git_value, cluster_value, status, resolved_at, decision_source, \
           recommended_action, cluster, api_group, path, fingerprint, changed_by, changed_at, classification) \
         SELECT d, d + 300000000 * (g % 12), 1 + g % 12, 'repo-' || (g % 10), 'ns-' || (g % 200), \
           json_extract('[\"Deployment\",\"Service\",\"ConfigMap\",\"Secret\",\"StatefulSet\",\"DaemonSet\",\"Ingress\",\"Job\"]', '$[' || (g % 8) || ']'), \
           'app-' || (g % 5000), \
           json_extract('[\"service_port_drift\",\"image_tag_drift\",\"resource_limit_drift\",\"resource_request_drift\",\"replicas_drift\",\"configmap_drift\",\"secret_drift\",\"missing_resource\",\"spec_drift\",\"metadata_drift\"]', '$[' || ((g / 8) % 10) || ']'), \
           json_extract('[\"LOW\",\"MEDIUM\",\"HIGH\",\"CRITICAL\"]', '$[' || ((g / 3) % 4) || ']'), '\"git\"', \
           CAST(g % 100 AS TEXT), \
           CASE WHEN g % 50 = 0 THEN 'open' ELSE 'resolved' END, \
           CASE WHEN g % 50 = 0 THEN NULL ELSE d + 60000000 * (1 + (g * 7919) % 10080) END, \
           'scanner', 'suggest_revert', 'cluster-' || (g % 3), 'apps', 'spec.replicas', \
           printf('%064d', g), 'kubectl-edit', d, 'manual_change' \
         FROM t WHERE true",
    )
    .bind(end)
    .bind(rows)
    .bind(year)
    .execute(store.pool())
    .await
    .unwrap();
    // The rows were written behind the store's back: compute its statistics rollups.
    store.rebuild_rollups().await.unwrap();
    sqlx::query("ANALYZE").execute(store.pool()).await.unwrap();
}
