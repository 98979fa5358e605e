//! The scan report: what one scan pass found, handed to every sink.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use crate::drift::{Drift, DriftType, Severity};
use crate::finding::{Finding, Side};
use crate::resource::{ResourceKey, SourceWarning};
use crate::snapshot::Coverage;

/// How a scan ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScanOutcome {
    /// Desired and live were read completely.
    Success,
    /// Something was read only in part (files that did not parse, kinds or namespaces not
    /// covered). Drifts outside the covered scope must not be resolved.
    Partial,
    /// The scan could not compare anything (desired state unreadable, live source down).
    Failed,
}

impl ScanOutcome {
    /// snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            ScanOutcome::Success => "success",
            ScanOutcome::Partial => "partial",
            ScanOutcome::Failed => "failed",
        }
    }
}

/// How a resolved drift went away (stored with it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Resolution {
    /// The cluster was put back to what Git says (Git's object is unchanged).
    Reverted,
    /// Git changed (a new commit), and the drift is gone: the change was accepted into Git.
    Accepted,
    /// The object is gone: Git no longer holds it, or it was deleted from the cluster (the
    /// report that resolves the drift finds it missing there).
    Removed,
}

impl Resolution {
    /// snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Resolution::Reverted => "reverted",
            Resolution::Accepted => "accepted",
            Resolution::Removed => "removed",
        }
    }
}

impl std::str::FromStr for Resolution {
    type Err = crate::Error;
    fn from_str(s: &str) -> crate::Result<Self> {
        match s {
            "reverted" => Ok(Resolution::Reverted),
            "accepted" => Ok(Resolution::Accepted),
            "removed" => Ok(Resolution::Removed),
            other => Err(crate::Error::invalid_input(format!("unknown resolution `{other}`"))),
        }
    }
}

/// Counts of a report, for output and the `scans` table.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    /// Desired objects compared.
    pub resources_compared: usize,
    /// Drifts found.
    pub drifts: usize,
    /// Drifts by severity.
    pub by_severity: BTreeMap<Severity, usize>,
    /// Drifts by type.
    pub by_type: BTreeMap<DriftType, usize>,
    /// Objects with at least one drift.
    pub resources_drifted: usize,
    /// Warnings and errors of the sources.
    pub warnings: usize,
}

impl Summary {
    /// Counts a list of drifts.
    pub fn of(drifts: &[Drift], resources_compared: usize, warnings: usize) -> Self {
        let mut s = Summary { resources_compared, drifts: drifts.len(), warnings, ..Summary::default() };
        // The objects drifted, told apart by their borrowed keys (no key is copied).
        let mut drifted = std::collections::HashSet::with_capacity(drifts.len());
        for d in drifts {
            *s.by_severity.entry(d.severity).or_default() += 1;
            *s.by_type.entry(d.drift_type).or_default() += 1;
            let r = &d.resource;
            drifted.insert((d.api_group.as_str(), r.kind.as_str(), r.namespace.as_deref(), r.name.as_str()));
        }
        s.resources_drifted = drifted.len();
        s
    }
}

