//! The shared sink conformance suite of drift-testkit, against SQLite files.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use drift_core::{DriftSink, DriftStore};
use drift_sink_sqlite::SqliteSink;

#[tokio::test]
async fn sqlite_file_store_passes_the_sink_conformance_suite() {
    let dir = tempfile::tempdir().unwrap();
    let n = AtomicU32::new(0);
    drift_testkit::sink::conformance(|| {
        let path = dir.path().join(format!("drift-{}.db", n.fetch_add(1, Ordering::Relaxed)));
        async move {
            let store = Arc::new(SqliteSink::open(&format!("sqlite://{}", path.display())).await.unwrap());
            (store.clone() as Arc<dyn DriftSink>, store as Arc<dyn DriftStore>)
        }
    })
    .await;
}

#[tokio::test]
async fn sqlite_memory_store_passes_the_sink_conformance_suite() {
    drift_testkit::sink::conformance(|| async {
        let store = Arc::new(SqliteSink::open("sqlite::memory:").await.unwrap());
        (store.clone() as Arc<dyn DriftSink>, store as Arc<dyn DriftStore>)
    })
    .await;
}
