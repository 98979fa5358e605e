//! The history partitioned by month of `resolved_at` (migration 0012, docs/storage.md
//! "Partitions of the history"): a database of the schema before keeps its rows through the
//! migration, resolved rows go to their month, a month without partition waits in
//! `drifts_live` until the store creates it, retention drops whole months and keeps the rollups.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use chrono::{DateTime, TimeZone, Utc};
use common::*;
use drift_model::sink::{DriftFilter, DriftStatus};
use drift_model::{DriftSink, DriftStore};
use drift_postgres::{MIGRATOR, PostgresConfig, PostgresStore};
use sqlx::PgPool;

fn at(y: i32, m: u32, d: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(y, m, d, 12, 0, 0).single().unwrap()
}

/// Every row as JSON, by id (the partition a row is in left out).
async fn table(pool: &PgPool) -> Vec<(i64, serde_json::Value)> {
    sqlx::query_as("SELECT id, to_jsonb(d) FROM drifts d ORDER BY id").fetch_all(pool).await.unwrap()
}

/// (partition, id) of every row.
async fn placement(pool: &PgPool) -> Vec<(String, i64)> {
    sqlx::query_as("SELECT tableoid::regclass::text, id FROM drifts ORDER BY id").fetch_all(pool).await.unwrap()
}

async fn months(pool: &PgPool) -> Vec<String> {
    sqlx::query_scalar("SELECT to_char(m, 'YYYY_MM') FROM drift_history_months() AS m").fetch_all(pool).await.unwrap()
}

/// A store on a database whose partitions are exactly those of the months `from` and the two
/// next (the ones its connection created for the wall clock's month are dropped: they are
/// empty), so that what follows depends on no clock.
async fn store_from(url: &str, retention_days: Option<u32>, from: DateTime<Utc>) -> PostgresStore {
    let store =
        PostgresStore::from_config(&PostgresConfig { retention_days, ..PostgresConfig::new(url) }).await.unwrap();
    let dropped: i64 =
        sqlx::query_scalar("SELECT drift_history_drop('infinity')").fetch_one(store.pool()).await.unwrap();
    assert_eq!(dropped, 0, "a new store has no history");
    let done = store.maintain_history(from).await.unwrap();
    assert_eq!(done.created, 3);
    store
}

