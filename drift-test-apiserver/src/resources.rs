//! The resource types the server knows: the built-in kinds, and custom resources whose
//! CustomResourceDefinition has been created.

use serde_json::{Value, json};

/// One resource type (one group, one or more versions) as served by the API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceType {
    /// API group, `""` for the core group.
    pub group: String,
    /// Served versions, the first one preferred (and used for storage).
    pub versions: Vec<String>,
    /// Plural resource name (`deployments`).
    pub plural: String,
    /// Singular resource name (`deployment`).
    pub singular: String,
    /// Kind (`Deployment`).
    pub kind: String,
    /// Namespaced or cluster-scoped.
    pub namespaced: bool,
    /// Short names (`deploy`).
    pub short_names: Vec<String>,
    /// Categories (`all`).
    pub categories: Vec<String>,
    /// Whether the status subresource is served.
    pub status: bool,
    /// Scale subresource: paths of spec replicas, status replicas and label selector.
    pub scale: Option<ScalePaths>,
    /// Whether `metadata.generation` is maintained.
    pub generation: bool,
    /// Whether this type comes from a CustomResourceDefinition.
    pub custom: bool,
}

/// Where the scale subresource finds its values in the object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScalePaths {
    /// `.spec.replicas`
    pub spec_replicas: String,
    /// `.status.replicas`
    pub status_replicas: String,
    /// `.status.selector` or, for the built-in kinds, derived from `.spec.selector`.
    pub label_selector: Option<String>,
}

impl ResourceType {
    /// `apps/v1` or `v1` for the given version.
    pub fn api_version(&self, version: &str) -> String {
        if self.group.is_empty() { version.to_owned() } else { format!("{}/{}", self.group, version) }
    }

    /// The preferred (storage) version.
    pub fn preferred_version(&self) -> &str {
        self.versions.first().map(String::as_str).unwrap_or("v1")
    }

    /// The verbs served on the collection and items.
    pub fn verbs(&self) -> Vec<&'static str> {
        vec!["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
    }

    /// The group/resource key used by the store.
    pub fn key(&self) -> (String, String) {
        (self.group.clone(), self.plural.clone())
    }
}

struct Def {
    group: &'static str,
    version: &'static str,
    plural: &'static str,
    kind: &'static str,
    namespaced: bool,
    short: &'static [&'static str],
    all: bool,
    status: bool,
    scale: bool,
    generation: bool,
}

