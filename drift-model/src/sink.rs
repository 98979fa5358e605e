//! The sink traits: where scan reports go, and the read side the API uses.

use async_trait::async_trait;
use chrono::{DateTime, NaiveDate, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::Result;
use crate::drift::{Classification, DecisionSource, DriftType, RecommendedAction, Severity};
use crate::report::{ScanOutcome, ScanReport};

/// What a sink can do; conformance cases are chosen from it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SinkCapabilities {
    /// The sink keeps history and can be read back through [`DriftStore`].
    pub readable: bool,
    /// The sink resolves drifts that are no longer seen.
    pub resolves: bool,
    /// The sink keeps policy findings ([`ScanReport::findings`]) and lists them through
    /// [`DriftStore::findings`].
    #[serde(default)]
    pub findings: bool,
}

/// What recording a report changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordOutcome {
    /// New open drifts.
    pub opened: usize,
    /// Open drifts seen again.
    pub updated: usize,
    /// Open drifts marked resolved.
    pub resolved: usize,
    /// Whether this scan id had been recorded before (nothing changed).
    pub replayed: bool,
    /// Events written to the outbox with the report (stores that keep one).
    #[serde(default)]
    pub events: usize,
    /// Drifts of the report under a waiver (not counted as open).
    #[serde(default)]
    pub waived: usize,
    /// Policy findings opened (stores that keep findings).
    #[serde(default)]
    pub findings_opened: usize,
    /// Open policy findings seen again.
    #[serde(default)]
    pub findings_updated: usize,
    /// Open policy findings marked resolved.
    #[serde(default)]
    pub findings_resolved: usize,
}

/// Receives scan reports.
///
/// Contract:
/// - idempotent per scan id: recording the same report twice changes nothing the second time;
/// - a report is written whole or not at all;
/// - an open drift not in the report is resolved only where [`ScanReport::may_resolve`] says so;
/// - Secret values are never stored (drift values are already hashed by the engine).
#[async_trait]
pub trait DriftSink: Send + Sync + std::fmt::Debug {
    /// A name for logs and metrics.
    fn name(&self) -> &str;
    /// What this sink can do.
    fn capabilities(&self) -> SinkCapabilities {
        SinkCapabilities::default()
    }
    /// Records one report.
    async fn record(&self, report: &ScanReport) -> Result<RecordOutcome>;
}

/// Status of a stored drift.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DriftStatus {
    /// Still seen by the latest scans.
    Open,
    /// Still seen, but under a waiver (an `accept` decision): recorded, not counted as open in
    /// statistics, alerts, metrics or exit codes until the waiver expires or the cluster value
    /// changes again.
    Waived,
    /// No longer seen by a scan that covered it.
    Resolved,
}

impl DriftStatus {
    /// snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            DriftStatus::Open => "open",
            DriftStatus::Waived => "waived",
            DriftStatus::Resolved => "resolved",
        }
    }
}

impl std::str::FromStr for DriftStatus {
    type Err = crate::Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "open" => Ok(DriftStatus::Open),
            "waived" => Ok(DriftStatus::Waived),
            "resolved" => Ok(DriftStatus::Resolved),
            _ => Err(crate::Error::invalid_input(format!("unknown status {s:?} (open, waived, resolved)"))),
        }
    }
}

