//! The data model: resource identity, resources with provenance, snapshots, scope and coverage.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A group and a kind (`apps`/`Deployment`; the core group is the empty string).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct GroupKind {
    /// API group, empty for the core group.
    pub group: String,
    /// Kind, as in the object's `kind` field.
    pub kind: String,
}

impl GroupKind {
    /// Builds a group/kind.
    pub fn new(group: impl Into<String>, kind: impl Into<String>) -> Self {
        GroupKind { group: group.into(), kind: kind.into() }
    }
}

impl fmt::Display for GroupKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.is_empty() { write!(f, "{}", self.kind) } else { write!(f, "{}/{}", self.group, self.kind) }
    }
}

/// The identity of an object: group, kind, namespace and name. The API version is not part of
/// identity (`apps/v1` and `apps/v1beta2` name the same Deployment).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ResourceKey {
    /// API group, empty for the core group.
    pub group: String,
    /// Kind.
    pub kind: String,
    /// Namespace; `None` for cluster-scoped objects.
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
}

impl ResourceKey {
    /// Builds a key.
    pub fn new(
        group: impl Into<String>,
        kind: impl Into<String>,
        namespace: Option<&str>,
        name: impl Into<String>,
    ) -> Self {
        ResourceKey {
            group: group.into(),
            kind: kind.into(),
            namespace: namespace.map(str::to_owned),
            name: name.into(),
        }
    }

    /// The group/kind part.
    pub fn group_kind(&self) -> GroupKind {
        GroupKind::new(self.group.clone(), self.kind.clone())
    }

    /// The same key in another namespace.
    pub fn with_namespace(&self, namespace: Option<&str>) -> Self {
        ResourceKey { namespace: namespace.map(str::to_owned), ..self.clone() }
    }

    /// Bytes its strings hold on the heap.
    pub fn heap_bytes(&self) -> usize {
        self.group.len() + self.kind.len() + self.name.len() + self.namespace.as_ref().map_or(0, String::len)
    }
}

impl fmt::Display for ResourceKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.group_kind())?;
        match &self.namespace {
            Some(ns) => write!(f, " {}/{}", ns, self.name),
            None => write!(f, " {}", self.name),
        }
    }
}

/// Splits an `apiVersion` into group and version (`apps/v1` -> (`apps`, `v1`); `v1` -> (``, `v1`)).
pub fn split_api_version(api_version: &str) -> (&str, &str) {
    match api_version.split_once('/') {
        Some((group, version)) => (group, version),
        None => ("", api_version),
    }
}

/// Where a resource came from.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Provenance {
    /// Repository name or URL (desired state).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repository: Option<String>,
    /// Path of the file inside the repository (desired state).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Index of the document inside that file, from 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub document: Option<usize>,
    /// Commit or other revision the file was read at (desired state).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
    /// Cluster name (live state).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    /// Ignore rules of the GitOps object that deploys this one (an Argo CD Application's
    /// `ignoreDifferences`, a Flux HelmRelease's `driftDetection.ignore`), applied to it as the
    /// configured rules are (desired state).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ignore: Vec<crate::ignore::IgnoreRule>,
    /// Set when the object was opened from a SOPS-encrypted document
    /// ([`crate::sops::open_file`]): the digest of the document as Git holds it (ciphertext),
    /// which the scan reports in place of the digest of the object, so that no digest of the
    /// plaintext leaves memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sops_digest: Option<String>,
}

/// A Kubernetes object with its identity and provenance.
///
/// Live resources keep `metadata.managedFields` for attribution; the comparison never looks at
/// them. Sources never normalise: [`crate::normalize`] is the only place that does.
///
/// The object is shared: cloning a resource (a snapshot handed to a scan, to the watch's index,
/// kept by a source between fetches) copies its key, not its tree. Reads go through `Deref`
/// (`resource.object["spec"]`); a change goes through [`Arc::make_mut`], which copies the tree
/// only when another holder shares it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Resource {
    /// Identity.
    pub key: ResourceKey,
    /// `apiVersion` of the object as read.
    pub api_version: String,
    /// The whole object, shared between clones.
    pub object: Arc<Value>,
    /// Where it came from.
    #[serde(default)]
    pub provenance: Provenance,
}

