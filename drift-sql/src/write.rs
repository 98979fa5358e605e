//! What a SQL store provides ([`SqlStore`]), and the rules of a write both stores share: the
//! drifts of a report, which open drifts a report resolves, the retry loop of `record`,
//! retention's cutoff.

use std::collections::{HashMap, HashSet};
use std::future::Future;

use chrono::{DateTime, NaiveDate, Utc};
use drift_model::act::{EventKind, Previous};
use drift_model::sink::{DriftFilter, DriftStats, DriftStatus, RecordOutcome};
use drift_model::{Drift, Resolution, ResourceKey, Result, ScanOutcome, ScanReport, Severity};
use serde::{Deserialize, Serialize};
use sqlx::{Database, Pool, Transaction};
use tracing::Instrument;

use crate::Dialect;
use crate::error::SqlError;

/// How many times a report is written when the write failed in a way worth retrying (a lost
/// connection, a deadlock, a busy database). The write is one transaction and recording is
/// idempotent per scan id, so a retry is always safe.
pub const ATTEMPTS: usize = 3;

/// What a retention pass deleted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PruneOutcome {
    /// Resolved drifts deleted.
    pub drifts: u64,
    /// Resolved policy findings deleted.
    #[serde(default)]
    pub findings: u64,
    /// Scan rows deleted.
    pub scans: u64,
}

/// The connection type of a dialect's driver.
pub type Connection<D> = <<D as Dialect>::Db as Database>::Connection;

/// The statistics of a SQL store: what differs between the stores' statistics queries. The
/// shared part ([`Sql::stats_from_rollups`](crate::Sql::stats_from_rollups), [`Sql::p95`](crate::Sql::p95)) calls it.
#[async_trait::async_trait]
pub trait SqlStats: Send + Sync {
    /// The database.
    type Dialect: Dialect;
    /// Time to resolve in whole milliseconds, truncated (as the reference store computes it):
    /// the key of the `drifts_resolved_ttr` index the percentile reads.
    const TTR_MS: &'static str;
    /// Where the percentile reads the times to resolve for this filter (`drifts`, with a hint
    /// for the planner where it needs one).
    fn ttr_source(filter: &DriftFilter) -> &'static str;
    /// The UTC day of a time column as `YYYY-MM-DD` text, in SQL.
    fn day_of(column: &str) -> String;
    /// Starts a read transaction: every figure of the statistics comes from one snapshot.
    /// `whole_rows`: the statistics aggregate the rows of `drifts`, not the rollups.
    async fn begin_read(
        &self,
        whole_rows: bool,
    ) -> Result<Transaction<'static, <Self::Dialect as Dialect>::Db>, SqlError<Self::Dialect>>;
    /// Adds the open rows by severity, type, namespace and repository that the filter keeps, from
    /// `drift_counts` (`from_rollup`, every filter field but `since`) or from `drifts`.
    async fn open_breakdown(
        &self,
        conn: &mut Connection<Self::Dialect>,
        filter: &DriftFilter,
        stats: &mut DriftStats,
        from_rollup: bool,
    ) -> Result<(), SqlError<Self::Dialect>>;
    /// The rollup of counts (`n` and `ttr_sum_ms` by rollup dimensions) to read for a figure
    /// grouped by `columns` under `filter`: the narrowest the store keeps that has both the
    /// columns and those the filter names. `drift_counts`, all of them, unless the store keeps
    /// narrower ones.
    fn counts_rollup(_filter: &DriftFilter, _columns: &[&str]) -> &'static str {
        "drift_counts"
    }
    /// The 95th percentile of the time to resolve of the `n` resolved rows the filter keeps,
    /// from what the store keeps besides the rows, when it keeps it for this filter; `None` to
    /// have [`Sql::p95`](crate::Sql::p95) read it from the rows. The same value either way.
    async fn p95_from_rollups(
        &self,
        _conn: &mut Connection<Self::Dialect>,
        _filter: &DriftFilter,
        _n: i64,
    ) -> Result<Option<Option<f64>>, SqlError<Self::Dialect>> {
        Ok(None)
    }
    /// Drifts opened and resolved per day from `first` to `today`, from `drift_daily`.
    async fn daily(
        &self,
        conn: &mut Connection<Self::Dialect>,
        filter: &DriftFilter,
        first: NaiveDate,
        today: NaiveDate,
    ) -> Result<Vec<(NaiveDate, i64, i64)>, SqlError<Self::Dialect>>;
}

