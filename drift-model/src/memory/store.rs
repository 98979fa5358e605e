//! In-memory reference implementations of every trait. They define the expected behaviour that
//! the conformance suite (`drift-testkit`) checks in every real adapter, and they are useful in
//! tests and demos.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Mutex;

use async_trait::async_trait;
use chrono::{DateTime, Duration, Utc};

use crate::report::ScanReport;
use crate::sink::*;
use crate::source::*;
use crate::{Coverage, CoverageStatus, DesiredSnapshot, GroupKind, LiveSnapshot, Resource, Scope};
use crate::{Error, Result};

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

/// The reference store: a [`DriftSink`] and a [`DriftStore`] in memory, with exactly the
/// semantics of docs/storage.md ("The lifecycle of a drift") that the database sinks
/// implement in SQL.
#[derive(Debug, Default)]
pub struct MemoryStore {
    inner: Mutex<MemoryStoreState>,
}

#[derive(Debug, Default)]
struct MemoryStoreState {
    rows: Vec<StoredDrift>,
    /// Digest of the desired object when each open row was last seen, by row id.
    digests: std::collections::HashMap<i64, String>,
    scans: Vec<ScanRecord>,
    findings: Vec<StoredFinding>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }
    fn state(&self) -> std::sync::MutexGuard<'_, MemoryStoreState> {
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Builds the row a new drift opens (shared by the reference store and the SQL sinks' tests).
pub fn new_row(report: &ScanReport, drift: &crate::Drift, id: i64) -> StoredDrift {
    StoredDrift {
        id,
        fingerprint: drift.fingerprint(&report.cluster, &report.repository),
        detected_at: report.finished_at,
        last_seen: report.finished_at,
        occurrences: 1,
        cluster: report.cluster.clone(),
        repository: report.repository.clone(),
        api_group: drift.api_group.clone(),
        resource_kind: drift.resource.kind.clone(),
        namespace: drift.resource.namespace.clone().unwrap_or_default(),
        resource_name: drift.resource.name.clone(),
        path: drift.path.clone(),
        drift_type: drift.drift_type,
        severity: drift.severity,
        git_value: drift.git_value.clone(),
        cluster_value: drift.cluster_value.clone(),
        status: DriftStatus::Open,
        resolved_at: None,
        resolution: None,
        changed_by: drift.changed_by.clone(),
        changed_at: drift.changed_at,
        classification: drift.classification,
        decision_source: drift.decision_source,
        recommended_action: drift.recommended_action,
        waived_until: None,
        waived_by: None,
        acknowledged_at: None,
        revert: drift.revert.clone(),
    }
}

/// The row a new finding opens (shared by the reference store and the tests).
pub fn new_finding_row(report: &ScanReport, finding: &crate::Finding, fingerprint: String, id: i64) -> StoredFinding {
    StoredFinding {
        id,
        fingerprint,
        finding_type: finding.finding_type,
        detected_at: report.finished_at,
        last_seen: report.finished_at,
        occurrences: 1,
        cluster: report.cluster.clone(),
        repository: report.repository.clone(),
        rule: finding.rule,
        severity: finding.severity,
        side: finding.side,
        api_group: finding.resource.group.clone(),
        resource_kind: finding.resource.kind.clone(),
        namespace: finding.resource.namespace.clone().unwrap_or_default(),
        resource_name: finding.resource.name.clone(),
        container: finding.container.clone(),
        path: finding.path.clone(),
        message: finding.message.clone(),
        status: FindingStatus::Open,
        resolved_at: None,
    }
}

/// The findings of a report with their fingerprints, one per fingerprint, in report order (the
/// first wins), as every store counts them.
pub fn distinct_findings(report: &ScanReport) -> Vec<(String, &crate::Finding)> {
    let mut seen = HashSet::new();
    report
        .findings
        .iter()
        .filter_map(|f| {
            let fp = f.fingerprint(&report.cluster, &report.repository);
            seen.insert(fp.clone()).then_some((fp, f))
        })
        .collect()
}

/// The reference lifecycle of findings: a finding seen again updates its open row (last seen,
/// occurrences, severity, message), a new one opens a row, and an open row of the report's
/// cluster and repository that the report does not list is resolved where
/// [`ScanReport::may_resolve_finding`] allows it.
fn record_findings(rows: &mut Vec<StoredFinding>, report: &ScanReport, outcome: &mut RecordOutcome) {
    let mut next_id = rows.iter().map(|r| r.id).max().unwrap_or(0) + 1;
    let found = distinct_findings(report);
    let seen: HashSet<&str> = found.iter().map(|(fp, _)| fp.as_str()).collect();
    for (fp, finding) in &found {
        if let Some(row) = rows.iter_mut().find(|r| r.fingerprint == *fp && r.status == FindingStatus::Open) {
            row.last_seen = report.finished_at;
            row.occurrences += 1;
            row.severity = finding.severity;
            row.message = finding.message.clone();
            outcome.findings_updated += 1;
        } else {
            rows.push(new_finding_row(report, finding, fp.clone(), next_id));
            next_id += 1;
            outcome.findings_opened += 1;
        }
    }
    for row in rows.iter_mut() {
        if row.status == FindingStatus::Open
            && row.cluster == report.cluster
            && row.repository == report.repository
            && !seen.contains(row.fingerprint.as_str())
            && report.may_resolve_finding(&row.key(), row.side)
        {
            row.status = FindingStatus::Resolved;
            row.resolved_at = Some(report.finished_at);
            outcome.findings_resolved += 1;
        }
    }
}

/// Whether a stored row passes a filter.
pub fn filter_matches(filter: &DriftFilter, row: &StoredDrift) -> bool {
    filter.status.is_none_or(|s| s == row.status)
        && filter.severity.is_none_or(|s| s == row.severity)
        && filter.drift_type.is_none_or(|t| t == row.drift_type)
        && filter.namespace.as_ref().is_none_or(|n| *n == row.namespace)
        && filter.repository.as_ref().is_none_or(|n| *n == row.repository)
        && filter.cluster.as_ref().is_none_or(|n| *n == row.cluster)
        && filter.kind.as_ref().is_none_or(|n| *n == row.resource_kind)
        && filter.since.is_none_or(|t| row.last_seen >= t)
}

/// The key of the object a stored row belongs to.
pub fn row_key(row: &StoredDrift) -> crate::ResourceKey {
    crate::ResourceKey {
        group: row.api_group.clone(),
        kind: row.resource_kind.clone(),
        namespace: (!row.namespace.is_empty()).then(|| row.namespace.clone()),
        name: row.resource_name.clone(),
    }
}

/// Continuous percentile (linear interpolation between closest ranks, as PostgreSQL's
/// `percentile_cont`) of sorted values.
pub fn percentile_cont(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = p * (sorted.len() - 1) as f64;
    let lo = rank.floor() as usize;
    let hi = rank.ceil() as usize;
    Some(sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - lo as f64))
}

