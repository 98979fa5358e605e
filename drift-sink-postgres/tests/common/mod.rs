//! Helpers shared by the integration tests: a throwaway server, fresh stores, drifts and reports.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use chrono::{DateTime, Utc};
use drift_core::sink::{DriftFilter, DriftStatus, DriftStore, PageRequest, StoredDrift};
use drift_core::{Drift, DriftType, ResourceKey, ScanReport};
use drift_sink_postgres::PostgresSink;
use drift_testkit_pg::PgServer;

#[allow(unused_imports)]
pub use drift_testkit::fixtures::{key, report, t};

/// Starts a server (one per test process).
pub fn server() -> PgServer {
    PgServer::start().expect("start a throwaway PostgreSQL (scripts/install-postgres.sh installs it)")
}

/// A store over a fresh database of `server`, migrations applied.
pub async fn fresh(server: &PgServer) -> PostgresSink {
    let url = server.create_database().await.expect("create a database");
    PostgresSink::connect(&url).await.expect("connect")
}

/// A replicas drift of a Deployment, with this live value.
pub fn replicas(namespace: &str, name: &str, live: i64) -> Drift {
    drift_testkit::fixtures::drift(
        "Deployment",
        namespace,
        name,
        DriftType::ReplicasDrift,
        "spec.replicas",
        live.into(),
    )
}

/// The key of a Deployment.
pub fn deployment(namespace: &str, name: &str) -> ResourceKey {
    key("Deployment", namespace, name)
}

/// A successful report at `at` over `desired` (complete coverage) listing `drifts`.
pub fn scan(id: &str, at: DateTime<Utc>, desired: &[ResourceKey], drifts: Vec<Drift>) -> ScanReport {
    report(id, at, desired, drifts)
}

/// Every row, newest first.
pub async fn rows(store: &dyn DriftStore) -> Vec<StoredDrift> {
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

/// Open rows, newest first.
pub async fn open(store: &dyn DriftStore) -> Vec<StoredDrift> {
    rows(store).await.into_iter().filter(|r| r.status == DriftStatus::Open).collect()
}
