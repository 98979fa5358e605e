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
