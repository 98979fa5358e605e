//! The route table: every endpoint with its handler and its OpenAPI description, side by side,
//! so that [`router`] and [`crate::openapi::document`] cannot disagree.

use axum::Router;
use axum::extract::Request;
use axum::http::Method;
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::{MethodRouter, get, post};
use serde_json::{Value, json};

use crate::handlers;
use crate::query::{DEFAULT_LIMIT, MAX_LIMIT};
use crate::state::ApiState;

/// A parameter of an endpoint.
#[derive(Debug, Clone)]
pub struct Param {
    /// Name.
    pub name: &'static str,
    /// `query` or `path`.
    pub location: &'static str,
    /// Whether it must be given.
    pub required: bool,
    /// What it does.
    pub description: &'static str,
    /// JSON Schema of the value.
    pub schema: Value,
}

/// An answer of an endpoint.
#[derive(Debug, Clone)]
pub struct Answer {
    /// HTTP status.
    pub status: u16,
    /// When it is given.
    pub description: &'static str,
    /// Content type.
    pub content_type: &'static str,
    /// JSON Schema (usually a `$ref` to a component).
    pub schema: Value,
}

/// One endpoint: method, path, documentation and handler.
pub struct Endpoint {
    /// HTTP method.
    pub method: Method,
    /// Path in axum and OpenAPI syntax (`/drifts/{id}`).
    pub path: &'static str,
    /// OpenAPI operationId.
    pub operation_id: &'static str,
    /// One line.
    pub summary: &'static str,
    /// More.
    pub description: &'static str,
    /// Whether the bearer token is required.
    pub authenticated: bool,
    /// Parameters.
    pub params: Vec<Param>,
    /// Answers.
    pub answers: Vec<Answer>,
    handler: MethodRouter<ApiState>,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint").field("method", &self.method).field("path", &self.path).finish_non_exhaustive()
    }
}

fn schema_ref(name: &str) -> Value {
    json!({"$ref": format!("#/components/schemas/{name}")})
}

const JSON: &str = "application/json";

fn answer(status: u16, description: &'static str, schema: &str) -> Answer {
    Answer { status, description, content_type: JSON, schema: schema_ref(schema) }
}

fn error(status: u16, description: &'static str) -> Answer {
    answer(status, description, "Error")
}

fn query(name: &'static str, description: &'static str, schema: Value) -> Param {
    Param { name, location: "query", required: false, description, schema }
}

/// The filter parameters of `GET /drifts` and `GET /stats`.
fn filter_params() -> Vec<Param> {
    vec![
        query("status", "open, waived or resolved", json!({"type": "string", "enum": ["open", "waived", "resolved"]})),
        query(
            "severity",
            "severity (case-insensitive)",
            json!({"type": "string", "enum": drift_core::Severity::ALL.map(drift_core::Severity::as_str)}),
        ),
        query(
            "drift_type",
            "drift type",
            json!({"type": "string", "enum": drift_core::DriftType::ALL.map(drift_core::DriftType::as_str)}),
        ),
        query("namespace", "namespace; empty for cluster-scoped objects", json!({"type": "string"})),
        query("repository", "repository name", json!({"type": "string", "minLength": 1})),
        query("cluster", "cluster name", json!({"type": "string", "minLength": 1})),
        query("kind", "resource kind, such as Deployment", json!({"type": "string", "minLength": 1})),
        query(
            "since",
            "only drifts seen at or after this RFC 3339 time (last_seen >= since); write + as %2B",
            json!({"type": "string", "format": "date-time"}),
        ),
    ]
}

