//! Field ownership from `metadata.managedFields` (FieldsV1): who owns which path, and what kind
//! of actor each manager is.

use chrono::{DateTime, Utc};
pub use drift_model::ignore::glob_set;
use globset::GlobSet;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;

use serde_json::Value;

use drift_model::drift::Attribution;
use drift_model::path::{Path, SegView, scalar_text};
use drift_model::tree::{JsonView, Shape};

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

/// A FieldsV1 key, borrowed from the live object: `f:name` as the name, `k:{...}` as its key
/// fields and their values (in the text's order; compared as a set), anything else (`v:`, `i:`,
/// a key that does not parse) as written, which no path segment matches.
#[derive(Debug, PartialEq)]
enum Key<'a> {
    Field(Cow<'a, str>),
    Item(Vec<(Cow<'a, str>, Cow<'a, str>)>),
    Other(Cow<'a, str>),
}

impl<'a> Key<'a> {
    fn of(k: &'a str) -> Self {
        if let Some(name) = k.strip_prefix("f:") {
            return Key::Field(Cow::Borrowed(name));
        }
        if let Some(json) = k.strip_prefix("k:") {
            if let Some(pairs) = flat_pairs(json) {
                return Key::Item(pairs);
            }
            if let Ok(Value::Object(m)) = serde_json::from_str::<Value>(json) {
                let pairs = m
                    .iter()
                    .map(|(k, v)| (Cow::Owned(k.clone()), Cow::Owned(scalar_text(v).unwrap_or_else(|| v.to_string()))))
                    .collect();
                return Key::Item(pairs);
            }
        }
        Key::Other(Cow::Borrowed(k))
    }

    /// The key with nothing borrowed (of a name that had escapes in the text it was read from).
    fn into_owned(self) -> Key<'static> {
        let own = |c: Cow<'_, str>| Cow::Owned(c.into_owned());
        match self {
            Key::Field(f) => Key::Field(own(f)),
            Key::Item(pairs) => Key::Item(pairs.into_iter().map(|(k, v)| (own(k), own(v))).collect()),
            Key::Other(o) => Key::Other(own(o)),
        }
    }

    /// Whether this key is the same as another written differently (key fields in another order).
    fn same(&self, other: &Key<'_>) -> bool {
        match (self, other) {
            (Key::Field(a), Key::Field(b)) | (Key::Other(a), Key::Other(b)) => a == b,
            (Key::Item(a), Key::Item(b)) => {
                a.len() == b.len() && b.iter().all(|(k, v)| a.iter().any(|(ak, av)| ak == k && av == v))
            }
            _ => false,
        }
    }

    fn is_item(&self, key: &[(String, String)]) -> bool {
        match self {
            Key::Item(pairs) => {
                pairs.len() == key.len()
                    && key.iter().all(|(k, v)| pairs.iter().any(|(pk, pv)| pk == k.as_str() && pv == v.as_str()))
            }
            _ => false,
        }
    }
}

/// The fields of a flat JSON object as the API server writes FieldsV1 item keys
/// (`{"containerPort":80,"protocol":"TCP"}`), borrowed: string values without escapes and
/// integers written as serde_json writes them back, else `None` (and the caller parses the
/// JSON in full).
fn flat_pairs(json: &str) -> Option<Vec<(Cow<'_, str>, Cow<'_, str>)>> {
    flat_pairs_quoted(json, "\"")
}

/// [`flat_pairs`] of an item key as it stands inside a JSON string of the managedFields text,
/// its quotes escaped (`{\"name\":\"web\"}`), borrowed from that text without unescaping it
/// first: `None` when a name or value has any other escape.
fn flat_pairs_escaped(raw: &str) -> Option<Vec<(Cow<'_, str>, Cow<'_, str>)>> {
    flat_pairs_quoted(raw, "\\\"")
}