/// A drift as a store keeps it (docs/storage.md, table `drifts`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredDrift {
    /// Row id.
    pub id: i64,
    /// Identity (see [`crate::Drift::fingerprint`]).
    pub fingerprint: String,
    /// First seen.
    pub detected_at: DateTime<Utc>,
    /// Last seen.
    pub last_seen: DateTime<Utc>,
    /// Scans that saw it.
    pub occurrences: i64,
    /// Cluster.
    pub cluster: String,
    /// Repository.
    pub repository: String,
    /// API group.
    pub api_group: String,
    /// Kind.
    pub resource_kind: String,
    /// Namespace (empty string for cluster-scoped objects).
    pub namespace: String,
    /// Name.
    pub resource_name: String,
    /// Path.
    pub path: String,
    /// Type.
    pub drift_type: DriftType,
    /// Severity.
    pub severity: Severity,
    /// What Git says (latest).
    pub git_value: Option<Value>,
    /// What the cluster has (latest).
    pub cluster_value: Option<Value>,
    /// Open or resolved.
    pub status: DriftStatus,
    /// When it was resolved.
    pub resolved_at: Option<DateTime<Utc>>,
    /// How it went away (resolved drifts only): the cluster was put back, Git accepted the
    /// change, or the object is gone (Git no longer holds it, or it was deleted from the
    /// cluster).
    #[serde(default)]
    pub resolution: Option<crate::Resolution>,
    /// Manager that last changed the field.
    pub changed_by: Option<String>,
    /// When.
    pub changed_at: Option<DateTime<Utc>>,
    /// Who sent that change, from the API server's audit log (null until joined, or when no
    /// audit event matched; [`crate::identity`]).
    #[serde(default)]
    pub changed_by_user: Option<crate::identity::ChangeIdentity>,
    /// Classification.
    pub classification: Classification,
    /// Who decided.
    pub decision_source: DecisionSource,
    /// What to do.
    pub recommended_action: RecommendedAction,
    /// When the waiver of a waived drift ends.
    #[serde(default)]
    pub waived_until: Option<DateTime<Utc>>,
    /// Who waived it: the name of the token or CLI user of the `accept` decision, or
    /// `git:<owner>` for a waiver written in Git.
    #[serde(default)]
    pub waived_by: Option<String>,
    /// When someone said they are on it (an `acknowledge` decision); reminders stop.
    #[serde(default)]
    pub acknowledged_at: Option<DateTime<Utc>>,
    /// The patch and kubectl command that put the field back to Git's value, as the last scan
    /// made them ([`crate::Drift::revert`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revert: Option<crate::remedy::Revert>,
}

/// Filters of a drift listing; every field optional.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DriftFilter {
    /// Open or resolved.
    pub status: Option<DriftStatus>,
    /// Severity.
    pub severity: Option<Severity>,
    /// Drift type.
    pub drift_type: Option<DriftType>,
    /// Namespace.
    pub namespace: Option<String>,
    /// Repository.
    pub repository: Option<String>,
    /// Cluster.
    pub cluster: Option<String>,
    /// Kind.
    pub kind: Option<String>,
    /// Only drifts seen at or after this time (`last_seen >= since`).
    pub since: Option<DateTime<Utc>>,
}

/// A page request: keyset pagination on descending id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PageRequest {
    /// Maximum rows (1..=1000).
    pub limit: u32,
    /// Return rows with `id < after` (the `next` cursor of the previous page).
    pub after: Option<i64>,
}

impl Default for PageRequest {
    fn default() -> Self {
        PageRequest { limit: 100, after: None }
    }
}

impl PageRequest {
    /// Largest page.
    pub const MAX_LIMIT: u32 = 1000;

    /// An invalid-input error unless the limit is in 1..=[`PageRequest::MAX_LIMIT`].
    pub fn validate(&self) -> crate::Result<()> {
        if self.limit == 0 || self.limit > Self::MAX_LIMIT {
            return Err(crate::Error::invalid_input(format!("limit must be between 1 and {}", Self::MAX_LIMIT)));
        }
        Ok(())
    }

    /// How many rows a store reads: one more than the limit, to know whether a next page exists.
    pub fn fetch_limit(&self) -> usize {
        self.limit as usize + 1
    }
}

impl DriftPage {
    /// The page from rows read newest first with [`PageRequest::fetch_limit`]: at most `limit`
    /// items, and the cursor of the next page when more rows were read.
    pub fn from_rows(mut items: Vec<StoredDrift>, page: PageRequest) -> Self {
        let more = items.len() > page.limit as usize;
        items.truncate(page.limit as usize);
        let next = if more { items.last().map(|r| r.id) } else { None };
        DriftPage { items, next }
    }
}

