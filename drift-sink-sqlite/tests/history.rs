//! The drift history in SQLite: lifecycle, coverage, concurrent writers, failed writes,
//! retention, persistence, and agreement with the reference store.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use chrono::{DateTime, Utc};
use drift_core::memory::MemoryStore;
use drift_core::sink::{DriftFilter, DriftStatus, DriftStore, PageRequest, StoredDrift};
use drift_core::{CoverageStatus, Drift, DriftSink, DriftType, ResourceKey, ScanOutcome, ScanReport};
use drift_sink_sqlite::{SqliteConfig, SqliteSink};
use drift_testkit::fixtures::{key, report, t};

fn replicas(namespace: &str, name: &str, live: i64) -> Drift {
    drift_testkit::fixtures::drift(
        "Deployment",
        namespace,
        name,
        DriftType::ReplicasDrift,
        "spec.replicas",
        live.into(),
    )
}

fn deployment(namespace: &str, name: &str) -> ResourceKey {
    key("Deployment", namespace, name)
}

fn scan(id: &str, at: DateTime<Utc>, desired: &[ResourceKey], drifts: Vec<Drift>) -> ScanReport {
    report(id, at, desired, drifts)
}

struct Db {
    _dir: tempfile::TempDir,
    url: String,
}

fn db() -> Db {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("drift.db").display());
    Db { _dir: dir, url }
}

async fn rows(store: &dyn DriftStore) -> Vec<StoredDrift> {
    let mut out = Vec::new();
    let mut after = None;
    loop {
        let page = store.list(&DriftFilter::default(), PageRequest { limit: 1000, after }).await.unwrap();
        out.extend(page.items);
        match page.next {
            Some(n) => after = Some(n),
            None => return out,
        }
    }
}

async fn open(store: &dyn DriftStore) -> Vec<StoredDrift> {
    rows(store).await.into_iter().filter(|r| r.status == DriftStatus::Open).collect()
}

#[tokio::test]
async fn a_persistent_drift_seen_in_three_scans_is_one_row_with_occurrences_3() {
    let db = db();
    let store = SqliteSink::open(&db.url).await.unwrap();
    let web = [deployment("shop", "web")];
    for (i, live) in [5, 6, 7].into_iter().enumerate() {
        store
            .record(&scan(&format!("s{i}"), t(i as i64 * 5), &web, vec![replicas("shop", "web", live)]))
            .await
            .unwrap();
    }
    let rows = rows(&store).await;
    assert_eq!(rows.len(), 1);
    assert_eq!((rows[0].occurrences, rows[0].detected_at, rows[0].last_seen), (3, t(0), t(10)));
    assert_eq!(rows[0].cluster_value, Some(7.into()));
}

#[tokio::test]
async fn a_fixed_drift_is_resolved_and_a_drift_that_comes_back_opens_a_new_row() {
    let db = db();
    let store = SqliteSink::open(&db.url).await.unwrap();
    let web = [deployment("shop", "web")];
    store.record(&scan("s1", t(0), &web, vec![replicas("shop", "web", 5)])).await.unwrap();
    assert_eq!(store.record(&scan("s2", t(5), &web, vec![])).await.unwrap().resolved, 1);
    let first = rows(&store).await.pop().unwrap();
    assert_eq!((first.status, first.resolved_at), (DriftStatus::Resolved, Some(t(5))));
    assert_eq!(store.record(&scan("s3", t(10), &web, vec![replicas("shop", "web", 4)])).await.unwrap().opened, 1);
    let all = rows(&store).await;
    assert_eq!(all.len(), 2);
    assert_eq!(all[0].fingerprint, all[1].fingerprint);
    assert_eq!((all[0].status, all[0].detected_at), (DriftStatus::Open, t(10)));
    assert_eq!(all[1].status, DriftStatus::Resolved);
}

