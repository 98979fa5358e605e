//! Normalisation: the one place where objects are made comparable (docs/drift-types.md,
//! "What is not drift").
//!
//! - server bookkeeping dropped (`status`, uid, resourceVersion, generation, timestamps,
//!   managedFields, selfLink) and controller annotations (last-applied-configuration,
//!   deployment revision);
//! - resource quantities rewritten to one canonical text per value ([`crate::quantity`]);
//! - Secret `stringData` folded into `data`, and every Secret value replaced by a keyed hash
//!   ([`secret::SecretHasher`]) so that no value leaves the engine in clear text.
//!
//! Sources never normalise; both sides go through [`normalize`] with the same hasher.

pub mod secret;

use std::borrow::Cow;

use drift_model::tree::{JsonView, Shape};
use serde_json::{Map, Value};

pub use secret::SecretHasher;

/// Metadata fields the API server maintains, and the namespace (identity is the resource key;
/// Git often leaves it to the applier).
pub const DROPPED_METADATA: &[&str] = &[
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "managedFields",
    "selfLink",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
];

/// Annotations written by controllers and clients, not by people.
pub const DROPPED_ANNOTATIONS: &[&str] = &[
    "kubectl.kubernetes.io/last-applied-configuration",
    "deployment.kubernetes.io/revision",
    "kubectl.kubernetes.io/restartedAt",
];

/// The annotation whose value is the last client-side applied configuration.
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Field names whose children are quantities (`resources.limits.cpu`, ResourceQuota `hard`,
/// PersistentVolume `capacity`, Pod `overhead`).
const QUANTITY_PARENTS: &[&str] = &["limits", "requests", "hard", "capacity", "allocatable", "overhead"];
/// Extra quantity parents in LimitRange items.
const LIMIT_RANGE_PARENTS: &[&str] = &["default", "defaultRequest", "max", "min", "maxLimitRequestRatio"];

/// Returns the normalised copy of an object of `kind`.
///
/// ```
/// use drift_engine::normalize::{normalize, SecretHasher};
/// let live = serde_json::json!({"kind": "Deployment", "metadata": {"name": "w", "uid": "x",
///   "annotations": {"deployment.kubernetes.io/revision": "3"}},
///   "spec": {"template": {"spec": {"containers": [{"name": "w", "resources": {"limits": {"cpu": "1000m"}}}]}}},
///   "status": {"replicas": 1}});
/// let n = normalize(&live, &SecretHasher::new(*b"0123456789abcdef0123456789abcdef"));
/// assert!(n.get("status").is_none());
/// assert!(n["metadata"].get("uid").is_none());
/// assert_eq!(n["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["cpu"], "1");
/// ```
pub fn normalize(object: &Value, hasher: &SecretHasher) -> Value {
    // Copy everything but what is dropped anyway (status, managedFields and the last-applied
    // annotation are most of a live object's size), then normalise the copy.
    let Value::Object(top) = object else { return object.clone() };
    let mut out = Map::with_capacity(top.len());
    for (k, v) in top {
        match k.as_str() {
            "status" => {}
            "metadata" => {
                let Value::Object(meta) = v else {
                    out.insert(k.clone(), v.clone());
                    continue;
                };
                let mut m = Map::with_capacity(meta.len());
                for (mk, mv) in meta {
                    if DROPPED_METADATA.contains(&mk.as_str()) {
                        continue;
                    }
                    if let (Value::Object(ann), "annotations") = (mv, mk.as_str()) {
                        let kept: Map<String, Value> = ann
                            .iter()
                            .filter(|(a, _)| !DROPPED_ANNOTATIONS.contains(&a.as_str()))
                            .map(|(a, v)| (a.clone(), v.clone()))
                            .collect();
                        m.insert(mk.clone(), Value::Object(kept));
                    } else {
                        m.insert(mk.clone(), mv.clone());
                    }
                }
                out.insert(k.clone(), Value::Object(m));
            }
            _ => {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    let mut v = Value::Object(out);
    normalize_in_place(&mut v, hasher);
    v
}

/// The object as [`crate::diff`] walks it: borrowed as it is, since the walk skips what
/// [`normalize`] drops and compares quantities canonically as it goes (see [`Level`] and
/// [`quantity_at`]); a copy only for a Secret, whose values are folded and hashed first.
pub fn view<'v>(object: &'v Value, hasher: &SecretHasher) -> Cow<'v, Value> {
    if object.get("kind").and_then(Value::as_str) == Some("Secret") {
        Cow::Owned(normalize(object, hasher))
    } else {
        Cow::Borrowed(object)
    }
}

/// Where a mapping sits, for the fields [`normalize`] drops from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// The object itself (`status` is dropped).
    Root,
    /// `metadata` ([`DROPPED_METADATA`]).
    Metadata,
    /// `metadata.annotations` ([`DROPPED_ANNOTATIONS`]).
    Annotations,
    /// Anywhere else: nothing is dropped.
    Other,
}

impl Level {
    /// The level of the mapping under `key` of a mapping at this level.
    pub fn child(self, key: &str) -> Level {
        match (self, key) {
            (Level::Root, "metadata") => Level::Metadata,
            (Level::Metadata, "annotations") => Level::Annotations,
            _ => Level::Other,
        }
    }

    /// Whether [`normalize`] drops `key` from a mapping at this level.
    pub fn drops(self, key: &str) -> bool {
        match self {
            Level::Root => key == "status",
            Level::Metadata => DROPPED_METADATA.contains(&key),
            Level::Annotations => DROPPED_ANNOTATIONS.contains(&key),
            Level::Other => false,
        }
    }

    /// Whether a value at this level is absent once normalised ([`is_empty`] of what is left).
    pub fn is_empty<'a>(self, v: impl JsonView<'a>) -> bool {
        match (self, v.shape()) {
            (Level::Other, _) => v.is_null() || v.is_empty(),
            (_, Shape::Object) => v.fields().all(|(k, _)| self.drops(k)),
            _ => v.is_null() || v.is_empty(),
        }
    }

    /// The normalised copy of a value at this level whose mapping is named `name` (the field
    /// it is under, or the list's field for a list item): dropped fields removed, quantities
    /// canonical; what [`normalize`] makes of that part of an object.
    pub fn normalized(self, v: &Value, name: Option<&str>, limit_range: bool) -> Value {
        self.normalized_owned(v.clone(), name, limit_range)
    }

    /// [`Level::normalized`] of a value given as a copy.
    pub fn normalized_owned(self, mut v: Value, name: Option<&str>, limit_range: bool) -> Value {
        self.drop_fields(&mut v);
        match &mut v {
            Value::Object(m) => canonicalize_quantities(m, name, limit_range),
            Value::Array(items) => {
                for item in items {
                    if let Value::Object(m) = item {
                        canonicalize_quantities(m, name, limit_range);
                    }
                }
            }
            _ => {}
        }
        v
    }

    fn drop_fields(self, v: &mut Value) {
        let Value::Object(m) = v else { return };
        if self == Level::Other {
            return;
        }
        m.retain(|k, _| !self.drops(k));
        for (k, child) in m.iter_mut() {
            self.child(k).drop_fields(child);
        }
    }
}