/// Computes statistics over rows (the reference the SQL stores must agree with).
pub fn stats_of<'a>(rows: impl Iterator<Item = &'a StoredDrift>, now: DateTime<Utc>) -> DriftStats {
    let mut stats = DriftStats::default();
    let today = now.date_naive();
    let first = today - Duration::days(6);
    let mut trend: BTreeMap<chrono::NaiveDate, (i64, i64)> =
        (0..7).map(|i| (first + Duration::days(i), (0, 0))).collect();
    let mut ttr = Vec::new();
    for row in rows {
        *stats.by_status.entry(row.status.as_str().to_owned()).or_default() += 1;
        if row.status == DriftStatus::Open {
            *stats.by_severity.entry(row.severity.as_str().to_owned()).or_default() += 1;
            *stats.by_type.entry(row.drift_type.as_str().to_owned()).or_default() += 1;
            *stats.by_namespace.entry(row.namespace.clone()).or_default() += 1;
            *stats.by_repository.entry(row.repository.clone()).or_default() += 1;
        }
        if let Some(e) = trend.get_mut(&row.detected_at.date_naive()) {
            e.0 += 1;
        }
        if let Some(resolved) = row.resolved_at {
            if let Some(e) = trend.get_mut(&resolved.date_naive()) {
                e.1 += 1;
            }
            ttr.push((resolved - row.detected_at).num_milliseconds() as f64 / 1000.0);
        }
    }
    stats.trend = trend.into_iter().map(|(day, (new, resolved))| TrendDay { day, new, resolved }).collect();
    if !ttr.is_empty() {
        ttr.sort_by(f64::total_cmp);
        stats.mean_time_to_resolve_seconds = Some(ttr.iter().sum::<f64>() / ttr.len() as f64);
        stats.p95_time_to_resolve_seconds = percentile_cont(&ttr, 0.95);
    }
    stats
}