/// A page of drifts, newest first.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DriftPage {
    /// The rows.
    pub items: Vec<StoredDrift>,
    /// Cursor for the next page, `None` on the last page.
    pub next: Option<i64>,
}

/// One day of the trend.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrendDay {
    /// UTC day.
    pub day: NaiveDate,
    /// Drifts first detected that day.
    pub new: i64,
    /// Drifts resolved that day.
    pub resolved: i64,
}

impl TrendDay {
    /// The first and the last UTC day of the 7-day trend ending on `now`'s UTC day.
    pub fn window(now: DateTime<Utc>) -> (NaiveDate, NaiveDate) {
        let today = now.date_naive();
        (today - chrono::Duration::days(6), today)
    }

    /// The 7 days of the trend ending on `now`'s UTC day, oldest first, from (day, new,
    /// resolved) counts: counts of the same day add up, days outside the window are ignored,
    /// days without counts are zero. For stores that count by day in their database.
    pub fn week(now: DateTime<Utc>, counts: impl IntoIterator<Item = (NaiveDate, i64, i64)>) -> Vec<TrendDay> {
        let (first, _) = Self::window(now);
        let mut days: Vec<TrendDay> =
            (0..7).map(|i| TrendDay { day: first + chrono::Duration::days(i), new: 0, resolved: 0 }).collect();
        for (day, new, resolved) in counts {
            let offset = (day - first).num_days();
            if let Some(d) = usize::try_from(offset).ok().and_then(|i| days.get_mut(i)) {
                d.new += new;
                d.resolved += resolved;
            }
        }
        days
    }
}

/// Where the continuous 95th percentile of `n` values lies when they are read from the largest
/// down (the 95th percentile is near the top, so a store skips few values): skip
/// [`skip`](Self::skip) values, read [`take`](Self::take), and [`interpolate`](Self::interpolate)
/// between them. The same definition as [`crate::memory::percentile_cont`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TopPercentile {
    n: i64,
    rank: f64,
    lo: i64,
    hi: i64,
}

impl TopPercentile {
    /// The 95th percentile of `n` values; `None` when there are none.
    pub fn p95(n: i64) -> Option<Self> {
        (n > 0).then(|| {
            let rank = 0.95 * (n - 1) as f64;
            TopPercentile { n, rank, lo: rank.floor() as i64, hi: rank.ceil() as i64 }
        })
    }

    /// How many of the largest values to skip.
    pub fn skip(&self) -> i64 {
        self.n - 1 - self.hi
    }

    /// How many values to read after them (1 or 2).
    pub fn take(&self) -> i64 {
        self.hi - self.lo + 1
    }

    /// The percentile from the values read, largest first; `None` when none were read.
    pub fn interpolate(&self, descending: &[f64]) -> Option<f64> {
        let (hi, lo) = (descending.first()?, descending.last()?);
        Some(lo + (hi - lo) * (self.rank - self.lo as f64))
    }
}

/// Aggregate statistics of a store.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DriftStats {
    /// Rows by status.
    pub by_status: std::collections::BTreeMap<String, i64>,
    /// Open drifts by severity.
    pub by_severity: std::collections::BTreeMap<String, i64>,
    /// Open drifts by type.
    pub by_type: std::collections::BTreeMap<String, i64>,
    /// Open drifts by namespace.
    pub by_namespace: std::collections::BTreeMap<String, i64>,
    /// Open drifts by repository.
    pub by_repository: std::collections::BTreeMap<String, i64>,
    /// The last 7 UTC days, oldest first, today included.
    pub trend: Vec<TrendDay>,
    /// Mean time to resolve, in seconds, over resolved drifts.
    pub mean_time_to_resolve_seconds: Option<f64>,
    /// 95th percentile of time to resolve, in seconds.
    pub p95_time_to_resolve_seconds: Option<f64>,
    /// The fleet overview: the open drifts of each cluster, by severity and by namespace, worst
    /// cluster first ([`ClusterOpen::fleet`]). Absent when nothing is open.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub by_cluster: Vec<ClusterOpen>,
}

