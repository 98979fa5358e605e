//! Reports written at the same time by several writers (the watch beside a full pass, two
//! replicas): a drift new to all of them is opened once and announced once. The upsert reads
//! the live rows in its statement's snapshot; without the report lock, a writer whose snapshot
//! predates another's commit updated the row it had just missed and announced `opened` again.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use drift_model::{DriftSink, DriftType};
use drift_testkit::fixtures::{drift, key, report, t};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_drift_written_by_writers_at_once_is_opened_once() {
    let server = common::server();
    let url = server.create_database().await.expect("a database");
    let first = drift_postgres::PostgresStore::connect(&url).await.expect("connect");
    for round in 0..10 {
        let name = format!("settings-{round}");
        let mut writers = Vec::new();
        for w in 0..6 {
            let url = url.clone();
            let name = name.clone();
            writers.push(tokio::spawn(async move {
                let store = drift_postgres::PostgresStore::connect(&url).await.expect("connect");
                let d = drift("ConfigMap", "shop", &name, DriftType::ConfigmapDrift, "data.mode", json!("slow"));
                store
                    .record(&report(&format!("r{round}-w{w}"), t(round), &[key("ConfigMap", "shop", &name)], vec![d]))
                    .await
                    .expect("recorded")
            }));
        }
        for w in writers {
            w.await.unwrap();
        }
        let opened: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM events e JOIN drifts d ON d.id = e.drift_id WHERE e.kind = 'opened' AND d.resource_name = $1",
        )
        .bind(&name)
        .fetch_one(first.pool())
        .await
        .unwrap();
        assert_eq!(opened, 1, "round {round}: one opening of {name}");
    }
}

/// Resolves the open drifts of one cluster by plain SQL, through the triggers (what a report's
/// resolution does), in the transaction of `conn`.
const RESOLVE: &str = "UPDATE drifts SET status = 'resolved', resolved_at = detected_at + interval '1 hour', \
     resolution = 'reverted' WHERE cluster = $1 AND status = 'open'";

/// The narrow rollups of migration 0014 end their keys with the cluster: a writer of one cluster
/// never waits for the rows another cluster's writer holds until its commit. The same drift in
/// two clusters, resolved by two transactions at once: the second, given 5 s to take its locks,
/// commits while the first is still open (with a key of status, severity, type and repository
/// alone it waited for the first's `drift_counts_kinds` row and failed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writers_of_different_clusters_wait_for_no_rollup_row() {
    let server = common::server();
    let store = common::fresh(&server).await;
    let desired = [key("ConfigMap", "shop", "settings")];
    for cluster in ["east", "west"] {
        let d = drift("ConfigMap", "shop", "settings", DriftType::ConfigmapDrift, "data.mode", json!("slow"));
        let mut r = report(&format!("{cluster}-1"), t(0), &desired, vec![d]);
        r.cluster = cluster.to_owned();
        store.record(&r).await.unwrap();
    }
    let mut east = store.pool().begin().await.unwrap();
    let resolved = sqlx::query(RESOLVE).bind("east").execute(&mut *east).await.unwrap();
    assert_eq!(resolved.rows_affected(), 1);
    let mut west = store.pool().begin().await.unwrap();
    sqlx::query("SET LOCAL lock_timeout = '5s'").execute(&mut *west).await.unwrap();
    let resolved = sqlx::query(RESOLVE)
        .bind("west")
        .execute(&mut *west)
        .await
        .expect("west's writer takes no rollup row east's open transaction holds");
    assert_eq!(resolved.rows_affected(), 1);
    west.commit().await.unwrap();
    east.commit().await.unwrap();
    common::assert_rollups_match_rows(&store).await;
    // The readers sum over the clusters of the narrow keys.
    use drift_model::sink::{DriftFilter, DriftStore};
    for filter in [DriftFilter::default(), DriftFilter { cluster: Some("east".into()), ..Default::default() }] {
        let stats = store.stats(&filter, t(120)).await.unwrap();
        assert_eq!(stats, store.stats_from_rows(&filter, t(120)).await.unwrap(), "{filter:?}");
    }
    let all = store.stats(&DriftFilter::default(), t(120)).await.unwrap();
    assert_eq!(all.by_status.get("resolved"), Some(&2));
    assert_eq!(all.mean_time_to_resolve_seconds, Some(3600.0));
}

/// Four clusters' writers recording at once, each a random sequence of reports (drifts opened,
/// changed, resolved): every report commits, and the rollups, narrow ones included, hold
/// exactly what the rows add up to; statistics from them equal those from the rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn writers_of_different_clusters_at_once_commit_with_exact_rollups() {
    use drift_model::sink::{DriftFilter, DriftStore};
    let server = common::server();
    let url = server.create_database().await.unwrap();
    let store = drift_postgres::PostgresStore::connect(&url).await.unwrap();
    let desired: Vec<_> = (0..6).map(|i| common::deployment(&format!("ns-{}", i % 3), &format!("app-{i}"))).collect();
    let mut writers = Vec::new();
    for (w, cluster) in ["east", "west", "north", "south"].into_iter().enumerate() {
        let url = url.clone();
        let desired = desired.clone();
        writers.push(tokio::spawn(async move {
            let store = drift_postgres::PostgresStore::connect(&url).await.expect("connect");
            let mut next = common::sequence(11 + w as u64);
            for s in 0..12 {
                let mut r =
                    report(&format!("{cluster}-{s}"), t(s * 10), &desired, common::random_drifts(&desired, &mut next));
                r.cluster = cluster.to_owned();
                store.record(&r).await.expect("recorded");
            }
        }));
    }
    for w in writers {
        w.await.unwrap();
    }
    let scans: i64 = sqlx::query_scalar("SELECT count(*) FROM scans").fetch_one(store.pool()).await.unwrap();
    assert_eq!(scans, 48, "every report committed");
    common::assert_rollups_match_rows(&store).await;
    for filter in [
        DriftFilter::default(),
        DriftFilter { cluster: Some("north".into()), ..Default::default() },
        DriftFilter { namespace: Some("ns-1".into()), ..Default::default() },
    ] {
        let stats = store.stats(&filter, t(200)).await.unwrap();
        assert_eq!(stats, store.stats_from_rows(&filter, t(200)).await.unwrap(), "{filter:?}");
    }
}
