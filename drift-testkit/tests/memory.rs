//! The conformance suite run against the in-memory reference implementations.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use async_trait::async_trait;
use drift_core::memory::*;
use drift_core::*;
use drift_testkit::sink;

#[test]
fn memory_store_passes_the_sink_suite() {
    futures::executor::block_on(sink::conformance(|| async {
        let s = Arc::new(MemoryStore::new());
        (s.clone() as Arc<dyn DriftSink>, s as Arc<dyn DriftStore>)
    }));
}

/// The suite must catch a sink that resolves drifts it could not see.
#[test]
#[should_panic(expected = "[coverage]")]
fn the_sink_suite_catches_a_sink_that_ignores_coverage() {
    #[derive(Debug, Default)]
    struct Careless(MemoryStore);
    #[async_trait]
    impl DriftSink for Careless {
        fn name(&self) -> &str {
            "careless"
        }
        fn capabilities(&self) -> drift_core::sink::SinkCapabilities {
            self.0.capabilities()
        }
        async fn record(&self, report: &ScanReport) -> Result<drift_core::sink::RecordOutcome> {
            let mut r = report.clone();
            r.coverage = Coverage::complete(&{
                let mut s = Scope::default();
                for k in &r.desired {
                    s.insert(k.group_kind(), k.namespace.clone());
                }
                s
            });
            if r.outcome == ScanOutcome::Partial {
                r.outcome = ScanOutcome::Success;
            }
            self.0.record(&r).await
        }
    }
    futures::executor::block_on(sink::conformance(|| async {
        let s = Arc::new(Careless::default());
        let store: Arc<dyn DriftStore> = Arc::new(ReadThrough(s.clone()));
        (s as Arc<dyn DriftSink>, store)
    }));

    #[derive(Debug)]
    struct ReadThrough(Arc<Careless>);
    #[async_trait]
    impl DriftStore for ReadThrough {
        async fn list(
            &self,
            f: &drift_core::sink::DriftFilter,
            p: drift_core::sink::PageRequest,
        ) -> Result<drift_core::sink::DriftPage> {
            self.0.0.list(f, p).await
        }
        async fn get(&self, id: i64) -> Result<drift_core::sink::StoredDrift> {
            self.0.0.get(id).await
        }
        async fn stats(
            &self,
            f: &drift_core::sink::DriftFilter,
            now: chrono::DateTime<chrono::Utc>,
        ) -> Result<drift_core::sink::DriftStats> {
            self.0.0.stats(f, now).await
        }
        async fn recent_scans(&self, limit: u32) -> Result<Vec<drift_core::sink::ScanRecord>> {
            self.0.0.recent_scans(limit).await
        }
        async fn ping(&self) -> Result<()> {
            Ok(())
        }
    }
}
