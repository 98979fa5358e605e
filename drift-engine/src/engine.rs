//! The default [`Comparator`]: normalisation, desired-driven diff, three-way awareness,
//! attribution and ignore rules, configured by [`EngineConfig`]; each drift's type, severity,
//! classification and recommended action come from [`crate::verdict`].

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::applied::Applied;
#[cfg(test)]
use crate::diff::diff_view;
use crate::diff::{KeepExtra, RawDiff, diff_view_keeping, lookup_segments};
use crate::ignore::{CompiledRule, IgnoreRule, ObjectIgnores};
use crate::managed::{ManagerClass, ManagerClassifier, ManagerPolicy, OwnersAt, Ownership};
use crate::merge_keys::{MergeKeyRule, MergeKeys};
use crate::normalize::{LAST_APPLIED, SecretHasher, view};
use crate::verdict::{SeverityTable, Verdict, Verdicts};
use drift_model::compare::Comparator;
use drift_model::drift::*;
use drift_model::path::{Path, SegRef};
use drift_model::tree::{JsonView, ObjectRef, ObjectTree};
use drift_model::{Resource, ResourceKey, split_api_version};

/// Configuration of the engine; every field has a default. Deserialised from the `drift`
/// configuration file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EngineConfig {
    /// Ignore rules.
    pub ignore: Vec<IgnoreRule>,
    /// Severity overrides per drift type (`replicas_drift: MEDIUM`).
    pub severity: BTreeMap<DriftType, Severity>,
    /// Which field managers are GitOps appliers and which are people.
    pub managers: ManagerPolicy,
    /// Merge keys of custom resources' lists.
    pub merge_keys: Vec<MergeKeyRule>,
    /// Report fields that only a controller or webhook added (off: they are not drift).
    pub report_controller_fields: bool,
    /// Ignore `spec.replicas` of an object that a HorizontalPodAutoscaler in Git scales
    /// (default on).
    #[serde(default = "yes")]
    pub autoscaler_owns_replicas: bool,
}

fn yes() -> bool {
    true
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            ignore: Vec::new(),
            severity: BTreeMap::new(),
            managers: ManagerPolicy::default(),
            merge_keys: Vec::new(),
            report_controller_fields: false,
            autoscaler_owns_replicas: true,
        }
    }
}

/// The engine. Build it once and share it; comparing is pure and thread-safe.
///
/// ```
/// use drift_engine::Engine;
/// use drift_model::{Comparator, Resource, DriftType, Severity};
/// use serde_json::json;
/// let desired = Resource::from_object(json!({"apiVersion": "v1", "kind": "Service",
///     "metadata": {"name": "web", "namespace": "shop"},
///     "spec": {"ports": [{"port": 443, "targetPort": 8443}]}})).unwrap();
/// let live = Resource::from_object(json!({"apiVersion": "v1", "kind": "Service",
///     "metadata": {"name": "web", "namespace": "shop", "uid": "1", "resourceVersion": "9"},
///     "spec": {"clusterIP": "10.0.0.7", "type": "ClusterIP",
///              "ports": [{"port": 443, "protocol": "TCP", "targetPort": 9443}]}})).unwrap();
/// let drifts = Engine::default().compare(&desired, Some(&live));
/// assert_eq!(drifts.len(), 1);
/// assert_eq!(drifts[0].path, "spec.ports[port=443].targetPort");
/// assert_eq!(drifts[0].drift_type, DriftType::ServicePortDrift);
/// assert_eq!(drifts[0].severity, Severity::Critical);
/// ```
#[derive(Debug, Clone)]
pub struct Engine {
    ignore: Vec<CompiledRule>,
    verdicts: Verdicts,
    classifier: ManagerClassifier,
    merge_keys: MergeKeys,
    hasher: SecretHasher,
    report_controller_fields: bool,
    autoscaler_owns_replicas: bool,
}

impl Default for Engine {
    fn default() -> Self {
        match Engine::new(&EngineConfig::default()) {
            Ok(e) => e,
            // The default configuration holds only valid built-in globs.
            Err(e) => unreachable!("default engine configuration is valid: {e}"),
        }
    }
}

