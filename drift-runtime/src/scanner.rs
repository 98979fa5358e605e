//! The scanner: one pass over every desired source, recorded in the store and handed to every
//! extra sink. Shared by the scheduler, the API's `POST /scan` and the watch loop.

use std::sync::Arc;
use std::time::Instant;

use drift_core::scan::{ScanOptions, run_scan};
use drift_core::sink::RecordOutcome;
use drift_core::{
    ActStore, Comparator, DesiredSource, DriftSink, DriftStore, Engine, GroupKind, LiveSource, ScanReport,
};
use drift_metrics::{Metrics, ScanGate};

/// A store seen as a sink (writes), as the read side (the API, `drift drifts list`) and, for
/// stores that keep an outbox, decisions and an audit trail, as the acting side.
#[derive(Debug, Clone)]
pub struct Store {
    /// Where reports are recorded.
    pub sink: Arc<dyn DriftSink>,
    /// Where the API reads.
    pub read: Arc<dyn DriftStore>,
    /// The outbox, decisions and audit trail; `None` for a store without them (notifications
    /// and decisions then cannot be configured).
    pub act: Option<Arc<dyn ActStore>>,
    /// Where the person behind each change is kept (the audit log join,
    /// [`crate::identity`]); `None` for a store without it.
    pub identities: Option<Arc<dyn drift_core::drift_model::ChangeIdentities>>,
}

impl Store {
    /// A store that is the sink and the read side.
    pub fn new<S: DriftSink + DriftStore + 'static>(store: Arc<S>) -> Self {
        Store { sink: store.clone(), read: store, act: None, identities: None }
    }

    /// A store that is all three sides (both SQL stores).
    pub fn acting<S: DriftSink + DriftStore + ActStore + 'static>(store: Arc<S>) -> Self {
        Store { sink: store.clone(), read: store.clone(), act: Some(store), identities: None }
    }

    /// The same store keeping the person behind each change (both SQL stores do).
    pub fn with_identities(mut self, identities: Arc<dyn drift_core::drift_model::ChangeIdentities>) -> Self {
        self.identities = Some(identities);
        self
    }
}

/// What every scan of a detector shares: the namespace rules of the desired state.
#[derive(Debug, Clone)]
pub struct ScanSettings {
    /// Namespace given to namespaced desired objects that name none (default `default`).
    pub default_namespace: String,
    /// Custom kinds known to be cluster-scoped.
    pub cluster_scoped: Vec<GroupKind>,
    /// Where each pass counts the objects it compares (for a progress line).
    pub progress: drift_core::progress::Progress,
    /// Report objects Git does not declare (`unmanaged_resource`, full scans only: the watch
    /// follows the objects Git names).
    pub orphans: bool,
    /// Check policies ([`drift_core::policy`]) in full passes and in the watch's re-comparisons.
    pub policy: Option<std::sync::Arc<drift_core::policy::Policy>>,
    /// The public keys of the age identities the desired sources open SOPS files with, `None`
    /// when no key is given (the note of an object left encrypted says which).
    pub sops_recipients: Option<Arc<[String]>>,
}

impl Default for ScanSettings {
    fn default() -> Self {
        ScanSettings {
            default_namespace: "default".to_owned(),
            cluster_scoped: Vec::new(),
            progress: drift_core::progress::Progress::default(),
            orphans: false,
            policy: None,
            sops_recipients: None,
        }
    }
}

impl ScanSettings {
    /// The options of one scan with this id.
    pub fn options(&self, scan_id: impl Into<String>) -> ScanOptions {
        let mut options = ScanOptions::new(scan_id);
        options.default_namespace = self.default_namespace.clone();
        options.cluster_scoped = self.cluster_scoped.clone();
        options.progress = self.progress.clone();
        options.orphans = self.orphans;
        options.policy = self.policy.clone();
        options.sops_recipients = self.sops_recipients.clone();
        options
    }
}

/// A new scan id (a UUID).
pub fn new_scan_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// One report of a pass and what recording it in the store gave.
#[derive(Debug)]
pub struct Recorded {
    /// The report.
    pub report: ScanReport,
    /// The store's answer; an error means the report was not recorded (drifts stay as they were).
    pub outcome: drift_core::Result<RecordOutcome>,
}

/// What a recorded pass saw of an object ([`Scanner::pass_saw_newer`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Passed {
    read_started: Instant,
    version: Option<Version>,
}

/// A `metadata.resourceVersion` that orders the states of one object. Kubernetes calls it
/// opaque, but every API server backed by etcd (and the project's test API server) gives the
/// revision number, which grows with each write; client-go compares them as integers the same
/// way (`MutationCache`). A version that is not a number orders nothing: the times decide.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Version(u64);

