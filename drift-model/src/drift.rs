//! A drift: one difference between Git and the cluster, with its type, severity and attribution.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::resource::ResourceKey;

/// The kind of a drift (docs/drift-types.md). Decided per path by `drift_engine::verdict`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DriftType {
    /// A Service port, targetPort, nodePort or protocol differs.
    ServicePortDrift,
    /// A container image (repository, tag or digest) differs.
    ImageTagDrift,
    /// A container's resources.limits differ.
    ResourceLimitDrift,
    /// A container's resources.requests differ.
    ResourceRequestDrift,
    /// spec.replicas differs.
    ReplicasDrift,
    /// ConfigMap data or binaryData differ.
    ConfigmapDrift,
    /// Secret data differs (keys named, values never shown).
    SecretDrift,
    /// In Git, absent from the cluster.
    MissingResource,
    /// In the cluster, in a kind and namespace Git manages, declared by no desired object
    /// (opt-in: `orphans`; `drift_engine::orphans`).
    UnmanagedResource,
    /// Any other field of the spec differs.
    SpecDrift,
    /// Labels or annotations differ.
    MetadataDrift,
}

impl DriftType {
    /// Every type, in table order.
    pub const ALL: [DriftType; 11] = [
        DriftType::ServicePortDrift,
        DriftType::ImageTagDrift,
        DriftType::ResourceLimitDrift,
        DriftType::ResourceRequestDrift,
        DriftType::ReplicasDrift,
        DriftType::ConfigmapDrift,
        DriftType::SecretDrift,
        DriftType::MissingResource,
        DriftType::UnmanagedResource,
        DriftType::SpecDrift,
        DriftType::MetadataDrift,
    ];

    /// The snake_case name used in JSON, the database and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            DriftType::ServicePortDrift => "service_port_drift",
            DriftType::ImageTagDrift => "image_tag_drift",
            DriftType::ResourceLimitDrift => "resource_limit_drift",
            DriftType::ResourceRequestDrift => "resource_request_drift",
            DriftType::ReplicasDrift => "replicas_drift",
            DriftType::ConfigmapDrift => "configmap_drift",
            DriftType::SecretDrift => "secret_drift",
            DriftType::MissingResource => "missing_resource",
            DriftType::UnmanagedResource => "unmanaged_resource",
            DriftType::SpecDrift => "spec_drift",
            DriftType::MetadataDrift => "metadata_drift",
        }
    }
}

impl fmt::Display for DriftType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for DriftType {
    type Err = crate::Error;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        DriftType::ALL
            .into_iter()
            .find(|t| t.as_str() == s)
            .ok_or_else(|| crate::Error::invalid_input(format!("unknown drift type {s:?}")))
    }
}

/// How urgent a drift is. Ordered from least to most severe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Severity {
    /// Informational.
    Low,
    /// Should be looked at.
    Medium,
    /// Likely to matter.
    High,
    /// Likely to break traffic or security.
    Critical,
}

impl Severity {
    /// Every severity, from least to most severe.
    pub const ALL: [Severity; 4] = [Severity::Low, Severity::Medium, Severity::High, Severity::Critical];

    /// Upper-case name (`CRITICAL`).
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Low => "LOW",
            Severity::Medium => "MEDIUM",
            Severity::High => "HIGH",
            Severity::Critical => "CRITICAL",
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Severity {
    type Err = crate::Error;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Severity::ALL
            .into_iter()
            .find(|v| v.as_str().eq_ignore_ascii_case(s))
            .ok_or_else(|| crate::Error::invalid_input(format!("unknown severity {s:?} (LOW, MEDIUM, HIGH, CRITICAL)")))
    }
}

/// Who last changed a field, from the live object's `managedFields`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attribution {
    /// Field manager (`kubectl-edit`, `kube-controller-manager`, ...).
    pub manager: String,
    /// `Update` or `Apply`.
    pub operation: String,
    /// When the manager last wrote the field set.
    pub time: Option<DateTime<Utc>>,
    /// Subresource written through (`scale`, `status`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subresource: Option<String>,
}

/// What kind of change caused a drift (docs/drift-types.md, "Attribution and decisions").
/// Decided by `drift_engine::verdict::classification_of`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Classification {
    /// A person changed the cluster by hand (kubectl edit/scale/set/patch/label, a dashboard).
    ManualChange,
    /// A controller owns the field: a known controller of the object's kind, or a write that
    /// says it is a controller's (a `status` or `scale` subresource update, an object a
    /// controller owns). A field manager's name alone never makes it so.
    ControllerManaged,
    /// The GitOps applier owns the live value: Git changed and has not been applied yet.
    PendingSync,
    /// The cluster cannot tell: a field manager on no list (a name anyone can choose), no
    /// managedFields, or the object is missing. Reverted and healed like a change by hand.
    Unknown,
}

