//! `POST /alertmanager/webhook`: drift beside the alert. Alertmanager's webhook receiver posts
//! its payload (version 4) here; for each firing alert whose labels name a namespace (and
//! perhaps a workload: `deployment`, `statefulset`, `daemonset`, `pod`; and a `cluster`), the
//! answer lists the drifts of that scope seen in the window before the alert started, and the
//! hand changes among them (a change by hand, or by a manager on no list, made in that
//! window). With the store's outbox, the open drifts of each alert are also sent to the
//! notifiers: one `reminder` event per drift in a batch of the alert, so every notifier whose
//! own route takes them gets one message (docs/notifications.md, "Drift beside the alert").

use std::time::Duration;

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use chrono::{DateTime, Utc};
use drift_model::outbox::{DriftEvent, EventKind, event_id};
use drift_model::sink::{DriftFilter, DriftStatus, PageRequest, StoredDrift};
use drift_model::{Classification, Error};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::auth::Actor;
use crate::error::ApiError;
use crate::handlers::{ApiResult, within};
use crate::query;
use crate::state::ApiState;

/// How the Alertmanager receiver answers (`alerts:` of the configuration).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AlertSettings {
    /// How far before an alert's start drifts and hand changes are looked for (default 1h).
    pub window: Duration,
    /// Whether the drifts of an alert are also sent to the notifiers (default true).
    pub notify: bool,
}

impl Default for AlertSettings {
    fn default() -> Self {
        AlertSettings { window: Duration::from_secs(3600), notify: true }
    }
}

impl AlertSettings {
    /// An invalid-input error unless `window` is between 1s and 30 days.
    pub fn validate(&self) -> drift_model::Result<()> {
        if self.window < Duration::from_secs(1) || self.window > Duration::from_secs(30 * 86400) {
            return Err(Error::invalid_input("`window` must be between 1s and 30d"));
        }
        Ok(())
    }
}

/// One alert of Alertmanager's webhook payload.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Alert {
    status: String,
    labels: std::collections::BTreeMap<String, String>,
    starts_at: DateTime<Utc>,
    #[serde(default)]
    fingerprint: String,
}

/// Alertmanager's webhook payload (version 4), the fields read.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Payload {
    version: String,
    #[serde(default)]
    receiver: String,
    #[serde(default)]
    status: String,
    alerts: Vec<Alert>,
}

/// What an alert is about, from its labels.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Scope {
    /// `cluster` label, when given.
    pub cluster: Option<String>,
    /// `namespace` label.
    pub namespace: String,
    /// The workload's kind (`Deployment`, `StatefulSet`, `DaemonSet`, `Pod`), when a label
    /// names one.
    pub kind: Option<String>,
    /// The workload's name.
    pub name: Option<String>,
}

impl Scope {
    fn of(labels: &std::collections::BTreeMap<String, String>) -> Option<Scope> {
        let namespace = labels.get("namespace").filter(|n| !n.is_empty())?.clone();
        let workload =
            [("deployment", "Deployment"), ("statefulset", "StatefulSet"), ("daemonset", "DaemonSet"), ("pod", "Pod")]
                .into_iter()
                .find_map(|(label, kind)| {
                    labels.get(label).filter(|v| !v.is_empty()).map(|v| (kind.to_owned(), v.clone()))
                });
        Some(Scope {
            cluster: labels.get("cluster").filter(|c| !c.is_empty()).cloned(),
            namespace,
            kind: workload.as_ref().map(|w| w.0.clone()),
            name: workload.map(|w| w.1),
        })
    }

    /// Whether a drift is of the alert's workload: the object it names, or for a Pod, the
    /// Pod itself or a workload whose name, and a `-`, begin the Pod's name (a Deployment's
    /// Pods are `NAME-<hash>-<id>`).
    pub fn is_workload(&self, d: &StoredDrift) -> bool {
        match (self.kind.as_deref(), self.name.as_deref()) {
            (Some("Pod"), Some(pod)) => {
                (d.resource_kind == "Pod" && d.resource_name == pod)
                    || (matches!(
                        d.resource_kind.as_str(),
                        "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet" | "Job"
                    ) && pod.strip_prefix(d.resource_name.as_str()).is_some_and(|rest| rest.starts_with('-')))
            }
            (Some(kind), Some(name)) => d.resource_kind == kind && d.resource_name == name,
            _ => false,
        }
    }
}

/// Whether the drift's change was made by hand (or by a manager on no list) within the window.
fn hand_change(d: &StoredDrift, from: DateTime<Utc>, to: DateTime<Utc>) -> bool {
    matches!(d.classification, Classification::ManualChange | Classification::Unknown)
        && d.changed_at.is_some_and(|t| t >= from && t <= to)
}

/// Drifts listed per alert, at most.
const MAX_DRIFTS: usize = 1000;