impl Version {
    pub(crate) fn parse(v: &str) -> Option<Self> {
        v.parse().ok().map(Version)
    }

    /// The version of a live object.
    pub(crate) fn of(r: &drift_core::Resource) -> Option<Self> {
        r.object.get("metadata")?.get("resourceVersion")?.as_str().and_then(Self::parse)
    }
}

/// Everything a scan pass needs.
#[derive(Debug)]
pub struct Scanner {
    pub(crate) desired: Vec<Arc<dyn DesiredSource>>,
    pub(crate) live: Arc<dyn LiveSource>,
    /// What remediation plans its patches with (the paths of the fields to put back).
    pub(crate) engine: Engine,
    /// What full passes and the watch compare with: the engine, or an integrator's own
    /// ([`crate::DetectorBuilder::comparator`]).
    pub(crate) comparator: Arc<dyn Comparator>,
    pub(crate) settings: ScanSettings,
    pub(crate) store: Store,
    pub(crate) sinks: Vec<Arc<dyn DriftSink>>,
    pub(crate) metrics: Metrics,
    pub(crate) gate: ScanGate,
    /// Woken when a report wrote events to the outbox (the notifier task).
    pub(crate) wake: Option<Arc<tokio::sync::Notify>>,
    /// With leader election: whether this replica leads. A replica that does not lead starts
    /// no pass and records nothing.
    pub(crate) leading: Option<tokio::sync::watch::Receiver<bool>>,
    /// When the watch last re-compared each object (from the newest live state it had then). A
    /// full pass that started before that leaves the object to the watch: its own view of it
    /// may be older ([`Scanner::leave_to_watch`]).
    pub(crate) watched: std::sync::Mutex<std::collections::HashMap<drift_core::ResourceKey, Instant>>,
    /// What the pass that last recorded each object saw of it: when it began to read the
    /// cluster, and the `resourceVersion` of the live object it compared. A watch event older
    /// than that leaves the object as the pass left it ([`Scanner::pass_saw_newer`]).
    pub(crate) passed: std::sync::Mutex<std::collections::HashMap<drift_core::ResourceKey, Passed>>,
    /// The (kind, namespace) pairs each cluster's watch does not see, shared by the scanners of
    /// one detector: the metric (and `GET /ready`) shows their sum, so that one cluster's watch
    /// in sync never hides another's outage.
    pub(crate) gaps: Arc<WatchGaps>,
}

/// The pairs each cluster's watch does not see now, by cluster (set by each scanner as its watch
/// loses or regains sync).
#[derive(Debug, Default)]
pub struct WatchGaps(std::sync::Mutex<std::collections::BTreeMap<String, usize>>);

impl WatchGaps {
    /// Sets `cluster`'s count and returns the sum over every cluster.
    fn set(&self, cluster: &str, pairs: usize) -> usize {
        let mut gaps = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        gaps.insert(cluster.to_owned(), pairs);
        gaps.values().sum()
    }

    /// The count of each cluster whose watch does not see everything, by name.
    pub fn out_of_sync(&self) -> std::collections::BTreeMap<String, usize> {
        let gaps = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        gaps.iter().filter(|(_, n)| **n > 0).map(|(c, n)| (c.clone(), *n)).collect()
    }
}

/// A detector's clusters and their watch gaps, as the API's `/ready` reads them.
#[cfg(feature = "api")]
#[derive(Debug)]
pub(crate) struct ClusterView {
    pub(crate) names: Vec<String>,
    pub(crate) gaps: Arc<WatchGaps>,
}

#[cfg(feature = "api")]
impl drift_api::ClusterGaps for ClusterView {
    fn clusters(&self) -> Vec<String> {
        self.names.clone()
    }

    fn out_of_sync(&self) -> std::collections::BTreeMap<String, usize> {
        self.gaps.out_of_sync()
    }
}

