//! The REST verbs on resources, one module per concept:
//!
//! - `read`: list (selectors, pagination), watch and get;
//! - `write`: create, update, delete, deletecollection (and the cascades of deletes);
//! - `patch_apply`: the four patch types, server-side apply among them;
//! - `scale`: the scale subresource (the status subresource is the main verbs with a
//!   subresource);
//! - `commit`: what every write does before it is stored (metadata, defaults, generation,
//!   managedFields, mutating admission).
//!
//! This module parses the request, holds the context every verb gets, and dispatches.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use crate::apply;
use crate::patch::PatchType;
use crate::resources::ResourceType;
use crate::selectors::{FieldSelector, LabelSelector};
use crate::server::Shared;
use crate::status::{ApiError, json_response};
use crate::store::{Change, State, TypeKey};

mod commit;
mod patch_apply;
mod read;
mod scale;
mod write;

pub(crate) use write::create;

/// A request on a resource, parsed from its URL.
#[derive(Debug, Clone)]
pub struct ResourceRequest {
    /// API group.
    pub group: String,
    /// Version in the URL.
    pub version: String,
    /// Plural resource.
    pub plural: String,
    /// Namespace in the URL, if any.
    pub namespace: Option<String>,
    /// Name, if any.
    pub name: Option<String>,
    /// Subresource, if any.
    pub subresource: Option<String>,
}

/// Parse the part of a path after `/api/v1` or `/apis/<group>/<version>`.
pub fn parse_resource_path(group: &str, version: &str, segs: &[&str]) -> Option<ResourceRequest> {
    let mk = |ns: Option<&str>, rest: &[&str]| -> Option<ResourceRequest> {
        if rest.is_empty() || rest.len() > 3 {
            return None;
        }
        Some(ResourceRequest {
            group: group.to_owned(),
            version: version.to_owned(),
            plural: rest[0].to_owned(),
            namespace: ns.map(str::to_owned),
            name: rest.get(1).map(|s| (*s).to_owned()),
            subresource: rest.get(2).map(|s| (*s).to_owned()),
        })
    };
    if segs.len() >= 3 && segs[0] == "namespaces" && !matches!(segs[2], "status" | "finalize") {
        mk(Some(segs[1]), &segs[2..])
    } else {
        mk(None, segs)
    }
}

/// The query parameters of a request.
pub type Query = BTreeMap<String, String>;

/// Everything a verb handler needs.
#[derive(Debug)]
pub struct Ctx<'a> {
    /// Shared server state.
    pub shared: &'a Arc<Shared>,
    /// The parsed request.
    pub req: ResourceRequest,
    /// Resource type.
    pub rt: ResourceType,
    /// Query parameters.
    pub query: Query,
    /// Request headers.
    pub headers: HeaderMap,
    /// Injected fault: close a watch after this many events.
    pub drop_after: Option<u32>,
    /// Injected fault: answer with 410 Gone.
    pub expired: bool,
    /// Warnings for the answer's `Warning` headers (field validation with `Warn`).
    pub warnings: std::sync::Mutex<Vec<String>>,
}

impl Ctx<'_> {
    fn q(&self, k: &str) -> Option<&str> {
        self.query.get(k).map(String::as_str).filter(|s| !s.is_empty())
    }

    fn key(&self) -> TypeKey {
        self.rt.key()
    }

    fn ns(&self) -> String {
        if self.rt.namespaced { self.req.namespace.clone().unwrap_or_default() } else { String::new() }
    }

    fn api_version(&self) -> String {
        self.rt.api_version(&self.req.version)
    }

    fn dry_run(&self) -> bool {
        self.query.get("dryRun").is_some_and(|v| v == "All")
    }

    /// The field manager: the `fieldManager` parameter, or the User-Agent up to its first `/`,
    /// as the API server derives it.
    fn manager(&self) -> String {
        if let Some(m) = self.q("fieldManager") {
            return m.to_owned();
        }
        let ua = self.headers.get(axum::http::header::USER_AGENT).and_then(|v| v.to_str().ok()).unwrap_or("");
        let prefix = ua.split('/').next().unwrap_or("");
        let m: String = prefix.chars().take(128).collect();
        if m.is_empty() { "unknown".into() } else { m }
    }

    fn accept(&self) -> &str {
        self.headers.get(axum::http::header::ACCEPT).and_then(|v| v.to_str().ok()).unwrap_or("")
    }

    fn wants_table(&self) -> Option<String> {
        crate::table::wants_table(self.accept()).then(|| self.q("includeObject").unwrap_or("Metadata").to_owned())
    }

    /// The object as the client sees it (apiVersion of the request's version).
    fn out(&self, mut v: Value) -> Value {
        if let Some(m) = v.as_object_mut() {
            m.insert("apiVersion".into(), json!(self.api_version()));
        }
        v
    }
}

fn lock(shared: &Shared) -> std::sync::MutexGuard<'_, State> {
    // A panic while holding the lock leaves a usable state for a test server; recover it.
    shared.state.lock().unwrap_or_else(|e| e.into_inner())
}