/// Everything one scan found. A sink records it; the same report recorded twice changes nothing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScanReport {
    /// Unique id of the scan (sinks are idempotent per scan id).
    pub scan_id: String,
    /// Cluster name.
    pub cluster: String,
    /// Repository name.
    pub repository: String,
    /// Revision of the desired state.
    pub revision: Option<String>,
    /// When the scan started.
    pub started_at: DateTime<Utc>,
    /// When it finished.
    pub finished_at: DateTime<Utc>,
    /// How it ended.
    pub outcome: ScanOutcome,
    /// Drifts found, sorted by object then path.
    pub drifts: Vec<Drift>,
    /// Live coverage: only drifts inside complete coverage may be resolved.
    pub coverage: Coverage,
    /// Problems of the desired and live sources.
    pub warnings: Vec<SourceWarning>,
    /// Every object of the desired state this scan read, sorted (compared or not: an object
    /// whose namespace could not be read is listed here but not compared).
    pub desired: Vec<ResourceKey>,
    /// [`object_digest`](crate::object_digest) of each object of `desired`, in the same order (empty when unknown):
    /// a sink keeps the digest with each open drift to tell, when the drift goes away, whether
    /// Git changed ([`Resolution::Accepted`]) or the cluster was put back.
    #[serde(default)]
    pub desired_digests: Vec<String>,
    /// Whether the whole desired state was read (no file failed to parse or render).
    pub desired_complete: bool,
    /// Objects of `desired` that cannot be compared as Git holds them (a SOPS-encrypted manifest
    /// without its key, [`crate::secret::is_sops_encrypted`]), sorted: not compared, and their
    /// open drifts neither resolved nor changed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub uncomparable: Vec<ResourceKey>,
    /// Counts.
    pub summary: Summary,
    /// Policy findings ([`crate::finding`]), sorted by object, side, rule, path: apart from the
    /// drifts, and counted in no drift summary.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<Finding>,
    /// The sides this scan checked policies on (empty: policies were not checked). A stored
    /// finding is resolved only by a report that checked its side
    /// ([`ScanReport::may_resolve_finding`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub policy_sides: Vec<Side>,
    /// The `metadata.resourceVersion` of the live object each object of `desired` was compared
    /// with, in the same order (an empty string: no live object, or one without a version;
    /// the whole list is empty when no live object had one). Not serialized: it lets a watch
    /// tell whether an event it holds is older than what this report recorded
    /// ([`ScanReport::live_version`]).
    #[serde(skip)]
    pub live_versions: Vec<String>,
}

impl ScanReport {
    /// The `resourceVersion` of the live object `key` was compared with, when known.
    pub fn live_version(&self, key: &ResourceKey) -> Option<&str> {
        let i = self.desired.binary_search(key).ok()?;
        self.live_versions.get(i).map(String::as_str).filter(|v| !v.is_empty())
    }

    /// The digest of a desired object of this report, if known.
    pub fn desired_digest(&self, key: &ResourceKey) -> Option<&str> {
        let i = self.desired.binary_search(key).ok()?;
        self.desired_digests.get(i).map(String::as_str)
    }

    /// How an open drift of `key` that this report resolves went away, given the digest of the
    /// desired object when the drift was last seen: [`Resolution::Removed`] when the object is
    /// gone (Git no longer holds it, or this report finds it missing from the cluster: a
    /// `missing_resource` drift of it), [`Resolution::Accepted`] when Git's object changed since,
    /// [`Resolution::Reverted`] otherwise (also when a digest is unknown).
    ///
    /// The digest covers the whole object: a commit that changes another field of the object
    /// in the same scan in which the cluster is put back also counts as accepted.
    pub fn resolution(&self, key: &ResourceKey, last_digest: Option<&str>) -> Resolution {
        if self.desired.binary_search(key).is_err() || self.shows_missing(key) {
            return Resolution::Removed;
        }
        match (self.desired_digest(key), last_digest) {
            (Some(now), Some(then)) if now != then => Resolution::Accepted,
            _ => Resolution::Reverted,
        }
    }

    /// Whether this report finds the object missing from the cluster (a `missing_resource`
    /// drift of it): a drift of a deleted object went away with the object, it was not reverted.
    pub fn shows_missing(&self, key: &ResourceKey) -> bool {
        self.drifts.iter().any(|d| {
            d.drift_type == DriftType::MissingResource
                && d.api_group == key.group
                && d.resource.kind == key.kind
                && d.resource.namespace == key.namespace
                && d.resource.name == key.name
        })
    }

