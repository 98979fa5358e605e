//! The reference store's drift history: [`MemoryStore`], its [`DriftSink`] and [`DriftStore`],
//! and the reference rules the SQL stores are checked against (rows, filters, statistics).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Mutex;

use async_trait::async_trait;
use chrono::{DateTime, Duration, Utc};

use super::act::{ActState, Change, Written};
use crate::act::{EventKind, Previous};
use crate::report::ScanReport;
use crate::sink::*;
use crate::{DecisionSource, Error, Result};

/// The reference store: a [`DriftSink`] and a [`DriftStore`] in memory, with exactly the
/// semantics of docs/storage.md ("The lifecycle of a drift") that the database sinks
/// implement in SQL, and the acting side of a store ([`crate::act::Outbox`],
/// [`crate::act::Decisions`], [`crate::act::AuditLog`]) as docs/notifications.md and
/// docs/decisions.md describe it. `drift_testkit` runs the same suites (`sink_suite!`,
/// `store_suite!`, `act_suite!`) on it, on SQLite and on PostgreSQL.
///
/// Everything sits behind one lock: each call is one transaction of the SQL stores.
#[derive(Debug, Default)]
pub struct MemoryStore {
    inner: Mutex<MemoryStoreState>,
}

#[derive(Debug, Default)]
pub(super) struct MemoryStoreState {
    /// The drifts, in id order (ids grow and rows are never deleted).
    pub(super) rows: Vec<StoredDrift>,
    /// Digest of the desired object when each live row was last seen, by row id.
    digests: HashMap<i64, String>,
    scans: Vec<ScanRecord>,
    findings: Vec<StoredFinding>,
    /// The outbox, the deliveries, the decisions and the audit trail.
    pub(super) act: ActState,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }
    pub(super) fn state(&self) -> std::sync::MutexGuard<'_, MemoryStoreState> {
        // A poisoned lock only means another test thread panicked; the data is still usable.
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Where the row with this id is (rows are in id order).
pub(super) fn position(rows: &[StoredDrift], id: i64) -> Option<usize> {
    rows.binary_search_by_key(&id, |r| r.id).ok()
}

