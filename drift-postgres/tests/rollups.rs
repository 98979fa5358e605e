//! The statistics rollups of PostgreSQL (`drift_counts`, `drift_daily`, kept by triggers):
//! exact after an operator's own deletes, and when migration 0002 backfills them from an
//! existing history; the percentile read from the buckets of migration 0014 is the one of the
//! rows. Severity changes, retention and concurrent writers are cases of the shared
//! store suite (tests/conformance.rs).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use drift_model::DriftSink;
use drift_model::sink::{DriftFilter, DriftStatus, DriftStore};
use drift_model::{DriftType, Severity};
use drift_postgres::{MIGRATOR, PostgresConfig, PostgresStore};
use drift_sql::SqlStats;

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

/// A database at migration 0001 with a history: the later migrations (0002 builds the rollups)
/// keep it and count it. The history is written by today's writer in a database of its own and
/// copied, as rows of the 0001 table, into a database left at migration 0001.
#[tokio::test]
async fn migration_0002_backfills_the_rollups_from_an_existing_history() {
    let server = server();
    let writer = fresh(&server).await;
    let desired = [deployment("shop", "web"), deployment("shop", "api"), deployment("ops", "db")];
    let mut next = sequence(7);
    for s in 0..12 {
        writer.record(&scan(&format!("s{s}"), t(s * 300), &desired, random_drifts(&desired, &mut next))).await.unwrap();
    }
    let rows: serde_json::Value = sqlx::query_scalar(
        "SELECT jsonb_agg(to_jsonb(d) - 'ttr_ms' - 'resolution' - 'desired_digest' - 'waived_until' \
         - 'acknowledged_at') FROM drifts d",
    )
    .fetch_one(writer.pool())
    .await
    .unwrap();
    let url = server.create_database().await.unwrap();
    let store =
        PostgresStore::from_config(&PostgresConfig { migrate: false, ..PostgresConfig::new(&url) }).await.unwrap();
    MIGRATOR.run_to(1, store.pool()).await.unwrap();
    let copied = sqlx::query(
        "INSERT INTO drifts OVERRIDING SYSTEM VALUE SELECT * FROM jsonb_populate_recordset(NULL::drifts, $1)",
    )
    .bind(&rows)
    .execute(store.pool())
    .await
    .unwrap();
    assert!(copied.rows_affected() > 0, "a history to count");
    store.migrate().await.unwrap();
    drift_testkit::store::check_backfill(&drift_sql::testkit::Harness(Pg { server }), &store, t(3300)).await;
}

/// Migration 0014 fills its tables from the rollups and rows of 0013 while replicas of the
/// version before may still write: it takes `drifts` in SHARE mode first, so a writer whose
/// transaction is open (its 0013 trigger has run) is waited for and counted. Without the lock
/// the migration finished before the writer's commit, and the narrow rollups missed its rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migration_0014_waits_for_a_writer_of_the_version_before() {
    let server = server();
    let url = server.create_database().await.unwrap();
    let store =
        PostgresStore::from_config(&PostgresConfig { migrate: false, ..PostgresConfig::new(&url) }).await.unwrap();
    MIGRATOR.run_to(13, store.pool()).await.unwrap();
    insert_history(store.pool(), 0, 299).await;
    let mut old = store.pool().begin().await.unwrap();
    insert_history(&mut *old, 300, 399).await;
    let pool = store.pool().clone();
    let migrating = tokio::spawn(async move { MIGRATOR.run(&pool).await });
    let waited = loop {
        if migrating.is_finished() {
            break false;
        }
        let waiting: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = 'drifts'::regclass AND mode = 'ShareLock'",
        )
        .fetch_one(store.pool())
        .await
        .unwrap();
        if waiting > 0 {
            break true;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    old.commit().await.unwrap();
    migrating.await.unwrap().expect("migrated");
    assert!(waited, "the migration waited for the open writer");
    assert_rollups_match_rows(&store).await;
    let applied: i64 =
        sqlx::query_scalar("SELECT max(version) FROM _sqlx_migrations").fetch_one(store.pool()).await.unwrap();
    assert!(applied >= 14);
}

/// Resolved and open rows written by plain SQL (through the triggers): times to resolve crowded
/// into one bucket with ties (an hour and up to 49 ms), spread over 100 seconds, and an hour
/// plus up to 997 seconds; over 3 clusters, 7 namespaces, 4 repositories, 3 kinds and types, 4
/// severities. Every tenth row open.
async fn insert_history(pool: impl sqlx::PgExecutor<'_>, from: i64, to: i64) {
    sqlx::query(
        "INSERT INTO drifts (detected_at, last_seen, repository, namespace, resource_kind, resource_name, drift_type, \
             severity, status, resolved_at, resolution, decision_source, recommended_action, cluster, fingerprint, \
             classification) \
         SELECT d, d, 'repo-' || (i % 4), 'ns-' || (i % 7), (ARRAY['Deployment', 'Service', 'Secret'])[1 + i % 3], \
             'app-' || i, (ARRAY['replicas_drift', 'image_tag_drift', 'secret_drift'])[1 + (i / 3) % 3], \
             (ARRAY['LOW', 'MEDIUM', 'HIGH', 'CRITICAL'])[1 + i % 4], \
             CASE WHEN i % 10 = 0 THEN 'open' ELSE 'resolved' END, CASE WHEN i % 10 = 0 THEN NULL ELSE d + ttr END, \
             CASE WHEN i % 10 = 0 THEN NULL ELSE 'reverted' END, 'scanner', 'observe', 'cluster-' || (i % 3), \
             md5(i::text), 'manual_change' \
         FROM (SELECT i, timestamptz '2026-11-20' + i * interval '1 minute' AS d, \
             CASE i % 3 WHEN 0 THEN interval '1 hour' + (i % 50) * interval '1 millisecond' \
                 WHEN 1 THEN (i * 7919 % 100000) * interval '1 millisecond' \
                 ELSE interval '1 hour' + (i % 997) * interval '1 second' END AS ttr \
             FROM generate_series($1::bigint, $2::bigint) AS i) AS g",
    )
    .bind(from)
    .bind(to)
    .execute(pool)
    .await
    .unwrap();
}

