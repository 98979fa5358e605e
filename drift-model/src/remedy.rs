//! Remediation as data and ports: what a revert sends ([`RevertPlan`]) and how a drift is put
//! back by hand ([`Revert`]), the ports the runtime acts through ([`ClusterWriter`]: reads one
//! object and sends a plan; [`ChangeProposer`]: proposes a change of the desired source as a
//! branch or pull request), and what a revert or an accept answers ([`RevertOutcome`],
//! [`AcceptOutcome`], [`Refusal`]). Planning a revert is `drift_engine::revert`;
//! docs/remediation.md describes how these are used and the safety rules.

use std::fmt;

use async_trait::async_trait;
use json_patch::Patch;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::path::Path;
use crate::{Resource, ResourceKey};

/// The field manager of every write the detector makes (`managedFields` shows it).
pub const FIELD_MANAGER: &str = "drift-detector";

/// How to put one drift back to Git's value by hand: the patch and the command.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Revert {
    /// RFC 6902 operations on the live object (`application/json-patch+json`).
    pub patch: Patch,
    /// The `kubectl patch` command that sends [`Revert::patch`].
    pub command: String,
}

/// What a revert sends to the API server for one object. `Debug` leaves out the values of a
/// Secret's plan.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
pub struct RevertPlan {
    /// apiVersion of the object.
    pub api_version: String,
    /// Kind.
    pub kind: String,
    /// Namespace (absent for cluster-scoped objects).
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
    /// The server-side apply body: apiVersion, kind, metadata.name (and namespace) and only the
    /// fields set back to Git's values. `None` when nothing is set (only removals).
    pub apply: Option<Value>,
    /// Removals of fields only the cluster has, each after a `test` of its current value.
    pub remove: Patch,
    /// The drift paths the plan covers.
    pub paths: Vec<String>,
    /// The `metadata.resourceVersion` of the object the plan was made from: the precondition of
    /// the write. A writer sends it with each request (a `test` of it in the removals, in the
    /// apply body), so that a plan made from an object that has changed since it was read is
    /// refused by the API server (a conflict) instead of overwriting the newer change. `None`
    /// when the object read has none (a write without a precondition).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_version: Option<String>,
}

impl fmt::Debug for RevertPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let secret = self.kind == "Secret" && crate::resource::split_api_version(&self.api_version).0.is_empty();
        let mut d = f.debug_struct("RevertPlan");
        d.field("api_version", &self.api_version)
            .field("kind", &self.kind)
            .field("namespace", &self.namespace)
            .field("name", &self.name)
            .field("paths", &self.paths)
            .field("resource_version", &self.resource_version);
        if secret {
            d.field("apply", &"<a Secret's values>").field("remove", &"<a Secret's values>");
        } else {
            d.field("apply", &self.apply).field("remove", &self.remove);
        }
        d.finish()
    }
}

impl RevertPlan {
    /// Whether the plan changes nothing.
    pub fn is_empty(&self) -> bool {
        self.apply.is_none() && self.remove.0.is_empty()
    }
}

/// Reads and writes the cluster for a revert. `drift-kube`'s `K8sSource` implements it;
/// an integrator with another way to reach the cluster implements it too.
#[async_trait]
pub trait ClusterWriter: Send + Sync + fmt::Debug {
    /// Reads one object now (not from a cache); `None` when it does not exist.
    async fn get(&self, api_version: &str, key: &ResourceKey) -> crate::Result<Option<Resource>>;
    /// Sends a plan (see [`RevertPlan`]) with field manager [`FIELD_MANAGER`]; with `dry_run`
    /// the server changes nothing. Returns the object as the server answered the last request
    /// (for a dry run: what the object would become).
    ///
    /// Must carry the plan's [`RevertPlan::resource_version`] as a precondition of every write,
    /// and answer an error of kind [`crate::ErrorKind::Conflict`] when the object has changed
    /// since the plan was made (another version, a failed `test`): the caller reads the object
    /// again and decides. Must never write a plan whose precondition does not hold.
    async fn send(&self, plan: &RevertPlan, live: &Resource, dry_run: bool) -> crate::Result<Resource>;
}