impl Resource {
    /// Builds a resource from an object, reading apiVersion, kind, namespace and name from it.
    ///
    /// ```
    /// let r = drift_core::Resource::from_object(serde_json::json!({
    ///     "apiVersion": "apps/v1", "kind": "Deployment",
    ///     "metadata": {"name": "web", "namespace": "shop"}
    /// })).unwrap();
    /// assert_eq!(r.key.group, "apps");
    /// assert_eq!(r.key.namespace.as_deref(), Some("shop"));
    /// ```
    pub fn from_object(object: impl Into<Arc<Value>>) -> crate::Result<Self> {
        let object = object.into();
        let api_version = object
            .get("apiVersion")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .ok_or_else(|| crate::Error::invalid_input("object has no apiVersion"))?
            .to_owned();
        let kind = object
            .get("kind")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .ok_or_else(|| crate::Error::invalid_input("object has no kind"))?
            .to_owned();
        let metadata = object.get("metadata");
        let name = metadata
            .and_then(|m| m.get("name"))
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .ok_or_else(|| crate::Error::invalid_input(format!("{kind} has no metadata.name")))?
            .to_owned();
        let namespace = metadata
            .and_then(|m| m.get("namespace"))
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned);
        let (group, _) = split_api_version(&api_version);
        let key = ResourceKey { group: group.to_owned(), kind, namespace, name };
        Ok(Resource { key, api_version, object, provenance: Provenance::default() })
    }

    /// Sets the provenance.
    pub fn with_provenance(mut self, provenance: Provenance) -> Self {
        self.provenance = provenance;
        self
    }
}

/// A [`Resource`] kept small: its object as compact JSON text instead of a tree. A
/// `serde_json::Value` spends a B-tree node with room for 11 entries on every mapping, however
/// few it holds: a small Deployment of 500 bytes of JSON is about 11 KiB as a tree. A process
/// that keeps objects between uses (the Git source's caches, the watch's index of what Git
/// holds) keeps them in this form and [`CompactResource::expand`]s one when it needs it, equal
/// to the resource it was made from (the JSON keeps every number exactly).
///
/// ```
/// use drift_core::{CompactResource, Resource};
/// let r = Resource::from_object(serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
///     "metadata": {"name": "web", "namespace": "shop"}, "data": {"ratio": 0.1}})).unwrap();
/// let c = CompactResource::new(&r);
/// assert_eq!(c.key, r.key);
/// assert_eq!(c.expand(), r);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct CompactResource {
    /// Identity.
    pub key: ResourceKey,
    /// `apiVersion` of the object as read.
    pub api_version: String,
    /// Where it came from.
    pub provenance: Provenance,
    json: Box<[u8]>,
}

impl CompactResource {
    /// The compact form of `resource`.
    pub fn new(resource: &Resource) -> Self {
        CompactResource {
            key: resource.key.clone(),
            api_version: resource.api_version.clone(),
            provenance: resource.provenance.clone(),
            // Writing a `Value` to memory cannot fail (its keys are strings).
            json: serde_json::to_vec(&*resource.object).unwrap_or_default().into_boxed_slice(),
        }
    }

    /// The resource back, with a tree of its own.
    pub fn expand(&self) -> Resource {
        // The text was written from a `Value`: it reads back.
        let object = serde_json::from_slice(&self.json).unwrap_or(Value::Null);
        Resource {
            key: self.key.clone(),
            api_version: self.api_version.clone(),
            object: Arc::new(object),
            provenance: self.provenance.clone(),
        }
    }

    /// The object as compact JSON.
    pub fn json(&self) -> &[u8] {
        &self.json
    }

    /// Bytes held on the heap (the object's text, key and apiVersion; the provenance's paths
    /// and rules are not counted).
    pub fn heap_bytes(&self) -> usize {
        self.json.len() + self.api_version.len() + self.key.heap_bytes()
    }
}

impl From<&Resource> for CompactResource {
    fn from(r: &Resource) -> Self {
        CompactResource::new(r)
    }
}

/// Kinds of the built-in API that are cluster-scoped. Desired objects of other kinds without a
/// namespace are placed in the scan's default namespace.
pub const CLUSTER_SCOPED_KINDS: &[(&str, &str)] = &[
    ("", "Namespace"),
    ("", "Node"),
    ("", "PersistentVolume"),
    ("", "ComponentStatus"),
    ("rbac.authorization.k8s.io", "ClusterRole"),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
    ("apiextensions.k8s.io", "CustomResourceDefinition"),
    ("apiregistration.k8s.io", "APIService"),
    ("storage.k8s.io", "StorageClass"),
    ("storage.k8s.io", "CSIDriver"),
    ("storage.k8s.io", "CSINode"),
    ("storage.k8s.io", "VolumeAttachment"),
    ("scheduling.k8s.io", "PriorityClass"),
    ("networking.k8s.io", "IngressClass"),
    ("node.k8s.io", "RuntimeClass"),
    ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"),
    ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding"),
    ("certificates.k8s.io", "CertificateSigningRequest"),
    ("flowcontrol.apiserver.k8s.io", "FlowSchema"),
    ("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration"),
];

/// Whether a built-in kind is known to be cluster-scoped.
pub fn is_cluster_scoped(group: &str, kind: &str) -> bool {
    CLUSTER_SCOPED_KINDS.iter().any(|(g, k)| *g == group && *k == kind)
}