impl Engine {
    /// Builds an engine; invalid globs or pointers are configuration errors. Secret values are
    /// hashed under a random per-process key until [`Engine::with_secret_hasher`] gives the key
    /// a store keeps (the `drift` binary does, so hashes agree across processes).
    pub fn new(config: &EngineConfig) -> drift_model::Result<Self> {
        Ok(Engine {
            ignore: config.ignore.iter().map(CompiledRule::new).collect::<drift_model::Result<_>>()?,
            verdicts: Verdicts::new(SeverityTable { overrides: config.severity.clone() }),
            classifier: ManagerClassifier::new(&config.managers)?,
            merge_keys: MergeKeys::with_extra(&config.merge_keys),
            hasher: SecretHasher::random(),
            report_controller_fields: config.report_controller_fields,
            autoscaler_owns_replicas: config.autoscaler_owns_replicas,
        })
    }

    /// Uses a given Secret hasher (a fixed key keeps hashes stable across restarts, processes
    /// and replicas).
    pub fn with_secret_hasher(mut self, hasher: SecretHasher) -> Self {
        self.hasher = hasher;
        self
    }

    /// The Secret hasher in use.
    pub fn secret_hasher(&self) -> &SecretHasher {
        &self.hasher
    }

    /// Like [`Comparator::compare`], with each drift's structured [`Path`] (list items carry
    /// their index in the desired list, for tools that address items by position).
    pub fn compare_paths(&self, desired: &Resource, live: Option<&Resource>) -> Vec<(Path, Drift)> {
        self.compare_with(desired, live, &[])
    }

    /// The ignore rules that apply to `desired` (with the JSON pointers `implied` ignored too),
    /// or `None` when the whole object is ignored.
    fn ignores(&self, desired: &Resource, implied: &[&str]) -> Option<ObjectIgnores> {
        self.ignores_of(&desired.key, &*desired.object, &desired.provenance.ignore, implied)
    }

