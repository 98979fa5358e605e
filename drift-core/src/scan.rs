//! One scan pass as a library function: desired, then the scope it implies, then live, then
//! compare, then report. It awaits the traits and spawns nothing.

use std::collections::HashSet;

use chrono::{DateTime, Utc};

use crate::compare::Comparator;
use crate::model::{DesiredSnapshot, GroupKind, LiveSnapshot, ResourceKey, Scope, SourceWarning, is_cluster_scoped};
use crate::report::{ScanOutcome, ScanReport, Summary, object_digest};
use crate::source::{DesiredSource, LiveSource};

/// Options of one scan pass.
#[derive(Debug, Clone)]
pub struct ScanOptions {
    /// Unique id of the scan (a UUID in the binary).
    pub scan_id: String,
    /// Namespace given to namespaced desired objects that name none (`default`).
    pub default_namespace: String,
    /// Custom kinds known to be cluster-scoped (besides the built-in table).
    pub cluster_scoped: Vec<GroupKind>,
    /// Clock, replaceable in tests.
    pub clock: fn() -> DateTime<Utc>,
    /// Counts the objects compared, for a front end that shows progress.
    pub progress: crate::progress::Progress,
}

impl ScanOptions {
    /// Options with a scan id and the defaults.
    pub fn new(scan_id: impl Into<String>) -> Self {
        ScanOptions {
            scan_id: scan_id.into(),
            default_namespace: "default".to_owned(),
            cluster_scoped: Vec::new(),
            clock: Utc::now,
            progress: crate::progress::Progress::default(),
        }
    }
}

/// Runs one scan pass and returns its report. Failure is data: when the desired or the live
/// state cannot be read, the report says `Failed` with the error as a warning and lists no drift,
/// so that a sink resolves nothing.
pub async fn run_scan(
    desired: &dyn DesiredSource,
    live: &dyn LiveSource,
    comparator: &dyn Comparator,
    options: &ScanOptions,
) -> ScanReport {
    let cluster = live.cluster().to_owned();
    let mut report = empty_report(desired.name(), &cluster, options);

    let mut snapshot = match desired.fetch().await {
        Ok(s) => s,
        Err(e) => {
            report.warnings.push(SourceWarning::error(e.kind(), format!("desired state: {e}")));
            return finish(report, 0, options);
        }
    };
    let scope = prepare_desired(&mut snapshot, &mut report, options);
    let live_snapshot = match live.fetch(&scope).await {
        Ok(s) => s,
        Err(e) => {
            report.warnings.push(SourceWarning::error(e.kind(), format!("live state of {cluster}: {e}")));
            return finish(report, 0, options);
        }
    };
    compare_into(report, snapshot, live_snapshot, comparator, options)
}

/// The pure part of a scan, for callers that already hold both snapshots (`drift diff` on
/// files): the same namespace defaulting, duplicate check, coverage rules and report as
/// [`run_scan`], without copying the snapshots.
pub fn compare_snapshots(
    mut desired: DesiredSnapshot,
    live: LiveSnapshot,
    comparator: &dyn Comparator,
    options: &ScanOptions,
) -> ScanReport {
    let mut report = empty_report(&desired.repository, &live.cluster, options);
    prepare_desired(&mut desired, &mut report, options);
    compare_into(report, desired, live, comparator, options)
}

fn empty_report(repository: &str, cluster: &str, options: &ScanOptions) -> ScanReport {
    let started_at = (options.clock)();
    ScanReport {
        scan_id: options.scan_id.clone(),
        cluster: cluster.to_owned(),
        repository: repository.to_owned(),
        revision: None,
        started_at,
        finished_at: started_at,
        outcome: ScanOutcome::Failed,
        drifts: Vec::new(),
        coverage: Default::default(),
        warnings: Vec::new(),
        desired: Vec::new(),
        desired_digests: Vec::new(),
        desired_complete: false,
        summary: Summary::default(),
    }
}

