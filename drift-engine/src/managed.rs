//! Field ownership from `metadata.managedFields` (FieldsV1): who owns which path, and what kind
//! of actor each manager is.

pub use drift_model::ignore::glob_set;
use globset::GlobSet;
use serde::{Deserialize, Serialize};

use serde_json::Value;

use drift_model::drift::Attribution;
use drift_model::fields::ManagedFields;
pub(crate) use drift_model::fields::OwnersAt;
use drift_model::path::{Path, SegView};
use drift_model::tree::{JsonView, Shape, Tree};

/// What kind of actor a field manager is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ManagerClass {
    /// The GitOps applier (Argo CD, Flux): its fields come from Git.
    Applier,
    /// A person (kubectl edit/scale/set/patch/label/annotate, a dashboard).
    Manual,
    /// `kubectl apply` (client side): manual, but it also records server defaults in its field
    /// set, so only fields in the last-applied configuration count as its own.
    ClientSideApply,
    /// A known controller of the object's kind ([`ManagerPolicy::controllers`] and the built-in
    /// list [`BUILTIN_CONTROLLERS`]), or a manager whose write says it is one: an `Update` of the
    /// `status` or `scale` subresource, or any write to an object a controller owns (an owner
    /// reference with `controller: true`).
    Controller,
    /// A manager on no list and whose write says nothing: a name anyone can choose
    /// (`kubectl --field-manager my-script`), so it proves nothing. Treated as a change by hand
    /// for reverts and self-heal (classification `unknown`), unless
    /// [`ManagerPolicy::unknown`] says otherwise.
    Unknown,
}

/// Known controllers: a manager name (glob) and the kinds of object it is a controller of
/// (empty: every kind). A change by one of them to an object of another kind is not a
/// controller's. Extended by `engine.managers.controllers` of drift.yaml (docs/drift-types.md).
pub const BUILTIN_CONTROLLERS: &[(&str, &[&str])] = &[
    // The core controllers (deployments, replica sets, autoscalers through the scale
    // subresource, service accounts, namespaces, endpoints, the garbage collector), as
    // kube-controller-manager and as K3s, which runs them in its own process.
    ("kube-controller-manager", &[]),
    ("k3s", &[]),
    ("kube-apiserver", &[]),
    ("kube-scheduler", &["Pod"]),
    ("kubelet", &["Pod", "Node"]),
    ("vpa-recommender", &["VerticalPodAutoscaler"]),
    ("vpa-updater", &["Pod"]),
    ("vpa-admission-controller", &["Pod"]),
    ("keda-operator", &["HorizontalPodAutoscaler", "ScaledObject", "ScaledJob"]),
    (
        "cert-manager-cainjector",
        &["MutatingWebhookConfiguration", "ValidatingWebhookConfiguration", "CustomResourceDefinition", "APIService"],
    ),
    (
        "cert-manager-*",
        &["Secret", "Certificate", "CertificateRequest", "Order", "Challenge", "Issuer", "ClusterIssuer"],
    ),
    ("rollouts-controller", &["Rollout", "ReplicaSet", "Service", "Ingress", "VirtualService", "AnalysisRun"]),
    ("pilot-discovery", &["MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"]),
];

/// A controller of drift.yaml's `engine.managers.controllers`: a name (glob), or a name and the
/// kinds it controls.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ControllerRule {
    /// A manager name (glob), a controller of every kind.
    Any(String),
    /// A manager name (glob) and the kinds it is a controller of (empty: every kind).
    Kinds {
        /// The manager name (glob).
        manager: String,
        /// The kinds (`Deployment`, ...).
        #[serde(default)]
        kinds: Vec<String>,
    },
}

impl ControllerRule {
    fn parts(&self) -> (&str, &[String]) {
        match self {
            ControllerRule::Any(m) => (m, &[]),
            ControllerRule::Kinds { manager, kinds } => (manager, kinds),
        }
    }
}

/// What a manager on no list counts as (`engine.managers.unknown`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UnknownManagers {
    /// Classification `unknown`: reverted and healed like a change by hand (the default).
    #[default]
    Unknown,
    /// A controller, as before issue 37: never reverted nor healed.
    Controller,
    /// A person: classification `manual_change`.
    Manual,
}