#[tokio::test]
async fn a_scan_whose_read_of_a_namespace_failed_resolves_nothing_in_that_namespace() {
    let db = db();
    let store = SqliteSink::open(&db.url).await.unwrap();
    let desired = [deployment("shop", "web"), deployment("billing", "api")];
    store
        .record(&scan("s1", t(0), &desired, vec![replicas("shop", "web", 2), replicas("billing", "api", 2)]))
        .await
        .unwrap();
    let mut partial = scan("s2", t(5), &desired, vec![]);
    partial.outcome = ScanOutcome::Partial;
    partial.coverage.set(
        &desired[1].group_kind(),
        Some("billing"),
        CoverageStatus::Failed { message: "timeout".into() },
    );
    assert_eq!(store.record(&partial).await.unwrap().resolved, 1);
    let open = open(&store).await;
    assert_eq!(open.len(), 1);
    assert_eq!((open[0].namespace.as_str(), open[0].last_seen), ("billing", t(0)));
}

#[tokio::test]
async fn replaying_a_scan_id_changes_nothing() {
    let db = db();
    let store = SqliteSink::open(&db.url).await.unwrap();
    let web = [deployment("shop", "web")];
    let r = scan("s1", t(0), &web, vec![replicas("shop", "web", 5)]);
    store.record(&r).await.unwrap();
    let before = rows(&store).await;
    assert!(store.record(&r).await.unwrap().replayed);
    assert!(store.record(&scan("s1", t(5), &web, vec![])).await.unwrap().replayed);
    assert_eq!(rows(&store).await, before);
}

#[tokio::test]
async fn the_database_itself_refuses_a_second_open_row_per_fingerprint() {
    let db = db();
    let store = SqliteSink::open(&db.url).await.unwrap();
    let web = [deployment("shop", "web")];
    store.record(&scan("s1", t(0), &web, vec![replicas("shop", "web", 5)])).await.unwrap();
    let dup = sqlx::query(
        "INSERT INTO drifts (detected_at, last_seen, repository, resource_kind, resource_name, drift_type, severity, \
         decision_source, recommended_action, cluster, fingerprint, classification) \
         SELECT detected_at, last_seen, repository, resource_kind, resource_name, drift_type, severity, \
         decision_source, recommended_action, cluster, fingerprint, classification FROM drifts",
    )
    .execute(store.pool())
    .await
    .unwrap_err();
    assert!(dup.to_string().contains("UNIQUE"), "{dup}");
}

#[tokio::test]
async fn two_writers_on_the_same_file_leave_one_open_row() {
    let db = db();
    let a = SqliteSink::open(&db.url).await.unwrap();
    let b = SqliteSink::open(&db.url).await.unwrap();
    let web = [deployment("shop", "web")];
    let ra = scan("scanner-a", t(0), &web, vec![replicas("shop", "web", 5)]);
    let rb = scan("scanner-b", t(0), &web, vec![replicas("shop", "web", 5)]);
    let (ta, tb) = (tokio::spawn(async move { a.record(&ra).await }), tokio::spawn(async move { b.record(&rb).await }));
    let (oa, ob) = (ta.await.unwrap().unwrap(), tb.await.unwrap().unwrap());
    let mut outcomes = [(oa.opened, oa.updated), (ob.opened, ob.updated)];
    outcomes.sort();
    assert_eq!(outcomes, [(0, 1), (1, 0)]);
    let store = SqliteSink::open(&db.url).await.unwrap();
    let all = rows(&store).await;
    assert_eq!(all.len(), 1);
    assert_eq!(all[0].occurrences, 2);
}

