//! What merging a branch would do to the cluster (`drift check --ref`).
//!
//! A GitOps controller applies every object whose rendering a merge changes, and an apply
//! (client-side or server-side, forced, as Argo CD and Flux do) sets every field Git names:
//! a change made by hand to any field of such an object is overwritten, whether the branch
//! touched that field or not. Objects the merge leaves as they are keep their live changes.
//!
//! [`merge_effect`] compares two reports of the same cluster: one of the desired state as it is
//! (the base, the configured ref) and one of the branch, each against the same live objects. It
//! needs nothing else: a report lists the desired objects with a digest of each
//! ([`ScanReport::desired_digests`]), and its drifts are what an apply would change.
//!
//! ```
//! use drift_engine::check::{merge_effect, Effect};
//! use drift_engine::scan::{ScanOptions, compare_snapshots};
//! use drift_manifest::parse_manifests;
//! use drift_model::{Coverage, DesiredSnapshot, LiveSnapshot};
//!
//! let deployment = |replicas: u32, image: &str| format!(
//!     "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web, namespace: shop}}\n\
//!      spec: {{replicas: {replicas}, template: {{spec: {{containers: [{{name: web, image: {image}}}]}}}}}}\n");
//! let scan = |desired: &str| {
//!     let desired = DesiredSnapshot { resources: parse_manifests(desired, "web.yaml").resources, ..Default::default() };
//!     // Someone scaled the Deployment to 5 by hand.
//!     let resources = parse_manifests(&deployment(5, "web:1"), "live").resources;
//!     let live = LiveSnapshot { coverage: Coverage::complete(&desired.scope()), cluster: "prod".into(), resources };
//!     compare_snapshots(desired, live, &drift_engine::Engine::default(), &ScanOptions::new("check"))
//! };
//! // The branch changes only the image: its merge re-applies the object, replicas included.
//! let effect = merge_effect(&scan(&deployment(3, "web:1")), &scan(&deployment(3, "web:2")));
//! assert!(effect.overwrites_live_changes());
//! assert_eq!(effect.with(Effect::OverwritesLiveChange).next().unwrap().drift.path, "spec.replicas");
//! assert_eq!(effect.with(Effect::Changes).next().unwrap().drift.path, "spec.template.spec.containers[name=web].image");
//! //! ```
use std::collections::{BTreeMap, BTreeSet};

use drift_model::{Classification, Drift, ResourceKey, ScanReport};
use serde::Serialize;

/// What a merge does to one field of the cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Effect {
    /// The field holds a value Git does not (a drift of the base: a change by hand, or one the
    /// cluster cannot attribute), and the merge applies the object: the live value is
    /// overwritten with the branch's.
    OverwritesLiveChange,
    /// The branch says what the cluster has: the base's drift of this field is resolved (as
    /// accepted, once merged).
    Resolves,
    /// The cluster holds the base's value and the branch changes it: a change made in Git.
    Changes,
    /// The object is not in the cluster and the branch's version of it would be created.
    Creates,
}

/// One field (or object, with an empty path) the merge changes or settles.
#[derive(Debug, Clone, Serialize)]
pub struct FieldEffect {
    /// What happens.
    pub effect: Effect,
    /// The drift this is about: the base's for [`Effect::OverwritesLiveChange`] and
    /// [`Effect::Resolves`] (the live value, who changed it and when), the branch's for
    /// [`Effect::Changes`] and [`Effect::Creates`] (the value the branch sets, the live one).
    pub drift: Drift,
    /// The value the merge applies over a live change ([`Effect::OverwritesLiveChange`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub applies: Option<serde_json::Value>,
}

/// How the merge changes an object's rendering.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ObjectChange {
    /// The branch adds the object to Git.
    Added,
    /// The branch renders the object differently.
    Changed,
    /// The branch removes the object from Git (the controller deletes it if it prunes).
    Removed,
}

/// An object the merge changes in Git.
#[derive(Debug, Clone, Serialize)]
pub struct ChangedObject {
    /// The object.
    pub key: ResourceKey,
    /// How it changes.
    pub change: ObjectChange,
    /// Whether the cluster holds changes of its own on it (drifts of the base): an object
    /// "nobody touched" has none.
    pub touched: bool,
}

/// What merging the branch would do ([`merge_effect`]).
#[derive(Debug, Clone, Default, Serialize)]
pub struct MergeEffect {
    /// The fields it changes or settles, by object then path: overwritten live changes first.
    pub fields: Vec<FieldEffect>,
    /// The objects whose rendering it changes, sorted.
    pub objects: Vec<ChangedObject>,
    /// Drifts of the base left open (on objects the merge does not apply).
    pub left_open: usize,
}

impl MergeEffect {
    /// Whether the merge overwrites at least one change made in the cluster.
    pub fn overwrites_live_changes(&self) -> bool {
        self.fields.iter().any(|f| f.effect == Effect::OverwritesLiveChange)
    }

