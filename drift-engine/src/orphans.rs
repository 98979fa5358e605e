//! Objects in the cluster that Git does not declare, reported (opt-in, `orphans:` in drift.yaml,
//! `--orphans` for `drift diff`) as [`drift_model::DriftType::UnmanagedResource`].
//!
//! Only the kinds and namespaces the desired state manages are looked at (its scope), and only
//! the pairs read completely. What a person did not make is left out ([`made_by_a_person`]):
//! objects with an owner reference, the kinds controllers make (Pods, ReplicaSets, Endpoints,
//! EndpointSlices, Events, Leases, ControllerRevisions), service account token Secrets,
//! `kube-root-ca.crt`, `default` ServiceAccounts, the namespaces and RBAC defaults every cluster
//! starts with. Objects annotated `argocd.argoproj.io/compare-options: IgnoreExtraneous` (Argo
//! CD's own way of saying so) are left out too. Ignore rules apply as to any object
//! ([`drift_model::Comparator::unmanaged`]).

use std::collections::HashSet;

use serde_json::Value;

use drift_model::{Coverage, Resource, ResourceKey};

/// Kinds controllers make, by (group, kind).
const CONTROLLER_MADE: &[(&str, &str)] = &[
    ("", "Pod"),
    ("apps", "ReplicaSet"),
    ("", "Endpoints"),
    ("discovery.k8s.io", "EndpointSlice"),
    ("", "Event"),
    ("events.k8s.io", "Event"),
    ("coordination.k8s.io", "Lease"),
    ("apps", "ControllerRevision"),
];

/// Namespaces every cluster starts with.
const SYSTEM_NAMESPACES: &[&str] = &["default", "kube-system", "kube-public", "kube-node-lease"];

/// Whether a live object is one a person or a pipeline made, rather than a controller or the
/// cluster itself (see the module documentation).
pub fn made_by_a_person(live: &Resource) -> bool {
    let key = &live.key;
    let object = &*live.object;
    let metadata = object.get("metadata");
    let owned =
        metadata.and_then(|m| m.get("ownerReferences")).and_then(Value::as_array).is_some_and(|refs| !refs.is_empty());
    if owned || CONTROLLER_MADE.iter().any(|(g, k)| key.group == *g && key.kind == *k) {
        return false;
    }
    let core = key.group.is_empty();
    let rbac = key.group == "rbac.authorization.k8s.io";
    let label = |name: &str| metadata.and_then(|m| m.pointer(&format!("/labels/{name}"))).and_then(Value::as_str);
    !((core
        && key.kind == "Secret"
        && object.get("type").and_then(Value::as_str) == Some("kubernetes.io/service-account-token"))
        || (core && key.kind == "ConfigMap" && key.name == "kube-root-ca.crt")
        || (core && key.kind == "ServiceAccount" && key.name == "default")
        || (core && key.kind == "Namespace" && SYSTEM_NAMESPACES.contains(&key.name.as_str()))
        || (rbac
            && (key.name.starts_with("system:") || label("kubernetes.io~1bootstrapping") == Some("rbac-defaults"))))
}

/// The annotation by which Argo CD users mark objects that may exist without being in Git.
pub const ARGO_COMPARE_OPTIONS: &str = "argocd.argoproj.io/compare-options";

/// Whether the object says, in Argo CD's `compare-options` annotation, that it may exist without
/// being in Git (`IgnoreExtraneous`).
pub fn ignores_extraneous(live: &Resource) -> bool {
    live.object
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(ARGO_COMPARE_OPTIONS))
        .and_then(Value::as_str)
        .is_some_and(|o| o.split(',').any(|opt| opt.trim() == "IgnoreExtraneous"))
}

