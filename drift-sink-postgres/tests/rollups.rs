//! The statistics rollups (`drift_counts`, `drift_daily`, kept by triggers): exact after
//! severity changes, resolutions, retention, hand-made deletes, concurrent writers, and when
//! migration 0002 backfills them from an existing history.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use drift_core::sink::{DriftFilter, DriftStore};
use drift_core::{CoverageStatus, DriftSink, ErrorKind, ScanOutcome, Severity};
use drift_sink_postgres::{MIGRATOR, PostgresConfig, PostgresSink, SqlStore};

/// A pseudo-random sequence (a linear congruential generator), the same on every run.
fn sequence(seed: u64) -> impl FnMut(u64) -> u64 {
    let mut state = seed;
    move |n| {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (state >> 33) % n
    }
}

#[tokio::test]
async fn a_drift_whose_severity_changes_moves_between_rollup_keys() {
    let server = server();
    let store = fresh(&server).await;
    let web = [deployment("shop", "web")];
    let mut d = replicas("shop", "web", 5);
    d.severity = Severity::High;
    store.record(&scan("s1", t(0), &web, vec![d.clone()])).await.unwrap();
    d.severity = Severity::Critical;
    store.record(&scan("s2", t(5), &web, vec![d])).await.unwrap();
    let stats = store.stats(&DriftFilter::default(), t(5)).await.unwrap();
    assert_eq!(stats.by_severity.into_iter().collect::<Vec<_>>(), [("CRITICAL".to_owned(), 1)]);
    let high = DriftFilter { severity: Some(Severity::High), ..Default::default() };
    assert!(store.stats(&high, t(5)).await.unwrap().by_status.is_empty(), "nothing left under HIGH");
    assert_rollups_match_rows(&store).await;
}

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

/// Four writers record overlapping reports of the same cluster and repository at once (they
/// upsert the same drifts, resolve each other's, and add to the same rollup keys): whatever
/// the interleaving, the rollups hold what the rows add up to.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_writers_keep_the_rollups_exact() {
    let server = server();
    let url = server.create_database().await.unwrap();
    let desired: Vec<_> = (0..18).map(|i| deployment(["shop", "billing", "ops"][i % 3], &format!("app{i}"))).collect();
    let mut tasks = Vec::new();
    for w in 0..4u64 {
        let store = PostgresSink::connect(&url).await.unwrap();
        let desired = desired.clone();
        tasks.push(tokio::spawn(async move {
            let mut next = sequence(w + 1);
            let mut results = Vec::new();
            for s in 0..8 {
                let drifts = desired
                    .iter()
                    .filter_map(|k| {
                        let mut d = replicas(k.namespace.as_deref().unwrap_or_default(), &k.name, 3);
                        d.severity = Severity::ALL[next(4) as usize];
                        (next(2) == 0).then_some(d)
                    })
                    .collect();
                let mut r = scan(&format!("w{w}-s{s}"), t(s * 10 + w as i64), &desired, drifts);
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
                // A deadlock that persisted through every retry: the report is not recorded.
                Err(e) => assert!(e.kind() == ErrorKind::Conflict && e.is_temporary(), "{e}"),
            }
        }
    }
    assert!(recorded >= 16, "most reports were recorded ({recorded} of 32)");
    let store = PostgresSink::connect(&url).await.unwrap();
    assert_rollups_match_rows(&store).await;
    for filter in drift_testkit::fixtures::stats_filters() {
        assert_stats_match_rows(&store, &filter, t(80)).await;
    }
}

/// A database at migration 0001 with a history: migration 0002 builds the rollups from it.
#[tokio::test]
async fn migration_0002_backfills_the_rollups_from_an_existing_history() {
    let server = server();
    let url = server.create_database().await.unwrap();
    let store =
        PostgresSink::from_config(&PostgresConfig { migrate: false, ..PostgresConfig::new(&url) }).await.unwrap();
    MIGRATOR.run_to(1, store.pool()).await.unwrap();
    // Today's writer also needs the columns of migration 0003 (which adds them if missing).
    sqlx::query("ALTER TABLE drifts ADD COLUMN resolution text, ADD COLUMN desired_digest text")
        .execute(store.pool())
        .await
        .unwrap();
    let desired = [deployment("shop", "web"), deployment("shop", "api"), deployment("ops", "db")];
    let mut next = sequence(7);
    for s in 0..12 {
        let drifts = desired
            .iter()
            .filter_map(|k| {
                let mut d = replicas(k.namespace.as_deref().unwrap_or_default(), &k.name, 2);
                d.severity = Severity::ALL[next(4) as usize];
                (next(2) == 0).then_some(d)
            })
            .collect();
        store.record(&scan(&format!("s{s}"), t(s * 300), &desired, drifts)).await.unwrap();
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