    /// Whether an open drift of this object that this report does not list may be marked
    /// resolved (docs/storage.md, "The lifecycle of a drift"):
    ///
    /// - never when the scan failed, nor for an object it could not compare (`uncomparable`);
    /// - for an object of the desired state, only when its (kind, namespace) was read completely;
    /// - for an object Git does not hold (removed from Git, or an unmanaged object), only when
    ///   the whole desired state was read (a file that did not parse must not look like "the
    ///   object was removed from Git") and its (kind, namespace), if this scan read it, was read
    ///   completely.
    ///
    /// `desired` must be sorted (as `drift_engine::scan::run_scan` leaves it).
    pub fn may_resolve(&self, key: &ResourceKey) -> bool {
        if self.outcome == ScanOutcome::Failed || self.uncomparable.binary_search(key).is_ok() {
            return false;
        }
        if self.desired.binary_search(key).is_ok() {
            self.coverage.is_complete(&key.group, &key.kind, key.namespace.as_deref())
        } else {
            // An object Git does not hold (removed from Git, or unmanaged): the desired state
            // must be whole, and its (kind, namespace), when this scan tried to read it, read
            // completely (an unmanaged object not seen because its namespace failed is not gone).
            self.desired_complete
                && self
                    .coverage
                    .status(&key.group, &key.kind, key.namespace.as_deref())
                    .is_none_or(crate::CoverageStatus::is_complete)
        }
    }

    /// Whether an open finding of this object and side that this report does not list may be
    /// marked resolved: the report checked policies on that side, and [`ScanReport::may_resolve`]
    /// allows it for the object (the same coverage rule as drifts: a finding is never resolved
    /// by a scan that could not read its object completely).
    pub fn may_resolve_finding(&self, key: &ResourceKey, side: Side) -> bool {
        self.policy_sides.contains(&side) && self.may_resolve(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::drift::{Classification, DecisionSource, RecommendedAction, ResourceRef};

    fn drift(group: &str, kind: &str, namespace: Option<&str>, name: &str, severity: Severity) -> Drift {
        Drift {
            resource: ResourceRef {
                api_version: "v1".to_owned(),
                kind: kind.to_owned(),
                namespace: namespace.map(str::to_owned),
                name: name.to_owned(),
            },
            api_group: group.to_owned(),
            drift_type: DriftType::ImageTagDrift,
            severity,
            path: "spec".to_owned(),
            git_value: None,
            cluster_value: None,
            changed_by: None,
            changed_at: None,
            attribution: None,
            classification: Classification::ManualChange,
            decision_source: DecisionSource::Scanner,
            recommended_action: RecommendedAction::SuggestRevert,
            source_path: None,
            waiver: None,
            revert: None,
        }
    }

    /// An object drifted is counted once however many drifts it has, and two objects that
    /// differ in any part of their key (group, kind, namespace, name) are two.
    #[test]
    fn the_summary_counts_each_drifted_object_once_by_its_whole_key() {
        let drifts = [
            drift("apps", "Deployment", Some("a"), "web", Severity::Low),
            drift("apps", "Deployment", Some("a"), "web", Severity::High),
            drift("", "Deployment", Some("a"), "web", Severity::Low),
            drift("apps", "StatefulSet", Some("a"), "web", Severity::Low),
            drift("apps", "Deployment", Some("b"), "web", Severity::Low),
            drift("apps", "Deployment", None, "web", Severity::Low),
            drift("apps", "Deployment", Some("a"), "api", Severity::Low),
            drift("apps", "Deployment", Some("a"), "web", Severity::Low),
        ];
        let s = Summary::of(&drifts, 9, 2);
        assert_eq!((s.drifts, s.resources_drifted, s.resources_compared, s.warnings), (8, 6, 9, 2));
        assert_eq!(s.by_severity.get(&Severity::Low), Some(&7));
        assert_eq!(s.by_severity.get(&Severity::High), Some(&1));
        assert_eq!(s.by_type.get(&DriftType::ImageTagDrift), Some(&8));
    }
}
