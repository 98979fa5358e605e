//! The source traits: where desired and live state come from.

use std::pin::Pin;

use async_trait::async_trait;
use futures_core::Stream;
use serde::{Deserialize, Serialize};

use crate::Result;
use crate::{CoverageStatus, DesiredSnapshot, GroupKind, LiveSnapshot, Resource, ResourceKey, Scope};

/// What a desired source can do; conformance cases are chosen from it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DesiredCapabilities {
    /// The snapshot carries a revision (commit id).
    pub revisions: bool,
    /// Asking twice for an unchanged revision is cheap (cached).
    pub cached: bool,
}

/// Reads the desired state (from Git, a folder, an API).
///
/// Contract:
/// - a broken file is a warning in [`DesiredSnapshot::warnings`] with its path and line, not an
///   error of the whole call; the rest is still read;
/// - every resource carries its provenance (repository, path, revision);
/// - the source never normalises objects;
/// - an `Err` means nothing could be read (repository unreachable); it must not be reported as an
///   empty snapshot.
#[async_trait]
pub trait DesiredSource: Send + Sync + std::fmt::Debug {
    /// A name for logs and reports (the repository name).
    fn name(&self) -> &str;
    /// What this source can do.
    fn capabilities(&self) -> DesiredCapabilities {
        DesiredCapabilities::default()
    }
    /// Reads the desired state now.
    async fn fetch(&self) -> Result<DesiredSnapshot>;
}

/// What a live source can do.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LiveCapabilities {
    /// [`LiveSource::watch`] is implemented.
    pub watch: bool,
    /// The source knows which kinds the cluster serves: a kind it does not serve is reported as
    /// [`crate::CoverageStatus::NotServed`]. Sources without discovery (files, memory) report
    /// every asked pair as complete, possibly empty.
    pub discovery: bool,
}

/// A change seen by a watching live source.
#[derive(Debug, Clone, PartialEq)]
pub enum LiveEvent {
    /// An object in scope was created or changed (with managedFields).
    Applied(Resource),
    /// An object in scope was deleted.
    Deleted(ResourceKey),
    /// The watch of a (kind, namespace) lost sync (dropped connection, 410 Gone) and is relisting;
    /// nothing there may be resolved until a `Synced` arrives.
    Desynced {
        /// The kind.
        kind: GroupKind,
        /// The namespace, `None` for cluster-wide.
        namespace: Option<String>,
        /// Why.
        status: CoverageStatus,
    },
    /// The watch of a (kind, namespace) is in sync again after a (re)list.
    Synced {
        /// The kind.
        kind: GroupKind,
        /// The namespace, `None` for cluster-wide.
        namespace: Option<String>,
    },
}

/// A stream of live changes.
pub type LiveEventStream = Pin<Box<dyn Stream<Item = Result<LiveEvent>> + Send>>;

/// Reads the live state of one cluster.
///
/// Contract:
/// - reads only the (kind, namespace) pairs of the scope it is given;
/// - reports the outcome of every pair in [`LiveSnapshot::coverage`]: a failed read is missing
///   coverage, never an empty namespace;
/// - keeps `metadata.managedFields` on the objects; never normalises;
/// - an `Err` means the cluster could not be read at all.
#[async_trait]
pub trait LiveSource: Send + Sync + std::fmt::Debug {
    /// The cluster name recorded with drifts.
    fn cluster(&self) -> &str;
    /// What this source can do.
    fn capabilities(&self) -> LiveCapabilities {
        LiveCapabilities::default()
    }
    /// Reads the objects of a scope now.
    async fn fetch(&self, scope: &Scope) -> Result<LiveSnapshot>;
    /// Reads the objects of a scope now, like [`LiveSource::fetch`], handing them to `part` in
    /// parts as they are read, so that a scan compares them and lets them go instead of
    /// holding the whole live state (`drift_engine::scan::run_scan`).
    ///
    /// Contract: together, the parts hold what `fetch` would return: each object once, and the
    /// coverage of every pair of the scope (each pair in one part). An `Err` means the cluster
    /// could not be read at all, as for `fetch`; parts handed over before it are then of no
    /// use. The default hands over `fetch`'s snapshot as one part; a source that reads pair by
    /// pair hands over each pair once it has read it whole.
    async fn fetch_parts(&self, scope: &Scope, part: &mut (dyn FnMut(LiveSnapshot) + Send)) -> Result<()> {
        part(self.fetch(scope).await?);
        Ok(())
    }
    /// Which of `kinds` the cluster serves cluster-scoped. Custom kinds are not in the built-in
    /// table ([`crate::is_cluster_scoped`]): a namespace a desired object gives such a kind is
    /// then ignored, as `kubectl apply` and Argo CD do, instead of the object being reported
    /// missing. Sources that cannot tell return none (the default).
    async fn cluster_scoped(&self, kinds: &[GroupKind]) -> Vec<GroupKind> {
        let _ = kinds;
        Vec::new()
    }
    /// Watches a scope; sources without [`LiveCapabilities::watch`] return
    /// [`crate::ErrorKind::Unsupported`].
    ///
    /// Contract of the stream, per (kind, namespace) pair of the scope (pairs are independent
    /// and their events may interleave; the events of one pair come in the order of its
    /// changes):
    /// - it starts with the initial list: [`LiveEvent::Applied`] for every object of the pair,
    ///   then [`LiveEvent::Synced`]. Nothing of a pair may be resolved before its first
    ///   `Synced`;
    /// - then [`LiveEvent::Applied`] when an object in scope is created or its content changes
    ///   (a change of `status` or `metadata.resourceVersion` alone need not be reported), and
    ///   [`LiveEvent::Deleted`] when it goes away; nothing outside the scope is reported;
    /// - a dropped connection is resumed: no change is lost, and an object that did not change
    ///   is not announced again;
    /// - when the pair cannot be followed any more (410 Gone, a refused or failed watch or
    ///   list, a kind not served), [`LiveEvent::Desynced`] with the reason; the source keeps
    ///   trying and, once it has listed again, sends `Applied` for what changed meanwhile,
    ///   `Deleted` for what disappeared (never what did not change), then `Synced`. Between
    ///   the two, nothing of that pair may be resolved;
    /// - objects in events are as read: managedFields kept, never normalised;
    /// - the stream does not end while it is held; dropping it stops the watch.
    ///
    /// The conformance cases `watch_*` of drift-testkit's live suite check this contract.
    async fn watch(&self, scope: &Scope) -> Result<LiveEventStream> {
        let _ = scope;
        Err(crate::Error::unsupported(format!("live source for {} cannot watch", self.cluster())))
    }
}