/// One field whose Git value must become the cluster's.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldChange {
    /// The engine's path of the field.
    pub path: Path,
    /// The cluster's value as the API server returned it; `None`: the cluster does not have the
    /// field, so Git must stop setting it.
    pub value: Option<Value>,
}

/// A change of the desired source that makes Git say what the cluster has, for one object.
#[derive(Debug, Clone, PartialEq)]
pub struct ChangeRequest {
    /// The object (as the scan keys it).
    pub key: ResourceKey,
    /// Its apiVersion.
    pub api_version: String,
    /// The fields, several drifts of the object in one change.
    pub changes: Vec<FieldChange>,
    /// The branch to write (the same for every request about the object, so that a second
    /// request updates the first proposal).
    pub branch: String,
    /// Title of the pull request and first line of the commit.
    pub title: String,
    /// Markdown body: the drifts (object, field, values, who changed it and when, a link).
    /// The proposer adds where each change was placed, and what it could not place.
    pub body: String,
}

/// What a proposer did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Proposal {
    /// The pull request's address, or the compare address of the pushed branch when the server
    /// is known; `None` when there is no address to show.
    pub url: Option<String>,
    /// The pull request's number, when one was opened or updated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pull_request: Option<u64>,
    /// The branch written.
    pub branch: String,
    /// Whether an earlier proposal (same branch, open pull request) was updated instead of a new
    /// one being opened.
    pub updated: bool,
    /// Where each field was placed (`spec.replicas: apps/web.yaml, edited in place`).
    pub placed: Vec<String>,
    /// What could not be placed, with the value to put where.
    pub unplaced: Vec<String>,
}

/// Proposes changes to one repository's desired state. `drift-git` implements it for git
/// servers and GitHub.
#[async_trait]
pub trait ChangeProposer: Send + Sync + fmt::Debug {
    /// The repository name (as reports name it) this proposer writes to.
    fn repository(&self) -> &str;
    /// Plans the change in a checkout of the source at its configured ref and publishes it.
    /// Nothing is published when nothing can be placed: the answer then has no branch written
    /// (`url` `None`, `placed` empty) and says what to put where in `unplaced`.
    async fn propose(&self, request: &ChangeRequest) -> crate::Result<Proposal>;
}

/// Why a revert or an accept was refused (docs/remediation.md, the safety rules).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Refusal {
    /// The drift is resolved already.
    Resolved,
    /// The drift is under a waiver.
    Waived,
    /// The object is missing from the cluster: that is a sync, not a patch.
    MissingObject,
    /// A Secret (not reverted unless allowed; never accepted into Git).
    Secret,
    /// A controller owns the field: it would put its value back.
    ControllerManaged,
    /// Git no longer declares the object.
    NotInGit,
    /// Git and the cluster agree now; the next scan resolves the drift.
    NoLongerDrifted,
    /// The server's dry run does not show the intended change (an admission webhook, a
    /// defaulting rule or a validation stands in the way).
    DryRunMismatch,
    /// Remediation of this kind is not configured (no cluster writer, no proposer for the
    /// repository, self-heal off).
    NotConfigured,
    /// None of the changes could be placed in the desired source.
    Unplaceable,
    /// The drifted field no longer holds the value the revert was planned against (the drift's
    /// cluster value, or the value a dry run showed): someone changed it since. The refusal
    /// names both values; the newer value is left in place.
    Stale,
    /// The drift is of another cluster than the one this detector writes to.
    OtherCluster,
    /// Other fields of the object kept changing between each read and write, however often the
    /// revert read it again; the refusal names what changed.
    ConcurrentChange,
}

impl Refusal {
    /// Every refusal.
    pub const ALL: [Refusal; 13] = [
        Refusal::Resolved,
        Refusal::Waived,
        Refusal::MissingObject,
        Refusal::Secret,
        Refusal::ControllerManaged,
        Refusal::NotInGit,
        Refusal::NoLongerDrifted,
        Refusal::DryRunMismatch,
        Refusal::NotConfigured,
        Refusal::Unplaceable,
        Refusal::Stale,
        Refusal::OtherCluster,
        Refusal::ConcurrentChange,
    ];

