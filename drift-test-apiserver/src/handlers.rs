//! The REST verbs on resources: list, watch, get, create, update, patch (including server-side
//! apply), delete, deletecollection, and the status and scale subresources.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use crate::apply::{self, Slot};
use crate::patch::{self, PatchType};
use crate::resources::ResourceType;
use crate::selectors::{FieldSelector, LabelSelector};
use crate::server::Shared;
use crate::status::{self, ApiError, json_response};
use crate::store::{Change, ObjKey, State, TypeKey};
use crate::watch::{self, WatchSpec, WatchStart};

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
                return watch(&ctx);
            }
            list(&ctx)
        }
        ("GET", Some(_), None | Some("status")) => get(&ctx),
        ("GET", Some(_), Some("scale")) => get_scale(&ctx),
        ("POST", None, _) => create(&ctx, body),
        ("PUT", Some(_), None | Some("status")) => update(&ctx, body),
        ("PUT", Some(_), Some("scale")) => update_scale(&ctx, body, None),
        ("PATCH", Some(_), Some("scale")) => {
            let ct = content_type(&ctx.headers);
            match PatchType::from_content_type(&ct) {
                Some(pt) => update_scale(&ctx, body, Some(pt)),
                None => Err(unsupported_patch(&ct)),
            }
        }
        ("PATCH", Some(_), None | Some("status")) => patch_object(&ctx, body),
        ("DELETE", Some(_), None) => delete(&ctx, body),
        ("DELETE", None, None) => delete_collection(&ctx),
        _ => Err(ApiError::new(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        )),
    };
    match r {
        Ok((code, v)) => json_response(code, &v),
        Err(e) => e.into_response(),
    }
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

// ---------------------------------------------------------------------------------------------
// Reads

fn selectors(ctx: &Ctx<'_>) -> Result<(LabelSelector, FieldSelector), ApiError> {
    let l =
        LabelSelector::parse(ctx.q("labelSelector").unwrap_or("")).map_err(|e| ApiError::bad_request(e.to_string()))?;
    let f =
        FieldSelector::parse(ctx.q("fieldSelector").unwrap_or("")).map_err(|e| ApiError::bad_request(e.to_string()))?;
    Ok((l, f))
}

/// What a `continue` parameter carries (base64 of its JSON).
#[derive(serde::Serialize, serde::Deserialize)]
struct ContinueToken {
    /// resourceVersion of the first page, which every page reports.
    rv: u64,
    /// Key of the last object returned.
    ns: String,
    name: String,
    /// resourceVersion when this token was handed out.
    at: u64,
    /// Objects of the listed namespace (or of all, for a list across namespaces) up to and
    /// including the last one returned, at `at`.
    offset: usize,
}

/// The objects a list walks, in key order: those of one namespace or of all, after `after`.
fn list_range<'a>(
    objects: &'a BTreeMap<ObjKey, Value>,
    ns_filter: Option<&'a str>,
    after: Option<&ObjKey>,
) -> impl Iterator<Item = (&'a ObjKey, &'a Value)> {
    use std::ops::Bound;
    let lower = match (after, ns_filter) {
        (Some(k), _) => Bound::Excluded(k.clone()),
        (None, Some(ns)) => Bound::Included((ns.to_owned(), String::new())),
        (None, None) => Bound::Unbounded,
    };
    objects.range((lower, Bound::Unbounded)).take_while(move |(k, _)| ns_filter.is_none_or(|ns| k.0 == ns))
}

/// How many objects of the list's scope have a key up to `last` now, from the count handed out
/// with the token and the creations and deletions recorded since: no walk over the objects, so
/// paging through N objects stays linear. `watchable_from(t.rv)` must hold.
fn rank_now(st: &State, key: &TypeKey, ns_filter: Option<&str>, t: &ContinueToken) -> usize {
    let last = (t.ns.as_str(), t.name.as_str());
    let mut rank = t.offset as i64;
    for c in st.changes_after(t.at) {
        if c.key != *key || ns_filter.is_some_and(|ns| ns != c.namespace) {
            continue;
        }
        let name = c.object.get("metadata").and_then(|m| m.get("name")).and_then(Value::as_str).unwrap_or("");
        if (c.namespace.as_str(), name) > last {
            continue;
        }
        match c.kind {
            "ADDED" => rank += 1,
            "DELETED" => rank -= 1,
            _ => {}
        }
    }
    usize::try_from(rank).unwrap_or(0)
}

