//! Conformance of sinks, most of whose cases need a sink that is also a store (see
//! docs/storage.md for what the stores keep). Each case is a function taking the sink and the
//! same object seen as a store; [`sink_suite!`](crate::sink_suite) turns each into a test of
//! its own. A case whose capability is off ([`SinkCapabilities`]) prints
//! `skipped: <case>: <reason>` and returns.

use std::sync::Arc;

use async_trait::async_trait;
use drift_model::sink::*;
use drift_model::*;
use serde_json::json;

use crate::fixtures::{drift, finding, key, report, t, with_digest};

/// Expands to one test per case of [`crate::sink`], named after the case. `$fresh` is an
/// expression callable with no argument that returns a future of a new, empty sink and the same
/// object as a store: `(Arc<dyn DriftSink>, Arc<dyn DriftStore>)`. Call it inside a module
/// (`mod sink { drift_testkit::sink_suite!(...); }`), so that the runner lists
/// `sink::lifecycle` and the others.
///
/// ```
/// mod sink {
///     use std::sync::Arc;
///     use drift_model::{DriftSink, DriftStore, memory::MemoryStore};
///     drift_testkit::sink_suite!(|| async {
///         let s = Arc::new(MemoryStore::new());
///         (s.clone() as Arc<dyn DriftSink>, s as Arc<dyn DriftStore>)
///     });
/// }
/// ```
///
/// A sink that cannot be read back (a file, a chat, a queue) gives only the sink:
/// `sink_suite!(write_only: || async { Arc::new(MySink::new()) as Arc<dyn DriftSink> })`. The
/// cases that need a store then say they are skipped, and the store they are handed answers
/// every call with an error, so a sink that claims `readable` there fails clearly.
#[macro_export]
macro_rules! sink_suite {
    (write_only: $fresh:expr) => {
        $crate::sink_suite!(|| async {
            let sink: ::std::sync::Arc<dyn $crate::__private::drift_model::DriftSink> = ($fresh)().await;
            let store: ::std::sync::Arc<dyn $crate::__private::drift_model::DriftStore> = ::std::sync::Arc::new($crate::sink::Unreadable);
            (sink, store)
        });
    };
    ($fresh:expr) => {
        $crate::__sink_cases!(
            $fresh;
            records_every_report,
            empty_store,
            lifecycle,
            resolution_needs_coverage,
            removed_from_git,
            named_objects_only,
            resolutions,
            listing,
            statistics,
            findings_lifecycle,
            findings_listing
        );
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __sink_cases {
    ($fresh:expr; $($case:ident),+) => {
        $(
            #[test]
            fn $case() {
                $crate::__private::run(1, async {
                    let (sink, store) = ($fresh)().await;
                    $crate::sink::$case(&*sink, &*store).await;
                });
            }
        )+
    };
}

/// Whether a findings case may run; prints why not.
fn keeps_findings(case: &str, sink: &dyn DriftSink) -> bool {
    if !runs(case, sink, true) {
        return false;
    }
    if !sink.capabilities().findings {
        println!("skipped: {case}: the sink keeps no policy findings (SinkCapabilities::findings is off)");
        return false;
    }
    true
}

/// Whether the case may run; prints why not.
fn runs(case: &str, sink: &dyn DriftSink, resolves: bool) -> bool {
    let caps = sink.capabilities();
    let reason = if !caps.readable {
        "the sink cannot be read back (SinkCapabilities::readable is off)"
    } else if resolves && !caps.resolves {
        "the sink does not resolve drifts (SinkCapabilities::resolves is off)"
    } else {
        return true;
    };
    println!("skipped: {case}: {reason}");
    false
}

/// A sink and a store sharing one owner, kept alive with a guard: a test database server, a
/// temporary folder. What a `sink_suite!` of a store whose database lives only as long as the
/// test returns.
pub struct Guarded<S, G> {
    inner: S,
    _guard: G,
}

impl<S: std::fmt::Debug, G> std::fmt::Debug for Guarded<S, G> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.inner.fmt(f)
    }
}

impl<S, G> Guarded<S, G> {
    /// `inner`, keeping `guard` alive as long as it is.
    pub fn new(inner: S, guard: G) -> Arc<Self> {
        Arc::new(Guarded { inner, _guard: guard })
    }
}

#[async_trait]
impl<S: DriftSink, G: Send + Sync> DriftSink for Guarded<S, G> {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn capabilities(&self) -> SinkCapabilities {
        self.inner.capabilities()
    }
    async fn record(&self, report: &ScanReport) -> Result<RecordOutcome> {
        self.inner.record(report).await
    }
}

#[async_trait]
impl<S: DriftStore, G: Send + Sync> DriftStore for Guarded<S, G> {
    async fn list(&self, filter: &DriftFilter, page: PageRequest) -> Result<DriftPage> {
        self.inner.list(filter, page).await
    }
    async fn get(&self, id: i64) -> Result<StoredDrift> {
        self.inner.get(id).await
    }
    async fn stats(&self, filter: &DriftFilter, now: chrono::DateTime<chrono::Utc>) -> Result<DriftStats> {
        self.inner.stats(filter, now).await
    }
    async fn recent_scans(&self, limit: u32) -> Result<Vec<ScanRecord>> {
        self.inner.recent_scans(limit).await
    }
    async fn ping(&self) -> Result<()> {
        self.inner.ping().await
    }
    async fn findings(&self, filter: &FindingFilter, page: PageRequest) -> Result<FindingPage> {
        self.inner.findings(filter, page).await
    }
    async fn open_findings(&self) -> Result<std::collections::BTreeMap<(finding::Rule, Severity), i64>> {
        self.inner.open_findings().await
    }
}

