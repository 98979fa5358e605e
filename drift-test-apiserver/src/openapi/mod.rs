//! OpenAPI v3 (`/openapi/v3` and one document per group version) and OpenAPI v2
//! (`/openapi/v2`, JSON or the protobuf kubectl asks for), with the schemas of the built-in
//! kinds ([`mod@schemas`]) and of custom resources (their CRD's `openAPIV3Schema`).
//!
//! What kubectl 1.32 does with them, and why each is served:
//!
//! - **v3, the PATCH operation of each kind**: kubectl validates with `--validate=strict` (its
//!   default) on the server when that operation lists the `fieldValidation` query parameter:
//!   it sends `fieldValidation=Strict` and validates nothing itself.
//! - **v3, the PATCH request body types and the kind schemas** (`x-kubernetes-group-version-kind`,
//!   `x-kubernetes-patch-strategy`, `x-kubernetes-patch-merge-key`): `kubectl apply` computes its
//!   strategic merge patch from the v3 schema of the kind when the PATCH operation accepts
//!   `application/strategic-merge-patch+json`, as a real server's does. Custom resources do not
//!   accept it, so kubectl sends them JSON merge patches. `kubectl explain` reads them too.
//! - **v2**: a document of `kind: List` (a `kubectl get -o yaml` dump) cannot be validated on
//!   the server, so kubectl validates each item on the client with the v2 schemas, and fails
//!   with "the server could not find the requested resource" when v2 is missing. client-go asks
//!   v2 for protobuf (gnostic's `openapi_v2.Document`) and parses nothing else, so it is served
//!   as protobuf to a client that asks for it and as JSON otherwise. Custom resources are left
//!   out of v2: kubectl would compute strategic merge patches for them from it.

pub mod schemas;
mod v2proto;

use std::collections::BTreeMap;
use std::sync::OnceLock;

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use crate::resources::ResourceType;
use crate::status::{ApiError, json_response};
use schemas::{INT_OR_STRING, OBJECT_META, QUANTITY, REF, schemas};

/// The media type of OpenAPI v2 in protobuf, as the API server answers it (clients ask for
/// `...spec.v2@v1.0+protobuf`, which is not a valid media type to send back).
pub const V2_PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

const PATCH_SCHEMA: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Patch";

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

/// The definition name of a custom resource, as the API server names it: the group reversed.
fn custom_name(group: &str, version: &str, kind: &str) -> String {
    let reversed: Vec<&str> = group.split('.').rev().collect();
    format!("{}.{version}.{kind}", reversed.join("."))
}

/// A neutral schema (see [`schemas`]) in OpenAPI v3 form: references to
/// `#/components/schemas/`, a reference with siblings wrapped in `allOf` as the API server
/// writes it.
fn to_v3(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut out = Map::new();
            if let Some(Value::String(r)) = m.get("$ref") {
                let target = format!("#/components/schemas/{}", r.strip_prefix(REF).unwrap_or(r));
                if m.len() == 1 {
                    return json!({"$ref": target});
                }
                out.insert("allOf".into(), json!([{"$ref": target}]));
            }
            for (k, x) in m {
                if k != "$ref" {
                    out.insert(k.clone(), to_v3(x));
                }
            }
            Value::Object(out)
        }
        Value::Array(a) => Value::Array(a.iter().map(to_v3).collect()),
        other => other.clone(),
    }
}

/// Every built-in definition in v3 form, computed once.
fn v3_defs() -> &'static BTreeMap<String, Value> {
    static DEFS: OnceLock<BTreeMap<String, Value>> = OnceLock::new();
    DEFS.get_or_init(|| {
        let mut out: BTreeMap<String, Value> = schemas().defs.iter().map(|(k, v)| (k.clone(), to_v3(v))).collect();
        let description = |name: &str| schemas().defs.get(name).and_then(|d| d.get("description")).cloned();
        out.insert(
            INT_OR_STRING.to_owned(),
            json!({"description": description(INT_OR_STRING), "format": "int-or-string",
                "oneOf": [{"type": "integer"}, {"type": "string"}]}),
        );
        out.insert(
            QUANTITY.to_owned(),
            json!({"description": description(QUANTITY), "oneOf": [{"type": "string"}, {"type": "number"}]}),
        );
        out.insert(
            PATCH_SCHEMA.to_owned(),
            json!({"type": "object",
                "description": "Patch is provided to give a concrete name and type to the Kubernetes PATCH request body."}),
        );
        out
    })
}