fn broadcast(shared: &Shared, changes: Vec<Arc<Change>>) {
    for c in changes {
        // No receivers is fine.
        let _ = shared.tx.send(c);
    }
}

fn now() -> String {
    crate::now()
}

/// Dispatch a resource request to its verb.
pub async fn dispatch(ctx: Ctx<'_>, method: &Method, body: &[u8]) -> Response {
    let r = match (method.as_str(), &ctx.req.name, ctx.req.subresource.as_deref()) {
        ("GET", None, _) => {
            let is_watch = ctx.query.get("watch").is_some_and(|w| w == "true" || w == "1");
            if is_watch {
                return read::watch(&ctx);
            }
            read::list(&ctx)
        }
        ("GET", Some(_), None | Some("status")) => read::get(&ctx),
        ("GET", Some(_), Some("scale")) => scale::get_scale(&ctx),
        ("POST", None, _) => write::create(&ctx, body),
        ("PUT", Some(_), None | Some("status")) => write::update(&ctx, body),
        ("PUT", Some(_), Some("scale")) => scale::update_scale(&ctx, body, None),
        ("PATCH", Some(_), Some("scale")) => {
            let ct = content_type(&ctx.headers);
            match PatchType::from_content_type(&ct) {
                Some(pt) => scale::update_scale(&ctx, body, Some(pt)),
                None => Err(unsupported_patch(&ct)),
            }
        }
        ("PATCH", Some(_), None | Some("status")) => patch_apply::patch_object(&ctx, body),
        ("DELETE", Some(_), None) => write::delete(&ctx, body),
        ("DELETE", None, None) => write::delete_collection(&ctx),
        _ => Err(ApiError::new(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        )),
    };
    let mut resp = match r {
        Ok((code, v)) => json_response(code, &v),
        Err(e) => e.into_response(),
    };
    let warnings = std::mem::take(&mut *ctx.warnings.lock().unwrap_or_else(|e| e.into_inner()));
    for w in warnings {
        // As the API server writes them: code 299, no agent, the text quoted.
        let text = w.replace('\\', "\\\\").replace('"', "\\\"");
        if let Ok(v) = axum::http::HeaderValue::from_str(&format!("299 - \"{text}\"")) {
            resp.headers_mut().append(axum::http::header::WARNING, v);
        }
    }
    resp
}

pub(crate) type Res = Result<(StatusCode, Value), ApiError>;

fn content_type(h: &HeaderMap) -> String {
    h.get(axum::http::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("").to_owned()
}

fn unsupported_patch(ct: &str) -> ApiError {
    ApiError::new(
        415,
        "UnsupportedMediaType",
        format!(
            "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json (got {ct:?})"
        ),
    )
}

fn parse_body(body: &[u8]) -> Result<Value, ApiError> {
    if body.starts_with(crate::protobuf::MAGIC) {
        return crate::protobuf::decode(body).map_err(|e| ApiError::new(415, "UnsupportedMediaType", e.to_string()));
    }
    serde_json::from_slice(body)
        .or_else(|_| {
            std::str::from_utf8(body)
                .map_err(|e| e.to_string())
                .and_then(|s| serde_saphyr::from_str::<Value>(s).map_err(|e| e.to_string()))
        })
        .map_err(|e| ApiError::bad_request(format!("the request body could not be decoded: {e}")))
}

fn name_of(v: &Value) -> Option<String> {
    v.get("metadata")?.get("name")?.as_str().map(str::to_owned)
}

fn meta(v: &mut Value) -> &mut Map<String, Value> {
    if !v.get("metadata").is_some_and(Value::is_object)
        && let Some(m) = v.as_object_mut()
    {
        m.insert("metadata".into(), json!({}));
    }
    match v.get_mut("metadata").and_then(Value::as_object_mut) {
        Some(m) => m,
        // The caller checked the body is an object, and metadata was inserted as one.
        None => unreachable!("metadata is an object"),
    }
}

fn parse_rv(s: &str) -> Result<u64, ApiError> {
    s.parse().map_err(|_| ApiError::bad_request(format!("invalid resource version: {s:?}")))
}

fn selectors(ctx: &Ctx<'_>) -> Result<(LabelSelector, FieldSelector), ApiError> {
    let l =
        LabelSelector::parse(ctx.q("labelSelector").unwrap_or("")).map_err(|e| ApiError::bad_request(e.to_string()))?;
    let f =
        FieldSelector::parse(ctx.q("fieldSelector").unwrap_or("")).map_err(|e| ApiError::bad_request(e.to_string()))?;
    Ok((l, f))
}

fn existing(ctx: &Ctx<'_>, st: &State) -> Result<Value, ApiError> {
    let name = ctx.req.name.clone().unwrap_or_default();
    st.get(&ctx.key(), &(ctx.ns(), name.clone()))
        .cloned()
        .ok_or_else(|| ApiError::not_found(&ctx.rt.group, &ctx.rt.plural, &name))
}

fn scope_of(ctx: &Ctx<'_>) -> apply::Scope {
    match ctx.req.subresource.as_deref() {
        Some("status") => Some(true),
        _ => ctx.rt.status.then_some(false),
    }
}

/// The schema field validation checks a request against: the kind's definition, or the
/// custom resource's schema in its CRD.
pub(crate) enum FieldSchema {
    /// A built-in kind's definition.
    Builtin(String),
    /// A custom resource's `openAPIV3Schema` (none if the CRD has none).
    Custom(Option<Value>),
}

impl FieldSchema {
    fn root(&self) -> crate::validation::Root<'_> {
        match self {
            FieldSchema::Builtin(n) => crate::validation::Root::Builtin(n),
            FieldSchema::Custom(s) => crate::validation::Root::Custom(s.as_ref()),
        }
    }
}