/// Any sink, readable or not: reports are accepted, and a report recorded again (the same scan
/// id) is accepted too.
pub async fn records_every_report(sink: &dyn DriftSink, _store: &dyn DriftStore) {
    let web = key("Deployment", "shop", "web");
    let d = drift("Deployment", "shop", "web", DriftType::ReplicasDrift, "spec.replicas", json!(5));
    let r1 = report("any-1", t(0), std::slice::from_ref(&web), vec![d]);
    let first = sink.record(&r1).await.expect("[records_every_report] record a report with a drift");
    assert!(!first.replayed, "[records_every_report] a new scan id is not a replay");
    let second = sink.record(&report("any-2", t(5), std::slice::from_ref(&web), vec![])).await;
    assert!(!second.expect("[records_every_report] an empty report").replayed, "[records_every_report] any-2 is new");
    let again = sink.record(&r1).await.expect("[records_every_report] recording a scan id again is not an error");
    assert!(again.replayed, "[records_every_report] the same scan id again is a replay (idempotent per scan id)");
}

/// The store a write-only sink's suite is handed (`sink_suite!(write_only: ...)`): every call
/// fails, since such a sink cannot be read back.
#[derive(Debug)]
pub struct Unreadable;

#[async_trait]
impl DriftStore for Unreadable {
    async fn list(&self, _: &DriftFilter, _: PageRequest) -> Result<DriftPage> {
        Err(Self::error())
    }
    async fn get(&self, _: i64) -> Result<StoredDrift> {
        Err(Self::error())
    }
    async fn stats(&self, _: &DriftFilter, _: chrono::DateTime<chrono::Utc>) -> Result<DriftStats> {
        Err(Self::error())
    }
    async fn recent_scans(&self, _: u32) -> Result<Vec<ScanRecord>> {
        Err(Self::error())
    }
    async fn ping(&self) -> Result<()> {
        Err(Self::error())
    }
}

impl Unreadable {
    fn error() -> Error {
        Error::unsupported("a write-only sink cannot be read back (sink_suite!(write_only: ...))")
    }
}

async fn open_rows(store: &dyn DriftStore) -> Vec<StoredDrift> {
    let filter = DriftFilter { status: Some(DriftStatus::Open), ..Default::default() };
    store.list(&filter, PageRequest { limit: 1000, after: None }).await.expect("list open").items
}

async fn all_rows(store: &dyn DriftStore) -> Vec<StoredDrift> {
    store.list(&DriftFilter::default(), PageRequest { limit: 1000, after: None }).await.expect("list").items
}

/// A new store lists nothing, answers a missing id with NotFound and a limit of 0 with
/// InvalidInput, and has empty statistics over 7 days.
pub async fn empty_store(sink: &dyn DriftSink, store: &dyn DriftStore) {
    if !runs("empty_store", sink, false) {
        return;
    }
    store.ping().await.expect("[empty_store] ping");
    let page = store.list(&DriftFilter::default(), PageRequest::default()).await.expect("[empty_store] list");
    assert!(page.items.is_empty() && page.next.is_none(), "[empty_store] a new store lists nothing");
    let err = store.get(1).await.expect_err("[empty_store] get of a missing id must fail");
    assert_eq!(err.kind(), ErrorKind::NotFound, "[empty_store] missing id is NotFound");
    let bad = store.list(&DriftFilter::default(), PageRequest { limit: 0, after: None }).await;
    assert_eq!(bad.map(|_| ()).map_err(|e| e.kind()), Err(ErrorKind::InvalidInput), "[empty_store] limit 0 is invalid");
    let stats = store.stats(&DriftFilter::default(), t(0)).await.expect("[empty_store] stats");
    assert_eq!(stats.trend.len(), 7, "[empty_store] the trend has 7 days");
    assert!(stats.mean_time_to_resolve_seconds.is_none(), "[empty_store] no resolution, no mean");
    assert!(store.recent_scans(10).await.expect("[empty_store] scans").is_empty());
}

