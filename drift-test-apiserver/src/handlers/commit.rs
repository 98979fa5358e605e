//! What every write does before it stores: apiVersion, kind, namespace and the server-kept
//! metadata, the status rules of the main resource and the status subresource, CRD schema
//! pruning and defaults, the kind's defaults, managedFields, mutating admission, generation,
//! and finalizers that hold a deletion.

use std::sync::Arc;

use serde_json::{Value, json};

use super::{Ctx, meta, name_of, now};
use crate::apply::{self, Slot};
use crate::status::ApiError;
use crate::store::{Change, State};

/// How a write is recorded in managedFields.
pub(super) enum Record<'a> {
    /// An Update by this manager with this subresource.
    Update { manager: &'a str, subresource: &'a str },
    /// Already recorded (server-side apply did it).
    Done,
}

/// Finish a write: metadata, defaults, generation, managedFields, store. `old` is the stored
/// object on updates. Returns the stored object and whether it is new.
pub(super) fn commit(
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
    } else if let Some(def) = crate::openapi::schemas::schemas().kind(&ctx.rt.group, &ctx.req.version, &ctx.rt.kind) {
        // Decoding into the API server's types drops the fields they do not have.
        crate::validation::prune(def, &mut new);
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
    // The API server's own admission plugins for Pods, on create, before webhooks.
    if ctx.rt.kind == "Pod" && old.is_none() && ctx.req.subresource.is_none() {
        admit_pod(st, &ns, &name, &mut new)?;
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

pub(super) fn check_namespace(ctx: &Ctx<'_>, st: &State, body_ns: Option<&str>) -> Result<(), ApiError> {
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

pub(super) fn check_kind(ctx: &Ctx<'_>, body: &Value) -> Result<(), ApiError> {
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

/// The ServiceAccount, Priority and DefaultTolerationSeconds admission plugins on a new Pod
/// ([`crate::defaults::admit_pod`]). The `default` ServiceAccount is taken to exist in every
/// namespace, as the controller that creates it would have; another one must be stored.
fn admit_pod(st: &State, ns: &str, name: &str, new: &mut Value) -> Result<(), ApiError> {
    let account_name = new
        .get("spec")
        .and_then(|s| s.get("serviceAccountName"))
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .unwrap_or("default")
        .to_owned();
    let account = st.get(&(String::new(), "serviceaccounts".to_owned()), &(ns.to_owned(), account_name.clone()));
    let forbidden = |reason: String| {
        let mut e = ApiError::new(403, "Forbidden", format!("pods \"{name}\" is forbidden: {reason}"));
        e.details = Some(Box::new(json!({"name": name, "kind": "pods"})));
        e
    };
    if account.is_none() && account_name != "default" {
        return Err(forbidden(format!(
            "error looking up service account {ns}/{account_name}: serviceaccount \"{account_name}\" not found"
        )));
    }
    let alphabet = b"bcdfghjklmnpqrstvwxz2456789";
    let suffix: String = uuid::Uuid::new_v4()
        .as_bytes()
        .iter()
        .take(5)
        .map(|b| alphabet[usize::from(*b) % alphabet.len()] as char)
        .collect();
    let o = new.as_object_mut().ok_or_else(|| ApiError::bad_request("not an object"))?;
    crate::defaults::admit_pod(o, account, &suffix).map_err(forbidden)
}
