//! The behaviour of a store that keeps the drift history (docs/storage.md): lifecycle,
//! coverage, replays, racing writers, retention, 10,000 drifts in a report, statistics rollups
//! and agreement with the reference store over a long sequence of scans. Written once, run on
//! the SQLite and PostgreSQL stores and on `drift_model::memory::MemoryStore` where a case
//! applies, each case as a test of its own ([`store_suite!`](crate::store_suite)).
//!
//! What a case needs beyond [`DriftSink`] and [`DriftStore`] (a second handle on the same
//! database, retention, the rollup tables, a statement of an operator's own) it asks of a
//! [`StoreHarness`]. Where the store has no such thing, the harness answers `None` and the case
//! prints `skipped: <case>: <reason>` (or skips the part that needs it).

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use drift_model::finding::{Finding, Rule, Side};
use drift_model::memory::MemoryStore;
use drift_model::sink::{
    DriftFilter, DriftStats, DriftStatus, FindingStatus, PageRequest, RecordOutcome, StoredDrift, StoredFinding,
};
use drift_model::{CoverageStatus, Drift, DriftSink, DriftStore, DriftType, ErrorKind, ResourceKey, ScanOutcome};
use drift_model::{ScanReport, Severity};

use crate::fixtures::{key, report, stats_filters, t};

/// What the store suite needs of a backend beyond the two traits.
#[async_trait]
pub trait StoreHarness: Send + Sync {
    /// The store under test.
    type Store: DriftSink + DriftStore + drift_model::ChangeIdentities + 'static;

    /// A new, empty store on a database of its own.
    async fn fresh(&self) -> Arc<Self::Store>;

    /// A new, empty store that deletes resolved drifts and scans older than `days` days;
    /// `None` when the store has no retention.
    async fn with_retention(&self, days: u32) -> Option<Arc<Self::Store>>;

    /// Another handle, with connections of its own, on the database of `store`.
    async fn reopen(&self, store: &Arc<Self::Store>) -> Arc<Self::Store>;

    /// Records `a` and `b` at once through two handles on one new database, and returns both
    /// outcomes and a third handle. A backend that can hold both writers at their first
    /// statement and let them go together (PostgreSQL, with a lock) does it here.
    async fn race(&self, a: ScanReport, b: ScanReport) -> (RecordOutcome, RecordOutcome, Arc<Self::Store>) {
        let store = self.fresh().await;
        let (x, y) = (self.reopen(&store).await, self.reopen(&store).await);
        let (ta, tb) =
            (tokio::spawn(async move { x.record(&a).await }), tokio::spawn(async move { y.record(&b).await }));
        let (oa, ob) = (ta.await.expect("writer a"), tb.await.expect("writer b"));
        (oa.expect("record a"), ob.expect("record b"), store)
    }

    /// The rows of the drift history counted by the database itself (not through
    /// [`DriftStore::list`]); `None` for a store without one.
    async fn count_rows(&self, store: &Self::Store) -> Option<i64>;