fn list(ctx: &Ctx<'_>) -> Res {
    use base64::Engine as _;
    let (labels, fields) = selectors(ctx)?;
    let selected = ctx.q("labelSelector").is_some() || ctx.q("fieldSelector").is_some();
    let limit: usize = ctx.q("limit").map(|l| l.parse().unwrap_or(0)).unwrap_or(0);
    let token: Option<ContinueToken> = match ctx.q("continue") {
        Some(c) => Some(
            base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(c)
                .ok()
                .and_then(|b| serde_json::from_slice(&b).ok())
                .ok_or_else(|| ApiError::bad_request("continue key is not valid"))?,
        ),
        None => None,
    };
    let st = lock(ctx.shared);
    if ctx.expired || token.as_ref().is_some_and(|t| !st.watchable_from(t.rv) || !st.watchable_from(t.at)) {
        return Err(ApiError::expired(
            "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.",
        ));
    }
    let list_rv = token.as_ref().map(|t| t.rv).unwrap_or(st.rv);
    let ns_filter = ctx.req.namespace.as_deref().filter(|_| ctx.rt.namespaced);
    let empty = BTreeMap::new();
    let key = ctx.key();
    let objects = st.objects.get(&key).unwrap_or(&empty);
    let after: Option<ObjKey> = token.as_ref().map(|t| (t.ns.clone(), t.name.clone()));
    let mut matching =
        list_range(objects, ns_filter, after.as_ref()).filter(|(_, o)| labels.matches(o) && fields.matches(o));
    let mut items: Vec<&Value> = Vec::new();
    let mut last: Option<&ObjKey> = None;
    for (k, o) in matching.by_ref() {
        items.push(o);
        last = Some(k);
        if limit > 0 && items.len() == limit {
            break;
        }
    }
    // Another page when one more object matches. The walk to it is the next page's walk, so
    // paging stays linear even with a selector that matches few objects.
    let more = limit > 0 && items.len() == limit && matching.next().is_some();
    // Without a selector the remaining count is known from the counts: the objects of the
    // scope now, less those up to the last one returned.
    let before = token.as_ref().filter(|_| !selected).map(|t| rank_now(&st, &key, ns_filter, t)).unwrap_or(0);
    let offset = before + items.len();
    let remaining = st.count(&key, ns_filter).saturating_sub(offset);
    let mut list_meta = json!({"resourceVersion": list_rv.to_string()});
    if more && let Some((ns, name)) = last {
        let t = ContinueToken { rv: list_rv, ns: ns.clone(), name: name.clone(), at: st.rv, offset };
        let t = serde_json::to_vec(&t).unwrap_or_default();
        if let Some(m) = list_meta.as_object_mut() {
            m.insert("continue".into(), json!(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(t)));
            // As the API server: only without selectors, where it is known.
            if !selected {
                m.insert("remainingItemCount".into(), json!(remaining));
            }
        }
    }
    if let Some(include) = ctx.wants_table() {
        let outs: Vec<Value> = items.iter().map(|o| ctx.out((*o).clone())).collect();
        let refs: Vec<&Value> = outs.iter().collect();
        return Ok((StatusCode::OK, crate::table::table(&refs, list_meta, &include)));
    }
    // Like the API server, items of built-in kinds carry no apiVersion and kind (the list's
    // own say it); custom resources are unstructured and keep theirs.
    let items: Vec<Value> = items
        .into_iter()
        .map(|o| {
            let mut o = ctx.out(o.clone());
            if !ctx.rt.custom
                && let Some(m) = o.as_object_mut()
            {
                m.remove("apiVersion");
                m.remove("kind");
            }
            o
        })
        .collect();
    Ok((
        StatusCode::OK,
        json!({
            "kind": format!("{}List", ctx.rt.kind),
            "apiVersion": ctx.api_version(),
            "metadata": list_meta,
            "items": items,
        }),
    ))
}