/// [`flat_pairs`] with strings between `quote`s (`"`, or `\"` within a JSON string).
fn flat_pairs_quoted<'j>(json: &'j str, quote: &str) -> Option<Vec<(Cow<'j, str>, Cow<'j, str>)>> {
    // The content of a string at the start of `s` and the rest after it; none with escapes.
    let string = |s: &'j str| -> Option<(&'j str, &'j str)> {
        let body = s.strip_prefix(quote)?;
        // (Byte by byte: a character search decodes each character, and these are short.)
        let end = body.bytes().position(|b| b == b'"' || b == b'\\')?;
        body[end..].starts_with(quote).then(|| (&body[..end], &body[end + quote.len()..]))
    };
    let mut rest = json.strip_prefix('{')?.strip_suffix('}')?;
    let mut pairs = Vec::with_capacity(2);
    loop {
        let (key, after) = string(rest)?;
        rest = after.strip_prefix(':')?;
        let value = if rest.starts_with(quote) {
            let (v, after) = string(rest)?;
            rest = after;
            v
        } else {
            let end = rest.bytes().position(|b| b == b',' || b == b'}').unwrap_or(rest.len());
            let v = &rest[..end];
            let digits = v.strip_prefix('-').unwrap_or(v);
            let integer = !digits.is_empty()
                && digits.len() < 19
                && digits.bytes().all(|c| c.is_ascii_digit())
                && (digits == "0" || !digits.starts_with('0'))
                && v != "-0";
            if !(integer || v == "true" || v == "false" || v == "null") {
                return None;
            }
            rest = &rest[end..];
            v
        };
        pairs.push((Cow::Borrowed(key), Cow::Borrowed(value)));
        match rest.strip_prefix(',') {
            Some(r) => rest = r,
            None if rest.is_empty() => return Some(pairs),
            None => return None,
        }
    }
}

/// A node of the ownership tree, in [`Nodes`]: its children are found from its first child
/// along their `next` links (fan-out is small: a walk along them beats a hash map here).
#[derive(Debug)]
struct Node<'a> {
    /// Its FieldsV1 key under its parent (the root's is empty).
    key: Key<'a>,
    /// Managers whose set holds this node as a leaf (the whole value).
    whole: u64,
    /// Managers with any entry at or below this node.
    any: u64,
    /// Its first and last child and its next sibling, as indices into [`Nodes`] (`0`, the root,
    /// is nobody's child: none).
    first: usize,
    last: usize,
    next: usize,
}

/// The nodes of an ownership tree in one vector, the root first: one allocation for the tree,
/// not one for each node's children.
#[derive(Debug)]
struct Nodes<'a>(Vec<Node<'a>>);

impl<'a> Nodes<'a> {
    /// A tree with its root alone, with room for about `capacity` nodes.
    fn with_root(capacity: usize) -> Self {
        let mut nodes = Vec::with_capacity(capacity.max(1));
        nodes.push(Node { key: Key::Other(Cow::Borrowed("")), whole: 0, any: 0, first: 0, last: 0, next: 0 });
        Nodes(nodes)
    }

    /// The children of the node at `at`, as indices.
    fn children(&self, at: usize) -> impl Iterator<Item = usize> + '_ {
        std::iter::successors(Some(self.0[at].first).filter(|&c| c != 0), |&c| Some(self.0[c].next).filter(|&n| n != 0))
    }

    /// The child of the node at `at` whose key is `key` (written in any order), made when it has
    /// none.
    fn child(&mut self, at: usize, key: Key<'a>) -> usize {
        if let Some(c) = self.children(at).find(|&c| self.0[c].key.same(&key)) {
            return c;
        }
        let c = self.0.len();
        self.0.push(Node { key, whole: 0, any: 0, first: 0, last: 0, next: 0 });
        match self.0[at].last {
            0 => self.0[at].first = c,
            last => self.0[last].next = c,
        }
        self.0[at].last = c;
        c
    }
}

impl Default for Nodes<'_> {
    fn default() -> Self {
        Nodes::with_root(1)
    }
}

/// Where a walk down an ownership tree stands ([`Ownership::step`]): at a node, with the
/// managers owning one of its ancestors as a whole, or past the last node the path reaches, with
/// the owners of the path.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum OwnersAt {
    At { at: usize, whole: u64 },
    Done(u64),
}

impl OwnersAt {
    /// The root, where every walk starts.
    pub(crate) const ROOT: OwnersAt = OwnersAt::At { at: 0, whole: 0 };
}