#[tokio::test]
async fn a_write_that_fails_half_way_leaves_no_partial_state() {
    let db = db();
    let store = SqliteSink::open(&db.url).await.unwrap();
    let desired = [deployment("shop", "web"), deployment("shop", "api")];
    store.record(&scan("s1", t(0), &desired, vec![replicas("shop", "web", 5)])).await.unwrap();
    let before = rows(&store).await;
    // Make the resolution step fail, after the scan row and the new drift are written.
    sqlx::raw_sql(
        "CREATE TRIGGER fail_resolution BEFORE UPDATE OF status ON drifts BEGIN SELECT RAISE(ABORT, 'injected'); END",
    )
    .execute(store.pool())
    .await
    .unwrap();
    let r2 = scan("s2", t(5), &desired, vec![replicas("shop", "api", 3)]);
    let err = store.record(&r2).await.unwrap_err();
    assert!(err.to_string().contains("injected"), "{err}");
    assert_eq!(rows(&store).await, before, "no drift opened, none resolved");
    assert_eq!(store.recent_scans(10).await.unwrap().len(), 1, "the failed scan is not recorded");
    sqlx::raw_sql("DROP TRIGGER fail_resolution").execute(store.pool()).await.unwrap();
    let o = store.record(&r2).await.unwrap();
    assert_eq!((o.opened, o.resolved, o.replayed), (1, 1, false));
}

#[tokio::test]
async fn the_file_is_created_when_missing_and_history_survives_reopening() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nested-not-needed.db");
    assert!(!path.exists());
    let url = format!("sqlite://{}", path.display());
    let store = SqliteSink::open(&url).await.unwrap();
    store.record(&scan("s1", t(0), &[deployment("shop", "web")], vec![replicas("shop", "web", 1)])).await.unwrap();
    store.close().await;
    assert!(path.exists());
    let again = SqliteSink::open(&url).await.unwrap();
    assert_eq!(rows(&again).await.len(), 1);
    let mode: String = sqlx::query_scalar("PRAGMA journal_mode").fetch_one(again.pool()).await.unwrap();
    assert_eq!(mode, "wal");
}

#[tokio::test]
async fn ten_thousand_drifts_in_one_report() {
    let db = db();
    let store = SqliteSink::open(&db.url).await.unwrap();
    let desired: Vec<_> = (0..10_000).map(|i| deployment(&format!("ns{}", i % 50), &format!("app{i}"))).collect();
    let drifts: Vec<_> =
        desired.iter().map(|k| replicas(k.namespace.as_deref().unwrap_or_default(), &k.name, 3)).collect();
    assert_eq!(store.record(&scan("s1", t(0), &desired, drifts.clone())).await.unwrap().opened, 10_000);
    let o = store.record(&scan("s2", t(5), &desired, drifts[100..].to_vec())).await.unwrap();
    assert_eq!((o.opened, o.updated, o.resolved), (0, 9_900, 100));
    let stats = store.stats(&DriftFilter::default(), t(5)).await.unwrap();
    assert_eq!(stats.by_status.get("open"), Some(&9_900));
    assert_eq!(stats.by_namespace.len(), 50);
    assert_eq!(stats.mean_time_to_resolve_seconds, Some(300.0));
}

#[tokio::test]
async fn retention_deletes_old_resolved_drifts_and_scans_but_never_open_ones() {
    let db = db();
    let store = SqliteSink::from_config(&SqliteConfig::new(&db.url).with_retention_days(30)).await.unwrap();
    let desired = [deployment("shop", "web"), deployment("shop", "api")];
    let day = chrono::Duration::days(1);
    store
        .record(&scan("s1", t(0), &desired, vec![replicas("shop", "web", 1), replicas("shop", "api", 1)]))
        .await
        .unwrap();
    store.record(&scan("s2", t(0) + day, &desired, vec![replicas("shop", "api", 1)])).await.unwrap();
    store.record(&scan("s3", t(0) + day * 40, &desired, vec![replicas("shop", "api", 1)])).await.unwrap();
    let all = rows(&store).await;
    assert_eq!(all.len(), 1);
    assert_eq!((all[0].resource_name.as_str(), all[0].status, all[0].detected_at), ("api", DriftStatus::Open, t(0)));
    let scans: Vec<String> = store.recent_scans(10).await.unwrap().into_iter().map(|s| s.scan_id).collect();
    assert_eq!(scans, ["s3"]);
}

