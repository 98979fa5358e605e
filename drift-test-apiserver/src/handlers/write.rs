//! Writes of whole objects: create (with `generateName`), update (with the optimistic
//! concurrency of `resourceVersion`), delete (with preconditions and finalizers, and the
//! cascades of Namespace and CRD deletes) and deletecollection.

use std::sync::Arc;

use axum::http::StatusCode;
use serde_json::{Value, json};

use super::commit::{Record, check_kind, check_namespace, commit};
use super::{Ctx, Res, broadcast, existing, lock, meta, name_of, now, parse_body, scope_of, selectors, validate_body};
use crate::status::{self, ApiError};
use crate::store::{Change, ObjKey, State, TypeKey};

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
    validate_body(ctx, body, &obj)?;
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

pub(super) fn update(ctx: &Ctx<'_>, body: &[u8]) -> Res {
    let mut obj = parse_body(body)?;
    if !obj.is_object() {
        return Err(ApiError::bad_request("the object is not a JSON object"));
    }
    check_kind(ctx, &obj)?;
    validate_body(ctx, body, &obj)?;
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

pub(super) fn delete(ctx: &Ctx<'_>, body: &[u8]) -> Res {
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

pub(super) fn delete_collection(ctx: &Ctx<'_>) -> Res {
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