    /// The fields with effect `effect`.
    pub fn with(&self, effect: Effect) -> impl Iterator<Item = &FieldEffect> {
        self.fields.iter().filter(move |f| f.effect == effect)
    }

    /// The objects the merge changes that hold no change of the cluster's own.
    pub fn untouched(&self) -> impl Iterator<Item = &ChangedObject> {
        self.objects.iter().filter(|o| !o.touched)
    }
}

/// Whether a drift of the base is a change of the cluster's own (not Git's change waiting to be
/// applied): a change by hand, a controller's, or one the cluster cannot attribute.
fn live_change(d: &Drift) -> bool {
    d.classification != Classification::PendingSync && !d.path.is_empty()
}

/// What merging the branch would do, from a report of the base and one of the branch against
/// the same live objects (see the module's documentation).
pub fn merge_effect(base: &ScanReport, branch: &ScanReport) -> MergeEffect {
    let digests = |r: &ScanReport| -> BTreeMap<ResourceKey, Option<String>> {
        r.desired.iter().enumerate().map(|(i, k)| (k.clone(), r.desired_digests.get(i).cloned())).collect()
    };
    let (before, after) = (digests(base), digests(branch));
    let mut objects = Vec::new();
    for (key, digest) in &after {
        match before.get(key) {
            None => objects.push((key.clone(), ObjectChange::Added)),
            // Without digests (a report that did not keep them) every object counts as applied.
            Some(old) if old != digest || digest.is_none() => objects.push((key.clone(), ObjectChange::Changed)),
            Some(_) => {}
        }
    }
    objects.extend(before.keys().filter(|k| !after.contains_key(*k)).map(|k| (k.clone(), ObjectChange::Removed)));
    objects.sort();
    let applied: BTreeSet<&ResourceKey> =
        objects.iter().filter(|(_, c)| *c != ObjectChange::Removed).map(|(k, _)| k).collect();
    let removed: BTreeSet<&ResourceKey> =
        objects.iter().filter(|(_, c)| *c == ObjectChange::Removed).map(|(k, _)| k).collect();

    let at = |d: &Drift| (d.key(), d.path.clone());
    let branch_at: BTreeMap<(ResourceKey, String), &Drift> = branch.drifts.iter().map(|d| (at(d), d)).collect();
    let base_at: BTreeMap<(ResourceKey, String), &Drift> = base.drifts.iter().map(|d| (at(d), d)).collect();
    let mut fields = Vec::new();
    let mut left_open = 0;
    let mut touched = BTreeSet::new();
    for (place, b) in &base_at {
        if live_change(b) {
            touched.insert(place.0.clone());
        }
        if removed.contains(&place.0) {
            continue;
        }
        match branch_at.get(place) {
            None => fields.push(FieldEffect { effect: Effect::Resolves, drift: (*b).clone(), applies: None }),
            Some(n) if applied.contains(&place.0) && live_change(b) => fields.push(FieldEffect {
                effect: Effect::OverwritesLiveChange,
                drift: (*b).clone(),
                applies: n.git_value.clone(),
            }),
            Some(_) => left_open += 1,
        }
    }
    for (place, n) in &branch_at {
        if !applied.contains(&place.0) {
            continue;
        }
        let effect = match base_at.get(place) {
            Some(b) if live_change(b) => continue,
            _ if n.path.is_empty() => Effect::Creates,
            _ => Effect::Changes,
        };
        fields.push(FieldEffect { effect, drift: (*n).clone(), applies: None });
    }
    let order = |e: Effect| match e {
        Effect::OverwritesLiveChange => 0,
        Effect::Resolves => 1,
        Effect::Changes => 2,
        Effect::Creates => 3,
    };
    fields.sort_by(|a, b| {
        (order(a.effect), a.drift.key(), &a.drift.path).cmp(&(order(b.effect), b.drift.key(), &b.drift.path))
    });
    let objects = objects
        .into_iter()
        .map(|(key, change)| ChangedObject { touched: touched.contains(&key), key, change })
        .collect();
    MergeEffect { fields, objects, left_open }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scan::{ScanOptions, compare_snapshots};
    use drift_manifest::parse_manifests;
    use drift_model::{CoverageStatus, DesiredSnapshot, GroupKind, LiveSnapshot};

    /// A Deployment (replicas, image) as Git has it.
    fn git(name: &str, replicas: u32, image: &str) -> String {
        format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: {name}, namespace: shop}}\n\
             spec: {{replicas: {replicas}, template: {{spec: {{containers: [{{name: app, image: {image}}}]}}}}}}\n---\n"
        )
    }

    /// The same as the cluster has it, `replicas` last written by `manager`.
    fn live(name: &str, replicas: u32, image: &str, manager: &str) -> String {
        format!(
            "apiVersion: apps/v1\nkind: Deployment\n\
             metadata: {{name: {name}, namespace: shop, managedFields: [{{manager: {manager}, operation: Update, \
             apiVersion: apps/v1, time: '2026-12-01T10:00:00Z', fieldsType: FieldsV1, \
             fieldsV1: {{'f:spec': {{'f:replicas': {{}}}}}}}}]}}\n\
             spec: {{replicas: {replicas}, template: {{spec: {{containers: [{{name: app, image: {image}}}]}}}}}}\n---\n"
        )
    }

    fn scan(desired: &str, cluster: &str) -> ScanReport {
        let desired =
            DesiredSnapshot { resources: parse_manifests(desired, "git.yaml").resources, ..Default::default() };
        let mut live = LiveSnapshot {
            cluster: "prod".into(),
            resources: parse_manifests(cluster, "live").resources,
            coverage: Default::default(),
        };
        live.coverage.set(&GroupKind::new("apps", "Deployment"), Some("shop"), CoverageStatus::Complete);
        compare_snapshots(desired, live, &crate::Engine::default(), &ScanOptions::new("check"))
    }

    fn names<'a>(fields: impl Iterator<Item = &'a FieldEffect>) -> Vec<String> {
        fields.map(|f| format!("{} {}", f.drift.resource.name, f.drift.path)).collect()
    }

    #[test]
    fn a_hand_change_on_an_object_the_branch_changes_is_overwritten_even_on_another_field() {
        let cluster = live("web", 5, "web:1", "kubectl-scale");
        let base = scan(&git("web", 3, "web:1"), &cluster);
        assert_eq!(base.drifts.len(), 1, "{:?} {:?}", base.drifts, base.warnings);
        let e = merge_effect(&base, &scan(&git("web", 3, "web:2"), &cluster));
        assert_eq!(names(e.with(Effect::OverwritesLiveChange)), ["web spec.replicas"]);
        let f = e.with(Effect::OverwritesLiveChange).next().unwrap();
        assert_eq!(f.drift.changed_by.as_deref(), Some("kubectl-scale"));
        assert_eq!((f.drift.cluster_value.clone(), f.applies.clone()), (Some(5.into()), Some(3.into())));
        assert_eq!(names(e.with(Effect::Changes)), ["web spec.template.spec.containers[name=app].image"]);
        assert!(e.overwrites_live_changes());
        assert_eq!((e.left_open, e.objects.len(), e.untouched().count()), (0, 1, 0));
    }

    #[test]
    fn an_object_the_branch_leaves_alone_keeps_its_hand_change() {
        let cluster = live("web", 5, "web:1", "kubectl-scale") + &live("api", 2, "api:1", "kube-controller-manager");
        let base = scan(&(git("web", 3, "web:1") + &git("api", 2, "api:1")), &cluster);
        let e = merge_effect(&base, &scan(&(git("web", 3, "web:1") + &git("api", 4, "api:1")), &cluster));
        assert!(!e.overwrites_live_changes());
        assert_eq!(e.left_open, 1);
        assert_eq!(names(e.with(Effect::Changes)), ["api spec.replicas"]);
        assert_eq!(e.untouched().map(|o| o.key.name.as_str()).collect::<Vec<_>>(), ["api"]);
    }

    #[test]
    fn a_branch_that_says_what_the_cluster_has_resolves_the_drift() {
        let cluster = live("web", 5, "web:1", "kubectl-scale");
        let base = scan(&git("web", 3, "web:1"), &cluster);
        let e = merge_effect(&base, &scan(&git("web", 5, "web:1"), &cluster));
        assert_eq!(names(e.with(Effect::Resolves)), ["web spec.replicas"]);
        assert!(!e.overwrites_live_changes());
        assert_eq!(e.fields.len(), 1);
    }

    #[test]
    fn added_and_removed_objects() {
        let cluster = live("old", 5, "old:1", "kubectl-scale");
        let base = scan(&git("old", 3, "old:1"), &cluster);
        let e = merge_effect(&base, &scan(&git("new", 1, "new:1"), &cluster));
        let objects: Vec<_> = e.objects.iter().map(|o| (o.key.name.as_str(), o.change, o.touched)).collect();
        assert_eq!(objects, [("new", ObjectChange::Added, false), ("old", ObjectChange::Removed, true)]);
        // The missing object is created; a removed object's drift is neither resolved nor overwritten.
        assert_eq!(names(e.fields.iter()), ["new "]);
        assert_eq!(e.fields[0].effect, Effect::Creates);
    }

    #[test]
    fn the_same_rendering_changes_nothing() {
        let cluster = live("web", 5, "web:1", "kubectl-scale");
        let base = scan(&git("web", 3, "web:1"), &cluster);
        let e = merge_effect(&base, &scan(&git("web", 3, "web:1"), &cluster));
        assert!(e.fields.is_empty() && e.objects.is_empty());
        assert_eq!(e.left_open, 1);
    }
}