    /// [`Engine::ignores`] of a desired object read through [`JsonView`], with the rules of the
    /// GitOps object that deploys it (`gitops`).
    fn ignores_of<'d>(
        &self,
        key: &ResourceKey,
        desired: impl JsonView<'d>,
        gitops: &[IgnoreRule],
        implied: &[&str],
    ) -> Option<ObjectIgnores> {
        let mut ignores = ObjectIgnores::for_view(&self.ignore, key, desired);
        ignores.add_rules(gitops, key);
        if ignores.whole {
            return None;
        }
        ignores.pointers.extend(implied.iter().map(|p| (*p).to_owned()));
        Some(ignores)
    }

    fn compare_with(&self, desired: &Resource, live: Option<&Resource>, implied: &[&str]) -> Vec<(Path, Drift)> {
        let Some(ignores) = self.ignores(desired, implied) else { return Vec::new() };
        let Some(live) = live else {
            if ignores.path_ignored(&Path::root()) {
                return Vec::new();
            }
            return vec![(
                Path::root(),
                self.make(desired, DriftType::MissingResource, &Path::root(), None, None, None),
            )];
        };
        // Both objects as the walk sees them: borrowed, normalised as it goes (a Secret is
        // copied to fold and hash its values first).
        let nd = view(&desired.object, &self.hasher);
        let nl = view(&live.object, &self.hasher);
        let secret = matches!(nl, Cow::Owned(_));
        let desired_view = ObjectView::of(desired, &*nd);
        let ownership = Ownership::of(&live.object);
        self.compare_view(desired_view, &ignores, ObjectView::of(live, &*live.object), &*nl, secret, ownership)
    }

    /// [`Engine::compare_with`] of an object Git has and the cluster has, both read through
    /// [`JsonView`] (a `Value`, or a tree borrowing its text): `desired` as the walk sees it (a
    /// Secret normalised first), `walked` what the walk sees of `live` (likewise, `secret`),
    /// `live` the object as read, `ownership` its managedFields read.
    fn compare_view<'d, 'a, D: JsonView<'d>, L: JsonView<'a>>(
        &self,
        desired: ObjectView<'_, D>,
        ignores: &ObjectIgnores,
        live: ObjectView<'_, L>,
        walked: L,
        secret: bool,
        ownership: Ownership<'a>,
    ) -> Vec<(Path, Drift)> {
        let kind = desired.key.kind.as_str();
        // The last applied configuration (client-side apply), read only when a field only the
        // cluster has needs it, and only for which fields it holds (normalising changes that
        // only for a Secret, whose `stringData` counts as `data`).
        let last_applied_text = live
            .object
            .get("metadata")
            .and_then(|m| m.get("annotations"))
            .and_then(|a| a.get(LAST_APPLIED))
            .and_then(JsonView::as_str);
        let last_applied_cell = std::cell::OnceCell::new();
        let last_applied = || {
            last_applied_cell
                .get_or_init(|| {
                    let text = last_applied_text?;
                    if secret {
                        let v = serde_json::from_str::<Value>(text).ok()?;
                        Some(LastApplied::Normalised(crate::normalize::normalize(&v, &self.hasher)))
                    } else {
                        Applied::read(text).map(LastApplied::Read)
                    }
                })
                .as_ref()
        };
        // Fields only the cluster has that nobody owns and that were never applied are server
        // defaults: skipped during the walk.
        let mut keep_extra =
            ClaimedExtra { ownership: &ownership, last_applied, owners: Vec::new(), applied: Vec::new() };
        let raw = diff_view_keeping(kind, desired.object, walked, &self.merge_keys, &mut keep_extra);

        let mut out = Vec::new();
        for RawDiff { path, git, live: cluster, extra } in raw {
            if ignores.path_ignored(&path) {
                continue;
            }
            let owners = ownership.owners(&path);
            let managers: Vec<_> = ownership.managers_of(owners);
            if !managers.is_empty() && managers.iter().all(|m| ignores.manager_ignored(&m.manager)) {
                continue;
            }
            let managers: Vec<_> = managers.into_iter().filter(|m| !ignores.manager_ignored(&m.manager)).collect();
            let attribution = if extra {
                // Three-way: a field Git does not have is drift when the applier or a person put
                // it there, or when the last applied configuration had it (Git removed it).
                let in_last_applied = last_applied().is_some_and(|la| la.holds(path.segments()));
                let claimant = managers.iter().find(|m| match ownership.class(m, &self.classifier) {
                    ManagerClass::Manual | ManagerClass::Applier => true,
                    ManagerClass::ClientSideApply => in_last_applied,
                    // A manager on no list that created the object owns the server's defaults
                    // too (an operator's object): its fields count as a controller's here.
                    ManagerClass::Controller | ManagerClass::Unknown => self.report_controller_fields,
                });
                match claimant {
                    Some(m) => Some(*m),
                    None if in_last_applied => managers.first().copied(),
                    None => continue,
                }
            } else {
                // The most recent owner changed it. managedFields times have one-second
                // resolution, so on a tie the Git applier is the least likely author of a value
                // that differs from Git.
                let applier = |m: &Attribution| {
                    matches!(
                        ownership.class(m, &self.classifier),
                        ManagerClass::Applier | ManagerClass::ClientSideApply
                    )
                };
                let newest = managers.first().map(|m| m.time);
                managers.iter().filter(|m| Some(m.time) == newest).find(|m| !applier(m)).or(managers.first()).copied()
            };
            let drift_type = self.verdicts.drift_type(kind, &path);
            let attribution = attribution.map(|a| (a.clone(), ownership.class(a, &self.classifier)));
            let mut drift = self.make_named(desired.name(), drift_type, &path, git, cluster, attribution);
            drift.revert = crate::revert::revert_of_view(
                desired.key,
                desired.object,
                live.key,
                live.api_version,
                live.object,
                &path,
            );
            out.push((path, drift));
        }
        out.sort_by(|a, b| a.1.path.cmp(&b.1.path));
        out
    }

    fn make(
        &self,
        desired: &Resource,
        drift_type: DriftType,
        path: &Path,
        git: Option<Value>,
        cluster: Option<Value>,
        attribution: Option<(Attribution, ManagerClass)>,
    ) -> Drift {
        let named = Named { key: &desired.key, api_version: &desired.api_version, provenance: &desired.provenance };
        self.make_named(named, drift_type, path, git, cluster, attribution)
    }

    fn make_named(
        &self,
        desired: Named<'_>,
        drift_type: DriftType,
        path: &Path,
        git: Option<Value>,
        cluster: Option<Value>,
        attribution: Option<(Attribution, ManagerClass)>,
    ) -> Drift {
        let (attribution, manager) = attribution.unzip();
        let Verdict { drift_type, severity, classification, recommended_action } =
            self.verdicts.decide(drift_type, manager);
        Drift {
            resource: ResourceRef {
                api_version: desired.api_version.to_owned(),
                kind: desired.key.kind.clone(),
                namespace: desired.key.namespace.clone(),
                name: desired.key.name.clone(),
            },
            api_group: desired.key.group.clone(),
            drift_type,
            severity,
            path: path.to_string(),
            git_value: git,
            cluster_value: cluster,
            changed_by: attribution.as_ref().map(|a| a.manager.clone()),
            changed_at: attribution.as_ref().and_then(|a| a.time),
            attribution,
            classification,
            decision_source: DecisionSource::Scanner,
            recommended_action,
            source_path: desired.provenance.path.clone(),
            waiver: None,
            revert: None,
        }
    }
}