/// Every endpoint of the API.
pub fn endpoints() -> Vec<Endpoint> {
    let bad_request = || error(400, "a parameter is unknown, repeated or malformed");
    let store_down = || error(503, "the store is not available");
    let mut drifts_params = filter_params();
    drifts_params.push(query(
        "limit",
        "page size",
        json!({"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": DEFAULT_LIMIT}),
    ));
    drifts_params.push(query(
        "after",
        "cursor: the `next` of the previous page (rows with a smaller id)",
        json!({"type": "integer", "minimum": 1}),
    ));
    vec![
        Endpoint {
            method: Method::GET,
            path: "/health",
            operation_id: "health",
            summary: "Liveness",
            description: "200 whenever the process serves requests; it does not look at the store.",
            authenticated: false,
            params: vec![],
            answers: vec![answer(200, "the process is alive", "Health")],
            handler: get(handlers::health),
        },
        Endpoint {
            method: Method::GET,
            path: "/ready",
            operation_id: "ready",
            summary: "Readiness",
            description: "200 when the store answers, the newest scan is recent enough, and no repository whose \
                          last scan is recent had that scan fail; else 503 with the reason in `error`.",
            authenticated: false,
            params: vec![],
            answers: vec![answer(200, "ready", "Ready"), answer(503, "not ready; `error` says why", "Ready")],
            handler: get(handlers::ready),
        },
        Endpoint {
            method: Method::POST,
            path: "/scan",
            operation_id: "triggerScan",
            summary: "Start a scan",
            description: "Starts a scan pass now. Needs `Authorization: Bearer <token>`; with no token configured \
                          the endpoint is disabled (403).",
            authenticated: true,
            params: vec![query(
                "wait",
                "wait for the scan to finish and answer with its reports",
                json!({"type": "boolean", "default": false}),
            )],
            answers: vec![
                answer(200, "the scan finished (wait=true)", "ScanFinished"),
                answer(202, "the scan started", "ScanStarted"),
                bad_request(),
                error(401, "no bearer token, or a wrong one"),
                error(403, "no API token is configured: the endpoint is disabled"),
                answer(409, "a scan is already running", "ScanConflict"),
                error(503, "no scan can be started now (shutting down)"),
            ],
            handler: post(handlers::scan),
        },
        Endpoint {
            method: Method::GET,
            path: "/drifts",
            operation_id: "listDrifts",
            summary: "List drifts",
            description: "Drifts newest first (descending id), filtered, one page at a time.",
            authenticated: false,
            params: drifts_params,
            answers: vec![answer(200, "a page of drifts", "DriftPage"), bad_request(), store_down()],
            handler: get(handlers::drifts),
        },
        Endpoint {
            method: Method::GET,
            path: "/drifts/{id}",
            operation_id: "getDrift",
            summary: "One drift",
            description: "The drift with this id, open or resolved.",
            authenticated: false,
            params: vec![Param {
                name: "id",
                location: "path",
                required: true,
                description: "drift id",
                schema: json!({"type": "integer", "minimum": 1}),
            }],
            answers: vec![
                answer(200, "the drift", "StoredDrift"),
                error(400, "the id is not a positive integer"),
                error(404, "no drift with this id"),
                store_down(),
            ],
            handler: get(handlers::drift),
        },
        Endpoint {
            method: Method::GET,
            path: "/stats",
            operation_id: "stats",
            summary: "Statistics",
            description: "Counts by status; open drifts by severity, type, namespace and repository; a 7-day \
                          trend ending today (UTC); mean and 95th percentile time to resolve.",
            authenticated: false,
            params: filter_params(),
            answers: vec![answer(200, "the statistics", "DriftStats"), bad_request(), store_down()],
            handler: get(handlers::stats),
        },
        Endpoint {
            method: Method::GET,
            path: "/metrics",
            operation_id: "metrics",
            summary: "Prometheus metrics",
            description: "OpenMetrics text. Open-drift gauges are read from the store at scrape time.",
            authenticated: false,
            params: vec![],
            answers: vec![Answer {
                status: 200,
                description: "the metrics",
                content_type: "application/openmetrics-text",
                schema: json!({"type": "string"}),
            }],
            handler: get(handlers::metrics),
        },
        Endpoint {
            method: Method::GET,
            path: "/openapi.json",
            operation_id: "openapi",
            summary: "This document",
            description: "The OpenAPI 3.1 document of the API, generated from the route table.",
            authenticated: false,
            params: vec![],
            answers: vec![Answer {
                status: 200,
                description: "the OpenAPI document",
                content_type: JSON,
                schema: json!({"type": "object"}),
            }],
            handler: get(handlers::openapi),
        },
    ]
}

/// The API as a router, ready for `axum::serve`. Unknown paths answer 404 and unknown methods
/// 405, both as JSON. Every request is logged through `tracing` (method, path, status, time;
/// never headers nor the query string): at `debug`, or `warn` for a 5xx.
pub fn router(state: ApiState) -> Router {
    let mut router = Router::new();
    for endpoint in endpoints() {
        router = router.route(endpoint.path, endpoint.handler.fallback(handlers::method_not_allowed));
    }
    router.fallback(handlers::not_found).layer(middleware::from_fn(log_request)).with_state(state)
}

async fn log_request(request: Request, next: Next) -> Response {
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let started = std::time::Instant::now();
    let response = next.run(request).await;
    let status = response.status().as_u16();
    let elapsed_ms = started.elapsed().as_secs_f64() * 1000.0;
    if response.status().is_server_error() {
        tracing::warn!(%method, path, status, elapsed_ms, "request failed");
    } else {
        tracing::debug!(%method, path, status, elapsed_ms, "request");
    }
    response
}
