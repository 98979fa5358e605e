//! Patches: JSON patch, merge patch and strategic merge patch as Update operations, and
//! server-side apply (`application/apply-patch+yaml`) with its field ownership and conflicts.
//! A `metadata.resourceVersion` in either is a precondition: another stored version is a 409
//! Conflict, as the API server's optimistic concurrency answers.

use axum::http::StatusCode;
use serde_json::{Value, json};

use super::commit::{Record, check_kind, check_namespace, commit};
use super::{
    Ctx, FieldSchema, Res, broadcast, content_type, custom_order, directive, existing, field_schema, lock, meta,
    name_of, now, parse_body, report, scope_of, unsupported_patch,
};
use crate::apply::{self, Slot};
use crate::patch::{self, PatchType};
use crate::status::{self, ApiError};
use crate::validation::{self as fv, Directive, Finding};

pub(super) fn patch_object(ctx: &Ctx<'_>, body: &[u8]) -> Res {
    let ct = content_type(&ctx.headers);
    let pt = PatchType::from_content_type(&ct).ok_or_else(|| unsupported_patch(&ct))?;
    if pt == PatchType::Apply {
        return server_side_apply(ctx, body);
    }
    let manager = ctx.manager();
    let sub = ctx.req.subresource.clone().unwrap_or_default();
    let name = ctx.req.name.clone().unwrap_or_default();
    let d = directive(ctx)?;
    let schema = if d == Directive::Ignore { None } else { field_schema(ctx) };
    let (stored, changes) = {
        let mut st = lock(ctx.shared);
        let old = existing(ctx, &st)?;
        let mut new = patch::apply_patch(&ctx.rt.kind, pt, &old, body).map_err(|e| match e {
            patch::PatchError::Invalid(m) => ApiError::bad_request(m),
            patch::PatchError::Failed(m) => ApiError::new(422, "Invalid", m),
        })?;
        if let Some(schema) = &schema {
            validate_patched(ctx, d, schema, pt, body, &new)?;
        }
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
    let d = directive(ctx)?;
    let mut applied = parse_body(body)?;
    if !applied.is_object() {
        return Err(ApiError::bad_request("the applied configuration is not an object"));
    }
    check_kind(ctx, &applied)?;
    // Server-side apply converts the configuration to its typed form whatever the
    // directive: a field the schema does not know is an error, not dropped.
    if let Some(schema) = field_schema(ctx) {
        let unknown = fv::apply_unknown(schema.root(), &applied);
        if !unknown.is_empty() {
            return Err(typed_patch_error(ctx, &applied, &unknown));
        }
    }
    if !ctx.rt.custom {
        crate::quantity::canonicalize_known_fields(&mut applied);
    }
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
        // A resourceVersion in the applied configuration is a precondition, as in the API
        // server's optimistic concurrency: another version is a conflict, nothing is written.
        // It is not a field anyone owns.
        let want_rv = applied
            .get_mut("metadata")
            .and_then(Value::as_object_mut)
            .and_then(|m| m.remove("resourceVersion"))
            .filter(|v| v.as_str().is_some_and(|s| !s.is_empty()));
        match (&want_rv, &old) {
            (Some(want), Some(old)) if old.get("metadata").and_then(|m| m.get("resourceVersion")) != Some(want) => {
                return Err(ApiError::conflict(&ctx.rt.group, &ctx.rt.plural, &name));
            }
            // A precondition on an object that does not exist: nothing to update, none created.
            (Some(_), None) => return Err(ApiError::not_found(&ctx.rt.group, &ctx.rt.plural, &name)),
            _ => {}
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
        // Then, with Strict or Warn, the configuration is read again as strict YAML: only keys
        // given twice are found there.
        if d != Directive::Ignore
            && let Some(node) = fv::parse_ordered(body)
        {
            let lines: Vec<String> = fv::duplicates(&node).iter().filter_map(Finding::yaml_message).collect();
            if !lines.is_empty() {
                let text = lines.join("\n  ");
                report(ctx, d, lines, |_| {
                    ApiError::bad_request(format!(
                        "error strict decoding YAML: error converting YAML to JSON: yaml: unmarshal errors:\n  {text}"
                    ))
                })?;
            }
        }
        let (stored, changes) = commit(ctx, &mut st, old.as_ref(), merged, Record::Done, scope)?;
        (stored, changes, created)
    };
    broadcast(ctx.shared, changes);
    let code = if created { StatusCode::CREATED } else { StatusCode::OK };
    Ok((code, ctx.out(stored)))
}

/// Field validation of a JSON, merge or strategic merge patch, as the API server does it: keys
/// given twice in the patch (for a JSON patch, in its operations), then the fields of the
/// patched object its schema does not know. Refused with `Strict` as 422 Invalid on the field
/// `patch`, whose value is the patched object (the patch itself, printed as a Go map, for a
/// strategic merge patch).
fn validate_patched(
    ctx: &Ctx<'_>,
    d: Directive,
    schema: &FieldSchema,
    pt: PatchType,
    body: &[u8],
    patched: &Value,
) -> Result<(), ApiError> {
    let node = fv::parse_ordered(body);
    let mut messages: Vec<String> = match (&node, pt) {
        (Some(n), PatchType::Json) => fv::json_patch_ops(n),
        (Some(n), _) => fv::duplicates(n).iter().map(Finding::message).collect(),
        (None, _) => vec![],
    };
    let mut unknown = fv::unknown_in_value(schema.root(), patched);
    if ctx.rt.custom {
        unknown = custom_order(unknown);
    }
    messages.extend(unknown.iter().map(Finding::message));
    report(ctx, d, messages, |joined| {
        let value = match pt {
            PatchType::Strategic => fv::go_map(&serde_json::from_slice::<Value>(body).unwrap_or(Value::Null)),
            _ => patched.to_string(),
        };
        let quoted = serde_json::to_string(&value).unwrap_or_default();
        let detail = format!("Invalid value: {quoted}: strict decoding error: {joined}");
        let mut e = ApiError::new(422, "Invalid", format!(" \"\" is invalid: patch: {detail}"));
        e.details =
            Some(Box::new(json!({"causes": [{"reason": "FieldValueInvalid", "message": detail, "field": "patch"}]})));
        e
    })
}

/// The error of server-side apply for fields its typed conversion cannot place: 500 without a
/// reason, as the API server answers errors it does not classify.
fn typed_patch_error(ctx: &Ctx<'_>, applied: &Value, unknown: &[String]) -> ApiError {
    let meta = applied.get("metadata");
    let ns = meta.and_then(|m| m.get("namespace")).and_then(Value::as_str).unwrap_or("");
    let name = meta.and_then(|m| m.get("name")).and_then(Value::as_str).unwrap_or("");
    let api_version = applied.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let kind = applied.get("kind").and_then(Value::as_str).unwrap_or(&ctx.rt.kind);
    let errors = if unknown.len() == 1 { unknown[0].clone() } else { format!("errors:\n  {}", unknown.join("\n  ")) };
    ApiError::new(
        500,
        "",
        format!("failed to create typed patch object ({ns}/{name}; {group}/{version}, Kind={kind}): {errors}"),
    )
}