/// The open drifts of one cluster, in [`DriftStats::by_cluster`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterOpen {
    /// The cluster.
    pub cluster: String,
    /// Its open drifts.
    pub open: i64,
    /// Its open drifts by severity (`LOW` .. `CRITICAL`; a severity with none is absent).
    pub by_severity: std::collections::BTreeMap<String, i64>,
    /// Its open drifts by namespace (`""` for cluster-scoped objects).
    pub by_namespace: std::collections::BTreeMap<String, i64>,
}

impl ClusterOpen {
    /// The fleet overview from counts of open drifts by (cluster, namespace, severity) (a key
    /// may come more than once; counts of 0 or less are skipped): one entry per cluster, the
    /// worst first: most `CRITICAL`, then most `HIGH`, then most open, then by name.
    pub fn fleet(counts: impl IntoIterator<Item = (String, String, String, i64)>) -> Vec<ClusterOpen> {
        let mut clusters: std::collections::BTreeMap<String, ClusterOpen> = std::collections::BTreeMap::new();
        for (cluster, namespace, severity, n) in counts {
            if n <= 0 {
                continue;
            }
            let c =
                clusters.entry(cluster.clone()).or_insert_with(|| ClusterOpen { cluster, ..ClusterOpen::default() });
            c.open += n;
            *c.by_severity.entry(severity).or_default() += n;
            *c.by_namespace.entry(namespace).or_default() += n;
        }
        let mut fleet: Vec<ClusterOpen> = clusters.into_values().collect();
        fleet.sort_by(|a, b| {
            let key = |c: &ClusterOpen| {
                let of = |s: Severity| c.by_severity.get(s.as_str()).copied().unwrap_or_default();
                (
                    std::cmp::Reverse(of(Severity::Critical)),
                    std::cmp::Reverse(of(Severity::High)),
                    std::cmp::Reverse(c.open),
                )
            };
            key(a).cmp(&key(b)).then_with(|| a.cluster.cmp(&b.cluster))
        });
        fleet
    }
}

/// A recorded scan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScanRecord {
    /// Scan id.
    pub scan_id: String,
    /// Cluster.
    pub cluster: String,
    /// Repository.
    pub repository: String,
    /// Revision.
    pub revision: Option<String>,
    /// Started.
    pub started_at: DateTime<Utc>,
    /// Finished.
    pub finished_at: DateTime<Utc>,
    /// Outcome.
    pub outcome: ScanOutcome,
    /// Drifts in the report.
    pub drifts: i64,
    /// Warnings in the report.
    pub warnings: i64,
    /// The (kind, namespace) pairs the live source could not read completely (forbidden, not
    /// served, failed): drifts there were neither found nor resolved. Empty when every pair was
    /// read.
    #[serde(default)]
    pub coverage_gaps: Vec<crate::snapshot::CoverageEntry>,
}

/// Status of a stored policy finding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FindingStatus {
    /// Found by the latest scan that checked its object and side.
    Open,
    /// No longer found by a scan that checked its side and read its object completely.
    Resolved,
}

impl FindingStatus {
    /// snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            FindingStatus::Open => "open",
            FindingStatus::Resolved => "resolved",
        }
    }
}

impl std::str::FromStr for FindingStatus {
    type Err = crate::Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "open" => Ok(FindingStatus::Open),
            "resolved" => Ok(FindingStatus::Resolved),
            _ => Err(crate::Error::invalid_input(format!("unknown status {s:?} (open, resolved)"))),
        }
    }
}