#[tokio::test]
async fn a_database_migrated_from_the_unpartitioned_schema_keeps_its_rows_and_rollups() {
    let server = server();
    let url = server.create_database().await.unwrap();
    let pool = PgPool::connect(&url).await.unwrap();
    MIGRATOR.run_to(11, &pool).await.unwrap();
    // History as the schema before holds it: open, waived and resolved rows over four months,
    // written through the triggers that keep the rollups.
    sqlx::raw_sql(
        "INSERT INTO drifts (detected_at, last_seen, occurrences, repository, namespace, resource_kind, resource_name, \
             drift_type, severity, git_value, cluster_value, status, resolved_at, resolution, decision_source, \
             recommended_action, cluster, fingerprint, classification, waived_until, waived_by) \
         SELECT timestamptz '2026-08-03' + i * interval '1 day', timestamptz '2026-08-03' + i * interval '1 day', \
             1 + i % 3, 'repo-' || i % 2, 'ns-' || i % 5, 'Deployment', 'app-' || i, \
             (ARRAY['replicas_drift', 'image_tag_drift', 'missing_resource'])[1 + i % 3], (ARRAY['LOW', 'MEDIUM', 'HIGH', 'CRITICAL'])[1 + i % 4], \
             jsonb_build_object('replicas', i), jsonb_build_object('replicas', i + 1), \
             CASE WHEN i % 7 = 0 THEN 'open' WHEN i % 11 = 0 THEN 'waived' ELSE 'resolved' END, \
             CASE WHEN i % 7 = 0 OR i % 11 = 0 THEN NULL ELSE timestamptz '2026-08-03' + i * interval '1 day' + i * interval '1 hour' END, \
             CASE WHEN i % 7 = 0 OR i % 11 = 0 THEN NULL ELSE 'reverted' END, 'scanner', 'observe', 'cluster-' || i % 3, \
             'fp-' || i, 'unknown', \
             CASE WHEN i % 7 <> 0 AND i % 11 = 0 THEN timestamptz '2027-01-01' END, \
             CASE WHEN i % 7 <> 0 AND i % 11 = 0 THEN 'alice' END \
         FROM generate_series(1, 120) AS i",
    )
    .execute(&pool)
    .await
    .unwrap();
    let before = table(&pool).await;
    let counts: Vec<(String, i64)> =
        sqlx::query_as("SELECT status, count(*) FROM drifts GROUP BY 1 ORDER BY 1").fetch_all(&pool).await.unwrap();
    assert_eq!(counts.len(), 3, "open, resolved and waived rows: {counts:?}");
    let rollups = |pool: PgPool| async move {
        let c: Vec<(String, String, i64, i64)> = sqlx::query_as(
            "SELECT cluster, status, sum(n)::bigint, sum(ttr_sum_ms)::bigint FROM drift_counts GROUP BY 1, 2 ORDER BY 1, 2",
        )
        .fetch_all(&pool)
        .await
        .unwrap();
        let d: Vec<(String, i64, i64)> = sqlx::query_as(
            "SELECT day::text, sum(opened)::bigint, sum(resolved)::bigint FROM drift_daily GROUP BY 1 ORDER BY 1",
        )
        .fetch_all(&pool)
        .await
        .unwrap();
        (c, d)
    };
    let rollups_before = rollups(pool.clone()).await;

    let store = PostgresStore::connect(&url).await.unwrap();
    assert_eq!(table(store.pool()).await, before, "every row kept, every column, ids included");
    assert_eq!(rollups(pool.clone()).await, rollups_before, "the rollups untouched");
    assert_rollups_match_rows(&store).await;
    let placed = placement(store.pool()).await;
    for ((partition, id), (_, row)) in placed.iter().zip(&before) {
        let want = match row["resolved_at"].as_str() {
            // 2026-08-04T13:00:00+00:00 -> drifts_p2026_08
            Some(t) => format!("drifts_p{}_{}", &t[..4], &t[5..7]),
            None => "drifts_live".to_owned(),
        };
        assert_eq!(partition, &want, "row {id}");
    }
    let partitioned = months(store.pool()).await;
    for m in ["2026_08", "2026_09", "2026_10", "2026_11", "2026_12"] {
        assert!(partitioned.contains(&m.to_owned()), "{m} in {partitioned:?}");
    }

    // The store writes on: a drift seen again keeps its live row, a new one takes the next id,
    // a resolution moves its row to its month with its id.
    let open = DriftFilter { status: Some(DriftStatus::Open), ..DriftFilter::default() };
    assert!(!store.list(&open, Default::default()).await.unwrap().items.is_empty());
    let desired = [deployment("shop", "web"), deployment("shop", "api")];
    let o = store.record(&scan("s1", at(2026, 12, 1), &desired, vec![replicas("shop", "web", 3)])).await.unwrap();
    assert_eq!(o.opened, 1);
    let max_before = before.iter().map(|(id, _)| *id).max().unwrap();
    let new_id: i64 =
        sqlx::query_scalar("SELECT id FROM drifts WHERE resource_name = 'web'").fetch_one(store.pool()).await.unwrap();
    assert!(new_id > max_before, "ids go on after the copied rows ({new_id} > {max_before})");
    let o = store.record(&scan("s2", at(2026, 12, 2), &desired, vec![replicas("shop", "web", 3)])).await.unwrap();
    assert_eq!((o.opened, o.updated), (0, 1), "seen again: the live row, not a second one");
    let o = store.record(&scan("s3", at(2026, 12, 3), &desired, vec![])).await.unwrap();
    assert_eq!(o.resolved, 1);
    let placed = placement(store.pool()).await;
    assert!(placed.contains(&("drifts_p2026_12".to_owned(), new_id)), "{placed:?}");
    assert_eq!(store.get(new_id).await.unwrap().status, DriftStatus::Resolved);
    assert_rollups_match_rows(&store).await;
}

