//! OpenAPI v3 (`/openapi/v3` and one document per group version), minimal but valid.
//!
//! kubectl 1.32 reads it for one thing that matters here: whether the PATCH operation of a kind
//! accepts the `fieldValidation` query parameter. When it does, kubectl validates on the server
//! (it sends `fieldValidation=Strict`) instead of downloading schemas to validate on the
//! client. The documents therefore list, for every resource, its operations with their
//! `x-kubernetes-group-version-kind` and query parameters, and an object schema per kind that
//! accepts any fields, deliberately without `x-kubernetes-group-version-kind`: without a kind
//! schema kubectl computes strategic merge patches from its
//! compiled-in types, as it does for servers without OpenAPI. `/openapi/v2` is not served
//! (404), which kubectl tolerates when v3 is present.

use std::collections::BTreeMap;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use crate::resources::ResourceType;
use crate::status::{ApiError, json_response};

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() { format!("api/{version}") } else { format!("apis/{group}/{version}") }
}

fn hash(text: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{h:016X}")
}

fn group_versions(types: &[ResourceType]) -> BTreeMap<String, (String, String)> {
    let mut out = BTreeMap::new();
    for t in types {
        for v in &t.versions {
            out.insert(gv_path(&t.group, v), (t.group.clone(), v.clone()));
        }
    }
    out
}

fn query_params(names: &[&str]) -> Vec<Value> {
    names.iter().map(|n| json!({"name": n, "in": "query", "schema": {"type": "string", "uniqueItems": true}})).collect()
}

/// The OpenAPI v3 document of one group version.
pub fn gv_document(types: &[ResourceType], group: &str, version: &str) -> Option<Value> {
    let matching: Vec<&ResourceType> =
        types.iter().filter(|t| t.group == group && t.versions.iter().any(|v| v == version)).collect();
    if matching.is_empty() {
        return None;
    }
    let base = format!("/{}", gv_path(group, version));
    let mut paths = Map::new();
    let mut schemas = Map::new();
    for t in matching {
        let gvk = json!({"group": group, "version": version, "kind": t.kind});
        let schema_name = format!("{}.{}.{}", if group.is_empty() { "core" } else { group }, version, t.kind);
        let op = |id: &str, params: &[&str]| {
            json!({
                "operationId": format!("{id}{}", t.kind),
                "parameters": query_params(params),
                "responses": {"200": {"description": "OK", "content": {"application/json": {
                    "schema": {"$ref": format!("#/components/schemas/{schema_name}")}}}}},
                "x-kubernetes-action": id,
                "x-kubernetes-group-version-kind": gvk,
            })
        };
        let write = ["dryRun", "fieldManager", "fieldValidation", "pretty"];
        let item = json!({
            "get": op("get", &["pretty"]),
            "put": op("put", &write),
            "patch": op("patch", &["dryRun", "fieldManager", "fieldValidation", "force", "pretty"]),
            "delete": op("delete", &["dryRun", "gracePeriodSeconds", "propagationPolicy", "pretty"]),
        });
        let collection = json!({
            "get": op("list", &["allowWatchBookmarks", "continue", "fieldSelector", "labelSelector",
                "limit", "resourceVersion", "resourceVersionMatch", "sendInitialEvents",
                "timeoutSeconds", "watch", "pretty"]),
            "post": op("post", &write),
            "delete": op("deletecollection", &["dryRun", "labelSelector", "fieldSelector", "pretty"]),
        });
        let prefix = if t.namespaced {
            format!("{base}/namespaces/{{namespace}}/{}", t.plural)
        } else {
            format!("{base}/{}", t.plural)
        };
        paths.insert(format!("{prefix}/{{name}}"), item);
        paths.insert(prefix, collection);
        schemas.insert(
            schema_name,
            json!({
                "type": "object",
                "description": format!("{} (schema not modelled by the test API server)", t.kind),
                "x-kubernetes-preserve-unknown-fields": true,
            }),
        );
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.32.0-drift-test"},
        "paths": paths,
        "components": {"schemas": schemas},
    }))
}

/// Serve `/openapi/...`.
pub fn handle(types: &[ResourceType], rest: &[&str], _query: &BTreeMap<String, String>) -> Response {
    let gvs = group_versions(types);
    match rest {
        ["v3"] => {
            let mut paths = Map::new();
            for (p, (g, v)) in &gvs {
                let doc = gv_document(types, g, v).unwrap_or(Value::Null);
                let h = hash(&doc.to_string());
                paths.insert(p.clone(), json!({"serverRelativeURL": format!("/openapi/v3/{p}?hash={h}")}));
            }
            json_response(StatusCode::OK, &json!({"paths": paths}))
        }
        ["v3", tail @ ..] => {
            let p = tail.join("/");
            match gvs.get(&p).and_then(|(g, v)| gv_document(types, g, v)) {
                Some(doc) => json_response(StatusCode::OK, &doc),
                None => not_found(),
            }
        }
        _ => not_found(),
    }
}

fn not_found() -> Response {
    ApiError::new(404, "NotFound", "the server could not find the requested resource").into_response()
}
