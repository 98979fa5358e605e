//! From the units' results to a [`DesiredSnapshot`]: namespaces of applications, provenance,
//! and objects defined twice.

use std::collections::HashMap;
use std::sync::Arc;

use drift_model::{DesiredSnapshot, ErrorKind, Resource, SourceWarning, is_cluster_scoped};
use serde_json::Value;

use super::Parsed;
use super::plan::Unit;
use crate::gitops::NamespaceRule;

pub(super) fn apply_namespace(resource: &mut Resource, rule: &NamespaceRule) {
    let ns = match rule {
        NamespaceRule::Keep => return,
        NamespaceRule::Default(ns) if resource.key.namespace.is_none() => ns,
        NamespaceRule::Default(_) => return,
        NamespaceRule::Override(ns) => ns,
    };
    if is_cluster_scoped(&resource.key.group, &resource.key.kind) {
        return;
    }
    resource.key.namespace = Some(ns.clone());
    // The parse cache shares the object: copy it only when its namespace really changes.
    if resource.object.pointer("/metadata/namespace").and_then(Value::as_str) == Some(ns.as_str()) {
        return;
    }
    if let Some(meta) = Arc::make_mut(&mut resource.object).get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("namespace".into(), Value::String(ns.clone()));
    }
}

/// The snapshot of one revision from the units' results, in order: objects get the
/// namespace of their application, what kustomize-controller does after its build (Flux
/// `commonMetadata` and `postBuild`, with the ConfigMaps and Secrets of the revision as the
/// variables' sources), the repository and the revision; an object defined twice (once
/// substituted: two Kustomizations of one folder make two objects) is kept once, with a note
/// when both copies are identical and an error otherwise.
pub(super) fn assemble(
    repository: &str,
    revision: &str,
    results: Vec<(Unit, Arc<Parsed>)>,
    mut warnings: Vec<SourceWarning>,
    cluster: crate::cluster::ClusterRead<'_>,
) -> DesiredSnapshot {
    let sources: Vec<Resource> = if results.iter().any(|(u, _)| u.post_build.is_some()) {
        results
            .iter()
            .flat_map(|(_, p)| p.resources.iter())
            .filter(|r| r.key.group.is_empty() && (r.key.kind == "ConfigMap" || r.key.kind == "Secret"))
            .cloned()
            .collect()
    } else {
        Vec::new()
    };
    let mut resources = Vec::new();
    let mut first_seen: HashMap<drift_model::ResourceKey, (String, usize)> = HashMap::new();
    for (unit, parsed) in results {
        let (mut parsed_resources, parsed_warnings) = match Arc::try_unwrap(parsed) {
            Ok(p) => (p.resources, p.warnings),
            Err(shared) => (shared.resources.clone(), shared.warnings.clone()),
        };
        warnings.extend(parsed_warnings);
        for r in &mut parsed_resources {
            apply_namespace(r, &unit.namespace);
            r.provenance.ignore.clone_from(&unit.ignore);
        }
        if let Some(post) = &unit.post_build {
            let mut objects: Vec<&mut Resource> = parsed_resources.iter_mut().collect();
            crate::flux::substitute(post, &mut objects, &sources, cluster, &mut warnings);
        }
        for mut r in parsed_resources {
            r.provenance.repository = Some(repository.to_owned());
            r.provenance.revision = Some(unit.revision.clone().unwrap_or_else(|| revision.to_owned()));
            let here = r.provenance.path.clone().unwrap_or_default();
            if let Some((first, index)) = first_seen.get(&r.key) {
                // The same object twice: harmless when identical, a conflict otherwise.
                let warning = if resources.get(*index).is_some_and(|f: &Resource| f.object == r.object) {
                    SourceWarning::note(format!("{} is also defined, identically, in {first}", r.key))
                } else {
                    SourceWarning::error(
                        ErrorKind::Conflict,
                        format!("{} is also defined, differently, in {first}; this copy is ignored", r.key),
                    )
                };
                warnings.push(warning.at(here, r.provenance.document, None));
                continue;
            }
            first_seen.insert(r.key.clone(), (here, resources.len()));
            resources.push(r);
        }
    }
    DesiredSnapshot { repository: repository.to_owned(), revision: Some(revision.to_owned()), resources, warnings }
}

#[cfg(test)]
mod tests {
    use drift_model::Provenance;
    use serde_json::json;