/// A drift opened, seen again, replayed, resolved, back again; failed scans and other
/// repositories resolve nothing; one scan row per scan id.
pub async fn lifecycle(sink: &dyn DriftSink, store: &dyn DriftStore) {
    if !runs("lifecycle", sink, true) {
        return;
    }
    let web = key("Deployment", "shop", "web");
    let replicas = |v| drift("Deployment", "shop", "web", DriftType::ReplicasDrift, "spec.replicas", json!(v));

    // A new drift, listed twice in the report (one row), then seen again twice.
    let r1 = report("scan-1", t(0), std::slice::from_ref(&web), vec![replicas(5), replicas(5)]);
    let o1 = sink.record(&r1).await.expect("[lifecycle] record scan-1");
    assert_eq!((o1.opened, o1.updated, o1.resolved), (1, 0, 0), "[lifecycle] first scan opens one drift");
    sink.record(&report("scan-2", t(5), std::slice::from_ref(&web), vec![replicas(6)])).await.expect("scan-2");
    let o3 =
        sink.record(&report("scan-3", t(10), std::slice::from_ref(&web), vec![replicas(7)])).await.expect("scan-3");
    assert_eq!((o3.opened, o3.updated), (0, 1), "[lifecycle] a persistent drift updates its row");
    let rows = all_rows(store).await;
    assert_eq!(rows.len(), 1, "[lifecycle] one row for a persistent drift");
    let row = &rows[0];
    assert_eq!(row.occurrences, 3, "[lifecycle] seen by 3 scans");
    assert_eq!(row.detected_at, t(0), "[lifecycle] detected_at is the first scan");
    assert_eq!(row.last_seen, t(10), "[lifecycle] last_seen is the latest scan");
    assert_eq!(row.cluster_value, Some(json!(7)), "[lifecycle] the current cluster value is kept");
    assert_eq!(row.git_value, Some(json!("git")));
    assert_eq!(row.status, DriftStatus::Open);
    assert_eq!(row.fingerprint, r1.drifts[0].fingerprint("test-cluster", "test-repo"), "[lifecycle] fingerprint");
    assert_eq!(
        (row.api_group.as_str(), row.resource_kind.as_str(), row.namespace.as_str(), row.resource_name.as_str()),
        ("apps", "Deployment", "shop", "web")
    );
    assert_eq!(row.changed_by.as_deref(), Some("kubectl-edit"));
    assert_eq!(row.changed_at, Some(t(-60)));
    assert_eq!(row.classification, Classification::ManualChange);
    assert_eq!(row.recommended_action, RecommendedAction::SuggestRevert);
    assert_eq!(store.get(row.id).await.expect("[lifecycle] get"), *row, "[lifecycle] get equals list");

    // Replaying a report changes nothing.
    let replay =
        sink.record(&report("scan-3", t(10), std::slice::from_ref(&web), vec![replicas(7)])).await.expect("replay");
    assert!(replay.replayed, "[lifecycle] the same scan id is a replay");
    assert_eq!(all_rows(store).await[0].occurrences, 3, "[lifecycle] a replay does not count");

    // Fixed: resolved with resolved_at.
    let o4 = sink.record(&report("scan-4", t(20), std::slice::from_ref(&web), vec![])).await.expect("scan-4");
    assert_eq!(o4.resolved, 1, "[lifecycle] a fixed drift is resolved");
    let row = store.get(row.id).await.expect("get");
    assert_eq!((row.status, row.resolved_at), (DriftStatus::Resolved, Some(t(20))), "[lifecycle] resolved_at");

    // Back again: a new row; the old one stays resolved.
    let o5 =
        sink.record(&report("scan-5", t(30), std::slice::from_ref(&web), vec![replicas(9)])).await.expect("scan-5");
    assert_eq!(o5.opened, 1, "[lifecycle] a drift that comes back opens a new row");
    let rows = all_rows(store).await;
    assert_eq!(rows.len(), 2);
    assert_eq!(rows.iter().filter(|r| r.status == DriftStatus::Open).count(), 1, "[lifecycle] one open row");
    assert!(rows[0].id > rows[1].id, "[lifecycle] newest first");
    assert_eq!(rows[0].detected_at, t(30));

    // A failed scan resolves nothing.
    let mut failed = report("scan-6", t(40), std::slice::from_ref(&web), vec![]);
    failed.outcome = ScanOutcome::Failed;
    assert_eq!(sink.record(&failed).await.expect("scan-6").resolved, 0, "[lifecycle] a failed scan resolves nothing");
    assert_eq!(open_rows(store).await.len(), 1);

    // Another repository's scan does not resolve this repository's drifts.
    let mut other = report("scan-7", t(50), std::slice::from_ref(&web), vec![]);
    other.repository = "other-repo".to_owned();
    assert_eq!(sink.record(&other).await.expect("scan-7").resolved, 0, "[lifecycle] repositories are separate");

    let scans = store.recent_scans(10).await.expect("[lifecycle] scans");
    assert_eq!(scans.len(), 7, "[lifecycle] one scan row per scan id");
    assert_eq!(scans[0].scan_id, "scan-7", "[lifecycle] newest scan first");
    assert_eq!(scans.iter().find(|s| s.scan_id == "scan-6").map(|s| s.outcome), Some(ScanOutcome::Failed));
    assert_eq!(scans.iter().find(|s| s.scan_id == "scan-1").map(|s| s.drifts), Some(2));
}

/// A namespace the scan could not read keeps its drifts open and unseen.
pub async fn resolution_needs_coverage(sink: &dyn DriftSink, store: &dyn DriftStore) {
    if !runs("resolution_needs_coverage", sink, true) {
        return;
    }
    let shop = key("ConfigMap", "shop", "settings");
    let billing = key("ConfigMap", "billing", "settings");
    let cm = |ns| drift("ConfigMap", ns, "settings", DriftType::ConfigmapDrift, "data.mode", json!("x"));
    let both = [shop.clone(), billing.clone()];
    sink.record(&report("c-1", t(0), &both, vec![cm("shop"), cm("billing")])).await.expect("c-1");
    // The billing namespace could not be read: its drift stays open, shop's is resolved.
    let mut r2 = report("c-2", t(5), &both, vec![]);
    r2.outcome = ScanOutcome::Partial;
    r2.coverage.set(&billing.group_kind(), Some("billing"), CoverageStatus::Forbidden { message: "403".into() });
    let o = sink.record(&r2).await.expect("c-2");
    assert_eq!(o.resolved, 1, "[coverage] only the covered namespace is resolved");
    let open = open_rows(store).await;
    assert_eq!(open.len(), 1);
    assert_eq!(open[0].namespace, "billing", "[coverage] the unread namespace keeps its drift open");
    assert_eq!(open[0].last_seen, t(0), "[coverage] an unread drift is not 'seen'");
    // The scan keeps its gaps, and only its gaps, for the page and GET /scans.
    let scans = store.recent_scans(2).await.expect("[coverage] scans");
    assert_eq!(scans[0].scan_id, "c-2");
    let gaps: Vec<_> = r2.coverage.incomplete().cloned().collect();
    assert_eq!(scans[0].coverage_gaps, gaps, "[coverage] a scan keeps the pairs it could not read");
    assert!(scans[1].coverage_gaps.is_empty(), "[coverage] a complete scan has no gaps");
}

/// An object gone from Git resolves its drifts only when the whole desired state was read.
pub async fn removed_from_git(sink: &dyn DriftSink, store: &dyn DriftStore) {
    if !runs("removed_from_git", sink, true) {
        return;
    }
    let web = key("Deployment", "shop", "web");
    let d = drift(
        "Deployment",
        "shop",
        "web",
        DriftType::ImageTagDrift,
        "spec.template.spec.containers[name=web].image",
        json!("nginx:1.26"),
    );
    sink.record(&report("g-1", t(0), std::slice::from_ref(&web), vec![d])).await.expect("g-1");
    // The object is gone from Git, but a file did not parse: nothing may be resolved.
    let mut r2 = report("g-2", t(5), &[], vec![]);
    r2.desired_complete = false;
    r2.outcome = ScanOutcome::Partial;
    assert_eq!(sink.record(&r2).await.expect("g-2").resolved, 0, "[removed_from_git] incomplete desired state");
    // The whole desired state was read and the object is gone from Git: resolved.
    assert_eq!(sink.record(&report("g-3", t(10), &[], vec![])).await.expect("g-3").resolved, 1, "[removed_from_git]");
    assert!(open_rows(store).await.is_empty());
}

