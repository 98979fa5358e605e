//! What the API server does to custom resources with the structural schema of their CRD:
//! unknown fields are pruned (unless `x-kubernetes-preserve-unknown-fields`), then `default`
//! values are set where a field is absent. `apiVersion`, `kind` and `metadata` at the root are
//! the server's own and are left alone.

use serde_json::{Map, Value};

/// The `openAPIV3Schema` of `version` in a CRD object.
pub fn version_schema<'a>(crd: &'a Value, version: &str) -> Option<&'a Value> {
    crd.get("spec")?
        .get("versions")?
        .as_array()?
        .iter()
        .find(|v| v.get("name").and_then(Value::as_str) == Some(version))?
        .get("schema")?
        .get("openAPIV3Schema")
}

/// Prune and default a custom resource in place.
pub fn apply(schema: &Value, object: &mut Value) {
    let Some(o) = object.as_object_mut() else { return };
    let preserve = preserves(schema);
    let props = schema.get("properties").and_then(Value::as_object);
    let keys: Vec<String> = o.keys().cloned().collect();
    for k in keys {
        if matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
            continue;
        }
        match props.and_then(|p| p.get(&k)) {
            Some(sub) => {
                if let Some(v) = o.get_mut(&k) {
                    walk(sub, v);
                }
            }
            None if !preserve => {
                o.remove(&k);
            }
            None => {}
        }
    }
    set_defaults(props, o, true);
}

fn preserves(schema: &Value) -> bool {
    schema.get("x-kubernetes-preserve-unknown-fields").and_then(Value::as_bool) == Some(true)
}

fn set_defaults(props: Option<&Map<String, Value>>, o: &mut Map<String, Value>, root: bool) {
    let Some(props) = props else { return };
    for (k, sub) in props {
        if root && matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
            continue;
        }
        if !o.contains_key(k)
            && let Some(d) = sub.get("default")
        {
            let mut d = d.clone();
            walk(sub, &mut d);
            o.insert(k.clone(), d);
        }
    }
}

fn walk(schema: &Value, v: &mut Value) {
    match v {
        Value::Object(o) => {
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                let preserve = preserves(schema);
                let keys: Vec<String> = o.keys().cloned().collect();
                for k in keys {
                    match props.get(&k) {
                        Some(sub) => {
                            if let Some(child) = o.get_mut(&k) {
                                walk(sub, child);
                            }
                        }
                        None if !preserve => {
                            o.remove(&k);
                        }
                        None => {}
                    }
                }
                set_defaults(Some(props), o, false);
            } else if let Some(add) = schema.get("additionalProperties").filter(|a| a.is_object()) {
                for child in o.values_mut() {
                    walk(add, child);
                }
            } else if !preserves(schema) && schema.get("type").and_then(Value::as_str) == Some("object") {
                // An object schema with neither properties nor additionalProperties keeps nothing.
                o.clear();
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for item in items {
                    walk(item_schema, item);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::apply;
    use serde_json::json;

    #[test]
    fn prunes_unknown_fields_and_sets_defaults() {
        let schema = json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {
                "size": {"type": "integer", "default": 1},
                "mode": {"type": "string", "default": "fast"},
                "ports": {"type": "array", "items": {"type": "object", "properties": {
                    "port": {"type": "integer"}, "protocol": {"type": "string", "default": "TCP"}}}},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
            }},
            "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}},
        }});
        let mut cr = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
            "spec": {"mode": "slow", "typo": 1, "ports": [{"port": 80, "extra": true}],
                "labels": {"a": "b"}, "free": {"anything": {"goes": 1}}},
            "unknownTop": 1});
        apply(&schema, &mut cr);
        assert_eq!(
            cr,
            json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
                "spec": {"mode": "slow", "ports": [{"port": 80, "protocol": "TCP"}],
                    "labels": {"a": "b"}, "free": {"anything": {"goes": 1}}, "size": 1}})
        );
    }
}