/// A problem that affected part of a snapshot but not the rest (a file that did not parse, a
/// kind that could not be listed). Partial failure is data.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceWarning {
    /// Error kind.
    pub kind: crate::ErrorKind,
    /// What happened, without secrets.
    pub message: String,
    /// File path (desired state), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Document index inside the file, from 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub document: Option<usize>,
    /// Line in the file, from 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
    /// Whether the problem stopped something from being read (error) or not (note).
    #[serde(default)]
    pub fatal: bool,
}

impl SourceWarning {
    /// An error that stopped part of the input from being read.
    pub fn error(kind: crate::ErrorKind, message: impl Into<String>) -> Self {
        SourceWarning { kind, message: message.into(), path: None, document: None, line: None, fatal: true }
    }
    /// A note about input that was skipped on purpose.
    pub fn note(message: impl Into<String>) -> Self {
        SourceWarning {
            kind: crate::ErrorKind::InvalidInput,
            message: message.into(),
            path: None,
            document: None,
            line: None,
            fatal: false,
        }
    }
    /// Sets the file.
    pub fn at(mut self, path: impl Into<String>, document: Option<usize>, line: Option<usize>) -> Self {
        self.path = Some(path.into());
        self.document = document;
        self.line = line;
        self
    }
}

impl fmt::Display for SourceWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(path) = &self.path {
            write!(f, "{path}")?;
            if let Some(line) = self.line {
                write!(f, ":{line}")?;
            }
            if let Some(doc) = self.document {
                write!(f, " (document {doc})")?;
            }
            write!(f, ": ")?;
        }
        write!(f, "{}", self.message)
    }
}

/// The desired state read from one repository at one revision. Its objects are trees
/// ([`Resource`], the default), or kept compact until compared ([`crate::KeptResource`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DesiredSnapshot<T = Resource> {
    /// Repository name or URL.
    pub repository: String,
    /// Revision read (commit id, or a content hash for plain folders).
    pub revision: Option<String>,
    /// The objects.
    pub resources: Vec<T>,
    /// Files or documents that could not be read.
    pub warnings: Vec<SourceWarning>,
}

impl<T> Default for DesiredSnapshot<T> {
    fn default() -> Self {
        DesiredSnapshot { repository: String::new(), revision: None, resources: Vec::new(), warnings: Vec::new() }
    }
}

impl<T: crate::DesiredObject> DesiredSnapshot<T> {
    /// The live scope this desired state implies: every (group, kind, namespace) it names.
    pub fn scope(&self) -> Scope {
        let mut scope = Scope::default();
        for r in &self.resources {
            scope.insert(r.key().group_kind(), r.key().namespace.clone());
        }
        scope.only = Some(self.resources.iter().map(|r| r.key().clone()).collect());
        scope
    }
}

impl DesiredSnapshot {
    /// Places objects without a namespace in `namespace`, unless their kind is known to be
    /// cluster-scoped. This is what `kubectl apply` does with the namespace of the context.
    pub fn default_namespace(&mut self, namespace: &str) {
        for r in &mut self.resources {
            if r.key.namespace.is_none() && !is_cluster_scoped(&r.key.group, &r.key.kind) {
                r.key.namespace = Some(namespace.to_owned());
            }
        }
    }
}

/// What a live read should cover: for each group/kind, the namespaces (or `None` for
/// cluster-scoped kinds).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Scope {
    /// Namespaces per group/kind; a `None` entry means cluster-scoped.
    pub entries: BTreeMap<GroupKind, BTreeSet<Option<String>>>,
    /// The objects the caller will compare, when it knows them ([`DesiredSnapshot::scope`]
    /// does). A live source reads each (kind, namespace) whole, so its coverage is unchanged,
    /// but it may drop the other objects as it reads them, which keeps a fetch of a cluster
    /// much larger than Git in the memory of what Git names. `None`: keep every object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub only: Option<BTreeSet<ResourceKey>>,
}

impl Scope {
    /// Adds a (kind, namespace) pair.
    pub fn insert(&mut self, gk: GroupKind, namespace: Option<String>) {
        self.entries.entry(gk).or_default().insert(namespace);
    }
    /// Whether the scope names this (kind, namespace).
    pub fn contains(&self, gk: &GroupKind, namespace: Option<&str>) -> bool {
        self.entries.get(gk).is_some_and(|ns| ns.contains(&namespace.map(str::to_owned)))
    }
    /// Every (kind, namespace) pair, sorted.
    pub fn pairs(&self) -> impl Iterator<Item = (&GroupKind, Option<&str>)> {
        self.entries.iter().flat_map(|(gk, nss)| nss.iter().map(move |ns| (gk, ns.as_deref())))
    }
    /// Whether nothing is in scope.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
    /// Whether the caller wants this object (see [`Scope::only`]).
    pub fn wants(&self, key: &ResourceKey) -> bool {
        self.only.as_ref().is_none_or(|only| only.contains(key))
    }
}

