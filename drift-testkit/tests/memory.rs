//! The conformance suite run against the in-memory reference implementations.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use async_trait::async_trait;
use drift_model::memory::*;
use drift_model::*;

/// The sink suite against the reference store.
mod sink {
    use std::sync::Arc;

    use drift_model::memory::MemoryStore;
    use drift_model::{DriftSink, DriftStore};

    drift_testkit::sink_suite!(|| async {
        let s = Arc::new(MemoryStore::new());
        (s.clone() as Arc<dyn DriftSink>, s as Arc<dyn DriftStore>)
    });
}

/// The reference store as the store and act suites see it: no database, so nothing to
/// count, run, compare or prune; a second handle is the same store.
mod harness {
    use std::sync::Arc;

    use async_trait::async_trait;
    use chrono::{DateTime, Utc};
    use drift_model::memory::MemoryStore;
    use drift_model::sink::{DriftFilter, DriftStats};
    use drift_testkit::store::StoreHarness;

    pub struct Memory;

    #[async_trait]
    impl StoreHarness for Memory {
        type Store = MemoryStore;
        async fn fresh(&self) -> Arc<MemoryStore> {
            Arc::new(MemoryStore::new())
        }
        async fn with_retention(&self, _days: u32) -> Option<Arc<MemoryStore>> {
            None
        }
        async fn reopen(&self, store: &Arc<MemoryStore>) -> Arc<MemoryStore> {
            store.clone()
        }
        async fn count_rows(&self, _store: &MemoryStore) -> Option<i64> {
            None
        }
        async fn execute(&self, _store: &MemoryStore, _sql: &'static str) -> Option<Result<u64, String>> {
            None
        }
        fn open_row_constraint(&self) -> &'static str {
            ""
        }
        async fn check_rollups(&self, _store: &MemoryStore) -> bool {
            false
        }
        async fn stats_from_rows(&self, _: &MemoryStore, _: &DriftFilter, _: DateTime<Utc>) -> Option<DriftStats> {
            None
        }
        async fn prune(&self, _store: &MemoryStore, _now: DateTime<Utc>) -> Option<(u64, u64)> {
            None
        }
    }
}

/// The store suite against the reference store: the cases that need SQL, rollups or
/// retention say they are skipped.
mod store {
    drift_testkit::store_suite!(super::harness::Memory);
}

/// The act suite against the reference store: the events, deliveries, decisions, waivers and
/// audit trail of the SQL stores, kept in memory.
mod act {
    drift_testkit::act_suite!(super::harness::Memory);
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
        fn capabilities(&self) -> drift_model::sink::SinkCapabilities {
            self.0.capabilities()
        }
        async fn record(&self, report: &ScanReport) -> Result<drift_model::sink::RecordOutcome> {
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
    let s = Arc::new(Careless::default());
    let store = ReadThrough(s.clone());
    futures::executor::block_on(drift_testkit::sink::resolution_needs_coverage(&*s, &store));

    #[derive(Debug)]
    struct ReadThrough(Arc<Careless>);
    #[async_trait]
    impl DriftStore for ReadThrough {
        async fn list(
            &self,
            f: &drift_model::sink::DriftFilter,
            p: drift_model::sink::PageRequest,
        ) -> Result<drift_model::sink::DriftPage> {
            self.0.0.list(f, p).await
        }
        async fn get(&self, id: i64) -> Result<drift_model::sink::StoredDrift> {
            self.0.0.get(id).await
        }
        async fn stats(
            &self,
            f: &drift_model::sink::DriftFilter,
            now: chrono::DateTime<chrono::Utc>,
        ) -> Result<drift_model::sink::DriftStats> {
            self.0.0.stats(f, now).await
        }
        async fn recent_scans(&self, limit: u32) -> Result<Vec<drift_model::sink::ScanRecord>> {
            self.0.0.recent_scans(limit).await
        }
        async fn ping(&self) -> Result<()> {
            Ok(())
        }
    }
}

/// The findings cases must catch a sink that resolves the findings of a side its report did
/// not check (a scan without policies would then close every finding).
#[test]
#[should_panic(expected = "[findings] a scan without policies resolves no finding")]
fn the_sink_suite_catches_a_sink_that_resolves_findings_it_did_not_check() {
    #[derive(Debug, Default)]
    struct Careless(Arc<MemoryStore>);
    #[async_trait]
    impl DriftSink for Careless {
        fn name(&self) -> &str {
            "careless"
        }
        fn capabilities(&self) -> drift_model::sink::SinkCapabilities {
            self.0.capabilities()
        }
        async fn record(&self, report: &ScanReport) -> Result<drift_model::sink::RecordOutcome> {
            let mut r = report.clone();
            r.policy_sides = vec![finding::Side::Desired, finding::Side::Live];
            self.0.record(&r).await
        }
    }
    let store = Arc::new(MemoryStore::new());
    let sink = Careless(store.clone());
    futures::executor::block_on(drift_testkit::sink::findings_lifecycle(&sink, &*store));
}
