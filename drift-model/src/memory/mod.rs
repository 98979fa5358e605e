//! In-memory reference implementations of every trait. They define the expected behaviour that
//! the conformance suites (`drift-testkit`) check in every real adapter, and they are useful in
//! tests and demos.
//!
//! The sources are here; the store is [`MemoryStore`] (its drift history in `store`, its
//! outbox, decisions and audit trail in `act`).

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use async_trait::async_trait;

use crate::Result;
use crate::source::*;
use crate::{Coverage, CoverageStatus, DesiredSnapshot, Error, GroupKind, LiveSnapshot, Resource, Scope};

mod act;
mod store;

pub use store::{
    MemoryStore, distinct_findings, filter_matches, new_finding_row, new_row, percentile_cont, row_key, stats_of,
};

/// A desired source that returns a fixed snapshot.
#[derive(Debug, Clone)]
pub struct MemoryDesiredSource {
    snapshot: DesiredSnapshot,
}

impl MemoryDesiredSource {
    /// A source of these resources, under a repository name.
    pub fn new(repository: impl Into<String>, resources: Vec<Resource>) -> Self {
        let repository = repository.into();
        MemoryDesiredSource {
            snapshot: DesiredSnapshot { repository, revision: None, resources, warnings: Vec::new() },
        }
    }
    /// A source of a whole snapshot (with revision and warnings).
    pub fn from_snapshot(snapshot: DesiredSnapshot) -> Self {
        MemoryDesiredSource { snapshot }
    }
}

#[async_trait]
impl DesiredSource for MemoryDesiredSource {
    fn name(&self) -> &str {
        &self.snapshot.repository
    }
    fn capabilities(&self) -> DesiredCapabilities {
        DesiredCapabilities { revisions: self.snapshot.revision.is_some(), cached: true }
    }
    async fn fetch(&self) -> Result<DesiredSnapshot> {
        Ok(self.snapshot.clone())
    }
}

/// A live source over objects held in memory, with failures that can be injected per
/// (kind, namespace).
#[derive(Debug)]
pub struct MemoryLiveSource {
    cluster: String,
    state: Mutex<MemoryLiveState>,
}

#[derive(Debug, Default)]
struct MemoryLiveState {
    resources: BTreeMap<crate::ResourceKey, Resource>,
    failures: HashMap<(GroupKind, Option<String>), CoverageStatus>,
    down: Option<Error>,
}

impl MemoryLiveSource {
    /// A cluster holding these objects.
    pub fn new(cluster: impl Into<String>, resources: Vec<Resource>) -> Self {
        let resources = resources.into_iter().map(|r| (r.key.clone(), r)).collect();
        MemoryLiveSource {
            cluster: cluster.into(),
            state: Mutex::new(MemoryLiveState { resources, ..Default::default() }),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, MemoryLiveState> {
        // A poisoned lock only means another test thread panicked; the data is still usable.
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Creates or replaces an object.
    pub fn apply(&self, resource: Resource) {
        self.state().resources.insert(resource.key.clone(), resource);
    }
    /// Deletes an object.
    pub fn delete(&self, key: &crate::ResourceKey) {
        self.state().resources.remove(key);
    }
    /// Makes reads of a (kind, namespace) fail with this status (`None` namespace: every
    /// namespace of the kind).
    pub fn fail(&self, kind: GroupKind, namespace: Option<&str>, status: CoverageStatus) {
        self.state().failures.insert((kind, namespace.map(str::to_owned)), status);
    }
    /// Makes every read fail with this error (`None` to recover).
    pub fn set_down(&self, error: Option<Error>) {
        self.state().down = error;
    }
}

#[async_trait]
impl LiveSource for MemoryLiveSource {
    fn cluster(&self) -> &str {
        &self.cluster
    }
    fn capabilities(&self) -> LiveCapabilities {
        LiveCapabilities { watch: false, discovery: false }
    }
    async fn fetch(&self, scope: &Scope) -> Result<LiveSnapshot> {
        let state = self.state();
        if let Some(e) = &state.down {
            return Err(e.clone());
        }
        let mut coverage = Coverage::default();
        let mut resources = Vec::new();
        for (gk, ns) in scope.pairs() {
            let failure = state
                .failures
                .get(&(gk.clone(), ns.map(str::to_owned)))
                .or_else(|| state.failures.get(&(gk.clone(), None)));
            if let Some(status) = failure {
                coverage.set(gk, ns, status.clone());
                continue;
            }
            coverage.set(gk, ns, CoverageStatus::Complete);
            // Keys sort by group, kind, namespace, name: one range per (kind, namespace).
            let start = crate::ResourceKey::new(&gk.group, &gk.kind, ns, "");
            resources.extend(
                state
                    .resources
                    .range(start..)
                    .take_while(|(k, _)| k.group == gk.group && k.kind == gk.kind && k.namespace.as_deref() == ns)
                    .map(|(_, r)| {
                        let mut r = r.clone();
                        r.provenance.cluster = Some(self.cluster.clone());
                        r
                    }),
            );
        }
        Ok(LiveSnapshot { cluster: self.cluster.clone(), resources, coverage })
    }
}