#[tokio::test]
async fn a_month_without_partition_waits_in_drifts_live_until_the_store_creates_it() {
    let server = server();
    let url = server.create_database().await.unwrap();
    let store = store_from(&url, None, at(2031, 3, 10)).await;
    assert_eq!(months(store.pool()).await, ["2031_03", "2031_04", "2031_05"]);
    let desired = [deployment("shop", "web")];
    store.record(&scan("s1", at(2031, 5, 20), &desired, vec![replicas("shop", "web", 3)])).await.unwrap();
    // Resolved in June, a month with no partition yet.
    store.record(&scan("s2", at(2031, 6, 2), &desired, vec![])).await.unwrap();
    let placed = placement(store.pool()).await;
    assert_eq!(placed.len(), 1);
    assert_eq!(placed[0].0, "drifts_live");
    let id = placed[0].1;
    let resolved = DriftFilter { status: Some(DriftStatus::Resolved), ..DriftFilter::default() };
    let listed = store.list(&resolved, Default::default()).await.unwrap();
    assert_eq!(listed.items.iter().map(|d| d.id).collect::<Vec<_>>(), [id], "listed from drifts_live");

    let done = store.maintain_history(at(2031, 5, 1)).await.unwrap();
    assert_eq!(done.created, 2, "June and July, the months up to two after May");
    assert_eq!(placement(store.pool()).await, [("drifts_p2031_06".to_owned(), id)], "moved with its id");
    assert_eq!(store.maintain_history(at(2031, 5, 1)).await.unwrap().created, 0, "nothing left to create");
    let drift = store.get(id).await.unwrap();
    assert_eq!((drift.status, drift.resolved_at), (DriftStatus::Resolved, Some(at(2031, 6, 2))));
    assert_rollups_match_rows(&store).await;
    // The history's listing reads every partition.
    let page = store.list(&DriftFilter::default(), Default::default()).await.unwrap();
    assert_eq!(page.items.iter().map(|d| d.id).collect::<Vec<_>>(), [id]);
}

#[tokio::test]
async fn retention_drops_whole_months_and_keeps_open_drifts_and_the_rollups() {
    let server = server();
    let url = server.create_database().await.unwrap();
    let store = store_from(&url, Some(30), at(2031, 3, 10)).await;
    let desired = [deployment("shop", "web"), deployment("shop", "api"), deployment("shop", "db")];
    let all = || vec![replicas("shop", "web", 2), replicas("shop", "api", 2), replicas("shop", "db", 2)];
    // web resolved in March, api in April, db stays open; a second web episode resolved in May.
    store.record(&scan("s1", at(2031, 3, 11), &desired, all())).await.unwrap();
    store
        .record(&scan("s2", at(2031, 3, 20), &desired, vec![replicas("shop", "api", 2), replicas("shop", "db", 2)]))
        .await
        .unwrap();
    store.record(&scan("s3", at(2031, 4, 5), &desired, vec![replicas("shop", "db", 2)])).await.unwrap();
    store
        .record(&scan("s4", at(2031, 5, 1), &desired, vec![replicas("shop", "db", 2), replicas("shop", "web", 4)]))
        .await
        .unwrap();
    store.record(&scan("s5", at(2031, 5, 2), &desired, vec![replicas("shop", "db", 2)])).await.unwrap();
    let by_partition = |pool: PgPool| async move {
        let rows: Vec<(String, String, String)> =
            sqlx::query_as("SELECT tableoid::regclass::text, resource_name, status FROM drifts ORDER BY 1, 2")
                .fetch_all(&pool)
                .await
                .unwrap();
        rows
    };
    let s = |a: &str, b: &str, c: &str| (a.to_owned(), b.to_owned(), c.to_owned());
    assert_eq!(
        by_partition(store.pool().clone()).await,
        [
            s("drifts_live", "db", "open"),
            s("drifts_p2031_03", "web", "resolved"),
            s("drifts_p2031_04", "api", "resolved"),
            s("drifts_p2031_05", "web", "resolved"),
        ]
    );
    let resolved = |store: PostgresStore| async move {
        store.stats(&DriftFilter::default(), at(2031, 6, 1)).await.unwrap().by_status.get("resolved").copied()
    };
    assert_eq!(resolved(store.clone()).await, Some(3));

    // 30 days before May 15 is April 15: March ended before it and goes whole; April (api,
    // resolved April 5, older than 30 days) stays until its whole month is past the cutoff.
    let done = store.maintain_history(at(2031, 5, 15)).await.unwrap();
    assert_eq!(done.dropped_rows, 1);
    assert_eq!(
        by_partition(store.pool().clone()).await,
        [
            s("drifts_live", "db", "open"),
            s("drifts_p2031_04", "api", "resolved"),
            s("drifts_p2031_05", "web", "resolved")
        ]
    );
    assert!(!months(store.pool()).await.contains(&"2031_03".to_owned()));
    assert_rollups_match_rows(&store).await;
    assert_eq!(resolved(store.clone()).await, Some(2), "statistics count what is left");

    // Far later: every resolved month goes, the open drift stays however old.
    let done = store.maintain_history(at(2031, 8, 1)).await.unwrap();
    assert_eq!(done.dropped_rows, 2);
    assert_eq!(by_partition(store.pool().clone()).await, [s("drifts_live", "db", "open")]);
    assert_rollups_match_rows(&store).await;
    assert_eq!(resolved(store.clone()).await, None);
    let empty_days: i64 = sqlx::query_scalar("SELECT count(*) FROM drift_daily WHERE opened = 0 AND resolved = 0")
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert_eq!(empty_days, 0, "no rollup day left that counts nothing");
}