impl Scanner {
    /// One pass over every desired source; `None` when a pass is already running (passes never
    /// overlap). Each report is recorded as soon as it is made; a store that fails does not stop
    /// the pass (the failure is logged, counted and returned in [`Recorded::outcome`]).
    pub async fn pass(&self, scan_id: String) -> Option<Vec<Recorded>> {
        if !self.is_leading() {
            tracing::info!(%scan_id, "this replica does not lead; no pass");
            return None;
        }
        let permit = self.gate.try_start(scan_id.clone()).ok()?;
        let pass_started = Instant::now();
        let mut recorded = Vec::with_capacity(self.desired.len());
        // With orphans and several repositories, an object one repository declares is not
        // unmanaged for another: each scan knows what all of them declare.
        let declared =
            if self.settings.orphans && self.desired.len() > 1 { Some(self.declared_keys().await) } else { None };
        for (i, desired) in self.desired.iter().enumerate() {
            let started = Instant::now();
            let id = if self.desired.len() == 1 { scan_id.clone() } else { format!("{scan_id}-{i}") };
            let mut options = self.settings.options(id);
            match &declared {
                Some(Some(keys)) => options.declared_elsewhere = keys.clone(),
                Some(None) => options.elsewhere_unknown = true,
                None => {}
            }
            let mut report = run_scan(desired.as_ref(), self.live.as_ref(), self.comparator.as_ref(), &options).await;
            self.leave_to_watch(&mut report, started);
            self.metrics.record_scan(&report, started.elapsed());
            let recording = Instant::now();
            let outcome = self.record(&report).await;
            if outcome.is_ok() {
                self.note_passed(&report, started);
            }
            match &outcome {
                Ok(o) => tracing::info!(
                    scan_id = %report.scan_id, cluster = %report.cluster, repository = %report.repository,
                    outcome = report.outcome.as_str(), drifts = report.drifts.len(),
                    opened = o.opened, resolved = o.resolved, waived = o.waived, events = o.events,
                    record_ms = recording.elapsed().as_millis() as u64, "scan recorded"
                ),
                Err(e) => tracing::error!(
                    scan_id = %report.scan_id, repository = %report.repository, error = %e,
                    "store unavailable; report not recorded"
                ),
            }
            recorded.push(Recorded { report, outcome });
        }
        drop(permit);
        // Later passes start later: what the watch did before this one started cannot matter.
        self.watched().retain(|_, at| *at >= pass_started);
        Some(recorded)
    }