fn watch(ctx: &Ctx<'_>) -> Response {
    let (labels, fields) = match selectors(ctx) {
        Ok(s) => s,
        Err(e) => return e.into_response(),
    };
    let rv_param = ctx.q("resourceVersion").map(str::to_owned);
    let send_initial = ctx.q("sendInitialEvents") == Some("true");
    let timeout = ctx.q("timeoutSeconds").and_then(|t| t.parse::<u64>().ok()).map(std::time::Duration::from_secs);
    let spec = WatchSpec {
        key: ctx.key(),
        namespace: ctx.req.namespace.clone().filter(|_| ctx.rt.namespaced),
        labels,
        fields,
        bookmarks: ctx.q("allowWatchBookmarks") == Some("true"),
        bookmark_interval: ctx.shared.bookmark_interval,
        timeout,
        drop_after: ctx.drop_after,
        api_version: ctx.api_version(),
        kind: ctx.rt.kind.clone(),
        table: ctx.wants_table(),
    };
    let st = lock(ctx.shared);
    let rx = ctx.shared.tx.subscribe();
    let mut start = WatchStart { initial: Vec::new(), initial_end_bookmark: false, rv: st.rv, rx, gone: None };
    let from = match rv_param.as_deref() {
        None | Some("0") => None,
        Some(s) => match parse_rv(s) {
            Ok(v) => Some(v),
            Err(e) => return e.into_response(),
        },
    };
    if ctx.expired {
        start.gone = Some(ApiError::expired(format!("too old resource version: {} ({})", from.unwrap_or(0), st.rv)));
    } else if from.is_none() || send_initial {
        let empty = BTreeMap::new();
        for o in st.objects.get(&spec.key).unwrap_or(&empty).values() {
            let ns = o.get("metadata").and_then(|m| m.get("namespace")).and_then(Value::as_str).unwrap_or("");
            if spec.namespace.as_deref().is_none_or(|n| n == ns) && spec.labels.matches(o) && spec.fields.matches(o) {
                start.initial.push(("ADDED".into(), o.clone()));
            }
        }
        start.initial_end_bookmark = send_initial && spec.bookmarks;
    } else if let Some(from) = from {
        if !st.watchable_from(from) {
            start.gone = Some(ApiError::expired(format!(
                "too old resource version: {from} ({})",
                st.compacted_below.saturating_sub(1)
            )));
        } else {
            for c in st.history.iter().filter(|c| c.rv > from) {
                if c.key == spec.key
                    && spec.namespace.as_ref().is_none_or(|n| *n == c.namespace)
                    && spec.labels.matches(&c.object)
                    && spec.fields.matches(&c.object)
                {
                    start.initial.push((c.kind.to_owned(), c.object.clone()));
                }
            }
        }
    }
    drop(st);
    watch::respond(spec, start, ctx.shared.shutdown.clone())
}

fn get(ctx: &Ctx<'_>) -> Res {
    let name = ctx.req.name.clone().unwrap_or_default();
    let st = lock(ctx.shared);
    let o = st
        .get(&ctx.key(), &(ctx.ns(), name.clone()))
        .ok_or_else(|| ApiError::not_found(&ctx.rt.group, &ctx.rt.plural, &name))?;
    let out = ctx.out(o.clone());
    if let Some(include) = ctx.wants_table() {
        let rv = out.get("metadata").and_then(|m| m.get("resourceVersion")).cloned().unwrap_or(Value::Null);
        return Ok((StatusCode::OK, crate::table::table(&[&out], json!({"resourceVersion": rv}), &include)));
    }
    Ok((StatusCode::OK, out))
}

// ---------------------------------------------------------------------------------------------
// Writes

/// How a write is recorded in managedFields.
enum Record<'a> {
    /// An Update by this manager with this subresource.
    Update { manager: &'a str, subresource: &'a str },
    /// Already recorded (server-side apply did it).
    Done,
}