/// Statistics from the rollups equal those from the rows for filters of every kind; for a
/// filter of at most one dimension besides status, the percentile comes from the buckets (not
/// from the fallback read of the index) and is the rows' one.
async fn assert_percentiles(store: &PostgresStore, now: chrono::DateTime<chrono::Utc>) {
    let filters = [
        DriftFilter::default(),
        DriftFilter { status: Some(DriftStatus::Resolved), ..Default::default() },
        DriftFilter { status: Some(DriftStatus::Open), ..Default::default() },
        DriftFilter { cluster: Some("cluster-1".into()), ..Default::default() },
        DriftFilter { namespace: Some("ns-3".into()), ..Default::default() },
        DriftFilter { severity: Some(Severity::High), ..Default::default() },
        DriftFilter { repository: Some("repo-2".into()), ..Default::default() },
        DriftFilter { drift_type: Some(DriftType::SecretDrift), ..Default::default() },
        DriftFilter { kind: Some("Secret".into()), ..Default::default() },
        DriftFilter { status: Some(DriftStatus::Resolved), cluster: Some("cluster-2".into()), ..Default::default() },
        DriftFilter { cluster: Some("cluster-0".into()), namespace: Some("ns-1".into()), ..Default::default() },
        DriftFilter { namespace: Some("no-such".into()), ..Default::default() },
    ];
    let mut from_buckets = 0;
    for filter in filters {
        let rows = store.stats_from_rows(&filter, now).await.unwrap();
        assert_eq!(store.stats(&filter, now).await.unwrap(), rows, "{filter:?}");
        let resolved = rows.by_status.get("resolved").copied().unwrap_or_default();
        let mut conn = store.pool().acquire().await.unwrap();
        let p95 = store.p95_from_rollups(&mut *conn, &filter, resolved).await.unwrap();
        let dims = [filter.cluster.is_some(), filter.namespace.is_some(), filter.severity.is_some()]
            .into_iter()
            .chain([filter.repository.is_some(), filter.drift_type.is_some(), filter.kind.is_some()])
            .filter(|d| *d)
            .count();
        if dims <= 1 {
            assert_eq!(p95, Some(rows.p95_time_to_resolve_seconds), "{filter:?}: from the buckets");
            from_buckets += usize::from(resolved > 0);
        } else {
            assert_eq!(p95, None, "{filter:?}: two dimensions read the index");
        }
    }
    assert!(from_buckets >= 8, "the buckets answered {from_buckets} filters");
}

#[tokio::test]
async fn the_percentile_from_the_buckets_is_the_one_from_the_rows() {
    let server = server();
    let store = fresh(&server).await;
    let now = chrono::TimeZone::with_ymd_and_hms(&chrono::Utc, 2026, 11, 22, 12, 0, 0).unwrap();
    insert_history(store.pool(), 1, 3000).await;
    assert_rollups_match_rows(&store).await;
    let crowded: i64 = sqlx::query_scalar("SELECT max(n) FROM drift_ttr_buckets WHERE dim = ''")
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert!(crowded >= 500, "one bucket holds many values ({crowded})");
    assert_percentiles(&store, now).await;
    // Deletes, resolutions and new rows move rows between buckets.
    sqlx::query("DELETE FROM drifts WHERE resource_name LIKE 'app-1%'").execute(store.pool()).await.unwrap();
    sqlx::query(
        "UPDATE drifts SET status = 'resolved', resolved_at = detected_at + interval '1 hour 20 milliseconds', \
         resolution = 'reverted' WHERE status = 'open' AND cluster <> 'cluster-0'",
    )
    .execute(store.pool())
    .await
    .unwrap();
    insert_history(store.pool(), 3001, 3400).await;
    assert_rollups_match_rows(&store).await;
    assert_percentiles(&store, now).await;
}

/// The bucket function of migration 0014 against its definition (tests/common: the value below
/// 512, else its 9 most significant bits), at the edges and for values of every size.
#[tokio::test]
async fn a_time_to_resolve_falls_in_the_bucket_of_its_9_leading_bits() {
    let server = server();
    let store = fresh(&server).await;
    let mut values = vec![i64::MIN, -86_400_000, -1, 0, 1, 511, 512, 513, 1023, 1024, 1025, i64::MAX];
    values.extend((0..62).flat_map(|b| [(1i64 << b) - 1, 1i64 << b, (1i64 << b) + 1, (1i64 << b) * 3 / 2 + 7]));
    let buckets: Vec<i64> = sqlx::query_scalar("SELECT drift_ttr_bucket(v) FROM unnest($1::bigint[]) AS v")
        .bind(&values)
        .fetch_all(store.pool())
        .await
        .unwrap();
    for (v, b) in values.iter().zip(&buckets) {
        assert_eq!(*b, ttr_bucket(*v), "bucket of {v}");
        assert!(*b <= *v && (*v < 512 || (*v - *b) as f64 / *v as f64 <= 1.0 / 256.0), "{v} in {b}");
    }
}