/// Which field managers are appliers, which are people and which are controllers; any other is
/// unknown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ManagerPolicy {
    /// Globs of GitOps appliers.
    pub appliers: Vec<String>,
    /// Globs of manual managers.
    pub manual: Vec<String>,
    /// Controllers besides the built-in ones ([`BUILTIN_CONTROLLERS`]): a glob, or
    /// `{manager, kinds}`.
    pub controllers: Vec<ControllerRule>,
    /// What a manager on no list counts as (default `unknown`).
    pub unknown: UnknownManagers,
}

impl Default for ManagerPolicy {
    fn default() -> Self {
        ManagerPolicy {
            appliers: [
                "argocd-controller",
                "argocd-application-controller",
                "kustomize-controller",
                "helm-controller",
                "flux-client-side-apply",
                "gotk-*",
                // The detector's own reverts write Git's values.
                crate::revert::FIELD_MANAGER,
            ]
            .map(str::to_owned)
            .to_vec(),
            manual: ["kubectl", "kubectl-*", "k9s", "Mozilla", "Mozilla/*", "lens", "OpenLens", "headlamp*"]
                .map(str::to_owned)
                .to_vec(),
            controllers: Vec::new(),
            unknown: UnknownManagers::Unknown,
        }
    }
}

/// A compiled [`ManagerPolicy`].
#[derive(Debug, Clone)]
pub struct ManagerClassifier {
    appliers: GlobSet,
    manual: GlobSet,
    /// Each controller's name and kinds (empty: every kind), built-in ones first.
    controllers: Vec<(GlobSet, Vec<String>)>,
    unknown: UnknownManagers,
}

impl ManagerClassifier {
    /// Compiles a policy.
    pub fn new(policy: &ManagerPolicy) -> drift_model::Result<Self> {
        let mut controllers = Vec::with_capacity(BUILTIN_CONTROLLERS.len() + policy.controllers.len());
        for (manager, kinds) in BUILTIN_CONTROLLERS {
            controllers.push((glob_set(&[(*manager).to_owned()])?, kinds.iter().map(|k| (*k).to_owned()).collect()));
        }
        for rule in &policy.controllers {
            let (manager, kinds) = rule.parts();
            controllers.push((glob_set(&[manager.to_owned()])?, kinds.to_vec()));
        }
        Ok(ManagerClassifier {
            appliers: glob_set(&policy.appliers)?,
            manual: glob_set(&policy.manual)?,
            controllers,
            unknown: policy.unknown,
        })
    }

    /// The class of a manager name writing to an object of `kind`, from the names alone.
    pub fn classify(&self, manager: &str, kind: &str) -> ManagerClass {
        if self.appliers.is_match(manager) {
            ManagerClass::Applier
        } else if manager == "kubectl-client-side-apply" {
            ManagerClass::ClientSideApply
        } else if self.manual.is_match(manager) {
            ManagerClass::Manual
        } else if self
            .controllers
            .iter()
            .any(|(names, kinds)| names.is_match(manager) && (kinds.is_empty() || kinds.iter().any(|k| k == kind)))
        {
            ManagerClass::Controller
        } else {
            ManagerClass::Unknown
        }
    }

    /// The class of a manager's write ([`Attribution`]) to an object of `kind`: by its name
    /// ([`ManagerClassifier::classify`]); a name on no list is a controller's when the write
    /// says so (an `Update` of the `status` or `scale` subresource, or an object a controller
    /// owns: `owned`), else what `engine.managers.unknown` says.
    pub fn classify_write(&self, write: &Attribution, kind: &str, owned: bool) -> ManagerClass {
        match self.classify(&write.manager, kind) {
            ManagerClass::Unknown => {
                let subresource = write.operation == "Update"
                    && matches!(write.subresource.as_deref(), Some("status") | Some("scale"));
                if subresource || owned {
                    return ManagerClass::Controller;
                }
                match self.unknown {
                    UnknownManagers::Unknown => ManagerClass::Unknown,
                    UnknownManagers::Controller => ManagerClass::Controller,
                    UnknownManagers::Manual => ManagerClass::Manual,
                }
            }
            class => class,
        }
    }
}

