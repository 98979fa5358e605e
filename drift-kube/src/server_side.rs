//! Server-side mode: ask the API server what an object would look like once applied (a
//! server-side apply dry run, `PATCH ...?dryRun=All&fieldManager=...&force=true` with
//! `application/apply-patch+yaml`), so that defaults of custom resources and mutating webhooks
//! are not mistaken for drift.
//!
//! Semantics (see docs/sources.md, "Kubernetes live source"):
//!
//! - the client-side engine runs first and stays the reference: its drifts are the candidates;
//! - for each object with candidate drifts on fields Git sets, the predicted object is compared
//!   with the live one by the same engine; a candidate on a field Git sets is kept only when the
//!   prediction also differs from the live object there (at that path, above or below it);
//! - candidates on fields Git does not set (a field added by hand, a field Git removed) and
//!   missing objects are kept as they are: a dry run cannot speak for them;
//! - when the dry run fails for an object (403, a webhook that refuses, a conflict, a timeout),
//!   its candidates are kept and a non-fatal warning says so.

use drift_model::compare::Comparator;
use drift_model::{DriftType, ErrorKind, LiveSnapshot, Resource, ScanReport, SourceWarning, Summary};
use kube::api::{Patch, PatchParams};
use serde_json::Value;

use crate::error::K8sError;
use crate::source::K8sSource;

/// Whether a client-side drift at `path` is confirmed by the differences between the predicted
/// and the live object (`server`): one of them is at the same path, inside it or above it.
pub fn confirmed_by_prediction(path: &str, server: &[String]) -> bool {
    let below = |outer: &str, inner: &str| {
        inner.strip_prefix(outer).is_some_and(|rest| rest.starts_with('.') || rest.starts_with('['))
    };
    server.iter().any(|s| s == path || below(path, s) || below(s, path))
}

impl K8sSource {
    /// The object the API server predicts after applying `desired` (server-side apply, dry run,
    /// forced, with [`crate::K8sConfig::field_manager`]). Nothing is written.
    pub async fn predict(&self, desired: &Resource) -> drift_model::Result<Resource> {
        let info = self.kind_info(&desired.key.group_kind(), &desired.api_version).await?;
        let mut body = Value::clone(&desired.object);
        if let Some(meta) = body.get_mut("metadata").and_then(Value::as_object_mut) {
            for k in ["resourceVersion", "managedFields", "uid", "creationTimestamp", "generation"] {
                meta.remove(k);
            }
            match (&desired.key.namespace, info.namespaced) {
                (Some(ns), true) => {
                    meta.insert("namespace".into(), Value::String(ns.clone()));
                }
                _ => {
                    meta.remove("namespace");
                }
            }
        }
        if let Some(o) = body.as_object_mut() {
            o.remove("status");
        }
        let url = info.url(desired.key.namespace.as_deref());
        let what = desired.key.to_string();
        let params = PatchParams::apply(&self.config.field_manager).force().dry_run();
        let predicted: Value = self
            .with_retries(|| async {
                let req =
                    kube::core::Request::new(&url).patch(&desired.key.name, &params, &Patch::Apply(&body)).map_err(
                        |e| K8sError::Transport { verb: "dry-run apply", what: what.clone(), message: e.to_string() },
                    )?;
                self.client.request::<Value>(req).await.map_err(|e| K8sError::from_kube("dry-run apply", &what, e))
            })
            .await?;
        Ok(self.to_resource(&info, predicted)?)
    }

    /// Reviews the drifts of a report with server-side predictions (see the module docs): drops
    /// the candidates the API server's defaulting or webhooks explain, keeps the others, and adds
    /// a non-fatal warning for each object whose dry run failed. `desired` are the objects the
    /// report compared (after namespace defaulting), `live` the snapshot they were compared with.
    pub async fn review_server_side(
        &self,
        comparator: &dyn Comparator,
        desired: &[Resource],
        live: &LiveSnapshot,
        report: &mut ScanReport,
    ) {
        let mut keys: Vec<drift_model::ResourceKey> = report
            .drifts
            .iter()
            .filter(|d| d.drift_type != DriftType::MissingResource && d.git_value.is_some())
            .map(|d| {
                drift_model::ResourceKey::new(
                    d.api_group.clone(),
                    d.resource.kind.clone(),
                    d.resource.namespace.as_deref(),
                    d.resource.name.clone(),
                )
            })
            .collect();
        keys.sort();
        keys.dedup();
        for key in keys {
            let Some(d) = desired.iter().find(|r| r.key == key) else { continue };
            let Some(l) = live.resources.iter().find(|r| r.key == key) else { continue };
            match self.predict(d).await {
                Ok(predicted) => {
                    let server: Vec<String> =
                        comparator.compare(&predicted, Some(l)).into_iter().map(|x| x.path).collect();
                    report.drifts.retain(|x| {
                        let same = x.api_group == key.group
                            && x.resource.kind == key.kind
                            && x.resource.namespace == key.namespace
                            && x.resource.name == key.name;
                        !same
                            || x.git_value.is_none()
                            || x.drift_type == DriftType::MissingResource
                            || confirmed_by_prediction(&x.path, &server)
                    });
                }
                Err(e) => {
                    tracing::warn!(cluster = %self.cluster, object = %key, error = %e, "server-side dry run failed");
                    report.warnings.push(SourceWarning {
                        kind: ErrorKind::Unavailable,
                        message: format!("server-side dry run of {key} failed; the client-side result is kept: {e}"),
                        path: d.provenance.path.clone(),
                        document: d.provenance.document,
                        line: None,
                        fatal: false,
                    });
                }
            }
        }
        report.summary = Summary::of(&report.drifts, report.summary.resources_compared, report.warnings.len());
    }
}

#[cfg(test)]
mod tests {
    use super::confirmed_by_prediction;

    #[test]
    fn a_drift_is_kept_only_where_the_prediction_differs_too() {
        let server = vec!["spec.replicas".to_owned(), "spec.template.spec.containers[name=web].image".to_owned()];
        assert!(confirmed_by_prediction("spec.replicas", &server));
        assert!(confirmed_by_prediction("spec.template.spec.containers[name=web]", &server), "above");
        assert!(confirmed_by_prediction("spec.template.spec.containers[name=web].image.x", &server), "below");
        // A default the API server fills in: Git and live differ, the prediction and live do not.
        assert!(!confirmed_by_prediction("spec.template.spec.containers[name=web].imagePullPolicy", &server));
        assert!(!confirmed_by_prediction("spec.replicasX", &server), "a prefix of a name is not a parent");
        assert!(!confirmed_by_prediction("spec.replicas", &[]));
    }
}