const BUILTIN: &[Def] = &[
    Def {
        group: "",
        version: "v1",
        plural: "namespaces",
        kind: "Namespace",
        namespaced: false,
        short: &["ns"],
        all: false,
        status: true,
        scale: false,
        generation: false,
    },
    Def {
        group: "",
        version: "v1",
        plural: "configmaps",
        kind: "ConfigMap",
        namespaced: true,
        short: &["cm"],
        all: false,
        status: false,
        scale: false,
        generation: false,
    },
    Def {
        group: "",
        version: "v1",
        plural: "secrets",
        kind: "Secret",
        namespaced: true,
        short: &[],
        all: false,
        status: false,
        scale: false,
        generation: false,
    },
    Def {
        group: "",
        version: "v1",
        plural: "services",
        kind: "Service",
        namespaced: true,
        short: &["svc"],
        all: true,
        status: true,
        scale: false,
        generation: false,
    },
    Def {
        group: "",
        version: "v1",
        plural: "serviceaccounts",
        kind: "ServiceAccount",
        namespaced: true,
        short: &["sa"],
        all: false,
        status: false,
        scale: false,
        generation: false,
    },
    Def {
        group: "",
        version: "v1",
        plural: "events",
        kind: "Event",
        namespaced: true,
        short: &["ev"],
        all: false,
        status: false,
        scale: false,
        generation: false,
    },
    // Pods: stored, defaulted and admitted as on create; nothing schedules or runs them.
    Def {
        group: "",
        version: "v1",
        plural: "pods",
        kind: "Pod",
        namespaced: true,
        short: &["po"],
        all: true,
        status: true,
        scale: false,
        generation: false,
    },
    Def {
        group: "",
        version: "v1",
        plural: "persistentvolumeclaims",
        kind: "PersistentVolumeClaim",
        namespaced: true,
        short: &["pvc"],
        all: false,
        status: true,
        scale: false,
        generation: false,
    },
    Def {
        group: "apps",
        version: "v1",
        plural: "deployments",
        kind: "Deployment",
        namespaced: true,
        short: &["deploy"],
        all: true,
        status: true,
        scale: true,
        generation: true,
    },
    Def {
        group: "apps",
        version: "v1",
        plural: "statefulsets",
        kind: "StatefulSet",
        namespaced: true,
        short: &["sts"],
        all: true,
        status: true,
        scale: true,
        generation: true,
    },
    Def {
        group: "apps",
        version: "v1",
        plural: "daemonsets",
        kind: "DaemonSet",
        namespaced: true,
        short: &["ds"],
        all: true,
        status: true,
        scale: false,
        generation: true,
    },
    Def {
        group: "batch",
        version: "v1",
        plural: "jobs",
        kind: "Job",
        namespaced: true,
        short: &[],
        all: true,
        status: true,
        scale: false,
        generation: true,
    },
    Def {
        group: "batch",
        version: "v1",
        plural: "cronjobs",
        kind: "CronJob",
        namespaced: true,
        short: &["cj"],
        all: true,
        status: true,
        scale: false,
        generation: true,
    },
    Def {
        group: "networking.k8s.io",
        version: "v1",
        plural: "ingresses",
        kind: "Ingress",
        namespaced: true,
        short: &["ing"],
        all: false,
        status: true,
        scale: false,
        generation: true,
    },
    Def {
        group: "networking.k8s.io",
        version: "v1",
        plural: "networkpolicies",
        kind: "NetworkPolicy",
        namespaced: true,
        short: &["netpol"],
        all: false,
        status: false,
        scale: false,
        generation: true,
    },
    Def {
        group: "policy",
        version: "v1",
        plural: "poddisruptionbudgets",
        kind: "PodDisruptionBudget",
        namespaced: true,
        short: &["pdb"],
        all: false,
        status: true,
        scale: false,
        generation: true,
    },
    Def {
        group: "rbac.authorization.k8s.io",
        version: "v1",
        plural: "roles",
        kind: "Role",
        namespaced: true,
        short: &[],
        all: false,
        status: false,
        scale: false,
        generation: false,
    },
    Def {
        group: "rbac.authorization.k8s.io",
        version: "v1",
        plural: "rolebindings",
        kind: "RoleBinding",
        namespaced: true,
        short: &[],
        all: false,
        status: false,
        scale: false,
        generation: false,
    },
    Def {
        group: "rbac.authorization.k8s.io",
        version: "v1",
        plural: "clusterroles",
        kind: "ClusterRole",
        namespaced: false,
        short: &[],
        all: false,
        status: false,
        scale: false,
        generation: false,
    },
    Def {
        group: "rbac.authorization.k8s.io",
        version: "v1",
        plural: "clusterrolebindings",
        kind: "ClusterRoleBinding",
        namespaced: false,
        short: &[],
        all: false,
        status: false,
        scale: false,
        generation: false,
    },
    Def {
        group: "autoscaling",
        version: "v2",
        plural: "horizontalpodautoscalers",
        kind: "HorizontalPodAutoscaler",
        namespaced: true,
        short: &["hpa"],
        all: true,
        status: true,
        scale: false,
        generation: false,
    },
    // Leases: the leader election of replicated controllers (and of the detector).
    Def {
        group: "coordination.k8s.io",
        version: "v1",
        plural: "leases",
        kind: "Lease",
        namespaced: true,
        short: &[],
        all: false,
        status: false,
        scale: false,
        generation: false,
    },
    Def {
        group: "apiextensions.k8s.io",
        version: "v1",
        plural: "customresourcedefinitions",
        kind: "CustomResourceDefinition",
        namespaced: false,
        short: &["crd", "crds"],
        all: false,
        status: true,
        scale: false,
        generation: true,
    },
];

/// The built-in resource types.
pub fn builtin() -> Vec<ResourceType> {
    BUILTIN
        .iter()
        .map(|d| ResourceType {
            group: d.group.to_owned(),
            versions: vec![d.version.to_owned()],
            plural: d.plural.to_owned(),
            singular: d.kind.to_ascii_lowercase(),
            kind: d.kind.to_owned(),
            namespaced: d.namespaced,
            short_names: d.short.iter().map(|s| (*s).to_owned()).collect(),
            categories: if d.all { vec!["all".to_owned()] } else { vec![] },
            status: d.status,
            scale: d.scale.then(|| ScalePaths {
                spec_replicas: ".spec.replicas".to_owned(),
                status_replicas: ".status.replicas".to_owned(),
                label_selector: None,
            }),
            generation: d.generation,
            custom: false,
        })
        .collect()
}