/// The ownership tree of one live object, borrowing its field names from the object.
#[derive(Debug, Default)]
pub struct Ownership<'a> {
    /// The object's kind.
    kind: &'a str,
    /// Whether a controller owns the object (an owner reference with `controller: true`).
    owned: bool,
    /// Each manager's class, worked out when first asked ([`Ownership::class`]).
    classes: Vec<std::cell::Cell<Option<ManagerClass>>>,
    /// The managers and who owns which field: read here, or as the object's reader read them.
    fields: Fields<'a>,
}

/// The managedFields an [`Ownership`] reads: its own, or those its tree's reader read. (Not a
/// `Cow`, whose `ToOwned` bound would make `Ownership<'a>` invariant in `'a`.)
#[derive(Debug)]
enum Fields<'a> {
    Read(ManagedFields<'a>),
    Lent(&'a ManagedFields<'a>),
}

impl Default for Fields<'_> {
    fn default() -> Self {
        Fields::Read(ManagedFields::default())
    }
}

impl<'a> std::ops::Deref for Fields<'a> {
    type Target = ManagedFields<'a>;

    fn deref(&self) -> &ManagedFields<'a> {
        match self {
            Fields::Read(f) => f,
            Fields::Lent(f) => f,
        }
    }
}

impl<'a> Ownership<'a> {
    /// Reads `metadata.managedFields` of a live object (missing or malformed entries are skipped;
    /// at most 64 managers are tracked). The entries are read from the tree, or from their JSON
    /// text when the object keeps them as text (a string: how
    /// `drift_manifest::parse_live_manifests` keeps them, unparsed until asked); both give the same
    /// ownership ([`ManagedFields::of_view`]).
    pub fn of(object: &'a Value) -> Self {
        Self::of_view(object)
    }

    /// [`Ownership::of`] of an object read through [`JsonView`] (a `Value`, or a tree that
    /// borrows its text).
    pub fn of_view(object: impl JsonView<'a>) -> Self {
        let managed = object.get("metadata").and_then(|m| m.get("managedFields"));
        Self::with_fields(object, Fields::Read(managed.map(ManagedFields::of_view).unwrap_or_default()))
    }

    /// [`Ownership::of`] of an object read as a tree, its managedFields as the tree's reader read
    /// them when it did ([`Tree::managed_fields`]: `drift_manifest::read_live_tree` reads them as
    /// it reads the object), else from the tree.
    pub fn of_tree(tree: &'a Tree<'_>) -> Self {
        match tree.managed_fields() {
            Some(fields) => Self::with_fields(tree.root(), Fields::Lent(fields)),
            None => Self::of_view(tree.root()),
        }
    }

    fn with_fields(object: impl JsonView<'a>, fields: Fields<'a>) -> Self {
        Ownership {
            kind: object.get("kind").and_then(JsonView::as_str).unwrap_or(""),
            owned: object.get("metadata").and_then(|m| m.get("ownerReferences")).is_some_and(|refs| {
                refs.shape() == Shape::Array
                    && (0..refs.len())
                        .filter_map(|i| refs.item(i))
                        .any(|r| r.get("controller").is_some_and(|c| c.shape() == Shape::Bool(true)))
            }),
            classes: vec![std::cell::Cell::new(None); fields.managers().len()],
            fields,
        }
    }

    /// Whether the object had any managedFields.
    pub fn is_empty(&self) -> bool {
        self.fields.managers().is_empty()
    }

    /// The managers (as a bit set over [`Ownership::manager`]) that own `path`: those owning it
    /// or something under it, or owning an ancestor as a whole.
    pub fn owners(&self, path: &Path) -> u64 {
        self.fields.owners(path)
    }

    /// [`Ownership::owners`] of a path given as segments (owned or borrowed).
    pub fn owners_of_segments<S: SegView>(&self, segments: &[S]) -> u64 {
        self.fields.owners_of_segments(segments)
    }

    /// One segment further down the ownership tree from `from` (a walk that asks about many
    /// paths under one parent steps to the parent once).
    pub(crate) fn step<S: SegView>(&self, from: OwnersAt, seg: &S) -> OwnersAt {
        self.fields.step(from, seg)
    }