/// Whether a scalar under `key` in a mapping named `parent` is a quantity that [`normalize`]
/// writes canonically.
pub fn quantity_at(parent: Option<&str>, key: &str, limit_range: bool) -> bool {
    key == "sizeLimit"
        || parent.is_some_and(|p| QUANTITY_PARENTS.contains(&p) || (limit_range && LIMIT_RANGE_PARENTS.contains(&p)))
}

/// A scalar at a quantity's place as [`normalize`] writes it: the canonical text of a quantity,
/// anything else as it is.
pub fn canonical_quantity(v: &Value) -> Cow<'_, Value> {
    let text = match v {
        Value::String(s) => Cow::Borrowed(s.as_str()),
        Value::Number(n) => Cow::Owned(n.to_string()),
        _ => return Cow::Borrowed(v),
    };
    match crate::quantity::canonical(&text) {
        Some(c) => Cow::Owned(Value::String(c)),
        None => Cow::Borrowed(v),
    }
}

/// [`normalize`] without the copy.
pub fn normalize_in_place(v: &mut Value, hasher: &SecretHasher) {
    let kind = v.get("kind").and_then(Value::as_str).unwrap_or("").to_owned();
    let Some(obj) = v.as_object_mut() else { return };
    obj.remove("status");
    if let Some(Value::Object(meta)) = obj.get_mut("metadata") {
        for f in DROPPED_METADATA {
            meta.remove(*f);
        }
        if let Some(Value::Object(ann)) = meta.get_mut("annotations") {
            for a in DROPPED_ANNOTATIONS {
                ann.remove(*a);
            }
        }
    }
    if kind == "Secret" {
        secret::fold_and_hash(obj, hasher);
    }
    canonicalize_quantities(obj, None, kind == "LimitRange");
}

fn canonicalize_quantities(map: &mut Map<String, Value>, parent: Option<&str>, limit_range: bool) {
    for (k, v) in map.iter_mut() {
        match v {
            Value::Object(child) => canonicalize_quantities(child, Some(k), limit_range),
            Value::Array(items) => {
                for item in items {
                    if let Value::Object(child) = item {
                        canonicalize_quantities(child, Some(k), limit_range);
                    }
                }
            }
            Value::String(_) | Value::Number(_) if quantity_at(parent, k, limit_range) => {
                if let Cow::Owned(c) = canonical_quantity(v) {
                    *v = c;
                }
            }
            _ => {}
        }
    }
}

/// Whether a value counts as absent: `null`, `{}`, `[]`.
pub fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    }
}

/// Scalar equality by meaning: identical JSON, a number and the string of the same number
/// (int-or-string: `targetPort: 8080` and `"8080"`), or a boolean and its string.
pub fn scalar_eq(a: &Value, b: &Value) -> bool {
    if a == b {
        return true;
    }
    match (a, b) {
        (Value::Number(n), Value::String(s)) | (Value::String(s), Value::Number(n)) => {
            s.trim() == s && s.parse::<f64>().ok().zip(n.as_f64()).is_some_and(|(x, y)| x == y)
        }
        (Value::Bool(x), Value::String(s)) | (Value::String(s), Value::Bool(x)) => {
            s == if *x { "true" } else { "false" }
        }
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        _ => false,
    }
}
