//! Matching desired objects to live ones when the desired state leaves namespaces open.
//!
//! Manifests in GitOps repositories often name no namespace: Kustomize, an Argo CD destination
//! or `kubectl apply -n` gives it at deploy time. A live dump (`kubectl get -o yaml`) always
//! names it. [`settle_namespaces`] decides, for files on both sides (`drift diff --desired
//! FILES --live FILES`), which namespace each desired object lives in, the way a user expects:
//!
//! - with a namespace given (`-n`), every namespaced object without one is placed there, as
//!   `kubectl apply -n` would;
//! - without one, an object that names no namespace matches the one live object of the same
//!   group, kind and name, with a note saying which namespace was chosen; with several such live
//!   objects the choice is the user's: an error asks for `-n` and the object is not compared
//!   (it is neither missing nor in sync); with none, it goes to `default`;
//! - a custom kind whose live objects all name no namespace is cluster-scoped: a namespace a
//!   desired object gives it is ignored, as Argo CD does (the built-in kinds are known from
//!   [`drift_model::is_cluster_scoped`]; a cluster says it through discovery, see
//!   [`drift_model::LiveSource::cluster_scoped`]).

use std::collections::{BTreeSet, HashMap};

use drift_model::DesiredObject;
use drift_model::{GroupKind, Resource, SourceWarning, is_cluster_scoped};

/// The namespace given to namespaced objects that name none, when nothing else decides.
pub const DEFAULT_NAMESPACE: &str = "default";

/// What [`settle_namespaces`] decided.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Settled {
    /// Custom kinds the live objects show to be cluster-scoped (for
    /// [`crate::scan::ScanOptions::cluster_scoped`]).
    pub cluster_scoped: Vec<GroupKind>,
    /// A note for every namespace chosen from the live state, an error for every object whose
    /// namespace could not be chosen (and which was taken out of the comparison).
    pub warnings: Vec<SourceWarning>,
}

pub use drift_model::snapshot::cluster_scoped_in;

/// What the namespace rules need to know of a live state read from files: the keys of its
/// objects, gathered one by one (so that a live side read as a stream need not be held whole).
#[derive(Debug, Default, Clone)]
pub struct LiveKeys {
    /// For each custom kind (group, kind), sorted: whether all of its live objects name no
    /// namespace. (Found by binary search among borrowed strings: a map keyed by `GroupKind`
    /// would copy the group and kind of every live object to look it up; kinds are few.)
    kinds: Vec<(String, String, bool)>,
    /// (group, kind, name) -> the namespaces the live objects that name one are in.
    placed: HashMap<(String, String, String), BTreeSet<String>>,
    /// (group, kind, name) of the live objects of kinds outside the built-in cluster-scoped
    /// table that name no namespace: placed by [`LiveKeys::places`] once the kinds are known.
    unplaced: Vec<(String, String, String)>,
}

impl LiveKeys {
    /// Notes the key of one live object, as read (before [`place_live`]).
    pub fn add(&mut self, key: &drift_model::ResourceKey) {
        if is_cluster_scoped(&key.group, &key.kind) {
            return;
        }
        let at = self.kinds.binary_search_by(|(g, k, _)| (g.as_str(), k.as_str()).cmp(&(&key.group, &key.kind)));
        let at = at.unwrap_or_else(|at| {
            self.kinds.insert(at, (key.group.clone(), key.kind.clone(), true));
            at
        });
        self.kinds[at].2 &= key.namespace.is_none();
        let gkn = (key.group.clone(), key.kind.clone(), key.name.clone());
        match &key.namespace {
            Some(ns) => {
                self.placed.entry(gkn).or_default().insert(ns.clone());
            }
            None => self.unplaced.push(gkn),
        }
    }

    /// Custom kinds of which the live objects all name no namespace (sorted).
    pub fn cluster_scoped(&self) -> Vec<GroupKind> {
        self.kinds.iter().filter(|(_, _, none)| *none).map(|(g, k, _)| GroupKind::new(g, k)).collect()
    }

    /// (group, kind, name) -> the namespaces the live state has it in, once the live objects
    /// that name none are placed as [`place_live`] places them without a namespace given.
    fn places(&self, cluster_scoped: &[GroupKind]) -> HashMap<(&str, &str, &str), BTreeSet<&str>> {
        let mut places: HashMap<(&str, &str, &str), BTreeSet<&str>> = HashMap::new();
        for ((g, k, n), nss) in &self.placed {
            places.entry((g, k, n)).or_default().extend(nss.iter().map(String::as_str));
        }
        let fallback = DEFAULT_NAMESPACE;
        for (g, k, n) in &self.unplaced {
            if !cluster_scoped.iter().any(|gk| &gk.group == g && &gk.kind == k) {
                places.entry((g, k, n)).or_default().insert(fallback);
            }
        }
        places
    }
}

