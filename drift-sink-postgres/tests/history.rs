//! The drift history against a real PostgreSQL: lifecycle, coverage, races, interrupted writes,
//! restarts, retention, and agreement with the reference store.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use common::*;
use drift_core::memory::MemoryStore;
use drift_core::sink::{DriftFilter, DriftStatus, DriftStore, PageRequest};
use drift_core::{CoverageStatus, DriftSink, DriftType, ScanOutcome};
use drift_sink_postgres::{PostgresConfig, PostgresSink};
use sqlx::Connection;

#[tokio::test]
async fn a_persistent_drift_seen_in_three_scans_is_one_row_with_occurrences_3() {
    let server = server();
    let store = fresh(&server).await;
    let web = [deployment("shop", "web")];
    for (i, live) in [5, 6, 7].into_iter().enumerate() {
        store
            .record(&scan(&format!("s{i}"), t(i as i64 * 5), &web, vec![replicas("shop", "web", live)]))
            .await
            .unwrap();
    }
    let rows = rows(&store).await;
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].occurrences, 3);
    assert_eq!((rows[0].detected_at, rows[0].last_seen), (t(0), t(10)));
    assert_eq!(rows[0].cluster_value, Some(7.into()), "the latest cluster value is kept");
    let n: i64 = sqlx::query_scalar("SELECT count(*) FROM drifts").fetch_one(store.pool()).await.unwrap();
    assert_eq!(n, 1, "one row in the table itself");
}

#[tokio::test]
async fn a_fixed_drift_is_resolved_with_resolved_at_and_a_drift_that_comes_back_opens_a_new_row() {
    let server = server();
    let store = fresh(&server).await;
    let web = [deployment("shop", "web")];
    store.record(&scan("s1", t(0), &web, vec![replicas("shop", "web", 5)])).await.unwrap();
    let fixed = store.record(&scan("s2", t(5), &web, vec![])).await.unwrap();
    assert_eq!(fixed.resolved, 1);
    let first = rows(&store).await.pop().unwrap();
    assert_eq!((first.status, first.resolved_at), (DriftStatus::Resolved, Some(t(5))));

    let back = store.record(&scan("s3", t(10), &web, vec![replicas("shop", "web", 4)])).await.unwrap();
    assert_eq!((back.opened, back.updated), (1, 0));
    let all = rows(&store).await;
    assert_eq!(all.len(), 2, "a new row, the old one kept as history");
    assert_eq!(all[0].fingerprint, all[1].fingerprint, "same identity");
    assert_eq!((all[0].status, all[0].detected_at, all[0].occurrences), (DriftStatus::Open, t(10), 1));
    assert_eq!((all[1].status, all[1].resolved_at), (DriftStatus::Resolved, Some(t(5))));
}

#[tokio::test]
async fn a_scan_whose_read_of_a_namespace_failed_resolves_nothing_in_that_namespace() {
    let server = server();
    let store = fresh(&server).await;
    let desired = [deployment("shop", "web"), deployment("billing", "api"), deployment("billing", "worker")];
    let all = vec![replicas("shop", "web", 2), replicas("billing", "api", 2), replicas("billing", "worker", 2)];
    store.record(&scan("s1", t(0), &desired, all)).await.unwrap();

    let mut partial = scan("s2", t(5), &desired, vec![]);
    partial.outcome = ScanOutcome::Partial;
    let gk = desired[1].group_kind();
    partial.coverage.set(&gk, Some("billing"), CoverageStatus::Failed { message: "timeout".into() });
    let outcome = store.record(&partial).await.unwrap();
    assert_eq!(outcome.resolved, 1, "only shop was read");
    let open = open(&store).await;
    let mut names: Vec<_> = open.iter().map(|r| (r.namespace.as_str(), r.resource_name.as_str())).collect();
    names.sort();
    assert_eq!(names, [("billing", "api"), ("billing", "worker")]);
    assert!(open.iter().all(|r| r.last_seen == t(0) && r.occurrences == 1), "not seen by the failed read");

    // A scan that failed as a whole resolves nothing anywhere.
    let mut failed = scan("s3", t(10), &desired, vec![]);
    failed.outcome = ScanOutcome::Failed;
    assert_eq!(store.record(&failed).await.unwrap().resolved, 0);
    assert_eq!(common::open(&store).await.len(), 2);
}

