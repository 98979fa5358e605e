//! Reads: list (label and field selectors, `limit`/`continue` with `remainingItemCount`),
//! watch (from a resourceVersion, with initial events, 410 Gone and injected drops) and get.

use std::collections::BTreeMap;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::{Ctx, Res, lock, parse_rv, selectors};
use crate::status::ApiError;
use crate::store::{ObjKey, State, TypeKey};
use crate::watch::{self, WatchSpec, WatchStart};

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

pub(super) fn list(ctx: &Ctx<'_>) -> Res {
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

pub(super) fn watch(ctx: &Ctx<'_>) -> Response {
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
    let mut start = WatchStart {
        initial: Vec::new(),
        initial_end_bookmark: false,
        rv: st.rv,
        rx,
        gone: None,
        drop: ctx.shared.drop_watches.subscribe(),
    };
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

pub(super) fn get(ctx: &Ctx<'_>) -> Res {
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