/// Finish a write: metadata, defaults, generation, managedFields, store. `old` is the stored
/// object on updates. Returns the stored object and whether it is new.
fn commit(
    ctx: &Ctx<'_>,
    st: &mut State,
    old: Option<&Value>,
    mut new: Value,
    record: Record<'_>,
    scope: apply::Scope,
) -> Result<(Value, Vec<Arc<Change>>), ApiError> {
    let ns = ctx.ns();
    let name = name_of(&new).unwrap_or_default();
    {
        let o = new.as_object_mut().ok_or_else(|| ApiError::bad_request("the object is not a JSON object"))?;
        o.insert("apiVersion".into(), json!(ctx.rt.api_version(ctx.rt.preferred_version())));
        o.insert("kind".into(), json!(ctx.rt.kind));
    }
    let m = meta(&mut new);
    if ctx.rt.namespaced {
        m.insert("namespace".into(), json!(ns));
    } else {
        m.remove("namespace");
    }
    match old {
        None => {
            m.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
            m.insert("creationTimestamp".into(), json!(now()));
            m.remove("resourceVersion");
            m.remove("deletionTimestamp");
            m.remove("selfLink");
            if ctx.rt.generation {
                m.insert("generation".into(), json!(1));
            } else {
                m.remove("generation");
            }
        }
        Some(old) => {
            let om = old.get("metadata").cloned().unwrap_or(json!({}));
            for k in ["uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds"] {
                match om.get(k) {
                    Some(v) => {
                        m.insert(k.into(), v.clone());
                    }
                    None => {
                        m.remove(k);
                    }
                }
            }
            m.insert("resourceVersion".into(), om.get("resourceVersion").cloned().unwrap_or(Value::Null));
            if let Some(g) = om.get("generation") {
                m.insert("generation".into(), g.clone());
            }
        }
    }
    // Status: the main resource keeps the stored status; the status subresource changes only it.
    if let (Some(old), Some(status_only)) = (old, scope) {
        let o = new.as_object_mut().ok_or_else(|| ApiError::bad_request("not an object"))?;
        if status_only {
            let status = o.get("status").cloned();
            let mut kept = old.clone();
            if let Some(km) = kept.as_object_mut() {
                match status {
                    Some(s) => {
                        km.insert("status".into(), s);
                    }
                    None => {
                        km.remove("status");
                    }
                }
                if let Some(mf) = o.get("metadata").and_then(|m| m.get("managedFields"))
                    && let Some(kmm) = km.get_mut("metadata").and_then(Value::as_object_mut)
                {
                    kmm.insert("managedFields".into(), mf.clone());
                }
            }
            new = kept;
        } else {
            match old.get("status") {
                Some(s) => {
                    o.insert("status".into(), s.clone());
                }
                None => {
                    o.remove("status");
                }
            }
        }
    }
    if ctx.rt.custom {
        let crd_key = ("apiextensions.k8s.io".to_owned(), "customresourcedefinitions".to_owned());
        let crd_name = (String::new(), format!("{}.{}", ctx.rt.plural, ctx.rt.group));
        if let Some(schema) =
            st.get(&crd_key, &crd_name).and_then(|crd| crate::crd_schema::version_schema(crd, &ctx.req.version))
        {
            crate::crd_schema::apply(schema, &mut new);
        }
    }
    crate::defaults::apply(&ctx.rt.kind, &mut new);
    // The field manager runs before mutating admission, so what admission changes is owned by
    // nobody, as on the API server.
    if let Record::Update { manager, subresource } = record {
        let t = now();
        let api_version = ctx.api_version();
        let slot = Slot { manager, operation: "Update", api_version: &api_version, subresource, time: &t };
        apply::record_update(&ctx.rt.kind, old, &mut new, slot, scope);
    }
    // Mutating admission, on the main resource only, for real writes and dry runs alike.
    if ctx.req.subresource.is_none() {
        let attrs = crate::admission::Attributes {
            operation: if old.is_some() {
                crate::admission::Operation::Update
            } else {
                crate::admission::Operation::Create
            },
            group: &ctx.rt.group,
            resource: &ctx.rt.plural,
            kind: &ctx.rt.kind,
            namespace: &ns,
            name: &name,
        };
        let applied = ctx.shared.admission.lock().unwrap_or_else(|e| e.into_inner()).mutate(&attrs, &mut new);
        if !applied.is_empty() {
            tracing::debug!(kind = %ctx.rt.kind, namespace = %ns, name = %name, rules = ?applied, dry_run = ctx.dry_run(), "mutating admission");
        }
    }
    if let (Some(old), true) = (old, ctx.rt.generation) {
        let strip = |v: &Value| {
            let mut v = v.clone();
            if let Some(m) = v.as_object_mut() {
                m.remove("metadata");
                m.remove("status");
            }
            v
        };
        if strip(old) != strip(&new) {
            let g = old.get("metadata").and_then(|m| m.get("generation")).and_then(Value::as_i64).unwrap_or(0);
            meta(&mut new).insert("generation".into(), json!(g + 1));
        }
    }
    crate::defaults::prepare(&ctx.rt.kind, &mut new, old, st);
    // Deletion completes when the last finalizer is removed.
    let finalizing = new.get("metadata").is_some_and(|m| m.get("deletionTimestamp").is_some())
        && new.get("metadata").and_then(|m| m.get("finalizers")).and_then(Value::as_array).is_none_or(Vec::is_empty);
    if let Some(old) = old
        && *old == new
    {
        return Ok((new, Vec::new()));
    }
    if ctx.dry_run() {
        return Ok((new, Vec::new()));
    }
    let key = ctx.key();
    let okey = (ns, name);
    if finalizing {
        let mut changes = Vec::new();
        st.overwrite(&key, &okey, new.clone());
        if let Some((gone, c)) = st.delete(&key, &okey) {
            changes.push(c);
            return Ok((gone, changes));
        }
    }
    let change = st.put(&key, okey, new);
    let stored = change.object.clone();
    if ctx.rt.kind == "CustomResourceDefinition" {
        st.refresh_custom_types();
    }
    Ok((stored, vec![change]))
}