/// A decision on a drift that a scan resolves at the same moment: the resolution moves the row to
/// its month's partition, and the decision's row lock then fails with a serialization error
/// (40001); the store tries again and says, as before the partitions, that the drift is resolved.
#[tokio::test]
async fn a_decision_racing_the_resolution_of_its_drift_says_it_is_resolved() {
    use drift_model::act::{DecisionAction, Decisions, NewDecision};
    let server = server();
    let url = server.create_database().await.unwrap();
    let store = PostgresStore::connect(&url).await.unwrap();
    let pool = store.pool().clone();
    let id: i64 = sqlx::query_scalar(
        "INSERT INTO drifts (detected_at, last_seen, repository, namespace, resource_kind, resource_name, drift_type, \
             severity, git_value, cluster_value, status, decision_source, recommended_action, cluster, fingerprint, \
             classification) \
         VALUES (now(), now(), 'repo', 'shop', 'Deployment', 'web', 'replicas_drift', 'MEDIUM', '{\"r\": 3}', \
             '{\"r\": 5}', 'open', 'scanner', 'observe', 'home', 'fp-web', 'unknown') RETURNING id",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    // The resolution, not committed yet: it holds the row, moved to this month's partition.
    let mut resolving = pool.begin().await.unwrap();
    sqlx::query("UPDATE drifts SET status = 'resolved', resolved_at = now(), resolution = 'reverted' WHERE id = $1")
        .bind(id)
        .execute(&mut *resolving)
        .await
        .unwrap();
    let deciding = {
        let store = store.clone();
        tokio::spawn(async move {
            let decision = NewDecision {
                action: DecisionAction::Acknowledge,
                comment: None,
                expires_at: None,
                actor: "alice".to_owned(),
            };
            store.decide(id, &decision, Utc::now()).await
        })
    };
    // The decision waits on the row's lock (a condition, not a delay), then the resolution commits.
    wait_for(&url, "SELECT count(*) FROM pg_locks WHERE NOT granted", 1).await;
    resolving.commit().await.unwrap();
    let err = deciding.await.unwrap().unwrap_err();
    assert_eq!(err.kind(), drift_model::ErrorKind::InvalidInput, "{err}");
    assert!(err.to_string().contains(&format!("drift {id} is resolved")), "{err}");
    let partition: String = sqlx::query_scalar("SELECT tableoid::regclass::text FROM drifts WHERE id = $1")
        .bind(id)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert!(partition.starts_with("drifts_p"), "resolved into its month: {partition}");
}