#[tokio::test]
async fn replaying_a_scan_id_changes_nothing() {
    let server = server();
    let store = fresh(&server).await;
    let web = [deployment("shop", "web")];
    let r = scan("s1", t(0), &web, vec![replicas("shop", "web", 5)]);
    store.record(&r).await.unwrap();
    let before = rows(&store).await;
    let again = store.record(&r).await.unwrap();
    assert!(again.replayed);
    assert_eq!((again.opened, again.updated, again.resolved), (0, 0, 0));
    assert_eq!(rows(&store).await, before);
    // Even a report with the same id and other content is a replay.
    let other = scan("s1", t(5), &web, vec![]);
    assert!(store.record(&other).await.unwrap().replayed);
    assert_eq!(rows(&store).await, before);
    assert_eq!(store.recent_scans(10).await.unwrap().len(), 1);
}

#[tokio::test]
async fn the_database_itself_refuses_a_second_open_row_per_fingerprint() {
    let server = server();
    let store = fresh(&server).await;
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
    assert!(dup.to_string().contains("drifts_open_fingerprint"), "{dup}");
}

#[tokio::test]
async fn two_writers_racing_on_the_same_drift_leave_one_open_row() {
    let server = server();
    let url = server.create_database().await.unwrap();
    let a = PostgresSink::connect(&url).await.unwrap();
    let b = PostgresSink::connect(&url).await.unwrap();
    let web = [deployment("shop", "web")];
    let ra = scan("scanner-a", t(0), &web, vec![replicas("shop", "web", 5)]);
    let rb = scan("scanner-b", t(0), &web, vec![replicas("shop", "web", 5)]);

    // Hold both writers at their first statement, then let them go together.
    let mut gate = sqlx::PgConnection::connect(&url).await.unwrap();
    sqlx::query("BEGIN").execute(&mut gate).await.unwrap();
    sqlx::query("LOCK TABLE scans IN EXCLUSIVE MODE").execute(&mut gate).await.unwrap();
    let (ta, tb) = (tokio::spawn(async move { a.record(&ra).await }), tokio::spawn(async move { b.record(&rb).await }));
    wait_for(
        &url,
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'drift' AND wait_event_type = 'Lock'",
        2,
    )
    .await;
    sqlx::query("COMMIT").execute(&mut gate).await.unwrap();
    let (oa, ob) = (ta.await.unwrap().unwrap(), tb.await.unwrap().unwrap());

    let mut outcomes = [(oa.opened, oa.updated), (ob.opened, ob.updated)];
    outcomes.sort();
    assert_eq!(outcomes, [(0, 1), (1, 0)], "one writer opened the drift, the other saw it again");
    let store = PostgresSink::connect(&url).await.unwrap();
    let all = rows(&store).await;
    assert_eq!(all.len(), 1, "{all:#?}");
    assert_eq!((all[0].status, all[0].occurrences), (DriftStatus::Open, 2));
}