/// An object as [`Engine::compare_view`] reads it: its name, where it came from, its document.
#[derive(Clone, Copy)]
struct ObjectView<'k, V> {
    key: &'k ResourceKey,
    api_version: &'k str,
    provenance: &'k drift_model::Provenance,
    object: V,
}

impl<'k, V: Copy> ObjectView<'k, V> {
    /// The view of `r` whose document is seen as `object`.
    fn of(r: &'k Resource, object: V) -> Self {
        ObjectView { key: &r.key, api_version: &r.api_version, provenance: &r.provenance, object }
    }

    fn name(&self) -> Named<'k> {
        Named { key: self.key, api_version: self.api_version, provenance: self.provenance }
    }
}

/// What a drift says of the object it is found on.
#[derive(Clone, Copy)]
struct Named<'k> {
    key: &'k ResourceKey,
    api_version: &'k str,
    provenance: &'k drift_model::Provenance,
}

/// The last applied configuration of a live object, for which fields it holds.
enum LastApplied<'a> {
    /// A Secret's, normalised (its `stringData` folded into `data`).
    Normalised(Value),
    /// Any other object's, read from the annotation's text.
    Read(Applied<'a>),
}

impl LastApplied<'_> {
    fn holds<S: drift_model::path::SegView>(&self, segments: &[S]) -> bool {
        match self {
            LastApplied::Normalised(v) => lookup_segments(v, segments).is_some(),
            LastApplied::Read(a) => a.holds(segments),
        }
    }
}

/// Whether a field only the cluster has is claimed: some manager owns it, or the last applied
/// configuration holds it (read only when asked). What was found for the path's parents is kept
/// between questions (the walk asks about many fields of one parent in a row): `owners[i]` and
/// `applied[i]` (a value of the configuration, by index) are where the first `i` segments of the
/// last path asked about lead.
struct ClaimedExtra<'o, F> {
    ownership: &'o Ownership<'o>,
    last_applied: F,
    owners: Vec<OwnersAt>,
    applied: Vec<Option<usize>>,
}

