//! Sending a revert to the cluster: [`K8sSource::get_object`] (one object read now) and
//! [`K8sSource::send_revert`], which sends a [`RevertPlan`] of `drift_model::remedy`.
//!
//! A revert is two requests, both with the field manager [`FIELD_MANAGER`]:
//!
//! 1. the JSON patch of the plan's removals (fields only the cluster has), each guarded by a
//!    `test` of the value read, after a `test` of `/metadata/resourceVersion`: a plan made from
//!    an old reading fails here, before anything changed;
//! 2. the server-side apply (forced) of the plan's body: Git's values of the drifted fields,
//!    with `metadata.resourceVersion` set to the version the plan was made from (or the one the
//!    removals left): the API server refuses it with a conflict (409) when anyone wrote the
//!    object in between, so a forced apply never overwrites a change it did not see.
//!    Server-side apply removes the fields its manager applied before and no longer applies, so
//!    the body also carries every field `drift-detector` already owns (operation `Apply`) with
//!    its current value ([`carry_owned_fields`]): a second revert keeps what the first one set.
//!
//! The precondition is the plan's [`RevertPlan::resource_version`]; a conflict is an error of
//! kind `Conflict`, and the caller (the runtime's remedies) reads the object again and decides
//! whether the drifted field still holds the value the revert was planned against.
//!
//! The apply is only sent to an object that exists (a forced apply would create a missing one;
//! bringing back a missing object is a sync, not a revert). A dry run sends both with
//! `dryRun=All`: nothing changes, and the answer is what the object would become.
//!
//! Plans of Secrets carry values: a plan is never logged, and the API server's message is left
//! out of the errors of a Secret.

use drift_model::remedy::{FIELD_MANAGER, RevertPlan};
use drift_model::{ErrorKind, GroupKind, Resource, ResourceKey};
use kube::api::{GetParams, Patch, PatchParams};
use serde_json::{Map, Value};

use crate::error::K8sError;
use crate::source::{K8sSource, KindInfo};

impl K8sSource {
    /// The serving information of a kind (discovery, cached), at the version of `api_version`.
    pub(crate) async fn kind_info(&self, gk: &GroupKind, api_version: &str) -> drift_model::Result<KindInfo> {
        let cached = crate::lock(&self.kinds).get(gk).cloned();
        let info = match cached {
            Some(i) => i,
            None => self
                .discover([gk])
                .await
                .remove(gk)
                .unwrap_or_else(|| {
                    Err(drift_model::CoverageStatus::NotServed { message: format!("{gk} is not served") })
                })
                .map_err(|s| match s {
                    drift_model::CoverageStatus::NotServed { message } => drift_model::Error::not_found(message),
                    drift_model::CoverageStatus::Forbidden { message } => {
                        drift_model::Error::permission_denied(message)
                    }
                    other => drift_model::Error::unavailable(format!("discovery of {gk}: {}", other.label())),
                })?,
        };
        // The apiVersion decides the URL's version: the server converts.
        let (_, version) = drift_model::split_api_version(api_version);
        Ok(KindInfo { version: version.to_owned(), ..info })
    }

    /// Reads one object now (a GET, not the watch cache), `None` when it does not exist.
    pub async fn get_object(&self, api_version: &str, key: &ResourceKey) -> drift_model::Result<Option<Resource>> {
        let info = self.kind_info(&key.group_kind(), api_version).await?;
        Ok(self.get_with(&info, key).await?)
    }