/// A report that did not read the whole desired state and names a few objects (a watch's batch
/// of the objects that changed) updates and resolves the drifts of those objects, and of no
/// other: not of an object of another kind, namespace or repository with the same name, nor of
/// an object Git does not hold.
pub async fn named_objects_only(sink: &dyn DriftSink, store: &dyn DriftStore) {
    if !runs("named_objects_only", sink, true) {
        return;
    }
    let web = key("Deployment", "shop", "web");
    let web_svc = key("Service", "shop", "web");
    let api = key("Deployment", "billing", "api");
    let (shop_cm, billing_cm) = (key("ConfigMap", "shop", "settings"), key("ConfigMap", "billing", "settings"));
    let replicas = |ns, name, v| drift("Deployment", ns, name, DriftType::ReplicasDrift, "spec.replicas", json!(v));
    let mode = |ns| drift("ConfigMap", ns, "settings", DriftType::ConfigmapDrift, "data.mode", json!("x"));
    let port = drift("Service", "shop", "web", DriftType::SpecDrift, "spec.ports[0].targetPort", json!(9090));
    // Not in Git: an object the scan found in the cluster only.
    let stray = drift("ConfigMap", "shop", "stray", DriftType::ConfigmapDrift, "data.mode", json!("y"));
    let all = [web.clone(), web_svc.clone(), api.clone(), shop_cm.clone(), billing_cm.clone()];
    let drifts =
        vec![replicas("shop", "web", 5), port, replicas("billing", "api", 5), mode("shop"), mode("billing"), stray];
    let o = sink.record(&report("n-1", t(0), &all, drifts)).await.expect("[named_objects_only] n-1");
    assert_eq!(o.opened, 6, "[named_objects_only] n-1 opens every drift");
    let mut elsewhere = report("n-2", t(1), std::slice::from_ref(&api), vec![replicas("billing", "api", 5)]);
    elsewhere.repository = "other-repo".to_owned();
    sink.record(&elsewhere).await.expect("[named_objects_only] n-2");
    let batch = |id: &str, at, objects: &[ResourceKey], drifts| {
        let mut r = report(id, t(at), objects, drifts);
        r.desired_complete = false;
        r
    };
    // The Deployment web changed again, api and the shop ConfigMap were put back (Git changed the
    // ConfigMap meanwhile: accepted).
    let named = [web.clone(), api.clone(), shop_cm.clone()];
    let b1 = with_digest(batch("n-3", 10, &named, vec![replicas("shop", "web", 6)]), &shop_cm, "d1");
    let o = sink.record(&b1).await.expect("[named_objects_only] n-3");
    assert_eq!((o.opened, o.updated, o.resolved), (0, 1, 2), "[named_objects_only] n-3: {o:?}");
    let mut open: Vec<(String, String, String, String, String)> = open_rows(store)
        .await
        .into_iter()
        .map(|r| {
            let value = r.cluster_value.unwrap_or_default().to_string();
            (r.repository, r.resource_kind, r.namespace, r.resource_name, value)
        })
        .collect();
    open.sort();
    let row = |repo: &str, kind: &str, ns: &str, name: &str, v: serde_json::Value| {
        (repo.to_owned(), kind.to_owned(), ns.to_owned(), name.to_owned(), v.to_string())
    };
    assert_eq!(
        open,
        vec![
            row("other-repo", "Deployment", "billing", "api", json!(5)),
            row("test-repo", "ConfigMap", "billing", "settings", json!("x")),
            row("test-repo", "ConfigMap", "shop", "stray", json!("y")),
            row("test-repo", "Deployment", "shop", "web", json!(6)),
            row("test-repo", "Service", "shop", "web", json!(9090)),
        ],
        "[named_objects_only] only the named objects' drifts were resolved, web's updated"
    );
    let resolved: std::collections::BTreeMap<String, Option<Resolution>> = all_rows(store)
        .await
        .into_iter()
        .filter(|r| r.status == DriftStatus::Resolved)
        .map(|r| (format!("{}/{}/{}", r.resource_kind, r.namespace, r.resource_name), r.resolution))
        .collect();
    assert_eq!(
        resolved.into_iter().collect::<Vec<_>>(),
        vec![
            ("ConfigMap/shop/settings".to_owned(), Some(Resolution::Accepted)),
            ("Deployment/billing/api".to_owned(), Some(Resolution::Reverted)),
        ],
        "[named_objects_only] how each went away"
    );
    // An empty batch of the service alone, deleted from the cluster: its drift went with it.
    let mut missing = drift("Service", "shop", "web", DriftType::MissingResource, "", json!(null));
    (missing.git_value, missing.cluster_value) = (None, None);
    let o = sink.record(&batch("n-4", 20, std::slice::from_ref(&web_svc), vec![missing])).await.expect("n-4");
    assert_eq!((o.opened, o.resolved), (1, 1), "[named_objects_only] n-4: {o:?}");
    let gone = all_rows(store).await.into_iter().find(|r| r.drift_type == DriftType::SpecDrift).expect("n-4 row");
    assert_eq!((gone.status, gone.resolution), (DriftStatus::Resolved, Some(Resolution::Removed)));
    assert_eq!(open_rows(store).await.len(), 5, "[named_objects_only] the rest stays open");
}

