//! A watch's batches on a new database (issue 33, docs/benchmarks.md "Change storms"): the
//! statements of their writes touch each row of a batch a bounded number of times.
//!
//! The migrations analyze `drifts` while it is empty; during a storm on a new database,
//! `drifts_live` filled faster than autovacuum analyzed it again, the planner took the live
//! rows of a scope for one row, and the generic plans of the batch's statements compared every
//! object of the batch with every live row of the scope (the resolution read: 4.9 million rows
//! filtered out for a batch of 488) and matched the whole fingerprint array once per row
//! upserted (the upsert: 3.1 million buffers for 1,024 rows): seconds a batch. The store now
//! analyzes `drifts_live` as rows are opened, and reads the rows before its upsert once; and
//! the rollup triggers, which ran eighteen statements for every upsert, run none when the
//! batch changed values only (migration 0015). The
//! plans are read here from auto_explain (row and buffer counts, no timings): the test asserts
//! work, not time.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use drift_model::{DriftSink, DriftType};
use drift_testkit::fixtures::{drift, key, report, t};
use drift_testkit_pg::PgServer;
use serde_json::{Value, json};

/// Objects in a batch.
const N: usize = 600;

/// Batches of a few objects written first.
const SMALL: i64 = 30;

/// Batches of N objects written then.
const BATCHES: i64 = 4;

/// Every plan auto_explain logged in `log`: (query text, plan).
fn plans(log: &str) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for (at, _) in log.match_indices("plan:\n") {
        let rest = &log[at + "plan:\n".len()..];
        let Some(start) = rest.find('{') else { continue };
        let mut values = serde_json::Deserializer::from_str(&rest[start..]).into_iter::<Value>();
        if let Some(Ok(v)) = values.next() {
            let text = v["Query Text"].as_str().unwrap_or_default().to_owned();
            out.push((text, v["Plan"].clone()));
        }
    }
    out
}

/// The sum of `field` over a plan node and every node under it, over all their runs (a node's
/// figures are per run).
fn sum(plan: &Value, field: &str) -> u64 {
    let own = plan[field].as_u64().unwrap_or(0) * plan["Actual Loops"].as_u64().unwrap_or(1);
    own + plan["Plans"].as_array().map_or(0, |children| children.iter().map(|c| sum(c, field)).sum())
}

/// The most times any node under a plan node ran.
fn loops(plan: &Value) -> u64 {
    let own = plan["Actual Loops"].as_u64().unwrap_or(0);
    own.max(plan["Plans"].as_array().map_or(0, |children| children.iter().map(loops).max().unwrap_or(0)))
}

/// The work of each run of the statement whose text contains `marker`: (buffers hit, rows
/// filtered out, the most times a node ran).
fn work(plans: &[(String, Value)], marker: &str) -> Vec<(u64, u64, u64)> {
    plans
        .iter()
        .filter(|(text, _)| text.contains(marker))
        .map(|(_, plan)| {
            let filtered = sum(plan, "Rows Removed by Join Filter") + sum(plan, "Rows Removed by Filter");
            (plan["Shared Hit Blocks"].as_u64().unwrap_or(0), filtered, loops(plan))
        })
        .collect()
}

#[tokio::test]
async fn watch_batches_on_a_new_database_touch_each_row_a_bounded_number_of_times() {
    // Autovacuum off: the table is analyzed only by the migrations (empty) and by the store.
    let server = PgServer::start_with_settings(&[
        ("autovacuum", "off"),
        ("shared_preload_libraries", "auto_explain"),
        ("auto_explain.log_min_duration", "0"),
        ("auto_explain.log_analyze", "on"),
        ("auto_explain.log_timing", "off"),
        ("auto_explain.log_buffers", "on"),
        ("auto_explain.log_format", "json"),
        ("auto_explain.log_nested_statements", "on"),
    ])
    .expect("start a throwaway PostgreSQL (scripts/install-postgres.sh installs it)");
    let url = server.create_database().await.expect("a database");
    let store = drift_postgres::PostgresStore::connect(&url).await.expect("connect");
    let names: Vec<String> = (0..N).map(|i| format!("app-{i}")).collect();
    let keys: Vec<_> = names.iter().map(|n| key("Deployment", &format!("ns-{}", n.len()), n)).collect();
    let replicas = |round: i64| -> Vec<_> {
        keys.iter()
            .map(|k| {
                let ns = k.namespace.as_deref().unwrap();
                drift("Deployment", ns, &k.name, DriftType::ReplicasDrift, "spec.replicas", json!(10 + round))
            })
            .collect()
    };
    // A full pass opens a drift per object. Then watch batches of a few objects, more than five
    // on each connection: PostgreSQL plans a prepared statement for its parameters five times,
    // then may keep a generic plan, made for arrays of a few elements and kept for the large
    // batches of a storm that follow.
    store.record(&report("pass", t(0), &keys, replicas(0))).await.unwrap();
    store.settled().await;
    for round in 1..=SMALL {
        let few = &keys[..3];
        let drifts = replicas(round).into_iter().take(3).collect();
        let mut batch = report(&format!("watch-small-{round}"), t(round), few, drifts);
        batch.desired_complete = false;
        store.record(&batch).await.unwrap();
    }
    let from = server.log().len();
    for round in SMALL + 1..=SMALL + BATCHES {
        let mut batch = report(&format!("watch-{round}"), t(round), &keys, replicas(round));
        batch.desired_complete = false;
        let outcome = store.record(&batch).await.unwrap();
        assert_eq!((outcome.opened, outcome.updated, outcome.resolved), (0, N, 0));
    }

    let plans = plans(&server.log()[from..]);
    // A batch that changes values only changes no count: the rollup triggers return at once.
    let rollups: Vec<&str> =
        plans.iter().map(|(text, _)| text.as_str()).filter(|t| t.contains("INSERT INTO drift_")).collect();
    assert!(rollups.is_empty(), "{} rollup statements ran for batches that changed no count", rollups.len());
    let upserts = work(&plans, "WITH old AS");
    let reads = work(&plans, "AS k(api_group, kind, namespace, name)");
    assert_eq!((upserts.len(), reads.len()), (BATCHES as usize, BATCHES as usize), "a plan of each");
    let bound = 40 * N as u64;
    for (round, ((upsert_buffers, _, upsert_loops), (read_buffers, read_filtered, _))) in
        upserts.into_iter().zip(reads).enumerate()
    {
        let round = round + 1;
        assert!(
            upsert_buffers < bound,
            "batch {round}: the upsert of {N} rows hit {upsert_buffers} buffers (at most {bound})"
        );
        assert_eq!(
            upsert_loops, 1,
            "batch {round}: a node of the upsert of {N} rows ran {upsert_loops} times: the live rows before it are read once"
        );
        assert!(
            read_buffers < bound,
            "batch {round}: the resolution read of {N} objects hit {read_buffers} buffers (at most {bound})"
        );
        assert!(
            read_filtered <= N as u64,
            "batch {round}: the resolution read of {N} objects filtered {read_filtered} rows out: it compared objects with rows"
        );
    }
}