#[tokio::test]
async fn a_report_interrupted_mid_write_leaves_no_partial_state() {
    let server = server();
    let url = server.create_database().await.unwrap();
    let store = PostgresSink::connect(&url).await.unwrap();
    let desired = [deployment("shop", "web"), deployment("shop", "api")];
    store.record(&scan("s1", t(0), &desired, vec![replicas("shop", "web", 5)])).await.unwrap();
    let before = rows(&store).await;

    // The next report opens a drift on api and resolves web's. Lock web's row from another
    // connection so the writer stops at the resolution, after its scan row and the new drift
    // are written; then kill its connection (each retry too).
    let mut holder = sqlx::PgConnection::connect(&url).await.unwrap();
    sqlx::query("BEGIN").execute(&mut holder).await.unwrap();
    sqlx::query("SELECT id FROM drifts FOR UPDATE").execute(&mut holder).await.unwrap();
    let holder_pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()").fetch_one(&mut holder).await.unwrap();
    // pg_stat_activity is a snapshot per transaction: watch from a connection outside one.
    let mut monitor = sqlx::PgConnection::connect(&url).await.unwrap();
    let writer = store.clone();
    let r2 = scan("s2", t(5), &desired, vec![replicas("shop", "api", 3)]);
    let task = tokio::spawn(async move { writer.record(&r2).await });
    let mut killed = 0;
    let deadline = Instant::now() + Duration::from_secs(60);
    while !task.is_finished() {
        assert!(Instant::now() < deadline, "the writer never finished ({killed} connections killed)");
        let pids: Vec<i32> = sqlx::query_scalar(
            "SELECT pid FROM pg_stat_activity WHERE application_name = 'drift' AND wait_event_type = 'Lock' \
             AND $1 = ANY(pg_blocking_pids(pid))",
        )
        .bind(holder_pid)
        .fetch_all(&mut monitor)
        .await
        .unwrap();
        for pid in pids {
            let done: bool =
                sqlx::query_scalar("SELECT pg_terminate_backend($1)").bind(pid).fetch_one(&mut monitor).await.unwrap();
            killed += usize::from(done);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let err = task.await.unwrap().unwrap_err();
    assert!(killed >= 1);
    assert_eq!(err.kind(), drift_core::ErrorKind::Unavailable, "{err}");
    assert!(err.is_temporary(), "a lost connection is worth retrying: {err}");
    sqlx::query("ROLLBACK").execute(&mut holder).await.unwrap();

    assert_eq!(rows(&store).await, before, "no drift opened, none resolved");
    let scans: Vec<String> = store.recent_scans(10).await.unwrap().into_iter().map(|s| s.scan_id).collect();
    assert_eq!(scans, ["s1"], "the interrupted scan is not recorded");

    // Written again, the report lands whole.
    let r2 = scan("s2", t(5), &desired, vec![replicas("shop", "api", 3)]);
    let o = store.record(&r2).await.unwrap();
    assert_eq!((o.opened, o.resolved, o.replayed), (1, 1, false));
}

#[tokio::test]
async fn a_dropped_write_leaves_no_partial_state() {
    let server = server();
    let url = server.create_database().await.unwrap();
    let store = PostgresSink::connect(&url).await.unwrap();
    let desired = [deployment("shop", "web"), deployment("shop", "api")];
    store.record(&scan("s1", t(0), &desired, vec![replicas("shop", "web", 5)])).await.unwrap();
    let before = rows(&store).await;

    let mut holder = sqlx::PgConnection::connect(&url).await.unwrap();
    sqlx::query("BEGIN").execute(&mut holder).await.unwrap();
    sqlx::query("SELECT id FROM drifts FOR UPDATE").execute(&mut holder).await.unwrap();
    let writer = store.clone();
    let r2 = scan("s2", t(5), &desired, vec![replicas("shop", "api", 3)]);
    let task = tokio::spawn(async move { writer.record(&r2).await });
    wait_for(
        &url,
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'drift' AND wait_event_type = 'Lock'",
        1,
    )
    .await;
    // The caller gives up (a timeout, a shutdown): the future is dropped mid-transaction.
    task.abort();
    assert!(task.await.unwrap_err().is_cancelled());
    sqlx::query("ROLLBACK").execute(&mut holder).await.unwrap();

    assert_eq!(rows(&store).await, before);
    assert_eq!(store.recent_scans(10).await.unwrap().len(), 1);
    let r2 = scan("s2", t(5), &desired, vec![replicas("shop", "api", 3)]);
    assert_eq!(store.record(&r2).await.unwrap().opened, 1, "the dropped scan was not recorded");
}

#[tokio::test]
async fn postgres_restarted_between_scans_the_next_scan_succeeds() {
    let server = server();
    let store = fresh(&server).await;
    let web = [deployment("shop", "web")];
    store.record(&scan("s1", t(0), &web, vec![replicas("shop", "web", 5)])).await.unwrap();
    server.restart().unwrap();
    let o = store.record(&scan("s2", t(5), &web, vec![replicas("shop", "web", 5)])).await.unwrap();
    assert_eq!(o.updated, 1);
    assert_eq!(rows(&store).await[0].occurrences, 2);
    store.ping().await.unwrap();
}

#[tokio::test]
async fn a_store_that_is_down_answers_unavailable() {
    let server = server();
    let mut config = PostgresConfig::new(server.create_database().await.unwrap());
    config.connect_timeout = Duration::from_secs(1);
    let store = PostgresSink::from_config(&config).await.unwrap();
    server.stop().unwrap();
    let err = store.ping().await.unwrap_err();
    assert_eq!(err.kind(), drift_core::ErrorKind::Unavailable, "{err}");
    assert!(err.is_temporary());
}

#[tokio::test]
async fn ten_thousand_drifts_in_one_report() {
    let server = server();
    let store = fresh(&server).await;
    let desired: Vec<_> = (0..10_000).map(|i| deployment(&format!("ns{}", i % 50), &format!("app{i}"))).collect();
    let drifts: Vec<_> =
        desired.iter().map(|k| replicas(k.namespace.as_deref().unwrap_or_default(), &k.name, 3)).collect();
    let o = store.record(&scan("s1", t(0), &desired, drifts.clone())).await.unwrap();
    assert_eq!(o.opened, 10_000);
    let o = store.record(&scan("s2", t(5), &desired, drifts[100..].to_vec())).await.unwrap();
    assert_eq!((o.opened, o.updated, o.resolved), (0, 9_900, 100));
    let stats = store.stats(&DriftFilter::default(), t(5)).await.unwrap();
    assert_eq!(stats.by_status.get("open"), Some(&9_900));
    assert_eq!(stats.by_namespace.len(), 50);
    assert_eq!(stats.mean_time_to_resolve_seconds, Some(300.0));
}

#[tokio::test]
async fn retention_deletes_old_resolved_drifts_and_scans_but_never_open_ones() {
    let server = server();
    let url = server.create_database().await.unwrap();
    let store = PostgresSink::from_config(&PostgresConfig::new(&url).with_retention_days(30)).await.unwrap();
    let desired = [deployment("shop", "web"), deployment("shop", "api")];
    let day = chrono::Duration::days(1);
    store
        .record(&scan("s1", t(0), &desired, vec![replicas("shop", "web", 1), replicas("shop", "api", 1)]))
        .await
        .unwrap();
    store.record(&scan("s2", t(0) + day, &desired, vec![replicas("shop", "api", 1)])).await.unwrap();
    // 40 days later api is still drifting; web's drift was resolved 39 days ago.
    let o = store.record(&scan("s3", t(0) + day * 40, &desired, vec![replicas("shop", "api", 1)])).await.unwrap();
    assert_eq!(o.updated, 1);
    let all = rows(&store).await;
    assert_eq!(all.len(), 1, "the old resolved drift is gone");
    assert_eq!((all[0].resource_name.as_str(), all[0].status), ("api", DriftStatus::Open));
    assert_eq!(all[0].detected_at, t(0), "an open drift is kept however old");
    let scans: Vec<String> = store.recent_scans(10).await.unwrap().into_iter().map(|s| s.scan_id).collect();
    assert_eq!(scans, ["s3"]);
    assert_eq!(store.prune(t(0) + day * 40).await.unwrap(), Default::default(), "nothing more to delete");
}

#[tokio::test]
async fn migrations_run_once_and_connecting_again_is_harmless() {
    let server = server();
    let url = server.create_database().await.unwrap();
    let one = PostgresSink::connect(&url).await.unwrap();
    let two = PostgresSink::connect(&url).await.unwrap();
    two.migrate().await.unwrap();
    let n: i64 = sqlx::query_scalar("SELECT count(*) FROM _sqlx_migrations").fetch_one(one.pool()).await.unwrap();
    assert_eq!(n, drift_sink_postgres::MIGRATOR.iter().count() as i64);
}

/// A deterministic sequence of scans over a small world, recorded into PostgreSQL and into the
/// reference store: rows (but ids), listings and statistics agree after every scan.
#[tokio::test]
async fn agrees_with_the_reference_store_over_many_scans() {
    let server = server();
    let store = fresh(&server).await;
    let memory = MemoryStore::new();
    // The same reports into a store whose retention deletes history as the sequence goes on.
    let url = server.create_database().await.unwrap();
    let kept = PostgresSink::from_config(&PostgresConfig::new(&url).with_retention_days(1)).await.unwrap();
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
                    let mut d = drift_testkit::fixtures::drift(
                        "Deployment",
                        k.namespace.as_deref().unwrap_or_default(),
                        &k.name,
                        ty,
                        path,
                        (next(5) as i64).into(),
                    );
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
                let gk = desired[0].group_kind();
                r.coverage.set(&gk, Some("ops"), CoverageStatus::Forbidden { message: "403".into() });
            }
            _ => {}
        }
        if next(4) == 0 {
            r.repository = "infra".into();
        }
        let (a, b) = (store.record(&r).await.unwrap(), memory.record(&r).await.unwrap());
        assert_eq!(a, b, "outcome of scan {s}");
        kept.record(&r).await.unwrap();
        // The rollups stay exact after every scan, and stats from them equal stats from the rows.
        for store in [&store, &kept] {
            assert_rollups_match_rows(store).await;
            for filter in drift_testkit::fixtures::stats_filters() {
                assert_stats_match_rows(store, &filter, r.finished_at).await;
            }
        }
    }
    assert!(rows(&kept).await.len() < rows(&store).await.len(), "retention deleted some history");
    let strip = |rows: Vec<drift_core::sink::StoredDrift>| {
        rows.into_iter().map(|mut r| {
            r.id = 0;
            r
        })
    };
    let (pg_rows, mem_rows) = (rows(&store).await, rows(&memory).await);
    assert_eq!(pg_rows.len(), mem_rows.len());
    assert!(strip(pg_rows).eq(strip(mem_rows)), "same rows in the same order");
    for filter in drift_testkit::fixtures::stats_filters() {
        for now in [t(40 * 97), t(40 * 97) + chrono::Duration::days(3)] {
            let (a, b) = (store.stats(&filter, now).await.unwrap(), memory.stats(&filter, now).await.unwrap());
            assert_eq!(a.by_status, b.by_status, "{filter:?}");
            assert_eq!(
                (&a.by_severity, &a.by_type, &a.by_namespace, &a.by_repository),
                (&b.by_severity, &b.by_type, &b.by_namespace, &b.by_repository)
            );
            assert_eq!(a.trend, b.trend);
            let close = |x: Option<f64>, y: Option<f64>| match (x, y) {
                (Some(x), Some(y)) => (x - y).abs() < 1e-6,
                (x, y) => x == y,
            };
            assert!(close(a.mean_time_to_resolve_seconds, b.mean_time_to_resolve_seconds), "{a:?} {b:?}");
            assert!(close(a.p95_time_to_resolve_seconds, b.p95_time_to_resolve_seconds), "{a:?} {b:?}");
        }
        let (a, b) = (
            store.list(&filter, PageRequest { limit: 7, after: None }).await.unwrap(),
            memory.list(&filter, PageRequest { limit: 7, after: None }).await.unwrap(),
        );
        assert_eq!(a.items.len(), b.items.len());
        assert_eq!(a.next.is_some(), b.next.is_some());
    }
}

/// Polls a count until it reaches `want` (a condition, not a delay), for at most a minute.
async fn wait_for(url: &str, sql: &'static str, want: i64) {
    let mut c = sqlx::PgConnection::connect(url).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let n: i64 = sqlx::query_scalar(sql).fetch_one(&mut c).await.unwrap();
        if n >= want {
            return;
        }
        assert!(Instant::now() < deadline, "condition not reached: {sql}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