/// The ownership tree of one live object, borrowing its field names from the object.
#[derive(Debug, Default)]
pub struct Ownership<'a> {
    managers: Vec<Attribution>,
    /// The object's kind.
    kind: &'a str,
    /// Whether a controller owns the object (an owner reference with `controller: true`).
    owned: bool,
    /// Each manager's class, worked out when first asked ([`Ownership::class`]).
    classes: Vec<std::cell::Cell<Option<ManagerClass>>>,
    nodes: Nodes<'a>,
}

impl<'a> Ownership<'a> {
    /// Reads `metadata.managedFields` of a live object (missing or malformed entries are skipped;
    /// at most 64 managers are tracked). The entries are read from the tree, or from their JSON
    /// text when the object keeps them as text (a string: how
    /// `drift_manifest::parse_live_manifests` keeps them, unparsed until asked); both give the same
    /// ownership.
    pub fn of(object: &'a Value) -> Self {
        Self::of_view(object)
    }

    /// [`Ownership::of`] of an object read through [`JsonView`] (a `Value`, or a tree that
    /// borrows its text).
    pub fn of_view(object: impl JsonView<'a>) -> Self {
        let mut own = Ownership {
            kind: object.get("kind").and_then(JsonView::as_str).unwrap_or(""),
            owned: object.get("metadata").and_then(|m| m.get("ownerReferences")).is_some_and(|refs| {
                refs.shape() == Shape::Array
                    && (0..refs.len())
                        .filter_map(|i| refs.item(i))
                        .any(|r| r.get("controller").is_some_and(|c| c.shape() == Shape::Bool(true)))
            }),
            ..Ownership::default()
        };
        let Some(managed) = object.get("metadata").and_then(|m| m.get("managedFields")) else { return own };
        match managed.shape() {
            Shape::Array => {
                for entry in (0..managed.len().min(64)).filter_map(|i| managed.item(i)) {
                    let Some(manager) = entry.get("manager").and_then(JsonView::as_str) else { continue };
                    let text = |k: &str| entry.get(k).and_then(JsonView::as_str);
                    let bit = own.add(manager, text("operation"), text("time"), text("subresource"));
                    if let Some(fields) = entry.get("fieldsV1") {
                        insert(&mut own.nodes, 0, fields, bit);
                    }
                }
            }
            Shape::String(text) => own.read_text(text),
            _ => {}
        }
        own
    }

    /// Adds a manager's write, returning its bit.
    fn add(&mut self, manager: &str, operation: Option<&str>, time: Option<&str>, subresource: Option<&str>) -> u64 {
        let bit = 1u64 << self.managers.len();
        self.managers.push(Attribution {
            manager: manager.to_owned(),
            operation: operation.unwrap_or("").to_owned(),
            time: time.and_then(|t| DateTime::parse_from_rfc3339(t).ok()).map(|t| t.with_timezone(&Utc)),
            subresource: subresource.map(str::to_owned),
        });
        self.classes.push(std::cell::Cell::new(None));
        bit
    }

    /// The entries of managedFields from their JSON text, as [`Ownership::of`] reads them from
    /// the tree: the first 64 entries, those without a manager skipped; of a key written twice in
    /// an entry the later counts, as in the tree; a malformed text gives the managers read before
    /// the fault. Read in one pass, each entry's fields under the bit its manager will have (the
    /// API server writes `fieldsV1` before `manager`); an entry that turns out to have no manager
    /// or two `fieldsV1`, or a fault, has the text read again, each entry's fields after its
    /// manager is known.
    fn read_text(&mut self, text: &'a str) {
        // About one node for every 24 bytes of the text the API server writes.
        let capacity = text.len() / 24;
        self.nodes = Nodes::with_root(capacity);
        if self.read_entries(text, true).is_none() {
            self.managers.clear();
            self.classes.clear();
            self.nodes = Nodes::with_root(capacity);
            let _ = self.read_entries(text, false);
        }
    }

