//! The handlers of remediation: `POST /drifts/{id}/revert` and `POST /drifts/{id}/accept`,
//! through the [`Remediate`] the service gives ([`crate::ApiState::with_remedies`]); without
//! one they answer 501. A refusal by a safety rule is a 409 whose body names the rule
//! (`{"error": "...", "refusal": "waived"}`), with what it is about when the rule says more
//! (`stale`: `planned` and `found`; `concurrent_change`: `changed`); docs/remediation.md lists
//! them. An action runs to its end whether or not the client waits for the answer.

use std::sync::Arc;

use async_trait::async_trait;
use axum::Json;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use drift_model::ErrorKind;
use drift_model::remedy::{AcceptOutcome, Fault, Refusal, RevertOutcome};
use serde_json::json;

use crate::auth::Actor;
use crate::error::ApiError;
use crate::handlers::{ApiResult, path_id};
use crate::query;
use crate::state::ApiState;

/// The message of a 501: this service does not remediate.
pub const NO_REMEDIES: &str = "this service does not remediate: it needs a cluster to write to (live.kubeconfig or in-cluster) and a store with an audit trail";

/// What the API asks the service to do; `drift_runtime::Remedies` is the implementation.
#[async_trait]
pub trait Remediate: Send + Sync + std::fmt::Debug {
    /// Reverts one drift (the cluster back to Git), a dry run only with `dry_run`.
    async fn revert(&self, id: i64, actor: &str, dry_run: bool) -> Result<RevertOutcome, Fault>;
    /// Proposes the cluster's values of drifts of one object as a change of Git.
    async fn accept(&self, ids: &[i64], actor: &str) -> Result<AcceptOutcome, Fault>;
}

fn answer_fault(fault: Fault) -> Response {
    match fault {
        Fault::Refused(r) => {
            let status =
                if r.refusal == Refusal::NotConfigured { StatusCode::NOT_IMPLEMENTED } else { StatusCode::CONFLICT };
            let mut body = json!({"error": r.message, "refusal": r.refusal});
            // What the refusal is about (`stale`: the planned and found values), next to them.
            if let (Some(serde_json::Value::Object(extra)), Some(out)) = (r.detail, body.as_object_mut()) {
                out.extend(extra);
            }
            (status, Json(body)).into_response()
        }
        Fault::Failed(e) => {
            let status = match e.kind() {
                ErrorKind::NotFound => StatusCode::NOT_FOUND,
                ErrorKind::InvalidInput => StatusCode::BAD_REQUEST,
                ErrorKind::Conflict => StatusCode::CONFLICT,
                ErrorKind::ConfigInvalid | ErrorKind::Unsupported => StatusCode::NOT_IMPLEMENTED,
                // The cluster or the git server answered wrongly or not at all.
                _ => StatusCode::BAD_GATEWAY,
            };
            tracing::warn!(error = %e, status = status.as_u16(), "remediation failed");
            (status, Json(json!({"error": e.message()}))).into_response()
        }
    }
}

fn remedies(state: &ApiState) -> Result<Arc<dyn Remediate>, ApiError> {
    state.remedies.clone().ok_or_else(|| ApiError::new(StatusCode::NOT_IMPLEMENTED, NO_REMEDIES))
}

/// Runs an action in a task of its own: a client that goes away (a timeout, a closed
/// connection) drops the handler, not the action, which finishes and records its outcome; a
/// retry then finds it done.
async fn detached<T: Send + 'static>(
    action: impl std::future::Future<Output = Result<T, Fault>> + Send + 'static,
) -> Result<T, Fault> {
    tokio::spawn(action).await.unwrap_or_else(|e| {
        Err(Fault::Failed(drift_model::Error::unexpected(format!("the action's task ended abnormally: {e}"))))
    })
}

pub(crate) async fn revert(
    State(state): State<ApiState>,
    Actor(actor): Actor,
    id: Result<Path<String>, PathRejection>,
    RawQuery(raw): RawQuery,
) -> ApiResult {
    let pairs = query::pairs(raw.as_deref(), &["dry_run"])?;
    let dry_run = query::flag(&pairs, "dry_run")?;
    let id = path_id(id)?;
    let remedies = remedies(&state)?;
    Ok(match detached(async move { remedies.revert(id, &actor, dry_run).await }).await {
        Ok(outcome) => Json(outcome).into_response(),
        Err(fault) => answer_fault(fault),
    })
}

pub(crate) async fn accept(
    State(state): State<ApiState>,
    Actor(actor): Actor,
    id: Result<Path<String>, PathRejection>,
    RawQuery(raw): RawQuery,
) -> ApiResult {
    query::pairs(raw.as_deref(), &[])?;
    let id = path_id(id)?;
    let remedies = remedies(&state)?;
    Ok(match detached(async move { remedies.accept(&[id], &actor).await }).await {
        Ok(outcome) => Json(outcome).into_response(),
        Err(fault) => answer_fault(fault),
    })
}