fn check_namespace(ctx: &Ctx<'_>, st: &State, body_ns: Option<&str>) -> Result<(), ApiError> {
    if !ctx.rt.namespaced {
        return Ok(());
    }
    let ns = ctx.ns();
    if ns.is_empty() {
        return Err(ApiError::bad_request("the namespace of the object must be given in the request path"));
    }
    if let Some(b) = body_ns
        && !b.is_empty()
        && b != ns
    {
        return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    if st.get(&(String::new(), "namespaces".into()), &(String::new(), ns.clone())).is_none() {
        return Err(ApiError::not_found("", "namespaces", &ns));
    }
    Ok(())
}

fn check_kind(ctx: &Ctx<'_>, body: &Value) -> Result<(), ApiError> {
    if let Some(k) = body.get("kind").and_then(Value::as_str)
        && k != ctx.rt.kind
        && !(ctx.req.subresource.as_deref() == Some("scale") && k == "Scale")
    {
        return Err(ApiError::bad_request(format!(
            "the kind {k:?} of the body does not match the resource {:?} ({})",
            ctx.rt.plural, ctx.rt.kind
        )));
    }
    Ok(())
}

fn random_suffix() -> String {
    let u = uuid::Uuid::new_v4().simple().to_string();
    let alphabet = b"bcdfghjklmnpqrstvwxz2456789";
    u.bytes().take(5).map(|b| alphabet[usize::from(b) % alphabet.len()] as char).collect()
}

pub(crate) fn create(ctx: &Ctx<'_>, body: &[u8]) -> Res {
    let mut obj = parse_body(body)?;
    if !obj.is_object() {
        return Err(ApiError::bad_request("the object is not a JSON object"));
    }
    check_kind(ctx, &obj)?;
    let m = meta(&mut obj);
    if m.get("name").and_then(Value::as_str).is_none_or(str::is_empty) {
        match m.get("generateName").and_then(Value::as_str) {
            Some(g) => {
                let n = format!("{g}{}", random_suffix());
                m.insert("name".into(), json!(n));
            }
            None => {
                return Err(ApiError::new(
                    422,
                    "Invalid",
                    format!(
                        "{} \"\" is invalid: metadata.name: Required value: name or generateName is required",
                        ctx.rt.kind
                    ),
                ));
            }
        }
    }
    m.remove("managedFields");
    let name = name_of(&obj).unwrap_or_default();
    let body_ns = obj.get("metadata").and_then(|m| m.get("namespace")).and_then(Value::as_str).map(str::to_owned);
    let manager = ctx.manager();
    let changes;
    let stored;
    {
        let mut st = lock(ctx.shared);
        check_namespace(ctx, &st, body_ns.as_deref())?;
        if st.get(&ctx.key(), &(ctx.ns(), name.clone())).is_some() {
            return Err(ApiError::already_exists(&ctx.rt.group, &ctx.rt.plural, &name));
        }
        let scope = ctx.rt.status.then_some(false);
        // On create the status given is kept for kinds without a status subresource only.
        if ctx.rt.status
            && let Some(o) = obj.as_object_mut()
        {
            o.remove("status");
        }
        (stored, changes) =
            commit(ctx, &mut st, None, obj, Record::Update { manager: &manager, subresource: "" }, scope)?;
    }
    broadcast(ctx.shared, changes);
    Ok((StatusCode::CREATED, ctx.out(stored)))
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

fn update(ctx: &Ctx<'_>, body: &[u8]) -> Res {
    let mut obj = parse_body(body)?;
    if !obj.is_object() {
        return Err(ApiError::bad_request("the object is not a JSON object"));
    }
    check_kind(ctx, &obj)?;
    let name = ctx.req.name.clone().unwrap_or_default();
    if name_of(&obj).is_some_and(|n| n != name) {
        return Err(ApiError::bad_request("the name of the object does not match the name on the URL"));
    }
    meta(&mut obj).insert("name".into(), json!(name));
    let manager = ctx.manager();
    let sub = ctx.req.subresource.clone().unwrap_or_default();
    let (stored, changes) = {
        let mut st = lock(ctx.shared);
        let old = existing(ctx, &st)?;
        let want_rv = obj
            .get("metadata")
            .and_then(|m| m.get("resourceVersion"))
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned);
        if let Some(rv) = want_rv
            && Some(rv.as_str()) != old.get("metadata").and_then(|m| m.get("resourceVersion")).and_then(Value::as_str)
        {
            return Err(ApiError::conflict(&ctx.rt.group, &ctx.rt.plural, &name));
        }
        // The managedFields of an update are the stored ones unless the client sends some.
        if obj.get("metadata").and_then(|m| m.get("managedFields")).is_none()
            && let Some(mf) = old.get("metadata").and_then(|m| m.get("managedFields"))
        {
            meta(&mut obj).insert("managedFields".into(), mf.clone());
        }
        commit(ctx, &mut st, Some(&old), obj, Record::Update { manager: &manager, subresource: &sub }, scope_of(ctx))?
    };
    broadcast(ctx.shared, changes);
    Ok((StatusCode::OK, ctx.out(stored)))
}

fn patch_object(ctx: &Ctx<'_>, body: &[u8]) -> Res {
    let ct = content_type(&ctx.headers);
    let pt = PatchType::from_content_type(&ct).ok_or_else(|| unsupported_patch(&ct))?;
    if pt == PatchType::Apply {
        return server_side_apply(ctx, body);
    }
    let manager = ctx.manager();
    let sub = ctx.req.subresource.clone().unwrap_or_default();
    let name = ctx.req.name.clone().unwrap_or_default();
    let (stored, changes) = {
        let mut st = lock(ctx.shared);
        let old = existing(ctx, &st)?;
        let mut new = patch::apply_patch(&ctx.rt.kind, pt, &old, body).map_err(|e| match e {
            patch::PatchError::Invalid(m) => ApiError::bad_request(m),
            patch::PatchError::Failed(m) => ApiError::new(422, "Invalid", m),
        })?;
        if name_of(&new).is_some_and(|n| n != name) {
            return Err(ApiError::bad_request("the name of the object does not match the name on the URL"));
        }
        let old_rv = old.get("metadata").and_then(|m| m.get("resourceVersion")).cloned();
        let new_rv = new.get("metadata").and_then(|m| m.get("resourceVersion")).cloned();
        if new_rv.is_some() && new_rv != old_rv {
            return Err(ApiError::conflict(&ctx.rt.group, &ctx.rt.plural, &name));
        }
        meta(&mut new).insert("name".into(), json!(name));
        commit(ctx, &mut st, Some(&old), new, Record::Update { manager: &manager, subresource: &sub }, scope_of(ctx))?
    };
    broadcast(ctx.shared, changes);
    Ok((StatusCode::OK, ctx.out(stored)))
}

fn server_side_apply(ctx: &Ctx<'_>, body: &[u8]) -> Res {
    let Some(manager) = ctx.q("fieldManager").map(str::to_owned) else {
        return Err(ApiError::bad_request("PATCH, application/apply-patch+yaml requests must specify a fieldManager"));
    };
    let force = ctx.q("force") == Some("true");
    let mut applied = parse_body(body)?;
    if !ctx.rt.custom {
        crate::quantity::canonicalize_known_fields(&mut applied);
    }
    if !applied.is_object() {
        return Err(ApiError::bad_request("the applied configuration is not an object"));
    }
    check_kind(ctx, &applied)?;
    let name = ctx.req.name.clone().unwrap_or_default();
    if name_of(&applied).is_some_and(|n| n != name) {
        return Err(ApiError::bad_request("the name of the object does not match the name on the URL"));
    }
    let sub = ctx.req.subresource.clone().unwrap_or_default();
    let (stored, changes, created) = {
        let mut st = lock(ctx.shared);
        let body_ns =
            applied.get("metadata").and_then(|m| m.get("namespace")).and_then(Value::as_str).map(str::to_owned);
        check_namespace(ctx, &st, body_ns.as_deref())?;
        let old = st.get(&ctx.key(), &(ctx.ns(), name.clone())).cloned();
        if old.is_none() && !sub.is_empty() {
            return Err(ApiError::not_found(&ctx.rt.group, &ctx.rt.plural, &name));
        }
        let live = old.clone().unwrap_or_else(
            || json!({"apiVersion": ctx.api_version(), "kind": ctx.rt.kind, "metadata": {"name": name}}),
        );
        let t = now();
        let api_version = ctx.api_version();
        let slot =
            Slot { manager: &manager, operation: "Apply", api_version: &api_version, subresource: &sub, time: &t };
        let scope = scope_of(ctx);
        let merged =
            apply::server_side_apply(&ctx.rt.kind, &live, &applied, slot, force, scope).map_err(|conflicts| {
                let n = conflicts.len();
                let lines: Vec<String> = conflicts
                    .iter()
                    .map(|c| format!("conflict with \"{}\" using {}: {}", c.manager, c.api_version, c.field))
                    .collect();
                let message = if n == 1 {
                    format!("Apply failed with 1 conflict: {}", lines[0])
                } else {
                    format!("Apply failed with {n} conflicts: {}", lines.join("\n"))
                };
                let causes: Vec<Value> = conflicts
                    .iter()
                    .map(|c| {
                        json!({"reason": "FieldManagerConflict",
                        "message": format!("conflict with \"{}\" using {}", c.manager, c.api_version),
                        "field": c.field})
                    })
                    .collect();
                let mut e = ApiError::new(409, "Conflict", message);
                let mut d = status::details(&ctx.rt.group, &ctx.rt.plural, &name);
                if let Some(m) = d.as_object_mut() {
                    m.insert("causes".into(), Value::Array(causes));
                }
                e.details = Some(Box::new(d));
                e
            })?;
        let created = old.is_none();
        let (stored, changes) = commit(ctx, &mut st, old.as_ref(), merged, Record::Done, scope)?;
        (stored, changes, created)
    };
    broadcast(ctx.shared, changes);
    let code = if created { StatusCode::CREATED } else { StatusCode::OK };
    Ok((code, ctx.out(stored)))
}

fn delete(ctx: &Ctx<'_>, body: &[u8]) -> Res {
    let name = ctx.req.name.clone().unwrap_or_default();
    let opts: Value = if body.is_empty() { json!({}) } else { parse_body(body).unwrap_or(json!({})) };
    let dry =
        ctx.dry_run() || opts.get("dryRun").and_then(Value::as_array).is_some_and(|a| a.iter().any(|v| v == "All"));
    let mut changes = Vec::new();
    let result = {
        let mut st = lock(ctx.shared);
        let old = existing(ctx, &st)?;
        if let Some(want) = opts.get("preconditions").and_then(|p| p.get("resourceVersion")).and_then(Value::as_str)
            && Some(want) != old.get("metadata").and_then(|m| m.get("resourceVersion")).and_then(Value::as_str)
        {
            return Err(ApiError::conflict(&ctx.rt.group, &ctx.rt.plural, &name));
        }
        let uid = old.get("metadata").and_then(|m| m.get("uid")).cloned().unwrap_or(Value::Null);
        let has_finalizers = old
            .get("metadata")
            .and_then(|m| m.get("finalizers"))
            .and_then(Value::as_array)
            .is_some_and(|f| !f.is_empty());
        if dry {
            (StatusCode::OK, ctx.out(old))
        } else if has_finalizers {
            let mut marked = old.clone();
            let m = meta(&mut marked);
            if !m.contains_key("deletionTimestamp") {
                m.insert("deletionTimestamp".into(), json!(now()));
                m.insert("deletionGracePeriodSeconds".into(), json!(0));
                let c = st.put(&ctx.key(), (ctx.ns(), name.clone()), marked);
                let out = c.object.clone();
                changes.push(c);
                (StatusCode::OK, ctx.out(out))
            } else {
                (StatusCode::OK, ctx.out(old))
            }
        } else {
            let okey = (ctx.ns(), name.clone());
            if let Some((_, c)) = st.delete(&ctx.key(), &okey) {
                changes.push(c);
            }
            cascade(ctx, &mut st, &old, &mut changes);
            (StatusCode::OK, status::success(&ctx.rt.group, &ctx.rt.plural, &name, &uid))
        }
    };
    broadcast(ctx.shared, changes);
    Ok(result)
}

/// Deleting a namespace deletes its objects; deleting a CRD deletes its custom resources.
fn cascade(ctx: &Ctx<'_>, st: &mut State, old: &Value, changes: &mut Vec<Arc<Change>>) {
    match ctx.rt.kind.as_str() {
        "Namespace" => {
            let ns = name_of(old).unwrap_or_default();
            let victims: Vec<(TypeKey, ObjKey)> = st
                .objects
                .iter()
                .flat_map(|(tk, objs)| {
                    objs.keys().filter(|(n, _)| *n == ns).map(|ok| (tk.clone(), ok.clone())).collect::<Vec<_>>()
                })
                .collect();
            for (tk, ok) in victims {
                if let Some((_, c)) = st.delete(&tk, &ok) {
                    changes.push(c);
                }
            }
        }
        "CustomResourceDefinition" => {
            if let Some(rt) = crate::resources::from_crd(old) {
                let victims: Vec<ObjKey> =
                    st.objects.get(&rt.key()).map(|m| m.keys().cloned().collect()).unwrap_or_default();
                for ok in victims {
                    if let Some((_, c)) = st.delete(&rt.key(), &ok) {
                        changes.push(c);
                    }
                }
            }
            st.refresh_custom_types();
        }
        _ => {}
    }
}

fn delete_collection(ctx: &Ctx<'_>) -> Res {
    let (labels, fields) = selectors(ctx)?;
    let mut changes = Vec::new();
    let mut items = Vec::new();
    {
        let mut st = lock(ctx.shared);
        let ns_filter = ctx.req.namespace.clone().filter(|_| ctx.rt.namespaced);
        let victims: Vec<ObjKey> = st
            .objects
            .get(&ctx.key())
            .map(|m| {
                m.iter()
                    .filter(|(k, _)| ns_filter.as_ref().is_none_or(|n| *n == k.0))
                    .filter(|(_, o)| labels.matches(o) && fields.matches(o))
                    .map(|(k, _)| k.clone())
                    .collect()
            })
            .unwrap_or_default();
        if !ctx.dry_run() {
            for ok in victims {
                if let Some((o, c)) = st.delete(&ctx.key(), &ok) {
                    cascade(ctx, &mut st, &o, &mut changes);
                    items.push(ctx.out(o));
                    changes.push(c);
                }
            }
        }
    }
    broadcast(ctx.shared, changes);
    Ok((
        StatusCode::OK,
        json!({"kind": format!("{}List", ctx.rt.kind), "apiVersion": ctx.api_version(),
            "metadata": {}, "items": items}),
    ))
}

// ---------------------------------------------------------------------------------------------
// Scale

fn dotted<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    path.trim_start_matches('.').split('.').try_fold(v, |cur, seg| cur.get(seg))
}