    /// The managers owning the path a walk of [`Ownership::step`]s reached.
    pub(crate) fn owners_at(&self, at: OwnersAt) -> u64 {
        self.fields.owners_at(at)
    }

    /// The class of one of this object's managers (`manager` as [`Ownership::manager`] or
    /// [`Ownership::managers_of`] gave it), worked out once per object; any other attribution
    /// is classified each time. Both as [`ManagerClassifier::classify_write`] of this object's
    /// kind and owner references.
    pub fn class(&self, manager: &Attribution, classifier: &ManagerClassifier) -> ManagerClass {
        let Some(i) = self.fields.managers().iter().position(|m| std::ptr::eq(m, manager)) else {
            return classifier.classify_write(manager, self.kind, self.owned);
        };
        let cell = &self.classes[i];
        cell.get().unwrap_or_else(|| {
            let class = classifier.classify_write(manager, self.kind, self.owned);
            cell.set(Some(class));
            class
        })
    }

    /// The manager at a bit index.
    pub fn manager(&self, index: usize) -> Option<&Attribution> {
        self.fields.managers().get(index)
    }

    /// The managers of a bit set, most recent first.
    pub fn managers_of(&self, set: u64) -> Vec<&Attribution> {
        let managers = self.fields.managers();
        let mut v: Vec<&Attribution> =
            (0..managers.len()).filter(|i| set & (1 << i) != 0).map(|i| &managers[i]).collect();
        v.sort_by_key(|a| std::cmp::Reverse(a.time));
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn owners_of_keyed_items_and_whole_values() {
        let obj = json!({"metadata": {"managedFields": [
            {"manager": "kubectl-client-side-apply", "operation": "Update", "time": "2026-01-01T00:00:00Z",
             "fieldsV1": {"f:spec": {"f:ports": {"k:{\"port\":80,\"protocol\":\"TCP\"}": {".": {}, "f:port": {}}}}}},
            {"manager": "kubectl-edit", "operation": "Update", "time": "2026-01-02T00:00:00Z",
             "fieldsV1": {"f:data": {}}}
        ]}});
        let o = Ownership::of(&obj);
        let port = Path::root().field("spec").field("ports").item(
            vec![("port".into(), "80".into()), ("protocol".into(), "TCP".into())],
            vec![false, true],
            0,
        );
        assert_eq!(o.owners(&port), 1);
        assert_eq!(o.owners(&port.field("targetPort")), 0, "nobody owns targetPort");
        assert_eq!(o.owners(&Path::root().field("data").field("key")), 2, "f:data as a whole");
        assert_eq!(o.managers_of(3)[0].manager, "kubectl-edit", "most recent first");
    }

    /// A live object read as a tree has its managedFields read as it is read: the ownership
    /// built from them is the one read from the object's kept text.
    #[test]
    fn ownership_of_a_tree_is_read_once_and_is_the_ownership_of_its_text() {
        let object = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web",
            "ownerReferences": [{"controller": true, "kind": "X", "name": "x"}],
            "managedFields": [
                {"fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:ports": {"k:{\"port\":80,\"protocol\":\"TCP\"}": {".": {}, "f:port": {}}}}},
                 "manager": "kubectl-client-side-apply", "operation": "Update", "time": "2026-01-01T00:00:00Z"},
                {"fieldsV1": {"f:spec": {"f:replicas": {}}}, "manager": "kubectl-scale", "operation": "Update",
                 "subresource": "scale", "time": "2026-01-02T00:00:00Z"}]}, "spec": {"replicas": 2}});
        let text = serde_json::to_string_pretty(&object).unwrap();
        let live = drift_manifest::read_live_tree(&text, "live.json", drift_manifest::Limits::default()).unwrap();
        assert!(live.tree.managed_fields().is_some(), "read with the object");
        let once = Ownership::of_tree(&live.tree);
        let kept = live.tree.root().get("metadata").and_then(|m| m.get("managedFields")).and_then(JsonView::as_str);
        assert!(kept.is_some(), "the list is kept as its text");
        let from_text = Ownership::of_view(live.tree.root());
        let from_value = Ownership::of(&object);
        let port = Path::root().field("spec").field("ports").item(
            vec![("port".into(), "80".into()), ("protocol".into(), "TCP".into())],
            vec![false, true],
            0,
        );
        for o in [&from_text, &from_value] {
            assert_eq!(o.fields.managers(), once.fields.managers());
            assert_eq!((o.kind, o.owned), (once.kind, once.owned));
            for path in [
                port.clone(),
                port.field("port"),
                Path::root().field("spec").field("replicas"),
                Path::root().field("data"),
            ] {
                assert_eq!(o.owners(&path), once.owners(&path), "{path}");
            }
        }
        assert_eq!(once.owners(&port), 1);
        assert_eq!(once.owners(&Path::root().field("spec").field("replicas")), 2);
        assert_eq!(once.managers_of(3)[0].manager, "kubectl-scale");
    }

    #[test]
    fn item_keys_written_in_another_order_are_one_node() {
        let obj = json!({"metadata": {"managedFields": [
            {"manager": "a", "fieldsV1": {"f:spec": {"f:ports": {"k:{\"port\":80,\"protocol\":\"TCP\"}": {"f:port": {}}}}}},
            {"manager": "b", "fieldsV1": {"f:spec": {"f:ports": {"k:{\"protocol\":\"TCP\",\"port\":80}": {"f:name": {}}}}}}
        ]}});
        let o = Ownership::of(&obj);
        let port = Path::root().field("spec").field("ports").item(
            vec![("protocol".into(), "TCP".into()), ("port".into(), "80".into())],
            vec![false, false],
            0,
        );
        assert_eq!(o.owners(&port), 3);
        assert_eq!(o.owners(&port.field("name")), 2);
    }

    #[test]
    fn a_managers_class_is_the_classifiers_whether_asked_once_or_again() {
        let obj = json!({"metadata": {"managedFields": [
            {"manager": "kubectl-edit", "fieldsV1": {"f:data": {}}},
            {"manager": "argocd-controller", "fieldsV1": {"f:data": {}}},
            {"manager": "kube-controller-manager", "fieldsV1": {"f:data": {}}}
        ]}});
        let c = ManagerClassifier::new(&ManagerPolicy::default()).unwrap();
        let o = Ownership::of(&obj);
        for _ in 0..2 {
            for m in o.managers_of(7) {
                assert_eq!(o.class(m, &c), c.classify(&m.manager, ""));
                assert_eq!(o.class(&m.clone(), &c), c.classify(&m.manager, ""), "not one of its own: classified");
            }
        }
        assert_eq!(o.class(o.manager(0).unwrap(), &c), ManagerClass::Manual);
        assert_eq!(o.class(o.manager(1).unwrap(), &c), ManagerClass::Applier);
        assert_eq!(o.class(o.manager(2).unwrap(), &c), ManagerClass::Controller);
    }

    #[test]
    fn classes() {
        let c = ManagerClassifier::new(&ManagerPolicy::default()).unwrap();
        assert_eq!(c.classify("kubectl-edit", "ConfigMap"), ManagerClass::Manual);
        assert_eq!(c.classify("kubectl", "ConfigMap"), ManagerClass::Manual);
        assert_eq!(c.classify("kubectl-client-side-apply", "ConfigMap"), ManagerClass::ClientSideApply);
        assert_eq!(c.classify("argocd-controller", "ConfigMap"), ManagerClass::Applier);
        assert_eq!(c.classify("kube-controller-manager", "Deployment"), ManagerClass::Controller);
    }

    /// Regression test of issue 37, item 2: any name that was neither an applier nor a person
    /// was a controller's, so `kubectl --field-manager my-script` hid a hand change from
    /// reverts and self-heal. A controller is one by a list (of its kinds) or by its write.
    #[test]
    fn a_made_up_manager_is_unknown_unless_a_list_or_its_write_says_controller() {
        let c = ManagerClassifier::new(&ManagerPolicy::default()).unwrap();
        let write = |manager: &str, operation: &str, subresource: Option<&str>| Attribution {
            manager: manager.to_owned(),
            operation: operation.to_owned(),
            time: None,
            subresource: subresource.map(str::to_owned),
        };
        let plain = write("my-script", "Update", None);
        assert_eq!(c.classify_write(&plain, "Service", false), ManagerClass::Unknown);
        assert_eq!(c.classify_write(&write("my-script", "Apply", None), "Service", false), ManagerClass::Unknown);
        // The write says so: a status or scale subresource update, or an object a controller owns.
        assert_eq!(
            c.classify_write(&write("hpa-x", "Update", Some("scale")), "Deployment", false),
            ManagerClass::Controller
        );
        assert_eq!(
            c.classify_write(&write("op", "Update", Some("status")), "Deployment", false),
            ManagerClass::Controller
        );
        assert_eq!(c.classify_write(&write("op", "Apply", Some("status")), "Deployment", false), ManagerClass::Unknown);
        assert_eq!(c.classify_write(&plain, "ReplicaSet", true), ManagerClass::Controller);
        // A known controller only of its own kinds.
        assert_eq!(c.classify("rollouts-controller", "Service"), ManagerClass::Controller);
        assert_eq!(c.classify("rollouts-controller", "ConfigMap"), ManagerClass::Unknown);
        assert_eq!(c.classify("kube-scheduler", "Deployment"), ManagerClass::Unknown);
        // People and appliers stay what they are, owned or not.
        assert_eq!(c.classify_write(&write("kubectl-edit", "Update", None), "ReplicaSet", true), ManagerClass::Manual);
        // drift.yaml extends the list, with kinds or for every kind, and says what the unknown are.
        let policy: ManagerPolicy = serde_json::from_value(serde_json::json!({
            "controllers": ["image-updater", {"manager": "my-operator-*", "kinds": ["Deployment"]}],
            "unknown": "controller",
        }))
        .unwrap();
        assert!(policy.appliers.contains(&"argocd-controller".to_owned()), "the other lists keep their defaults");
        let c = ManagerClassifier::new(&policy).unwrap();
        assert_eq!(c.classify("image-updater", "ConfigMap"), ManagerClass::Controller);
        assert_eq!(c.classify("my-operator-1", "Deployment"), ManagerClass::Controller);
        assert_eq!(c.classify("my-operator-1", "Service"), ManagerClass::Unknown);
        assert_eq!(c.classify_write(&plain, "Service", false), ManagerClass::Controller, "as configured");
        let manual: ManagerPolicy = serde_json::from_value(serde_json::json!({"unknown": "manual"})).unwrap();
        let c = ManagerClassifier::new(&manual).unwrap();
        assert_eq!(c.classify_write(&plain, "Service", false), ManagerClass::Manual);
    }

    /// docs/drift-types.md lists the built-in controllers and their kinds as the code has them.
    #[test]
    fn the_documented_controllers_are_the_built_in_ones() {
        let doc = include_str!("../../docs/drift-types.md");
        for (manager, kinds) in BUILTIN_CONTROLLERS {
            let row = doc
                .lines()
                .find(|l| l.starts_with('|') && l.contains(&format!("`{manager}`")))
                .unwrap_or_else(|| panic!("{manager} is not in the table of docs/drift-types.md"));
            let shown = if kinds.is_empty() { "every kind".to_owned() } else { kinds.join(", ") };
            assert!(row.ends_with(&format!("| {shown} |")), "{manager}: {row}");
        }
    }

    #[test]
    fn an_owner_reference_of_a_controller_and_the_kind_are_read_from_the_object() {
        let c = ManagerClassifier::new(&ManagerPolicy::default()).unwrap();
        let obj = |owned: bool| {
            json!({"kind": "ReplicaSet", "metadata": {
                "ownerReferences": [{"kind": "Deployment", "name": "web", "controller": owned}],
                "managedFields": [{"manager": "my-script", "operation": "Update", "fieldsV1": {"f:spec": {}}}]}})
        };
        let owned = obj(true);
        let o = Ownership::of(&owned);
        assert_eq!(o.class(o.manager(0).unwrap(), &c), ManagerClass::Controller);
        let free = obj(false);
        let o = Ownership::of(&free);
        assert_eq!(o.class(o.manager(0).unwrap(), &c), ManagerClass::Unknown, "an owner that does not control");
    }
}