    /// snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::Resolved => "resolved",
            Refusal::Waived => "waived",
            Refusal::MissingObject => "missing_object",
            Refusal::Secret => "secret",
            Refusal::ControllerManaged => "controller_managed",
            Refusal::NotInGit => "not_in_git",
            Refusal::NoLongerDrifted => "no_longer_drifted",
            Refusal::DryRunMismatch => "dry_run_mismatch",
            Refusal::NotConfigured => "not_configured",
            Refusal::Unplaceable => "unplaceable",
            Refusal::Stale => "stale",
            Refusal::OtherCluster => "other_cluster",
            Refusal::ConcurrentChange => "concurrent_change",
        }
    }
}

/// A refusal with its sentence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{message}")]
pub struct Refused {
    /// Why.
    pub refusal: Refusal,
    /// A sentence naming the drift and the reason.
    pub message: String,
    /// What the refusal is about, as data (never a Secret's value): for `stale`, `planned` (the
    /// value the revert was planned against) and `found` (the value the cluster holds now,
    /// `null` when the field is gone); for `concurrent_change`, `changed` (the JSON pointers
    /// that changed). The API answers them next to `error` and `refusal`, and the audit entry
    /// of the refusal records them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<Value>,
}

/// Why a revert or an accept did not happen: refused by a safety rule, or failed.
#[derive(Debug, thiserror::Error)]
pub enum Fault {
    /// A safety rule refused it (an answer, not an error of the service).
    #[error(transparent)]
    Refused(#[from] Refused),
    /// The store, the cluster or the git server failed.
    #[error(transparent)]
    Failed(#[from] crate::Error),
}

impl Fault {
    /// A refusal with a sentence.
    pub fn refused(refusal: Refusal, message: impl Into<String>) -> Self {
        Fault::Refused(Refused { refusal, message: message.into(), detail: None })
    }

    /// A refusal with a sentence and what it is about as data ([`Refused::detail`]).
    pub fn refused_with(refusal: Refusal, message: impl Into<String>, detail: Value) -> Self {
        Fault::Refused(Refused { refusal, message: message.into(), detail: Some(detail) })
    }
}

/// How a revert went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RevertStatus {
    /// Sent: the next scan or watch event resolves the drift as `reverted`.
    Reverted,
    /// Dry run only: the server showed the intended change; nothing changed.
    DryRun,
}

/// What a revert did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RevertOutcome {
    /// The drift asked about.
    pub drift_id: i64,
    /// Reverted or dry run.
    pub status: RevertStatus,
    /// The object, `group/kind namespace/name`.
    pub object: String,
    /// The drift paths the revert covers.
    pub paths: Vec<String>,
    /// The plan sent; absent for a Secret (it carries values).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<RevertPlan>,
    /// The cluster's value the revert replaced (for a dry run: would replace), as the drift
    /// shows values; `null` when the cluster lacked the field. Absent for a Secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaced: Option<Value>,
    /// Git's value the revert wrote (for a dry run: would write); `null` when the field is
    /// removed. Absent for a Secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub written: Option<Value>,
    /// Who asked.
    pub actor: String,
    /// A retry whose revert was done already: the audit entry of the earlier revert of the
    /// drift (an attempt whose answer was lost, interrupted or recorded) whose value the
    /// cluster holds now. Nothing was written this time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub earlier: Option<i64>,
}

/// What an accept did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AcceptOutcome {
    /// The drifts the change covers (the ones asked about and earlier accepted drifts of the
    /// same object that are still live).
    pub drift_ids: Vec<i64>,
    /// The object, `group/kind namespace/name`.
    pub object: String,
    /// What the proposer did.
    pub proposal: Proposal,
    /// Who asked.
    pub actor: String,
}

/// Why no patch or plan can be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RemedyError {
    /// Secret values are never put in a patch that is shown or stored.
    #[error("a Secret's values are never written into a patch")]
    Secret,
    /// The field's parent is missing from the object, and Git's value cannot be placed there.
    #[error("`{path}` cannot be placed: its parent is missing from the live object")]
    NoParent {
        /// The drift path.
        path: String,
    },
    /// Git and the cluster agree on the path (nothing to do).
    #[error("`{path}` already has Git's value")]
    NothingToDo {
        /// The drift path.
        path: String,
    },
}

impl From<RemedyError> for crate::Error {
    fn from(e: RemedyError) -> Self {
        crate::Error::invalid_input(e.to_string())
    }
}