fn set_dotted(v: &mut Value, path: &str, val: Value) {
    let segs: Vec<&str> = path.trim_start_matches('.').split('.').collect();
    let mut cur = v;
    for (i, seg) in segs.iter().enumerate() {
        let Some(m) = cur.as_object_mut() else { return };
        if i + 1 == segs.len() {
            m.insert((*seg).to_owned(), val);
            return;
        }
        cur = m.entry((*seg).to_owned()).or_insert_with(|| json!({}));
    }
}

fn scale_of(ctx: &Ctx<'_>, o: &Value) -> Result<Value, ApiError> {
    let paths = ctx
        .rt
        .scale
        .clone()
        .ok_or_else(|| ApiError::not_found(&ctx.rt.group, &format!("{}/scale", ctx.rt.plural), ""))?;
    let m = o.get("metadata").cloned().unwrap_or(json!({}));
    let selector = match &paths.label_selector {
        Some(p) => dotted(o, p).cloned().unwrap_or(json!("")),
        None => json!(LabelSelector::text_of(o.get("spec").and_then(|s| s.get("selector")).unwrap_or(&Value::Null))),
    };
    let mut meta = Map::new();
    for k in ["name", "namespace", "uid", "resourceVersion", "creationTimestamp"] {
        if let Some(v) = m.get(k) {
            meta.insert(k.into(), v.clone());
        }
    }
    Ok(json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": meta,
        "spec": {"replicas": dotted(o, &paths.spec_replicas).cloned().unwrap_or(json!(0))},
        "status": {"replicas": dotted(o, &paths.status_replicas).cloned().unwrap_or(json!(0)),
                   "selector": selector},
    }))
}

