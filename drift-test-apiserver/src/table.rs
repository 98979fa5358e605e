//! Server-side printing (`Accept: application/json;as=Table;g=meta.k8s.io;v=v1`), as kubectl
//! asks for it in `kubectl get`: a Name and an Age column, with each row carrying the object's
//! metadata (or the whole object with `includeObject=Object`).

use serde_json::{Value, json};

/// Whether the Accept header asks for a Table.
pub fn wants_table(accept: &str) -> bool {
    accept.split(',').next().is_some_and(|first| first.contains("as=Table"))
}

fn age(created: Option<&str>, now: chrono::DateTime<chrono::Utc>) -> String {
    let Some(t) = created.and_then(|c| chrono::DateTime::parse_from_rfc3339(c).ok()) else {
        return "<unknown>".into();
    };
    let secs = (now - t.with_timezone(&chrono::Utc)).num_seconds().max(0);
    match secs {
        s if s < 120 => format!("{s}s"),
        s if s < 3600 * 3 => format!("{}m", s / 60),
        s if s < 86400 * 2 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86400),
    }
}

fn row(object: &Value, include: &str, now: chrono::DateTime<chrono::Utc>) -> Value {
    let meta = object.get("metadata").cloned().unwrap_or(json!({}));
    let name = meta.get("name").cloned().unwrap_or(Value::Null);
    let created = meta.get("creationTimestamp").and_then(Value::as_str);
    let obj = match include {
        "None" => Value::Null,
        "Object" => object.clone(),
        _ => json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": meta}),
    };
    json!({"cells": [name, age(created, now)], "object": obj})
}

/// A Table of the given objects.
pub fn table(objects: &[&Value], list_meta: Value, include: &str) -> Value {
    let now = chrono::Utc::now();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_meta,
        "columnDefinitions": [
            {"name": "Name", "type": "string", "format": "name", "description": "Name must be unique within a namespace.", "priority": 0},
            {"name": "Age", "type": "string", "format": "", "description": "CreationTimestamp is a timestamp representing the server time when this object was created.", "priority": 0},
        ],
        "rows": objects.iter().map(|o| row(o, include, now)).collect::<Vec<_>>(),
    })
}
