//! The source suites run against the in-memory reference sources of `drift-core`, and checks
//! that the suites catch a source that breaks the contract.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use async_trait::async_trait;
use drift_model::memory::*;
use drift_model::*;
use drift_testkit::desired::{DesiredExpectation, DesiredHarness};
use drift_testkit::fixtures;
use drift_testkit::live::LiveHarness;
use serde_json::Value;

struct MemLive(MemoryLiveSource);

impl MemLive {
    async fn fresh() -> MemLive {
        MemLive(MemoryLiveSource::new("mem", vec![]))
    }
}

#[async_trait]
impl LiveHarness for MemLive {
    fn source(&self) -> &dyn LiveSource {
        &self.0
    }
    async fn apply(&self, object: Value) {
        self.0.apply(Resource::from_object(object).unwrap());
    }
    async fn delete(&self, key: &ResourceKey) {
        self.0.delete(key);
    }
}

drift_testkit::live_suite!(MemLive::fresh());

struct MemDesired(MemoryDesiredSource, Vec<ResourceKey>);

impl MemDesired {
    async fn fresh() -> MemDesired {
        let resources: Vec<Resource> = fixtures::live_resources()
            .into_iter()
            .map(|r| r.with_provenance(Provenance { path: Some("app.yaml".into()), ..Default::default() }))
            .collect();
        let keys = resources.iter().map(|r| r.key.clone()).collect();
        MemDesired(MemoryDesiredSource::new("repo", resources), keys)
    }
}

impl DesiredHarness for MemDesired {
    fn source(&self) -> &dyn DesiredSource {
        &self.0
    }
    fn expectation(&self) -> DesiredExpectation {
        DesiredExpectation { must_contain: self.1.clone(), broken_files: vec![] }
    }
}

drift_testkit::desired_suite!(MemDesired::fresh());

/// A live source that normalises (drops managedFields) or reads more than its scope.
#[derive(Debug)]
struct Sloppy {
    inner: MemoryLiveSource,
    normalises: bool,
    ignores_scope: bool,
}

#[async_trait]
impl LiveSource for Sloppy {
    fn cluster(&self) -> &str {
        self.inner.cluster()
    }
    async fn fetch(&self, scope: &Scope) -> Result<LiveSnapshot> {
        let asked = if self.ignores_scope { drift_testkit::live::fixture_scope() } else { scope.clone() };
        let mut snap = self.inner.fetch(&asked).await?;
        if self.normalises {
            for r in &mut snap.resources {
                std::sync::Arc::make_mut(&mut r.object)["metadata"].as_object_mut().unwrap().remove("managedFields");
            }
        }
        Ok(snap)
    }
}

#[async_trait]
impl LiveHarness for Sloppy {
    fn source(&self) -> &dyn LiveSource {
        self
    }
    async fn apply(&self, object: Value) {
        self.inner.apply(Resource::from_object(object).unwrap());
    }
    async fn delete(&self, key: &ResourceKey) {
        self.inner.delete(key);
    }
}

fn sloppy(normalises: bool, ignores_scope: bool) -> Sloppy {
    Sloppy { inner: MemoryLiveSource::new("sloppy", vec![]), normalises, ignores_scope }
}

#[tokio::test]
#[should_panic(expected = "[keeps_objects_as_read]")]
async fn the_live_suite_catches_a_source_that_normalises() {
    drift_testkit::live::keeps_objects_as_read(&sloppy(true, false)).await;
}

#[tokio::test]
#[should_panic(expected = "[reads_only_the_scope]")]
async fn the_live_suite_catches_a_source_that_reads_outside_its_scope() {
    drift_testkit::live::reads_only_the_scope(&sloppy(false, true)).await;
}

/// The same sloppy source passes the cases it does not break: the failures above are the
/// contract, not a suite that fails everything.
#[tokio::test]
async fn the_live_suite_passes_what_a_sloppy_source_gets_right() {
    drift_testkit::live::reads_only_the_scope(&sloppy(true, false)).await;
    drift_testkit::live::keeps_objects_as_read(&sloppy(false, true)).await;
}

/// A desired source that loses the files its objects came from.
#[tokio::test]
#[should_panic(expected = "[resources_carry_their_file]")]
async fn the_desired_suite_catches_a_source_without_provenance() {
    let h = MemDesired(MemoryDesiredSource::new("repo", fixtures::live_resources()), vec![]);
    drift_testkit::desired::resources_carry_their_file(&h).await;
}

/// `conformance` runs every case, each on a fresh harness.
#[tokio::test]
async fn the_sequential_runners_pass_on_the_reference_sources() {
    drift_testkit::live::conformance(MemLive::fresh).await;
    drift_testkit::desired::conformance(MemDesired::fresh).await;
}