/// The mean of `n` times to resolve that add up to `sum_ms` milliseconds, in seconds.
pub fn mean_seconds(sum_ms: i64, n: i64) -> Option<f64> {
    (n > 0).then(|| sum_ms as f64 / 1000.0 / n as f64)
}

/// One drift a write changed, and the event it yields.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// The drift's row id.
    pub drift_id: i64,
    /// What happened to it.
    pub kind: EventKind,
    /// For `changed`: what it had before.
    pub previous: Option<Previous>,
    /// The change ended a waiver (the cluster value of a waived drift changed).
    pub ended_waiver: bool,
}

impl Change {
    /// A drift that simply opened, reopened or resolved (no previous value, no waiver ended).
    pub fn of(drift_id: i64, kind: EventKind) -> Self {
        Change { drift_id, kind, previous: None, ended_waiver: false }
    }
}

/// What a store's part of a write did: the counts, and the changes that become events.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Written {
    /// The counts.
    pub outcome: RecordOutcome,
    /// The drifts the report opened, reopened, changed or resolved.
    pub changes: Vec<Change>,
}

/// A live row (open or waived) as it was before a report upserted its drift.
#[derive(Debug, Clone, PartialEq)]
pub struct Before {
    /// Open or waived.
    pub status: DriftStatus,
    /// The cluster value.
    pub cluster_value: Option<serde_json::Value>,
    /// The severity.
    pub severity: Severity,
}

/// The event of a drift a report upserted (row `id`, status after the upsert `status`), from
/// the live row before it (`None`: the upsert inserted a new row; `seen_before`: a resolved
/// row has its fingerprint). `value_changed`: the cluster value differs from the row's.
///
/// A new row opens (or reopens a drift seen before); a waived row whose value changed is open
/// again (`reopened`: the waiver ended); an open row whose value or severity changed yields
/// `changed`; anything else (seen again as it was, or still under its waiver) yields nothing.
pub fn upsert_change(
    id: i64,
    before: Option<Before>,
    seen_before: bool,
    status: DriftStatus,
    value_changed: bool,
    severity: Severity,
) -> Option<Change> {
    let change = |kind, previous| Some(Change { drift_id: id, kind, previous, ended_waiver: false });
    match before {
        None if seen_before => change(EventKind::Reopened, None),
        None => change(EventKind::Opened, None),
        Some(b) if b.status == DriftStatus::Waived && status == DriftStatus::Open => {
            Some(Change { drift_id: id, kind: EventKind::Reopened, previous: None, ended_waiver: true })
        }
        Some(b) if status == DriftStatus::Open && (value_changed || b.severity != severity) => {
            change(EventKind::Changed, Some(Previous { cluster_value: b.cluster_value, severity: b.severity }))
        }
        Some(_) => None,
    }
}

/// What a SQL store provides to the shared code, which implements [`drift_model::DriftSink`] and
/// [`drift_model::DriftStore`] over it ([`impl_drift_store!`](crate::impl_drift_store)): its
/// pools, its part of a write (drifts, resolutions, rollups), its part of retention, and its
/// statistics ([`SqlStats`]).
#[async_trait::async_trait]
pub trait SqlStore: SqlStats {
    /// The sink's name ([`drift_model::DriftSink::name`]).
    const NAME: &'static str;
    /// The pool the reads go through.
    fn reader(&self) -> &Pool<<Self::Dialect as Dialect>::Db>;
    /// Resolved drifts and scans older than this many days are deleted; `None` keeps them.
    fn retention_days(&self) -> Option<u32>;
    /// Starts the transaction of a write.
    async fn begin(&self) -> Result<Transaction<'static, <Self::Dialect as Dialect>::Db>, SqlError<Self::Dialect>>;
    /// Writes the drifts of a report whose scan row was just inserted, in its transaction:
    /// opens and updates drifts (a waived drift whose cluster value changed is open again),
    /// resolves those the report may resolve, keeps the rollups; says what changed
    /// ([`upsert_change`], and `resolved` for each resolved row).
    async fn write_drifts(
        &self,
        conn: &mut Connection<Self::Dialect>,
        report: &ScanReport,
    ) -> Result<Written, SqlError<Self::Dialect>>;