/// A policy finding as a store keeps it (docs/storage.md, table `findings`): one row per
/// episode, like a drift.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredFinding {
    /// Row id.
    pub id: i64,
    /// Identity ([`crate::Finding::fingerprint`]).
    pub fingerprint: String,
    /// `policy_violation`.
    pub finding_type: crate::finding::FindingType,
    /// First seen.
    pub detected_at: DateTime<Utc>,
    /// Last seen.
    pub last_seen: DateTime<Utc>,
    /// Scans that found it.
    pub occurrences: i64,
    /// Cluster.
    pub cluster: String,
    /// Repository.
    pub repository: String,
    /// The rule.
    pub rule: crate::finding::Rule,
    /// Severity (latest).
    pub severity: Severity,
    /// Desired or live.
    pub side: crate::finding::Side,
    /// API group.
    pub api_group: String,
    /// Kind.
    pub resource_kind: String,
    /// Namespace (empty string for cluster-scoped objects).
    pub namespace: String,
    /// Name.
    pub resource_name: String,
    /// The container, when the finding is about one.
    pub container: Option<String>,
    /// JSON pointer of the offending field, or of where it is missing.
    pub path: String,
    /// What is wrong (latest).
    pub message: String,
    /// Open or resolved.
    pub status: FindingStatus,
    /// When it was resolved.
    pub resolved_at: Option<DateTime<Utc>>,
}

impl StoredFinding {
    /// The key of the object the finding is about.
    pub fn key(&self) -> crate::ResourceKey {
        crate::ResourceKey {
            group: self.api_group.clone(),
            kind: self.resource_kind.clone(),
            namespace: (!self.namespace.is_empty()).then(|| self.namespace.clone()),
            name: self.resource_name.clone(),
        }
    }
}

/// Filters of a finding listing; every field optional.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FindingFilter {
    /// Open or resolved.
    pub status: Option<FindingStatus>,
    /// Rule.
    pub rule: Option<crate::finding::Rule>,
    /// Severity.
    pub severity: Option<Severity>,
    /// Desired or live.
    pub side: Option<crate::finding::Side>,
    /// Namespace (`""` for cluster-scoped objects).
    pub namespace: Option<String>,
    /// Kind.
    pub kind: Option<String>,
    /// Repository.
    pub repository: Option<String>,
    /// Cluster.
    pub cluster: Option<String>,
}

impl FindingFilter {
    /// Whether a stored finding passes the filter.
    pub fn matches(&self, row: &StoredFinding) -> bool {
        self.status.is_none_or(|s| s == row.status)
            && self.rule.is_none_or(|r| r == row.rule)
            && self.severity.is_none_or(|s| s == row.severity)
            && self.side.is_none_or(|s| s == row.side)
            && self.namespace.as_ref().is_none_or(|n| *n == row.namespace)
            && self.kind.as_ref().is_none_or(|k| *k == row.resource_kind)
            && self.repository.as_ref().is_none_or(|r| *r == row.repository)
            && self.cluster.as_ref().is_none_or(|c| *c == row.cluster)
    }
}

/// A page of findings, newest first.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FindingPage {
    /// The rows.
    pub items: Vec<StoredFinding>,
    /// Cursor for the next page, `None` on the last page.
    pub next: Option<i64>,
}

impl FindingPage {
    /// The page from rows read newest first with [`PageRequest::fetch_limit`].
    pub fn from_rows(mut items: Vec<StoredFinding>, page: PageRequest) -> Self {
        let more = items.len() > page.limit as usize;
        items.truncate(page.limit as usize);
        let next = if more { items.last().map(|r| r.id) } else { None };
        FindingPage { items, next }
    }
}

/// The error of a store that keeps no policy findings.
pub fn no_findings() -> crate::Error {
    crate::Error::unsupported("this store keeps no policy findings")
}