    /// [`Ownership::read_text`], in one pass (`at_once`, `None` when it must be read again) or
    /// two.
    fn read_entries(&mut self, text: &'a str, at_once: bool) -> Option<()> {
        let mut t = Text { text, bytes: text.as_bytes(), pos: 0 };
        if !t.eat(b'[') || t.eat(b']') {
            return Some(());
        }
        for _ in 0..64 {
            let (mut manager, mut operation, mut time, mut subresource, mut fields) = (None, None, None, None, None);
            let mut walked = false;
            if t.peek()? == b'{' {
                let bit = 1u64 << self.managers.len();
                let nodes = &mut self.nodes;
                t.members(|t, key| {
                    match &*key {
                        "manager" => manager = t.string_value()?,
                        "operation" => operation = t.string_value()?,
                        "time" => time = t.string_value()?,
                        "subresource" => subresource = t.string_value()?,
                        "fieldsV1" if at_once => {
                            if walked {
                                return None;
                            }
                            walked = true;
                            insert_text(nodes, 0, t, bit)?;
                        }
                        "fieldsV1" => {
                            fields = Some(t.pos);
                            t.skip()?;
                        }
                        _ => t.skip()?,
                    }
                    Some(())
                })?;
            } else {
                t.skip()?;
            }
            match manager {
                Some(manager) => {
                    let bit = self.add(&manager, operation.as_deref(), time.as_deref(), subresource.as_deref());
                    if let Some(at) = fields {
                        insert_text(&mut self.nodes, 0, &mut Text { pos: at, ..t }, bit)?;
                    }
                }
                None if walked => return None,
                None => {}
            }
            if !t.eat(b',') {
                return t.eat(b']').then_some(());
            }
        }
        Some(())
    }

    /// Whether the object had any managedFields.
    pub fn is_empty(&self) -> bool {
        self.managers.is_empty()
    }

    /// The managers (as a bit set over [`Ownership::manager`]) that own `path`: those owning it
    /// or something under it, or owning an ancestor as a whole.
    pub fn owners(&self, path: &Path) -> u64 {
        self.owners_of_segments(path.segments())
    }

    /// [`Ownership::owners`] of a path given as segments (owned or borrowed).
    pub fn owners_of_segments<S: SegView>(&self, segments: &[S]) -> u64 {
        self.owners_at(segments.iter().fold(OwnersAt::ROOT, |at, seg| self.step(at, seg)))
    }

    /// One segment further down the ownership tree from `from` (a walk that asks about many
    /// paths under one parent steps to the parent once).
    pub(crate) fn step<S: SegView>(&self, from: OwnersAt, seg: &S) -> OwnersAt {
        let OwnersAt::At { at, whole } = from else { return from };
        let nodes = &self.nodes;
        let whole = whole | nodes.0[at].whole;
        let found = match (seg.field(), seg.item()) {
            (Some(f), _) => nodes.children(at).find(|&c| matches!(&nodes.0[c].key, Key::Field(n) if n == f)),
            (None, Some((key, _, _))) if !key.is_empty() => nodes.children(at).find(|&c| nodes.0[c].key.is_item(key)),
            _ => return OwnersAt::Done(whole | nodes.0[at].any),
        };
        match found {
            Some(c) => OwnersAt::At { at: c, whole },
            None => OwnersAt::Done(whole),
        }
    }

    /// The managers owning the path a walk of [`Ownership::step`]s reached.
    pub(crate) fn owners_at(&self, at: OwnersAt) -> u64 {
        match at {
            OwnersAt::At { at, whole } => whole | self.nodes.0[at].any,
            OwnersAt::Done(owners) => owners,
        }
    }

    /// The class of one of this object's managers (`manager` as [`Ownership::manager`] or
    /// [`Ownership::managers_of`] gave it), worked out once per object; any other attribution
    /// is classified each time. Both as [`ManagerClassifier::classify_write`] of this object's
    /// kind and owner references.
    pub fn class(&self, manager: &Attribution, classifier: &ManagerClassifier) -> ManagerClass {
        let Some(i) = self.managers.iter().position(|m| std::ptr::eq(m, manager)) else {
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
        self.managers.get(index)
    }

    /// The managers of a bit set, most recent first.
    pub fn managers_of(&self, set: u64) -> Vec<&Attribution> {
        let mut v: Vec<&Attribution> =
            (0..self.managers.len()).filter(|i| set & (1 << i) != 0).map(|i| &self.managers[i]).collect();
        v.sort_by_key(|a| std::cmp::Reverse(a.time));
        v
    }
}

/// Adds FieldsV1 given as a tree under the node at `at`, for the manager of `bit`.
fn insert<'a>(nodes: &mut Nodes<'a>, at: usize, fields: impl JsonView<'a>, bit: u64) {
    nodes.0[at].any |= bit;
    if fields.shape() != Shape::Object {
        return;
    }
    let mut leaf = true;
    for (k, v) in fields.fields().filter(|(k, _)| *k != ".") {
        leaf = false;
        let c = nodes.child(at, Key::of(k));
        insert(nodes, c, v, bit);
    }
    if leaf {
        nodes.0[at].whole |= bit;
    }
}