impl Classification {
    /// snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Classification::ManualChange => "manual_change",
            Classification::ControllerManaged => "controller_managed",
            Classification::PendingSync => "pending_sync",
            Classification::Unknown => "unknown",
        }
    }
}

/// Who made the decision recorded with a drift.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DecisionSource {
    /// The scanner's rules (every drift the engine produces).
    Scanner,
    /// A person, through the API.
    Human,
    /// An AI assistant, through the API.
    Ai,
}

impl DecisionSource {
    /// snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            DecisionSource::Scanner => "scanner",
            DecisionSource::Human => "human",
            DecisionSource::Ai => "ai",
        }
    }
}

/// What to do about a drift.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RecommendedAction {
    /// Nothing yet: a controller owns it, or a sync is pending.
    Observe,
    /// Put the cluster back to what Git says.
    SuggestRevert,
    /// The change looks intentional: record it in Git.
    CreatePr,
}

impl RecommendedAction {
    /// snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            RecommendedAction::Observe => "observe",
            RecommendedAction::SuggestRevert => "suggest_revert",
            RecommendedAction::CreatePr => "create_pr",
        }
    }
}

/// The reference to an object as shown in output (`resource` in the JSON of `drift diff`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ResourceRef {
    /// apiVersion of the desired object.
    #[serde(rename = "apiVersion")]
    pub api_version: String,
    /// Kind.
    pub kind: String,
    /// Namespace, absent for cluster-scoped objects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
}

/// One difference between Git and the cluster.
///
/// `git_value` and `cluster_value` are normalised values (canonical quantities; Secret values
/// replaced by keyed hashes). `None` means the field is absent on that side.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Drift {
    /// The object.
    pub resource: ResourceRef,
    /// API group of the object (empty for core).
    pub api_group: String,
    /// Drift type.
    pub drift_type: DriftType,
    /// Severity (from the severity table).
    pub severity: Severity,
    /// Path of the field, dotted with keyed list items in brackets; empty for a missing object.
    pub path: String,
    /// What Git says.
    pub git_value: Option<Value>,
    /// What the cluster has.
    pub cluster_value: Option<Value>,
    /// Field manager that last wrote the field, when the cluster tells.
    pub changed_by: Option<String>,
    /// When that manager wrote it.
    pub changed_at: Option<DateTime<Utc>>,
    /// Full attribution (manager, operation, time, subresource).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attribution: Option<Attribution>,
    /// Manual change, controller-managed, pending sync or unknown.
    pub classification: Classification,
    /// Who decided (always `scanner` for the engine).
    pub decision_source: DecisionSource,
    /// What to do.
    pub recommended_action: RecommendedAction,
    /// Repository file the desired object came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_path: Option<String>,
    /// The waiver written in Git that covers this drift, when one does ([`crate::waiver`]):
    /// the drift is then recorded as waived and does not count as open.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiver: Option<crate::waiver::Waiver>,
    /// How to put the field back to Git's value by hand: an RFC 6902 patch on the live object
    /// and the `kubectl` command that sends it ([`crate::remedy`]). Absent for a missing object
    /// (that is a sync), for Secrets (the patch would carry the value), and from comparators that
    /// do not make one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revert: Option<crate::remedy::Revert>,
}

impl Drift {
    /// The identity key of the drifted object.
    pub fn key(&self) -> ResourceKey {
        ResourceKey {
            group: self.api_group.clone(),
            kind: self.resource.kind.clone(),
            namespace: self.resource.namespace.clone(),
            name: self.resource.name.clone(),
        }
    }

    /// The drift's identity (docs/storage.md, column `fingerprint`): a SHA-256 over cluster, repository,
    /// group/kind/namespace/name, drift type and path. Values are not part of it.
    ///
    /// ```
    /// # use drift_model::*;
    /// let f = drift_fingerprint("prod", "platform", &ResourceKey::new("apps", "Deployment", Some("shop"), "web"),
    ///     DriftType::ReplicasDrift, "spec.replicas");
    /// assert_eq!(f.len(), 64);
    /// ```
    pub fn fingerprint(&self, cluster: &str, repository: &str) -> String {
        drift_fingerprint(cluster, repository, &self.key(), self.drift_type, &self.path)
    }
}

/// See [`Drift::fingerprint`].
pub fn drift_fingerprint(
    cluster: &str,
    repository: &str,
    key: &ResourceKey,
    drift_type: DriftType,
    path: &str,
) -> String {
    let mut h = Sha256::new();
    for part in [
        cluster,
        repository,
        &key.group,
        &key.kind,
        key.namespace.as_deref().unwrap_or(""),
        &key.name,
        drift_type.as_str(),
        path,
    ] {
        // Length-prefixed so that ("ab","c") and ("a","bc") differ.
        h.update((part.len() as u64).to_le_bytes());
        h.update(part.as_bytes());
    }
    hex::encode(h.finalize())
}