/// How each drift went away: put back in the cluster (Git's object unchanged), accepted into
/// Git (Git's object changed), or removed from Git.
pub async fn resolutions(sink: &dyn DriftSink, store: &dyn DriftStore) {
    if !runs("resolutions", sink, true) {
        return;
    }
    let (web, cm) = (key("Deployment", "shop", "web"), key("ConfigMap", "shop", "settings"));
    let replicas = |v| drift("Deployment", "shop", "web", DriftType::ReplicasDrift, "spec.replicas", json!(v));
    let mode = drift("ConfigMap", "shop", "settings", DriftType::ConfigmapDrift, "data.mode", json!("slow"));
    let both = [web.clone(), cm.clone()];
    sink.record(&report("res-1", t(0), &both, vec![replicas(5), mode])).await.expect("[resolutions] record 1");
    assert!(open_rows(store).await.iter().all(|r| r.resolution.is_none()), "[resolutions] open rows have none");
    // The cluster is put back (same digest); the ConfigMap leaves Git.
    sink.record(&report("res-2", t(60), std::slice::from_ref(&web), vec![])).await.expect("[resolutions] record 2");
    // Changed by hand again, then Git takes the change (a new digest of the Deployment).
    sink.record(&report("res-3", t(120), std::slice::from_ref(&web), vec![replicas(7)]))
        .await
        .expect("[resolutions] 3");
    let accepted = with_digest(report("res-4", t(180), std::slice::from_ref(&web), vec![]), &web, "d1");
    sink.record(&accepted).await.expect("[resolutions] record 4");
    let mut got: Vec<(String, i64, Option<Resolution>)> =
        all_rows(store).await.into_iter().map(|r| (r.resource_kind, r.detected_at.timestamp(), r.resolution)).collect();
    got.sort();
    assert_eq!(
        got,
        vec![
            ("ConfigMap".to_owned(), t(0).timestamp(), Some(Resolution::Removed)),
            ("Deployment".to_owned(), t(0).timestamp(), Some(Resolution::Reverted)),
            ("Deployment".to_owned(), t(120).timestamp(), Some(Resolution::Accepted)),
        ],
        "[resolutions] reverted, removed from Git, accepted into Git"
    );
    // Git changing while the drift stays keeps it open, and a later revert is a revert.
    sink.record(&report("res-5", t(240), std::slice::from_ref(&web), vec![replicas(9)]))
        .await
        .expect("[resolutions] 5");
    let moved = with_digest(report("res-6", t(300), std::slice::from_ref(&web), vec![replicas(9)]), &web, "d2");
    sink.record(&moved).await.expect("[resolutions] record 6");
    let back = with_digest(report("res-7", t(360), std::slice::from_ref(&web), vec![]), &web, "d2");
    sink.record(&back).await.expect("[resolutions] record 7");
    let last = all_rows(store).await.into_iter().find(|r| r.detected_at == t(240)).expect("[resolutions] row of res-5");
    assert_eq!(last.occurrences, 2, "[resolutions] seen by res-5 and res-6");
    assert_eq!(last.resolution, Some(Resolution::Reverted), "[resolutions] digest of the last sighting counts");
    // Scaled again, then the object is deleted from the cluster: the scan finds it missing, and
    // the replicas drift went away with the object; it was not reverted (issue 31, item 4).
    sink.record(&report("res-8", t(420), std::slice::from_ref(&web), vec![replicas(11)]))
        .await
        .expect("[resolutions] 8");
    let mut missing = drift("Deployment", "shop", "web", DriftType::MissingResource, "", json!(null));
    (missing.git_value, missing.cluster_value) = (None, None);
    let gone = report("res-9", t(480), std::slice::from_ref(&web), vec![missing]);
    sink.record(&gone).await.expect("[resolutions] record 9");
    let deleted = all_rows(store).await.into_iter().find(|r| r.detected_at == t(420)).expect("[resolutions] res-8");
    assert_eq!(
        (deleted.status, deleted.resolution),
        (DriftStatus::Resolved, Some(Resolution::Removed)),
        "[resolutions] a drift of an object deleted from the cluster is removed, not reverted"
    );
    let open = open_rows(store).await;
    assert_eq!(open.len(), 1, "[resolutions] the missing object is the one open drift: {open:?}");
    assert_eq!(open[0].drift_type, DriftType::MissingResource);
}