fn strs(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|s| s.as_str().map(str::to_owned)).collect())
        .unwrap_or_default()
}

/// The resource type a CustomResourceDefinition defines, if it is well formed.
pub fn from_crd(crd: &Value) -> Option<ResourceType> {
    let spec = crd.get("spec")?;
    let names = spec.get("names")?;
    let group = spec.get("group")?.as_str()?.to_owned();
    let plural = names.get("plural")?.as_str()?.to_owned();
    let kind = names.get("kind")?.as_str()?.to_owned();
    let singular =
        names.get("singular").and_then(Value::as_str).map(str::to_owned).unwrap_or_else(|| kind.to_ascii_lowercase());
    let namespaced = spec.get("scope").and_then(Value::as_str) != Some("Cluster");
    let mut versions: Vec<(bool, String, &Value)> = spec
        .get("versions")?
        .as_array()?
        .iter()
        .filter(|v| v.get("served").and_then(Value::as_bool).unwrap_or(true))
        .filter_map(|v| {
            Some((v.get("storage").and_then(Value::as_bool).unwrap_or(false), v.get("name")?.as_str()?.to_owned(), v))
        })
        .collect();
    if versions.is_empty() {
        return None;
    }
    // The storage version first: it is the preferred one here.
    versions.sort_by_key(|(storage, _, _)| !*storage);
    let sub = versions[0].2.get("subresources");
    let status = sub.and_then(|s| s.get("status")).is_some();
    let scale = sub.and_then(|s| s.get("scale")).map(|s| ScalePaths {
        spec_replicas: s.get("specReplicasPath").and_then(Value::as_str).unwrap_or(".spec.replicas").to_owned(),
        status_replicas: s.get("statusReplicasPath").and_then(Value::as_str).unwrap_or(".status.replicas").to_owned(),
        label_selector: s.get("labelSelectorPath").and_then(Value::as_str).map(str::to_owned),
    });
    Some(ResourceType {
        group,
        versions: versions.into_iter().map(|(_, n, _)| n).collect(),
        plural,
        singular,
        kind,
        namespaced,
        short_names: strs(names.get("shortNames")),
        categories: strs(names.get("categories")),
        status,
        scale,
        generation: true,
        custom: true,
    })
}

/// The `APIResource` entry of a legacy discovery document.
pub fn api_resource_json(rt: &ResourceType, version: &str) -> Vec<Value> {
    let mut out = vec![json!({
        "name": rt.plural,
        "singularName": rt.singular,
        "namespaced": rt.namespaced,
        "kind": rt.kind,
        "verbs": rt.verbs(),
    })];
    if let Some(obj) = out[0].as_object_mut() {
        if !rt.short_names.is_empty() {
            obj.insert("shortNames".into(), json!(rt.short_names));
        }
        if !rt.categories.is_empty() {
            obj.insert("categories".into(), json!(rt.categories));
        }
        obj.insert("storageVersionHash".into(), json!(storage_hash(&rt.api_version(version), &rt.kind)));
    }
    if rt.status {
        out.push(json!({
            "name": format!("{}/status", rt.plural),
            "singularName": "",
            "namespaced": rt.namespaced,
            "kind": rt.kind,
            "verbs": ["get", "patch", "update"],
        }));
    }
    if rt.scale.is_some() {
        out.push(json!({
            "name": format!("{}/scale", rt.plural),
            "singularName": "",
            "namespaced": rt.namespaced,
            "group": "autoscaling",
            "version": "v1",
            "kind": "Scale",
            "verbs": ["get", "patch", "update"],
        }));
    }
    out
}

/// A stable short hash, in the shape of the API server's storage version hash.
fn storage_hash(api_version: &str, kind: &str) -> String {
    use base64::Engine as _;
    // FNV-1a over the group version kind: stable across runs and platforms.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in api_version.bytes().chain([b'/']).chain(kind.bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    base64::engine::general_purpose::STANDARD.encode(h.to_be_bytes())[..11].to_owned()
}