    /// Called once a report's transaction has committed, with what it did: a store may keep
    /// its database fit for the writes to come (the PostgreSQL store refreshes the planner's
    /// statistics of its live rows when many were opened since it last did). Never fails the
    /// write, which is committed already. Does nothing by default.
    async fn recorded(&self, _outcome: &RecordOutcome) {}

    /// Keeps the rollups right around a change of status of rows `ids` outside a report (a
    /// decision, a waiver's end): called with `-1` before the change and `+1` after, in its
    /// transaction. Stores whose database keeps the rollups itself (triggers) do nothing.
    async fn rollup_rows(
        &self,
        _conn: &mut Connection<Self::Dialect>,
        _ids: &[i64],
        _sign: i64,
    ) -> Result<(), SqlError<Self::Dialect>> {
        Ok(())
    }
    /// Deletes the drifts resolved before `cutoff` (and their share of the rollups); returns
    /// how many.
    async fn prune_drifts(
        &self,
        conn: &mut Connection<Self::Dialect>,
        cutoff: DateTime<Utc>,
    ) -> Result<u64, SqlError<Self::Dialect>>;
}

/// Records a report: `once` writes it in one transaction ([`Sql::record_once`](crate::Sql::record_once)); it is written
/// again, up to [`ATTEMPTS`] times in all, while it fails in a way worth retrying.
pub async fn record<D, F, Fut>(report: &ScanReport, mut once: F) -> Result<RecordOutcome>
where
    D: Dialect,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<RecordOutcome, SqlError<D>>>,
{
    let span = tracing::info_span!(
        "record",
        scan_id = %report.scan_id,
        cluster = %report.cluster,
        repository = %report.repository
    );
    async {
        let mut attempt = 1;
        loop {
            match once().await {
                Ok(outcome) => {
                    tracing::debug!(
                        opened = outcome.opened,
                        updated = outcome.updated,
                        resolved = outcome.resolved,
                        replayed = outcome.replayed,
                        "scan report recorded"
                    );
                    return Ok(outcome);
                }
                Err(e) if e.retryable() && attempt < ATTEMPTS => {
                    tracing::warn!(error = %e, attempt, "recording the scan report failed; writing it again");
                    attempt += 1;
                }
                Err(e) => return Err(e.into()),
            }
        }
    }
    .instrument(span)
    .await
}

/// The drifts of a report with their fingerprints, one per fingerprint, in report order: a
/// fingerprint listed twice counts once, the first wins (as in the reference store).
pub fn distinct_drifts(report: &ScanReport) -> Vec<(String, &Drift)> {
    let mut seen = HashSet::new();
    report
        .drifts
        .iter()
        .filter_map(|d| {
            let fp = d.fingerprint(&report.cluster, &report.repository);
            seen.insert(fp.clone()).then_some((fp, d))
        })
        .collect()
}

/// The objects whose open drifts a report may resolve, when that is fewer than every object of
/// its cluster and repository: a report that did not read the whole desired state
/// (`desired_complete` false: a watch's report of the objects that changed, or a scan whose
/// files did not all parse) resolves no drift of an object outside `desired`
/// ([`ScanReport::may_resolve`]), so a store reads the open drifts of these objects only, not
/// every open drift of the repository. Sorted and distinct. `None`: a drift of any object may
/// be resolved (read them all).
pub fn resolvable_only(report: &ScanReport) -> Option<Vec<&ResourceKey>> {
    if report.desired_complete {
        return None;
    }
    let mut keys: Vec<&ResourceKey> = report.desired.iter().collect();
    keys.sort();
    keys.dedup();
    Some(keys)
}

/// Decides which open drifts of its cluster and repository a report resolves, and how
/// ([`ScanReport::may_resolve`], [`ScanReport::resolution`]), asking once per object.
#[derive(Debug)]
pub struct Resolver<'r> {
    report: &'r ScanReport,
    decided: HashMap<ResourceKey, bool>,
}

impl<'r> Resolver<'r> {
    /// The resolver of a report; `None` when the scan failed as a whole, which resolves nothing.
    pub fn of(report: &'r ScanReport) -> Option<Self> {
        (report.outcome != ScanOutcome::Failed).then(|| Resolver { report, decided: HashMap::new() })
    }