    fn watched(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<drift_core::ResourceKey, Instant>> {
        self.watched.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Notes that the watch re-compares `key` now, from its newest live state.
    pub(crate) fn mark_watched(&self, key: &drift_core::ResourceKey) {
        self.watched().insert(key.clone(), Instant::now());
    }

    fn passed(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<drift_core::ResourceKey, Passed>> {
        self.passed.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Notes the objects whose state a recorded pass decided (those it was allowed to resolve:
    /// compared from a complete read), with when it began to read the cluster and the version
    /// of each live object it compared.
    fn note_passed(&self, report: &ScanReport, read_started: Instant) {
        let mut passed = self.passed();
        for key in report.desired.iter().filter(|k| report.may_resolve(k)) {
            let version = report.live_version(key).and_then(Version::parse);
            passed.insert(key.clone(), Passed { read_started, version });
        }
    }

    /// Whether a recorded pass saw `key` in a state at least as new as a watch event about it,
    /// which arrived at `received` and carries the object's `version` (`None` for a deletion).
    /// Re-comparing such an event would resolve a drift the pass just opened, or open one it
    /// resolved, until the newer event arrives: the watch leaves the object as the pass left it.
    ///
    /// When both sides carry a `resourceVersion`, they decide: the watch delivers the events of
    /// an object in order, however late, and an event whose version is not above the one the
    /// pass compared is not newer. Otherwise (a deletion, an object the pass did not find, a
    /// source without versions) the times decide: an event that arrived before the pass began
    /// to read is older than what it recorded. An event newer than the pass is the watch's to
    /// handle, and the note is dropped.
    pub(crate) fn pass_saw_newer(
        &self,
        key: &drift_core::ResourceKey,
        received: Instant,
        version: Option<Version>,
    ) -> bool {
        let mut passed = self.passed();
        let Some(seen) = passed.get(key) else { return false };
        let older = match (version, seen.version) {
            (Some(event), Some(pass)) => event <= pass,
            _ => seen.read_started > received,
        };
        if !older {
            passed.remove(key);
        }
        older
    }

    /// A full pass reads the live state over some time; the watch may meanwhile have seen (and
    /// recorded) a newer state of an object. Recording the pass's older view would reopen a
    /// drift the watch resolved, or resolve one it opened. Such objects are taken out of the
    /// report: their drifts and policy findings are dropped and they are listed as
    /// uncomparable, so the store leaves them as the watch left them.
    fn leave_to_watch(&self, report: &mut ScanReport, scan_started: Instant) {
        let newer: std::collections::HashSet<drift_core::ResourceKey> =
            self.watched().iter().filter(|(_, at)| **at >= scan_started).map(|(k, _)| k.clone()).collect();
        if newer.is_empty() {
            return;
        }
        report.drifts.retain(|d| !newer.contains(&d.key()));
        report.findings.retain(|f| !newer.contains(&f.resource));
        report.uncomparable.extend(newer.into_iter().filter(|k| report.desired.binary_search(k).is_ok()));
        report.uncomparable.sort_unstable();
        report.uncomparable.dedup();
        report.summary =
            drift_core::Summary::of(&report.drifts, report.summary.resources_compared, report.summary.warnings);
    }

    /// The keys every desired source declares, with the scan's namespace rules applied; `None`
    /// when one of them cannot be read whole (what it declares is then unknown). Sources cache
    /// their last revision, so the scans that follow read them again cheaply.
    async fn declared_keys(&self) -> Option<Arc<[drift_core::ResourceKey]>> {
        let mut keys = Vec::new();
        for source in &self.desired {
            let mut snapshot = match source.fetch().await {
                Ok(s) if !s.warnings.iter().any(|w| w.fatal) => s,
                Ok(_) | Err(_) => {
                    tracing::warn!(
                        repository = source.name(),
                        "orphans: a repository could not be read whole; no object is judged unmanaged in this pass"
                    );
                    return None;
                }
            };
            let mut options = self.settings.options("");
            drift_core::scan::discover_cluster_scoped(self.live.as_ref(), &snapshot, &mut options).await;
            drift_core::scan::place_namespaces(&mut snapshot.resources, &options);
            keys.extend(snapshot.resources.into_iter().map(|r| r.key));
        }
        keys.sort_unstable();
        keys.dedup();
        Some(keys.into())
    }

    /// Records one report: in the store first (its answer is returned), then in every extra
    /// sink. An extra sink that fails is logged and counted; it never stops the store or the
    /// other sinks.
    pub async fn record(&self, report: &ScanReport) -> drift_core::Result<RecordOutcome> {
        let outcome = self.record_in_store(report).await;
        self.deliver(report).await;
        outcome
    }

    /// Records one report in the store only; a failure is counted. With leader election, a
    /// replica that no longer leads records nothing (the new leader's scans own the store).
    pub async fn record_in_store(&self, report: &ScanReport) -> drift_core::Result<RecordOutcome> {
        if !self.is_leading() {
            return Err(drift_core::Error::unavailable(format!(
                "scan {}: this replica lost the leader lease; its report is not recorded",
                report.scan_id
            )));
        }
        let outcome = self.store.sink.record(report).await;
        match &outcome {
            Err(e) => self.metrics.record_source_error(e.kind()),
            Ok(o) if o.events > 0 => {
                if let Some(wake) = &self.wake {
                    wake.notify_one();
                }
            }
            Ok(_) => {}
        }
        outcome
    }

    /// Hands one report to every extra sink, in order; a sink that fails is logged and counted.
    pub async fn deliver(&self, report: &ScanReport) {
        for sink in &self.sinks {
            if let Err(e) = sink.record(report).await {
                self.metrics.record_source_error(e.kind());
                tracing::warn!(sink = sink.name(), scan_id = %report.scan_id, error = %e, "sink failed; report not delivered there");
            }
        }
    }

    /// Whether this replica runs scans: always without leader election, else while it holds
    /// the lease.
    pub fn is_leading(&self) -> bool {
        self.leading.as_ref().is_none_or(|l| *l.borrow())
    }

    /// Says how many (kind, namespace) pairs this cluster's watch does not see now; the metric
    /// gets the sum over the clusters of the detector.
    pub(crate) fn set_out_of_sync(&self, pairs: usize) {
        let sum = self.gaps.set(self.live.cluster(), pairs);
        self.metrics.set_watch_out_of_sync(sum);
    }

    /// The cluster this scanner reads (its live source's name).
    pub fn cluster(&self) -> &str {
        self.live.cluster()
    }

    /// The id of the pass that is running, if one is.
    pub fn running(&self) -> Option<String> {
        self.gate.running()
    }
    /// The engine: what remediation plans its patches with, and the default comparator.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }
    /// What passes and the watch compare with: the engine unless the builder was given another
    /// comparator.
    pub fn comparator(&self) -> &dyn Comparator {
        self.comparator.as_ref()
    }
    /// The store.
    pub fn store(&self) -> &Store {
        &self.store
    }
    /// The metrics.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }
    /// The scan settings.
    pub fn settings(&self) -> &ScanSettings {
        &self.settings
    }
    /// The desired sources.
    pub fn desired(&self) -> &[Arc<dyn DesiredSource>] {
        &self.desired
    }
    /// The live source.
    pub fn live(&self) -> &Arc<dyn LiveSource> {
        &self.live
    }
}
