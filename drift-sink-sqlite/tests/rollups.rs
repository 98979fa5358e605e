//! The statistics rollups (`drift_counts`, `drift_daily`): exact after severity changes,
//! resolutions, retention, concurrent writers, and when migration 0002 backfills them from an
//! existing history.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use drift_core::sink::{DriftFilter, DriftStore};
use drift_core::{CoverageStatus, Drift, DriftSink, DriftType, ErrorKind, ResourceKey, ScanOutcome, Severity};
use drift_sink_sqlite::{SqlStore, SqliteSink};
use drift_testkit::fixtures::{key, report, t};

fn replicas(namespace: &str, name: &str, severity: Severity) -> Drift {
    let mut d = drift_testkit::fixtures::drift(
        "Deployment",
        namespace,
        name,
        DriftType::ReplicasDrift,
        "spec.replicas",
        3.into(),
    );
    d.severity = severity;
    d
}

fn world(n: usize) -> Vec<ResourceKey> {
    (0..n).map(|i| key("Deployment", ["shop", "billing", "ops"][i % 3], &format!("app{i}"))).collect()
}

/// A pseudo-random sequence (a linear congruential generator), the same on every run.
fn sequence(seed: u64) -> impl FnMut(u64) -> u64 {
    let mut state = seed;
    move |n| {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (state >> 33) % n
    }
}

/// Random drifts over `desired`, with random severities.
fn drifts(desired: &[ResourceKey], next: &mut impl FnMut(u64) -> u64) -> Vec<Drift> {
    desired
        .iter()
        .filter_map(|k| {
            let d = replicas(k.namespace.as_deref().unwrap_or_default(), &k.name, Severity::ALL[next(4) as usize]);
            (next(2) == 0).then_some(d)
        })
        .collect()
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

#[tokio::test]
async fn a_drift_whose_severity_changes_moves_between_rollup_keys() {
    let db = db();
    let store = SqliteSink::open(&db.url).await.unwrap();
    let web = [key("Deployment", "shop", "web")];
    store.record(&report("s1", t(0), &web, vec![replicas("shop", "web", Severity::High)])).await.unwrap();
    store.record(&report("s2", t(5), &web, vec![replicas("shop", "web", Severity::Critical)])).await.unwrap();
    let stats = store.stats(&DriftFilter::default(), t(5)).await.unwrap();
    assert_eq!(stats.by_severity.into_iter().collect::<Vec<_>>(), [("CRITICAL".to_owned(), 1)]);
    let high = DriftFilter { severity: Some(Severity::High), ..Default::default() };
    assert!(store.stats(&high, t(5)).await.unwrap().by_status.is_empty(), "nothing left under HIGH");
    assert_rollups_match_rows(&store).await;
}

/// Four handles on the same file record overlapping reports at once (SQLite serialises their
/// transactions): the rollups hold what the rows add up to.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_writers_keep_the_rollups_exact() {
    let db = db();
    let desired = world(18);
    let mut tasks = Vec::new();
    for w in 0..4u64 {
        let store = SqliteSink::open(&db.url).await.unwrap();
        let desired = desired.clone();
        tasks.push(tokio::spawn(async move {
            let mut next = sequence(w + 1);
            let mut results = Vec::new();
            for s in 0..8 {
                let mut r = report(&format!("w{w}-s{s}"), t(s * 10 + w as i64), &desired, drifts(&desired, &mut next));
                if next(3) == 0 {
                    r.outcome = ScanOutcome::Partial;
                    let gk = desired[0].group_kind();
                    r.coverage.set(&gk, Some("ops"), CoverageStatus::Forbidden { message: "403".into() });
                }
                results.push(store.record(&r).await);
            }
            results
        }));
    }
    let mut recorded = 0;
    for task in tasks {
        for result in task.await.unwrap() {
            match result {
                Ok(_) => recorded += 1,
                // The database stayed busy through every retry: the report is not recorded.
                Err(e) => assert!(e.kind() == ErrorKind::Conflict && e.is_temporary(), "{e}"),
            }
        }
    }
    assert!(recorded >= 16, "most reports were recorded ({recorded} of 32)");
    let store = SqliteSink::open(&db.url).await.unwrap();
    assert_rollups_match_rows(&store).await;
    for filter in drift_testkit::fixtures::stats_filters() {
        assert_stats_match_rows(&store, &filter, t(80)).await;
    }
}

/// A database with a history and without migration 0002 (taken back by hand: this store
/// cannot write without its rollups): migration 0002 builds the rollups from the rows.
#[tokio::test]
async fn migration_0002_backfills_the_rollups_from_an_existing_history() {
    let db = db();
    let store = SqliteSink::open(&db.url).await.unwrap();
    let desired = world(6);
    let mut next = sequence(7);
    for s in 0..12 {
        store.record(&report(&format!("s{s}"), t(s * 300), &desired, drifts(&desired, &mut next))).await.unwrap();
    }
    for undo in [
        "DROP TABLE drift_counts",
        "DROP TABLE drift_daily",
        "DROP INDEX drifts_resolved_ttr",
        "DELETE FROM _sqlx_migrations WHERE version = 2",
    ] {
        sqlx::query(undo).execute(store.pool()).await.unwrap();
    }
    store.migrate().await.unwrap();
    assert_rollups_match_rows(&store).await;
    let rows = store.stats_from_rows(&DriftFilter::default(), t(3300)).await.unwrap();
    assert!(rows.by_status.get("resolved").is_some_and(|n| *n > 0), "{rows:?}");
    assert_eq!(store.stats(&DriftFilter::default(), t(3300)).await.unwrap(), rows);
    for filter in drift_testkit::fixtures::stats_filters() {
        assert_stats_match_rows(&store, &filter, t(3300)).await;
    }
}

#[tokio::test]
async fn rows_deleted_by_hand_are_counted_again_by_rebuild_rollups() {
    let db = db();
    let store = SqliteSink::open(&db.url).await.unwrap();
    let desired = world(6);
    let mut next = sequence(3);
    for s in 0..6 {
        store.record(&report(&format!("s{s}"), t(s * 60), &desired, drifts(&desired, &mut next))).await.unwrap();
    }
    sqlx::query("DELETE FROM drifts WHERE namespace = 'shop'").execute(store.pool()).await.unwrap();
    let everything = DriftFilter::default();
    assert_ne!(
        store.stats(&everything, t(300)).await.unwrap(),
        store.stats_from_rows(&everything, t(300)).await.unwrap(),
        "a statement of the operator's own bypasses the rollups"
    );
    store.rebuild_rollups().await.unwrap();
    assert_rollups_match_rows(&store).await;
    assert_stats_match_rows(&store, &everything, t(300)).await;
}