/// How well a live read covered one (kind, namespace).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum CoverageStatus {
    /// Every object was read.
    Complete,
    /// The credentials may not read it (403).
    Forbidden {
        /// Why.
        message: String,
    },
    /// The kind is not served by the cluster (404, unknown kind, CRD missing).
    NotServed {
        /// Why.
        message: String,
    },
    /// The read failed (timeout, 5xx after retries, dropped connection).
    Failed {
        /// Why.
        message: String,
    },
}

impl CoverageStatus {
    /// Whether the read was complete.
    pub fn is_complete(&self) -> bool {
        matches!(self, CoverageStatus::Complete)
    }
    /// A short label (`complete`, `forbidden`, `not_served`, `failed`).
    pub fn label(&self) -> &'static str {
        match self {
            CoverageStatus::Complete => "complete",
            CoverageStatus::Forbidden { .. } => "forbidden",
            CoverageStatus::NotServed { .. } => "not_served",
            CoverageStatus::Failed { .. } => "failed",
        }
    }
}

/// Coverage of one (kind, namespace) pair.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CoverageEntry {
    /// API group.
    pub group: String,
    /// Kind.
    pub kind: String,
    /// Namespace, `None` for cluster-scoped kinds.
    pub namespace: Option<String>,
    /// Outcome.
    #[serde(flatten)]
    pub status: CoverageStatus,
}

/// Coverage of a live read: the outcome for each (kind, namespace) in scope.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Coverage {
    /// One entry per (kind, namespace), sorted.
    pub entries: Vec<CoverageEntry>,
}

impl Coverage {
    /// Records the outcome for a pair, replacing an earlier one.
    pub fn set(&mut self, gk: &GroupKind, namespace: Option<&str>, status: CoverageStatus) {
        let ns = namespace.map(str::to_owned);
        if let Some(e) = self.entries.iter_mut().find(|e| e.group == gk.group && e.kind == gk.kind && e.namespace == ns)
        {
            e.status = status;
        } else {
            self.entries.push(CoverageEntry { group: gk.group.clone(), kind: gk.kind.clone(), namespace: ns, status });
            self.entries.sort_by(|a, b| (&a.group, &a.kind, &a.namespace).cmp(&(&b.group, &b.kind, &b.namespace)));
        }
    }

    /// Marks every pair of a scope complete (for sources that read everything at once).
    pub fn complete(scope: &Scope) -> Self {
        Coverage::all(scope, &CoverageStatus::Complete)
    }

    /// Coverage of a source that reads everything at once (files): every pair of the scope
    /// complete when every file was read; when some part could not be read (the `fatal`
    /// warnings), every pair failed with their reasons, since the broken part may hold any
    /// object, which then must not look missing.
    pub fn of_whole_read(scope: &Scope, warnings: &[SourceWarning]) -> Self {
        let fatal: Vec<String> = warnings.iter().filter(|w| w.fatal).map(ToString::to_string).collect();
        if fatal.is_empty() {
            return Coverage::complete(scope);
        }
        let message = format!("the live state could not be read completely: {}", fatal.join("; "));
        Coverage::all(scope, &CoverageStatus::Failed { message })
    }

    fn all(scope: &Scope, status: &CoverageStatus) -> Self {
        let mut c = Coverage::default();
        for (gk, ns) in scope.pairs() {
            c.set(gk, ns, status.clone());
        }
        c
    }

    /// The status of a (kind, namespace); `None` when it was not in scope. An entry for a
    /// cluster-wide read (`namespace: None`) of a namespaced kind covers every namespace.
    pub fn status(&self, group: &str, kind: &str, namespace: Option<&str>) -> Option<&CoverageStatus> {
        let exact =
            self.entries.iter().find(|e| e.group == group && e.kind == kind && e.namespace.as_deref() == namespace);
        exact
            .or_else(|| self.entries.iter().find(|e| e.group == group && e.kind == kind && e.namespace.is_none()))
            .map(|e| &e.status)
    }

    /// Whether the (kind, namespace) was read completely.
    pub fn is_complete(&self, group: &str, kind: &str, namespace: Option<&str>) -> bool {
        self.status(group, kind, namespace).is_some_and(CoverageStatus::is_complete)
    }

    /// Entries that were not read completely.
    pub fn incomplete(&self) -> impl Iterator<Item = &CoverageEntry> {
        self.entries.iter().filter(|e| !e.status.is_complete())
    }
}

/// Live state read from one cluster for a scope.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LiveSnapshot {
    /// Cluster name.
    pub cluster: String,
    /// The objects found, with managedFields.
    pub resources: Vec<Resource>,
    /// What was read completely and what was not.
    pub coverage: Coverage,
}
