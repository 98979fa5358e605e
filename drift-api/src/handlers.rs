//! The handlers. Each reads its parameters strictly (400 on anything unknown or malformed) and
//! answers JSON.

use std::collections::{BTreeMap, BTreeSet};

use axum::Json;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use drift_model::ScanOutcome;
use drift_model::sink::ScanRecord;
use serde::Serialize;
use serde_json::json;

use crate::auth::Actor;
use crate::error::ApiError;
use crate::query;
use crate::state::{ApiState, TriggerOutcome};

pub(crate) type ApiResult = Result<Response, ApiError>;

/// How many recent scans `/ready` looks at to find the last scan of every repository.
const READY_SCAN_WINDOW: u32 = 100;

/// A store call bounded by the state's store timeout: a store that hangs is a store that is not
/// available (503), not a request that never ends.
pub(crate) async fn within<T>(
    state: &ApiState,
    call: impl std::future::Future<Output = drift_model::Result<T>>,
) -> drift_model::Result<T> {
    crate::metrics::bounded(state.store_timeout, call).await
}

pub(crate) async fn health(RawQuery(raw): RawQuery) -> ApiResult {
    query::pairs(raw.as_deref(), &[])?;
    Ok(Json(json!({"status": "ok"})).into_response())
}

/// The last scan of one (cluster, repository), as `/ready` shows it.
#[derive(Debug, Serialize)]
struct LastScan<'a> {
    cluster: &'a str,
    repository: &'a str,
    scan_id: &'a str,
    outcome: ScanOutcome,
    finished_at: DateTime<Utc>,
    age_seconds: i64,
}

pub(crate) async fn ready(State(state): State<ApiState>, RawQuery(raw): RawQuery) -> ApiResult {
    query::pairs(raw.as_deref(), &[])?;
    // Every replica serves the API; `leader` says whether this one runs the scans.
    let leader = state.metrics.is_leader();
    let not_ready = |error: String, scans: serde_json::Value| {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"status": "not_ready", "error": error, "leader": leader, "scans": scans})),
        )
            .into_response()
    };
    if let Err(e) = within(&state, state.store.ping()).await {
        return Ok(not_ready(ApiError::from_store(&e).message().to_owned(), json!([])));
    }
    let recent = match within(&state, state.store.recent_scans(READY_SCAN_WINDOW)).await {
        Ok(r) => r,
        Err(e) => return Ok(not_ready(ApiError::from_store(&e).message().to_owned(), json!([]))),
    };
    // Newest first: the first record of each (cluster, repository) is its last scan.
    let mut last: BTreeMap<(&str, &str), &ScanRecord> = BTreeMap::new();
    for scan in &recent {
        last.entry((scan.cluster.as_str(), scan.repository.as_str())).or_insert(scan);
    }
    let now = state.clock.now();
    let scans: Vec<LastScan<'_>> = last
        .values()
        .map(|s| LastScan {
            cluster: &s.cluster,
            repository: &s.repository,
            scan_id: &s.scan_id,
            outcome: s.outcome,
            finished_at: s.finished_at,
            age_seconds: (now - s.finished_at).num_seconds().max(0),
        })
        .collect();
    let shown = serde_json::to_value(&scans)
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, format!("encoding the scans: {e}")))?;
    let Some(newest) = scans.iter().min_by_key(|s| s.age_seconds) else {
        return Ok(not_ready("no scan has been recorded yet".to_owned(), shown));
    };
    let limit = state.max_scan_age.as_secs();
    let unseen_pairs = |n: u64| {
        format!(
            "the watch does not see {n} (kind, namespace) pair(s): it lost sync and has not relisted yet; \
             nothing there is resolved until it does"
        )
    };
    // A repository whose last scan is older than the limit is no longer scanned (removed from
    // the configuration): its old failure does not count.
    let current: Vec<&LastScan<'_>> = scans.iter().filter(|s| s.age_seconds as u64 <= limit).collect();
    // A detector of several clusters (the runtime names them) judges them one by one: a cluster
    // whose last scan failed, or whose watch does not see everything, is degraded, and the
    // service is ready while one of them is not. A detector of one cluster (or one that names
    // none) is not ready while any scan of the store failed, as before.
    let own = state.cluster_gaps.as_ref().map(|g| g.clusters()).unwrap_or_default();
    let fleet: BTreeSet<&str> = if own.len() > 1 { own.iter().map(String::as_str).collect() } else { BTreeSet::new() };
    let gaps = state.cluster_gaps.as_ref().map(|g| g.out_of_sync()).unwrap_or_default();
    let mut degraded: BTreeMap<&str, String> = BTreeMap::new();
    for s in current.iter().filter(|s| s.outcome == ScanOutcome::Failed && fleet.contains(s.cluster)) {
        degraded.entry(s.cluster).or_insert_with(|| {
            format!("the last scan of repository {:?} in cluster {:?} failed", s.repository, s.cluster)
        });
    }
    for (cluster, n) in gaps.iter().filter(|(c, _)| fleet.contains(c.as_str())) {
        degraded.entry(cluster.as_str()).or_insert_with(|| format!("cluster {cluster:?}: {}", unseen_pairs(*n as u64)));
    }
    let some_ready = fleet.len() > 1 && degraded.len() < fleet.len();
    if let Some(failed) = current.iter().find(|s| s.outcome == ScanOutcome::Failed).filter(|_| !some_ready) {
        return Ok(not_ready(
            format!("the last scan of repository {:?} in cluster {:?} failed", failed.repository, failed.cluster),
            shown,
        ));
    }
    if newest.age_seconds as u64 > limit {
        return Ok(not_ready(
            format!("the newest scan finished {}s ago, more than the limit of {limit}s", newest.age_seconds),
            shown,
        ));
    }
    // An outage only the watch sees (the API server gone between two passes) shows here too.
    let unseen = state.metrics.watch_out_of_sync();
    // Without the clusters' own gaps, a gap anywhere counts.
    if unseen > 0 && (!some_ready || state.cluster_gaps.is_none()) {
        return Ok(not_ready(unseen_pairs(unseen), shown));
    }
    let mut answer = json!({"status": "ready", "store": "ok", "leader": leader, "scans": shown});
    if !degraded.is_empty() {
        answer["degraded"] =
            degraded.iter().map(|(cluster, reason)| json!({"cluster": cluster, "reason": reason})).collect();
    }
    Ok(Json(answer).into_response())
}