/// Namespaces, duplicates, completeness: returns the live scope the desired state implies.
fn prepare_desired(snapshot: &mut DesiredSnapshot, report: &mut ScanReport, options: &ScanOptions) -> Scope {
    report.revision = snapshot.revision.clone();
    // Namespaces: the built-in table, then the configured custom kinds.
    for r in &mut snapshot.resources {
        let cluster_scoped = is_cluster_scoped(&r.key.group, &r.key.kind)
            || options.cluster_scoped.iter().any(|gk| gk.group == r.key.group && gk.kind == r.key.kind);
        if cluster_scoped {
            r.key.namespace = None;
        } else if r.key.namespace.is_none() {
            r.key.namespace = Some(options.default_namespace.clone());
        }
    }
    let mut seen = HashSet::new();
    snapshot.resources.retain(|r| {
        let fresh = seen.insert(r.key.clone());
        if !fresh {
            report.warnings.push(
                SourceWarning::error(
                    crate::ErrorKind::InvalidInput,
                    format!("{} is defined twice; the first definition is used", r.key),
                )
                .at(r.provenance.path.clone().unwrap_or_default(), r.provenance.document, None),
            );
        }
        fresh
    });
    report.desired_complete = !snapshot.warnings.iter().any(|w| w.fatal);
    report.warnings.extend(snapshot.warnings.iter().cloned());

    let mut desired: Vec<(ResourceKey, String)> =
        snapshot.resources.iter().map(|r| (r.key.clone(), object_digest(&r.object))).collect();
    desired.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    (report.desired, report.desired_digests) = desired.into_iter().unzip();
    snapshot.scope()
}

fn compare_into(
    mut report: ScanReport,
    snapshot: DesiredSnapshot,
    live_snapshot: LiveSnapshot,
    comparator: &dyn Comparator,
    options: &ScanOptions,
) -> ScanReport {
    for entry in live_snapshot.coverage.incomplete() {
        let ns = entry.namespace.as_deref().map(|n| format!(" in {n}")).unwrap_or_default();
        let kind = match &entry.status {
            crate::model::CoverageStatus::Forbidden { .. } => crate::ErrorKind::PermissionDenied,
            crate::model::CoverageStatus::NotServed { .. } => crate::ErrorKind::NotFound,
            _ => crate::ErrorKind::Unavailable,
        };
        let why = match &entry.status {
            crate::model::CoverageStatus::Forbidden { message }
            | crate::model::CoverageStatus::NotServed { message }
            | crate::model::CoverageStatus::Failed { message } => message.as_str(),
            crate::model::CoverageStatus::Complete => "",
        };
        report.warnings.push(SourceWarning::error(
            kind,
            format!(
                "live {}{ns} not read ({}): {why}",
                GroupKind::new(&entry.group, &entry.kind),
                entry.status.label()
            ),
        ));
    }

    // Only objects whose (kind, namespace) was read completely can be compared: an object that
    // could not be read is not "missing".
    let comparable: Vec<_> = snapshot
        .resources
        .into_iter()
        .filter(|r| live_snapshot.coverage.is_complete(&r.key.group, &r.key.kind, r.key.namespace.as_deref()))
        .collect();
    options.progress.comparing(comparable.len() as u64);
    report.drifts = comparator.compare_all(&comparable, &live_snapshot.resources);
    options.progress.compared(comparable.len() as u64);
    report.drifts.sort_by(|a, b| (a.key(), &a.path, a.drift_type).cmp(&(b.key(), &b.path, b.drift_type)));
    crate::waiver::apply(&mut report, &comparable, (options.clock)());
    let compared = comparable.len();
    report.coverage = live_snapshot.coverage;
    let fatal = report.warnings.iter().any(|w| w.fatal);
    report.outcome = if !fatal {
        ScanOutcome::Success
    } else if compared == 0 && !report.desired.is_empty() {
        // Git holds objects but none of them could be compared: the live source is down.
        ScanOutcome::Failed
    } else {
        ScanOutcome::Partial
    };
    finish(report, compared, options)
}