fn get_scale(ctx: &Ctx<'_>) -> Res {
    let st = lock(ctx.shared);
    let o = existing(ctx, &st)?;
    Ok((StatusCode::OK, scale_of(ctx, &o)?))
}

fn update_scale(ctx: &Ctx<'_>, body: &[u8], pt: Option<PatchType>) -> Res {
    let manager = ctx.manager();
    let (stored, changes) = {
        let mut st = lock(ctx.shared);
        let old = existing(ctx, &st)?;
        let scale = scale_of(ctx, &old)?;
        let new_scale = match pt {
            None => parse_body(body)?,
            Some(PatchType::Apply) => {
                return Err(ApiError::bad_request(
                    "server-side apply on the scale subresource is not supported by this server",
                ));
            }
            Some(pt) => {
                patch::apply_patch("Scale", pt, &scale, body).map_err(|e| ApiError::bad_request(e.to_string()))?
            }
        };
        if let Some(rv) = new_scale.get("metadata").and_then(|m| m.get("resourceVersion")).and_then(Value::as_str)
            && Some(rv) != scale["metadata"].get("resourceVersion").and_then(Value::as_str)
        {
            let name = ctx.req.name.clone().unwrap_or_default();
            return Err(ApiError::conflict(&ctx.rt.group, &ctx.rt.plural, &name));
        }
        let replicas = new_scale.get("spec").and_then(|s| s.get("replicas")).cloned().unwrap_or(json!(0));
        let mut new = old.clone();
        let path = ctx.rt.scale.as_ref().map(|s| s.spec_replicas.clone()).unwrap_or_else(|| ".spec.replicas".into());
        set_dotted(&mut new, &path, replicas);
        let (stored, changes) = commit(
            ctx,
            &mut st,
            Some(&old),
            new,
            Record::Update { manager: &manager, subresource: "scale" },
            ctx.rt.status.then_some(false),
        )?;
        (scale_of(ctx, &stored)?, changes)
    };
    broadcast(ctx.shared, changes);
    Ok((StatusCode::OK, stored))
}