    async fn get_with(&self, info: &KindInfo, key: &ResourceKey) -> Result<Option<Resource>, K8sError> {
        let url = info.url(key.namespace.as_deref());
        let what = key.to_string();
        let got = self
            .with_retries(|| async {
                let req = kube::core::Request::new(&url)
                    .get(&key.name, &GetParams::default())
                    .map_err(|e| K8sError::Transport { verb: "get", what: what.clone(), message: e.to_string() })?;
                self.client.request::<Value>(req).await.map_err(|e| K8sError::from_kube("get", &what, e))
            })
            .await;
        match got {
            Ok(v) => Ok(Some(self.to_resource(info, v)?)),
            Err(e) if e.code() == Some(404) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Sends a plan: first the JSON patch `plan.remove` (its `test` operations fail when the
    /// object changed since it was read, and then nothing is changed), then the server-side
    /// apply of `plan.apply` with the field manager `drift-detector`, forced (the fields are
    /// taken from whoever changed them by hand; the caller has already refused fields a
    /// controller owns), its body completed with the fields `drift-detector` already owns (see
    /// the module docs). `dry_run` sends both with `dryRun=All` and changes nothing. Returns the
    /// object as the server answered the last request (for a dry run: what the object would
    /// become, the removals applied to the apply's answer).
    ///
    /// `live` is the object the plan was made from. Errors name the object and the reason: a
    /// missing object, a stale plan, a conflict (409), an invalid object (422).
    pub async fn send_revert(
        &self,
        plan: &RevertPlan,
        live: &Resource,
        dry_run: bool,
    ) -> drift_model::Result<Resource> {
        let (group, _) = drift_model::split_api_version(&plan.api_version);
        let key = ResourceKey::new(group, plan.kind.clone(), plan.namespace.as_deref(), plan.name.clone());
        if key != live.key {
            return Err(drift_model::Error::invalid_input(format!(
                "the revert plan is for {key} but the object read is {}",
                live.key
            )));
        }
        if plan.is_empty() {
            return Err(drift_model::Error::invalid_input(format!("the revert plan of {key} changes nothing")));
        }
        let secret = key.group.is_empty() && key.kind == "Secret";
        let info = self.kind_info(&key.group_kind(), &plan.api_version).await?;
        let url = info.url(key.namespace.as_deref());
        let what = key.to_string();
        let mode = if dry_run { "dry run of the revert" } else { "revert" };

        // 1. The guarded removals: a stale plan stops here, before any change.
        let mut current: Option<Value> = None;
        if !plan.remove.0.is_empty() {
            let mut params = PatchParams { field_manager: Some(FIELD_MANAGER.to_owned()), ..PatchParams::default() };
            params.dry_run = dry_run;
            let patch: Patch<()> = Patch::Json(guarded(&plan.remove, plan.resource_version.as_deref()));
            // Not retried: after a lost answer, a second try would fail its `test` operations.
            let sent = tokio::time::timeout(self.config.request_timeout, async {
                let req = kube::core::Request::new(&url).patch(&key.name, &params, &patch).map_err(|e| {
                    K8sError::Transport { verb: "json patch", what: what.clone(), message: e.to_string() }
                })?;
                self.client.request::<Value>(req).await.map_err(|e| K8sError::from_kube("json patch", &what, e))
            })
            .await
            .unwrap_or_else(|_| {
                Err(K8sError::Transport {
                    verb: "json patch",
                    what: what.clone(),
                    message: format!("timed out after {:?}", self.config.request_timeout),
                })
            });
            current = Some(sent.map_err(|e| revert_error(e, Step::Remove, mode, &what, secret))?);
            if plan.apply.is_none() {
                tracing::info!(cluster = %self.cluster, object = %what, dry_run, paths = plan.paths.len(), "revert sent");
            }
        }

        // 2. The apply of Git's values, on an object that exists.
        let Some(apply) = &plan.apply else {
            return match current {
                Some(v) => Ok(self.to_resource(&info, v)?),
                None => Err(drift_model::Error::invalid_input(format!("the revert plan of {what} changes nothing"))),
            };
        };
        let base = match &current {
            Some(v) => v.clone(),
            None => {
                match self.get_with(&info, &key).await.map_err(|e| revert_error(e, Step::Read, mode, &what, secret))? {
                    Some(r) => Value::clone(&r.object),
                    None => return Err(missing(mode, &what)),
                }
            }
        };
        let mut body = apply.clone();
        carry_owned_fields(&mut body, &base);
        // The precondition: the version the plan was made from, or, after the removals, the
        // version they left (a dry run changed nothing: the plan's).
        let precondition = match (&current, dry_run) {
            (Some(v), false) => version_of(v),
            _ => plan.resource_version.clone(),
        };
        if let (Some(rv), Some(Value::Object(metadata))) = (precondition, body.get_mut("metadata")) {
            metadata.insert("resourceVersion".into(), Value::String(rv));
        }
        let params = PatchParams::apply(FIELD_MANAGER).force();
        let params = if dry_run { params.dry_run() } else { params };
        let applied: Value = self
            .with_retries(|| async {
                let req = kube::core::Request::new(&url)
                    .patch(&key.name, &params, &Patch::Apply(&body))
                    .map_err(|e| K8sError::Transport { verb: "apply", what: what.clone(), message: e.to_string() })?;
                self.client.request::<Value>(req).await.map_err(|e| K8sError::from_kube("apply", &what, e))
            })
            .await
            .map_err(|e| revert_error(e, Step::Apply, mode, &what, secret))?;
        // Never the plan itself: a Secret's plan carries values.
        tracing::info!(cluster = %self.cluster, object = %what, dry_run, paths = plan.paths.len(), "revert sent");
        let mut out = applied;
        if dry_run && current.is_some() {
            // The dry-run apply ran on the stored object, which still has the fields the
            // removals take away: the outcome is the apply's answer without them. Their `test`s
            // passed on the server; a field the apply already dropped (one only drift-detector
            // had applied) is simply gone.
            remove_present(&mut out, &plan.remove);
        }
        Ok(self.to_resource(&info, out)?)
    }
}

/// The object's `metadata.resourceVersion`.
fn version_of(object: &Value) -> Option<String> {
    object.pointer("/metadata/resourceVersion").and_then(Value::as_str).filter(|v| !v.is_empty()).map(str::to_owned)
}

/// The removals preceded by a `test` of the object's `resourceVersion`, when the plan has one:
/// the JSON patch applies only to the object the plan was made from.
fn guarded(remove: &json_patch::Patch, resource_version: Option<&str>) -> json_patch::Patch {
    let Some(rv) = resource_version else { return remove.clone() };
    let mut ops = Vec::with_capacity(remove.0.len() + 1);
    ops.push(json_patch::PatchOperation::Test(json_patch::TestOperation {
        path: json_patch::jsonptr::PointerBuf::from_tokens(["metadata", "resourceVersion"]),
        value: Value::String(rv.to_owned()),
    }));
    ops.extend(remove.0.iter().cloned());
    json_patch::Patch(ops)
}

/// Applies the `remove` operations of a patch whose target is still there, in order, and skips
/// its `test`s (the server checked them on the stored object).
fn remove_present(object: &mut Value, patch: &json_patch::Patch) {
    for op in &patch.0 {
        if let json_patch::PatchOperation::Remove(r) = op
            && object.pointer(r.path.as_str()).is_some()
        {
            let single = json_patch::Patch(vec![op.clone()]);
            // The target exists: the removal cannot fail.
            let _ = json_patch::patch(object, &single);
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Read,
    Remove,
    Apply,
}

fn missing(mode: &str, what: &str) -> drift_model::Error {
    drift_model::Error::not_found(format!(
        "{mode} of {what}: the object does not exist in the cluster (bringing back a missing object is a sync, not a revert)"
    ))
}

/// The error of a failed revert request, as a sentence naming the object and the reason. The
/// server's message is left out for a Secret (it may quote a value).
fn revert_error(e: K8sError, step: Step, mode: &str, what: &str, secret: bool) -> drift_model::Error {
    let K8sError::Api { code, reason, message, .. } = &e else {
        return e.into();
    };
    if *code == 404 {
        return missing(mode, what);
    }
    let detail = if secret {
        "the server's message is not shown for a Secret".to_owned()
    } else {
        format!("the server says: {message}")
    };
    match (step, *code) {
        (Step::Remove, 422 | 409) => drift_model::Error::conflict(format!(
            "{mode} of {what} refused (HTTP {code} {reason}): the object changed since it was read, a `test` operation \
             of the removals failed and nothing was changed; read the object again and plan anew ({detail})"
        )),
        (Step::Apply, 409) => drift_model::Error::conflict(format!(
            "{mode} of {what} refused (HTTP 409 {reason}): the object changed since it was read (its resourceVersion is \
             not the one the plan was made from) and nothing was changed; read the object again and plan anew ({detail})"
        )),
        (_, 422) => drift_model::Error::invalid_input(format!(
            "{mode} of {what} refused (HTTP 422 {reason}): the API server finds the result invalid ({detail})"
        )),
        _ => {
            let temporary = e.is_retryable();
            let kind = match code {
                401 | 403 => ErrorKind::PermissionDenied,
                409 => ErrorKind::Conflict,
                400 => ErrorKind::InvalidInput,
                _ => ErrorKind::Unavailable,
            };
            drift_model::Error::new(kind, format!("{mode} of {what} failed (HTTP {code} {reason}): {detail}"))
                .temporary(temporary)
        }
    }
}

/// Adds to a server-side apply body every field that `drift-detector` owns in `live` through
/// an `Apply` (its `metadata.managedFields`, FieldsV1), with the value `live` has. The body's
/// own values win. Without this, applying a body that lacks a field the manager applied before
/// would remove that field from the object.
pub fn carry_owned_fields(body: &mut Value, live: &Value) {
    let Some(entries) = live.pointer("/metadata/managedFields").and_then(Value::as_array) else { return };
    for entry in entries {
        let is_ours = entry.get("manager").and_then(Value::as_str) == Some(FIELD_MANAGER)
            && entry.get("operation").and_then(Value::as_str) == Some("Apply")
            && entry.get("subresource").and_then(Value::as_str).is_none_or(str::is_empty);
        if let (true, Some(Value::Object(fields))) = (is_ours, entry.get("fieldsV1")) {
            carry(body, live, fields);
        }
    }
}

/// Whether a FieldsV1 node means "the whole value" (no children but `.`).
fn is_leaf(fields: &Value) -> bool {
    fields.as_object().is_none_or(|m| m.keys().all(|k| k == "."))
}

/// Walks one FieldsV1 node over the live value and the body value at the same place.
fn carry(body: &mut Value, live: &Value, fields: &Map<String, Value>) {
    for (k, sub) in fields {
        if let Some(name) = k.strip_prefix("f:") {
            let (Some(lv), Value::Object(bm)) = (live.get(name), &mut *body) else { continue };
            if lv.is_null() {
                continue;
            }
            if is_leaf(sub) {
                bm.entry(name.to_owned()).or_insert_with(|| lv.clone());
                continue;
            }
            let Value::Object(children) = sub else { continue };
            let created = !bm.contains_key(name);
            let slot = bm.entry(name.to_owned()).or_insert_with(|| match lv {
                Value::Array(_) => Value::Array(Vec::new()),
                _ => Value::Object(Map::new()),
            });
            carry(slot, lv, children);
            if created && (slot.as_object().is_some_and(Map::is_empty) || slot.as_array().is_some_and(Vec::is_empty)) {
                bm.remove(name);
            }
        } else if let Some(key) = k.strip_prefix("k:") {
            let Ok(Value::Object(key)) = serde_json::from_str::<Value>(key) else { continue };
            let (Value::Array(litems), Value::Array(bitems)) = (live, &mut *body) else { continue };
            let Some(litem) = litems.iter().find(|it| item_has_key(it, &key)) else { continue };
            let pos = match bitems.iter().position(|it| item_has_key(it, &key)) {
                Some(p) => p,
                None => {
                    if is_leaf(sub) {
                        bitems.push(litem.clone());
                        continue;
                    }
                    bitems.push(Value::Object(key.clone()));
                    bitems.len() - 1
                }
            };
            if let Value::Object(children) = sub {
                carry(&mut bitems[pos], litem, children);
            }
        } else if let Some(v) = k.strip_prefix("v:") {
            let Ok(v) = serde_json::from_str::<Value>(v) else { continue };
            let (Value::Array(litems), Value::Array(bitems)) = (live, &mut *body) else { continue };
            if litems.contains(&v) && !bitems.contains(&v) {
                bitems.push(v);
            }
        }
        // `.` is the node itself; `i:` (positions) does not occur in applied field sets.
    }
}

/// Whether a list item has every field of a FieldsV1 key (`k:{...}`), compared as text so that
/// `8080` and `"8080"` agree.
fn item_has_key(item: &Value, key: &Map<String, Value>) -> bool {
    key.iter().all(|(k, want)| {
        item.get(k).is_some_and(|got| {
            got == want
                || drift_model::path::scalar_text(got).is_some_and(|g| Some(g) == drift_model::path::scalar_text(want))
        })
    })
}

/// The detector's cluster writer: reverts read and write through this source's client.
#[async_trait::async_trait]
impl drift_model::remedy::ClusterWriter for K8sSource {
    async fn get(&self, api_version: &str, key: &ResourceKey) -> drift_model::Result<Option<Resource>> {
        self.get_object(api_version, key).await
    }
    async fn send(&self, plan: &RevertPlan, live: &Resource, dry_run: bool) -> drift_model::Result<Resource> {
        self.send_revert(plan, live, dry_run).await
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn live() -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "shop", "labels": {"app": "web", "tier": "front"},
            "finalizers": ["a", "b"],
            "managedFields": [
                {"manager": "drift-detector", "operation": "Apply", "apiVersion": "apps/v1",
                 "fieldsV1": {"f:metadata": {"f:labels": {"f:tier": {}}, "f:finalizers": {"v:\"b\"": {}}},
                    "f:spec": {"f:replicas": {}, "f:template": {"f:spec": {"f:containers": {
                        "k:{\"name\":\"web\"}": {".": {}, "f:name": {}, "f:image": {},
                            "f:ports": {"k:{\"containerPort\":8080,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}, "f:protocol": {}}}},
                        "k:{\"name\":\"gone\"}": {".": {}, "f:name": {}}}}}}}},
                {"manager": "drift-detector", "operation": "Update", "apiVersion": "apps/v1",
                 "fieldsV1": {"f:metadata": {"f:labels": {"f:app": {}}}}},
                {"manager": "kubectl", "operation": "Apply", "apiVersion": "apps/v1",
                 "fieldsV1": {"f:spec": {"f:paused": {}}}}
            ]},
        "spec": {"replicas": 4, "paused": false, "template": {"spec": {"containers": [
            {"name": "side", "image": "proxy:1"},
            {"name": "web", "image": "web:2", "ports": [{"containerPort": 8080, "protocol": "TCP"}]}
        ]}}}})
    }

    #[test]
    fn the_fields_drift_detector_applied_before_are_carried_with_their_live_values_and_git_wins() {
        let mut body = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {"template": {"spec": {"containers": [{"name": "web", "image": "web:1"}]}}}});
        carry_owned_fields(&mut body, &live());
        assert_eq!(
            body,
            json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "web", "namespace": "shop", "labels": {"tier": "front"}, "finalizers": ["b"]},
                "spec": {"replicas": 4, "template": {"spec": {"containers": [{"name": "web", "image": "web:1",
                    "ports": [{"containerPort": 8080, "protocol": "TCP"}]}]}}}})
        );
    }

    #[test]
    fn nothing_is_carried_without_an_apply_entry_of_drift_detector() {
        let mut obj = live();
        obj["metadata"]["managedFields"].as_array_mut().unwrap().remove(0);
        let body = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "spec": {"replicas": 3}});
        let mut carried = body.clone();
        carry_owned_fields(&mut carried, &obj);
        assert_eq!(carried, body);
    }
}