/// JSON values round-trip; every filter field selects; keyset pages are disjoint and complete.
pub async fn listing(sink: &dyn DriftSink, store: &dyn DriftStore) {
    if !runs("listing", sink, true) {
        return;
    }
    let keys =
        [key("Deployment", "shop", "web"), key("Service", "shop", "web"), key("ConfigMap", "billing", "settings")];
    let mut drifts = vec![
        drift("Deployment", "shop", "web", DriftType::ReplicasDrift, "spec.replicas", json!(3)),
        drift(
            "Deployment",
            "shop",
            "web",
            DriftType::ImageTagDrift,
            "spec.template.spec.containers[name=web].image",
            json!("a"),
        ),
        drift(
            "Service",
            "shop",
            "web",
            DriftType::ServicePortDrift,
            "spec.ports[port=80,protocol=TCP].targetPort",
            json!(81),
        ),
        drift("ConfigMap", "billing", "settings", DriftType::ConfigmapDrift, "data.mode", json!({"nested": [1, 2]})),
        drift("ConfigMap", "billing", "settings", DriftType::MetadataDrift, "metadata.labels.team", json!(null)),
    ];
    drifts[1].severity = Severity::High;
    drifts[2].severity = Severity::Critical;
    drifts[4].cluster_value = None;
    sink.record(&report("l-1", t(0), &keys, drifts)).await.expect("l-1");
    sink.record(&report(
        "l-2",
        t(10),
        &keys,
        vec![drift("Deployment", "shop", "web", DriftType::ReplicasDrift, "spec.replicas", json!(3))],
    ))
    .await
    .expect("l-2");

    let all = all_rows(store).await;
    assert_eq!(all.len(), 5);
    let cm = all.iter().find(|r| r.drift_type == DriftType::ConfigmapDrift).expect("configmap row");
    assert_eq!(cm.cluster_value, Some(json!({"nested": [1, 2]})), "[listing] JSON values round-trip");
    let label = all.iter().find(|r| r.drift_type == DriftType::MetadataDrift).expect("label row");
    assert_eq!(label.cluster_value, None, "[listing] an absent value stays absent");

    let count = |f: DriftFilter| async move {
        store.list(&f, PageRequest { limit: 1000, after: None }).await.expect("list").items.len()
    };
    assert_eq!(
        count(DriftFilter { status: Some(DriftStatus::Open), ..Default::default() }).await,
        1,
        "[listing] status"
    );
    assert_eq!(count(DriftFilter { status: Some(DriftStatus::Resolved), ..Default::default() }).await, 4);
    assert_eq!(
        count(DriftFilter { severity: Some(Severity::Critical), ..Default::default() }).await,
        1,
        "[listing] severity"
    );
    assert_eq!(
        count(DriftFilter { drift_type: Some(DriftType::ImageTagDrift), ..Default::default() }).await,
        1,
        "[listing] type"
    );
    assert_eq!(
        count(DriftFilter { namespace: Some("billing".into()), ..Default::default() }).await,
        2,
        "[listing] namespace"
    );
    assert_eq!(count(DriftFilter { kind: Some("Service".into()), ..Default::default() }).await, 1, "[listing] kind");
    assert_eq!(
        count(DriftFilter { cluster: Some("test-cluster".into()), ..Default::default() }).await,
        5,
        "[listing] cluster"
    );
    assert_eq!(count(DriftFilter { cluster: Some("nope".into()), ..Default::default() }).await, 0);
    assert_eq!(
        count(DriftFilter { repository: Some("test-repo".into()), ..Default::default() }).await,
        5,
        "[listing] repo"
    );
    assert_eq!(
        count(DriftFilter { since: Some(t(5)), ..Default::default() }).await,
        1,
        "[listing] since uses last_seen"
    );
    let combined =
        DriftFilter { namespace: Some("shop".into()), status: Some(DriftStatus::Resolved), ..Default::default() };
    assert_eq!(count(combined).await, 2, "[listing] filters combine");

    // Keyset pagination: pages of 2, newest first, no row twice, no row lost.
    let mut seen = Vec::new();
    let mut after = None;
    loop {
        let page = store.list(&DriftFilter::default(), PageRequest { limit: 2, after }).await.expect("page");
        assert!(page.items.len() <= 2, "[listing] page size");
        seen.extend(page.items.iter().map(|r| r.id));
        match page.next {
            Some(n) => after = Some(n),
            None => break,
        }
    }
    let mut sorted = seen.clone();
    sorted.sort_by(|a, b| b.cmp(a));
    sorted.dedup();
    assert_eq!(seen, sorted, "[listing] pages are disjoint and in descending id order");
    assert_eq!(seen.len(), 5, "[listing] pagination returns every row");
}

/// Counts by status, severity, type, namespace and repository; a 7-day trend; mean and
/// continuous 95th percentile of the time to resolve; filters apply.
pub async fn statistics(sink: &dyn DriftSink, store: &dyn DriftStore) {
    if !runs("statistics", sink, true) {
        return;
    }
    let keys = [key("Deployment", "shop", "web"), key("ConfigMap", "billing", "settings")];
    let mut critical = drift("Deployment", "shop", "web", DriftType::ReplicasDrift, "spec.replicas", json!(1));
    critical.severity = Severity::Critical;
    let cm = drift("ConfigMap", "billing", "settings", DriftType::ConfigmapDrift, "data.mode", json!("x"));
    let cm2 = drift("ConfigMap", "billing", "settings", DriftType::ConfigmapDrift, "data.other", json!("y"));
    let day = chrono::Duration::days(1);
    sink.record(&report("s-1", t(0) - day * 2, &keys, vec![critical.clone(), cm.clone(), cm2.clone()]))
        .await
        .expect("s-1");
    // cm2 resolved 60 s later; cm resolved 1 day later; critical stays open.
    sink.record(&report(
        "s-2",
        t(0) - day * 2 + chrono::Duration::seconds(60),
        &keys,
        vec![critical.clone(), cm.clone()],
    ))
    .await
    .expect("s-2");
    sink.record(&report("s-3", t(0) - day, &keys, vec![critical.clone()])).await.expect("s-3");
    let stats = store.stats(&DriftFilter::default(), t(0)).await.expect("[stats] stats");
    assert_eq!(stats.by_status.get("open"), Some(&1), "[stats] by status");
    assert_eq!(stats.by_status.get("resolved"), Some(&2));
    assert_eq!(stats.by_severity.get("CRITICAL"), Some(&1), "[stats] open by severity");
    assert_eq!(stats.by_severity.get("LOW"), None, "[stats] resolved drifts are not counted by severity");
    assert_eq!(stats.by_type.get("replicas_drift"), Some(&1));
    assert_eq!(stats.by_namespace.get("shop"), Some(&1));
    assert_eq!(stats.by_repository.get("test-repo"), Some(&1));
    let days: Vec<_> = stats.trend.iter().map(|d| (d.day, d.new, d.resolved)).collect();
    let today = t(0).date_naive();
    assert_eq!(days.len(), 7, "[stats] 7 days");
    assert_eq!(days[6].0, today, "[stats] the trend ends today");
    assert_eq!(days[4], (today - day * 2, 3, 1), "[stats] 3 new and 1 resolved two days ago");
    assert_eq!(days[5], (today - day, 0, 1), "[stats] 1 resolved yesterday");
    let mean = stats.mean_time_to_resolve_seconds.expect("[stats] mean");
    assert!((mean - (60.0 + 86_400.0) / 2.0).abs() < 1e-6, "[stats] mean time to resolve {mean}");
    let p95 = stats.p95_time_to_resolve_seconds.expect("[stats] p95");
    assert!((p95 - (60.0 + 0.95 * (86_400.0 - 60.0))).abs() < 1e-3, "[stats] p95 (continuous) {p95}");
    let only_shop =
        store.stats(&DriftFilter { namespace: Some("shop".into()), ..Default::default() }, t(0)).await.expect("stats");
    assert_eq!(only_shop.by_status.get("resolved"), None, "[stats] filters apply to stats");
}