/// The schema of a custom resource in its CRD (neutral form), with the fields the API server
/// adds: apiVersion, kind, metadata, and the group version kind.
fn custom_schema(crd_schema: Option<&Value>, group: &str, version: &str, kind: &str) -> Value {
    let mut s = match crd_schema {
        Some(Value::Object(m)) => Value::Object(m.clone()),
        _ => json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
    };
    if let Some(m) = s.as_object_mut() {
        let props = m.entry("properties").or_insert_with(|| json!({}));
        if let Some(p) = props.as_object_mut() {
            p.insert("apiVersion".into(), json!({"type": "string"}));
            p.insert("kind".into(), json!({"type": "string"}));
            p.insert("metadata".into(), json!({"$ref": format!("{REF}{OBJECT_META}")}));
        }
        m.insert("x-kubernetes-group-version-kind".into(), json!([{"group": group, "kind": kind, "version": version}]));
    }
    s
}

/// The `openAPIV3Schema` of each served version of each CRD: (group, version, kind) to schema.
pub type CrdSchemas = BTreeMap<(String, String, String), Option<Value>>;

/// The schemas of the custom resources the CRDs define.
pub fn crd_schemas<'a>(crds: impl IntoIterator<Item = &'a Value>) -> CrdSchemas {
    let mut out = BTreeMap::new();
    for crd in crds {
        let Some(rt) = crate::resources::from_crd(crd) else { continue };
        for v in &rt.versions {
            let schema = crate::crd_schema::version_schema(crd, v).cloned();
            out.insert((rt.group.clone(), v.clone(), rt.kind.clone()), schema);
        }
    }
    out
}

fn query_params(names: &[&str]) -> Vec<Value> {
    names.iter().map(|n| json!({"name": n, "in": "query", "schema": {"type": "string", "uniqueItems": true}})).collect()
}

const WRITE_PARAMS: &[&str] = &["dryRun", "fieldManager", "fieldValidation", "pretty"];
const PATCH_PARAMS: &[&str] = &["dryRun", "fieldManager", "fieldValidation", "force", "pretty"];
const LIST_PARAMS: &[&str] = &[
    "allowWatchBookmarks",
    "continue",
    "fieldSelector",
    "labelSelector",
    "limit",
    "resourceVersion",
    "resourceVersionMatch",
    "sendInitialEvents",
    "timeoutSeconds",
    "watch",
    "pretty",
];

/// The patch types a kind accepts: strategic merge patch for built-in kinds only.
fn patch_types(custom: bool) -> Vec<&'static str> {
    let mut t = vec!["application/apply-patch+yaml", "application/json-patch+json", "application/merge-patch+json"];
    if !custom {
        t.push("application/strategic-merge-patch+json");
    }
    t
}