/// The live objects of completely read pairs that no desired object declares, that a person
/// made and that do not carry Argo CD's `IgnoreExtraneous`: the candidates for
/// `unmanaged_resource`.
///
/// `declared` are the keys of every desired object (compared or not; several lists: this
/// repository's and the other repositories' of the same detector); `desired` the objects, of
/// which SealedSecrets and ExternalSecrets declare the Secret their controller makes
/// ([`produced_secrets`]).
pub fn unmanaged<'a>(
    declared: &[&[ResourceKey]],
    desired: &[Resource],
    live: &'a [Resource],
    coverage: &Coverage,
) -> Vec<&'a Resource> {
    let mut declared: HashSet<&ResourceKey> = declared.iter().flat_map(|keys| keys.iter()).collect();
    let produced = produced_secrets(desired);
    declared.extend(produced.iter());
    live.iter()
        .filter(|r| !declared.contains(&r.key))
        .filter(|r| coverage.is_complete(&r.key.group, &r.key.kind, r.key.namespace.as_deref()))
        .filter(|r| made_by_a_person(r) && !ignores_extraneous(r))
        .collect()
}

/// The Secrets that the SealedSecrets (`bitnami.com`) and ExternalSecrets
/// (`external-secrets.io`) of the desired state make: named by `spec.template.metadata.name`
/// or `spec.target.name`, else after the object, in its namespace. Their controller makes them,
/// so they are never unmanaged.
pub fn produced_secrets(desired: &[Resource]) -> Vec<ResourceKey> {
    desired
        .iter()
        .filter_map(|r| {
            let name_at = match (r.key.group.as_str(), r.key.kind.as_str()) {
                ("bitnami.com", "SealedSecret") => "/spec/template/metadata/name",
                ("external-secrets.io", "ExternalSecret") => "/spec/target/name",
                _ => return None,
            };
            let name = r.object.pointer(name_at).and_then(Value::as_str).filter(|n| !n.is_empty());
            Some(ResourceKey::new("", "Secret", r.key.namespace.as_deref(), name.unwrap_or(&r.key.name)))
        })
        .collect()
}

/// Whether an unmanaged object of this kind is HIGH by default (RBAC and Secrets grant access)
/// rather than MEDIUM.
pub fn sensitive_kind(key: &ResourceKey) -> bool {
    key.group == "rbac.authorization.k8s.io" || (key.group.is_empty() && key.kind == "Secret")
}

#[cfg(test)]
mod tests {
    use super::*;
    use drift_model::{CoverageStatus, GroupKind};
    use serde_json::json;

    fn live(object: Value) -> Resource {
        Resource::from_object(object).unwrap()
    }

    #[test]
    fn what_controllers_and_the_cluster_make_is_left_out() {
        let made = [
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "a"}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kube-root-ca.crt", "namespace": "a"}}),
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default", "namespace": "a"}}),
            json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
                "metadata": {"name": "t", "namespace": "a"}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "a",
                "ownerReferences": [{"apiVersion": "v1", "kind": "X", "name": "x", "uid": "1"}]}}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "system:auth"}}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                "metadata": {"name": "view", "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"}}}),
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kube-system"}}),
            json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l", "namespace": "a"}}),
        ];
        for o in made {
            assert!(!made_by_a_person(&live(o.clone())), "{o}");
        }
        let person = [
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "debug", "namespace": "a"}}),
            json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": {"name": "s", "namespace": "a"}}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "view-all"}}),
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "ci", "namespace": "a"}}),
        ];
        for o in person {
            assert!(made_by_a_person(&live(o.clone())), "{o}");
        }
    }

    #[test]
    fn only_undeclared_objects_of_completely_read_pairs_are_unmanaged() {
        let cm = |name: &str, ns: &str| {
            live(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns}}))
        };
        let desired = vec![cm("kept", "a")];
        let tolerated =
            live(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "t", "namespace": "a",
            "annotations": {ARGO_COMPARE_OPTIONS: "ServerSideDiff=true, IgnoreExtraneous"}}}));
        let cluster = vec![cm("kept", "a"), cm("stray", "a"), cm("stray", "b"), tolerated];
        let mut coverage = Coverage::default();
        coverage.set(&GroupKind::new("", "ConfigMap"), Some("a"), CoverageStatus::Complete);
        coverage.set(&GroupKind::new("", "ConfigMap"), Some("b"), CoverageStatus::Failed { message: "503".into() });
        let keys: Vec<ResourceKey> = desired.iter().map(|r| r.key.clone()).collect();
        let found: Vec<String> =
            unmanaged(&[&keys], &desired, &cluster, &coverage).iter().map(|r| r.key.to_string()).collect();
        assert_eq!(found, vec![cm("stray", "a").key.to_string()]);
    }
}