/// Places the live objects of namespaced kinds that name no namespace (hand-written files) in
/// `namespace`, or `default`.
pub fn place_live(live: &mut [Resource], cluster_scoped: &[GroupKind], namespace: Option<&str>) {
    for r in live.iter_mut() {
        let gk = r.key.group_kind();
        if r.key.namespace.is_none() && !is_cluster_scoped(&gk.group, &gk.kind) && !cluster_scoped.contains(&gk) {
            r.key.namespace = Some(namespace.unwrap_or(DEFAULT_NAMESPACE).to_owned());
        }
    }
}

/// Settles the namespace of every desired object against a live state read from files (see the
/// module documentation for the rules). `namespace` is the one the user gave, if any. Live
/// objects of namespaced kinds that name no namespace (hand-written files) are placed in
/// `namespace`, or `default`. Desired objects without a namespace that match nothing are left
/// without one: the scan places them in its default namespace.
pub fn settle_namespaces<T: DesiredObject>(
    desired: &mut Vec<T>,
    live: &mut [Resource],
    namespace: Option<&str>,
) -> Settled {
    let mut keys = LiveKeys::default();
    for r in live.iter() {
        keys.add(&r.key);
    }
    let settled = settle_desired(desired, &keys, namespace);
    place_live(live, &settled.cluster_scoped, namespace);
    settled
}