/// [`insert`] of FieldsV1 given as JSON text (the cursor at the value), its names borrowed from
/// the text where they have no escapes.
fn insert_text<'a>(nodes: &mut Nodes<'a>, at: usize, t: &mut Text<'a>, bit: u64) -> Option<()> {
    nodes.0[at].any |= bit;
    if t.peek()? != b'{' {
        return t.skip();
    }
    let mut leaf = true;
    t.members_raw(|t, raw, escaped| {
        // An item key's quotes are escaped in the text (`k:{\"name\":\"web\"}`): its fields are
        // read from the text as they stand; any other name with escapes is unescaped first.
        let fast = if escaped { raw.strip_prefix("k:").and_then(flat_pairs_escaped).map(Key::Item) } else { None };
        let key = match fast {
            Some(key) => key,
            None if !escaped => {
                if raw == "." {
                    return t.skip();
                }
                Key::of(raw)
            }
            None => {
                let name = Text::unescaped(raw)?;
                if name == "." {
                    return t.skip();
                }
                Key::of(&name).into_owned()
            }
        };
        leaf = false;
        let c = nodes.child(at, key);
        insert_text(nodes, c, t, bit)
    })?;
    if leaf {
        nodes.0[at].whole |= bit;
    }
    Some(())
}

/// The content of a JSON string whose only escapes are `\"`, `\\` and `\/` (the item keys of
/// FieldsV1: `k:{\"name\":\"web\"}`); `None` for any other escape.
fn unescape(raw: &str) -> Option<String> {
    let mut out = String::with_capacity(raw.len());
    let mut rest = raw;
    while let Some(i) = rest.find('\\') {
        out.push_str(&rest[..i]);
        out.push(match rest.as_bytes().get(i + 1)? {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            _ => return None,
        });
        rest = rest.get(i + 2..)?;
    }
    out.push_str(rest);
    Some(out)
}