/// A deterministic sequence of scans recorded into SQLite and into the reference store: rows
/// (but ids), outcomes, listings and statistics agree.
#[tokio::test]
async fn agrees_with_the_reference_store_over_many_scans() {
    let db = db();
    let store = SqliteSink::open(&db.url).await.unwrap();
    let memory = MemoryStore::new();
    // The same reports into a store whose retention deletes history as the sequence goes on.
    let kept_db = crate::db();
    let kept = SqliteSink::from_config(&SqliteConfig::new(&kept_db.url).with_retention_days(1)).await.unwrap();
    let desired: Vec<_> = (0..12).map(|i| deployment(["shop", "billing", "ops"][i % 3], &format!("app{i}"))).collect();
    let mut seed: u64 = 0x5eed;
    let mut next = move |n: u64| {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (seed >> 33) % n
    };
    for s in 0..40 {
        let mut drifts = Vec::new();
        for k in &desired {
            for (ty, path) in [(DriftType::ReplicasDrift, "spec.replicas"), (DriftType::ImageTagDrift, "spec.image")] {
                if next(3) == 0 {
                    let ns = k.namespace.as_deref().unwrap_or_default();
                    let mut d =
                        drift_testkit::fixtures::drift("Deployment", ns, &k.name, ty, path, (next(5) as i64).into());
                    d.severity = drift_core::Severity::ALL[next(4) as usize];
                    drifts.push(d);
                }
            }
        }
        let mut r = scan(&format!("s{s}"), t(s * 97), &desired, drifts);
        match next(6) {
            0 => r.outcome = ScanOutcome::Failed,
            1 => {
                r.outcome = ScanOutcome::Partial;
                r.coverage.set(
                    &desired[0].group_kind(),
                    Some("ops"),
                    CoverageStatus::Forbidden { message: "403".into() },
                );
            }
            _ => {}
        }
        if next(4) == 0 {
            r.repository = "infra".into();
        }
        assert_eq!(store.record(&r).await.unwrap(), memory.record(&r).await.unwrap(), "outcome of scan {s}");
        kept.record(&r).await.unwrap();
        // The rollups stay exact after every scan, and stats from them equal stats from the rows.
        for store in [&store, &kept] {
            common::assert_rollups_match_rows(store).await;
            for filter in drift_testkit::fixtures::stats_filters() {
                common::assert_stats_match_rows(store, &filter, r.finished_at).await;
            }
        }
    }
    assert!(rows(&kept).await.len() < rows(&store).await.len(), "retention deleted some history");
    let strip = |rows: Vec<StoredDrift>| {
        rows.into_iter()
            .map(|mut r| {
                r.id = 0;
                r
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(strip(rows(&store).await), strip(rows(&memory).await), "same rows in the same order");
    for filter in drift_testkit::fixtures::stats_filters() {
        for now in [t(40 * 97), t(40 * 97) + chrono::Duration::days(3)] {
            let (a, b) = (store.stats(&filter, now).await.unwrap(), memory.stats(&filter, now).await.unwrap());
            assert_eq!(
                (&a.by_status, &a.by_severity, &a.by_type, &a.by_namespace, &a.by_repository, &a.trend),
                (&b.by_status, &b.by_severity, &b.by_type, &b.by_namespace, &b.by_repository, &b.trend),
                "{filter:?}"
            );
            let close = |x: Option<f64>, y: Option<f64>| match (x, y) {
                (Some(x), Some(y)) => (x - y).abs() < 1e-6,
                (x, y) => x == y,
            };
            assert!(close(a.mean_time_to_resolve_seconds, b.mean_time_to_resolve_seconds), "{a:?} {b:?}");
            assert!(close(a.p95_time_to_resolve_seconds, b.p95_time_to_resolve_seconds), "{a:?} {b:?}");
        }
    }
}
