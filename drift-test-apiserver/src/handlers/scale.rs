//! The scale subresource (autoscaling/v1 Scale): read, replaced or patched, for the kinds
//! (and custom resources) that declare it.

use axum::http::StatusCode;
use serde_json::{Map, Value, json};

use super::commit::{Record, commit};
use super::{Ctx, Res, broadcast, existing, lock, parse_body};
use crate::patch::{self, PatchType};
use crate::selectors::LabelSelector;
use crate::status::ApiError;

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

pub(super) fn get_scale(ctx: &Ctx<'_>) -> Res {
    let st = lock(ctx.shared);
    let o = existing(ctx, &st)?;
    Ok((StatusCode::OK, scale_of(ctx, &o)?))
}

pub(super) fn update_scale(ctx: &Ctx<'_>, body: &[u8], pt: Option<PatchType>) -> Res {
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