pub(crate) async fn scan(State(state): State<ApiState>, Actor(actor): Actor, RawQuery(raw): RawQuery) -> ApiResult {
    // Parameters are looked at only once the caller is authenticated.
    let pairs = query::pairs(raw.as_deref(), &["wait"])?;
    let wait = query::flag(&pairs, "wait")?;
    let outcome = state.trigger.trigger(wait).await.map_err(|e| {
        tracing::warn!(error = %e, "the scan could not be started");
        let status = match e.kind() {
            drift_model::ErrorKind::Conflict => StatusCode::CONFLICT,
            drift_model::ErrorKind::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        ApiError::new(status, format!("the scan could not be started ({})", e.kind()))
    })?;
    Ok(match outcome {
        TriggerOutcome::Started { scan_id } => {
            tracing::info!(scan_id = %scan_id, actor = %actor, "scan started through the API");
            (StatusCode::ACCEPTED, Json(json!({"status": "started", "scan_id": scan_id}))).into_response()
        }
        TriggerOutcome::AlreadyRunning { scan_id } => (
            StatusCode::CONFLICT,
            Json(json!({"error": "a scan is already running; try again when it has finished", "scan_id": scan_id})),
        )
            .into_response(),
        TriggerOutcome::Finished { scan_id, reports } => {
            tracing::info!(scan_id = %scan_id, reports = reports.len(), "scan finished through the API");
            (StatusCode::OK, Json(json!({"status": "finished", "scan_id": scan_id, "reports": reports})))
                .into_response()
        }
    })
}

pub(crate) async fn drifts(State(state): State<ApiState>, RawQuery(raw): RawQuery) -> ApiResult {
    let allowed: Vec<&str> = query::FILTER_PARAMS.iter().chain(query::PAGE_PARAMS.iter()).copied().collect();
    let pairs = query::pairs(raw.as_deref(), &allowed)?;
    let filter = query::filter(&pairs)?;
    let page = query::page(&pairs)?;
    let page = within(&state, state.store.list(&filter, page)).await.map_err(|e| ApiError::from_store(&e))?;
    Ok(Json(page).into_response())
}

pub(crate) async fn findings(State(state): State<ApiState>, RawQuery(raw): RawQuery) -> ApiResult {
    let allowed: Vec<&str> = query::FINDING_PARAMS.iter().chain(query::PAGE_PARAMS.iter()).copied().collect();
    let pairs = query::pairs(raw.as_deref(), &allowed)?;
    let filter = query::finding_filter(&pairs)?;
    let page = query::page(&pairs)?;
    match within(&state, state.store.findings(&filter, page)).await {
        Ok(page) => Ok(Json(page).into_response()),
        Err(e) if e.kind() == drift_model::ErrorKind::Unsupported => {
            Err(ApiError::new(StatusCode::NOT_IMPLEMENTED, "this store keeps no policy findings"))
        }
        Err(e) => Err(ApiError::from_store(&e)),
    }
}

pub(crate) async fn drift(
    State(state): State<ApiState>,
    id: Result<Path<String>, PathRejection>,
    RawQuery(raw): RawQuery,
) -> ApiResult {
    query::pairs(raw.as_deref(), &[])?;
    let id = path_id(id)?;
    match within(
        &state,
        crate::detail::drift_detail(state.store.as_ref(), state.act.as_deref(), state.predictor.as_deref(), id),
    )
    .await
    {
        Ok(d) => Ok(Json(d).into_response()),
        Err(e) if e.kind() == drift_model::ErrorKind::NotFound => {
            Err(ApiError::not_found(format!("no drift with id {id}")))
        }
        Err(e) => Err(ApiError::from_store(&e)),
    }
}

/// The drift id of a `/drifts/{id}` path: a positive integer, else 400.
pub(crate) fn path_id(id: Result<Path<String>, PathRejection>) -> Result<i64, ApiError> {
    let Path(id) = id.map_err(|_| ApiError::bad_request("the drift id is not valid UTF-8"))?;
    query::positive_id("drift id", &id)
}

/// Most scans `GET /scans` answers with.
pub(crate) const MAX_SCANS: u32 = 100;
/// Scans `GET /scans` answers with when no `limit` is given.
pub(crate) const DEFAULT_SCANS: u32 = 20;

pub(crate) async fn scans(State(state): State<ApiState>, RawQuery(raw): RawQuery) -> ApiResult {
    let pairs = query::pairs(raw.as_deref(), &["limit"])?;
    let mut limit = DEFAULT_SCANS;
    if let Some((_, value)) = pairs.iter().find(|(name, _)| name == "limit") {
        limit =
            value.parse::<u32>().ok().filter(|l| (1..=MAX_SCANS).contains(l)).ok_or_else(|| {
                ApiError::bad_request(format!("limit {value:?} is not a number from 1 to {MAX_SCANS}"))
            })?;
    }
    let items = within(&state, state.store.recent_scans(limit)).await.map_err(|e| ApiError::from_store(&e))?;
    Ok(Json(json!({"items": items})).into_response())
}

pub(crate) async fn stats(State(state): State<ApiState>, RawQuery(raw): RawQuery) -> ApiResult {
    let pairs = query::pairs(raw.as_deref(), &query::FILTER_PARAMS)?;
    let filter = query::filter(&pairs)?;
    let stats =
        within(&state, state.store.stats(&filter, state.clock.now())).await.map_err(|e| ApiError::from_store(&e))?;
    Ok(Json(stats).into_response())
}

pub(crate) async fn metrics(State(state): State<ApiState>, RawQuery(raw): RawQuery) -> ApiResult {
    query::pairs(raw.as_deref(), &[])?;
    let text = state
        .metrics
        .render_with(state.store.as_ref(), state.act.as_deref(), state.clock.now(), state.store_timeout)
        .await;
    Ok(([(header::CONTENT_TYPE, HeaderValue::from_static(crate::metrics::CONTENT_TYPE))], text).into_response())
}

pub(crate) async fn openapi(RawQuery(raw): RawQuery) -> ApiResult {
    query::pairs(raw.as_deref(), &[])?;
    Ok(Json(crate::openapi::document()).into_response())
}

pub(crate) async fn not_found() -> ApiError {
    ApiError::not_found("no such endpoint; see GET /openapi.json")
}

pub(crate) async fn method_not_allowed() -> ApiError {
    ApiError::new(StatusCode::METHOD_NOT_ALLOWED, "method not allowed on this endpoint; see GET /openapi.json")
}