impl<'l, 'x: 'l, F: Fn() -> Option<&'l LastApplied<'x>>> KeepExtra for ClaimedExtra<'_, F> {
    fn keep(&mut self, path: &[SegRef<'_>], unchanged: usize) -> bool {
        let ownership = self.ownership;
        // (Both kept only as far as the path is unchanged, whether asked this time or not.)
        self.owners.truncate(unchanged + 1);
        self.applied.truncate(unchanged + 1);
        if self.owners.is_empty() {
            self.owners.push(OwnersAt::ROOT);
        }
        for seg in &path[self.owners.len() - 1..] {
            let next = ownership.step(self.owners[self.owners.len() - 1], seg);
            self.owners.push(next);
        }
        if ownership.owners_at(self.owners[path.len()]) != 0 {
            return true;
        }
        let applied = match (self.last_applied)() {
            None => return false,
            Some(LastApplied::Read(applied)) => applied,
            Some(other) => return other.holds(path),
        };
        if self.applied.is_empty() {
            self.applied.push(Some(Applied::ROOT));
        }
        for seg in &path[self.applied.len() - 1..] {
            let next = self.applied[self.applied.len() - 1].and_then(|at| applied.step(at, seg));
            self.applied.push(next);
        }
        self.applied[path.len()].is_some_and(|at| applied.is_value(at))
    }
}

/// Moved to [`crate::verdict::recommend`], where every part of a drift's verdict is decided.
pub use crate::verdict::recommend;

/// Objects whose `spec.replicas` a HorizontalPodAutoscaler in the desired set scales.
fn autoscaled(desired: &[Resource]) -> Vec<ResourceKey> {
    desired
        .iter()
        .filter(|r| r.key.kind == "HorizontalPodAutoscaler")
        .filter_map(|hpa| {
            let target = hpa.object.pointer("/spec/scaleTargetRef")?;
            let kind = target.get("kind")?.as_str()?;
            let name = target.get("name")?.as_str()?;
            let group = target.get("apiVersion").and_then(Value::as_str).map(|v| split_api_version(v).0).unwrap_or("");
            Some(ResourceKey::new(group, kind, hpa.key.namespace.as_deref(), name))
        })
        .collect()
}

/// The drifts of [`Engine::compare_with`], in a vector of their own size: collecting in place
/// would keep the larger buffer of the (path, drift) pairs (a scan keeps each object's drifts
/// until the report is made: 2 KiB an object of 40,000 with one drift each).
fn drifts_of(found: Vec<(Path, Drift)>) -> Vec<Drift> {
    let mut drifts = Vec::with_capacity(found.len());
    drifts.extend(found.into_iter().map(|(_, d)| d));
    drifts
}

impl Comparator for Engine {
    fn compare(&self, desired: &Resource, live: Option<&Resource>) -> Vec<Drift> {
        drifts_of(self.compare_with(desired, live, &[]))
    }

    /// The walk reads the tree as it is (no `Value` made of it), but for a Secret, whose
    /// values are folded and hashed before the walk.
    fn compare_tree(&self, desired: &Resource, live: &ObjectTree<'_>) -> Vec<Drift> {
        let root = live.tree.root();
        if root.get("kind").and_then(JsonView::as_str) == Some("Secret") {
            return self.compare(desired, Some(&live.to_resource()));
        }
        let Some(ignores) = self.ignores(desired, &[]) else { return Vec::new() };
        let live_view =
            ObjectView { key: &live.key, api_version: &live.api_version, provenance: &live.provenance, object: root };
        let nd = view(&desired.object, &self.hasher);
        let ownership = Ownership::of_tree(&live.tree);
        drifts_of(self.compare_view(ObjectView::of(desired, &*nd), &ignores, live_view, root, false, ownership))
    }

    /// Both trees walked as they are, but for a Secret (its values folded and hashed first).
    fn compare_trees(&self, desired: ObjectRef<'_, '_>, live: &ObjectTree<'_>) -> Vec<Drift> {
        let (d, l) = (desired.tree.root(), live.tree.root());
        let secret = |n: drift_model::tree::Node<'_, '_>| n.get("kind").and_then(JsonView::as_str) == Some("Secret");
        if secret(d) || secret(l) {
            return self.compare_tree(&desired.to_resource(), live);
        }
        let Some(ignores) = self.ignores_of(desired.key, d, &desired.provenance.ignore, &[]) else { return Vec::new() };
        let desired_view = ObjectView {
            key: desired.key,
            api_version: desired.api_version,
            provenance: desired.provenance,
            object: d,
        };
        let live_view =
            ObjectView { key: &live.key, api_version: &live.api_version, provenance: &live.provenance, object: l };
        let ownership = Ownership::of_tree(&live.tree);
        drifts_of(self.compare_view(desired_view, &ignores, live_view, l, false, ownership))
    }

    fn compare_in(&self, all_desired: &[Resource], desired: &Resource, live: Option<&Resource>) -> Vec<Drift> {
        let scaled = self.autoscaler_owns_replicas && autoscaled(all_desired).contains(&desired.key);
        let implied: &[&str] = if scaled { &["/spec/replicas"] } else { &[] };
        drifts_of(self.compare_with(desired, live, implied))
    }