/// The desired half of [`settle_namespaces`], from the keys of the live state alone.
pub fn settle_desired<T: DesiredObject>(desired: &mut Vec<T>, keys: &LiveKeys, namespace: Option<&str>) -> Settled {
    let cluster_scoped = keys.cluster_scoped();
    let mut warnings = Vec::new();
    let scoped = |gk: &GroupKind| is_cluster_scoped(&gk.group, &gk.kind) || cluster_scoped.contains(gk);
    let mut ambiguous = Vec::new();
    if let Some(ns) = namespace {
        for r in desired.iter_mut() {
            if r.key().namespace.is_none() && !scoped(&r.key().group_kind()) {
                r.key_mut().namespace = Some(ns.to_owned());
            }
        }
    } else {
        // (Made for the first object that names no namespace: most desired states have none.)
        let mut places = None;
        for (i, r) in desired.iter_mut().enumerate() {
            let key = r.key();
            if key.namespace.is_some() || scoped(&key.group_kind()) {
                continue;
            }
            let places = places.get_or_insert_with(|| keys.places(&cluster_scoped));
            let found = places.get(&(key.group.as_str(), key.kind.as_str(), key.name.as_str()));
            let candidates: Vec<&str> = found.map(|s| s.iter().copied().collect()).unwrap_or_default();
            let gk = key.group_kind();
            let provenance = r.provenance();
            let at = |w: SourceWarning| match &provenance.path {
                Some(p) => w.at(p.clone(), provenance.document, None),
                None => w,
            };
            match candidates.as_slice() {
                [] => {}
                [only] => {
                    warnings.push(at(SourceWarning::note(format!(
                        "{gk} {} names no namespace; matched to the live object in namespace {only} (pass -n to choose)",
                        key.name
                    ))));
                    r.key_mut().namespace = Some((*only).to_owned());
                }
                many => {
                    warnings.push(at(SourceWarning::error(
                        drift_model::ErrorKind::InvalidInput,
                        format!(
                            "{gk} {} names no namespace and the live state has it in {}: pass -n NAMESPACE to choose; \
                             not compared",
                            key.name,
                            many.join(", ")
                        ),
                    )));
                    ambiguous.push(i);
                }
            }
        }
    }
    for i in ambiguous.into_iter().rev() {
        desired.remove(i);
    }
    for r in desired.iter_mut() {
        let key = r.key();
        if key.namespace.is_some() && cluster_scoped.iter().any(|gk| gk.group == key.group && gk.kind == key.kind) {
            r.key_mut().namespace = None;
        }
    }
    Settled { cluster_scoped, warnings }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(group_version: &str, kind: &str, name: &str, ns: Option<&str>) -> Resource {
        let mut meta = json!({"name": name});
        if let Some(ns) = ns {
            meta["namespace"] = json!(ns);
        }
        Resource::from_object(json!({"apiVersion": group_version, "kind": kind, "metadata": meta})).unwrap()
    }

    fn namespaces(rs: &[Resource]) -> Vec<Option<&str>> {
        rs.iter().map(|r| r.key.namespace.as_deref()).collect()
    }

    #[test]
    fn an_object_without_namespace_matches_the_one_live_object_of_its_name_and_says_so() {
        let mut desired = vec![obj("apps/v1", "Deployment", "web", None), obj("v1", "ConfigMap", "lonely", None)];
        let mut live =
            vec![obj("apps/v1", "Deployment", "web", Some("shop")), obj("apps/v1", "Deployment", "api", Some("x"))];
        let settled = settle_namespaces(&mut desired, &mut live, None);
        assert_eq!(namespaces(&desired), vec![Some("shop"), None], "no match: left to the scan's default");
        assert_eq!(settled.warnings.len(), 1);
        assert!(!settled.warnings[0].fatal);
        assert!(settled.warnings[0].message.contains("namespace shop"), "{}", settled.warnings[0].message);
    }

    #[test]
    fn several_candidates_ask_for_a_namespace_and_the_object_is_not_compared() {
        let mut desired = vec![obj("v1", "ConfigMap", "cfg", None), obj("v1", "ConfigMap", "other", None)];
        let mut live = vec![obj("v1", "ConfigMap", "cfg", Some("a")), obj("v1", "ConfigMap", "cfg", Some("b"))];
        let settled = settle_namespaces(&mut desired, &mut live, None);
        assert_eq!(desired.len(), 1);
        assert_eq!(desired[0].key.name, "other");
        assert_eq!(settled.warnings.len(), 1);
        assert!(settled.warnings[0].fatal);
        assert!(settled.warnings[0].message.contains("a, b") && settled.warnings[0].message.contains("-n"));
    }

    #[test]
    fn the_custom_kinds_read_without_namespace_only_are_listed_sorted_whatever_the_order_read() {
        let mut keys = LiveKeys::default();
        for (gv, kind, ns) in [
            ("z.io/v1", "Zed", None),
            ("a.io/v1", "Beta", None),
            ("a.io/v1", "Alpha", None),
            ("v1", "Namespace", None),
            ("a.io/v1", "Alpha", Some("x")),
            ("a.io/v1", "Gamma", None),
            ("z.io/v1", "Zed", None),
            ("apps/v1", "Deployment", Some("web")),
        ] {
            keys.add(&obj(gv, kind, "n", ns).key);
        }
        // Alpha has an object in a namespace; Namespace is in the built-in table.
        let expected = [("a.io", "Beta"), ("a.io", "Gamma"), ("z.io", "Zed")].map(|(g, k)| GroupKind::new(g, k));
        assert_eq!(keys.cluster_scoped(), expected);
    }

    #[test]
    fn a_given_namespace_places_every_object_without_one() {
        let mut desired = vec![obj("v1", "ConfigMap", "cfg", None), obj("v1", "ConfigMap", "pinned", Some("p"))];
        let mut live = vec![obj("v1", "ConfigMap", "cfg", Some("a")), obj("v1", "ConfigMap", "cfg", None)];
        let settled = settle_namespaces(&mut desired, &mut live, Some("n"));
        assert!(settled.warnings.is_empty());
        assert_eq!(namespaces(&desired), vec![Some("n"), Some("p")]);
        assert_eq!(namespaces(&live), vec![Some("a"), Some("n")]);
    }

    #[test]
    fn a_namespace_on_a_custom_kind_the_live_state_shows_cluster_scoped_is_ignored() {
        let mut desired = vec![
            obj("cert-manager.io/v1", "ClusterIssuer", "le", Some("cert-manager")),
            obj("example.com/v1", "Widget", "w", Some("apps")),
            obj("rbac.authorization.k8s.io/v1", "ClusterRole", "r", Some("x")),
        ];
        let mut live = vec![
            obj("cert-manager.io/v1", "ClusterIssuer", "le", None),
            obj("example.com/v1", "Widget", "w", Some("apps")),
            obj("example.com/v1", "Widget", "v", None),
        ];
        let settled = settle_namespaces(&mut desired, &mut live, None);
        assert_eq!(settled.cluster_scoped, vec![GroupKind::new("cert-manager.io", "ClusterIssuer")]);
        // The built-in ClusterRole keeps its namespace here: the scan's own table clears it.
        assert_eq!(namespaces(&desired), vec![None, Some("apps"), Some("x")]);
        assert_eq!(live[2].key.namespace.as_deref(), Some("default"), "a mixed kind is namespaced");
    }
}
