//! The schemas of the built-in kinds, as the API server publishes them in its OpenAPI
//! documents, and as its decoder knows the fields of each type (strict field validation).
//!
//! The field names, types and required fields come from the generated Kubernetes types of the
//! `k8s-openapi` crate (its `schemars` schemas, Kubernetes 1.33: a few fields newer than the
//! 1.32 the server reports are therefore known). What those schemas leave out is added here,
//! as the API server adds it from the Go types' tags: the `x-kubernetes-group-version-kind`
//! of each kind, the strategic-merge-patch strategy and merge key of the lists kubectl merges
//! (`patchStrategy`, `patchMergeKey`), the list and map types of server-side apply
//! (`+listType`, `+listMapKey`, `+mapType`), and the published forms of `IntOrString` and
//! `Quantity`.
//!
//! Definitions are kept in one neutral form: JSON schema objects whose references are
//! `#/definitions/NAME`, a reference with sibling keys (a description) as in OpenAPI v2.
//! `super` turns them into OpenAPI v2 and v3 documents.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;

use k8s_openapi::schemars::generate::SchemaSettings;
use k8s_openapi::schemars::{JsonSchema, SchemaGenerator};
use serde_json::{Value, json};

/// The prefix of references in the neutral form.
pub const REF: &str = "#/definitions/";

/// The definitions of the built-in kinds and of every type they use.
#[derive(Debug)]
pub struct Schemas {
    /// Definitions by name (`io.k8s.api.apps.v1.Deployment`).
    pub defs: BTreeMap<String, Value>,
    /// (group, version, kind) of each built-in kind, to the name of its definition.
    pub kinds: BTreeMap<(String, String, String), String>,
}

impl Schemas {
    /// The definition name of a built-in kind.
    pub fn kind(&self, group: &str, version: &str, kind: &str) -> Option<&str> {
        self.kinds.get(&(group.to_owned(), version.to_owned(), kind.to_owned())).map(String::as_str)
    }

    /// The definition a schema refers to, if it is a reference.
    pub fn resolve<'a>(&'a self, schema: &'a Value) -> &'a Value {
        let mut s = schema;
        // References do not chain in these documents; a few steps guard against a cycle.
        for _ in 0..4 {
            match s.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix(REF)) {
                Some(name) => match self.defs.get(name) {
                    Some(d) => s = d,
                    None => return s,
                },
                None => return s,
            }
        }
        s
    }

    /// The names of the definitions `roots` refer to, transitively, the roots included.
    pub fn closure<'a>(&self, roots: impl IntoIterator<Item = &'a str>) -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut todo: Vec<String> = roots.into_iter().map(str::to_owned).collect();
        while let Some(name) = todo.pop() {
            if !seen.insert(name.clone()) {
                continue;
            }
            if let Some(d) = self.defs.get(&name) {
                refs(d, &mut |r| {
                    if !seen.contains(r) {
                        todo.push(r.to_owned());
                    }
                });
            }
        }
        seen
    }
}

/// Call `f` with the name of every definition `v` refers to.
fn refs(v: &Value, f: &mut impl FnMut(&str)) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                match (k.as_str(), x) {
                    ("$ref", Value::String(r)) => {
                        if let Some(name) = r.strip_prefix(REF) {
                            f(name);
                        }
                    }
                    _ => refs(x, f),
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|x| refs(x, f)),
        _ => {}
    }
}

/// The schemas, generated once.
pub fn schemas() -> &'static Schemas {
    static SCHEMAS: OnceLock<Schemas> = OnceLock::new();
    SCHEMAS.get_or_init(generate)
}

struct Gen {
    generator: SchemaGenerator,
    kinds: BTreeMap<(String, String, String), String>,
}

impl Gen {
    fn add<T: JsonSchema>(&mut self, group: &str, version: &str, kind: &str) {
        self.generator.subschema_for::<T>();
        self.kinds.insert((group.to_owned(), version.to_owned(), kind.to_owned()), T::schema_name().into_owned());
    }
}

