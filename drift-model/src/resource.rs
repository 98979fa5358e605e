//! Resources: identity ([`ResourceKey`]), objects with where they came from ([`Resource`],
//! [`Provenance`]), compact copies, cluster-scoped kinds, and the warnings a source reports.

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
    /// (`drift_manifest::sops::open_file`): the digest of the document as Git holds it (ciphertext),
    /// which the scan reports in place of the digest of the object, so that no digest of the
    /// plaintext leaves memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sops_digest: Option<String>,
}

/// A Kubernetes object with its identity and provenance.
///
/// Live resources keep `metadata.managedFields` for attribution; the comparison never looks at
/// them. Sources never normalise: `drift_engine::normalize` is the only place that does.
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
    /// let r = drift_model::Resource::from_object(serde_json::json!({
    ///     "apiVersion": "apps/v1", "kind": "Deployment",
    ///     "metadata": {"name": "web", "namespace": "shop"}
    /// })).unwrap();
    /// assert_eq!(r.key.group, "apps");
    /// assert_eq!(r.key.namespace.as_deref(), Some("shop"));
    /// ```
    pub fn from_object(object: impl Into<Arc<Value>>) -> crate::Result<Self> {
        let object = object.into();
        let (key, api_version) = identity_of(&*object)?;
        Ok(Resource { key, api_version, object, provenance: Provenance::default() })
    }

    /// Sets the provenance.
    pub fn with_provenance(mut self, provenance: Provenance) -> Self {
        self.provenance = provenance;
        self
    }
}

/// The key and `apiVersion` of an object, read as [`Resource::from_object`] reads them (from a
/// `Value` or a [`crate::tree::Tree`] alike).
pub(crate) fn identity_of<'a>(object: impl crate::tree::JsonView<'a>) -> crate::Result<(ResourceKey, String)> {
    let text = |v: Option<_>| v.and_then(crate::tree::JsonView::as_str).filter(|s: &&str| !s.is_empty());
    let api_version = text(object.get("apiVersion"))
        .ok_or_else(|| crate::Error::invalid_input("object has no apiVersion"))?
        .to_owned();
    let kind = text(object.get("kind")).ok_or_else(|| crate::Error::invalid_input("object has no kind"))?.to_owned();
    let metadata = object.get("metadata");
    let name = text(metadata.and_then(|m| m.get("name")))
        .ok_or_else(|| crate::Error::invalid_input(format!("{kind} has no metadata.name")))?
        .to_owned();
    let namespace = text(metadata.and_then(|m| m.get("namespace"))).map(str::to_owned);
    let (group, _) = split_api_version(&api_version);
    let key = ResourceKey { group: group.to_owned(), kind, namespace, name };
    Ok((key, api_version))
}

/// A [`Resource`] kept small: its object as compact JSON text instead of a tree. A
/// `serde_json::Value` spends a B-tree node with room for 11 entries on every mapping, however
/// few it holds: a small Deployment of 500 bytes of JSON is about 11 KiB as a tree. A process
/// that keeps objects between uses (the Git source's caches, the watch's index of what Git
/// holds) keeps them in this form and [`CompactResource::expand`]s one when it needs it, equal
/// to the resource it was made from (the JSON keeps every number exactly).
///
/// ```
/// use drift_model::{CompactResource, Resource};
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

/// A short, stable digest of an object as Git has it (hex of the first 8 bytes of the SHA-256 of
/// its JSON with sorted keys): equal objects have equal digests, and a commit that changes the
/// object changes it.
pub fn object_digest(object: &serde_json::Value) -> String {
    // `Value`'s Display is its compact JSON and cannot fail.
    digest_of_json(object.to_string().as_bytes())
}

/// [`object_digest`] of an object already written as compact JSON (`serde_json::to_vec`).
pub fn digest_of_json(json: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(&sha2::Sha256::digest(json)[..8])
}
