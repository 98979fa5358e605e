//! The handlers of acting on drift: decisions, the audit trail, deliveries and requeues. They
//! need the store's acting side ([`crate::ApiState::with_act`]); without it they answer 501.

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use chrono::{DateTime, Utc};
use drift_model::ErrorKind;
use drift_model::act::{ActStore, DecisionAction, DeliveryRecord, NewDecision};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::auth::Actor;
use crate::error::ApiError;
use crate::handlers::{ApiResult, path_id, within};
use crate::query;
use crate::state::ApiState;

/// The message of a 501: the store keeps no decisions, audit trail or deliveries.
pub const NO_ACT_STORE: &str = "this store keeps no decisions; use sqlite or postgres";

fn act(state: &ApiState) -> Result<&dyn ActStore, ApiError> {
    state.act.as_deref().ok_or_else(|| ApiError::new(StatusCode::NOT_IMPLEMENTED, NO_ACT_STORE))
}

/// The body of `POST /drifts/{id}/decisions`. Unknown fields are refused; the actor is the
/// token's name, never taken from the body.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DecisionRequest {
    /// acknowledge, accept or reject.
    pub action: DecisionAction,
    /// Why (required for `accept`).
    #[serde(default)]
    pub comment: Option<String>,
    /// When a waiver ends (7 days without one, 366 at most); recorded with the other
    /// decisions.
    #[serde(default)]
    pub expires_at: Option<DateTime<Utc>>,
}

pub(crate) async fn decide(
    State(state): State<ApiState>,
    Actor(actor): Actor,
    id: Result<Path<String>, PathRejection>,
    RawQuery(raw): RawQuery,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    query::pairs(raw.as_deref(), &[])?;
    let id = path_id(id)?;
    let act = act(&state)?;
    // A body over axum's limit (2 MiB) or one that cannot be read: its status, as JSON.
    let body = body.map_err(|e| ApiError::new(e.status(), e.body_text()))?;
    let request: DecisionRequest = serde_json::from_slice(&body).map_err(|e| {
        ApiError::bad_request(format!(
            "the body must be a JSON object {{\"action\": \"acknowledge\" | \"accept\" | \"reject\", \"comment\": \
             \"...\", \"expires_at\": \"RFC 3339\"}}: {e}"
        ))
    })?;
    let now = state.clock.now();
    let decision =
        NewDecision { action: request.action, comment: request.comment, expires_at: request.expires_at, actor }
            .validate(now)
            .map_err(|e| ApiError::bad_request(e.message()))?;
    match within(&state, act.decide(id, &decision, now)).await {
        Ok(d) => {
            tracing::info!(drift_id = id, actor = %d.actor, action = d.action.as_str(), "decision recorded");
            // The next prediction of this process learns from it.
            if let Some(p) = &state.predictor {
                p.retrain();
            }
            Ok((StatusCode::CREATED, Json(d)).into_response())
        }
        Err(e) if e.kind() == ErrorKind::NotFound => Err(ApiError::not_found(format!("no drift with id {id}"))),
        // The store refuses a decision on a resolved drift: the request was right, the drift's
        // state is not.
        Err(e) if e.kind() == ErrorKind::InvalidInput => Err(ApiError::new(StatusCode::CONFLICT, e.message())),
        Err(e) => Err(ApiError::from_store(&e)),
    }
}

pub(crate) async fn audit(State(state): State<ApiState>, RawQuery(raw): RawQuery) -> ApiResult {
    let allowed: Vec<&str> = query::AUDIT_PARAMS.iter().chain(query::PAGE_PARAMS.iter()).copied().collect();
    let pairs = query::pairs(raw.as_deref(), &allowed)?;
    let filter = query::audit_filter(&pairs)?;
    let page = query::page(&pairs)?;
    let act = act(&state)?;
    let page = within(&state, act.audit(&filter, page)).await.map_err(|e| ApiError::from_store(&e))?;
    Ok(Json(page).into_response())
}

/// A page of deliveries, newest event first.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeliveryPage {
    /// The deliveries; every delivery of an event is on the same page.
    pub items: Vec<DeliveryRecord>,
    /// Cursor of the next page (`after`), null on the last page. The page after a full one may
    /// be empty.
    pub next: Option<i64>,
}

pub(crate) async fn notifications(State(state): State<ApiState>, RawQuery(raw): RawQuery) -> ApiResult {
    let allowed: Vec<&str> = query::NOTIFICATION_PARAMS.iter().chain(query::PAGE_PARAMS.iter()).copied().collect();
    let pairs = query::pairs(raw.as_deref(), &allowed)?;
    let (status, drift_id) = query::delivery_filter(&pairs)?;
    let page = query::page(&pairs)?;
    let act = act(&state)?;
    let items = within(&state, act.deliveries(drift_id, status, page)).await.map_err(|e| ApiError::from_store(&e))?;
    // The store reads `limit` delivery rows and returns every delivery of their events: fewer
    // than `limit` means there is nothing after them.
    let next = if items.len() >= page.limit as usize { items.iter().map(|d| d.seq).min() } else { None };
    Ok(Json(DeliveryPage { items, next }).into_response())
}

pub(crate) async fn requeue(
    State(state): State<ApiState>,
    Actor(actor): Actor,
    event_id: Result<Path<String>, PathRejection>,
    RawQuery(raw): RawQuery,
) -> ApiResult {
    let pairs = query::pairs(raw.as_deref(), &["notifier"])?;
    let notifier = query::required(&pairs, "notifier")?;
    let Path(event_id) = event_id.map_err(|_| ApiError::bad_request("the event id is not valid UTF-8"))?;
    let act = act(&state)?;
    let done = within(&state, act.requeue(&event_id, &notifier, &actor, state.clock.now()))
        .await
        .map_err(|e| ApiError::from_store(&e))?;
    if !done {
        return Err(ApiError::not_found(format!("no parked delivery of event {event_id:?} to notifier {notifier:?}")));
    }
    tracing::info!(event_id = %event_id, notifier = %notifier, actor = %actor, "delivery requeued");
    Ok(Json(json!({"status": "pending", "event_id": event_id, "notifier": notifier})).into_response())
}