    use super::*;
    use crate::pipeline::plan::UnitKind;

    fn resource(kind: &str, namespace: Option<&str>, data: &str, path: &str) -> Resource {
        let mut meta = json!({"name": "x"});
        if let Some(ns) = namespace {
            meta["namespace"] = json!(ns);
        }
        let api_version = if kind == "ClusterRole" { "rbac.authorization.k8s.io/v1" } else { "v1" };
        Resource::from_object(json!({"apiVersion": api_version, "kind": kind, "metadata": meta, "data": {"v": data}}))
            .unwrap()
            .with_provenance(Provenance { path: Some(path.into()), ..Provenance::default() })
    }

    fn namespaced(rule: NamespaceRule, ns: Option<&str>) -> Option<String> {
        let mut r = resource("ConfigMap", ns, "1", "a.yaml");
        apply_namespace(&mut r, &rule);
        let in_object = r.object.pointer("/metadata/namespace").and_then(Value::as_str).map(str::to_owned);
        assert_eq!(in_object, r.key.namespace, "the key and the object agree");
        r.key.namespace
    }

    #[test]
    fn namespace_rules_of_applications() {
        let web = || "web".to_owned();
        assert_eq!(namespaced(NamespaceRule::Keep, None), None);
        assert_eq!(namespaced(NamespaceRule::Keep, Some("a")).as_deref(), Some("a"));
        assert_eq!(namespaced(NamespaceRule::Default(web()), None).as_deref(), Some("web"));
        assert_eq!(namespaced(NamespaceRule::Default(web()), Some("a")).as_deref(), Some("a"));
        assert_eq!(namespaced(NamespaceRule::Override(web()), Some("a")).as_deref(), Some("web"));
        let mut role = resource("ClusterRole", None, "1", "a.yaml");
        apply_namespace(&mut role, &NamespaceRule::Override(web()));
        assert_eq!(role.key.namespace, None, "a cluster-scoped object has no namespace");
    }

    fn results(items: Vec<(NamespaceRule, Vec<Resource>)>) -> Vec<(Unit, Arc<Parsed>)> {
        items
            .into_iter()
            .map(|(rule, resources)| {
                let mut unit = Unit::new(UnitKind::Plain("a.yaml".into()));
                unit.namespace = rule;
                (unit, Arc::new(Parsed { resources, warnings: Vec::new() }))
            })
            .collect()
    }

    #[test]
    fn objects_get_provenance_and_a_namespace_from_their_unit() {
        let snap = assemble(
            "repo",
            "abc",
            results(vec![(NamespaceRule::Default("shop".into()), vec![resource("ConfigMap", None, "1", "a.yaml")])]),
            Vec::new(),
            crate::cluster::ClusterRead::none(),
        );
        assert_eq!((snap.repository.as_str(), snap.revision.as_deref()), ("repo", Some("abc")));
        let r = &snap.resources[0];
        assert_eq!(r.key.namespace.as_deref(), Some("shop"));
        assert_eq!(r.provenance.repository.as_deref(), Some("repo"));
        assert_eq!(r.provenance.revision.as_deref(), Some("abc"));
        assert_eq!(r.provenance.path.as_deref(), Some("a.yaml"));
    }

    #[test]
    fn an_object_defined_twice_is_kept_once_with_a_note_or_a_conflict() {
        let first = resource("ConfigMap", Some("a"), "1", "first.yaml");
        let same = resource("ConfigMap", Some("a"), "1", "same.yaml");
        let other = resource("ConfigMap", Some("a"), "2", "other.yaml");
        let snap = assemble(
            "repo",
            "abc",
            results(vec![(NamespaceRule::Keep, vec![first, same, other])]),
            Vec::new(),
            crate::cluster::ClusterRead::none(),
        );
        assert_eq!(snap.resources.len(), 1);
        assert_eq!(snap.resources[0].provenance.path.as_deref(), Some("first.yaml"), "the first copy is kept");
        let w = &snap.warnings;
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(!w[0].fatal && w[0].message.contains("identically, in first.yaml"), "{w:?}");
        assert_eq!(w[0].path.as_deref(), Some("same.yaml"));
        assert!(w[1].fatal && w[1].kind == ErrorKind::Conflict, "{w:?}");
        assert_eq!(w[1].path.as_deref(), Some("other.yaml"));
    }
}