fn generate() -> Schemas {
    use k8s_openapi::api::{apps, autoscaling, batch, coordination, core, networking, policy, rbac};
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions;
    let mut g = Gen { generator: SchemaGenerator::new(SchemaSettings::draft2020_12()), kinds: BTreeMap::new() };
    g.add::<core::v1::Namespace>("", "v1", "Namespace");
    g.add::<core::v1::ConfigMap>("", "v1", "ConfigMap");
    g.add::<core::v1::Secret>("", "v1", "Secret");
    g.add::<core::v1::Service>("", "v1", "Service");
    g.add::<core::v1::ServiceAccount>("", "v1", "ServiceAccount");
    g.add::<core::v1::Event>("", "v1", "Event");
    g.add::<core::v1::PersistentVolumeClaim>("", "v1", "PersistentVolumeClaim");
    g.add::<core::v1::Pod>("", "v1", "Pod");
    g.add::<apps::v1::Deployment>("apps", "v1", "Deployment");
    g.add::<apps::v1::StatefulSet>("apps", "v1", "StatefulSet");
    g.add::<apps::v1::DaemonSet>("apps", "v1", "DaemonSet");
    g.add::<batch::v1::Job>("batch", "v1", "Job");
    g.add::<batch::v1::CronJob>("batch", "v1", "CronJob");
    g.add::<networking::v1::Ingress>("networking.k8s.io", "v1", "Ingress");
    g.add::<networking::v1::NetworkPolicy>("networking.k8s.io", "v1", "NetworkPolicy");
    g.add::<policy::v1::PodDisruptionBudget>("policy", "v1", "PodDisruptionBudget");
    g.add::<rbac::v1::Role>("rbac.authorization.k8s.io", "v1", "Role");
    g.add::<rbac::v1::RoleBinding>("rbac.authorization.k8s.io", "v1", "RoleBinding");
    g.add::<rbac::v1::ClusterRole>("rbac.authorization.k8s.io", "v1", "ClusterRole");
    g.add::<rbac::v1::ClusterRoleBinding>("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding");
    g.add::<autoscaling::v2::HorizontalPodAutoscaler>("autoscaling", "v2", "HorizontalPodAutoscaler");
    g.add::<autoscaling::v1::Scale>("autoscaling", "v1", "Scale");
    g.add::<coordination::v1::Lease>("coordination.k8s.io", "v1", "Lease");
    g.add::<apiextensions::v1::CustomResourceDefinition>("apiextensions.k8s.io", "v1", "CustomResourceDefinition");

    let mut defs: BTreeMap<String, Value> = BTreeMap::new();
    for (name, schema) in g.generator.definitions() {
        let mut schema = schema.clone();
        rewrite_refs(&mut schema);
        defs.insert(name.clone(), schema);
    }
    published_forms(&mut defs);
    for (def, prop, meta) in LISTS {
        let Some(p) = defs
            .get_mut(*def)
            .and_then(|d| d.get_mut("properties"))
            .and_then(|p| p.get_mut(*prop))
            .and_then(Value::as_object_mut)
        else {
            // A type or field this version does not have: nothing to annotate.
            continue;
        };
        let (strategy, merge_key, list) = meta;
        if let Some(s) = strategy {
            p.insert("x-kubernetes-patch-strategy".into(), json!(s));
        }
        if let Some(k) = merge_key {
            p.insert("x-kubernetes-patch-merge-key".into(), json!(k));
        }
        match list {
            List::Atomic => {
                p.insert("x-kubernetes-list-type".into(), json!("atomic"));
            }
            List::Set => {
                p.insert("x-kubernetes-list-type".into(), json!("set"));
            }
            List::Map(keys) => {
                p.insert("x-kubernetes-list-type".into(), json!("map"));
                p.insert("x-kubernetes-list-map-keys".into(), json!(keys));
            }
            List::None => {}
        }
    }
    for (def, prop) in ATOMIC_MAPS {
        if let Some(p) = defs
            .get_mut(*def)
            .and_then(|d| d.get_mut("properties"))
            .and_then(|p| p.get_mut(*prop))
            .and_then(Value::as_object_mut)
        {
            p.insert("x-kubernetes-map-type".into(), json!("atomic"));
        }
    }
    for def in ATOMIC_STRUCTS {
        if let Some(d) = defs.get_mut(*def).and_then(Value::as_object_mut) {
            d.insert("x-kubernetes-map-type".into(), json!("atomic"));
        }
    }
    for ((group, version, kind), name) in &g.kinds {
        if let Some(d) = defs.get_mut(name).and_then(Value::as_object_mut) {
            d.insert(
                "x-kubernetes-group-version-kind".into(),
                json!([{"group": group, "kind": kind, "version": version}]),
            );
            // The generated types make metadata required; the API server's schemas do not.
            if let Some(Value::Array(req)) = d.get_mut("required") {
                req.retain(|r| r != "metadata");
                if req.is_empty() {
                    d.remove("required");
                }
            }
        }
    }
    Schemas { defs, kinds: g.kinds }
}