    fn unmanaged(&self, live: &Resource) -> Option<Drift> {
        let ignores = ObjectIgnores::for_object(&self.ignore, &live.key, &live.object);
        if ignores.whole || ignores.path_ignored(&Path::root()) {
            return None;
        }
        // Who made it: the manager that wrote first.
        let ownership = Ownership::of(&live.object);
        let creator = (0..)
            .map_while(|i| ownership.manager(i))
            .filter(|m| !ignores.manager_ignored(&m.manager))
            .min_by_key(|m| (m.time.is_none(), m.time))
            .map(|a| (a.clone(), ownership.class(a, &self.classifier)));
        let mut drift = self.make(live, DriftType::UnmanagedResource, &Path::root(), None, None, creator);
        if !self.verdicts.severities().is_overridden(DriftType::UnmanagedResource)
            && crate::orphans::sensitive_kind(&live.key)
        {
            drift.severity = drift_model::Severity::High;
        }
        drift.source_path = None;
        Some(drift)
    }

    fn compare_all(&self, desired: &[Resource], live: &[Resource]) -> Vec<Drift> {
        let which: Vec<&Resource> = desired.iter().collect();
        self.compare_some(desired, &which, live)
    }

    /// The targets of the autoscalers in Git: the only objects whose drifts depend on others.
    fn relations(&self, desired: &[Resource]) -> Option<HashSet<ResourceKey>> {
        Some(if self.autoscaler_owns_replicas { autoscaled(desired).into_iter().collect() } else { HashSet::new() })
    }

    /// Only an autoscaler relates objects: any other kind relates none, without its tree read.
    fn relations_tree(&self, desired: ObjectRef<'_, '_>) -> Option<HashSet<ResourceKey>> {
        if desired.key.kind == "HorizontalPodAutoscaler" {
            return self.relations(std::slice::from_ref(&desired.to_resource()));
        }
        Some(HashSet::new())
    }

