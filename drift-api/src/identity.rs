//! `POST /audit/webhook`: the Kubernetes audit webhook backend's endpoint. kube-apiserver (and
//! K3s) with `--audit-webhook-config-file` posts batches of audit events as an `audit.k8s.io/v1`
//! `EventList`; their items go to the audit log join ([`crate::ApiState::with_audit`],
//! `drift_runtime::identity`), which names the person behind each drift's change.

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde_json::{Value, json};

use crate::auth::Actor;
use crate::error::ApiError;
use crate::handlers::ApiResult;
use crate::query;
use crate::state::ApiState;

/// The message of a 501: no audit log join is configured.
pub const NO_AUDIT: &str = "no `audit:` is configured: this service does not read the Kubernetes audit log";

pub(crate) async fn audit_webhook(
    State(state): State<ApiState>,
    Actor(actor): Actor,
    RawQuery(raw): RawQuery,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    query::pairs(raw.as_deref(), &[])?;
    let intake = state.audit.as_deref().ok_or_else(|| ApiError::new(StatusCode::NOT_IMPLEMENTED, NO_AUDIT))?;
    let body = body.map_err(|e| ApiError::new(e.status(), e.body_text()))?;
    let list: Value = serde_json::from_slice(&body)
        .map_err(|e| ApiError::bad_request(format!("the body must be an audit.k8s.io/v1 EventList: {e}")))?;
    let kind = list.get("kind").and_then(Value::as_str).unwrap_or("");
    let api_version = list.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    if kind != "EventList" || !api_version.starts_with("audit.k8s.io/") {
        return Err(ApiError::bad_request(format!(
            "the body must be an audit.k8s.io/v1 EventList, not kind {kind:?} apiVersion {api_version:?}"
        )));
    }
    let items = match list.get("items") {
        Some(Value::Array(items)) => items.as_slice(),
        Some(Value::Null) => &[],
        None => return Err(ApiError::bad_request("an EventList has `items`")),
        Some(_) => return Err(ApiError::bad_request("`items` must be an array of audit events")),
    };
    let kept = intake.receive(items).map_err(|e| ApiError::bad_request(e.message()))?;
    tracing::debug!(actor = %actor, received = items.len(), kept, "audit events received");
    Ok((StatusCode::OK, Json(json!({"received": items.len(), "kept": kept}))).into_response())
}