/// The OpenAPI v3 document of one group version.
pub fn gv_document(types: &[ResourceType], crds: &CrdSchemas, group: &str, version: &str) -> Option<Value> {
    let matching: Vec<&ResourceType> =
        types.iter().filter(|t| t.group == group && t.versions.iter().any(|v| v == version)).collect();
    if matching.is_empty() {
        return None;
    }
    let base = format!("/{}", gv_path(group, version));
    let mut paths = Map::new();
    let mut schemas_out = Map::new();
    let mut builtin_roots: Vec<String> = vec![PATCH_SCHEMA.to_owned()];
    for t in matching {
        let gvk = json!({"group": group, "version": version, "kind": t.kind});
        let schema_name = if t.custom {
            let name = custom_name(group, version, &t.kind);
            let key = (group.to_owned(), version.to_owned(), t.kind.clone());
            let crd_schema = crds.get(&key).and_then(Option::as_ref);
            schemas_out.insert(name.clone(), to_v3(&custom_schema(crd_schema, group, version, &t.kind)));
            builtin_roots.push(OBJECT_META.to_owned());
            name
        } else {
            match schemas().kind(group, version, &t.kind) {
                Some(n) => {
                    builtin_roots.push(n.to_owned());
                    n.to_owned()
                }
                None => continue,
            }
        };
        let schema_ref = json!({"$ref": format!("#/components/schemas/{schema_name}")});
        let op = |id: &str, params: &[&str], body: Option<Vec<&str>>| {
            let mut o = json!({
                "operationId": format!("{id}{}", t.kind),
                "parameters": query_params(params),
                "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": schema_ref}}}},
                "x-kubernetes-action": id,
                "x-kubernetes-group-version-kind": gvk,
            });
            if let (Some(types), Some(m)) = (body, o.as_object_mut()) {
                let schema = if id == "patch" {
                    json!({"$ref": format!("#/components/schemas/{PATCH_SCHEMA}")})
                } else {
                    schema_ref.clone()
                };
                let content: Map<String, Value> =
                    types.iter().map(|ct| ((*ct).to_owned(), json!({"schema": schema}))).collect();
                m.insert("requestBody".into(), json!({"content": content, "required": true}));
            }
            o
        };
        let item = json!({
            "get": op("get", &["pretty"], None),
            "put": op("put", WRITE_PARAMS, Some(vec!["*/*"])),
            "patch": op("patch", PATCH_PARAMS, Some(patch_types(t.custom))),
            "delete": op("delete", &["dryRun", "gracePeriodSeconds", "propagationPolicy", "pretty"], None),
        });
        let collection = json!({
            "get": op("list", LIST_PARAMS, None),
            "post": op("post", WRITE_PARAMS, Some(vec!["*/*"])),
            "delete": op("deletecollection", &["dryRun", "labelSelector", "fieldSelector", "pretty"], None),
        });
        let prefix = if t.namespaced {
            format!("{base}/namespaces/{{namespace}}/{}", t.plural)
        } else {
            format!("{base}/{}", t.plural)
        };
        if t.status {
            paths.insert(format!("{prefix}/{{name}}/status"), item.clone());
        }
        paths.insert(format!("{prefix}/{{name}}"), item);
        paths.insert(prefix, collection);
    }
    let defs = v3_defs();
    for name in schemas().closure(builtin_roots.iter().map(String::as_str)) {
        if let Some(d) = defs.get(&name) {
            schemas_out.insert(name, d.clone());
        }
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.32.0"},
        "paths": paths,
        "components": {"schemas": schemas_out},
    }))
}