    /// How the report resolves an open drift of the object (`namespace` empty for a
    /// cluster-scoped one) whose last sighting had the desired digest `digest`; `None` when
    /// the drift stays open.
    pub fn resolve(
        &mut self,
        group: String,
        kind: String,
        namespace: String,
        name: String,
        digest: Option<&str>,
    ) -> Option<(ResourceKey, Resolution)> {
        let key = ResourceKey { group, kind, namespace: (!namespace.is_empty()).then_some(namespace), name };
        let report = self.report;
        let may = *self.decided.entry(key.clone()).or_insert_with(|| report.may_resolve(&key));
        may.then(|| {
            let resolution = report.resolution(&key, digest);
            (key, resolution)
        })
    }
}

/// Where retention cuts, relative to `now`: resolved drifts and scans older than that go.
pub fn cutoff(retention_days: Option<u32>, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    retention_days.map(|days| now - chrono::Duration::days(i64::from(days)))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use drift_model::{CoverageStatus, DriftType};
    use drift_testkit::fixtures::{drift, key, report, t, with_digest};

    use super::*;

    fn replicas(name: &str) -> Drift {
        drift("Deployment", "shop", name, DriftType::ReplicasDrift, "spec.replicas", 3.into())
    }

    #[test]
    fn a_fingerprint_listed_twice_counts_once_and_the_first_wins() {
        let mut second = replicas("web");
        second.cluster_value = Some(9.into());
        let r = report("s", t(0), &[key("Deployment", "shop", "web")], vec![replicas("web"), second, replicas("api")]);
        let drifts = distinct_drifts(&r);
        let names: Vec<_> = drifts.iter().map(|(_, d)| d.resource.name.as_str()).collect();
        assert_eq!(names, ["web", "api"], "report order");
        assert_eq!(drifts[0].1.cluster_value, Some(3.into()), "the first wins");
        assert_eq!(drifts[0].0, r.drifts[0].fingerprint("test-cluster", "test-repo"));
    }

    #[test]
    fn the_resolver_keeps_open_what_the_report_could_not_see_and_says_how_the_rest_went_away() {
        let (web, api) = (key("Deployment", "shop", "web"), key("Deployment", "billing", "api"));
        let mut r = with_digest(report("s", t(0), &[web.clone(), api.clone()], vec![]), &web, "d1");
        r.outcome = ScanOutcome::Partial;
        r.coverage.set(&api.group_kind(), Some("billing"), CoverageStatus::Forbidden { message: "403".into() });
        let mut resolver = Resolver::of(&r).unwrap();
        let of = |k: &ResourceKey| {
            (k.group.clone(), k.kind.clone(), k.namespace.clone().unwrap_or_default(), k.name.clone())
        };
        let (g, k, n, name) = of(&web);
        assert_eq!(resolver.resolve(g, k, n, name, Some("d0")), Some((web.clone(), Resolution::Accepted)));
        let (g, k, n, name) = of(&web);
        assert_eq!(resolver.resolve(g, k, n, name, Some("d1")), Some((web, Resolution::Reverted)));
        let (g, k, n, name) = of(&api);
        assert_eq!(resolver.resolve(g, k, n, name, Some("d0")), None, "billing was not read");
    }

    #[test]
    fn a_report_that_did_not_read_the_whole_desired_state_may_resolve_only_its_own_objects() {
        let (web, api, gone) =
            (key("Deployment", "shop", "web"), key("Deployment", "billing", "api"), key("ConfigMap", "shop", "old"));
        let whole = report("s", t(0), &[web.clone(), api.clone()], vec![]);
        assert_eq!(resolvable_only(&whole), None, "a complete desired state may resolve any object");
        assert!(whole.may_resolve(&gone), "an object gone from Git, with the whole desired state read");
        let mut batch = report("w", t(0), &[api.clone(), web.clone(), api.clone()], vec![]);
        batch.desired_complete = false;
        let only = resolvable_only(&batch).unwrap();
        assert_eq!(only, [&api, &web], "sorted, once each");
        // What the stores rely on: no object outside the list may be resolved, whatever its
        // kind or namespace (read completely or not), and the listed ones may.
        for other in [gone, key("Deployment", "shop", "db"), key("ConfigMap", "elsewhere", "x")] {
            assert!(!batch.may_resolve(&other), "{other} is not in the batch");
        }
        assert!(only.iter().all(|k| batch.may_resolve(k)));
    }

    #[test]
    fn retention_cuts_whole_days_before_now_and_nothing_without_retention() {
        assert_eq!(cutoff(None, t(0)), None);
        assert_eq!(cutoff(Some(30), t(0)), Some(t(0) - chrono::Duration::days(30)));
    }
}