/// A cursor over JSON text that a reader has already checked (managedFields kept as text); on
/// anything else it stops with `None` rather than guess.
#[derive(Clone, Copy)]
struct Text<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Text<'a> {
    fn skip_whitespace(&mut self) {
        const SPACES: u64 = u64::from_le_bytes([b' '; 8]);
        while let Some(&b) = self.bytes.get(self.pos) {
            match b {
                b' ' => {
                    self.pos += 1;
                    // Indentation comes in runs: eight bytes at a time.
                    while let Some(eight) = self.bytes.get(self.pos..self.pos + 8) {
                        let mut x = [0; 8];
                        x.copy_from_slice(eight);
                        let other = u64::from_le_bytes(x) ^ SPACES;
                        if other != 0 {
                            self.pos += (other.trailing_zeros() / 8) as usize;
                            break;
                        }
                        self.pos += 8;
                    }
                }
                b'\n' | b'\t' | b'\r' => self.pos += 1,
                _ => return,
            }
        }
    }

    /// The next byte after whitespace.
    fn peek(&mut self) -> Option<u8> {
        self.skip_whitespace();
        self.bytes.get(self.pos).copied()
    }

    /// Steps over `c` when it comes next.
    fn eat(&mut self, c: u8) -> bool {
        let found = self.peek() == Some(c);
        if found {
            self.pos += 1;
        }
        found
    }

    /// Steps over a string (at its opening quote); whether it had escapes.
    fn skip_string(&mut self) -> Option<bool> {
        if !self.eat(b'"') {
            return None;
        }
        const ONES: u64 = u64::from_le_bytes([1; 8]);
        const HIGHS: u64 = u64::from_le_bytes([0x80; 8]);
        const QUOTES: u64 = u64::from_le_bytes([b'"'; 8]);
        const BACKSLASHES: u64 = u64::from_le_bytes([b'\\'; 8]);
        // The high bit of each zero byte of `x`, exact up to the first one.
        let zeros = |x: u64| x.wrapping_sub(ONES) & !x & HIGHS;
        let mut escaped = false;
        loop {
            // Eight bytes at a time to the next quote or backslash.
            while let Some(eight) = self.bytes.get(self.pos..self.pos + 8) {
                let mut x = [0; 8];
                x.copy_from_slice(eight);
                let x = u64::from_le_bytes(x);
                let found = zeros(x ^ QUOTES) | zeros(x ^ BACKSLASHES);
                if found != 0 {
                    self.pos += (found.trailing_zeros() / 8) as usize;
                    break;
                }
                self.pos += 8;
            }
            match self.bytes.get(self.pos)? {
                b'"' => {
                    self.pos += 1;
                    return Some(escaped);
                }
                b'\\' => {
                    escaped = true;
                    self.pos += 2;
                }
                _ => self.pos += 1,
            }
        }
    }

    /// A string, borrowed when it has no escapes.
    fn string(&mut self) -> Option<Cow<'a, str>> {
        let (raw, escaped) = self.raw_string()?;
        if escaped { Text::unescaped(raw).map(Cow::Owned) } else { Some(Cow::Borrowed(raw)) }
    }

    /// A string as it stands between its quotes in the text, and whether it has escapes.
    fn raw_string(&mut self) -> Option<(&'a str, bool)> {
        self.skip_whitespace();
        let start = self.pos;
        let escaped = self.skip_string()?;
        Some((self.text.get(start + 1..self.pos - 1)?, escaped))
    }

    /// The content of a string whose text between the quotes is `raw`.
    fn unescaped(raw: &str) -> Option<String> {
        unescape(raw).or_else(|| serde_json::from_str::<String>(&format!("\"{raw}\"")).ok())
    }

    /// A value that counts only as a string (as `Value::as_str` reads it): the string, or
    /// `Some(None)` for any other value, stepped over.
    fn string_value(&mut self) -> Option<Option<Cow<'a, str>>> {
        if self.peek()? == b'"' { self.string().map(Some) } else { self.skip().map(|()| None) }
    }

    /// Steps over a value.
    fn skip(&mut self) -> Option<()> {
        match self.peek()? {
            b'"' => self.skip_string().map(drop),
            b'{' | b'[' => {
                let mut depth = 0usize;
                loop {
                    match self.bytes.get(self.pos)? {
                        b'"' => {
                            self.skip_string()?;
                        }
                        b'{' | b'[' => {
                            depth += 1;
                            self.pos += 1;
                        }
                        b'}' | b']' => {
                            depth -= 1;
                            self.pos += 1;
                            if depth == 0 {
                                return Some(());
                            }
                        }
                        _ => self.pos += 1,
                    }
                }
            }
            _ => {
                let start = self.pos;
                while self.bytes.get(self.pos).is_some_and(|b| !b",}] \n\t\r".contains(b)) {
                    self.pos += 1;
                }
                (self.pos > start).then_some(())
            }
        }
    }

    /// The members of an object (the cursor at its `{`): `each` gets every key with the cursor at
    /// its value, and reads or steps over the value.
    fn members(&mut self, mut each: impl FnMut(&mut Self, Cow<'a, str>) -> Option<()>) -> Option<()> {
        self.members_raw(|t, raw, escaped| {
            let key = if escaped { Cow::Owned(Text::unescaped(raw)?) } else { Cow::Borrowed(raw) };
            each(t, key)
        })
    }

    /// [`Text::members`] with each key as it stands between its quotes, and whether it has
    /// escapes.
    fn members_raw(&mut self, mut each: impl FnMut(&mut Self, &'a str, bool) -> Option<()>) -> Option<()> {
        if !self.eat(b'{') {
            return None;
        }
        if self.eat(b'}') {
            return Some(());
        }
        loop {
            let (key, escaped) = self.raw_string()?;
            if !self.eat(b':') {
                return None;
            }
            each(self, key, escaped)?;
            if !self.eat(b',') {
                return self.eat(b'}').then_some(());
            }
        }
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

    #[test]
    fn item_keys_read_without_parsing_equal_the_parsed_ones() {
        for k in [
            r#"{"name":"web"}"#,
            r#"{"containerPort":80,"protocol":"TCP"}"#,
            r#"{"port":-8,"b":true,"c":null,"d":"","e":0}"#,
            r#"{"a":1.5}"#,
            r#"{"a":1e3}"#,
            r#"{"a":-0}"#,
            r#"{"a":007}"#,
            r#"{"a":12345678901234567890}"#,
            r#"{"a\"b":"c"}"#,
            r#"{"a":"\u0041"}"#,
            r#"{ "a": 1 }"#,
            r#"{"a":{"b":1}}"#,
            r#"{}"#,
            "{",
        ] {
            let parsed = match serde_json::from_str::<Value>(k) {
                Ok(Value::Object(m)) => Some(
                    m.iter()
                        .map(|(k, v)| (k.clone(), scalar_text(v).unwrap_or_else(|| v.to_string())))
                        .collect::<Vec<_>>(),
                ),
                _ => None,
            };
            let fast = flat_pairs(k);
            // As the key stands in the managedFields text: its quotes escaped.
            let written = serde_json::to_string(k).unwrap();
            let in_text = flat_pairs_escaped(&written[1..written.len() - 1]);
            assert!(in_text.is_none() || in_text == fast, "{k}: {in_text:?} {fast:?}");
            if k.bytes().all(|b| b >= 0x20) {
                assert_eq!(in_text.is_some(), fast.is_some(), "{k}");
            }
            if let Some(fast) = &fast {
                let mut fast: Vec<(String, String)> =
                    fast.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect();
                fast.sort();
                assert_eq!(Some(fast), parsed, "{k}");
            }
            let key = Key::of(Box::leak(format!("k:{k}").into_boxed_str()));
            match parsed {
                Some(pairs) => {
                    assert!(matches!(&key, Key::Item(_)) && (pairs.is_empty() || key.is_item(&pairs)), "{k}: {key:?}")
                }
                None => assert!(matches!(key, Key::Other(_)), "{k}: {key:?}"),
            }
        }
        assert!(flat_pairs(r#"{"name":"web"}"#).is_some(), "the common form is read without parsing");
        assert!(flat_pairs(r#"{"containerPort":80,"protocol":"TCP"}"#).is_some());
    }

    /// Each node of an ownership tree as (path of keys, whole, any), sorted: the tree whatever
    /// the order its children were met in.
    fn nodes(o: &Ownership<'_>) -> Vec<(String, u64, u64)> {
        fn walk(nodes: &Nodes<'_>, i: usize, at: String, out: &mut Vec<(String, u64, u64)>) {
            out.push((at.clone(), nodes.0[i].whole, nodes.0[i].any));
            for c in nodes.children(i) {
                let name = match &nodes.0[c].key {
                    Key::Item(pairs) => {
                        let mut pairs = pairs.clone();
                        pairs.sort();
                        format!("{pairs:?}")
                    }
                    other => format!("{other:?}"),
                };
                walk(nodes, c, format!("{at}/{name}"), out);
            }
        }
        let mut out = Vec::new();
        walk(&o.nodes, 0, String::new(), &mut out);
        out.sort();
        out
    }

    /// `metadata.managedFields` as a tree and as its text (compact or indented), in an object.
    fn both_forms(fields: &Value) -> [Value; 3] {
        let with = |f: Value| json!({"kind": "Deployment", "metadata": {"managedFields": f}});
        [
            with(fields.clone()),
            with(Value::String(fields.to_string())),
            with(Value::String(serde_json::to_string_pretty(fields).unwrap())),
        ]
    }

    fn fields_v1() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let key = prop_oneof![
            Just("f:spec"),
            Just("f:replicas"),
            Just("f:containers"),
            Just("."),
            Just("k:{\"name\":\"web\"}"),
            Just("k:{\"protocol\":\"TCP\",\"port\":80}"),
            Just("k:{\"port\":80,\"protocol\":\"TCP\"}"),
            Just("k:{\"a\":\"\\u0041\\\"\"}"),
            Just("k:{not json"),
            Just("v:\"x\""),
            Just("f:we\"ird\\/\u{e9}"),
            Just("f:"),
        ];
        let leaf = prop_oneof![
            3 => Just(json!({})),
            1 => Just(json!({".": {}})),
            1 => Just(json!(null)),
            1 => Just(json!([1, {"f:x": {}}])),
            1 => Just(json!("f:x")),
        ];
        leaf.prop_recursive(4, 40, 5, move |inner| {
            proptest::collection::vec((key.clone(), inner), 0..5)
                .prop_map(|entries| Value::Object(entries.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()))
        })
    }

    fn entry() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let text = |options: &'static [&'static str]| {
            proptest::sample::select(options).prop_map(|s| if s == "-" { json!(7) } else { json!(s) })
        };
        (
            proptest::option::of(text(&[
                "kubectl-edit",
                "argocd-controller",
                "kube-controller-manager",
                "my \"tool\"",
                "-",
            ])),
            proptest::option::of(text(&["Update", "Apply", "-"])),
            proptest::option::of(text(&["2026-01-01T00:00:00Z", "2026-01-02T10:00:00+02:00", "yesterday", "-"])),
            proptest::option::of(text(&["status", "scale", "", "-"])),
            proptest::option::of(fields_v1()),
            any::<bool>(),
        )
            .prop_map(|(manager, operation, time, subresource, fields, object)| {
                if !object {
                    return json!(["not", "an", "entry"]);
                }
                let mut e = serde_json::Map::new();
                e.insert("apiVersion".into(), json!("apps/v1"));
                e.insert("fieldsType".into(), json!("FieldsV1"));
                for (k, v) in [
                    ("manager", manager),
                    ("operation", operation),
                    ("time", time),
                    ("subresource", subresource),
                    ("fieldsV1", fields),
                ] {
                    if let Some(v) = v {
                        e.insert(k.into(), v);
                    }
                }
                Value::Object(e)
            })
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]

        /// managedFields kept as text (how the live reader keeps them) give the ownership the
        /// tree gives: the same managers in the same order, the same nodes, the same owners.
        #[test]
        fn ownership_from_the_text_is_the_ownership_from_the_tree(
            entries in proptest::collection::vec(entry(), 0..6),
        ) {
            let fields = Value::Array(entries);
            let [tree, compact, indented] = both_forms(&fields);
            let expected = Ownership::of(&tree);
            for object in [&compact, &indented] {
                let got = Ownership::of(object);
                proptest::prop_assert_eq!(&got.managers, &expected.managers);
                proptest::prop_assert_eq!(nodes(&got), nodes(&expected));
                proptest::prop_assert_eq!(got.classes.len(), expected.classes.len());
            }
        }
    }

    #[test]
    fn ownership_from_the_text_keeps_the_first_64_entries_and_stops_at_a_fault() {
        let entries: Vec<Value> =
            (0..70).map(|i| json!({"manager": format!("m{i}"), "fieldsV1": {format!("f:f{i}"): {}}})).collect();
        let fields = Value::Array(entries);
        let [tree, compact, indented] = both_forms(&fields);
        let expected = Ownership::of(&tree);
        assert_eq!(expected.managers.len(), 64);
        for object in [&compact, &indented] {
            let got = Ownership::of(object);
            assert_eq!(got.managers, expected.managers);
            assert_eq!(nodes(&got), nodes(&expected));
        }
        // Text that is no list, or breaks off, gives what was read before the fault.
        let text = fields.to_string();
        let cut = json!({"metadata": {"managedFields": &text[..text.find("m1\"").unwrap()]}});
        assert_eq!(Ownership::of(&cut).managers.len(), 1);
        for odd in ["", "{}", "nope", "[", "[{", "[]", "[1,2]"] {
            let o = json!({"metadata": {"managedFields": odd}});
            assert!(Ownership::of(&o).is_empty(), "{odd:?}");
        }
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