async fn all_findings(store: &dyn DriftStore, filter: FindingFilter) -> Vec<StoredFinding> {
    store.findings(&filter, PageRequest { limit: 1000, after: None }).await.expect("list findings").items
}

/// Policy findings: opened, seen again (severity and message follow the latest scan), kept open
/// by a scan that could not read their object, that did not check their side or that failed,
/// resolved by one that checked their side and read the object completely, opened again as a new
/// row; never drifts, never in the drift counts.
pub async fn findings_lifecycle(sink: &dyn DriftSink, store: &dyn DriftStore) {
    if !keeps_findings("findings_lifecycle", sink) {
        return;
    }
    use finding::{Rule, Side};
    let (web, api) = (key("Deployment", "shop", "web"), key("Deployment", "billing", "api"));
    let image = |sev| {
        finding(
            "Deployment",
            "shop",
            "web",
            Rule::ImageTag,
            Side::Desired,
            sev,
            "/spec/template/spec/containers/0/image",
        )
    };
    let root = finding(
        "Deployment",
        "shop",
        "web",
        Rule::RunAsRoot,
        Side::Live,
        Severity::Medium,
        "/spec/template/spec/containers/0/securityContext/runAsNonRoot",
    );
    let api_tag = finding(
        "Deployment",
        "billing",
        "api",
        Rule::ImageTag,
        Side::Desired,
        Severity::Medium,
        "/spec/template/spec/containers/0/image",
    );
    let both = [web.clone(), api.clone()];
    let with = |mut r: ScanReport, sides: &[Side], findings: Vec<finding::Finding>| {
        r.policy_sides = sides.to_vec();
        r.findings = findings;
        r
    };
    let all_sides = [Side::Desired, Side::Live];

    let r1 = with(
        report("f-1", t(0), &both, vec![]),
        &all_sides,
        vec![image(Severity::Medium), root.clone(), api_tag.clone(), image(Severity::Medium)],
    );
    let o1 = sink.record(&r1).await.expect("[findings] record f-1");
    assert_eq!(
        (o1.findings_opened, o1.findings_updated, o1.findings_resolved),
        (3, 0, 0),
        "[findings] three new findings, one listed twice"
    );
    assert_eq!((o1.opened, o1.resolved), (0, 0), "[findings] findings are not drifts");
    assert!(all_rows(store).await.is_empty(), "[findings] no drift row");
    assert_eq!(store.recent_scans(1).await.expect("scans")[0].drifts, 0, "[findings] not counted as drifts");
    let rows = all_findings(store, FindingFilter::default()).await;
    assert_eq!(rows.len(), 3, "[findings] one row per finding");
    let row = rows.iter().find(|r| r.rule == Rule::RunAsRoot).expect("[findings] the run-as-root row");
    assert_eq!(row.fingerprint, root.fingerprint("test-cluster", "test-repo"), "[findings] fingerprint");
    assert_eq!(row.finding_type, finding::FindingType::PolicyViolation);
    assert_eq!((row.side, row.severity, row.status), (Side::Live, Severity::Medium, FindingStatus::Open));
    assert_eq!(
        (row.api_group.as_str(), row.resource_kind.as_str(), row.namespace.as_str(), row.resource_name.as_str()),
        ("apps", "Deployment", "shop", "web")
    );
    assert_eq!((row.container.as_deref(), row.path.as_str()), (Some("web"), root.path.as_str()));
    assert_eq!(row.message, root.message);
    assert_eq!((row.detected_at, row.last_seen, row.occurrences, row.resolved_at), (t(0), t(0), 1, None));

    // Seen again with another severity; billing could not be read: its finding stays open, unseen.
    let mut r2 = with(report("f-2", t(5), &both, vec![]), &all_sides, vec![image(Severity::High), root.clone()]);
    r2.outcome = ScanOutcome::Partial;
    r2.coverage.set(&api.group_kind(), Some("billing"), CoverageStatus::Failed { message: "503".into() });
    let o2 = sink.record(&r2).await.expect("[findings] record f-2");
    assert_eq!((o2.findings_opened, o2.findings_updated, o2.findings_resolved), (0, 2, 0), "[findings] f-2");
    let rows = all_findings(store, FindingFilter::default()).await;
    let web_tag = rows.iter().find(|r| r.rule == Rule::ImageTag && r.namespace == "shop").expect("web image-tag");
    assert_eq!(
        (web_tag.severity, web_tag.occurrences, web_tag.last_seen),
        (Severity::High, 2, t(5)),
        "[findings] the latest severity"
    );
    let billing = rows.iter().find(|r| r.namespace == "billing").expect("billing");
    assert_eq!(
        (billing.status, billing.last_seen),
        (FindingStatus::Open, t(0)),
        "[findings] an unread object keeps its finding, unseen"
    );

    // A scan that did not check policies resolves nothing; nor does a failed one.
    let o3 = sink.record(&report("f-3", t(10), &both, vec![])).await.expect("[findings] f-3");
    assert_eq!(o3.findings_resolved, 0, "[findings] a scan without policies resolves no finding");
    let mut failed = with(report("f-4", t(12), &both, vec![]), &all_sides, vec![]);
    failed.outcome = ScanOutcome::Failed;
    assert_eq!(
        sink.record(&failed).await.expect("f-4").findings_resolved,
        0,
        "[findings] a failed scan resolves nothing"
    );

    // Checking the desired side only resolves the desired findings, not the live one.
    let r5 = with(report("f-5", t(15), &both, vec![]), &[Side::Desired], vec![]);
    let o5 = sink.record(&r5).await.expect("[findings] f-5");
    assert_eq!(o5.findings_resolved, 2, "[findings] both desired findings are gone");
    let open = all_findings(store, FindingFilter { status: Some(FindingStatus::Open), ..Default::default() }).await;
    assert_eq!(
        open.iter().map(|r| r.rule).collect::<Vec<_>>(),
        [Rule::RunAsRoot],
        "[findings] the live side was not checked"
    );
    let resolved =
        all_findings(store, FindingFilter { status: Some(FindingStatus::Resolved), ..Default::default() }).await;
    assert!(resolved.iter().all(|r| r.resolved_at == Some(t(15))), "[findings] resolved_at is the resolving scan");
    assert!(sink.record(&r5).await.expect("[findings] replay").replayed, "[findings] a replay");
    assert_eq!(all_findings(store, FindingFilter::default()).await.len(), 3, "[findings] a replay changes nothing");

    // Another repository resolves nothing here; back again: a new row.
    let mut other = with(report("f-6", t(18), &both, vec![]), &all_sides, vec![]);
    other.repository = "other-repo".to_owned();
    assert_eq!(sink.record(&other).await.expect("f-6").findings_resolved, 0, "[findings] repositories are separate");
    let r7 = with(report("f-7", t(20), &both, vec![]), &all_sides, vec![image(Severity::Medium), root.clone()]);
    let o7 = sink.record(&r7).await.expect("[findings] f-7");
    assert_eq!(
        (o7.findings_opened, o7.findings_updated),
        (1, 1),
        "[findings] a finding that comes back opens a new row"
    );
    let rows = all_findings(store, FindingFilter::default()).await;
    assert_eq!(rows.len(), 4);
    assert_eq!(
        (rows[0].rule, rows[0].detected_at, rows[0].status),
        (Rule::ImageTag, t(20), FindingStatus::Open),
        "[findings] newest first"
    );
    let counts = store.open_findings().await.expect("[findings] open counts");
    let expected: std::collections::BTreeMap<_, _> =
        [((Rule::ImageTag, Severity::Medium), 1), ((Rule::RunAsRoot, Severity::Medium), 1)].into_iter().collect();
    assert_eq!(counts, expected, "[findings] open findings by rule and severity");
}

