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
/// use drift_core::normalize::{normalize, SecretHasher};
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
    let quantity_parent =
        parent.is_some_and(|p| QUANTITY_PARENTS.contains(&p) || (limit_range && LIMIT_RANGE_PARENTS.contains(&p)));
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
            Value::String(_) | Value::Number(_) if quantity_parent || k == "sizeLimit" => {
                let text = match &*v {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                if let Some(c) = crate::quantity::canonical(&text) {
                    *v = Value::String(c);
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