pub(crate) async fn alertmanager_webhook(
    State(state): State<ApiState>,
    Actor(actor): Actor,
    RawQuery(raw): RawQuery,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    query::pairs(raw.as_deref(), &[])?;
    let body = body.map_err(|e| ApiError::new(e.status(), e.body_text()))?;
    let payload: Payload = serde_json::from_slice(&body).map_err(|e| {
        ApiError::bad_request(format!("the body must be Alertmanager's webhook payload (version 4): {e}"))
    })?;
    if payload.version != "4" {
        return Err(ApiError::bad_request(format!(
            "Alertmanager webhook payload version {:?}; this receiver reads version 4",
            payload.version
        )));
    }
    let settings = state.alerts;
    let window = chrono::Duration::from_std(settings.window).unwrap_or(chrono::Duration::hours(1));
    let mut answered = Vec::new();
    let mut skipped = Vec::new();
    let mut events = Vec::new();
    for alert in &payload.alerts {
        let name = alert.labels.get("alertname").cloned().unwrap_or_default();
        if alert.status != "firing" {
            skipped.push(json!({"fingerprint": alert.fingerprint, "alertname": name, "reason": "not firing"}));
            continue;
        }
        let Some(scope) = Scope::of(&alert.labels) else {
            skipped.push(json!({"fingerprint": alert.fingerprint, "alertname": name, "reason": "no namespace label"}));
            continue;
        };
        let Some(from) = alert.starts_at.checked_sub_signed(window) else {
            skipped
                .push(json!({"fingerprint": alert.fingerprint, "alertname": name, "reason": "startsAt out of range"}));
            continue;
        };
        let to = alert.starts_at;
        let filter = DriftFilter {
            namespace: Some(scope.namespace.clone()),
            cluster: scope.cluster.clone(),
            since: Some(from),
            ..DriftFilter::default()
        };
        let mut drifts: Vec<StoredDrift> = Vec::new();
        let mut page = PageRequest { limit: PageRequest::MAX_LIMIT, after: None };
        loop {
            let got = within(&state, state.store.list(&filter, page)).await.map_err(|e| ApiError::from_store(&e))?;
            drifts.extend(got.items.into_iter().filter(|d| {
                // Seen in the window and not gone before it started; not detected after the alert.
                d.detected_at <= to && d.resolved_at.is_none_or(|r| r >= from)
            }));
            match got.next {
                Some(next) if drifts.len() < MAX_DRIFTS => page.after = Some(next),
                _ => break,
            }
        }
        drifts.truncate(MAX_DRIFTS);
        let workload: Vec<i64> = drifts.iter().filter(|d| scope.is_workload(d)).map(|d| d.id).collect();
        let hand: Vec<i64> = drifts.iter().filter(|d| hand_change(d, from, to)).map(|d| d.id).collect();
        let batch = format!("alert:{}:{}", alert.fingerprint, alert.starts_at.timestamp());
        let mut notify = 0;
        if settings.notify && state.act.is_some() {
            for d in drifts.iter().filter(|d| d.status == DriftStatus::Open) {
                let mut e = DriftEvent::of_drift(EventKind::Reminder, &batch, alert.starts_at, d.clone());
                e.id = event_id(&batch, &d.id.to_string(), EventKind::Reminder);
                events.push(e);
                notify += 1;
            }
        }
        answered.push(json!({
            "fingerprint": alert.fingerprint,
            "alertname": name,
            "starts_at": alert.starts_at,
            "scope": scope,
            "window": {"from": from, "to": to},
            "drifts": drifts,
            "workload_drifts": workload,
            "hand_changes": hand,
            "notified": notify,
        }));
    }
    let emitted = match (&state.act, events.is_empty()) {
        (Some(act), false) => within(&state, act.emit(&events)).await.map_err(|e| ApiError::from_store(&e))?,
        _ => 0,
    };
    tracing::info!(
        actor = %actor, receiver = %payload.receiver, alerts = payload.alerts.len(), answered = answered.len(), emitted,
        "Alertmanager alerts received"
    );
    Ok((
        StatusCode::OK,
        Json(json!({"receiver": payload.receiver, "status": payload.status, "alerts": answered, "skipped": skipped,
            "emitted": emitted})),
    )
        .into_response())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> std::collections::BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn the_scope_of_an_alert_comes_from_its_labels() {
        assert_eq!(Scope::of(&labels(&[("alertname", "X")])), None);
        let s = Scope::of(&labels(&[("namespace", "shop"), ("deployment", "web"), ("cluster", "homelab")])).unwrap();
        assert_eq!(
            s,
            Scope {
                cluster: Some("homelab".into()),
                namespace: "shop".into(),
                kind: Some("Deployment".into()),
                name: Some("web".into())
            }
        );
        let pod = Scope::of(&labels(&[("namespace", "shop"), ("pod", "web-7d4b9c6f5-x2x8q")])).unwrap();
        let mut d: StoredDrift = serde_json::from_value(json!({
            "id": 1, "fingerprint": "f", "detected_at": "2026-12-06T10:00:00Z", "last_seen": "2026-12-06T10:00:00Z",
            "occurrences": 1, "cluster": "c", "repository": "r", "api_group": "apps", "resource_kind": "Deployment",
            "namespace": "shop", "resource_name": "web", "path": "spec.replicas", "drift_type": "replicas_drift",
            "severity": "LOW", "git_value": 3, "cluster_value": 5, "status": "open", "resolved_at": null,
            "changed_by": "kubectl", "changed_at": "2026-12-06T09:59:00Z", "classification": "manual_change",
            "decision_source": "scanner", "recommended_action": "suggest_revert",
        }))
        .unwrap();
        assert!(pod.is_workload(&d));
        d.resource_name = "web-canary".into();
        assert!(!pod.is_workload(&d));
        let t = |s: &str| DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc);
        assert!(hand_change(&d, t("2026-12-06T09:00:00Z"), t("2026-12-06T10:00:00Z")));
        assert!(!hand_change(&d, t("2026-12-06T09:59:30Z"), t("2026-12-06T10:00:00Z")));
    }
}