/// The row with this id.
pub(super) fn row_mut(rows: &mut [StoredDrift], id: i64) -> Option<&mut StoredDrift> {
    rows.get_mut(position(rows, id)?)
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
        changed_by_user: None,
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
    let mut fleet = Vec::new();
    for row in rows {
        *stats.by_status.entry(row.status.as_str().to_owned()).or_default() += 1;
        if row.status == DriftStatus::Open {
            *stats.by_severity.entry(row.severity.as_str().to_owned()).or_default() += 1;
            *stats.by_type.entry(row.drift_type.as_str().to_owned()).or_default() += 1;
            *stats.by_namespace.entry(row.namespace.clone()).or_default() += 1;
            *stats.by_repository.entry(row.repository.clone()).or_default() += 1;
            fleet.push((row.cluster.clone(), row.namespace.clone(), row.severity.as_str().to_owned(), 1));
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
    stats.by_cluster = crate::sink::ClusterOpen::fleet(fleet);
    if !ttr.is_empty() {
        ttr.sort_by(f64::total_cmp);
        stats.mean_time_to_resolve_seconds = Some(ttr.iter().sum::<f64>() / ttr.len() as f64);
        stats.p95_time_to_resolve_seconds = percentile_cont(&ttr, 0.95);
    }
    stats
}

/// The drifts of a report, written as the SQL stores write them: a drift with a live row (open
/// or waived) of its fingerprint updates it, and a waived row whose cluster value changed is
/// open again (its waiver ends); any other drift opens a row (`reopened` when a resolved row
/// has its fingerprint); a live row of the report's cluster and repository that the report
/// does not list is resolved where [`ScanReport::may_resolve`] allows it. Says what changed.
fn write_drifts(rows: &mut Vec<StoredDrift>, digests: &mut HashMap<i64, String>, report: &ScanReport) -> Written {
    let mut written = Written::default();
    let mut live = HashMap::new();
    let mut seen_before = HashSet::new();
    for (i, row) in rows.iter().enumerate() {
        if row.status == DriftStatus::Resolved {
            seen_before.insert(row.fingerprint.clone());
        } else {
            live.insert(row.fingerprint.clone(), i);
        }
    }
    let mut next_id = rows.last().map_or(0, |r| r.id) + 1;
    let mut seen = HashSet::new();
    for drift in &report.drifts {
        let fp = drift.fingerprint(&report.cluster, &report.repository);
        if !seen.insert(fp.clone()) {
            continue;
        }
        let id = match live.get(&fp).and_then(|&i| rows.get_mut(i)) {
            Some(row) => {
                written.changes.extend(update_row(row, drift, report));
                written.outcome.updated += 1;
                written.outcome.waived += usize::from(row.status == DriftStatus::Waived);
                row.id
            }
            None => {
                let kind = if seen_before.contains(&fp) { EventKind::Reopened } else { EventKind::Opened };
                let id = next_id;
                next_id += 1;
                rows.push(new_row(report, drift, id));
                written.changes.push(Change::of(id, kind));
                written.outcome.opened += 1;
                id
            }
        };
        match report.desired_digest(&drift.key()) {
            Some(d) => digests.insert(id, d.to_owned()),
            None => digests.remove(&id),
        };
    }
    for row in rows.iter_mut() {
        if row.status != DriftStatus::Resolved
            && row.cluster == report.cluster
            && row.repository == report.repository
            && !seen.contains(&row.fingerprint)
            && report.may_resolve(&row_key(row))
        {
            row.status = DriftStatus::Resolved;
            row.resolved_at = Some(report.finished_at);
            row.resolution = Some(report.resolution(&row_key(row), digests.remove(&row.id).as_deref()));
            row.waived_until = None;
            row.waived_by = None;
            written.outcome.resolved += 1;
            written.changes.push(Change::of(row.id, EventKind::Resolved));
        }
    }
    written
}

/// Updates a live row with the drift a report shows again, and returns the event it yields: a
/// waived row whose cluster value changed is open again (`reopened`, its waiver ended); an open
/// row whose value or severity changed yields `changed` with what it had before; anything else
/// (seen again as it was, or still under its waiver) yields none. A recommended action a person
/// decided is kept.
fn update_row(row: &mut StoredDrift, drift: &crate::Drift, report: &ScanReport) -> Option<Change> {
    let value_changed = row.cluster_value != drift.cluster_value;
    let previous = Previous { cluster_value: row.cluster_value.clone(), severity: row.severity };
    let was_waived = row.status == DriftStatus::Waived;
    row.last_seen = report.finished_at;
    row.occurrences += 1;
    row.git_value = drift.git_value.clone();
    row.cluster_value = drift.cluster_value.clone();
    row.revert = drift.revert.clone();
    row.severity = drift.severity;
    row.changed_by = drift.changed_by.clone();
    row.changed_at = drift.changed_at;
    if row.changed_by_user.as_ref().is_some_and(|i| !i.applies_to(row.changed_at)) {
        row.changed_by_user = None;
    }
    row.classification = drift.classification;
    if row.decision_source != DecisionSource::Human {
        row.recommended_action = drift.recommended_action;
    }
    if was_waived && value_changed {
        row.status = DriftStatus::Open;
        row.waived_until = None;
        row.waived_by = None;
        return Some(Change { ended_waiver: true, ..Change::of(row.id, EventKind::Reopened) });
    }
    let changed = row.status == DriftStatus::Open && (value_changed || previous.severity != row.severity);
    changed.then(|| Change { previous: Some(previous), ..Change::of(row.id, EventKind::Changed) })
}

#[async_trait]
impl DriftSink for MemoryStore {
    fn name(&self) -> &str {
        "memory"
    }
    fn capabilities(&self) -> SinkCapabilities {
        SinkCapabilities { readable: true, resolves: true, findings: true }
    }
    /// One transaction, as in the SQL stores: the drifts, the waivers written in Git, the
    /// findings, the scan, then the events and audit entries of what changed.
    async fn record(&self, report: &ScanReport) -> Result<RecordOutcome> {
        let mut state = self.state();
        if state.scans.iter().any(|s| s.scan_id == report.scan_id) {
            return Ok(RecordOutcome { replayed: true, ..Default::default() });
        }
        let MemoryStoreState { rows, digests, scans, findings, act } = &mut *state;
        let mut written = write_drifts(rows, digests, report);
        act.git_waivers(rows, report, &mut written);
        let mut outcome = written.outcome;
        record_findings(findings, report, &mut outcome);
        scans.push(ScanRecord {
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
        outcome.events = act.enqueue(rows, report, &written.changes, &outcome);
        Ok(outcome)
    }
}

#[async_trait]
impl crate::identity::ChangeIdentities for MemoryStore {
    async fn identify(&self, drift_id: i64, identity: &crate::identity::ChangeIdentity) -> Result<bool> {
        let mut state = self.state();
        match row_mut(&mut state.rows, drift_id) {
            Some(row) => {
                row.changed_by_user = Some(identity.clone());
                Ok(true)
            }
            None => Ok(false),
        }
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