/// `#/$defs/NAME` (schemars' draft 2020-12 form) to the neutral `#/definitions/NAME`.
fn rewrite_refs(v: &mut Value) {
    match v {
        Value::Object(m) => {
            for (k, x) in m.iter_mut() {
                if k == "$ref"
                    && let Value::String(r) = x
                    && let Some(name) = r.strip_prefix("#/$defs/")
                {
                    *r = format!("{REF}{name}");
                } else {
                    rewrite_refs(x);
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(rewrite_refs),
        _ => {}
    }
}

/// `IntOrString` and `Quantity` as the API server publishes them in OpenAPI v2 (a string with
/// a format; v3 gives them `oneOf`, see `super`).
fn published_forms(defs: &mut BTreeMap<String, Value>) {
    if let Some(Value::Object(d)) = defs.get_mut(INT_OR_STRING) {
        d.remove("x-kubernetes-int-or-string");
        d.insert("type".into(), json!("string"));
        d.insert("format".into(), json!("int-or-string"));
    }
    if let Some(Value::Object(d)) = defs.get_mut(QUANTITY) {
        d.remove("x-kubernetes-int-or-string");
        d.insert("type".into(), json!("string"));
    }
}

/// The definition of `IntOrString`.
pub const INT_OR_STRING: &str = "io.k8s.apimachinery.pkg.util.intstr.IntOrString";
/// The definition of `Quantity`.
pub const QUANTITY: &str = "io.k8s.apimachinery.pkg.api.resource.Quantity";
/// The definition of `ObjectMeta`.
pub const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

/// The list type of server-side apply (`+listType`, `+listMapKey`).
enum List {
    /// No `+listType` tag.
    None,
    Atomic,
    Set,
    Map(&'static [&'static str]),
}

/// The lists of the served kinds that are not atomic for strategic merge patch, or that have
/// a server-side-apply list type, as the Kubernetes Go types tag them:
/// (definition, field, (patchStrategy, patchMergeKey, listType)).
#[allow(clippy::type_complexity)]
const LISTS: &[(&str, &str, (Option<&str>, Option<&str>, List))] = &[
    // meta/v1
    ("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", "finalizers", (Some("merge"), None, List::Set)),
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
        "ownerReferences",
        (Some("merge"), Some("uid"), List::Map(&["uid"])),
    ),
    ("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", "managedFields", (None, None, List::Atomic)),
    // core/v1 PodSpec
    ("io.k8s.api.core.v1.PodSpec", "volumes", (Some("merge,retainKeys"), Some("name"), List::Map(&["name"]))),
    ("io.k8s.api.core.v1.PodSpec", "initContainers", (Some("merge"), Some("name"), List::Map(&["name"]))),
    ("io.k8s.api.core.v1.PodSpec", "containers", (Some("merge"), Some("name"), List::Map(&["name"]))),
    ("io.k8s.api.core.v1.PodSpec", "ephemeralContainers", (Some("merge"), Some("name"), List::Map(&["name"]))),
    ("io.k8s.api.core.v1.PodSpec", "imagePullSecrets", (Some("merge"), Some("name"), List::Map(&["name"]))),
    ("io.k8s.api.core.v1.PodSpec", "hostAliases", (Some("merge"), Some("ip"), List::Map(&["ip"]))),
    (
        "io.k8s.api.core.v1.PodSpec",
        "topologySpreadConstraints",
        (Some("merge"), Some("topologyKey"), List::Map(&["topologyKey", "whenUnsatisfiable"])),
    ),
    ("io.k8s.api.core.v1.PodSpec", "schedulingGates", (Some("merge"), Some("name"), List::Map(&["name"]))),
    ("io.k8s.api.core.v1.PodSpec", "resourceClaims", (Some("merge,retainKeys"), Some("name"), List::Map(&["name"]))),
    ("io.k8s.api.core.v1.PodSpec", "tolerations", (None, None, List::Atomic)),
    ("io.k8s.api.core.v1.PodSpec", "readinessGates", (None, None, List::Atomic)),
    // core/v1 Container and EphemeralContainer
    (
        "io.k8s.api.core.v1.Container",
        "ports",
        (Some("merge"), Some("containerPort"), List::Map(&["containerPort", "protocol"])),
    ),
    ("io.k8s.api.core.v1.Container", "env", (Some("merge"), Some("name"), List::Map(&["name"]))),
    ("io.k8s.api.core.v1.Container", "volumeMounts", (Some("merge"), Some("mountPath"), List::Map(&["mountPath"]))),
    ("io.k8s.api.core.v1.Container", "volumeDevices", (Some("merge"), Some("devicePath"), List::Map(&["devicePath"]))),
    ("io.k8s.api.core.v1.Container", "resizePolicy", (None, None, List::Atomic)),
    ("io.k8s.api.core.v1.Container", "envFrom", (None, None, List::Atomic)),
    ("io.k8s.api.core.v1.Container", "command", (None, None, List::Atomic)),
    ("io.k8s.api.core.v1.Container", "args", (None, None, List::Atomic)),
    (
        "io.k8s.api.core.v1.EphemeralContainer",
        "ports",
        (Some("merge"), Some("containerPort"), List::Map(&["containerPort", "protocol"])),
    ),
    ("io.k8s.api.core.v1.EphemeralContainer", "env", (Some("merge"), Some("name"), List::Map(&["name"]))),
    (
        "io.k8s.api.core.v1.EphemeralContainer",
        "volumeMounts",
        (Some("merge"), Some("mountPath"), List::Map(&["mountPath"])),
    ),
    (
        "io.k8s.api.core.v1.EphemeralContainer",
        "volumeDevices",
        (Some("merge"), Some("devicePath"), List::Map(&["devicePath"])),
    ),
    ("io.k8s.api.core.v1.ResourceRequirements", "claims", (None, None, List::Map(&["name"]))),
    // core/v1 statuses
    ("io.k8s.api.core.v1.PodStatus", "conditions", (Some("merge"), Some("type"), List::Map(&["type"]))),
    ("io.k8s.api.core.v1.PodStatus", "podIPs", (Some("merge"), Some("ip"), List::Map(&["ip"]))),
    ("io.k8s.api.core.v1.PodStatus", "hostIPs", (Some("merge"), Some("ip"), List::Map(&["ip"]))),
    ("io.k8s.api.core.v1.ServiceStatus", "conditions", (Some("merge"), Some("type"), List::Map(&["type"]))),
    ("io.k8s.api.core.v1.NamespaceStatus", "conditions", (Some("merge"), Some("type"), List::Map(&["type"]))),
    (
        "io.k8s.api.core.v1.PersistentVolumeClaimStatus",
        "conditions",
        (Some("merge"), Some("type"), List::Map(&["type"])),
    ),
    // core/v1 Service and ServiceAccount
    ("io.k8s.api.core.v1.ServiceSpec", "ports", (Some("merge"), Some("port"), List::Map(&["port", "protocol"]))),
    ("io.k8s.api.core.v1.ServiceAccount", "secrets", (Some("merge"), Some("name"), List::Map(&["name"]))),
    // apps/v1
    ("io.k8s.api.apps.v1.DeploymentSpec", "strategy", (Some("retainKeys"), None, List::None)),
    ("io.k8s.api.apps.v1.DeploymentStatus", "conditions", (Some("merge"), Some("type"), List::Map(&["type"]))),
    ("io.k8s.api.apps.v1.StatefulSetStatus", "conditions", (Some("merge"), Some("type"), List::Map(&["type"]))),
    ("io.k8s.api.apps.v1.DaemonSetStatus", "conditions", (Some("merge"), Some("type"), List::Map(&["type"]))),
    ("io.k8s.api.apps.v1.StatefulSetSpec", "volumeClaimTemplates", (None, None, List::Atomic)),
    // batch/v1
    ("io.k8s.api.batch.v1.JobStatus", "conditions", (Some("merge"), Some("type"), List::Atomic)),
    // policy/v1
    (
        "io.k8s.api.policy.v1.PodDisruptionBudgetStatus",
        "conditions",
        (Some("merge"), Some("type"), List::Map(&["type"])),
    ),
    // autoscaling/v2
    (
        "io.k8s.api.autoscaling.v2.HorizontalPodAutoscalerStatus",
        "conditions",
        (Some("merge"), Some("type"), List::Map(&["type"])),
    ),
    // apiextensions/v1
    (
        "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinitionStatus",
        "conditions",
        (None, None, List::Map(&["type"])),
    ),
];

/// Maps tagged `+mapType=atomic`: (definition, field).
const ATOMIC_MAPS: &[(&str, &str)] =
    &[("io.k8s.api.core.v1.PodSpec", "nodeSelector"), ("io.k8s.api.core.v1.ServiceSpec", "selector")];

/// Structs tagged `+structType=atomic`.
const ATOMIC_STRUCTS: &[&str] = &[
    "io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector",
    "io.k8s.api.core.v1.ConfigMapKeySelector",
    "io.k8s.api.core.v1.SecretKeySelector",
    "io.k8s.api.core.v1.ObjectFieldSelector",
    "io.k8s.api.core.v1.ResourceFieldSelector",
    "io.k8s.api.core.v1.LocalObjectReference",
    "io.k8s.api.core.v1.TypedLocalObjectReference",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_a_definition_with_its_kind_and_no_dangling_reference() {
        let s = schemas();
        assert!(s.kinds.len() >= 24);
        for ((g, v, k), name) in &s.kinds {
            let d = &s.defs[name];
            assert_eq!(d["x-kubernetes-group-version-kind"], json!([{"group": g, "kind": k, "version": v}]));
            assert!(d["properties"].get("metadata").is_some(), "{name}");
            assert!(d.get("required").is_none_or(|r| !r.as_array().unwrap().contains(&json!("metadata"))));
        }
        for d in s.defs.values() {
            refs(d, &mut |r| assert!(s.defs.contains_key(r), "dangling {r}"));
        }
    }

    #[test]
    fn lists_carry_their_patch_strategy() {
        let s = schemas();
        let containers = &s.defs["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"];
        assert_eq!(containers["x-kubernetes-patch-strategy"], "merge");
        assert_eq!(containers["x-kubernetes-patch-merge-key"], "name");
        assert_eq!(containers["items"]["$ref"], "#/definitions/io.k8s.api.core.v1.Container");
        let ports = &s.defs["io.k8s.api.core.v1.Container"]["properties"]["ports"];
        assert_eq!(ports["x-kubernetes-list-map-keys"], json!(["containerPort", "protocol"]));
        assert_eq!(s.defs[INT_OR_STRING]["format"], "int-or-string");
        // Every table entry names a field that exists: a typo would silently annotate nothing.
        for (def, prop, _) in LISTS {
            assert!(s.defs[*def]["properties"].get(*prop).is_some(), "{def}.{prop}");
        }
        for (def, prop) in ATOMIC_MAPS {
            assert!(s.defs[*def]["properties"].get(*prop).is_some(), "{def}.{prop}");
        }
        for def in ATOMIC_STRUCTS {
            assert!(s.defs.contains_key(*def), "{def}");
        }
    }
}