/// The OpenAPI v2 document: every built-in kind, its operations and its definitions.
pub fn v2_document(types: &[ResourceType]) -> Value {
    let mut paths = Map::new();
    for t in types.iter().filter(|t| !t.custom) {
        let version = t.preferred_version();
        let Some(def) = schemas().kind(&t.group, version, &t.kind) else { continue };
        let gvk = json!({"group": t.group, "version": version, "kind": t.kind});
        let schema_ref = json!({"$ref": format!("{REF}{def}")});
        let op = |id: &str, params: &[&str], consumes: &[&str]| {
            let mut parameters: Vec<Value> = params
                .iter()
                .map(|n| json!({"name": n, "in": "query", "type": "string", "uniqueItems": true}))
                .collect();
            if id == "patch" {
                parameters.push(
                    json!({"name": "body", "in": "body", "required": true, "schema": {"$ref": format!("{REF}{PATCH_SCHEMA}")}}),
                );
            }
            let mut o = json!({
                "operationId": format!("{id}{}", t.kind),
                "produces": ["application/json", "application/yaml", "application/vnd.kubernetes.protobuf"],
                "parameters": parameters,
                "responses": {"200": {"description": "OK", "schema": schema_ref}},
                "x-kubernetes-action": id,
                "x-kubernetes-group-version-kind": gvk,
            });
            if !consumes.is_empty()
                && let Some(m) = o.as_object_mut()
            {
                m.insert("consumes".into(), json!(consumes));
            }
            o
        };
        let prefix = if t.namespaced {
            format!("/{}/namespaces/{{namespace}}/{}", gv_path(&t.group, version), t.plural)
        } else {
            format!("/{}/{}", gv_path(&t.group, version), t.plural)
        };
        paths.insert(
            format!("{prefix}/{{name}}"),
            json!({
                "get": op("get", &["pretty"], &[]),
                "put": op("put", WRITE_PARAMS, &["*/*"]),
                "patch": op("patch", PATCH_PARAMS, &patch_types(false)),
                "delete": op("delete", &["dryRun", "gracePeriodSeconds", "propagationPolicy", "pretty"], &[]),
            }),
        );
        paths.insert(prefix, json!({"get": op("list", LIST_PARAMS, &[]), "post": op("post", WRITE_PARAMS, &["*/*"])}));
    }
    let mut definitions: Map<String, Value> = schemas().defs.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    definitions.insert(
        PATCH_SCHEMA.to_owned(),
        json!({"type": "object",
            "description": "Patch is provided to give a concrete name and type to the Kubernetes PATCH request body."}),
    );
    json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": "v1.32.0"},
        "paths": paths,
        "definitions": definitions,
    })
}

/// Serve `/openapi/...`.
pub fn handle(
    types: &[ResourceType],
    crds: &CrdSchemas,
    rest: &[&str],
    _query: &BTreeMap<String, String>,
    headers: &HeaderMap,
) -> Response {
    let gvs = group_versions(types);
    match rest {
        ["v2"] => {
            let doc = v2_document(types);
            let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).unwrap_or("");
            if accept.contains("application/com.github.proto-openapi.spec.v2") {
                let mut resp = (StatusCode::OK, v2proto::document(&doc)).into_response();
                resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(V2_PROTOBUF));
                resp
            } else {
                json_response(StatusCode::OK, &doc)
            }
        }
        ["v3"] => {
            let mut paths = Map::new();
            for (p, (g, v)) in &gvs {
                let doc = gv_document(types, crds, g, v).unwrap_or(Value::Null);
                let h = hash(&doc.to_string());
                paths.insert(p.clone(), json!({"serverRelativeURL": format!("/openapi/v3/{p}?hash={h}")}));
            }
            json_response(StatusCode::OK, &json!({"paths": paths}))
        }
        ["v3", tail @ ..] => {
            let p = tail.join("/");
            match gvs.get(&p).and_then(|(g, v)| gv_document(types, crds, g, v)) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v3_wraps_references_with_siblings_in_all_of() {
        let v =
            to_v3(&json!({"description": "d", "$ref": "#/definitions/a.B", "items": {"$ref": "#/definitions/c.D"}}));
        assert_eq!(
            v,
            json!({"allOf": [{"$ref": "#/components/schemas/a.B"}], "description": "d",
                "items": {"$ref": "#/components/schemas/c.D"}})
        );
        assert_eq!(custom_name("example.com", "v1", "Gadget"), "com.example.v1.Gadget");
    }

    #[test]
    fn a_group_version_document_holds_every_schema_it_refers_to() {
        let types = crate::resources::builtin();
        let doc = gv_document(&types, &CrdSchemas::new(), "apps", "v1").unwrap();
        let schemas = doc["components"]["schemas"].as_object().unwrap();
        assert!(schemas.contains_key("io.k8s.api.apps.v1.Deployment"));
        let text = doc.to_string();
        for (i, _) in text.match_indices("#/components/schemas/") {
            let rest = &text[i + "#/components/schemas/".len()..];
            let name = &rest[..rest.find('"').unwrap()];
            assert!(schemas.contains_key(name), "{name}");
        }
        let patch = &doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"];
        assert!(patch["requestBody"]["content"].get("application/strategic-merge-patch+json").is_some());
    }
}
