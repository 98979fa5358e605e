//! The shared sink conformance suite of drift-testkit, against a real PostgreSQL.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use drift_core::{DriftSink, DriftStore};

#[tokio::test]
async fn postgres_store_passes_the_sink_conformance_suite() {
    let server = common::server();
    drift_testkit::sink::conformance(|| async {
        let store = Arc::new(common::fresh(&server).await);
        (store.clone() as Arc<dyn DriftSink>, store as Arc<dyn DriftStore>)
    })
    .await;
}