/// Findings listed with every filter and the keyset paging of drifts.
pub async fn findings_listing(sink: &dyn DriftSink, store: &dyn DriftStore) {
    if !keeps_findings("findings_listing", sink) {
        return;
    }
    use finding::{Rule, Side};
    let empty =
        store.findings(&FindingFilter::default(), PageRequest::default()).await.expect("[findings_listing] empty");
    assert!(empty.items.is_empty() && empty.next.is_none(), "[findings_listing] a new store lists none");
    let keys =
        [key("Deployment", "shop", "web"), key("Deployment", "billing", "api"), key("ConfigMap", "shop", "settings")];
    let path = "/spec/template/spec/hostNetwork";
    let mut r = report("l-1", t(0), &keys, vec![]);
    r.policy_sides = vec![Side::Desired, Side::Live];
    r.findings = vec![
        finding("Deployment", "shop", "web", Rule::HostNetwork, Side::Desired, Severity::High, path),
        finding("Deployment", "shop", "web", Rule::HostNetwork, Side::Live, Severity::High, path),
        finding(
            "Deployment",
            "billing",
            "api",
            Rule::ImageTag,
            Side::Live,
            Severity::Medium,
            "/spec/template/spec/containers/0/image",
        ),
        finding(
            "ConfigMap",
            "shop",
            "settings",
            Rule::RequiredLabels,
            Side::Desired,
            Severity::Low,
            "/metadata/labels/team",
        ),
        finding(
            "ConfigMap",
            "shop",
            "settings",
            Rule::RequiredLabels,
            Side::Live,
            Severity::Low,
            "/metadata/labels/team",
        ),
    ];
    sink.record(&r).await.expect("[findings_listing] record");
    let count = |f: FindingFilter| async move { all_findings(store, f).await.len() };
    assert_eq!(count(FindingFilter::default()).await, 5);
    assert_eq!(
        count(FindingFilter { rule: Some(Rule::HostNetwork), ..Default::default() }).await,
        2,
        "[findings_listing] rule"
    );
    assert_eq!(
        count(FindingFilter { severity: Some(Severity::Low), ..Default::default() }).await,
        2,
        "[findings_listing] severity"
    );
    assert_eq!(
        count(FindingFilter { side: Some(Side::Live), ..Default::default() }).await,
        3,
        "[findings_listing] side"
    );
    assert_eq!(
        count(FindingFilter { namespace: Some("billing".into()), ..Default::default() }).await,
        1,
        "[findings_listing] namespace"
    );
    assert_eq!(
        count(FindingFilter { kind: Some("ConfigMap".into()), ..Default::default() }).await,
        2,
        "[findings_listing] kind"
    );
    assert_eq!(
        count(FindingFilter { status: Some(FindingStatus::Resolved), ..Default::default() }).await,
        0,
        "[findings_listing] status"
    );
    assert_eq!(
        count(FindingFilter { repository: Some("other".into()), ..Default::default() }).await,
        0,
        "[findings_listing] repository"
    );
    assert_eq!(
        count(FindingFilter { cluster: Some("test-cluster".into()), ..Default::default() }).await,
        5,
        "[findings_listing] cluster"
    );
    let both = FindingFilter { side: Some(Side::Desired), kind: Some("Deployment".into()), ..Default::default() };
    assert_eq!(count(both).await, 1, "[findings_listing] filters combine");

    let mut seen = Vec::new();
    let mut after = None;
    loop {
        let page = store
            .findings(&FindingFilter::default(), PageRequest { limit: 2, after })
            .await
            .expect("[findings_listing] page");
        assert!(page.items.len() <= 2, "[findings_listing] a page holds at most limit rows");
        seen.extend(page.items.iter().map(|r| r.id));
        match page.next {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    assert_eq!(seen.len(), 5, "[findings_listing] the pages hold every row once");
    assert!(seen.windows(2).all(|w| w[0] > w[1]), "[findings_listing] newest first across pages");
    let bad = store.findings(&FindingFilter::default(), PageRequest { limit: 0, after: None }).await;
    assert_eq!(
        bad.map(|_| ()).map_err(|e| e.kind()),
        Err(ErrorKind::InvalidInput),
        "[findings_listing] limit 0 is invalid"
    );
}