/// The `fieldValidation` directive of the request.
fn directive(ctx: &Ctx<'_>) -> Result<crate::validation::Directive, ApiError> {
    crate::validation::Directive::parse(ctx.query.get("fieldValidation").map(String::as_str))
        .map_err(ApiError::bad_request)
}

/// The schema of the request's kind, if the server has one.
fn field_schema(ctx: &Ctx<'_>) -> Option<FieldSchema> {
    if ctx.rt.custom {
        let st = lock(ctx.shared);
        let crd_key = ("apiextensions.k8s.io".to_owned(), "customresourcedefinitions".to_owned());
        let crd_name = (String::new(), format!("{}.{}", ctx.rt.plural, ctx.rt.group));
        let crd = st.get(&crd_key, &crd_name)?;
        return Some(FieldSchema::Custom(crate::crd_schema::version_schema(crd, &ctx.req.version).cloned()));
    }
    crate::openapi::schemas::schemas()
        .kind(&ctx.rt.group, &ctx.req.version, &ctx.rt.kind)
        .map(|n| FieldSchema::Builtin(n.to_owned()))
}

/// The order the API server reports a custom resource's findings in: duplicates as the
/// decoder meets them, then what pruning finds, metadata first.
fn custom_order(findings: Vec<crate::validation::Finding>) -> Vec<crate::validation::Finding> {
    let (mut unknown, dups): (Vec<_>, Vec<_>) = findings.into_iter().partition(|f| f.is_unknown());
    unknown.sort_by_key(|f| {
        let m = f.message();
        (!m.starts_with("unknown field \"metadata."), m)
    });
    dups.into_iter().chain(unknown).collect()
}

/// Field validation of a create or update body, as the API server's strict decoding: unknown
/// and duplicate fields refused with `Strict` (400, "cannot be handled as a ..."), returned as
/// warnings with `Warn` (the default), ignored with `Ignore`. Unknown fields are then dropped by
/// [`commit`](commit::commit), as decoding drops them.
fn validate_body(ctx: &Ctx<'_>, body: &[u8], parsed: &Value) -> Result<(), ApiError> {
    use crate::validation::{Directive, check, parse_ordered, unknown_in_value};
    let d = directive(ctx)?;
    if d == Directive::Ignore || body.starts_with(crate::protobuf::MAGIC) {
        return Ok(());
    }
    let Some(schema) = field_schema(ctx) else { return Ok(()) };
    let mut findings = match parse_ordered(body) {
        Some(node) => check(schema.root(), &node),
        // A YAML body: its duplicates are not seen here (see docs/test-apiserver.md).
        None => unknown_in_value(schema.root(), parsed),
    };
    if ctx.rt.custom {
        findings = custom_order(findings);
    }
    let messages: Vec<String> = findings.iter().map(crate::validation::Finding::message).collect();
    report(ctx, d, messages, |joined| {
        let kind = parsed.get("kind").and_then(Value::as_str).unwrap_or(&ctx.rt.kind);
        let version = parsed
            .get("apiVersion")
            .and_then(Value::as_str)
            .map(|av| av.rsplit('/').next().unwrap_or(av).to_owned())
            .unwrap_or_else(|| ctx.req.version.clone());
        ApiError::bad_request(format!(
            "{kind} in version \"{version}\" cannot be handled as a {}: strict decoding error: {joined}",
            ctx.rt.kind
        ))
    })
}

/// Warn or refuse: `refuse` builds the error from the messages joined as the API server joins
/// them.
fn report(
    ctx: &Ctx<'_>,
    d: crate::validation::Directive,
    messages: Vec<String>,
    refuse: impl FnOnce(&str) -> ApiError,
) -> Result<(), ApiError> {
    use crate::validation::Directive;
    if messages.is_empty() {
        return Ok(());
    }
    match d {
        Directive::Strict => Err(refuse(&messages.join(", "))),
        Directive::Warn => {
            ctx.warnings.lock().unwrap_or_else(|e| e.into_inner()).extend(messages);
            Ok(())
        }
        Directive::Ignore => Ok(()),
    }
}