fn finish(mut report: ScanReport, compared: usize, options: &ScanOptions) -> ScanReport {
    report.finished_at = (options.clock)();
    report.summary = Summary::of(&report.drifts, compared, report.warnings.len());
    report
}

/// A report about one object only, for watch mode: the object is re-compared after a live
/// change, and only its own drifts may be opened or resolved (`desired` names it alone and
/// `desired_complete` is false, so [`ScanReport::may_resolve`] leaves every other object as it
/// was).
#[allow(clippy::too_many_arguments)]
pub fn targeted_report(
    all_desired: &[crate::Resource],
    desired: &crate::Resource,
    live: Option<&crate::Resource>,
    comparator: &dyn Comparator,
    cluster: &str,
    repository: &str,
    revision: Option<String>,
    options: &ScanOptions,
) -> ScanReport {
    let mut report = empty_report(repository, cluster, options);
    report.revision = revision;
    report.desired = vec![desired.key.clone()];
    report.desired_digests = vec![object_digest(&desired.object)];
    report.desired_complete = false;
    report.coverage.set(&desired.key.group_kind(), desired.key.namespace.as_deref(), crate::CoverageStatus::Complete);
    report.drifts = comparator.compare_in(all_desired, desired, live);
    report.drifts.sort_by(|a, b| (&a.path, a.drift_type).cmp(&(&b.path, b.drift_type)));
    crate::waiver::apply(&mut report, std::slice::from_ref(desired), (options.clock)());
    report.outcome = ScanOutcome::Success;
    finish(report, 1, options)
}

/// Applies the scan's namespace rules to a desired snapshot (what [`run_scan`] does first) and
/// returns the scope it implies; for callers that watch and re-compare objects one by one.
pub fn prepare(snapshot: &mut DesiredSnapshot, options: &ScanOptions) -> Scope {
    let mut scratch = empty_report(&snapshot.repository, "", options);
    prepare_desired(snapshot, &mut scratch, options)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::{CoverageStatus, Engine, EngineConfig, Resource};
    use serde_json::json;

    fn cm(ns: &str) -> Resource {
        Resource::from_object(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "namespace": ns}, "data": {"a": "1"}}))
        .unwrap()
    }

    fn scan_with(coverage: &[(&str, CoverageStatus)]) -> ScanReport {
        let desired = DesiredSnapshot {
            repository: "r".into(),
            revision: None,
            resources: coverage.iter().map(|(ns, _)| cm(ns)).collect(),
            warnings: Vec::new(),
        };
        let mut live = LiveSnapshot { cluster: "c".into(), resources: Vec::new(), coverage: Default::default() };
        for (ns, status) in coverage {
            live.coverage.set(&GroupKind::new("", "ConfigMap"), Some(ns), status.clone());
            if *status == CoverageStatus::Complete {
                live.resources.push(cm(ns));
            }
        }
        let engine = Engine::new(&EngineConfig::default()).unwrap();
        compare_snapshots(desired, live, &engine, &ScanOptions::new("s"))
    }

    #[test]
    fn outcome_is_failed_only_when_nothing_could_be_compared() {
        let down = || CoverageStatus::Failed { message: "503".into() };
        assert_eq!(scan_with(&[("a", CoverageStatus::Complete)]).outcome, ScanOutcome::Success);
        assert_eq!(scan_with(&[("a", CoverageStatus::Complete), ("b", down())]).outcome, ScanOutcome::Partial);
        let failed = scan_with(&[("a", down()), ("b", down())]);
        assert_eq!(failed.outcome, ScanOutcome::Failed);
        assert!(!failed.may_resolve(&cm("a").key), "a failed scan resolves nothing");
        assert_eq!(scan_with(&[]).outcome, ScanOutcome::Success, "an empty repository is not a failure");
    }
}