    /// Runs a statement of an operator's own and returns the driver's error as text; `None`
    /// for a store without SQL.
    async fn execute(&self, store: &Self::Store, sql: &'static str) -> Option<Result<u64, String>>;

    /// The name of the database object that refuses a second open row per fingerprint, as its
    /// error message says it.
    fn open_row_constraint(&self) -> &'static str;

    /// Checks that the statistics rollups hold exactly what the rows add up to, and that no
    /// count is negative; `false` when the store keeps no rollups.
    async fn check_rollups(&self, store: &Self::Store) -> bool;

    /// Statistics computed from the rows, without the rollups; `None` when the store has no
    /// rollups to compare them with.
    async fn stats_from_rows(
        &self,
        store: &Self::Store,
        filter: &DriftFilter,
        now: DateTime<Utc>,
    ) -> Option<DriftStats>;

    /// A retention pass at `now`: resolved drifts and scans deleted; `None` without retention.
    async fn prune(&self, store: &Self::Store, now: DateTime<Utc>) -> Option<(u64, u64)>;
}

/// [`StoreHarness::race`] without a lock: two handles on a fresh store, both spawned at once.
pub async fn race<H: StoreHarness + ?Sized>(
    harness: &H,
    a: ScanReport,
    b: ScanReport,
) -> (RecordOutcome, RecordOutcome, Arc<H::Store>) {
    let store = harness.fresh().await;
    let (x, y) = (harness.reopen(&store).await, harness.reopen(&store).await);
    let (ta, tb) = (tokio::spawn(async move { x.record(&a).await }), tokio::spawn(async move { y.record(&b).await }));
    let (oa, ob) = (ta.await.expect("writer a"), tb.await.expect("writer b"));
    (oa.expect("record a"), ob.expect("record b"), store)
}

/// Expands to one test per case of [`crate::store`], named after the case. `$harness` is an
/// expression of a type implementing [`StoreHarness`], evaluated in each test. Call it inside a
/// module (`mod store { drift_testkit::store_suite!(common::harness()); }`).
#[macro_export]
macro_rules! store_suite {
    ($harness:expr) => {
        $crate::__store_cases!(
            $harness;
            1 => a_persistent_drift_seen_in_three_scans_is_one_row_with_occurrences_3,
            1 => a_fixed_drift_is_resolved_with_resolved_at_and_a_drift_that_comes_back_opens_a_new_row,
            1 => a_scan_whose_read_of_a_namespace_failed_resolves_nothing_in_that_namespace,
            1 => replaying_a_scan_id_changes_nothing,
            1 => the_database_itself_refuses_a_second_open_row_per_fingerprint,
            1 => two_writers_racing_on_the_same_drift_leave_one_open_row,
            1 => ten_thousand_drifts_in_one_report,
            1 => retention_deletes_old_resolved_drifts_and_scans_but_never_open_ones,
            1 => agrees_with_the_reference_store_over_many_scans,
            1 => a_drift_whose_severity_changes_moves_between_rollup_keys,
            4 => concurrent_writers_keep_the_rollups_exact,
            1 => the_person_behind_a_change_is_kept_for_that_change_only,
            1 => the_fleet_overview_counts_the_open_drifts_of_each_cluster_worst_first
        );
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __store_cases {
    ($harness:expr; $($threads:literal => $case:ident),+) => {
        $(
            #[test]
            fn $case() {
                $crate::__private::run($threads, async {
                    let harness = $harness;
                    $crate::store::$case(&harness).await;
                });
            }
        )+
    };
}

fn skipped(case: &str, reason: &str) {
    println!("skipped: {case}: {reason}");
}

/// Every row, newest first, page after page.
pub async fn rows(store: &dyn DriftStore) -> Vec<StoredDrift> {
    let mut out = Vec::new();
    let mut after = None;
    loop {
        let page = store.list(&DriftFilter::default(), PageRequest { limit: 1000, after }).await.expect("list");
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

/// A replicas drift of a Deployment, with this live value.
pub fn replicas(namespace: &str, name: &str, live: i64) -> Drift {
    crate::fixtures::drift("Deployment", namespace, name, DriftType::ReplicasDrift, "spec.replicas", live.into())
}

/// The key of a Deployment.
pub fn deployment(namespace: &str, name: &str) -> ResourceKey {
    key("Deployment", namespace, name)
}

/// `n` Deployments spread over the namespaces `shop`, `billing` and `ops`.
pub fn world(n: usize) -> Vec<ResourceKey> {
    (0..n).map(|i| deployment(["shop", "billing", "ops"][i % 3], &format!("app{i}"))).collect()
}

/// A pseudo-random sequence (a linear congruential generator), the same on every run.
pub fn sequence(seed: u64) -> impl FnMut(u64) -> u64 {
    let mut state = seed;
    move |n| {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (state >> 33) % n
    }
}

/// Replicas drifts on about half of `desired`, with random severities.
pub fn random_drifts(desired: &[ResourceKey], next: &mut impl FnMut(u64) -> u64) -> Vec<Drift> {
    desired
        .iter()
        .filter_map(|k| {
            let mut d = replicas(k.namespace.as_deref().unwrap_or_default(), &k.name, 3);
            d.severity = Severity::ALL[next(4) as usize];
            (next(2) == 0).then_some(d)
        })
        .collect()
}

/// Random policy findings over `desired` (image-tag and run-as-root, each side, random
/// severities), on random sides: none checked (and no finding), one, or both.
pub fn random_findings(desired: &[ResourceKey], next: &mut impl FnMut(u64) -> u64) -> (Vec<Side>, Vec<Finding>) {
    let sides = match next(4) {
        0 => vec![],
        1 => vec![Side::Desired],
        2 => vec![Side::Live],
        _ => vec![Side::Desired, Side::Live],
    };
    let mut findings = Vec::new();
    for k in desired {
        for side in &sides {
            for (rule, path) in [
                (Rule::ImageTag, "/spec/template/spec/containers/0/image"),
                (Rule::RunAsRoot, "/spec/template/spec/containers/0/securityContext/runAsNonRoot"),
            ] {
                if next(3) == 0 {
                    let ns = k.namespace.as_deref().unwrap_or_default();
                    let severity = Severity::ALL[next(4) as usize];
                    findings.push(crate::fixtures::finding("Deployment", ns, &k.name, rule, *side, severity, path));
                }
            }
        }
    }
    (sides, findings)
}

/// Checks, for every filter of [`stats_filters`], that the statistics of `store` (from the
/// rollups unless the filter names `since`) equal those computed from its rows; `false` when
/// the store has no rollups.
pub async fn check_stats<H: StoreHarness>(harness: &H, store: &H::Store, now: DateTime<Utc>) -> bool {
    for filter in stats_filters() {
        let Some(rows) = harness.stats_from_rows(store, &filter, now).await else { return false };
        assert_eq!(store.stats(&filter, now).await.expect("stats"), rows, "{filter:?} at {now}");
    }
    true
}

/// After a migration built the rollups from an existing history (with resolved drifts): the
/// rollups hold what the rows add up to, and statistics from them equal statistics from the
/// rows for every filter.
pub async fn check_backfill<H: StoreHarness>(harness: &H, store: &H::Store, now: DateTime<Utc>) {
    assert!(harness.check_rollups(store).await, "the store keeps rollups");
    let rows = harness.stats_from_rows(store, &DriftFilter::default(), now).await.expect("stats from the rows");
    assert!(rows.by_status.get("resolved").is_some_and(|n| *n > 0), "{rows:?}");
    assert!(check_stats(harness, store, now).await);
}

/// The rows of `a` and `b` but their ids are the same, in the same order.
/// Every finding of a store, newest first, without its id.
async fn findings_but_ids(store: &dyn DriftStore) -> Vec<StoredFinding> {
    let page = PageRequest { limit: PageRequest::MAX_LIMIT, after: None };
    let items = store.findings(&Default::default(), page).await.expect("findings").items;
    items.into_iter().map(|f| StoredFinding { id: 0, ..f }).collect()
}

fn assert_same_rows(a: Vec<StoredDrift>, b: Vec<StoredDrift>) {
    let strip = |rows: Vec<StoredDrift>| {
        rows.into_iter()
            .map(|mut r| {
                r.id = 0;
                r
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(a.len(), b.len());
    assert_eq!(strip(a), strip(b), "same rows in the same order");
}

/// A drift seen by three scans is one row with `occurrences` 3, its first and last times, and
/// the latest cluster value and revert patch.
pub async fn a_persistent_drift_seen_in_three_scans_is_one_row_with_occurrences_3<H: StoreHarness>(h: &H) {
    let store = h.fresh().await;
    let caps = store.capabilities();
    assert!(caps.readable && caps.resolves, "a store says it can be read back and resolves drifts");
    let web = [deployment("shop", "web")];
    let with_revert = |live: i64| {
        let mut d = replicas("shop", "web", live);
        d.revert = Some(drift_model::remedy::Revert {
            patch: serde_json::from_value(serde_json::json!([{"op": "test", "path": "/spec/replicas", "value": live},
                {"op": "replace", "path": "/spec/replicas", "value": 3}]))
            .unwrap(),
            command: format!("kubectl patch deployment.v1.apps web --namespace shop ... {live}"),
        });
        d
    };
    for (i, live) in [5, 6, 7].into_iter().enumerate() {
        store.record(&report(&format!("s{i}"), t(i as i64 * 5), &web, vec![with_revert(live)])).await.unwrap();
    }
    let rows = rows(&*store).await;
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].occurrences, 3);
    assert_eq!((rows[0].detected_at, rows[0].last_seen), (t(0), t(10)));
    assert_eq!(rows[0].cluster_value, Some(7.into()), "the latest cluster value is kept");
    assert_eq!(rows[0].revert, with_revert(7).revert, "the latest revert patch is kept");
    if let Some(n) = h.count_rows(&store).await {
        assert_eq!(n, 1, "one row in the table itself");
    }
}

/// The identity joined from the audit log reads back with the drift (list and get) while the
/// drift's `changed_at` is the change it was joined for; a later change of the field reads
/// back without it until it is joined again. An unknown drift id is `false`.
pub async fn the_person_behind_a_change_is_kept_for_that_change_only<H: StoreHarness>(h: &H) {
    use drift_model::ChangeIdentities as _;
    let store = h.fresh().await;
    let web = [deployment("shop", "web")];
    let changed = |live: i64, at: i64| {
        let mut d = replicas("shop", "web", live);
        d.changed_by = Some("kubectl-scale".into());
        d.changed_at = Some(t(at));
        d
    };
    store.record(&report("s0", t(10), &web, vec![changed(5, 1)])).await.unwrap();
    let id = rows(&*store).await[0].id;
    assert_eq!(rows(&*store).await[0].changed_by_user, None, "nothing joined yet");
    let alice = drift_model::ChangeIdentity {
        username: "alice".into(),
        groups: vec!["dev".into(), "system:authenticated".into()],
        source_ips: vec!["10.0.0.7".into()],
        user_agent: Some("kubectl/v1.32.0 (linux/amd64) kubernetes/70d3cc9".into()),
        verb: "patch".into(),
        audit_id: "6c6f0d5e-0c4e-4b5c-9f8e-0d1c2b3a4f5e".into(),
        request_time: t(1),
        changed_at: t(1),
    };
    assert!(store.identify(id, &alice).await.unwrap());
    assert!(!store.identify(id + 1000, &alice).await.unwrap(), "no such drift");
    assert_eq!(rows(&*store).await[0].changed_by_user.as_ref(), Some(&alice));
    assert_eq!(store.get(id).await.unwrap().changed_by_user.as_ref(), Some(&alice));
    // The same change seen again keeps it.
    store.record(&report("s1", t(20), &web, vec![changed(5, 1)])).await.unwrap();
    assert_eq!(store.get(id).await.unwrap().changed_by_user.as_ref(), Some(&alice));
    // Somebody changes the field again: alice is not the person behind this change.
    store.record(&report("s2", t(30), &web, vec![changed(6, 25)])).await.unwrap();
    let row = store.get(id).await.unwrap();
    assert_eq!((row.changed_at, row.changed_by_user), (Some(t(25)), None));
}

/// A drift a scan no longer finds is resolved at that scan's time; when it comes back, a new open
/// row of the same fingerprint is opened and the resolved one stays as history.
pub async fn a_fixed_drift_is_resolved_with_resolved_at_and_a_drift_that_comes_back_opens_a_new_row<H: StoreHarness>(
    h: &H,
) {
    let store = h.fresh().await;
    let web = [deployment("shop", "web")];
    store.record(&report("s1", t(0), &web, vec![replicas("shop", "web", 5)])).await.unwrap();
    let fixed = store.record(&report("s2", t(5), &web, vec![])).await.unwrap();
    assert_eq!(fixed.resolved, 1);
    let first = rows(&*store).await.pop().unwrap();
    assert_eq!((first.status, first.resolved_at), (DriftStatus::Resolved, Some(t(5))));

    let back = store.record(&report("s3", t(10), &web, vec![replicas("shop", "web", 4)])).await.unwrap();
    assert_eq!((back.opened, back.updated), (1, 0));
    let all = rows(&*store).await;
    assert_eq!(all.len(), 2, "a new row, the old one kept as history");
    assert_eq!(all[0].fingerprint, all[1].fingerprint, "same identity");
    assert_eq!((all[0].status, all[0].detected_at, all[0].occurrences), (DriftStatus::Open, t(10), 1));
    assert_eq!((all[1].status, all[1].resolved_at), (DriftStatus::Resolved, Some(t(5))));
}

/// A partial scan resolves only where its coverage is complete (a namespace that failed to be
/// read keeps its open drifts untouched), and a failed scan resolves nothing.
pub async fn a_scan_whose_read_of_a_namespace_failed_resolves_nothing_in_that_namespace<H: StoreHarness>(h: &H) {
    let store = h.fresh().await;
    let desired = [deployment("shop", "web"), deployment("billing", "api"), deployment("billing", "worker")];
    let all = vec![replicas("shop", "web", 2), replicas("billing", "api", 2), replicas("billing", "worker", 2)];
    store.record(&report("s1", t(0), &desired, all)).await.unwrap();

    let mut partial = report("s2", t(5), &desired, vec![]);
    partial.outcome = ScanOutcome::Partial;
    let gk = desired[1].group_kind();
    partial.coverage.set(&gk, Some("billing"), CoverageStatus::Failed { message: "timeout".into() });
    let outcome = store.record(&partial).await.unwrap();
    assert_eq!(outcome.resolved, 1, "only shop was read");
    let still_open = open(&*store).await;
    let mut names: Vec<_> = still_open.iter().map(|r| (r.namespace.as_str(), r.resource_name.as_str())).collect();
    names.sort();
    assert_eq!(names, [("billing", "api"), ("billing", "worker")]);
    assert!(still_open.iter().all(|r| r.last_seen == t(0) && r.occurrences == 1), "not seen by the failed read");

    // A scan that failed as a whole resolves nothing anywhere.
    let mut failed = report("s3", t(10), &desired, vec![]);
    failed.outcome = ScanOutcome::Failed;
    assert_eq!(store.record(&failed).await.unwrap().resolved, 0);
    assert_eq!(open(&*store).await.len(), 2);
}

/// Recording a scan id a second time, with the same report or another, is a replay that changes
/// no row and adds no scan.
pub async fn replaying_a_scan_id_changes_nothing<H: StoreHarness>(h: &H) {
    let store = h.fresh().await;
    let web = [deployment("shop", "web")];
    let r = report("s1", t(0), &web, vec![replicas("shop", "web", 5)]);
    store.record(&r).await.unwrap();
    let before = rows(&*store).await;
    let again = store.record(&r).await.unwrap();
    assert!(again.replayed);
    assert_eq!((again.opened, again.updated, again.resolved), (0, 0, 0));
    assert_eq!(rows(&*store).await, before);
    // Even a report with the same id and other content is a replay.
    let other = report("s1", t(5), &web, vec![]);
    assert!(store.record(&other).await.unwrap().replayed);
    assert_eq!(rows(&*store).await, before);
    assert_eq!(store.recent_scans(10).await.unwrap().len(), 1);
}

/// The database's own constraint ([`StoreHarness::open_row_constraint`]) refuses a second open
/// row of one fingerprint, written by SQL behind the store's back; skipped for a store without SQL.
pub async fn the_database_itself_refuses_a_second_open_row_per_fingerprint<H: StoreHarness>(h: &H) {
    let store = h.fresh().await;
    let web = [deployment("shop", "web")];
    store.record(&report("s1", t(0), &web, vec![replicas("shop", "web", 5)])).await.unwrap();
    let copy = "INSERT INTO drifts (detected_at, last_seen, repository, resource_kind, resource_name, drift_type, \
         severity, decision_source, recommended_action, cluster, fingerprint, classification) \
         SELECT detected_at, last_seen, repository, resource_kind, resource_name, drift_type, severity, \
         decision_source, recommended_action, cluster, fingerprint, classification FROM drifts";
    let Some(result) = h.execute(&store, copy).await else {
        return skipped("the_database_itself_refuses_a_second_open_row_per_fingerprint", "the store has no SQL");
    };
    let dup = result.expect_err("a second open row of the same fingerprint");
    assert!(dup.contains(h.open_row_constraint()), "{dup}");
}

/// Two scanners recording the same new drift at once ([`StoreHarness::race`]) leave one open
/// row: one writer opens it, the other sees it again.
pub async fn two_writers_racing_on_the_same_drift_leave_one_open_row<H: StoreHarness>(h: &H) {
    let web = [deployment("shop", "web")];
    let ra = report("scanner-a", t(0), &web, vec![replicas("shop", "web", 5)]);
    let rb = report("scanner-b", t(0), &web, vec![replicas("shop", "web", 5)]);
    let (oa, ob, store) = h.race(ra, rb).await;
    let mut outcomes = [(oa.opened, oa.updated), (ob.opened, ob.updated)];
    outcomes.sort();
    assert_eq!(outcomes, [(0, 1), (1, 0)], "one writer opened the drift, the other saw it again");
    let all = rows(&*store).await;
    assert_eq!(all.len(), 1, "{all:#?}");
    assert_eq!((all[0].status, all[0].occurrences), (DriftStatus::Open, 2));
}

/// 10,000 drifts in one report are opened, then 9,900 seen again and 100 resolved by the next,
/// with statistics that agree.
pub async fn ten_thousand_drifts_in_one_report<H: StoreHarness>(h: &H) {
    let store = h.fresh().await;
    let desired: Vec<_> = (0..10_000).map(|i| deployment(&format!("ns{}", i % 50), &format!("app{i}"))).collect();
    let drifts: Vec<_> =
        desired.iter().map(|k| replicas(k.namespace.as_deref().unwrap_or_default(), &k.name, 3)).collect();
    let o = store.record(&report("s1", t(0), &desired, drifts.clone())).await.unwrap();
    assert_eq!(o.opened, 10_000);
    let o = store.record(&report("s2", t(5), &desired, drifts[100..].to_vec())).await.unwrap();
    assert_eq!((o.opened, o.updated, o.resolved), (0, 9_900, 100));
    let stats = store.stats(&DriftFilter::default(), t(5)).await.unwrap();
    assert_eq!(stats.by_status.get("open"), Some(&9_900));
    assert_eq!(stats.by_namespace.len(), 50);
    assert_eq!(stats.mean_time_to_resolve_seconds, Some(300.0));
}

/// Retention of 30 days deletes drifts resolved longer ago and old scans, never an open drift
/// however old; skipped for a store without retention.
pub async fn retention_deletes_old_resolved_drifts_and_scans_but_never_open_ones<H: StoreHarness>(h: &H) {
    let Some(store) = h.with_retention(30).await else {
        return skipped(
            "retention_deletes_old_resolved_drifts_and_scans_but_never_open_ones",
            "the store keeps no retention",
        );
    };
    let desired = [deployment("shop", "web"), deployment("shop", "api")];
    let day = chrono::Duration::days(1);
    store
        .record(&report("s1", t(0), &desired, vec![replicas("shop", "web", 1), replicas("shop", "api", 1)]))
        .await
        .unwrap();
    store.record(&report("s2", t(0) + day, &desired, vec![replicas("shop", "api", 1)])).await.unwrap();
    // 40 days later api is still drifting; web's drift was resolved 39 days ago.
    let o = store.record(&report("s3", t(0) + day * 40, &desired, vec![replicas("shop", "api", 1)])).await.unwrap();
    assert_eq!(o.updated, 1);
    let all = rows(&*store).await;
    assert_eq!(all.len(), 1, "the old resolved drift is gone");
    assert_eq!((all[0].resource_name.as_str(), all[0].status), ("api", DriftStatus::Open));
    assert_eq!(all[0].detected_at, t(0), "an open drift is kept however old");
    let scans: Vec<String> = store.recent_scans(10).await.unwrap().into_iter().map(|s| s.scan_id).collect();
    assert_eq!(scans, ["s3"]);
    assert_eq!(h.prune(&store, t(0) + day * 40).await, Some((0, 0)), "nothing more to delete");
}

/// A deterministic sequence of scans over a small world, recorded into the store and into the
/// reference store: outcomes, rows (but ids), listings and statistics agree, and so do the
/// policy findings (random findings on random sides, policies checked or not: the counts of
/// each write, the rows but ids, the open counts). The same reports
/// go into a store whose retention deletes history as the sequence goes on; the rollups of
/// both stay exact after every scan, and statistics from them equal statistics from the rows.
pub async fn agrees_with_the_reference_store_over_many_scans<H: StoreHarness>(h: &H) {
    let Some(kept) = h.with_retention(1).await else {
        return skipped("agrees_with_the_reference_store_over_many_scans", "the store keeps no retention");
    };
    let store = h.fresh().await;
    let memory = MemoryStore::new();
    let desired = world(12);
    let mut next = sequence(0x5eed);
    let mut pick = sequence(0xf1d5);
    for s in 0..40 {
        let mut drifts = Vec::new();
        for k in &desired {
            for (ty, path) in [(DriftType::ReplicasDrift, "spec.replicas"), (DriftType::ImageTagDrift, "spec.image")] {
                if next(3) == 0 {
                    let ns = k.namespace.as_deref().unwrap_or_default();
                    let mut d = crate::fixtures::drift("Deployment", ns, &k.name, ty, path, (next(5) as i64).into());
                    d.severity = Severity::ALL[next(4) as usize];
                    drifts.push(d);
                }
            }
        }
        let mut r = report(&format!("s{s}"), t(s * 97), &desired, drifts);
        match next(6) {
            0 => r.outcome = ScanOutcome::Failed,
            1 => {
                r.outcome = ScanOutcome::Partial;
                let gk = desired[0].group_kind();
                r.coverage.set(&gk, Some("ops"), CoverageStatus::Forbidden { message: "403".into() });
            }
            _ => {}
        }
        if next(4) == 0 {
            r.repository = "infra".into();
        }
        (r.policy_sides, r.findings) = random_findings(&desired, &mut pick);
        let (a, b) = (store.record(&r).await.unwrap(), memory.record(&r).await.unwrap());
        // Every drift opened or resolved is one event (changed and reopened drifts add more),
        // and the reference store writes the same events as the SQL store.
        assert!(a.events >= a.opened + a.resolved, "events of scan {s}: {a:?}");
        assert_eq!(a, b, "outcome of scan {s}");
        kept.record(&r).await.unwrap();
        for store in [&store, &kept] {
            assert!(h.check_rollups(store).await, "a store with retention keeps rollups");
            assert!(check_stats(h, store, r.finished_at).await);
        }
    }
    assert!(rows(&*kept).await.len() < rows(&*store).await.len(), "retention deleted some history");
    assert_same_rows(rows(&*store).await, rows(&memory).await);
    if store.capabilities().findings {
        let (a, b) = (findings_but_ids(&*store).await, findings_but_ids(&memory).await);
        assert!(a.iter().any(|f| f.status == FindingStatus::Resolved), "the sequence resolves findings");
        assert_eq!(a, b, "the same findings in the same order");
        assert_eq!(store.open_findings().await.unwrap(), memory.open_findings().await.unwrap());
        assert!(findings_but_ids(&*kept).await.len() < a.len(), "retention deleted resolved findings");
    }
    for filter in stats_filters() {
        for now in [t(40 * 97), t(40 * 97) + chrono::Duration::days(3)] {
            let (a, b) = (store.stats(&filter, now).await.unwrap(), memory.stats(&filter, now).await.unwrap());
            assert_eq!(a.by_status, b.by_status, "{filter:?}");
            assert_eq!(
                (&a.by_severity, &a.by_type, &a.by_namespace, &a.by_repository),
                (&b.by_severity, &b.by_type, &b.by_namespace, &b.by_repository)
            );
            assert_eq!(a.trend, b.trend);
            let close = |x: Option<f64>, y: Option<f64>| match (x, y) {
                (Some(x), Some(y)) => (x - y).abs() < 1e-6,
                (x, y) => x == y,
            };
            assert!(close(a.mean_time_to_resolve_seconds, b.mean_time_to_resolve_seconds), "{a:?} {b:?}");
            assert!(close(a.p95_time_to_resolve_seconds, b.p95_time_to_resolve_seconds), "{a:?} {b:?}");
        }
        let (a, b) = (
            store.list(&filter, PageRequest { limit: 7, after: None }).await.unwrap(),
            memory.list(&filter, PageRequest { limit: 7, after: None }).await.unwrap(),
        );
        assert_eq!(a.items.len(), b.items.len());
        assert_eq!(a.next.is_some(), b.next.is_some());
    }
}

/// A drift whose severity changes between scans (a configuration override) is counted under its
/// new severity in the statistics, and no longer under the old one.
pub async fn a_drift_whose_severity_changes_moves_between_rollup_keys<H: StoreHarness>(h: &H) {
    let store = h.fresh().await;
    let web = [deployment("shop", "web")];
    let mut d = replicas("shop", "web", 5);
    d.severity = Severity::High;
    store.record(&report("s1", t(0), &web, vec![d.clone()])).await.unwrap();
    d.severity = Severity::Critical;
    store.record(&report("s2", t(5), &web, vec![d])).await.unwrap();
    let stats = store.stats(&DriftFilter::default(), t(5)).await.unwrap();
    assert_eq!(stats.by_severity.into_iter().collect::<Vec<_>>(), [("CRITICAL".to_owned(), 1)]);
    let high = DriftFilter { severity: Some(Severity::High), ..Default::default() };
    assert!(store.stats(&high, t(5)).await.unwrap().by_status.is_empty(), "nothing left under HIGH");
    if !h.check_rollups(&store).await {
        skipped(
            "a_drift_whose_severity_changes_moves_between_rollup_keys",
            "the rollup check: the store keeps no rollups",
        );
    }
}

/// Four handles on one database record overlapping reports of the same cluster and repository
/// at once (they upsert the same drifts, resolve each other's, and add to the same rollup
/// keys): whatever the interleaving, the rollups hold what the rows add up to.
pub async fn concurrent_writers_keep_the_rollups_exact<H: StoreHarness>(h: &H) {
    let store = h.fresh().await;
    let desired = world(18);
    let mut tasks = Vec::new();
    for w in 0..4u64 {
        let writer = h.reopen(&store).await;
        let desired = desired.clone();
        tasks.push(tokio::spawn(async move {
            let mut next = sequence(w + 1);
            let mut results = Vec::new();
            for s in 0..8 {
                let mut r =
                    report(&format!("w{w}-s{s}"), t(s * 10 + w as i64), &desired, random_drifts(&desired, &mut next));
                if next(3) == 0 {
                    r.outcome = ScanOutcome::Partial;
                    let gk = desired[0].group_kind();
                    r.coverage.set(&gk, Some("ops"), CoverageStatus::Forbidden { message: "403".into() });
                }
                results.push(writer.record(&r).await);
            }
            results
        }));
    }
    let mut recorded = 0;
    for task in tasks {
        for result in task.await.unwrap() {
            match result {
                Ok(_) => recorded += 1,
                // A deadlock, or a database busy through every retry: the report is not recorded.
                Err(e) => assert!(e.kind() == ErrorKind::Conflict && e.is_temporary(), "{e}"),
            }
        }
    }
    assert!(recorded >= 16, "most reports were recorded ({recorded} of 32)");
    let store = h.reopen(&store).await;
    if !(h.check_rollups(&store).await && check_stats(h, &store, t(80)).await) {
        skipped("concurrent_writers_keep_the_rollups_exact", "the rollup check: the store keeps no rollups");
    }
}

/// `by_cluster` of the statistics (the fleet overview): the open drifts of each cluster by
/// severity and namespace, worst cluster first (most CRITICAL, then HIGH, then open), resolved
/// drifts left out; the same from the rollups and from the rows (a filter with `since`), and
/// for a filter on one cluster.
pub async fn the_fleet_overview_counts_the_open_drifts_of_each_cluster_worst_first<H: StoreHarness>(h: &H) {
    let store = h.fresh().await;
    let with = |mut d: Drift, severity: Severity| {
        d.severity = severity;
        d
    };
    let desired = [deployment("shop", "web"), deployment("shop", "api"), deployment("ops", "db")];
    let scan = |cluster: &str, id: &str, at, drifts| {
        let mut r = report(id, at, &desired, drifts);
        r.cluster = cluster.to_owned();
        r
    };
    // edge: 3 open, none CRITICAL; prod: 1 CRITICAL open; lab: 1 HIGH, then its drift resolved
    // and a LOW one opened.
    let edge = vec![
        with(replicas("shop", "web", 2), Severity::High),
        with(replicas("shop", "api", 2), Severity::Low),
        with(replicas("ops", "db", 2), Severity::High),
    ];
    store.record(&scan("edge", "e1", t(0), edge)).await.unwrap();
    store.record(&scan("prod", "p1", t(1), vec![with(replicas("ops", "db", 9), Severity::Critical)])).await.unwrap();
    store.record(&scan("lab", "l1", t(2), vec![with(replicas("shop", "web", 4), Severity::High)])).await.unwrap();
    store.record(&scan("lab", "l2", t(3), vec![with(replicas("shop", "api", 4), Severity::Low)])).await.unwrap();

    let stats = store.stats(&DriftFilter::default(), t(10)).await.unwrap();
    let fleet: Vec<(&str, i64)> = stats.by_cluster.iter().map(|c| (c.cluster.as_str(), c.open)).collect();
    assert_eq!(fleet, [("prod", 1), ("edge", 3), ("lab", 1)], "worst first; lab's resolved drift left out");
    let edge = &stats.by_cluster[1];
    assert_eq!(edge.by_severity, [("HIGH".to_owned(), 2), ("LOW".to_owned(), 1)].into());
    assert_eq!(edge.by_namespace, [("ops".to_owned(), 1), ("shop".to_owned(), 2)].into());
    assert_eq!(stats.by_cluster[2].by_severity, [("LOW".to_owned(), 1)].into());

    let from_rows = store.stats(&DriftFilter { since: Some(t(-60)), ..DriftFilter::default() }, t(10)).await.unwrap();
    assert_eq!(from_rows.by_cluster, stats.by_cluster, "the rows agree with the rollups");
    let one =
        store.stats(&DriftFilter { cluster: Some("edge".into()), ..DriftFilter::default() }, t(10)).await.unwrap();
    assert_eq!(one.by_cluster, [stats.by_cluster[1].clone()]);
    let none = store
        .stats(&DriftFilter { status: Some(DriftStatus::Resolved), ..DriftFilter::default() }, t(10))
        .await
        .unwrap();
    assert!(none.by_cluster.is_empty(), "resolved drifts are not in the fleet overview: {:?}", none.by_cluster);
}