/// The read side of a store, used by the API and the CLI.
#[async_trait]
pub trait DriftStore: Send + Sync + std::fmt::Debug {
    /// Lists drifts, newest first.
    async fn list(&self, filter: &DriftFilter, page: PageRequest) -> Result<DriftPage>;
    /// One drift by id; `ErrorKind::NotFound` when absent.
    async fn get(&self, id: i64) -> Result<StoredDrift>;
    /// Statistics as of `now` (the 7-day trend ends on `now`'s UTC day).
    async fn stats(&self, filter: &DriftFilter, now: DateTime<Utc>) -> Result<DriftStats>;
    /// The most recent scans, newest first.
    async fn recent_scans(&self, limit: u32) -> Result<Vec<ScanRecord>>;
    /// Checks the store answers.
    async fn ping(&self) -> Result<()>;
    /// Lists policy findings, newest first, with the same paging as [`DriftStore::list`]. A
    /// store that keeps no findings answers [`crate::ErrorKind::Unsupported`] (the default).
    async fn findings(&self, _filter: &FindingFilter, _page: PageRequest) -> Result<FindingPage> {
        Err(no_findings())
    }
    /// The open findings by rule and severity (pairs without any left out), for the metrics. A
    /// store that keeps no findings answers [`crate::ErrorKind::Unsupported`] (the default).
    async fn open_findings(&self) -> Result<std::collections::BTreeMap<(crate::finding::Rule, Severity), i64>> {
        Err(no_findings())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fleet_puts_the_worst_cluster_first_and_counts_each_namespace() {
        let c = |cluster: &str, ns: &str, sev: &str, n: i64| (cluster.to_owned(), ns.to_owned(), sev.to_owned(), n);
        let fleet = ClusterOpen::fleet([
            c("quiet", "a", "LOW", 40),
            c("edge", "shop", "HIGH", 2),
            c("edge", "", "HIGH", 1),
            c("prod", "shop", "CRITICAL", 1),
            c("prod", "shop", "LOW", 3),
            c("prod", "pay", "CRITICAL", 0),
            c("gone", "x", "LOW", -2),
            c("alpha", "b", "HIGH", 3),
            c("prod", "shop", "LOW", 2),
        ]);
        let order: Vec<&str> = fleet.iter().map(|c| c.cluster.as_str()).collect();
        assert_eq!(order, ["prod", "alpha", "edge", "quiet"], "CRITICAL, then HIGH (a tie by name), then open");
        assert_eq!(fleet[0].open, 6);
        assert_eq!(fleet[0].by_namespace, [("shop".to_owned(), 6)].into(), "a key given twice adds up; 0 skipped");
        assert_eq!(fleet[0].by_severity, [("CRITICAL".to_owned(), 1), ("LOW".to_owned(), 5)].into());
        assert_eq!(fleet[2].by_namespace, [("".to_owned(), 1), ("shop".to_owned(), 2)].into());
        assert!(ClusterOpen::fleet([]).is_empty());
    }
    use crate::memory::percentile_cont;
    use chrono::TimeZone;

    #[test]
    fn top_percentile_agrees_with_percentile_cont() {
        for n in 1..60usize {
            let values: Vec<f64> = (0..n).map(|i| (i * i % 17) as f64 + i as f64 / 10.0).collect();
            let mut sorted = values.clone();
            sorted.sort_by(f64::total_cmp);
            let p = TopPercentile::p95(n as i64).unwrap();
            let descending: Vec<f64> = sorted.iter().rev().copied().collect();
            let read = &descending[p.skip() as usize..(p.skip() + p.take()) as usize];
            assert_eq!(p.interpolate(read), percentile_cont(&sorted, 0.95), "n = {n}");
        }
        assert_eq!(TopPercentile::p95(0), None);
    }

    #[test]
    fn a_week_of_trend_adds_up_days_and_ignores_the_rest() {
        let now = Utc.with_ymd_and_hms(2026, 11, 30, 12, 0, 0).unwrap();
        let day = |d: u32| NaiveDate::from_ymd_opt(2026, 11, d).unwrap();
        let week = TrendDay::week(now, [(day(30), 2, 1), (day(24), 1, 0), (day(30), 1, 0), (day(23), 9, 9)]);
        assert_eq!(week.len(), 7);
        assert_eq!((week[0].day, week[0].new, week[0].resolved), (day(24), 1, 0));
        assert_eq!((week[6].day, week[6].new, week[6].resolved), (day(30), 3, 1));
        assert_eq!(week[1..6].iter().map(|d| d.new + d.resolved).sum::<i64>(), 0);
        assert_eq!(TrendDay::window(now), (day(24), day(30)));
    }
}
