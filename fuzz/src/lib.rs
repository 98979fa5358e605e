//! Helpers shared by the fuzz targets: bounded JSON values built from the fuzzer's bytes, with
//! keys and strings drawn mostly from the words of Kubernetes objects so that the engine's
//! special cases (quantities, merge keys, Secrets, managedFields) are reached often.

use arbitrary::{Arbitrary, Result, Unstructured};
use serde_json::{Map, Number, Value};

/// Field names and values that steer the normaliser and the diff into their special cases.
pub const WORDS: &[&str] = &[
    "apiVersion",
    "kind",
    "metadata",
    "name",
    "namespace",
    "labels",
    "annotations",
    "uid",
    "resourceVersion",
    "generation",
    "managedFields",
    "manager",
    "operation",
    "Apply",
    "Update",
    "time",
    "2026-01-02T03:04:05Z",
    "fieldsType",
    "FieldsV1",
    "fieldsV1",
    "f:spec",
    "f:data",
    "f:replicas",
    "f:metadata",
    "f:containers",
    "k:{\"name\":\"app\"}",
    "k:{\"containerPort\":80,\"protocol\":\"TCP\"}",
    "v:\"a\"",
    ".",
    "kubectl-client-side-apply",
    "kubectl-edit",
    "argocd-controller",
    "kube-controller-manager",
    "kubectl.kubernetes.io/last-applied-configuration",
    "deployment.kubernetes.io/revision",
    "status",
    "spec",
    "replicas",
    "selector",
    "matchLabels",
    "template",
    "containers",
    "initContainers",
    "image",
    "app",
    "env",
    "value",
    "ports",
    "port",
    "containerPort",
    "targetPort",
    "protocol",
    "TCP",
    "resources",
    "limits",
    "requests",
    "cpu",
    "memory",
    "500m",
    "1Gi",
    "0.5",
    "1e3",
    "hard",
    "capacity",
    "overhead",
    "default",
    "defaultRequest",
    "max",
    "min",
    "volumes",
    "volumeMounts",
    "mountPath",
    "data",
    "stringData",
    "binaryData",
    "type",
    "Opaque",
    "c2VjcmV0",
    "scaleTargetRef",
    "items",
    "rules",
    "subjects",
    "tolerations",
    "key",
    "",
];

/// A JSON value of bounded depth and size.
#[derive(Debug, Clone, PartialEq)]
pub struct Json(pub Value);

impl<'a> Arbitrary<'a> for Json {
    fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
        let mut budget = 64;
        Ok(Json(value(u, 6, &mut budget)?))
    }
}

/// A key or string: mostly one of [`WORDS`], sometimes any short string.
pub fn word(u: &mut Unstructured<'_>) -> Result<String> {
    if u.ratio(7, 8)? { Ok((*u.choose(WORDS)?).to_owned()) } else { <String as Arbitrary>::arbitrary(u) }
}

/// A JSON value at most `depth` deep with at most `budget` nodes in all.
pub fn value(u: &mut Unstructured<'_>, depth: u32, budget: &mut u32) -> Result<Value> {
    *budget = budget.saturating_sub(1);
    let leaf_only = depth == 0 || *budget == 0;
    let choice = u.int_in_range(0..=if leaf_only { 5 } else { 7 })?;
    Ok(match choice {
        0 => Value::Null,
        1 => Value::Bool(u.arbitrary()?),
        2 => Value::Number(Number::from(u.arbitrary::<i64>()?)),
        3 => Number::from_f64(u.arbitrary()?).map_or(Value::Null, Value::Number),
        4 => Value::Number(Number::from(u.int_in_range(0..=100_000u64)?)),
        5 => Value::String(word(u)?),
        6 => {
            let n = u.int_in_range(0..=4)?;
            let mut items = Vec::with_capacity(n);
            for _ in 0..n {
                items.push(value(u, depth - 1, budget)?);
            }
            Value::Array(items)
        }
        _ => {
            let n = u.int_in_range(0..=5)?;
            let mut map = Map::new();
            for _ in 0..n {
                map.insert(word(u)?, value(u, depth - 1, budget)?);
            }
            Value::Object(map)
        }
    })
}

/// `patch` merged into `base` (RFC 7386 JSON merge patch: objects merge, `null` removes, anything
/// else replaces).
pub fn merge(base: &mut Value, patch: &Value) {
    let Value::Object(p) = patch else {
        *base = patch.clone();
        return;
    };
    if !base.is_object() {
        *base = Value::Object(Map::new());
    }
    if let Value::Object(b) = base {
        for (k, v) in p {
            if v.is_null() {
                b.remove(k);
            } else {
                merge(b.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
    }
}

/// Every string in a value, keys excluded.
pub fn strings(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Array(items) => items.iter().for_each(|i| strings(i, out)),
        Value::Object(map) => map.values().for_each(|i| strings(i, out)),
        _ => {}
    }
}