    fn compare_some(&self, desired: &[Resource], which: &[&Resource], live: &[Resource]) -> Vec<Drift> {
        let index: HashMap<&ResourceKey, &Resource> = live.iter().map(|r| (&r.key, r)).collect();
        let scaled: HashSet<ResourceKey> =
            if self.autoscaler_owns_replicas { autoscaled(desired).into_iter().collect() } else { HashSet::new() };
        which
            .iter()
            .flat_map(|d| {
                let implied: &[&str] = if scaled.contains(&d.key) { &["/spec/replicas"] } else { &[] };
                self.compare_with(d, index.get(&d.key).copied(), implied).into_iter().map(|(_, d)| d)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use drift_model::Comparator;
    use proptest::prelude::*;
    use serde_json::json;

    /// A Deployment as the API server returns it, its fields each there or not by `bits`: keyed
    /// lists (containers by name, ports by port and protocol), defaults, nested mappings.
    fn live_deployment(bits: u64) -> Value {
        let on = |i: u32| bits >> i & 1 == 1;
        let mut containers = Vec::new();
        for (c, name) in ["web", "log", "db"].iter().enumerate().take(1 + (bits % 3) as usize) {
            let at = 3 + 8 * c as u32;
            let mut container = json!({"name": name, "image": format!("{name}:1")});
            if on(at) {
                container["ports"] =
                    json!([{"containerPort": 80, "protocol": "TCP"}, {"containerPort": 9090, "protocol": "TCP"}]);
            }
            if on(at + 1) {
                container["terminationMessagePath"] = json!("/dev/termination-log");
            }
            if on(at + 2) {
                container["imagePullPolicy"] = json!("IfNotPresent");
            }
            if on(at + 3) {
                container["resources"] = json!({"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "100m"}});
            }
            if on(at + 4) {
                container["env"] = json!([{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]);
            }
            containers.push(container);
        }
        let mut live = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "app", "namespace": "ns", "labels": {"app": "app"}},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "app"}},
                "template": {"metadata": {"labels": {"app": "app"}}, "spec": {"containers": containers}}}});
        if on(28) {
            live["spec"]["strategy"] =
                json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}});
        }
        if on(29) {
            live["spec"]["template"]["spec"]["dnsPolicy"] = json!("ClusterFirst");
        }
        live
    }

    /// `v` with each field dropped where the next bit of `bits` says so (list items kept).
    fn some_of(v: &Value, bits: &mut u64) -> Value {
        match v {
            Value::Object(m) => {
                let mut kept = serde_json::Map::new();
                for (k, v) in m {
                    *bits = bits.rotate_left(7) ^ 0x9e37_79b9_7f4a_7c15;
                    if *bits & 3 != 0 {
                        kept.insert(k.clone(), some_of(v, bits));
                    }
                }
                Value::Object(kept)
            }
            Value::Array(items) => Value::Array(items.iter().map(|i| some_of(i, bits)).collect()),
            v => v.clone(),
        }
    }

    /// The FieldsV1 of the fields of `v`, list items keyed as the API server keys them.
    fn fields_v1(v: &Value) -> Value {
        match v {
            Value::Object(m) => Value::Object(
                m.iter()
                    .filter(|(k, _)| !matches!(k.as_str(), "apiVersion" | "kind"))
                    .map(|(k, v)| (format!("f:{k}"), fields_v1(v)))
                    .collect(),
            ),
            Value::Array(items) => Value::Object(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, item)| {
                        let key = if let Some(name) = item.get("name") {
                            format!("k:{}", json!({"name": name}))
                        } else if let Some(port) = item.get("containerPort") {
                            format!("k:{}", json!({"containerPort": port, "protocol": item["protocol"]}))
                        } else {
                            format!("i:{i}")
                        };
                        (key, fields_v1(item))
                    })
                    .collect(),
            ),
            _ => json!({}),
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1024))]

        /// The engine keeps what it found for a path's parents between the walk's questions about
        /// fields only the cluster has: it answers each as asking afresh does.
        #[test]
        fn claimed_extra_fields_are_those_a_fresh_lookup_finds(bits in any::<u64>(), pick in any::<u64>(), applied in any::<bool>()) {
            let mut live = live_deployment(bits);
            let mut choose = pick;
            let desired = some_of(&live, &mut choose);
            let owned = some_of(&live, &mut choose);
            let last = some_of(&live, &mut choose);
            live["metadata"]["managedFields"] = json!([
                {"manager": "kubectl-client-side-apply", "operation": "Update", "fieldsType": "FieldsV1", "fieldsV1": fields_v1(&owned)}]);
            if applied {
                live["metadata"]["annotations"] = json!({LAST_APPLIED: serde_json::to_string(&last).unwrap()});
            }
            let engine = Engine::default();
            let ownership = Ownership::of(&live);
            let text = live["metadata"]["annotations"][LAST_APPLIED].as_str().map(str::to_owned);
            let read = text.as_deref().and_then(Applied::read).map(LastApplied::Read);
            let mut fresh = |segs: &[SegRef<'_>]| {
                ownership.owners_of_segments(segs) != 0 || read.as_ref().is_some_and(|la| la.holds(segs))
            };
            let expected = diff_view("Deployment", &desired, &live, &engine.merge_keys, &mut fresh);
            let mut kept = ClaimedExtra { ownership: &ownership, last_applied: || read.as_ref(), owners: Vec::new(), applied: Vec::new() };
            let found = diff_view_keeping("Deployment", &desired, &live, &engine.merge_keys, &mut kept);
            prop_assert_eq!(found, expected);
        }
    }

    #[test]
    fn on_a_tie_of_times_the_hand_change_is_attributed_not_the_applier() {
        let desired = Resource::from_object(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "namespace": "ns"}, "data": {"mode": "fast"}}))
        .unwrap();
        let fields = json!({"f:data": {"f:mode": {}}});
        let live = |first: &str, second: &str| {
            Resource::from_object(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "c", "namespace": "ns", "managedFields": [
                    {"manager": first, "operation": "Update", "time": "2026-11-30T10:00:00Z", "fieldsV1": fields},
                    {"manager": second, "operation": "Update", "time": "2026-11-30T10:00:00Z", "fieldsV1": fields},
                ]},
                "data": {"mode": "slow"}}))
            .unwrap()
        };
        let engine = Engine::new(&EngineConfig::default()).unwrap();
        for (a, b) in [("kubectl-client-side-apply", "kubectl-edit"), ("kubectl-edit", "kubectl-client-side-apply")] {
            let drifts = engine.compare(&desired, Some(&live(a, b)));
            assert_eq!(drifts.len(), 1);
            assert_eq!(drifts[0].changed_by.as_deref(), Some("kubectl-edit"), "{a} then {b}");
        }
    }
}