#[async_trait]
impl DriftSink for MemoryStore {
    fn name(&self) -> &str {
        "memory"
    }
    fn capabilities(&self) -> SinkCapabilities {
        SinkCapabilities { readable: true, resolves: true, findings: true }
    }
    async fn record(&self, report: &ScanReport) -> Result<RecordOutcome> {
        let mut state = self.state();
        if state.scans.iter().any(|s| s.scan_id == report.scan_id) {
            return Ok(RecordOutcome { replayed: true, ..Default::default() });
        }
        let mut outcome = RecordOutcome::default();
        let mut seen = HashSet::new();
        let mut next_id = state.rows.iter().map(|r| r.id).max().unwrap_or(0) + 1;
        for drift in &report.drifts {
            let fp = drift.fingerprint(&report.cluster, &report.repository);
            if !seen.insert(fp.clone()) {
                continue;
            }
            let digest = report.desired_digest(&drift.key()).map(str::to_owned);
            if let Some(row) = state.rows.iter_mut().find(|r| r.fingerprint == fp && r.status == DriftStatus::Open) {
                row.last_seen = report.finished_at;
                row.occurrences += 1;
                row.git_value = drift.git_value.clone();
                row.cluster_value = drift.cluster_value.clone();
                row.revert = drift.revert.clone();
                row.severity = drift.severity;
                row.changed_by = drift.changed_by.clone();
                row.changed_at = drift.changed_at;
                row.classification = drift.classification;
                row.recommended_action = drift.recommended_action;
                let id = row.id;
                if let Some(d) = digest {
                    state.digests.insert(id, d);
                }
                outcome.updated += 1;
            } else {
                state.rows.push(new_row(report, drift, next_id));
                if let Some(d) = digest {
                    state.digests.insert(next_id, d);
                }
                next_id += 1;
                outcome.opened += 1;
            }
        }
        let MemoryStoreState { rows, digests, .. } = &mut *state;
        for row in rows.iter_mut() {
            if row.status == DriftStatus::Open
                && row.cluster == report.cluster
                && row.repository == report.repository
                && !seen.contains(&row.fingerprint)
                && report.may_resolve(&row_key(row))
            {
                row.status = DriftStatus::Resolved;
                row.resolved_at = Some(report.finished_at);
                row.resolution = Some(report.resolution(&row_key(row), digests.remove(&row.id).as_deref()));
                outcome.resolved += 1;
            }
        }
        record_findings(&mut state.findings, report, &mut outcome);
        state.scans.push(ScanRecord {
            scan_id: report.scan_id.clone(),
            cluster: report.cluster.clone(),
            repository: report.repository.clone(),
            revision: report.revision.clone(),
            started_at: report.started_at,
            finished_at: report.finished_at,
            outcome: report.outcome,
            drifts: report.drifts.len() as i64,
            warnings: report.warnings.len() as i64,
            coverage_gaps: report.coverage.incomplete().cloned().collect(),
        });
        Ok(outcome)
    }
}

#[async_trait]
impl DriftStore for MemoryStore {
    async fn list(&self, filter: &DriftFilter, page: PageRequest) -> Result<DriftPage> {
        page.validate()?;
        let state = self.state();
        let mut rows: Vec<&StoredDrift> =
            state.rows.iter().filter(|r| page.after.is_none_or(|a| r.id < a) && filter_matches(filter, r)).collect();
        rows.sort_by_key(|r| std::cmp::Reverse(r.id));
        let items: Vec<StoredDrift> = rows.into_iter().take(page.fetch_limit()).cloned().collect();
        Ok(DriftPage::from_rows(items, page))
    }
    async fn get(&self, id: i64) -> Result<StoredDrift> {
        self.state()
            .rows
            .iter()
            .find(|r| r.id == id)
            .cloned()
            .ok_or_else(|| Error::not_found(format!("no drift with id {id}")))
    }
    async fn stats(&self, filter: &DriftFilter, now: DateTime<Utc>) -> Result<DriftStats> {
        let state = self.state();
        Ok(stats_of(state.rows.iter().filter(|r| filter_matches(filter, r)), now))
    }
    async fn recent_scans(&self, limit: u32) -> Result<Vec<ScanRecord>> {
        let state = self.state();
        let mut scans: Vec<ScanRecord> = state.scans.clone();
        scans.sort_by(|a, b| b.started_at.cmp(&a.started_at).then_with(|| b.scan_id.cmp(&a.scan_id)));
        scans.truncate(limit as usize);
        Ok(scans)
    }
    async fn ping(&self) -> Result<()> {
        Ok(())
    }
    async fn findings(&self, filter: &FindingFilter, page: PageRequest) -> Result<FindingPage> {
        page.validate()?;
        let state = self.state();
        let mut rows: Vec<&StoredFinding> =
            state.findings.iter().filter(|r| page.after.is_none_or(|a| r.id < a) && filter.matches(r)).collect();
        rows.sort_by_key(|r| std::cmp::Reverse(r.id));
        Ok(FindingPage::from_rows(rows.into_iter().take(page.fetch_limit()).cloned().collect(), page))
    }
    async fn open_findings(&self) -> Result<BTreeMap<(crate::finding::Rule, crate::Severity), i64>> {
        let mut counts = BTreeMap::new();
        for row in self.state().findings.iter().filter(|r| r.status == FindingStatus::Open) {
            *counts.entry((row.rule, row.severity)).or_default() += 1;
        }
        Ok(counts)
    }
}
